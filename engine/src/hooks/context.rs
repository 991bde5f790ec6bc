//! Binding contexts in shell-operator's v1 JSON shapes, and the helpers that build
//! them.
//!
//! Hooks receive typed [`BindingContext`]s; script hooks read the same contexts as the
//! JSON array shell-operator writes to `$BINDING_CONTEXT_PATH`, produced by
//! [`to_json`] (and read back by [`from_json`], for fixtures and `operon hook test`).
//! The shapes follow shell-operator's code, not its docs, where they differ:
//!
//! | type            | fields besides `binding`                                           |
//! |-----------------|--------------------------------------------------------------------|
//! | onStartup       | none (no `type`)                                                   |
//! | Schedule        | `type`, `snapshots`?                                               |
//! | Synchronization | `type`, `objects` (`[]` when empty), `snapshots`?                  |
//! | Event           | `type`, `watchEvent`, `object`, `filterResult`?, `snapshots`?      |
//! | Group           | `type`, `groupName`, `snapshots`? (`binding` is the group's name)  |
//! | Validating      | `type`, `review`, `snapshots`?                                     |
//! | Conversion      | `type`, `fromVersion`, `toVersion`, `review`, `snapshots`?         |
//!
//! `snapshots` appears when the context carries at least one snapshot. In each
//! `{object, filterResult}` item `object` is absent when the binding does not keep full
//! objects, and `filterResult` is absent when the binding has no jq filter, `null` when
//! the filter produced nothing, and an array when it produced several values.

use crate::sandbox::bindings::types::{
    BindingContext, BindingType, ObjectAndFilter, Snapshot, WatchEvent,
};
use serde_json::{Map, Value};

/// Why a JSON document is not a list of v1 binding contexts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// The document is not a JSON array.
    #[error("binding contexts must be a JSON array")]
    NotAList,
    /// An element of the array is not a JSON object.
    #[error("binding context [{index}] is not a JSON object")]
    NotAnObject {
        /// The element's position.
        index: usize,
    },
    /// A field the context's type requires is missing.
    #[error("binding context [{index}]: field {field:?} is missing")]
    Missing {
        /// The element's position.
        index: usize,
        /// The field.
        field: &'static str,
    },
    /// A field has a value of the wrong shape.
    #[error("binding context [{index}]: field {field:?}: {reason}")]
    Invalid {
        /// The element's position.
        index: usize,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

// ---------------------------------------------------------------------------------------
// Typed contexts → JSON
// ---------------------------------------------------------------------------------------

/// The JSON array shell-operator writes to `$BINDING_CONTEXT_PATH` for `contexts`.
///
/// JSON-valued fields of the contract are JSON text; a field whose text does not parse
/// (which contexts built with this module's helpers never have) is written as a JSON
/// string holding the text, so the hook still sees it.
pub fn to_json(contexts: &[BindingContext]) -> Value {
    Value::Array(contexts.iter().map(context_to_json).collect())
}

/// One binding context as a JSON object.
pub fn context_to_json(context: &BindingContext) -> Value {
    let mut out = Map::new();
    out.insert("binding".into(), Value::String(context.binding.clone()));
    let type_name = match context.type_ {
        BindingType::OnStartup => return Value::Object(out),
        BindingType::Schedule => "Schedule",
        BindingType::Synchronization => "Synchronization",
        BindingType::Event => "Event",
        BindingType::Group => "Group",
        BindingType::Validating => "Validating",
        BindingType::Conversion => "Conversion",
    };
    out.insert("type".into(), Value::String(type_name.to_owned()));
    match context.type_ {
        BindingType::Synchronization => {
            let objects = context.objects.iter().map(item_to_json).collect();
            out.insert("objects".into(), Value::Array(objects));
        }
        BindingType::Event => {
            if let Some(event) = context.watch_event {
                out.insert(
                    "watchEvent".into(),
                    Value::String(watch_event_name(event).into()),
                );
            }
            match &context.object {
                Some(item) => insert_item(&mut out, item),
                // What shell-operator writes for an event without an object.
                None => {
                    out.insert("object".into(), Value::Null);
                }
            }
        }
        BindingType::Group => {
            let group = context.group.as_ref().unwrap_or(&context.binding);
            out.insert("groupName".into(), Value::String(group.clone()));
        }
        BindingType::Validating => {
            out.insert("review".into(), review_json(context));
        }
        BindingType::Conversion => {
            let review = review_json(context);
            let (from, to) = conversion_versions(&review);
            out.insert("fromVersion".into(), Value::String(from));
            out.insert("toVersion".into(), Value::String(to));
            out.insert("review".into(), review);
        }
        BindingType::OnStartup | BindingType::Schedule => {}
    }
    if !context.snapshots.is_empty() {
        let snapshots = context
            .snapshots
            .iter()
            .map(|s| {
                let items = s.objects.iter().map(item_to_json).collect();
                (s.binding.clone(), Value::Array(items))
            })
            .collect();
        out.insert("snapshots".into(), Value::Object(snapshots));
    }
    Value::Object(out)
}

fn watch_event_name(event: WatchEvent) -> &'static str {
    match event {
        WatchEvent::Added => "Added",
        WatchEvent::Modified => "Modified",
        WatchEvent::Deleted => "Deleted",
    }
}

fn json_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

fn insert_item(out: &mut Map<String, Value>, item: &ObjectAndFilter) {
    if let Some(object) = &item.object {
        out.insert("object".into(), json_text(object));
    }
    if let Some(result) = &item.filter_result {
        out.insert("filterResult".into(), json_text(result));
    }
}

fn item_to_json(item: &ObjectAndFilter) -> Value {
    let mut out = Map::new();
    insert_item(&mut out, item);
    Value::Object(out)
}

fn review_json(context: &BindingContext) -> Value {
    context.review.as_deref().map_or(Value::Null, json_text)
}

/// `fromVersion` and `toVersion` of a conversion step, read from its ConversionReview:
/// the objects' `apiVersion` and the `desiredAPIVersion`. The engine builds one review
/// per step of a conversion chain, so these are the step's versions; empty when the
/// review does not say.
fn conversion_versions(review: &Value) -> (String, String) {
    let request = review.get("request");
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
    let from = text(
        request
            .and_then(|r| r.get("objects"))
            .and_then(|objects| objects.get(0))
            .and_then(|object| object.get("apiVersion")),
    );
    let to = text(request.and_then(|r| r.get("desiredAPIVersion")));
    (from, to)
}

// ---------------------------------------------------------------------------------------
// JSON → typed contexts
// ---------------------------------------------------------------------------------------

/// Reads a `$BINDING_CONTEXT_PATH` document back into typed contexts.
///
/// What the JSON does not carry is left empty: `group` is only known for `Group`
/// contexts, and a Conversion's `fromVersion`/`toVersion` are not kept (they are
/// derived from the review when written).
pub fn from_json(value: &Value) -> Result<Vec<BindingContext>, ContextError> {
    let items = value.as_array().ok_or(ContextError::NotAList)?;
    items
        .iter()
        .enumerate()
        .map(|(index, item)| context_from_json(index, item))
        .collect()
}

fn context_from_json(index: usize, value: &Value) -> Result<BindingContext, ContextError> {
    let map = value
        .as_object()
        .ok_or(ContextError::NotAnObject { index })?;
    let invalid = |field: &'static str, reason: &str| ContextError::Invalid {
        index,
        field,
        reason: reason.to_owned(),
    };
    let binding = match map.get("binding") {
        Some(Value::String(binding)) => binding.clone(),
        Some(_) => return Err(invalid("binding", "expected a string")),
        None => {
            return Err(ContextError::Missing {
                index,
                field: "binding",
            });
        }
    };
    let type_ = match map.get("type") {
        None if binding == "onStartup" => BindingType::OnStartup,
        None => {
            return Err(ContextError::Missing {
                index,
                field: "type",
            });
        }
        Some(Value::String(name)) => match name.as_str() {
            "Schedule" => BindingType::Schedule,
            "Synchronization" => BindingType::Synchronization,
            "Event" => BindingType::Event,
            "Group" => BindingType::Group,
            "Validating" => BindingType::Validating,
            "Conversion" => BindingType::Conversion,
            _ => return Err(invalid("type", "not a binding context type")),
        },
        Some(_) => return Err(invalid("type", "expected a string")),
    };
    let mut context = BindingContext {
        binding,
        type_,
        group: None,
        watch_event: None,
        object: None,
        objects: Vec::new(),
        snapshots: Vec::new(),
        review: None,
    };
    match type_ {
        BindingType::Group => {
            context.group = Some(match map.get("groupName") {
                Some(Value::String(group)) => group.clone(),
                Some(_) => return Err(invalid("groupName", "expected a string")),
                None => context.binding.clone(),
            });
        }
        BindingType::Event => {
            context.watch_event = match map.get("watchEvent") {
                None => None,
                Some(Value::String(event)) => Some(match event.as_str() {
                    "Added" => WatchEvent::Added,
                    "Modified" => WatchEvent::Modified,
                    "Deleted" => WatchEvent::Deleted,
                    _ => return Err(invalid("watchEvent", "not Added, Modified or Deleted")),
                }),
                Some(_) => return Err(invalid("watchEvent", "expected a string")),
            };
            let object_is_null = map.get("object").is_some_and(Value::is_null);
            context.object = if object_is_null && !map.contains_key("filterResult") {
                None
            } else {
                Some(item_from_map(map))
            };
        }
        BindingType::Synchronization => {
            let objects = match map.get("objects") {
                Some(Value::Array(items)) => items,
                Some(_) => return Err(invalid("objects", "expected a list")),
                None => {
                    return Err(ContextError::Missing {
                        index,
                        field: "objects",
                    });
                }
            };
            context.objects = objects
                .iter()
                .map(|item| {
                    item.as_object()
                        .map(item_from_map)
                        .ok_or_else(|| invalid("objects", "items must be objects"))
                })
                .collect::<Result<_, _>>()?;
        }
        BindingType::Validating | BindingType::Conversion => {
            context.review = map
                .get("review")
                .filter(|review| !review.is_null())
                .map(Value::to_string);
        }
        BindingType::OnStartup | BindingType::Schedule => {}
    }
    if let Some(snapshots) = map.get("snapshots") {
        let snapshots = snapshots
            .as_object()
            .ok_or_else(|| invalid("snapshots", "expected an object"))?;
        for (binding, items) in snapshots {
            let items = items
                .as_array()
                .ok_or_else(|| invalid("snapshots", "each snapshot must be a list"))?;
            let objects = items
                .iter()
                .map(|item| {
                    item.as_object()
                        .map(item_from_map)
                        .ok_or_else(|| invalid("snapshots", "items must be objects"))
                })
                .collect::<Result<_, _>>()?;
            context.snapshots.push(Snapshot {
                binding: binding.clone(),
                objects,
            });
        }
    }
    Ok(context)
}

fn item_from_map(map: &Map<String, Value>) -> ObjectAndFilter {
    ObjectAndFilter {
        object: map
            .get("object")
            .filter(|object| !object.is_null())
            .map(Value::to_string),
        filter_result: map.get("filterResult").map(Value::to_string),
    }
}

// ---------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------

/// The `filterResult` of a jq filter's outputs: `null` for none, the value for one,
/// an array for several (shell-operator's rule).
pub fn filter_result(outputs: &[Value]) -> Value {
    match outputs {
        [] => Value::Null,
        [one] => one.clone(),
        many => Value::Array(many.to_vec()),
    }
}

/// The `{object, filterResult}` item for `object`.
///
/// `filter_outputs` is `None` when the binding has no jq filter (no `filterResult`),
/// otherwise the filter's outputs (see [`filter_result`]). `keep_full_object` is the
/// binding's `keepFullObjectsInMemory`: when false the object itself is left out.
pub fn object_and_filter(
    object: &Value,
    filter_outputs: Option<&[Value]>,
    keep_full_object: bool,
) -> ObjectAndFilter {
    ObjectAndFilter {
        object: keep_full_object.then(|| object.to_string()),
        filter_result: filter_outputs.map(|outputs| filter_result(outputs).to_string()),
    }
}

/// One object of a snapshot, with the key snapshots are sorted by. The key is taken
/// before the object may be dropped, so sorting works without full objects.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotEntry {
    /// `metadata.namespace`; empty for cluster-scoped objects.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// What the hook sees.
    pub item: ObjectAndFilter,
}

impl SnapshotEntry {
    /// The entry for `object` (arguments as in [`object_and_filter`]).
    pub fn new(object: &Value, filter_outputs: Option<&[Value]>, keep_full_object: bool) -> Self {
        let metadata = |field: &str| {
            object
                .pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Self {
            namespace: metadata("namespace"),
            name: metadata("name"),
            item: object_and_filter(object, filter_outputs, keep_full_object),
        }
    }
}

/// Sorts `entries` by namespace, then name, and returns the items: what a
/// Synchronization context's `objects` and each snapshot hold.
pub fn sorted_items(mut entries: Vec<SnapshotEntry>) -> Vec<ObjectAndFilter> {
    entries.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    entries.into_iter().map(|entry| entry.item).collect()
}

/// The snapshots one context carries, collected per binding and sorted on output.
#[derive(Debug, Clone, Default)]
pub struct Snapshots {
    /// Per binding, in the order bindings were first added (the order of
    /// `includeSnapshotsFrom`).
    bindings: Vec<(String, Vec<SnapshotEntry>)>,
}

impl Snapshots {
    /// No snapshots.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `entries` to `binding`'s snapshot, creating it (possibly empty: an included
    /// binding without objects is still shown, as `[]`).
    pub fn insert(&mut self, binding: &str, entries: impl IntoIterator<Item = SnapshotEntry>) {
        let index = match self.bindings.iter().position(|(name, _)| name == binding) {
            Some(index) => index,
            None => {
                self.bindings.push((binding.to_owned(), Vec::new()));
                self.bindings.len() - 1
            }
        };
        self.bindings[index].1.extend(entries);
    }

    /// Whether no binding was added.
    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }

    /// The snapshots, each sorted by namespace then name.
    pub fn into_snapshots(self) -> Vec<Snapshot> {
        self.bindings
            .into_iter()
            .map(|(binding, entries)| Snapshot {
                binding,
                objects: sorted_items(entries),
            })
            .collect()
    }
}

fn context(binding: &str, type_: BindingType, snapshots: Vec<Snapshot>) -> BindingContext {
    BindingContext {
        binding: binding.to_owned(),
        type_,
        group: None,
        watch_event: None,
        object: None,
        objects: Vec::new(),
        snapshots,
        review: None,
    }
}

/// The context of an `onStartup` run.
pub fn on_startup() -> BindingContext {
    context("onStartup", BindingType::OnStartup, Vec::new())
}

/// The context of an ungrouped `schedule` binding firing.
pub fn schedule(binding: &str, snapshots: Vec<Snapshot>) -> BindingContext {
    context(binding, BindingType::Schedule, snapshots)
}

/// The Synchronization context of an ungrouped kubernetes binding; `objects` sorted
/// by namespace then name (see [`sorted_items`]).
pub fn synchronization(
    binding: &str,
    objects: Vec<ObjectAndFilter>,
    snapshots: Vec<Snapshot>,
) -> BindingContext {
    BindingContext {
        objects,
        ..context(binding, BindingType::Synchronization, snapshots)
    }
}

/// The Event context of an ungrouped kubernetes binding.
pub fn event(
    binding: &str,
    watch_event: WatchEvent,
    object: ObjectAndFilter,
    snapshots: Vec<Snapshot>,
) -> BindingContext {
    BindingContext {
        watch_event: Some(watch_event),
        object: Some(object),
        ..context(binding, BindingType::Event, snapshots)
    }
}

/// The context of any binding of `group` firing (schedule, Synchronization or Event
/// alike): only the group's snapshots matter.
pub fn group(group: &str, snapshots: Vec<Snapshot>) -> BindingContext {
    BindingContext {
        group: Some(group.to_owned()),
        ..context(group, BindingType::Group, snapshots)
    }
}

/// The context of a validating binding for an AdmissionReview.
pub fn validating(binding: &str, review: &Value, snapshots: Vec<Snapshot>) -> BindingContext {
    BindingContext {
        review: Some(review.to_string()),
        ..context(binding, BindingType::Validating, snapshots)
    }
}

/// The context of a conversion binding for one step's ConversionReview (its objects in
/// the step's `fromVersion`, `desiredAPIVersion` the step's `toVersion`).
pub fn conversion(binding: &str, review: &Value, snapshots: Vec<Snapshot>) -> BindingContext {
    BindingContext {
        review: Some(review.to_string()),
        ..context(binding, BindingType::Conversion, snapshots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(namespace: &str, name: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"namespace": namespace, "name": name}})
    }

    fn config_map() -> Value {
        json!({"kind": "ConfigMap", "metadata": {"namespace": "default", "name": "settings"}})
    }

    /// Every golden test also checks that the JSON reads back into the same context.
    fn golden(context: BindingContext, expected: Value) {
        let written = to_json(std::slice::from_ref(&context));
        assert_eq!(written, json!([expected]));
        let read = from_json(&written).expect("reads back");
        assert_eq!(to_json(&read), written);
    }

    #[test]
    fn on_startup_has_no_type() {
        golden(on_startup(), json!({"binding": "onStartup"}));
    }

    #[test]
    fn schedule_without_and_with_snapshots() {
        golden(
            schedule("every-minute", vec![]),
            json!({"binding": "every-minute", "type": "Schedule"}),
        );
        let mut snapshots = Snapshots::new();
        snapshots.insert("settings", [SnapshotEntry::new(&config_map(), None, true)]);
        snapshots.insert("pods", []);
        golden(
            schedule("periodic", snapshots.into_snapshots()),
            json!({
                "binding": "periodic",
                "type": "Schedule",
                "snapshots": {
                    "settings": [{"object": config_map()}],
                    "pods": [],
                },
            }),
        );
    }

    #[test]
    fn synchronization_objects_are_sorted_and_empty_is_a_list() {
        golden(
            synchronization("pods", vec![], vec![]),
            json!({"binding": "pods", "type": "Synchronization", "objects": []}),
        );
        let labels = [json!({"app": "x"})];
        let entries = vec![
            SnapshotEntry::new(&pod("kube-system", "b"), Some(&labels), true),
            SnapshotEntry::new(&pod("default", "z"), Some(&labels), true),
            SnapshotEntry::new(&pod("kube-system", "a"), Some(&labels), true),
        ];
        golden(
            synchronization("pods", sorted_items(entries), vec![]),
            json!({
                "binding": "pods",
                "type": "Synchronization",
                "objects": [
                    {"object": pod("default", "z"), "filterResult": {"app": "x"}},
                    {"object": pod("kube-system", "a"), "filterResult": {"app": "x"}},
                    {"object": pod("kube-system", "b"), "filterResult": {"app": "x"}},
                ],
            }),
        );
    }

    #[test]
    fn event_filter_result_is_absent_without_filter_and_null_when_empty() {
        let object = pod("default", "web");
        golden(
            event(
                "pods",
                WatchEvent::Added,
                object_and_filter(&object, None, true),
                vec![],
            ),
            json!({"binding": "pods", "type": "Event", "watchEvent": "Added", "object": object}),
        );
        golden(
            event(
                "pods",
                WatchEvent::Modified,
                object_and_filter(&object, Some(&[]), true),
                vec![],
            ),
            json!({
                "binding": "pods",
                "type": "Event",
                "watchEvent": "Modified",
                "object": object,
                "filterResult": null,
            }),
        );
        let outputs = [json!("web"), json!(2)];
        golden(
            event(
                "pods",
                WatchEvent::Deleted,
                object_and_filter(&object, Some(&outputs), true),
                vec![],
            ),
            json!({
                "binding": "pods",
                "type": "Event",
                "watchEvent": "Deleted",
                "object": object,
                "filterResult": ["web", 2],
            }),
        );
    }

    #[test]
    fn keep_full_objects_false_drops_object_everywhere() {
        let object = pod("default", "web");
        let outputs = [json!("web")];
        let mut snapshots = Snapshots::new();
        snapshots.insert("pods", [SnapshotEntry::new(&object, Some(&outputs), false)]);
        golden(
            event(
                "pods",
                WatchEvent::Added,
                object_and_filter(&object, Some(&outputs), false),
                snapshots.into_snapshots(),
            ),
            json!({
                "binding": "pods",
                "type": "Event",
                "watchEvent": "Added",
                "filterResult": "web",
                "snapshots": {"pods": [{"filterResult": "web"}]},
            }),
        );
    }

    #[test]
    fn group_context_names_the_group() {
        let mut snapshots = Snapshots::new();
        snapshots.insert(
            "monitor-pods",
            [
                SnapshotEntry::new(&pod("b", "x"), Some(&[json!(1)]), true),
                SnapshotEntry::new(&pod("a", "y"), Some(&[json!(2)]), true),
            ],
        );
        snapshots.insert("configmap", [SnapshotEntry::new(&config_map(), None, true)]);
        golden(
            group("pods", snapshots.into_snapshots()),
            json!({
                "binding": "pods",
                "type": "Group",
                "groupName": "pods",
                "snapshots": {
                    "monitor-pods": [
                        {"object": pod("a", "y"), "filterResult": 2},
                        {"object": pod("b", "x"), "filterResult": 1},
                    ],
                    "configmap": [{"object": config_map()}],
                },
            }),
        );
    }

    #[test]
    fn validating_carries_the_review_and_snapshots() {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "1", "operation": "CREATE"},
        });
        let mut snapshots = Snapshots::new();
        snapshots.insert("settings", [SnapshotEntry::new(&config_map(), None, true)]);
        golden(
            validating("policy.example.com", &review, snapshots.into_snapshots()),
            json!({
                "binding": "policy.example.com",
                "type": "Validating",
                "review": review,
                "snapshots": {"settings": [{"object": config_map()}]},
            }),
        );
    }

    #[test]
    fn conversion_takes_versions_from_the_review() {
        let review = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {
                "uid": "42",
                "desiredAPIVersion": "stable.example.com/v1beta1",
                "objects": [{"apiVersion": "unstable.crontab.io/v1beta1", "kind": "CronTab"}],
            },
        });
        golden(
            conversion("alpha1_to_alpha2", &review, vec![]),
            json!({
                "binding": "alpha1_to_alpha2",
                "type": "Conversion",
                "fromVersion": "unstable.crontab.io/v1beta1",
                "toVersion": "stable.example.com/v1beta1",
                "review": review,
            }),
        );
    }

    #[test]
    fn event_without_object_writes_null_like_shell_operator() {
        let mut context = event(
            "pods",
            WatchEvent::Deleted,
            object_and_filter(&Value::Null, None, false),
            vec![],
        );
        context.object = None;
        golden(
            context,
            json!({"binding": "pods", "type": "Event", "watchEvent": "Deleted", "object": null}),
        );
    }

    #[test]
    fn several_contexts_keep_their_order() {
        let contexts = [on_startup(), schedule("s", vec![])];
        assert_eq!(
            to_json(&contexts),
            json!([{"binding": "onStartup"}, {"binding": "s", "type": "Schedule"}]),
        );
    }

    #[test]
    fn invalid_json_text_is_passed_as_a_string() {
        let mut context = validating("v.example.com", &Value::Null, vec![]);
        context.review = Some("not json".to_owned());
        assert_eq!(
            context_to_json(&context),
            json!({"binding": "v.example.com", "type": "Validating", "review": "not json"}),
        );
    }

    #[test]
    fn from_json_rejects_what_is_not_a_context() {
        assert_eq!(from_json(&json!({})), Err(ContextError::NotAList));
        assert_eq!(
            from_json(&json!([1])),
            Err(ContextError::NotAnObject { index: 0 })
        );
        assert_eq!(
            from_json(&json!([{"binding": "x"}])),
            Err(ContextError::Missing {
                index: 0,
                field: "type"
            })
        );
        assert!(matches!(
            from_json(&json!([{"binding": "x", "type": "Bogus"}])),
            Err(ContextError::Invalid { field: "type", .. })
        ));
    }
}
