//! From a document's JSON tree to a typed object, with every field's problem rather
//! than the first: a deserializer stops at the first error, so each bad field is
//! recorded, replaced by a value that lets deserialization go past it, and the object
//! is read again, until it reads or no stand-in value gets past the field.
//!
//! Also the tree itself: [`Tree`] reads YAML into a JSON value and turns numbers JSON
//! cannot hold into nulls (the scan in [`operon_data::yaml_scan`] reports them by field), so that
//! one such number does not hide the object's other problems.

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_path_to_error::Segment;

/// At most this many field problems are listed for one object; the rest would repeat
/// the same mistake.
pub(crate) const LISTED_FIELD_PROBLEMS: usize = 20;

/// Deserializes `value` as `T`, or returns every `(field, reason)` found (at most
/// [`LISTED_FIELD_PROBLEMS`]). Problems at a field in `known` (already reported by the
/// scan) are not listed again.
pub(crate) fn typed<T: DeserializeOwned>(
    mut value: Value,
    known: &[String],
) -> Result<T, Vec<(String, String)>> {
    let mut problems: Vec<(String, String)> = Vec::new();
    let mut skipped_known = false;
    loop {
        let error = match attempt::<T>(&value) {
            Ok(object) if problems.is_empty() && !skipped_known => return Ok(object),
            Ok(_) => return Err(problems),
            Err(error) => error,
        };
        let (field, reason) = (error.0.to_string(), error.1);
        let field = if field == "." { String::new() } else { field };
        if known.contains(&field) {
            skipped_known = true;
        } else if problems.len() < LISTED_FIELD_PROBLEMS {
            problems.push((field.clone(), reason.clone()));
        } else {
            problems.push((
                String::new(),
                format!("more problems than the {LISTED_FIELD_PROBLEMS} listed"),
            ));
            return Err(problems);
        }
        if !step_past::<T>(&mut value, &error.0, &field, &reason) {
            if problems.is_empty() {
                // A known field's problem stopped the object: report it as it reads.
                problems.push((field, reason));
            }
            return Err(problems);
        }
    }
}

fn attempt<T: DeserializeOwned>(value: &Value) -> Result<T, (serde_path_to_error::Path, String)> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().clone();
        (path, e.into_inner().to_string())
    })
}

/// Replaces the value at `path` (or adds the missing field `reason` names) with the
/// first stand-in value that moves the first error elsewhere. Returns false when none does.
fn step_past<T: DeserializeOwned>(
    value: &mut Value,
    path: &serde_path_to_error::Path,
    field: &str,
    reason: &str,
) -> bool {
    let mut segments: Vec<&Segment> = path.iter().collect();
    let missing = reason
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
        .map(str::to_owned);
    // The slot to change: the container and the key or index in it.
    let last = match &missing {
        Some(name) => Slot::Key(name.clone()),
        None => match segments.pop() {
            Some(Segment::Map { key }) => Slot::Key(key.clone()),
            Some(Segment::Seq { index }) => Slot::Index(*index),
            _ => return false,
        },
    };
    let Some(container) = navigate(value, &segments) else {
        return false;
    };
    let original = match (&last, &*container) {
        (Slot::Key(k), Value::Object(map)) => map.get(k).cloned(),
        (Slot::Index(i), Value::Array(items)) if *i < items.len() => Some(items[*i].clone()),
        _ => return false,
    };
    let mut candidates: Vec<Option<Value>> = Vec::new();
    if matches!(last, Slot::Key(_)) && original.is_some() {
        candidates.push(None);
    }
    candidates.extend(
        [
            Value::Null,
            Value::from(0),
            Value::from(""),
            Value::Bool(false),
            Value::Array(Vec::new()),
            Value::Object(Map::new()),
        ]
        .into_iter()
        .map(Some),
    );
    let slot = slot_path(&segments, &last);
    let missing_again = match &last {
        Slot::Key(k) => Some(format!("missing field `{k}`")),
        Slot::Index(_) => None,
    };
    for candidate in candidates {
        set(value, &segments, &last, candidate);
        // The slot failing again, because of the stand-in value, is no progress.
        match attempt::<T>(value) {
            Ok(_) => return true,
            Err((p, r)) => {
                let p = p.to_string();
                let inside = p == slot
                    || p.starts_with(&format!("{slot}."))
                    || p.starts_with(&format!("{slot}["));
                let at_field = p == field || (field.is_empty() && p == ".");
                let same = at_field && (missing.is_none() || r == reason);
                let removed_again = missing_again.as_ref().is_some_and(|m| r.starts_with(m));
                if !inside && !same && !removed_again {
                    return true;
                }
            }
        }
    }
    set(value, &segments, &last, original);
    false
}

/// The JSON path of `slot` in the container at `segments`.
fn slot_path(segments: &[&Segment], slot: &Slot) -> String {
    let mut out = String::new();
    let key = |out: &mut String, k: &str| {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(k);
    };
    for segment in segments {
        match segment {
            Segment::Map { key: k } => key(&mut out, k),
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            _ => out.push('?'),
        }
    }
    match slot {
        Slot::Key(k) => key(&mut out, k),
        Slot::Index(index) => out.push_str(&format!("[{index}]")),
    }
    out
}

enum Slot {
    Key(String),
    Index(usize),
}

fn navigate<'v>(value: &'v mut Value, segments: &[&Segment]) -> Option<&'v mut Value> {
    let mut at = value;
    for segment in segments {
        at = match (segment, at) {
            (Segment::Map { key }, Value::Object(map)) => map.get_mut(key)?,
            (Segment::Seq { index }, Value::Array(items)) => items.get_mut(*index)?,
            _ => return None,
        };
    }
    Some(at)
}

fn set(value: &mut Value, segments: &[&Segment], slot: &Slot, new: Option<Value>) {
    let Some(container) = navigate(value, segments) else {
        return;
    };
    match (slot, container, new) {
        (Slot::Key(k), Value::Object(map), Some(v)) => {
            map.insert(k.clone(), v);
        }
        (Slot::Key(k), Value::Object(map), None) => {
            map.remove(k);
        }
        (Slot::Index(i), Value::Array(items), Some(v)) if *i < items.len() => items[*i] = v,
        _ => {}
    }
}

/// A JSON tree read from YAML in which numbers JSON cannot hold (integers beyond 64
/// bits, infinities, NaN) are nulls instead of an error for the whole document.
pub(crate) struct Tree(pub Value);

impl<'de> de::Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TreeVisitor).map(Tree)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Null, Value::from))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(u64::try_from(v).map_or(Value::Null, Value::from))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(TreeVisitor)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Tree(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(Key(key)) = map.next_key()? {
            let Tree(value) = map.next_value()?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// A mapping key as JSON text: scalars of any type are keys (`1: x` is `"1"`).
struct Key(String);

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = String;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a scalar mapping key")
            }
            fn visit_str<E>(self, v: &str) -> Result<String, E> {
                Ok(v.to_owned())
            }
            fn visit_bool<E>(self, v: bool) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_i64<E>(self, v: i64) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_u64<E>(self, v: u64) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_i128<E>(self, v: i128) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_u128<E>(self, v: u128) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_f64<E>(self, v: f64) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_unit<E>(self) -> Result<String, E> {
                Ok("null".to_owned())
            }
        }
        deserializer.deserialize_any(KeyVisitor).map(Key)
    }
}
