//! `Diagnosis`: one run of an OperationSet about a node or a pod, and its record.

use super::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A Diagnosis: run `operationSet` with `parameters` about `nodeName` or `podReference`.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operon.dev",
    version = "v1alpha1",
    kind = "Diagnosis",
    plural = "diagnoses",
    shortname = "diag",
    namespaced,
    status = "DiagnosisStatus",
    printcolumn = r#"{"name":"OperationSet","type":"string","jsonPath":".spec.operationSet"}"#,
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".status.nodeName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Current","type":"string","jsonPath":".status.currentNode.operation"}"#,
    printcolumn = r#"{"name":"Outcome","type":"string","jsonPath":".status.conditions[?(@.type==\"Complete\")].message"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosisSpec {
    /// The OperationSet to run.
    pub operation_set: String,
    /// The node the diagnosis is about (and runs on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The pod the diagnosis is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_reference: Option<PodReference>,
    /// Parameters passed to every operation (results of earlier operations override them).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// A ServiceAccount of the Diagnosis' namespace whose RBAC permissions steps that
    /// change the cluster act under: the node agent's built-in `nodeCordon` and
    /// `nodeUncordon` patch the node only when this account may `patch` it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Walk the pipeline without side effects: wasm and script steps run in their
    /// sandboxes (patches recorded, not applied; scripts without network), the other
    /// steps only report what they would do (`status.nodes[].dryRun`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// A pod, optionally one of its containers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodReference {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// One container of the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// Where a Diagnosis is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DiagnosisPhase {
    /// Accepted, not started.
    Pending,
    /// Operations are running.
    Running,
    /// A path succeeded.
    Succeeded,
    /// No path succeeded, or the Diagnosis could not run.
    Failed,
}

/// The outcome of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum NodePhase {
    /// The node's operation returned results.
    Succeeded,
    /// The node's operation failed, or could not run.
    Failed,
}

/// A node on a path, as recorded in the status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PathNode {
    /// The node id.
    pub id: i64,
    /// The node's Operation.
    pub operation: String,
}

/// A path that failed, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedPath {
    /// The node ids of the path, start node excluded, up to and including the node
    /// where it failed.
    pub nodes: Vec<i64>,
    /// The node that failed (or the dead end the path ran into).
    pub failed_node: i64,
    /// Why.
    pub reason: String,
}

/// One executed node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// The node id.
    pub id: i64,
    /// Its Operation.
    pub operation: String,
    /// How it ended.
    pub phase: NodePhase,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// How long it ran, in milliseconds.
    pub duration_millis: u64,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bytes of results and output it returned.
    pub output_size: u64,
    /// The result keys it set, so a resumed run can tell what came from where.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub result_keys: Vec<String>,
    /// On a dry run: what the step did or would do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<DryRunRecord>,
}

/// What one step of a dry run did or would do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRunRecord {
    /// One line: the Job or Workflow it would create, the request it would send, the
    /// patches a sandboxed step submitted.
    pub action: String,
    /// The object or request as JSON text (cut at 16 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Where a Diagnosis stands, written after every node so a restarted engine resumes
/// without re-running finished nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The path being extended when the checkpoint was written (node ids, start excluded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<i64>,
    /// How many nodes have finished.
    pub completed_nodes: u64,
    /// Nodes from which no successful path reaches a sink.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dead_ends: Vec<i64>,
}

/// What happened so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosisStatus {
    /// Where the Diagnosis is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<DiagnosisPhase>,
    /// `Accepted`, `Complete`, and the reasons a Diagnosis could not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The node the Diagnosis runs on: `spec.nodeName`, or the node of the pod of
    /// `spec.podReference`; unset when it runs wherever the controller runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The `metadata.generation` of the OperationSet when the run started: a run is
    /// not resumed over a set that changed since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_set_generation: Option<i64>,
    /// The node running now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_node: Option<PathNode>,
    /// When it started running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Results of every succeeded operation, later ones overriding earlier ones (those
    /// too large for the status are in `resultsConfigMap` instead).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub operation_results: BTreeMap<String, String>,
    /// The ConfigMap (in the Diagnosis' namespace, owned by it) that holds the results
    /// too large for the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results_config_map: Option<String>,
    /// The result keys held in `resultsConfigMap`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results_in_config_map: Vec<String>,
    /// The path that succeeded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub succeeded_path: Vec<PathNode>,
    /// Paths that failed, in the order they were tried (the first ones only; see
    /// `failedPathsOmitted`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_paths: Vec<FailedPath>,
    /// Failed paths not listed in `failedPaths` because of its bound.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_paths_omitted: u64,
    /// Where to resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// One record per executed node, in execution order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeRecord>,
    /// The `oci://` modules of its Operations, by Operation, pinned to their manifest's
    /// digest when the Diagnosis started (`oci://REGISTRY/REPOSITORY@sha256:...`): every
    /// step and every resumption runs these bytes, wherever the tag moved since.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pinned_modules: BTreeMap<String, String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Diagnosis {
    /// `Diagnosis/<namespace>/<name>`, for messages.
    pub fn object_ref(&self) -> String {
        format!(
            "Diagnosis/{}/{}",
            self.metadata.namespace.as_deref().unwrap_or("default"),
            self.metadata.name.as_deref().unwrap_or("<unnamed>")
        )
    }
}
