//! `Diagnosis`: one run of an OperationSet about a node or a pod, and its record.

use super::{Condition, Problem};
use crate::conventions::names;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A Diagnosis: run `operationSet` with `parameters` about `nodeName` or `podReference`.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// Where it runs: `Node` (what a Diagnosis naming a node or a pod gets) on that
    /// node's agent, so that collection and repair steps run where the problem is;
    /// `Controller` in the controller, still about that node (the steps' `node` input),
    /// for a node whose own agent cannot answer: a node that died, whose steps read
    /// what the API server knows of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_on: Option<DiagnosisRunOn>,
    /// How long a Diagnosis placed on a node waits while that node is not Ready (or
    /// gone) before it fails, in seconds; it resumes from its checkpoint if the node
    /// comes back sooner. Counted from when the node stopped being Ready, or from the
    /// Diagnosis' creation if that is later. Unset: the controller's
    /// `--diagnosis-node-wait` (10 minutes unless set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub node_not_ready_timeout_seconds: Option<i64>,
    /// Walk the pipeline without side effects: wasm and script steps run in their
    /// sandboxes (patches recorded, not applied; scripts without network), the other
    /// steps only report what they would do (`status.nodes[].dryRun`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// The nodes to run on, each in a Diagnosis of its own (KubeDiag's field, after
    /// v0.3.1): this one then runs nothing itself, it creates one child per node
    /// (`<name>-<node>`, same spec but `spec.nodeName`) and gathers their outcomes in
    /// `status.targets`. Not with `nodeName` or `podReference`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_selector: Option<TargetSelector>,
}

/// The nodes a Diagnosis with `spec.targetSelector` runs on: those named and those
/// matched, once each. Resolved once, when the Diagnosis starts: a node that joins
/// later is not added to a run under way.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetSelector {
    /// Nodes by name. A name with no Node is recorded as a failed target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_names: Vec<String>,
    /// Nodes by label (a standard label selector: `{}` matches every node). While it
    /// matches none, the Diagnosis waits, and fails after the controller's wait limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<LabelSelector>,
    /// KubeDiag's pods by label: in the schema so that it is refused by name rather
    /// than dropped unseen by the API server; not supported yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// KubeDiag's pods by reference: refused like `podSelector`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_references: Vec<PodReference>,
}

/// Where a Diagnosis runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DiagnosisRunOn {
    /// On the agent of the node it names (or of its pod's node).
    Node,
    /// In the controller, whatever node it names.
    Controller,
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
    /// With `spec.targetSelector`: the nodes resolved when it started, one entry each,
    /// with what its child Diagnosis reports. Written once and never extended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetStatus>,
}

/// One node of a Diagnosis with `spec.targetSelector`, and how its child stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetStatus {
    /// The node.
    pub node_name: String,
    /// The child Diagnosis (same namespace) that runs on it; unset when the node did
    /// not exist, so nothing ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<String>,
    /// The child's phase.
    pub phase: DiagnosisPhase,
    /// Why it failed or waits (the child's condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The results the child holds in its status, once it has finished.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub operation_results: BTreeMap<String, String>,
    /// The child's results did not fit beside the other targets' and are not copied
    /// here: read them from the child (and its `resultsConfigMap`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub results_omitted: bool,
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

impl Diagnosis {
    /// Every problem of this Diagnosis on its own (what admission refuses); the
    /// objects it names are not looked up.
    pub fn validate(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        if let Some(selector) = &self.spec.target_selector {
            target_selector_problems(&self.spec, selector, &mut |field, reason| {
                problems.push(Problem::new(self.object_ref(), field, reason));
            });
        }
        if let Some(seconds) = self.spec.node_not_ready_timeout_seconds
            && seconds < 1
        {
            problems.push(Problem::new(
                self.object_ref(),
                "spec.nodeNotReadyTimeoutSeconds",
                format!("must be at least 1, got {seconds}"),
            ));
        }
        let placed = self.spec.node_name.is_some()
            || self.spec.pod_reference.is_some()
            || self.spec.target_selector.is_some();
        if self.spec.run_on == Some(DiagnosisRunOn::Controller) && !placed {
            problems.push(Problem::new(
                self.object_ref(),
                "spec.runOn",
                "Controller needs spec.nodeName, spec.podReference or spec.targetSelector: \
                 it runs a Diagnosis about a node in the controller (one naming none runs \
                 there anyway)",
            ));
        }
        problems
    }
}

/// The problems of `spec.targetSelector`, each as (field, reason).
fn target_selector_problems(
    spec: &DiagnosisSpec,
    selector: &TargetSelector,
    push: &mut dyn FnMut(String, String),
) {
    const AT: &str = "spec.targetSelector";
    if spec.node_name.is_some() {
        push(
            AT.to_owned(),
            "give spec.targetSelector or spec.nodeName, not both: a selector naming one \
             node is nodeNames: [that node]"
                .to_owned(),
        );
    }
    if spec.pod_reference.is_some() {
        push(
            AT.to_owned(),
            "give spec.targetSelector or spec.podReference, not both".to_owned(),
        );
    }
    let unsupported = "not supported yet, use nodeNames or nodeSelector";
    if selector.pod_selector.is_some() {
        push(format!("{AT}.podSelector"), unsupported.to_owned());
    }
    if !selector.pod_references.is_empty() {
        push(format!("{AT}.podReferences"), unsupported.to_owned());
    }
    if selector.node_names.is_empty()
        && selector.node_selector.is_none()
        && selector.pod_selector.is_none()
        && selector.pod_references.is_empty()
    {
        push(
            AT.to_owned(),
            "selects no node: give nodeNames, nodeSelector or both".to_owned(),
        );
    }
    for (i, name) in selector.node_names.iter().enumerate() {
        if !names::is_dns_subdomain(name) {
            push(
                format!("{AT}.nodeNames[{i}]"),
                format!("{name:?} is not a node name (a lowercase DNS subdomain)"),
            );
        }
    }
    if let Some(nodes) = &selector.node_selector {
        label_selector_problems(&format!("{AT}.nodeSelector"), nodes, push);
    }
}

/// The problems of a label selector at `at`, as the API server would refuse them when
/// the selector is used (too late: a list refused then fails the Diagnosis).
fn label_selector_problems(
    at: &str,
    selector: &LabelSelector,
    push: &mut dyn FnMut(String, String),
) {
    for (key, value) in selector.match_labels.iter().flatten() {
        if let Err(reason) = names::label_key(key) {
            push(format!("{at}.matchLabels"), reason.to_string());
        }
        if let Err(reason) = names::label_value(value) {
            push(format!("{at}.matchLabels.{key}"), reason.to_string());
        }
    }
    for (i, requirement) in selector.match_expressions.iter().flatten().enumerate() {
        let at = format!("{at}.matchExpressions[{i}]");
        if let Err(reason) = names::label_key(&requirement.key) {
            push(format!("{at}.key"), reason.to_string());
        }
        let values = requirement.values.as_deref().unwrap_or_default();
        match requirement.operator.as_str() {
            "In" | "NotIn" => {
                if values.is_empty() {
                    push(
                        format!("{at}.values"),
                        "In and NotIn need at least one value".to_owned(),
                    );
                }
                for (j, value) in values.iter().enumerate() {
                    if let Err(reason) = names::label_value(value) {
                        push(format!("{at}.values[{j}]"), reason.to_string());
                    }
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    push(
                        format!("{at}.values"),
                        "Exists and DoesNotExist take no values".to_owned(),
                    );
                }
            }
            other => push(
                format!("{at}.operator"),
                format!("unknown operator {other:?}; expected In, NotIn, Exists or DoesNotExist"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn diagnosis(spec: serde_json::Value) -> Diagnosis {
        serde_json::from_value(json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
            "metadata": {"name": "d", "namespace": "ops"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn fields(d: &Diagnosis) -> Vec<String> {
        d.validate().into_iter().map(|p| p.field).collect()
    }

    #[test]
    fn a_target_selector_by_names_and_labels_is_valid() {
        let d = diagnosis(json!({"operationSet": "s", "targetSelector": {
            "nodeNames": ["worker-1", "node.example.com"],
            "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""},
                             "matchExpressions": [
                                {"key": "zone", "operator": "In", "values": ["a", "b"]},
                                {"key": "spot", "operator": "DoesNotExist"}]},
        }}));
        assert_eq!(d.validate(), []);
        let every_node =
            diagnosis(json!({"operationSet": "s", "targetSelector": {"nodeSelector": {}}}));
        assert_eq!(every_node.validate(), []);
        assert_eq!(diagnosis(json!({"operationSet": "s"})).validate(), []);
    }

    #[test]
    fn a_target_selector_beside_a_node_or_pod_or_empty_is_refused() {
        let both = diagnosis(json!({"operationSet": "s", "nodeName": "n",
            "podReference": {"namespace": "a", "name": "p"},
            "targetSelector": {"nodeNames": ["n"]}}));
        let problems = both.validate();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].reason.contains("spec.nodeName"), "{problems:?}");
        assert!(
            problems[1].reason.contains("spec.podReference"),
            "{problems:?}"
        );
        assert_eq!(problems[0].object, "Diagnosis/ops/d");
        let empty = diagnosis(json!({"operationSet": "s", "targetSelector": {}}));
        let problems = empty.validate();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].field, "spec.targetSelector");
        assert!(problems[0].reason.contains("selects no node"));
    }

    #[test]
    fn pod_targets_are_refused_by_name() {
        let d = diagnosis(json!({"operationSet": "s", "targetSelector": {
            "podSelector": {"matchLabels": {"app": "web"}},
            "podReferences": [{"namespace": "a", "name": "p"}],
        }}));
        let problems = d.validate();
        assert_eq!(
            fields(&d),
            [
                "spec.targetSelector.podSelector",
                "spec.targetSelector.podReferences"
            ]
        );
        assert_eq!(
            problems[0].reason,
            "not supported yet, use nodeNames or nodeSelector"
        );
    }

    #[test]
    fn bad_names_and_selectors_are_refused_field_by_field() {
        let d = diagnosis(json!({"operationSet": "s", "targetSelector": {
            "nodeNames": ["ok", "Not_A_Node"],
            "nodeSelector": {
                "matchLabels": {"bad key!": "v", "k": "-v"},
                "matchExpressions": [
                    {"key": "zone", "operator": "Equals", "values": ["a"]},
                    {"key": "zone", "operator": "In"},
                    {"key": "zone", "operator": "Exists", "values": ["a"]},
                    {"key": "UPPER.example.com/x", "operator": "NotIn", "values": ["a b"]},
                ],
            },
        }}));
        assert_eq!(
            fields(&d),
            [
                "spec.targetSelector.nodeNames[1]",
                "spec.targetSelector.nodeSelector.matchLabels",
                "spec.targetSelector.nodeSelector.matchLabels.k",
                "spec.targetSelector.nodeSelector.matchExpressions[0].operator",
                "spec.targetSelector.nodeSelector.matchExpressions[1].values",
                "spec.targetSelector.nodeSelector.matchExpressions[2].values",
                "spec.targetSelector.nodeSelector.matchExpressions[3].key",
                "spec.targetSelector.nodeSelector.matchExpressions[3].values[0]",
            ]
        );
        let reasons: Vec<String> = d.validate().into_iter().map(|p| p.reason).collect();
        assert!(
            reasons[3].contains("unknown operator \"Equals\""),
            "{reasons:?}"
        );
    }

    #[test]
    fn targets_round_trip_in_the_status_with_kubediags_field_names() {
        let status: DiagnosisStatus = serde_json::from_value(json!({
            "targets": [{"nodeName": "n1", "diagnosis": "d-n1", "phase": "Succeeded",
                         "operationResults": {"k": "v"}},
                        {"nodeName": "gone", "phase": "Failed", "message": "no Node"}],
        }))
        .unwrap();
        assert_eq!(status.targets[0].diagnosis.as_deref(), Some("d-n1"));
        assert_eq!(status.targets[1].phase, DiagnosisPhase::Failed);
        let back = serde_json::to_value(&status).unwrap();
        assert!(back["targets"][1].get("resultsOmitted").is_none());
        assert!(back["targets"][1].get("operationResults").is_none());
    }

    #[test]
    fn a_node_wait_below_a_second_and_run_on_controller_about_nothing_are_refused() {
        let mut d = Diagnosis::new(
            "d",
            DiagnosisSpec {
                operation_set: "s".to_owned(),
                node_not_ready_timeout_seconds: Some(0),
                run_on: Some(DiagnosisRunOn::Controller),
                ..Default::default()
            },
        );
        let fields: Vec<String> = d.validate().into_iter().map(|p| p.to_string()).collect();
        assert_eq!(fields.len(), 2, "{fields:?}");
        assert!(
            fields[0].contains("spec.nodeNotReadyTimeoutSeconds") && fields[0].contains("got 0")
        );
        assert!(fields[1].contains("spec.runOn"));
        d.spec.node_not_ready_timeout_seconds = Some(30);
        d.spec.node_name = Some("worker-2".to_owned());
        assert!(d.validate().is_empty());
    }
}
