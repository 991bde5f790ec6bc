//! Strategic merge patch (`application/strategic-merge-patch+json`) for the built-in
//! kinds the local cluster knows: maps merge, `null` deletes, lists merge by their
//! patch merge key (containers by `name`, container ports by `containerPort`, ...) as
//! the table below records from the Kubernetes types' `patchStrategy` tags, other lists
//! are replaced; with the directives `$patch: replace|delete|merge`, `$retainKeys`,
//! `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>` kubectl sends.
//! The same table tells server-side apply which lists are maps ([`super::managed`]).
//! No maintained Rust crate implements this; the API server's table is per Go type,
//! this one per field path and kind, which is the same for the kinds listed.

use super::super::resources::{self, ResourceInfo};
use crate::Resource;
use serde_json::{Map, Value};

pub(crate) const STRATEGIC: &str = "application/strategic-merge-patch+json";
pub(crate) const MERGE: &str = "application/merge-patch+json";
pub(crate) const JSON_PATCH: &str = "application/json-patch+json";
pub(crate) const APPLY: &str = "application/apply-patch+yaml";

/// Whether the kind is one of Kubernetes' own (its Go types carry patch strategies);
/// custom resources, Operon's own kinds included, are not.
pub(crate) fn is_builtin(resource: &Resource) -> bool {
    resource.group != "operon.dev" && resources::builtin().iter().any(|info| info.is(resource))
}

/// The patch content types the kind accepts, as the API server lists them.
pub(crate) fn patch_types(info: &ResourceInfo) -> Vec<&'static str> {
    let mut types = vec![JSON_PATCH, MERGE];
    if is_builtin(&info.resource) {
        types.push(STRATEGIC);
    }
    types.push(APPLY);
    types
}

/// How a list merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// Items are objects merged by this key.
    Key(&'static str),
    /// A list of scalars merged as a set.
    Set,
    /// The patch's list replaces the object's.
    Replace,
}

/// Field-path suffixes and their merge strategies (from the `patchStrategy` and
/// `patchMergeKey` tags of k8s.io/api).
const TABLE: &[(&[&str], ListStrategy)] = &[
    (&["containers"], ListStrategy::Key("name")),
    (&["initContainers"], ListStrategy::Key("name")),
    (&["ephemeralContainers"], ListStrategy::Key("name")),
    (&["containers", "ports"], ListStrategy::Key("containerPort")),
    (
        &["initContainers", "ports"],
        ListStrategy::Key("containerPort"),
    ),
    (&["containers", "env"], ListStrategy::Key("name")),
    (&["initContainers", "env"], ListStrategy::Key("name")),
    (
        &["containers", "volumeMounts"],
        ListStrategy::Key("mountPath"),
    ),
    (
        &["initContainers", "volumeMounts"],
        ListStrategy::Key("mountPath"),
    ),
    (
        &["containers", "volumeDevices"],
        ListStrategy::Key("devicePath"),
    ),
    (&["spec", "volumes"], ListStrategy::Key("name")),
    (&["spec", "imagePullSecrets"], ListStrategy::Key("name")),
    (&["spec", "hostAliases"], ListStrategy::Key("ip")),
    (
        &["spec", "topologySpreadConstraints"],
        ListStrategy::Key("topologyKey"),
    ),
    (&["spec", "resourceClaims"], ListStrategy::Key("name")),
    (&["status", "conditions"], ListStrategy::Key("type")),
    (&["status", "addresses"], ListStrategy::Key("type")),
    (&["status", "podIPs"], ListStrategy::Key("ip")),
    (&["metadata", "finalizers"], ListStrategy::Set),
    (&["metadata", "ownerReferences"], ListStrategy::Key("uid")),
    (&["spec", "finalizers"], ListStrategy::Set),
];

/// How the list at `path` (field names from the object's root) of a `kind` merges.
pub(crate) fn list_strategy(resource: &Resource, path: &[String]) -> ListStrategy {
    if !is_builtin(resource) {
        return ListStrategy::Replace;
    }
    // A Service's ports merge by port; Pods' by containerPort (the rows above).
    if resource.kind == "Service" && path == ["spec", "ports"] {
        return ListStrategy::Key("port");
    }
    if resource.kind == "ServiceAccount" && path == ["secrets"] {
        return ListStrategy::Key("name");
    }
    TABLE
        .iter()
        .find(|(suffix, _)| path.ends_with_str(suffix))
        .map_or(ListStrategy::Replace, |(_, strategy)| *strategy)
}

trait EndsWithStr {
    fn ends_with_str(&self, suffix: &[&str]) -> bool;
}

impl EndsWithStr for [String] {
    fn ends_with_str(&self, suffix: &[&str]) -> bool {
        self.len() >= suffix.len()
            && self[self.len() - suffix.len()..]
                .iter()
                .zip(suffix)
                .all(|(a, b)| a == b)
    }
}

/// Applies a strategic merge `patch` to `object` of a built-in kind.
pub(crate) fn patch(resource: &Resource, object: &Value, patch: &Value) -> Result<Value, String> {
    let (Value::Object(target), Value::Object(patch)) = (object, patch) else {
        return Err("a strategic merge patch must be a JSON object".to_owned());
    };
    let mut merged = target.clone();
    let mut path = Vec::new();
    match merge_map(resource, &mut merged, patch, &mut path)? {
        Outcome::Keep => Ok(Value::Object(merged)),
        Outcome::Delete => Err("$patch: delete at the top level deletes nothing".to_owned()),
    }
}

enum Outcome {
    Keep,
    Delete,
}

fn merge_map(
    resource: &Resource,
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<Outcome, String> {
    match patch.get("$patch").map(|d| d.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("replace")) => {
            *target = clean(patch);
            return Ok(Outcome::Keep);
        }
        Some(Some("delete")) => return Ok(Outcome::Delete),
        Some(other) => return Err(format!("unknown $patch directive {other:?}")),
    }
    let mut orders = Vec::new();
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$setElementOrder/") {
            orders.push((field.to_owned(), value));
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let remove = value.as_array().cloned().unwrap_or_default();
            if let Some(Value::Array(list)) = target.get_mut(field) {
                list.retain(|item| !remove.contains(item));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        path.push(key.clone());
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(fields) => {
                let entry = target
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !entry.is_object() {
                    *entry = Value::Object(Map::new());
                }
                let Value::Object(inner) = entry else {
                    unreachable!("made an object just above")
                };
                if let Outcome::Delete = merge_map(resource, inner, fields, path)? {
                    target.remove(key);
                }
            }
            Value::Array(items) => {
                let mut list = match target.remove(key) {
                    Some(Value::Array(list)) => list,
                    _ => Vec::new(),
                };
                merge_list(resource, &mut list, items, path)?;
                target.insert(key.clone(), Value::Array(list));
            }
            scalar => {
                target.insert(key.clone(), scalar.clone());
            }
        }
        path.pop();
    }
    for (field, order) in orders {
        path.push(field.clone());
        if let (Some(Value::Array(list)), Some(order)) = (target.get_mut(&field), order.as_array())
        {
            reorder(resource, list, order, path);
        }
        path.pop();
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        target.retain(|key, _| keep.iter().any(|k| k.as_str() == Some(key)));
    }
    Ok(Outcome::Keep)
}

fn merge_list(
    resource: &Resource,
    target: &mut Vec<Value>,
    patch: &[Value],
    path: &mut Vec<String>,
) -> Result<(), String> {
    let strategy = list_strategy(resource, path);
    let directive = |item: &Value| {
        item.get("$patch")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if patch
        .iter()
        .any(|item| directive(item).as_deref() == Some("replace"))
    {
        *target = patch
            .iter()
            .filter(|item| directive(item).is_none())
            .map(clean_value)
            .collect();
        return Ok(());
    }
    match strategy {
        ListStrategy::Replace => *target = patch.iter().map(clean_value).collect(),
        ListStrategy::Set => {
            for item in patch {
                if !target.contains(item) {
                    target.push(item.clone());
                }
            }
        }
        ListStrategy::Key(key) => {
            for item in patch {
                let Value::Object(fields) = item else {
                    return Err(format!(
                        "{}: items must be objects with the merge key {key:?}",
                        path.join(".")
                    ));
                };
                let Some(wanted) = fields.get(key) else {
                    return Err(format!(
                        "{}: an item does not contain declared merge key {key:?}",
                        path.join(".")
                    ));
                };
                let found = target.iter().position(|t| t.get(key) == Some(wanted));
                match (directive(item).as_deref(), found) {
                    (Some("delete"), Some(index)) => {
                        target.remove(index);
                    }
                    (Some("delete"), None) => {}
                    (_, Some(index)) => {
                        if let Value::Object(existing) = &mut target[index]
                            && let Outcome::Delete = merge_map(resource, existing, fields, path)?
                        {
                            target.remove(index);
                        }
                    }
                    (_, None) => target.push(Value::Object(clean(fields))),
                }
            }
        }
    }
    Ok(())
}

/// Orders the items of `list` as `$setElementOrder` lists them; items it does not list
/// keep their order after those it does.
fn reorder(resource: &Resource, list: &mut [Value], order: &[Value], path: &[String]) {
    let position = |item: &Value| match list_strategy(resource, path) {
        ListStrategy::Key(key) => order
            .iter()
            .position(|o| o.get(key).is_some() && o.get(key) == item.get(key)),
        _ => order.iter().position(|o| o == item),
    };
    list.sort_by_key(|item| position(item).unwrap_or(usize::MAX));
}

/// A patch's object without its directives.
fn clean(fields: &Map<String, Value>) -> Map<String, Value> {
    fields
        .iter()
        .filter(|(key, _)| !key.starts_with('$'))
        .map(|(key, value)| (key.clone(), clean_value(value)))
        .collect()
}

fn clean_value(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(clean(fields)),
        Value::Array(items) => Value::Array(items.iter().map(clean_value).collect()),
        other => other.clone(),
    }
}
