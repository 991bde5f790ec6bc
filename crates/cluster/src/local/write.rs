//! What the API server does to an object on a write, as pure functions on JSON: fields
//! it owns (`uid`, `creationTimestamp`, `resourceVersion`), namespace defaulting, the
//! `status` subresource, and the checks that a patch did not change an object's identity.

use serde_json::{Map, Value};

/// The namespace and name of an object; the namespace is empty for cluster-scoped
/// kinds, so a map keyed by it lists objects by namespace then name.
pub(super) type ObjectKey = (String, String);

/// Which part of an object a client write targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Subresource {
    /// The object itself.
    Main,
    /// `/status`: only `.status` changes.
    Status,
}

impl Subresource {
    /// Parses a patch operation's `subresource`; only `status` is supported.
    pub(super) fn parse(name: Option<&str>) -> Result<Self, String> {
        match name {
            None | Some("") => Ok(Subresource::Main),
            Some("status") => Ok(Subresource::Status),
            Some(other) => Err(format!(
                "subresource {other:?} is not supported (only \"status\" is)"
            )),
        }
    }
}

/// `metadata` of an object checked by `fixtures::check_object`; an object without one
/// gets an empty one, so callers never unwrap.
pub(super) fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let Value::Object(map) = object else {
        unreachable!("just made an object")
    };
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    match metadata {
        Value::Object(metadata) => metadata,
        _ => unreachable!("just made an object"),
    }
}

fn metadata_text<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// Defaults the namespace of a namespaced object to `default` and drops it from a
/// cluster-scoped one (as the API server does), and returns the object's key.
pub(super) fn normalize_namespace(object: &mut Value, namespaced: bool) -> ObjectKey {
    let metadata = metadata_mut(object);
    let name = metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if namespaced {
        let namespace = match metadata.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() => ns.to_owned(),
            _ => {
                metadata.insert("namespace".into(), "default".into());
                "default".to_owned()
            }
        };
        (namespace, name)
    } else {
        metadata.remove("namespace");
        (String::new(), name)
    }
}

/// Sets `uid` and `creationTimestamp` on a new object: kept when `keep_given` (fixtures
/// describe an existing world) and present, generated otherwise.
pub(super) fn init_server_fields(object: &mut Value, keep_given: bool) {
    let metadata = metadata_mut(object);
    for (field, make) in [
        ("uid", new_uid as fn() -> String),
        ("creationTimestamp", now),
    ] {
        let given = metadata
            .get(field)
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty());
        if !(keep_given && given) {
            metadata.insert(field.into(), make().into());
        }
    }
}

/// Copies the server-owned fields of `current` onto its replacement; with `keep_given`
/// (fixtures) values present in `object` win.
pub(super) fn carry_server_fields(object: &mut Value, current: &Value, keep_given: bool) {
    let current_metadata = current.get("metadata");
    let metadata = metadata_mut(object);
    for field in ["uid", "creationTimestamp", "resourceVersion"] {
        if keep_given && field != "resourceVersion" && metadata.contains_key(field) {
            continue;
        }
        match current_metadata.and_then(|m| m.get(field)) {
            Some(value) => metadata.insert(field.into(), value.clone()),
            None => metadata.remove(field),
        };
    }
}

/// Sets `metadata.resourceVersion`.
pub(super) fn set_resource_version(object: &mut Value, resource_version: u64) {
    metadata_mut(object).insert(
        "resourceVersion".into(),
        resource_version.to_string().into(),
    );
}

/// Replaces `.status` of `object` with `status` (removing it when `None`).
pub(super) fn set_status(object: &mut Value, status: Option<&Value>) {
    if let Value::Object(map) = object {
        match status {
            Some(status) => map.insert("status".into(), status.clone()),
            None => map.remove("status"),
        };
    }
}

/// Checks that a patched object is still the object it was (same apiVersion, kind,
/// name and namespace) and puts back the identity fields a filter dropped.
pub(super) fn keep_identity(candidate: &mut Value, current: &Value) -> Result<(), String> {
    if !candidate.is_object() {
        return Err(format!("the result is not an object: {}", short(candidate)));
    }
    if let Some(metadata) = candidate.get("metadata")
        && !metadata.is_object()
    {
        return Err("the result's metadata is not an object".to_owned());
    }
    for field in ["apiVersion", "kind"] {
        let before = current.get(field);
        match (candidate.get(field), before) {
            (None | Some(Value::Null), Some(before)) => {
                if let Value::Object(map) = candidate {
                    map.insert(field.into(), before.clone());
                }
            }
            (after, before) if after != before => {
                return Err(format!(
                    "{field} cannot change (from {} to {})",
                    show(before),
                    show(after)
                ));
            }
            _ => {}
        }
    }
    let name_before = metadata_text(current, "name");
    let name_after = metadata_text(candidate, "name");
    if name_after != name_before {
        return Err(format!(
            "metadata.name cannot change (from {} to {})",
            show_text(name_before),
            show_text(name_after)
        ));
    }
    let namespace_before = metadata_text(current, "namespace");
    match metadata_text(candidate, "namespace") {
        None => {
            if let Some(namespace) = namespace_before {
                metadata_mut(candidate).insert("namespace".into(), namespace.into());
            }
        }
        after if after != namespace_before => {
            return Err(format!(
                "metadata.namespace cannot change (from {} to {})",
                show_text(namespace_before),
                show_text(after)
            ));
        }
        _ => {}
    }
    Ok(())
}

fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "nothing".to_owned(), Value::to_string)
}

fn show_text(value: Option<&str>) -> String {
    value.map_or_else(|| "nothing".to_owned(), |v| format!("{v:?}"))
}

/// A value for an error message, cut when long.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The current time as Kubernetes writes timestamps (RFC 3339, whole seconds, UTC).
/// Formatted once a second per thread: every object a scenario adds gets one.
pub(super) fn now() -> String {
    thread_local! {
        static LAST: std::cell::RefCell<(i64, String)> =
            const { std::cell::RefCell::new((0, String::new())) };
    }
    let now = jiff::Timestamp::now();
    LAST.with_borrow_mut(|(second, text)| {
        if *second != now.as_second() || text.is_empty() {
            *second = now.as_second();
            *text = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        }
        text.clone()
    })
}

/// A (version 4) UUID, as the API server gives every object: a counter hashed with
/// keys drawn at random once per process, unique without asking the kernel for
/// randomness on every object (a third of stamping a new object's server-owned
/// fields in a profile of the hook loop).
pub(super) fn new_uid() -> String {
    use std::hash::BuildHasher as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let keys = KEYS.get_or_init(std::hash::RandomState::new);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&keys.hash_one((n, 0u8)).to_be_bytes());
    bytes[8..].copy_from_slice(&keys.hash_one((n, 1u8)).to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut uid = String::with_capacity(36);
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            uid.push('-');
        }
        uid.push(char::from(HEX[usize::from(byte >> 4)]));
        uid.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    uid
}
