//! The built-ins that change the node: cordon and uncordon (`spec.unschedulable`).
//!
//! KubeDiag's agent cordoned its node for anyone who could reach its port. Here the
//! agent patches the node only for a Diagnosis that names a ServiceAccount of its own
//! namespace (`spec.serviceAccountName`) which RBAC allows to `patch` that node, asked
//! of the API server with a SubjectAccessReview just before the change: whoever may
//! create Diagnoses in a namespace can use its ServiceAccounts' rights, as with Pods,
//! and no more. The Diagnosis is read afresh (not from the run's copy) and must still
//! be the one the run is for (same uid).

use crate::{RunError, RunOutput, RunRequest};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use operon_cluster::kube::FIELD_MANAGER;
use operon_data::api::Diagnosis;
use std::collections::BTreeMap;

/// A change of the node's schedulability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeChange {
    /// `spec.unschedulable: true`.
    Cordon,
    /// `spec.unschedulable: false`.
    Uncordon,
}

impl NodeChange {
    fn processor(self) -> &'static str {
        match self {
            NodeChange::Cordon => "nodeCordon",
            NodeChange::Uncordon => "nodeUncordon",
        }
    }

    /// KubeDiag's result key (and its uncordon twin).
    pub(crate) fn result_key(self) -> &'static str {
        match self {
            NodeChange::Cordon => "recover.kubernetes.node_cordon.result.name",
            NodeChange::Uncordon => "recover.kubernetes.node_uncordon.result.name",
        }
    }

    fn unschedulable(self) -> bool {
        self == NodeChange::Cordon
    }
}

/// Changes `node` for the Diagnosis `request` runs for, if its ServiceAccount may.
pub(crate) async fn change(
    client: &Client,
    node: &str,
    change: NodeChange,
    request: &RunRequest,
) -> Result<RunOutput, RunError> {
    let processor = change.processor();
    let account = authorize(client, node, processor, request).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    // A merge patch of the one field, as `kubectl cordon` changes it; server-side apply
    // would make operon an owner of spec.unschedulable and fight the next kubectl.
    let patch = serde_json::json!({"spec": {"unschedulable": change.unschedulable()}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        dry_run: request.dry_run,
        ..PatchParams::default()
    };
    nodes
        .patch(node, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            RunError::caused_by(format!("{processor}: cannot patch node {node}: {e}"), e)
        })?;
    let verb = match (change, request.dry_run) {
        (NodeChange::Cordon, false) => "cordoned",
        (NodeChange::Uncordon, false) => "uncordoned",
        (NodeChange::Cordon, true) => "would cordon (dry run)",
        (NodeChange::Uncordon, true) => "would uncordon (dry run)",
    };
    Ok(RunOutput {
        results: BTreeMap::from([(change.result_key().to_owned(), node.to_owned())]),
        output: format!("{verb} node {node} for ServiceAccount {account}"),
    })
}

/// The ServiceAccount (`namespace/name`) the run acts for, once the API server said it
/// may patch `node`.
async fn authorize(
    client: &Client,
    node: &str,
    processor: &str,
    request: &RunRequest,
) -> Result<String, RunError> {
    let (namespace, name, uid) = match (&request.namespace, &request.owner) {
        (Some(namespace), Some((kind, name, uid))) if kind == "Diagnosis" => (namespace, name, uid),
        _ => {
            return Err(RunError::new(format!(
                "{processor} changes node {node} and runs only for a Diagnosis"
            )));
        }
    };
    let diagnoses: Api<Diagnosis> = Api::namespaced(client.clone(), namespace);
    let diagnosis = diagnoses
        .get_opt(name)
        .await
        .map_err(|e| {
            RunError::new(format!(
                "{processor}: cannot read Diagnosis {namespace}/{name}: {e}"
            ))
        })?
        .filter(|d| d.metadata.uid.as_deref() == Some(uid.as_str()))
        .ok_or_else(|| {
            RunError::new(format!(
                "{processor}: Diagnosis {namespace}/{name} (uid {uid}) no longer exists"
            ))
        })?;
    let account = diagnosis
        .spec
        .service_account_name
        .as_deref()
        .filter(|a| !a.is_empty())
        .ok_or_else(|| {
            RunError::new(format!(
                "{processor} changes node {node}: Diagnosis {namespace}/{name} must name a ServiceAccount of namespace {namespace} allowed to patch nodes/{node} (spec.serviceAccountName)"
            ))
        })?;
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{namespace}:{account}")),
            groups: Some(vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_owned(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(String::new()),
                resource: Some("nodes".to_owned()),
                verb: Some("patch".to_owned()),
                name: Some(node.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = reviews
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| {
            RunError::new(format!(
                "{processor}: cannot ask whether ServiceAccount {namespace}/{account} may patch nodes/{node}: {e}"
            ))
        })?;
    let status = answer.status.unwrap_or_default();
    if !status.allowed {
        let why = [status.reason, status.evaluation_error]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        return Err(RunError::new(format!(
            "{processor} refused: ServiceAccount {namespace}/{account} (spec.serviceAccountName of Diagnosis {namespace}/{name}) may not patch nodes/{node}{}",
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        )));
    }
    Ok(format!("{namespace}/{account}"))
}
