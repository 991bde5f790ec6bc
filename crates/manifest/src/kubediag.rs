//! KubeDiag objects rewritten into Operon's group: what `operon convert kubediag` does.
//!
//! Operon keeps KubeDiag's kinds and field names, so most of a migration is the
//! apiVersion. The rest is what KubeDiag v0.3.1's code did differently from what its
//! objects say, and what Operon has no equivalent for; every such field is reported as a
//! [`Change`], never changed or dropped silently:
//!
//! - `diagnosis.kubediag.org/v1` becomes `operon.dev/v1alpha1`.
//! - What the API server or a controller wrote is dropped: `status`, and the metadata a
//!   new object must not carry (`uid`, `resourceVersion`, `creationTimestamp`,
//!   `generation`, `managedFields`, `selfLink`, `ownerReferences` to KubeDiag objects,
//!   KubeDiag's finalizers, the last-applied annotation of kubectl).
//! - Operation: `processor.function` (KubeDiag's Python function runtime) has no
//!   equivalent and is dropped with the reason; `spec.dependences` was never read by
//!   KubeDiag and is dropped; a `scriptRunner` is kept, with a note that a non-zero exit
//!   now fails the step (KubeDiag counted it as success).
//! - OperationSet: KubeDiag's admission webhook overwrote every node's `id` with its
//!   index in `adjacencyList`; Operon requires them equal, so ids are rewritten the
//!   same way.
//! - Diagnosis: the unreleased `targetSelector` keeps its nodes (`nodeNames`,
//!   `nodeSelector`; a plain map of labels becomes `matchLabels`), which Operon runs as
//!   one child Diagnosis per node; its pods are dropped with the reason, except that a
//!   selector of exactly one pod reference becomes `podReference`.
//! - Trigger: `commonEventTemplate` has no equivalent (KubeDiag's own webhook refused a
//!   Trigger with only that template).
//! - `CommonEvent` and `Task` objects have no Operon kind and are not converted.
//!
//! A `List` (what `kubectl get -o yaml` prints) is converted item by item. Objects of
//! other groups pass through unchanged.

use operon_data::api::API_VERSION;
use serde_json::{Map, Value};

/// KubeDiag's API group and version.
pub const KUBEDIAG_API_VERSION: &str = "diagnosis.kubediag.org/v1";

/// What happened to one field of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The object, as `Kind/name`.
    pub(crate) object: String,
    /// The field, as a dotted path (`spec.processor.function`); empty for the whole
    /// object.
    pub(crate) field: String,
    /// What was done.
    pub(crate) action: Action,
    /// Why, and what to do about it.
    pub(crate) reason: String,
}

/// What a [`Change`] did to its field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// The value was rewritten.
    Changed,
    /// The field (or the whole object) was removed.
    Dropped,
    /// Kept as written, but it means something different in Operon.
    Note,
}

impl Action {
    /// The word used in reports.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Changed => "changed",
            Self::Dropped => "dropped",
            Self::Note => "note",
        }
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.object, self.action.as_str())?;
        if !self.field.is_empty() {
            write!(f, " {}", self.field)?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// One document converted: the objects to write (none when it had no Operon
/// equivalent, several for a `List`) and every change made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Converted {
    /// The objects, in their original order.
    pub objects: Vec<Value>,
    /// Every field changed, dropped or kept with a different meaning.
    pub changes: Vec<Change>,
}

/// Converts one YAML/JSON document: a KubeDiag object, a `List` of objects, or
/// anything else (passed through).
pub fn convert(document: Value) -> Converted {
    let mut out = Converted::default();
    if document.get("kind").and_then(Value::as_str) == Some("List")
        && let Some(items) = document.get("items").and_then(Value::as_array)
    {
        for item in items {
            convert_object(item.clone(), &mut out);
        }
    } else {
        convert_object(document, &mut out);
    }
    out
}

/// Whether `document` (or an item of a `List`) is a KubeDiag object.
pub fn is_kubediag(document: &Value) -> bool {
    let own = document.get("apiVersion").and_then(Value::as_str) == Some(KUBEDIAG_API_VERSION);
    own || document
        .get("items")
        .and_then(Value::as_array)
        .is_some_and(|items| items.iter().any(is_kubediag))
}

fn convert_object(mut object: Value, out: &mut Converted) {
    if object.get("apiVersion").and_then(Value::as_str) != Some(KUBEDIAG_API_VERSION) {
        out.objects.push(object);
        return;
    }
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut report = Report {
        object: format!("{kind}/{name}"),
        changes: &mut out.changes,
    };
    let Some(map) = object.as_object_mut() else {
        return;
    };
    match kind.as_str() {
        "Operation" | "OperationSet" | "Diagnosis" | "Trigger" => {}
        "CommonEvent" => {
            report.push(
                "",
                Action::Dropped,
                "Operon has no CommonEvent kind: alerts reach Triggers through the \
                 Alertmanager receiver, and PagerDuty events are not supported",
            );
            return;
        }
        "Task" => {
            report.push(
                "",
                Action::Dropped,
                "Task belongs to KubeDiag's unreleased redesign and is created by its \
                 controller: Operon runs each node of a Diagnosis itself",
            );
            return;
        }
        other => {
            report.push(
                "",
                Action::Dropped,
                &format!("KubeDiag kind {other:?} has no Operon equivalent"),
            );
            return;
        }
    }
    map.insert("apiVersion".into(), Value::String(API_VERSION.into()));
    report.push(
        "apiVersion",
        Action::Changed,
        &format!("{KUBEDIAG_API_VERSION} -> {API_VERSION}"),
    );
    if map.remove("status").is_some() {
        report.push(
            "status",
            Action::Dropped,
            "status is written by the controller that runs the object",
        );
    }
    if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
        clean_metadata(metadata, &mut report);
    }
    let Some(Value::Object(spec)) = map.get_mut("spec") else {
        return;
    };
    match kind.as_str() {
        "Operation" => operation(spec, &mut report),
        "OperationSet" => operation_set(spec, &mut report),
        "Diagnosis" => diagnosis(spec, &mut report),
        "Trigger" => trigger(spec, &mut report),
        _ => {}
    }
    out.objects.push(object);
}

/// Collects the changes of one object.
struct Report<'a> {
    object: String,
    changes: &'a mut Vec<Change>,
}

impl Report<'_> {
    fn push(&mut self, field: &str, action: Action, reason: &str) {
        self.changes.push(Change {
            object: self.object.clone(),
            field: field.to_owned(),
            action,
            reason: reason.to_owned(),
        });
    }
}

fn clean_metadata(metadata: &mut Map<String, Value>, report: &mut Report<'_>) {
    const SERVER_SET: &[&str] = &[
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ];
    for field in SERVER_SET {
        if metadata.remove(*field).is_some() {
            report.push(
                &format!("metadata.{field}"),
                Action::Dropped,
                "set by the API server; a new object must not carry it",
            );
        }
    }
    if metadata.remove("ownerReferences").is_some() {
        report.push(
            "metadata.ownerReferences",
            Action::Dropped,
            "they name objects by uid, which the converted objects do not keep",
        );
    }
    if let Some(Value::Array(finalizers)) = metadata.get_mut("finalizers") {
        let before = finalizers.len();
        finalizers.retain(|f| !f.as_str().is_some_and(|f| f.contains("kubediag")));
        if finalizers.len() != before {
            report.push(
                "metadata.finalizers",
                Action::Dropped,
                "KubeDiag's finalizers would keep the object until KubeDiag removed them",
            );
        }
        if finalizers.is_empty() {
            metadata.remove("finalizers");
        }
    }
    if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
        const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
        if annotations.remove(LAST_APPLIED).is_some() {
            report.push(
                &format!("metadata.annotations[{LAST_APPLIED}]"),
                Action::Dropped,
                "it holds the KubeDiag object as last applied",
            );
        }
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
    }
    if let Some(Value::Object(labels)) = metadata.get_mut("labels") {
        // Set by KubeDiag's OperationSet reconciler to detect changes.
        if labels.remove("adjacency-list-hash").is_some() {
            report.push(
                "metadata.labels[adjacency-list-hash]",
                Action::Dropped,
                "KubeDiag's change marker; Operon compares generations instead",
            );
        }
        if labels.is_empty() {
            metadata.remove("labels");
        }
    }
}

fn operation(spec: &mut Map<String, Value>, report: &mut Report<'_>) {
    if spec.remove("dependences").is_some() {
        report.push(
            "spec.dependences",
            Action::Dropped,
            "KubeDiag never read it; a node's dependences belong to the OperationSet \
             node (adjacencyList[].dependences), where Operon checks them",
        );
    }
    let Some(Value::Object(processor)) = spec.get_mut("processor") else {
        return;
    };
    if processor.remove("function").is_some() {
        let alone = !["httpServer", "scriptRunner", "wasm"]
            .iter()
            .any(|p| processor.contains_key(*p));
        let mut reason = String::from(
            "KubeDiag's function runtime (Python code run by its agent) is not \
             supported: write the step as a wasm component (processor.wasm) or a \
             script (processor.scriptRunner)",
        );
        if alone {
            reason.push_str("; the Operation has no processor left until you do");
        }
        report.push("spec.processor.function", Action::Dropped, &reason);
    }
    if processor.contains_key("scriptRunner") {
        report.push(
            "spec.processor.scriptRunner",
            Action::Note,
            "a non-zero exit or a timeout now fails the node (KubeDiag counted both as \
             success), a missing argKey is an error, the shebang is honoured, and the \
             script runs in a sandbox without network unless scriptRunner.network is true",
        );
    }
}

fn operation_set(spec: &mut Map<String, Value>, report: &mut Report<'_>) {
    let Some(Value::Array(nodes)) = spec.get_mut("adjacencyList") else {
        return;
    };
    for (index, node) in nodes.iter_mut().enumerate() {
        let Some(node) = node.as_object_mut() else {
            continue;
        };
        let expected = Value::from(index);
        match node.get("id") {
            Some(id) if *id == expected => {}
            Some(id) => {
                let reason = format!(
                    "{id} -> {index}: KubeDiag's webhook replaced every id by the node's \
                     index, which is what its edges meant"
                );
                report.push(
                    &format!("spec.adjacencyList[{index}].id"),
                    Action::Changed,
                    &reason,
                );
                node.insert("id".into(), expected);
            }
            None => {
                node.insert("id".into(), expected);
            }
        }
    }
}

fn diagnosis(spec: &mut Map<String, Value>, report: &mut Report<'_>) {
    let mut selector = match spec.remove("targetSelector") {
        None | Some(Value::Null) => return,
        Some(Value::Object(selector)) => selector,
        // Not a selector at all: kept for validation to refuse by name.
        Some(other) => {
            spec.insert("targetSelector".into(), other);
            return;
        }
    };
    let pods = selector.remove("podReferences").filter(given);
    let pod_selector = selector.remove("podSelector").filter(given);
    let nodes = selector.get("nodeNames").is_some_and(given)
        || selector.get("nodeSelector").is_some_and(given);
    if let (false, None, Some(Value::Array(pods))) = (nodes, &pod_selector, &pods)
        && let [pod] = pods.as_slice()
    {
        spec.insert("podReference".into(), pod.clone());
        report.push(
            "spec.targetSelector",
            Action::Changed,
            "its one pod reference became spec.podReference",
        );
        return;
    }
    const PODS: &str = "not supported yet: Operon selects nodes (nodeNames, nodeSelector); \
                        name the pods' nodes, or make one Diagnosis per pod with \
                        spec.podReference";
    if pod_selector.is_some() {
        report.push("spec.targetSelector.podSelector", Action::Dropped, PODS);
    }
    if pods.is_some() {
        report.push("spec.targetSelector.podReferences", Action::Dropped, PODS);
    }
    if !nodes {
        return;
    }
    if let Some(Value::Object(labels)) = selector.get_mut("nodeSelector")
        && !labels.is_empty()
        && !labels.contains_key("matchLabels")
        && !labels.contains_key("matchExpressions")
        && labels.values().all(Value::is_string)
    {
        let plain = std::mem::take(labels);
        labels.insert("matchLabels".into(), Value::Object(plain));
        report.push(
            "spec.targetSelector.nodeSelector",
            Action::Changed,
            "a map of labels became the label selector's matchLabels",
        );
    }
    spec.insert("targetSelector".into(), Value::Object(selector));
    report.push(
        "spec.targetSelector",
        Action::Note,
        "each node runs in a Diagnosis of its own, <name>-<node>, owned by this one; \
         per-node phases and results are in status.targets (not KubeDiag's \
         status.context), and the selector is resolved once, when the Diagnosis starts",
    );
}

/// Whether a selector's field says anything: set, and not an empty list.
fn given(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Array(items) => !items.is_empty(),
        _ => true,
    }
}

fn trigger(spec: &mut Map<String, Value>, report: &mut Report<'_>) {
    let Some(Value::Object(source)) = spec.get_mut("sourceTemplate") else {
        return;
    };
    if source.remove("commonEventTemplate").is_some() {
        report.push(
            "spec.sourceTemplate.commonEventTemplate",
            Action::Dropped,
            "Operon has no CommonEvent source (KubeDiag's own webhook refused a Trigger \
             with only this template): use prometheusAlertTemplate, \
             kubernetesEventTemplate or cronTemplate",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(converted: &Converted) -> Vec<(&str, &str, Action)> {
        converted
            .changes
            .iter()
            .map(|c| (c.object.as_str(), c.field.as_str(), c.action))
            .collect()
    }

    #[test]
    fn an_operation_changes_group_and_loses_what_operon_cannot_run() {
        let converted = convert(json!({
            "apiVersion": "diagnosis.kubediag.org/v1",
            "kind": "Operation",
            "metadata": {
                "name": "py",
                "uid": "1234",
                "resourceVersion": "9",
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                    "team": "sre",
                },
            },
            "spec": {
                "processor": {
                    "function": {"codeSource": {"handler.py": "def handle(): pass"}, "runtime": "Python3"},
                    "timeoutSeconds": 60,
                },
                "dependences": ["x"],
            },
        }));
        assert_eq!(
            converted.objects,
            [json!({
                "apiVersion": "operon.dev/v1alpha1",
                "kind": "Operation",
                "metadata": {"name": "py", "annotations": {"team": "sre"}},
                "spec": {"processor": {"timeoutSeconds": 60}},
            })]
        );
        assert_eq!(
            fields(&converted),
            [
                ("Operation/py", "apiVersion", Action::Changed),
                ("Operation/py", "metadata.uid", Action::Dropped),
                ("Operation/py", "metadata.resourceVersion", Action::Dropped),
                (
                    "Operation/py",
                    "metadata.annotations[kubectl.kubernetes.io/last-applied-configuration]",
                    Action::Dropped
                ),
                ("Operation/py", "spec.dependences", Action::Dropped),
                ("Operation/py", "spec.processor.function", Action::Dropped),
            ]
        );
        assert!(converted.changes[5].reason.contains("no processor left"));
    }

    #[test]
    fn a_script_runner_is_kept_with_a_note_on_what_now_fails() {
        let converted = convert(json!({
            "apiVersion": "diagnosis.kubediag.org/v1",
            "kind": "Operation",
            "metadata": {"name": "df"},
            "spec": {"processor": {"scriptRunner": {"script": "df -h", "operationResultKey": "df"}}},
        }));
        assert_eq!(
            converted.objects[0]["spec"],
            json!({"processor": {"scriptRunner": {"script": "df -h", "operationResultKey": "df"}}})
        );
        let note = &converted.changes[1];
        assert_eq!(note.action, Action::Note);
        assert!(note.reason.contains("non-zero exit"), "{note}");
    }

    #[test]
    fn operation_set_ids_become_indexes_as_kubediags_webhook_made_them() {
        let converted = convert(json!({
            "apiVersion": "diagnosis.kubediag.org/v1",
            "kind": "OperationSet",
            "metadata": {"name": "s", "labels": {"adjacency-list-hash": "abc"}},
            "spec": {"adjacencyList": [
                {"id": 0, "to": [1]},
                {"id": 7, "operation": "a"},
                {"operation": "b"},
            ]},
            "status": {"ready": true, "paths": []},
        }));
        assert_eq!(
            converted.objects[0]["spec"]["adjacencyList"],
            json!([
                {"id": 0, "to": [1]},
                {"id": 1, "operation": "a"},
                {"id": 2, "operation": "b"},
            ])
        );
        assert_eq!(converted.objects[0]["metadata"], json!({"name": "s"}));
        assert_eq!(
            fields(&converted),
            [
                ("OperationSet/s", "apiVersion", Action::Changed),
                ("OperationSet/s", "status", Action::Dropped),
                (
                    "OperationSet/s",
                    "metadata.labels[adjacency-list-hash]",
                    Action::Dropped
                ),
                (
                    "OperationSet/s",
                    "spec.adjacencyList[1].id",
                    Action::Changed
                ),
            ]
        );
    }

    fn with_target_selector(selector: Value) -> Converted {
        convert(json!({
            "apiVersion": "diagnosis.kubediag.org/v1",
            "kind": "Diagnosis",
            "metadata": {"name": "d", "namespace": "kubediag"},
            "spec": {"operationSet": "s", "targetSelector": selector},
        }))
    }

    #[test]
    fn a_target_selector_keeps_its_nodes_and_says_how_they_run() {
        let selector = json!({"nodeNames": ["n1", "n2"],
                              "nodeSelector": {"matchExpressions": [
                                  {"key": "zone", "operator": "In", "values": ["a"]}]}});
        let nodes = with_target_selector(selector.clone());
        assert_eq!(
            nodes.objects[0]["spec"],
            json!({"operationSet": "s", "targetSelector": selector})
        );
        let (_, field, action) = fields(&nodes)[1];
        assert_eq!((field, action), ("spec.targetSelector", Action::Note));
        assert!(nodes.changes[1].reason.contains("status.targets"));
        // One node stays a selector too: its record is per node like the others'.
        let one = with_target_selector(json!({"nodeNames": ["n1"]}));
        assert_eq!(
            one.objects[0]["spec"]["targetSelector"],
            json!({"nodeNames": ["n1"]})
        );
        assert!(one.objects[0]["spec"].get("nodeName").is_none());
        // A plain map of labels is what a label selector's matchLabels holds.
        let plain = with_target_selector(json!({"nodeSelector": {"role": "worker"}}));
        assert_eq!(
            plain.objects[0]["spec"]["targetSelector"],
            json!({"nodeSelector": {"matchLabels": {"role": "worker"}}})
        );
        assert_eq!(
            fields(&plain)[1..],
            [
                (
                    "Diagnosis/d",
                    "spec.targetSelector.nodeSelector",
                    Action::Changed
                ),
                ("Diagnosis/d", "spec.targetSelector", Action::Note),
            ]
        );
    }

    #[test]
    fn a_target_selector_of_pods_is_dropped_unless_it_is_one_pod_reference() {
        let one_pod =
            with_target_selector(json!({"podReferences": [{"namespace": "a", "name": "p"}]}));
        assert_eq!(
            one_pod.objects[0]["spec"],
            json!({"operationSet": "s", "podReference": {"namespace": "a", "name": "p"}})
        );
        assert_eq!(one_pod.changes[1].action, Action::Changed);
        let pods = with_target_selector(json!({
            "nodeNames": ["n1"],
            "podSelector": {"matchLabels": {"app": "web"}},
            "podReferences": [{"namespace": "a", "name": "p"}, {"namespace": "a", "name": "q"}],
        }));
        assert_eq!(
            pods.objects[0]["spec"]["targetSelector"],
            json!({"nodeNames": ["n1"]})
        );
        let dropped: Vec<&str> = pods
            .changes
            .iter()
            .filter(|c| c.action == Action::Dropped)
            .map(|c| c.field.as_str())
            .collect();
        assert_eq!(
            dropped,
            [
                "spec.targetSelector.podSelector",
                "spec.targetSelector.podReferences"
            ]
        );
        assert!(pods.changes[1].reason.starts_with("not supported yet"));
        let only_pods = with_target_selector(json!({"podSelector": {}}));
        assert_eq!(only_pods.objects[0]["spec"], json!({"operationSet": "s"}));
    }

    #[test]
    fn lists_are_converted_item_by_item_and_other_groups_pass_through() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        let converted = convert(json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "diagnosis.kubediag.org/v1", "kind": "Trigger",
                 "metadata": {"name": "t"},
                 "spec": {"operationSet": "s", "sourceTemplate": {
                     "commonEventTemplate": {"regexp": {"source": "x"}},
                     "cronTemplate": {"schedule": "0 * * * *"}}}},
                {"apiVersion": "diagnosis.kubediag.org/v1", "kind": "CommonEvent",
                 "metadata": {"name": "c"}, "spec": {"summary": "x"}},
                pod.clone(),
            ],
        }));
        assert_eq!(converted.objects.len(), 2);
        assert_eq!(
            converted.objects[0]["spec"]["sourceTemplate"],
            json!({"cronTemplate": {"schedule": "0 * * * *"}})
        );
        assert_eq!(converted.objects[1], pod);
        assert_eq!(
            fields(&converted),
            [
                ("Trigger/t", "apiVersion", Action::Changed),
                (
                    "Trigger/t",
                    "spec.sourceTemplate.commonEventTemplate",
                    Action::Dropped
                ),
                ("CommonEvent/c", "", Action::Dropped),
            ]
        );
        assert_eq!(
            converted.changes[2].to_string(),
            "CommonEvent/c: dropped: Operon has no CommonEvent kind: alerts reach Triggers \
             through the Alertmanager receiver, and PagerDuty events are not supported"
        );
    }
}
