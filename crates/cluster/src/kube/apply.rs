//! The nine patch operations against an API server, with shell-operator's semantics
//! (its `object_patch` package): `Create` fails on an existing object,
//! `CreateIfNotExists` accepts it, `CreateOrUpdate` replaces it with a get + update
//! carrying the read `resourceVersion`, retried on conflict; the three deletes set the
//! propagation policy, a missing object counts as deleted, and a foreground delete waits
//! until the object is gone; `JQPatch` is a get + jq + update with the read
//! `resourceVersion`, retried on conflict and skipped when the filter changes nothing;
//! `MergePatch` and `JSONPatch` are PATCH requests. Every write names the field manager.

use super::{FIELD_MANAGER, KubeCluster, api_error, request_for};
use crate::{
    Cluster as _, ClusterError, Resource, Shared, describe_ref, json_patch_document,
    merge_patch_document, namespaced_name,
};
use ::kube::api::{DeleteParams, GetParams, Patch, PatchParams, PostParams, PropagationPolicy};
use operon_data::model::{CreateSpec, JqPatchSpec, ObjectRef, PatchOperation, PatchSpec};
use serde_json::Value;
use std::time::Duration;

/// client-go's `retry.DefaultBackoff`, which shell-operator's conflict retries use: four
/// attempts, 10 ms growing fivefold between them.
const CONFLICT_ATTEMPTS: u32 = 4;
const CONFLICT_FIRST_DELAY: Duration = Duration::from_millis(10);

/// How often a foreground delete looks whether the object is gone (shell-operator: 1 s).
const DELETE_POLL: Duration = Duration::from_secs(1);

pub(super) async fn apply(
    cluster: &KubeCluster,
    operation: &PatchOperation,
) -> Result<(), ClusterError> {
    match operation {
        PatchOperation::Create(spec) => create(cluster, spec, IfExists::Fail).await,
        PatchOperation::CreateOrUpdate(spec) => create(cluster, spec, IfExists::Update).await,
        PatchOperation::CreateIfNotExists(spec) => create(cluster, spec, IfExists::Skip).await,
        PatchOperation::Delete(target) => {
            delete(cluster, target, PropagationPolicy::Foreground).await
        }
        PatchOperation::DeleteInBackground(target) => {
            delete(cluster, target, PropagationPolicy::Background).await
        }
        PatchOperation::DeleteNonCascading(target) => {
            delete(cluster, target, PropagationPolicy::Orphan).await
        }
        PatchOperation::JqPatch(spec) => jq_patch(cluster, spec).await,
        PatchOperation::MergePatch(spec) => {
            let patch = merge_patch_document(spec)?;
            patch_request(cluster, "MergePatch", spec, &Patch::Merge(patch)).await
        }
        PatchOperation::JsonPatch(spec) => {
            let patch = json_patch_document(spec)?;
            patch_request(cluster, "JSONPatch", spec, &Patch::Json::<()>(patch)).await
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum IfExists {
    Fail,
    Skip,
    Update,
}

fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    }
}

fn build_error(what: &str, error: ::kube::core::request::Error) -> ClusterError {
    ClusterError::BuildRequest {
        context: format!("{what}: building the request"),
        error: Shared::new(error),
    }
}

fn is_conflict(error: &::kube::Error) -> bool {
    matches!(error, ::kube::Error::Api(s) if s.code == 409 && s.reason == "Conflict")
}

fn is_not_found(error: &::kube::Error) -> bool {
    matches!(error, ::kube::Error::Api(s) if s.is_not_found())
}

/// The namespace a request goes to: the object's, `default` for a namespaced object
/// that names none (as kubectl and the local cluster do), none for cluster-scoped ones.
fn namespace_for<'a>(resource: &Resource, namespace: Option<&'a str>) -> Option<&'a str> {
    if resource.namespaced {
        Some(namespace.filter(|n| !n.is_empty()).unwrap_or("default"))
    } else {
        None
    }
}

async fn create(
    cluster: &KubeCluster,
    spec: &CreateSpec,
    if_exists: IfExists,
) -> Result<(), ClusterError> {
    let invalid = |reason: String| ClusterError::Invalid {
        what: "object to create".to_owned(),
        reason,
    };
    let mut object: Value =
        serde_json::from_str(&spec.object).map_err(|e| invalid(format!("not JSON: {e}")))?;
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let (Some(api_version), Some(kind)) = (text("/apiVersion"), text("/kind")) else {
        return Err(invalid("apiVersion and kind are required".to_owned()));
    };
    let Some(name) = text("/metadata/name").map(str::to_owned) else {
        return Err(invalid(format!(
            "{kind} has no metadata.name (generateName is not supported: the operation could not be repeated safely)"
        )));
    };
    let resource = cluster.resolve(Some(api_version), kind).await?;
    let namespace = namespace_for(&resource, text("/metadata/namespace")).map(str::to_owned);
    if let (Some(ns), Some(metadata)) = (&namespace, object.get_mut("metadata")) {
        metadata["namespace"] = Value::String(ns.clone());
    }
    let what = format!(
        "{} of {} {}",
        match if_exists {
            IfExists::Fail => "Create",
            IfExists::Skip => "CreateIfNotExists",
            IfExists::Update => "CreateOrUpdate",
        },
        resource.kind,
        namespaced_name(namespace.as_deref(), &name)
    );
    let request = request_for(&resource, namespace.as_deref());
    let body = serde_json::to_vec(&object).map_err(|e| invalid(e.to_string()))?;
    let req = match spec.subresource.as_deref() {
        Some(sub) => request.create_subresource(sub, &name, &post_params(), body),
        None => request.create(&post_params(), body),
    }
    .map_err(|e| build_error(&what, e))?;
    let error = match cluster.client.request::<Value>(req).await {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    let exists =
        matches!(&error, ::kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists");
    match (exists, if_exists) {
        (true, IfExists::Fail) => Err(ClusterError::AlreadyExists {
            kind: resource.kind.clone(),
            namespace,
            name,
        }),
        (true, IfExists::Skip) => Ok(()),
        (true, IfExists::Update) => {
            let (request, object, name) = (&request, &object, name.as_str());
            retry_on_conflict(&what, || async move {
                let get = match spec.subresource.as_deref() {
                    Some(sub) => request.get_subresource(sub, name),
                    None => request.get(name, &GetParams::default()),
                }
                .map_err(::kube::Error::BuildRequest)?;
                let current: Value = cluster.client.request(get).await?;
                let mut replacement = object.clone();
                if let Some(version) = current.pointer("/metadata/resourceVersion") {
                    replacement["metadata"]["resourceVersion"] = version.clone();
                }
                let body = serde_json::to_vec(&replacement).map_err(::kube::Error::SerdeError)?;
                let put = match spec.subresource.as_deref() {
                    Some(sub) => request.replace_subresource(sub, name, &post_params(), body),
                    None => request.replace(name, &post_params(), body),
                }
                .map_err(::kube::Error::BuildRequest)?;
                cluster.client.request::<Value>(put).await.map(drop)
            })
            .await
        }
        (false, _) => Err(api_error(error, &what)),
    }
}

async fn delete(
    cluster: &KubeCluster,
    target: &ObjectRef,
    propagation: PropagationPolicy,
) -> Result<(), ClusterError> {
    let resource = cluster
        .resolve(target.api_version.as_deref(), &target.kind)
        .await?;
    let namespace = namespace_for(&resource, target.namespace.as_deref());
    let what = format!("delete of {}", describe_ref(target));
    let request = request_for(&resource, namespace);
    let params = DeleteParams {
        propagation_policy: Some(propagation.clone()),
        ..DeleteParams::default()
    };
    let req = request
        .delete(&target.name, &params)
        .map_err(|e| build_error(&what, e))?;
    match cluster.client.request_status::<Value>(req).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => return Err(api_error(e, &what)),
    }
    if !matches!(propagation, PropagationPolicy::Foreground) {
        return Ok(());
    }
    // Foreground deletion returns at once with the object still there (marked for
    // deletion) until the garbage collector removed its dependents: wait for it.
    let started = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(DELETE_POLL).await;
        let get = request
            .get(&target.name, &GetParams::default())
            .map_err(|e| build_error(&what, e))?;
        match cluster.client.request::<Value>(get).await {
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(api_error(e, &what)),
            Ok(_) if started.elapsed() >= cluster.delete_wait => {
                return Err(ClusterError::StillExists {
                    what,
                    waited: cluster.delete_wait,
                });
            }
            Ok(_) => {}
        }
    }
}

async fn jq_patch(cluster: &KubeCluster, spec: &JqPatchSpec) -> Result<(), ClusterError> {
    let what = format!("JQPatch of {}", describe_ref(&spec.target));
    let filter = operon_jq::compile(&spec.jq_filter).map_err(|e| ClusterError::Invalid {
        what: what.clone(),
        reason: e.to_string(),
    })?;
    let resource = cluster
        .resolve(spec.target.api_version.as_deref(), &spec.target.kind)
        .await?;
    let namespace = namespace_for(&resource, spec.target.namespace.as_deref());
    let request = request_for(&resource, namespace);
    let name = spec.target.name.as_str();
    // An attempt ends with what fails the operation without an API error (a missing
    // object, a failing filter), if anything.
    let (request, filter, what_ref, resource) = (&request, &filter, &what, &resource);
    let failure = retry_on_conflict(&what, || async move {
        let get = request
            .get(name, &GetParams::default())
            .map_err(::kube::Error::BuildRequest)?;
        let current: Value = match cluster.client.request(get).await {
            Err(e) if is_not_found(&e) => {
                return Ok(
                    (!spec.ignore_missing_object).then(|| ClusterError::NotFound {
                        kind: resource.kind.clone(),
                        namespace: namespace.map(str::to_owned),
                        name: name.to_owned(),
                    }),
                );
            }
            other => other?,
        };
        let patched = match filter.run_one_in_task(&current) {
            Ok(patched) => patched,
            Err(e) => {
                return Ok(Some(ClusterError::Invalid {
                    what: what_ref.clone(),
                    reason: e.to_string(),
                }));
            }
        };
        if patched == current {
            return Ok(None);
        }
        let body = serde_json::to_vec(&patched).map_err(::kube::Error::SerdeError)?;
        let put = match spec.subresource.as_deref() {
            Some(sub) => request.replace_subresource(sub, name, &post_params(), body),
            None => request.replace(name, &post_params(), body),
        }
        .map_err(::kube::Error::BuildRequest)?;
        cluster.client.request::<Value>(put).await.map(|_| None)
    })
    .await?;
    match failure {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

async fn patch_request<P: serde::Serialize + std::fmt::Debug>(
    cluster: &KubeCluster,
    operation: &str,
    spec: &PatchSpec,
    patch: &Patch<P>,
) -> Result<(), ClusterError> {
    let what = format!("{operation} of {}", describe_ref(&spec.target));
    let resource = cluster
        .resolve(spec.target.api_version.as_deref(), &spec.target.kind)
        .await?;
    let namespace = namespace_for(&resource, spec.target.namespace.as_deref());
    let request = request_for(&resource, namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let req = match spec.subresource.as_deref() {
        Some(sub) => request.patch_subresource(sub, &spec.target.name, &params, patch),
        None => request.patch(&spec.target.name, &params, patch),
    }
    .map_err(|e| build_error(&what, e))?;
    match cluster.client.request::<Value>(req).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) && spec.ignore_missing_object => Ok(()),
        Err(e) if is_not_found(&e) => Err(ClusterError::NotFound {
            kind: resource.kind.clone(),
            namespace: namespace.map(str::to_owned),
            name: spec.target.name.clone(),
        }),
        Err(e) => Err(api_error(e, &what)),
    }
}

/// Runs `attempt` until it does not fail with a conflict, at most
/// [`CONFLICT_ATTEMPTS`] times.
async fn retry_on_conflict<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ::kube::Error>>,
{
    let mut delay = CONFLICT_FIRST_DELAY;
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt().await {
            Ok(done) => return Ok(done),
            Err(e) if is_conflict(&e) && tries < CONFLICT_ATTEMPTS => {
                tracing::debug!(operation = %what, attempt = tries, "conflict; retrying");
                tokio::time::sleep(delay).await;
                delay *= 5;
            }
            Err(e) if is_conflict(&e) => {
                return Err(ClusterError::StillConflicting {
                    what: what.to_owned(),
                    attempts: CONFLICT_ATTEMPTS,
                    error: Shared::new(e),
                });
            }
            Err(e) => return Err(api_error(e, what)),
        }
    }
}
