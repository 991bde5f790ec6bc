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
//! - Diagnosis: the unreleased `targetSelector` becomes `nodeName` or `podReference`
//!   when it names exactly one node or pod, and is reported otherwise.
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
    let Some(selector) = spec.remove("targetSelector") else {
        return;
    };
    let list = |key: &str| {
        selector
            .get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let nodes = list("nodeNames");
    let pods = list("podReferences");
    let selectors = ["nodeSelector", "podSelector"]
        .iter()
        .any(|key| selector.get(*key).is_some_and(|v| !v.is_null()));
    match (nodes.as_slice(), pods.as_slice(), selectors) {
        ([node], [], false) => {
            spec.insert("nodeName".into(), node.clone());
            report.push(
                "spec.targetSelector",
                Action::Changed,
                "its one node name became spec.nodeName",
            );
        }
        ([], [pod], false) => {
            spec.insert("podReference".into(), pod.clone());
            report.push(
                "spec.targetSelector",
                Action::Changed,
                "its one pod reference became spec.podReference",
            );
        }
        _ => report.push(
            "spec.targetSelector",
            Action::Dropped,
            "a Diagnosis runs about one node or one pod (spec.nodeName or \
             spec.podReference): make one Diagnosis per target",
        ),
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

    #[test]
    fn a_target_selector_with_one_target_becomes_node_name_or_pod_reference() {
        let diagnosis = |selector: Value| {
            convert(json!({
                "apiVersion": "diagnosis.kubediag.org/v1",
                "kind": "Diagnosis",
                "metadata": {"name": "d", "namespace": "kubediag"},
                "spec": {"operationSet": "s", "targetSelector": selector},
            }))
        };
        let one_node = diagnosis(json!({"nodeNames": ["n1"]}));
        assert_eq!(
            one_node.objects[0]["spec"],
            json!({"operationSet": "s", "nodeName": "n1"})
        );
        let one_pod = diagnosis(json!({"podReferences": [{"namespace": "a", "name": "p"}]}));
        assert_eq!(
            one_pod.objects[0]["spec"]["podReference"],
            json!({"namespace": "a", "name": "p"})
        );
        let many = diagnosis(json!({"nodeNames": ["n1", "n2"]}));
        assert_eq!(many.objects[0]["spec"], json!({"operationSet": "s"}));
        assert_eq!(many.changes[1].action, Action::Dropped);
        assert!(many.changes[1].reason.contains("one Diagnosis per target"));
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
