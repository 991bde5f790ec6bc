//! Field managers: `metadata.managedFields` kept as the API server keeps them
//! (`fieldsV1` sets per manager and operation), server-side apply over them, and the
//! ownership an ordinary write (`Update`) takes of the fields it changes.
//!
//! Apply: a manager's applied configuration is merged into the object (maps by key,
//! lists as [`strategic::list_strategy`] says: by merge key for the built-in kinds,
//! atomic otherwise); fields it applied before and no longer applies are removed unless
//! another manager owns them; changing a field another manager owns is a conflict
//! unless forced, which moves the field to the applier. Not modelled: `x-kubernetes-
//! list-type` of custom resources (their lists are atomic), sets of scalars (atomic),
//! and ownership of status subresource writes.

use super::super::resources::ResourceInfo;
use super::super::write;
use super::strategic::{self, ListStrategy};
use crate::Resource;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// A field: `f:spec`, `f:containers`, `k:{"name":"app"}`, ... from the object's root.
type FieldPath = Vec<String>;
type FieldSet = BTreeSet<FieldPath>;

/// One entry of `metadata.managedFields`.
struct Entry {
    manager: String,
    /// `Apply` or `Update`.
    operation: String,
    api_version: String,
    time: String,
    fields: FieldSet,
}

/// The fields set in `object` (its leaves, and each item of a keyed list), without
/// those the server owns and, for a kind with a status subresource, `.status`.
fn fields(info: &ResourceInfo, object: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    if let Value::Object(map) = object {
        for (key, value) in map {
            if key == "apiVersion" || key == "kind" || (key == "status" && info.status_subresource)
            {
                continue;
            }
            if key == "metadata"
                && let Value::Object(metadata) = value
            {
                let mut kept = metadata.clone();
                for owned in [
                    "name",
                    "namespace",
                    "uid",
                    "resourceVersion",
                    "generation",
                    "creationTimestamp",
                    "managedFields",
                    "deletionTimestamp",
                    "selfLink",
                ] {
                    kept.remove(owned);
                }
                if !kept.is_empty() {
                    let mut names = vec![key.clone()];
                    let mut path = vec![format!("f:{key}")];
                    walk(
                        &info.resource,
                        &Value::Object(kept),
                        &mut names,
                        &mut path,
                        &mut out,
                    );
                }
                continue;
            }
            let mut names = vec![key.clone()];
            let mut path = vec![format!("f:{key}")];
            walk(&info.resource, value, &mut names, &mut path, &mut out);
        }
    }
    out
}

fn walk(
    resource: &Resource,
    value: &Value,
    names: &mut Vec<String>,
    path: &mut FieldPath,
    out: &mut FieldSet,
) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, inner) in map {
                names.push(key.clone());
                path.push(format!("f:{key}"));
                walk(resource, inner, names, path, out);
                path.pop();
                names.pop();
            }
        }
        Value::Array(items) => match strategic::list_strategy(resource, names) {
            ListStrategy::Key(key) if items.iter().all(|i| i.get(key).is_some()) => {
                for item in items {
                    path.push(item_key(key, &item[key]));
                    out.insert(path.clone());
                    walk(resource, item, names, path, out);
                    path.pop();
                }
                if items.is_empty() {
                    out.insert(path.clone());
                }
            }
            _ => {
                out.insert(path.clone());
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

fn item_key(key: &str, value: &Value) -> String {
    format!("k:{}", json!({ key: value }))
}

/// The value at `path`, if set.
fn value_at<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(object, |value, element| step(value, element))
}

fn step<'a>(value: &'a Value, element: &str) -> Option<&'a Value> {
    if let Some(field) = element.strip_prefix("f:") {
        return value.get(field);
    }
    let (key, wanted) = keyed(element)?;
    value
        .as_array()?
        .iter()
        .find(|item| item.get(&key) == Some(&wanted))
}

/// The key and value of a `k:{...}` element.
fn keyed(element: &str) -> Option<(String, Value)> {
    let map: Map<String, Value> = serde_json::from_str(element.strip_prefix("k:")?).ok()?;
    map.into_iter().next()
}

/// Removes the field at `path` (an item of a keyed list, or a map's key).
fn remove_at(object: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut value = object;
    for element in parents {
        let next = if let Some(field) = element.strip_prefix("f:") {
            value.get_mut(field)
        } else {
            keyed(element).and_then(|(key, wanted)| {
                value
                    .as_array_mut()?
                    .iter_mut()
                    .find(|item| item.get(&key) == Some(&wanted))
            })
        };
        match next {
            Some(next) => value = next,
            None => return,
        }
    }
    if let Some(field) = last.strip_prefix("f:") {
        if let Value::Object(map) = value {
            map.remove(field);
        }
    } else if let (Some((key, wanted)), Value::Array(items)) = (keyed(last), value) {
        items.retain(|item| item.get(&key) != Some(&wanted));
    }
}

/// A `fieldsV1` tree of a set.
fn to_tree(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for element in path {
            let child = node
                .entry(element.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            node = child.as_object_mut().expect("only objects are inserted");
        }
        node.insert(".".to_owned(), Value::Object(Map::new()));
    }
    fn prune(node: &mut Map<String, Value>) {
        if node.len() == 1 && node.contains_key(".") {
            node.clear();
            return;
        }
        for (key, child) in node.iter_mut() {
            if key != "."
                && let Value::Object(child) = child
            {
                prune(child);
            }
        }
    }
    prune(&mut root);
    Value::Object(root)
}

fn from_tree(tree: &Value, prefix: &mut FieldPath, out: &mut FieldSet) {
    let Value::Object(node) = tree else { return };
    for (key, child) in node {
        if key == "." {
            out.insert(prefix.clone());
            continue;
        }
        prefix.push(key.clone());
        match child {
            Value::Object(inner) if !inner.is_empty() => from_tree(child, prefix, out),
            _ => {
                out.insert(prefix.clone());
            }
        }
        prefix.pop();
    }
}

fn entries(object: Option<&Value>) -> Vec<Entry> {
    let Some(list) = object
        .and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .filter(|e| e.get("subresource").is_none())
        .map(|e| {
            let text = |f: &str| {
                e.get(f)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let mut fields = FieldSet::new();
            if let Some(tree) = e.get("fieldsV1") {
                from_tree(tree, &mut Vec::new(), &mut fields);
            }
            Entry {
                manager: text("manager"),
                operation: text("operation"),
                api_version: text("apiVersion"),
                time: text("time"),
                fields,
            }
        })
        .collect()
}

fn store(object: &mut Value, entries: Vec<Entry>) {
    let list: Vec<Value> = entries
        .into_iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_tree(&e.fields),
            })
        })
        .collect();
    let metadata = write::metadata_mut(object);
    if list.is_empty() {
        metadata.remove("managedFields");
    } else {
        metadata.insert("managedFields".to_owned(), Value::Array(list));
    }
}

fn entry<'a>(entries: &'a mut Vec<Entry>, manager: &str, operation: &str) -> &'a mut Entry {
    let index = match entries
        .iter()
        .position(|e| e.manager == manager && e.operation == operation)
    {
        Some(index) => index,
        None => {
            entries.push(Entry {
                manager: manager.to_owned(),
                operation: operation.to_owned(),
                api_version: String::new(),
                time: String::new(),
                fields: FieldSet::new(),
            });
            entries.len() - 1
        }
    };
    &mut entries[index]
}

/// Records an ordinary write by `manager`: it owns the fields it changed, which other
/// managers lose, and fields it removed are no one's. `current` is `None` on create.
pub(crate) fn record_update(
    info: &ResourceInfo,
    current: Option<&Value>,
    updated: &mut Value,
    manager: &str,
) {
    let mut list = entries(current);
    let before = current.map(|c| fields(info, c)).unwrap_or_default();
    let after = fields(info, updated);
    let changed: FieldSet = after
        .iter()
        .filter(|p| current.and_then(|c| value_at(c, p)) != value_at(updated, p))
        .cloned()
        .collect();
    let removed: FieldSet = before.difference(&after).cloned().collect();
    if changed.is_empty() && removed.is_empty() && list.is_empty() {
        write::metadata_mut(updated).remove("managedFields");
        return;
    }
    for e in &mut list {
        e.fields
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    if !changed.is_empty() {
        let mine = entry(&mut list, manager, "Update");
        mine.fields.extend(changed);
        mine.api_version = info.resource.api_version();
        mine.time = write::now();
    }
    store(updated, list);
}

/// Why an apply was refused: other managers own fields it changes.
pub(crate) struct Conflicts(pub(crate) Vec<(String, String)>);

/// What server-side apply of `applied` by `manager` makes of `current` (none: the
/// object is created from it).
pub(crate) fn apply(
    info: &ResourceInfo,
    current: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, Conflicts> {
    let mut list = entries(current);
    let new_set = fields(info, applied);
    let mut conflicts = Vec::new();
    if let Some(current) = current {
        for other in list
            .iter_mut()
            .filter(|e| !(e.manager == manager && e.operation == "Apply"))
        {
            let taken: Vec<FieldPath> = other
                .fields
                .iter()
                .filter(|p| new_set.contains(*p) && value_at(current, p) != value_at(applied, p))
                .cloned()
                .collect();
            for path in taken {
                if force {
                    other.fields.remove(&path);
                } else {
                    conflicts.push((other.manager.clone(), dotted(&path)));
                }
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(Conflicts(conflicts));
    }
    let mut object = current.cloned().unwrap_or_else(|| json!({}));
    let previous = list
        .iter()
        .find(|e| e.manager == manager && e.operation == "Apply")
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let owned_by_others: FieldSet = list
        .iter()
        .filter(|e| !(e.manager == manager && e.operation == "Apply"))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    for path in previous.difference(&new_set) {
        let shared = owned_by_others
            .iter()
            .any(|o| o.starts_with(path) || path.starts_with(o));
        if !shared {
            remove_at(&mut object, path);
        }
    }
    let mut merged = match strategic::patch(&info.resource, &object, applied) {
        Ok(merged) => merged,
        Err(_) => applied.clone(),
    };
    let mine = entry(&mut list, manager, "Apply");
    mine.fields = new_set;
    mine.api_version = info.resource.api_version();
    mine.time = write::now();
    store(&mut merged, list);
    Ok(merged)
}

/// A field path as the API server prints it in conflicts: `.data.a`,
/// `.spec.containers[name="app"].image`.
fn dotted(path: &[String]) -> String {
    let mut text = String::new();
    for element in path {
        if let Some(field) = element.strip_prefix("f:") {
            text.push('.');
            text.push_str(field);
        } else if let Some((key, value)) = keyed(element) {
            text.push_str(&format!("[{key}={value}]"));
        }
    }
    text
}
