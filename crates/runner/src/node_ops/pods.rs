//! The built-ins that read pods: the pods on the node, one pod, and the containers of
//! the node's pods. They read through the API server with the agent's credentials
//! (`get` and `list` on pods), since a wasm guest has no way to read the cluster.

use crate::{RunError, RunOutput};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// KubeDiag's result key of the pod list.
pub(crate) const POD_LIST: &str = "collector.kubernetes.pod.list";
/// KubeDiag's result key of one pod.
pub(crate) const POD_DETAIL: &str = "collector.kubernetes.pod.detail";
/// KubeDiag's result key of the container list.
pub(crate) const CONTAINER_LIST: &str = "collector.kubernetes.container.list";

/// The pods whose `spec.nodeName` is `node`, in every namespace.
async fn pods_on(client: &Client, node: &str) -> Result<Vec<Pod>, RunError> {
    let api: Api<Pod> = Api::all(client.clone());
    let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let mut pods = api
        .list(&params)
        .await
        .map_err(|e| RunError::caused_by(format!("cannot list the pods of node {node}: {e}"), e))?
        .items;
    pods.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    Ok(pods)
}

/// A pod as a result: its managed fields, bookkeeping nobody diagnoses with, left out.
fn without_managed_fields(mut pod: Pod) -> Pod {
    pod.metadata.managed_fields = None;
    pod
}

fn encode(value: &impl serde::Serialize) -> Result<String, RunError> {
    serde_json::to_string(value).map_err(|e| RunError::caused_by(format!("cannot encode: {e}"), e))
}

/// `/processor/podListCollector`: the pods on the node, as a JSON array.
pub(crate) async fn pod_list(client: &Client, node: &str) -> Result<RunOutput, RunError> {
    let pods: Vec<Pod> = pods_on(client, node)
        .await?
        .into_iter()
        .map(without_managed_fields)
        .collect();
    let output = format!("{} pods on node {node}", pods.len());
    Ok(RunOutput {
        results: BTreeMap::from([(POD_LIST.to_owned(), encode(&pods)?)]),
        output,
    })
}

/// `/processor/podDetailCollector`: the pod named by the input's `pod.namespace` and
/// `pod.name`, as JSON.
pub(crate) async fn pod_detail(
    client: &Client,
    input: &BTreeMap<String, String>,
) -> Result<RunOutput, RunError> {
    let field = |key: &str| {
        input
            .get(key)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                RunError::new(format!(
                    "missing input {key:?}: podDetailCollector needs pod.namespace and pod.name (a Diagnosis' spec.podReference sets both)"
                ))
            })
    };
    let (namespace, name) = (field("pod.namespace")?, field("pod.name")?);
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = api
        .get_opt(name)
        .await
        .map_err(|e| RunError::caused_by(format!("cannot read pod {namespace}/{name}: {e}"), e))?
        .ok_or_else(|| RunError::new(format!("pod {namespace}/{name} does not exist")))?;
    Ok(RunOutput {
        results: BTreeMap::from([(POD_DETAIL.to_owned(), encode(&without_managed_fields(pod))?)]),
        output: format!("pod {namespace}/{name}"),
    })
}

/// `/processor/containerCollector`: every container of the node's pods (init and
/// ephemeral ones too) with what its status says. KubeDiag asked Docker; the pod status
/// reports the same for any container runtime.
pub(crate) async fn container_list(client: &Client, node: &str) -> Result<RunOutput, RunError> {
    let pods = pods_on(client, node).await?;
    let mut containers = Vec::new();
    for pod in &pods {
        let Some(status) = &pod.status else { continue };
        let groups = [
            ("init", &status.init_container_statuses),
            ("regular", &status.container_statuses),
            ("ephemeral", &status.ephemeral_container_statuses),
        ];
        for (kind, statuses) in groups {
            for container in statuses.iter().flatten() {
                let state = serde_json::to_value(&container.state).unwrap_or(Value::Null);
                containers.push(json!({
                    "namespace": pod.metadata.namespace,
                    "pod": pod.metadata.name,
                    "name": container.name,
                    "type": kind,
                    "containerID": container.container_id,
                    "image": container.image,
                    "imageID": container.image_id,
                    "ready": container.ready,
                    "started": container.started,
                    "restartCount": container.restart_count,
                    "state": state,
                }));
            }
        }
    }
    let output = format!(
        "{} containers in {} pods on node {node}",
        containers.len(),
        pods.len()
    );
    Ok(RunOutput {
        results: BTreeMap::from([(CONTAINER_LIST.to_owned(), encode(&containers)?)]),
        output,
    })
}
