//! Builders of binding contexts: what each kind of run (onStartup, schedule,
//! Synchronization, Event, Group, Validating, Mutating, Conversion) carries, and snapshots sorted
//! the way shell-operator sorts them (namespace, then name).
//!
//! The JSON shapes script hooks read are written by
//! [`crate::shell_operator::context`]; the tests here check that the builders produce
//! exactly shell-operator's shapes through it.

use operon_data::model::{BindingContext, BindingType, ObjectAndFilter, Snapshot, WatchEvent};
use serde_json::Value;
use std::sync::Arc;

/// The `{object, filterResult}` item for `object`.
///
/// `filter_outputs` is `None` when the binding has no jq filter (no `filterResult`),
/// otherwise the filter's outputs: the `filterResult` is `null` for none, the value for
/// one, an array for several (shell-operator's rule). `keep_full_object` is the
/// binding's `keepFullObjectsInMemory`: when false the object itself is left out.
pub fn object_and_filter(
    object: &Value,
    filter_outputs: Option<&[Value]>,
    keep_full_object: bool,
) -> ObjectAndFilter {
    ObjectAndFilter {
        object: keep_full_object.then(|| compact_text(object, shared)),
        filter_result: filter_outputs.map(|outputs| filter_text(outputs, shared)),
    }
}

/// The `filterResult` text of a filter's outputs, made by `make` from the text.
pub(crate) fn filter_text<T>(outputs: &[Value], make: impl FnOnce(&str) -> T) -> T {
    match outputs {
        [] => make("null"),
        [one] => compact_text(one, make),
        many => compact_text(many, make),
    }
}

/// A text as an `Arc`, for [`compact_text`] (a function, so the borrow it takes is
/// any caller's).
pub(crate) fn shared(text: &str) -> Arc<str> {
    Arc::from(text)
}

/// A text boxed to its length, for [`compact_text`].
pub(crate) fn boxed(text: &str) -> Box<str> {
    Box::from(text)
}

/// `value` as compact JSON, handed to `make`, which copies it once into the string it
/// keeps (shared or boxed, of exactly its length: it is kept for as long as the object
/// is watched). Written into a reused buffer rather than grown step by step through
/// `fmt::Write` and shrunk (`Value::to_string`), which was a sixth of an event's cost
/// outside the hook call in a profile of the hook loop.
pub(crate) fn compact_text<T>(
    value: &(impl serde::Serialize + ?Sized),
    make: impl FnOnce(&str) -> T,
) -> T {
    thread_local! {
        static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUFFER.with_borrow_mut(|buffer| {
        buffer.clear();
        serde_json::to_writer(&mut *buffer, value)
            .expect("a JSON value always serializes into memory");
        let text = std::str::from_utf8(buffer).expect("serde_json writes UTF-8");
        let text = make(text);
        // A huge object must not pin its size in every thread's buffer.
        if buffer.capacity() > 1 << 20 {
            *buffer = Vec::new();
        }
        text
    })
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
    pub(crate) item: ObjectAndFilter,
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

/// The context of an addon module's lifecycle binding (`beforeHelm`, `afterAll`...),
/// which addon-operator gives the type `onStartup`, with the snapshots it includes.
pub fn lifecycle(binding: &str, snapshots: Vec<Snapshot>) -> BindingContext {
    context(binding, BindingType::OnStartup, snapshots)
}

/// The context of an ungrouped `schedule` binding firing.
pub fn schedule(binding: &str, snapshots: Vec<Snapshot>) -> BindingContext {
    context(binding, BindingType::Schedule, snapshots)
}

/// The Synchronization context of an ungrouped kubernetes binding; `objects` sorted
/// by namespace then name (see [`sorted_items`]).
pub(crate) fn synchronization(
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

/// The context of `binding` of `group` firing (schedule, Synchronization or Event
/// alike): only the group's snapshots matter. `binding` names the binding that fired, as
/// shell-operator's code sends it (its docs suggest the group's name); the group is in
/// `group` (`groupName` in shell-operator's JSON).
pub fn group(binding: &str, group: &str, snapshots: Vec<Snapshot>) -> BindingContext {
    BindingContext {
        group: Some(group.to_owned()),
        ..context(binding, BindingType::Group, snapshots)
    }
}

/// The context of a validating binding for an AdmissionReview (its JSON text, as it
/// arrived).
pub fn validating(binding: &str, review: String, snapshots: Vec<Snapshot>) -> BindingContext {
    BindingContext {
        review: Some(review),
        ..context(binding, BindingType::Validating, snapshots)
    }
}

/// The context of a mutating binding for an AdmissionReview (its JSON text, as it
/// arrived).
pub fn mutating(binding: &str, review: String, snapshots: Vec<Snapshot>) -> BindingContext {
    BindingContext {
        review: Some(review),
        ..context(binding, BindingType::Mutating, snapshots)
    }
}

/// The context of a conversion binding for one step's ConversionReview (its objects in
/// the step's `fromVersion`, `desiredAPIVersion` the step's `toVersion`).
pub(crate) fn conversion(
    binding: &str,
    review: String,
    snapshots: Vec<Snapshot>,
) -> BindingContext {
    BindingContext {
        review: Some(review),
        ..context(binding, BindingType::Conversion, snapshots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell_operator::context::{
        ContextError, context_to_json, from_json, to_json, to_json_v0,
    };
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
    fn v0_contexts_carry_the_event_and_the_objects_identity_only() {
        let object = pod("default", "web");
        let contexts = [
            on_startup(),
            schedule("nightly", vec![]),
            event(
                "pods",
                WatchEvent::Added,
                object_and_filter(&object, Some(&[json!("x")]), true),
                vec![],
            ),
            event(
                "pods",
                WatchEvent::Modified,
                object_and_filter(&object, None, true),
                vec![],
            ),
            event(
                "onKubernetesEvent",
                WatchEvent::Deleted,
                object_and_filter(
                    &json!({"kind": "Namespace", "metadata": {"name": "x"}}),
                    None,
                    true,
                ),
                vec![],
            ),
        ];
        assert_eq!(
            to_json_v0(&contexts),
            json!([
                {"binding": "onStartup"},
                {"binding": "nightly"},
                {"binding": "pods", "resourceEvent": "add", "resourceNamespace": "default",
                 "resourceKind": "Pod", "resourceName": "web"},
                {"binding": "pods", "resourceEvent": "update", "resourceNamespace": "default",
                 "resourceKind": "Pod", "resourceName": "web"},
                {"binding": "onKubernetesEvent", "resourceEvent": "delete",
                 "resourceNamespace": "", "resourceKind": "Namespace", "resourceName": "x"},
            ])
        );
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
    fn group_context_names_the_binding_that_fired_and_the_group() {
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
            group("monitor-pods", "pods", snapshots.into_snapshots()),
            json!({
                "binding": "monitor-pods",
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
            validating(
                "policy.example.com",
                review.to_string(),
                snapshots.into_snapshots(),
            ),
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
            conversion("alpha1_to_alpha2", review.to_string(), vec![]),
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
        let mut context = validating("v.example.com", Value::Null.to_string(), vec![]);
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
