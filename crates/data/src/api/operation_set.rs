//! `OperationSet`: a DAG of Operations whose source-to-sink paths are tried in order.

use super::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An OperationSet: the diagnosis graph (KubeDiag's `adjacencyList`).
///
/// Node 0 is the start node and has no operation. Every source-to-sink path is a way to
/// diagnose; paths are tried depth-first with `to` in listed order, and the first path
/// whose every operation succeeds wins.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operon.dev",
    version = "v1alpha1",
    kind = "OperationSet",
    plural = "operationsets",
    shortname = "opset",
    status = "OperationSetStatus",
    printcolumn = r#"{"name":"Ready","type":"boolean","jsonPath":".status.ready"}"#,
    printcolumn = r#"{"name":"Paths","type":"string","jsonPath":".status.pathCount"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct OperationSetSpec {
    /// The nodes; a node's `id` must equal its index in this list.
    pub adjacency_list: Vec<Node>,
}

/// One node of the graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    /// The node's index in `adjacencyList` (signed so that a negative id is reported,
    /// not rejected by the parser).
    #[serde(default)]
    pub id: i64,
    /// The ids of the nodes that follow this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<i64>,
    /// The Operation this node runs; the start node has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Nodes that must have succeeded earlier in the same Diagnosis before this one runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependences: Vec<i64>,
}

/// What the engine found when it checked the graph.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationSetStatus {
    /// Whether the graph is valid and Diagnoses may use it.
    #[serde(default)]
    pub ready: bool,
    /// `Ready`, with the reasons the graph is invalid when it is not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The number of source-to-sink paths, or `more than N` when it does not fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_count: Option<String>,
}

impl OperationSet {
    /// `OperationSet/<name>`, for messages.
    pub fn object_ref(&self) -> String {
        format!(
            "OperationSet/{}",
            self.metadata.name.as_deref().unwrap_or("<unnamed>")
        )
    }
}
