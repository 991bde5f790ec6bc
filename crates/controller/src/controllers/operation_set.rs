//! The OperationSet controller: keeps every OperationSet's `status.ready`,
//! `status.pathCount` and `Ready` condition true to its graph and to the Operations that
//! exist, re-evaluated when the set changes and when any Operation appears, changes or
//! disappears.
//!
//! The status is what `operon validate` computes ([`graph::validate`], [`graph::status`]):
//! every problem listed in the condition's message with its node and field. It is
//! written through the status subresource with server-side apply (field manager
//! `operon`), and only when it differs from what the set already carries, so an
//! unchanged set costs no write. The Operations' names are read with a metadata-only
//! list at each reconcile, so a deletion is never judged from a stale cache.

use futures::StreamExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use operon_cluster::kube::FIELD_MANAGER;
use operon_data::api::{API_VERSION, Operation, OperationSet, OperationSetStatus};
use operon_pipeline::graph;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// How long to wait before reconciling a set again after an API error.
const RETRY: Duration = Duration::from_secs(5);

/// Why a reconcile failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub(crate) enum OperationSetError {
    /// Listing the Operations failed.
    #[error("listing Operations: {0}")]
    List(#[source] kube::Error),
    /// Writing the status failed.
    #[error("writing the status of OperationSet {name}: {source}")]
    Status {
        /// The set.
        name: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
}

/// What a reconcile needs.
pub(crate) struct Context {
    sets: Api<OperationSet>,
    operations: Api<Operation>,
}

impl Context {
    /// The context for `client`.
    pub(crate) fn new(client: Client) -> Self {
        Self {
            sets: Api::all(client.clone()),
            operations: Api::all(client),
        }
    }
}

/// The status `set` should carry, given the names of the Operations that exist; `None`
/// when it already carries it.
pub(crate) fn desired_status(
    set: &OperationSet,
    operations: &HashSet<String>,
) -> Option<OperationSetStatus> {
    let result = graph::validate(set, |name| operations.contains(name));
    let status = graph::status(set, &result);
    (set.status.as_ref() != Some(&status)).then_some(status)
}

/// Brings one set's status up to date.
pub(crate) async fn reconcile(
    set: Arc<OperationSet>,
    ctx: Arc<Context>,
) -> Result<Action, OperationSetError> {
    let names: HashSet<String> = ctx
        .operations
        .list_metadata(&ListParams::default())
        .await
        .map_err(OperationSetError::List)?
        .items
        .into_iter()
        .filter_map(|op| op.metadata.name)
        .collect();
    if let Some(status) = desired_status(&set, &names) {
        let name = set.name_any();
        let patch = serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": "OperationSet",
            "status": status,
        });
        ctx.sets
            .patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(|source| OperationSetError::Status {
                name: name.clone(),
                source,
            })?;
        tracing::info!(operation_set = %name, ready = status.ready,
            paths = status.path_count.as_deref().unwrap_or("-"), "OperationSet status written");
    }
    Ok(Action::await_change())
}

fn error_policy(set: Arc<OperationSet>, error: &OperationSetError, _: Arc<Context>) -> Action {
    tracing::warn!(operation_set = %set.name_any(), error = %error, "OperationSet not reconciled; retrying");
    Action::requeue(RETRY)
}

/// The sets whose graph names `operation`.
fn naming(sets: &[Arc<OperationSet>], operation: &str) -> Vec<ObjectRef<OperationSet>> {
    sets.iter()
        .filter(|set| {
            set.spec
                .adjacency_list
                .iter()
                .any(|node| node.operation.as_deref() == Some(operation))
        })
        .map(|set| ObjectRef::from_obj(set.as_ref()))
        .collect()
}

/// Runs the controller until `shutdown` completes.
pub(crate) async fn run(
    client: Client,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let ctx = Arc::new(Context::new(client.clone()));
    let controller = Controller::new(ctx.sets.clone(), watcher::Config::default());
    let sets = controller.store();
    controller
        .watches(
            ctx.operations.clone(),
            watcher::Config::default(),
            move |operation: Operation| naming(&sets.state(), &operation.name_any()),
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_cluster::kube::mock;
    use serde_json::json;

    fn set(nodes: serde_json::Value, status: Option<serde_json::Value>) -> OperationSet {
        let mut value = json!({
            "apiVersion": API_VERSION, "kind": "OperationSet",
            "metadata": {"name": "diag", "resourceVersion": "7"},
            "spec": {"adjacencyList": nodes},
        });
        if let Some(status) = status {
            value["status"] = status;
        }
        serde_json::from_value(value).unwrap()
    }

    fn names(list: &[&str]) -> HashSet<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_set_naming_a_missing_operation_is_not_ready_and_says_which() {
        let set = set(
            json!([{"id": 0, "to": [1]}, {"id": 1, "operation": "df"}]),
            None,
        );
        let status = desired_status(&set, &names(&[])).unwrap();
        assert!(!status.ready);
        assert_eq!(status.path_count, None);
        let message = &status.conditions[0].message;
        assert!(
            message.contains("spec.adjacencyList[1].operation"),
            "{message}"
        );
        assert!(message.contains("df"), "{message}");
        let ready = desired_status(&set, &names(&["df"])).unwrap();
        assert!(ready.ready);
        assert_eq!(ready.path_count.as_deref(), Some("1"));
    }

    #[test]
    fn an_up_to_date_status_is_not_written_again() {
        let nodes = json!([{"id": 0, "to": [1]}, {"id": 1, "operation": "df"}]);
        let first = desired_status(&set(nodes.clone(), None), &names(&["df"])).unwrap();
        let current = set(nodes, Some(serde_json::to_value(&first).unwrap()));
        assert_eq!(desired_status(&current, &names(&["df"])), None);
    }

    #[test]
    fn an_operation_wakes_the_sets_that_name_it() {
        let a = Arc::new(set(
            json!([{"id": 0, "to": [1]}, {"id": 1, "operation": "df"}]),
            None,
        ));
        let refs = naming(&[a], "df");
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].name, "diag");
        let b = Arc::new(set(
            json!([{"id": 0, "to": [1]}, {"id": 1, "operation": "x"}]),
            None,
        ));
        assert!(naming(&[b], "df").is_empty());
    }

    #[tokio::test]
    async fn reconcile_lists_operation_names_then_applies_the_status_subresource() {
        let (client, mut api) = mock::pair();
        let ctx = Arc::new(Context::new(client));
        let set = Arc::new(set(
            json!([{"id": 0, "to": [1]}, {"id": 1, "operation": "df"}]),
            None,
        ));
        let reconciling = tokio::spawn(reconcile(set, ctx));

        let list = api.next().await;
        assert_eq!(list.method, "GET");
        assert!(
            list.uri
                .starts_with("/apis/operon.dev/v1alpha1/operations?"),
            "{}",
            list.uri
        );
        list.answer(
            200,
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                   "metadata": {"resourceVersion": "9"},
                   "items": [{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                              "metadata": {"name": "df"}}]}),
        );

        let patch = api.next().await;
        assert_eq!(patch.method, "PATCH");
        assert_eq!(
            patch.uri,
            "/apis/operon.dev/v1alpha1/operationsets/diag/status?&force=true&fieldManager=operon"
        );
        assert_eq!(
            patch.content_type.as_deref(),
            Some("application/apply-patch+yaml")
        );
        let body = patch.json();
        assert_eq!(body["kind"], "OperationSet");
        assert_eq!(body["status"]["ready"], true);
        assert_eq!(body["status"]["pathCount"], "1");
        assert_eq!(body["status"]["conditions"][0]["type"], "Ready");
        let mut stored = body.clone();
        stored["metadata"] = json!({"name": "diag", "resourceVersion": "8"});
        stored["spec"] =
            json!({"adjacencyList": [{"id": 0, "to": [1]}, {"id": 1, "operation": "df"}]});
        patch.answer(200, stored);
        reconciling.await.unwrap().unwrap();
    }
}
