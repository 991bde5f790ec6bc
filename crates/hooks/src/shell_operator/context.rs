//! Binding contexts in shell-operator's JSON shapes (v1, and v0 for hooks declared in
//! the legacy format), written for script hooks and read back (v1) for fixtures and
//! `operon hook test`.
//!
//! Hooks receive typed [`BindingContext`]s; script hooks read the same contexts as the
//! JSON array shell-operator writes to `$BINDING_CONTEXT_PATH`, produced by
//! [`to_json`] (and read back by [`from_json`], for fixtures and `operon hook test`).
//! The shapes follow shell-operator's code, not its docs, where they differ:
//!
//! | type            | fields besides `binding`                                           |
//! |-----------------|--------------------------------------------------------------------|
//! | onStartup       | none (no `type`)                                                   |
//! | lifecycle       | `snapshots` (`{}` when empty; no `type`)                           |
//! | Schedule        | `type`, `snapshots`?                                               |
//! | Synchronization | `type`, `objects` (`[]` when empty), `snapshots`?                  |
//! | Event           | `type`, `watchEvent`, `object`, `filterResult`?, `snapshots`?      |
//! | Group           | `type`, `groupName`, `snapshots`? (`binding`: the one that fired)  |
//! | Validating      | `type`, `review`, `snapshots`?                                     |
//! | Mutating        | `type`, `review`, `snapshots`?                                     |
//! | Conversion      | `type`, `fromVersion`, `toVersion`, `review`, `snapshots`?         |
//!
//! A hook whose configuration has no `configVersion` (v0) gets shell-operator's v0
//! shapes instead (`to_json_v0`): `binding` alone, and for kubernetes events
//! `resourceEvent` (`add`, `update`, `delete`) with the object's `resourceNamespace`,
//! `resourceKind` and `resourceName`.
//!
//! A lifecycle context is addon-operator's (`beforeAll`, `afterAll`, `beforeHelm`,
//! `afterHelm`, `beforeDeleteHelm`, `afterDeleteHelm`): typed as onStartup (no
//! `type`) but named after its binding, it carries every snapshot of the hook's
//! kubernetes bindings, so `snapshots` is always written, as addon-operator's
//! `IncludeAllSnapshots` does.
//!
//! Otherwise `snapshots` appears when the context carries at least one snapshot. In each
//! `{object, filterResult}` item `object` is absent when the binding does not keep full
//! objects, and `filterResult` is absent when the binding has no jq filter, `null` when
//! the filter produced nothing, and an array when it produced several values.

use super::json_text;
use operon_data::model::{
    BindingContext, BindingType, ConfigVersion, ObjectAndFilter, Snapshot, WatchEvent,
};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// addon-operator's lifecycle bindings, whose contexts carry all the hook's snapshots.
pub(crate) const LIFECYCLE_BINDINGS: [&str; 6] = [
    "beforeAll",
    "afterAll",
    "beforeHelm",
    "afterHelm",
    "beforeDeleteHelm",
    "afterDeleteHelm",
];

/// Whether `context` is one of addon-operator's lifecycle contexts.
fn is_lifecycle(context: &BindingContext) -> bool {
    context.type_ == BindingType::OnStartup
        && LIFECYCLE_BINDINGS.contains(&context.binding.as_str())
}

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

/// A binding context on its way out. The contract's JSON texts (objects, filter results,
/// reviews) are carried as they are and written into the document unchanged: a run that
/// collected thousands of events (a queue behind a slow API server) would otherwise
/// parse each Pod into a `serde_json::Value`, about ten times its text, only to write
/// it again.
enum Out<'a> {
    Value(Value),
    Raw(&'a RawValue),
    /// Sorted by key, as a `serde_json::Map` writes them.
    Map(BTreeMap<Cow<'a, str>, Out<'a>>),
    List(Vec<Out<'a>>),
}

impl Serialize for Out<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Value(value) => value.serialize(serializer),
            Self::Raw(raw) => raw.serialize(serializer),
            Self::Map(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in map {
                    out.serialize_entry(key, value)?;
                }
                out.end()
            }
            Self::List(items) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    out.serialize_element(item)?;
                }
                out.end()
            }
        }
    }
}

/// A JSON-text field as it is written: the text itself when it is one JSON value,
/// otherwise a JSON string holding it (as [`json_text`]).
fn raw_text(text: &str) -> Out<'_> {
    match serde_json::from_str::<&RawValue>(text) {
        Ok(raw) => Out::Raw(raw),
        Err(_) => Out::Value(Value::String(text.to_owned())),
    }
}

fn string(text: &str) -> Out<'static> {
    Out::Value(Value::String(text.to_owned()))
}

/// The JSON array shell-operator writes to `$BINDING_CONTEXT_PATH` for `contexts`.
///
/// JSON-valued fields of the contract are JSON text; a field whose text does not parse
/// (which contexts built with this module's helpers never have) is written as a JSON
/// string holding the text, so the hook still sees it.
pub fn to_json(contexts: &[BindingContext]) -> Value {
    Value::Array(contexts.iter().map(context_to_json).collect())
}

/// The JSON array a hook declared in `version`'s format reads from
/// `$BINDING_CONTEXT_PATH`.
pub fn to_json_for(version: ConfigVersion, contexts: &[BindingContext]) -> Value {
    match version {
        ConfigVersion::V0 => to_json_v0(contexts),
        ConfigVersion::V1 => to_json(contexts),
    }
}

/// [`to_json_for`] as the compact text a script hook reads, written without turning
/// the objects into values (they are copied from their texts).
pub fn to_text_for(version: ConfigVersion, contexts: &[BindingContext]) -> String {
    let mut text = Vec::new();
    // Writing into memory fails only on a map key that is not a string; every key
    // here is one.
    let _ = write_for(version, contexts, &mut text);
    String::from_utf8(text).unwrap_or_default()
}

/// [`to_text_for`] written to `out` as it is made: a Synchronization run of tens of
/// thousands of objects does not hold its whole text in memory first.
pub fn write_for(
    version: ConfigVersion,
    contexts: &[BindingContext],
    out: impl std::io::Write,
) -> std::io::Result<()> {
    match version {
        ConfigVersion::V0 => serde_json::to_writer(out, &to_json_v0(contexts))?,
        ConfigVersion::V1 => {
            let list = Out::List(contexts.iter().map(context_out).collect());
            serde_json::to_writer(out, &list)?;
        }
    }
    Ok(())
}

/// The JSON array shell-operator writes for a hook declared in the v0 format.
pub(crate) fn to_json_v0(contexts: &[BindingContext]) -> Value {
    Value::Array(contexts.iter().map(context_to_json_v0).collect())
}

/// One binding context in shell-operator's v0 shape: `binding` for every type, and the
/// event with the object's identity for kubernetes contexts (the only ones v0 has).
pub(crate) fn context_to_json_v0(context: &BindingContext) -> Value {
    let mut out = Map::new();
    out.insert("binding".into(), Value::String(context.binding.clone()));
    let item = match context.type_ {
        BindingType::Event => context.object.as_ref(),
        // Never sent to a v0 hook by the engine (v0 bindings run no Synchronization),
        // but written as shell-operator would: no event, the first object.
        BindingType::Synchronization => context.objects.first(),
        _ => return Value::Object(out),
    };
    let event = match context.watch_event {
        Some(WatchEvent::Added) => "add",
        Some(WatchEvent::Modified) => "update",
        Some(WatchEvent::Deleted) => "delete",
        None => "",
    };
    out.insert("resourceEvent".into(), Value::String(event.into()));
    let object = item
        .and_then(|item| item.object.as_deref())
        .and_then(|text| serde_json::from_str::<Value>(text).ok());
    if let Some(object) = object {
        let text = |value: Option<&Value>| {
            Value::String(value.and_then(Value::as_str).unwrap_or_default().to_owned())
        };
        let metadata = object.get("metadata");
        out.insert(
            "resourceNamespace".into(),
            text(metadata.and_then(|m| m.get("namespace"))),
        );
        out.insert("resourceKind".into(), text(object.get("kind")));
        out.insert(
            "resourceName".into(),
            text(metadata.and_then(|m| m.get("name"))),
        );
    }
    Value::Object(out)
}

/// One binding context as a JSON object.
pub(crate) fn context_to_json(context: &BindingContext) -> Value {
    // serde_json reads each raw text back into a value here; it fails only on a map
    // key that is not a string, and every key here is one.
    serde_json::to_value(context_out(context)).unwrap_or(Value::Null)
}

fn context_out(context: &BindingContext) -> Out<'_> {
    let mut out = BTreeMap::new();
    out.insert(Cow::Borrowed("binding"), string(&context.binding));
    if is_lifecycle(context) {
        out.insert(Cow::Borrowed("snapshots"), snapshots_out(context));
        return Out::Map(out);
    }
    let type_name = match context.type_ {
        BindingType::OnStartup => return Out::Map(out),
        BindingType::Schedule => "Schedule",
        BindingType::Synchronization => "Synchronization",
        BindingType::Event => "Event",
        BindingType::Group => "Group",
        BindingType::Validating => "Validating",
        BindingType::Mutating => "Mutating",
        BindingType::Conversion => "Conversion",
    };
    out.insert(Cow::Borrowed("type"), string(type_name));
    match context.type_ {
        BindingType::Synchronization => {
            let objects = context.objects.iter().map(item_out).collect();
            out.insert(Cow::Borrowed("objects"), Out::List(objects));
        }
        BindingType::Event => {
            if let Some(event) = context.watch_event {
                out.insert(Cow::Borrowed("watchEvent"), string(event.as_str()));
            }
            match &context.object {
                Some(item) => insert_item(&mut out, item),
                // What shell-operator writes for an event without an object.
                None => {
                    out.insert(Cow::Borrowed("object"), Out::Value(Value::Null));
                }
            }
        }
        BindingType::Group => {
            let group = context.group.as_ref().unwrap_or(&context.binding);
            out.insert(Cow::Borrowed("groupName"), string(group));
        }
        BindingType::Validating | BindingType::Mutating => {
            let review = context
                .review
                .as_deref()
                .map_or(Out::Value(Value::Null), raw_text);
            out.insert(Cow::Borrowed("review"), review);
        }
        BindingType::Conversion => {
            let review = review_json(context);
            let (from, to) = conversion_versions(&review);
            out.insert(
                Cow::Borrowed("fromVersion"),
                Out::Value(Value::String(from)),
            );
            out.insert(Cow::Borrowed("toVersion"), Out::Value(Value::String(to)));
            out.insert(Cow::Borrowed("review"), Out::Value(review));
        }
        BindingType::OnStartup | BindingType::Schedule => {}
    }
    if !context.snapshots.is_empty() {
        out.insert(Cow::Borrowed("snapshots"), snapshots_out(context));
    }
    Out::Map(out)
}

fn snapshots_out(context: &BindingContext) -> Out<'_> {
    let snapshots = context
        .snapshots
        .iter()
        .map(|s| {
            let items = s.objects.iter().map(item_out).collect();
            (Cow::Borrowed(s.binding.as_str()), Out::List(items))
        })
        .collect();
    Out::Map(snapshots)
}

fn insert_item<'a>(out: &mut BTreeMap<Cow<'a, str>, Out<'a>>, item: &'a ObjectAndFilter) {
    if let Some(object) = &item.object {
        out.insert(Cow::Borrowed("object"), raw_text(object));
    }
    if let Some(result) = &item.filter_result {
        out.insert(Cow::Borrowed("filterResult"), raw_text(result));
    }
}

fn item_out(item: &ObjectAndFilter) -> Out<'_> {
    let mut out = BTreeMap::new();
    insert_item(&mut out, item);
    Out::Map(out)
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
        None if binding == "onStartup" || LIFECYCLE_BINDINGS.contains(&binding.as_str()) => {
            BindingType::OnStartup
        }
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
            "Mutating" => BindingType::Mutating,
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
                    "Added" => operon_data::model::WatchEvent::Added,
                    "Modified" => operon_data::model::WatchEvent::Modified,
                    "Deleted" => operon_data::model::WatchEvent::Deleted,
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
        BindingType::Validating | BindingType::Mutating | BindingType::Conversion => {
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
            .map(|object| object.to_string().into()),
        filter_result: map
            .get("filterResult")
            .map(|result| result.to_string().into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::context::{
        event, group, lifecycle, mutating, object_and_filter, on_startup, schedule,
        synchronization, validating,
    };
    use serde_json::json;

    /// The text a script hook reads is the values' text: the same document, the same
    /// bytes, for every kind of context, though no object was parsed to write it.
    #[test]
    fn the_text_is_the_json_written_compactly() {
        let pod = json!({"kind": "Pod", "metadata": {"name": "web", "namespace": "a"},
                         "spec": {"n": 1.5, "s": "q\"u\u{e9}"}});
        let item = object_and_filter(&pod, Some(&[json!("web"), json!(null)]), true);
        let pods = Snapshot {
            binding: "pods".to_owned(),
            objects: vec![item.clone(), object_and_filter(&pod, None, false)],
        };
        let mut broken = validating("v", "{}".to_owned(), vec![]);
        broken.review = Some("not json".to_owned());
        let mut without_object = event("pods", WatchEvent::Deleted, item.clone(), vec![]);
        without_object.object = None;
        let contexts = [
            on_startup(),
            lifecycle("beforeHelm", vec![pods.clone()]),
            schedule("nightly", vec![pods.clone()]),
            synchronization("pods", vec![item.clone()], vec![pods.clone()]),
            event("pods", WatchEvent::Modified, item, vec![pods.clone()]),
            without_object,
            group("pods", "main", vec![pods]),
            mutating("m", json!({"request": {"uid": "1"}}).to_string(), vec![]),
            broken,
        ];
        let text = to_text_for(ConfigVersion::V1, &contexts);
        assert_eq!(text, to_json(&contexts).to_string());
        assert_eq!(
            to_text_for(ConfigVersion::V0, &contexts),
            to_json_v0(&contexts).to_string()
        );
    }

    /// An object's text goes into the document as it is (the engine's texts are
    /// compact, so nothing changes for them).
    #[test]
    fn an_objects_text_is_written_as_it_is() {
        let item = ObjectAndFilter {
            object: Some(r#"{"z": 1, "a": [ 2 ]}"#.into()),
            filter_result: Some("not json".into()),
        };
        let text = to_text_for(
            ConfigVersion::V1,
            &[event("pods", WatchEvent::Added, item, vec![])],
        );
        assert_eq!(
            text,
            r#"[{"binding":"pods","filterResult":"not json","object":{"z": 1, "a": [ 2 ]},"type":"Event","watchEvent":"Added"}]"#
        );
    }

    #[test]
    fn lifecycle_contexts_always_carry_snapshots_and_read_back() {
        let pods = Snapshot {
            binding: "pods".to_owned(),
            objects: vec![ObjectAndFilter {
                object: None,
                filter_result: Some(r#""web""#.into()),
            }],
        };
        let written = to_json(&[
            lifecycle("beforeHelm", vec![pods]),
            lifecycle("afterAll", Vec::new()),
            lifecycle("onStartup", Vec::new()),
        ]);
        assert_eq!(
            written,
            serde_json::json!([
                {"binding": "beforeHelm", "snapshots": {"pods": [{"filterResult": "web"}]}},
                {"binding": "afterAll", "snapshots": {}},
                {"binding": "onStartup"},
            ])
        );
        let read = from_json(&written).unwrap();
        assert_eq!(read[0].type_, BindingType::OnStartup);
        assert_eq!(read[0].snapshots[0].binding, "pods");
        assert_eq!(to_json(&read), written);
        // Any other binding without a type is still refused.
        let err = from_json(&serde_json::json!([{"binding": "pods"}])).unwrap_err();
        assert_eq!(
            err,
            ContextError::Missing {
                index: 0,
                field: "type"
            }
        );
    }
}
