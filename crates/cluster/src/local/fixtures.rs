//! Reading Kubernetes objects from fixture text: multi-document YAML (JSON is YAML
//! too), `kind: List` and typed lists (`PodList`) expanded into their items.

use crate::ClusterError;
use serde::Deserialize as _;
use serde_json::Value;

/// Where in the fixtures an object came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureLocation {
    /// The file name or other origin given to the loader.
    pub(crate) origin: String,
    /// The YAML document, from 1.
    pub(crate) document: usize,
    /// The position in the document's `items` when the document is a list, from 0.
    pub(crate) item: Option<usize>,
}

impl std::fmt::Display for FixtureLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.origin, self.document)?;
        if let Some(item) = self.item {
            write!(f, " items[{item}]")?;
        }
        Ok(())
    }
}

/// Why fixtures could not be loaded. Loading reports every problem it finds and loads
/// nothing when there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FixtureError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        reason: String,
    },
    /// A document is not valid YAML; the documents after it are not read.
    #[error("{location}: not valid YAML: {reason}")]
    Yaml {
        /// The document.
        location: FixtureLocation,
        /// The parser's message.
        reason: String,
    },
    /// An object lacks a required field or has a malformed one.
    #[error("{location}: {reason}")]
    Object {
        /// The object.
        location: FixtureLocation,
        /// What is wrong.
        reason: String,
    },
    /// The same object appears twice in one load.
    #[error("{location}: duplicate {what}, first defined at {first}")]
    Duplicate {
        /// The second occurrence.
        location: FixtureLocation,
        /// The object, e.g. `Pod default/web`.
        what: String,
        /// The first occurrence.
        first: FixtureLocation,
    },
    /// The cluster refused the object (an unknown apiVersion for a known kind, a CRD
    /// that does not declare its kind properly...).
    #[error("{location}: {error}")]
    Cluster {
        /// The object.
        location: FixtureLocation,
        /// The cluster's error (in the message, so not also a `source`).
        error: ClusterError,
    },
}

/// Parses every object in `text`, checking the fields every object needs.
pub(super) fn parse(
    text: &str,
    origin: &str,
) -> (Vec<(FixtureLocation, Value)>, Vec<FixtureError>) {
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    for (index, document) in yaml_serde::Deserializer::from_str(text).enumerate() {
        let location = FixtureLocation {
            origin: origin.to_owned(),
            document: index + 1,
            item: None,
        };
        let value = match Value::deserialize(document) {
            Ok(Value::Null) => continue,
            Ok(value) => value,
            Err(e) => {
                errors.push(FixtureError::Yaml {
                    location,
                    reason: e.to_string(),
                });
                // The YAML stream cannot be trusted past a syntax error.
                break;
            }
        };
        match list_items(&value) {
            Some(Ok((items, item_api_version, item_kind))) => {
                for (item, mut object) in items.iter().cloned().enumerate() {
                    let location = FixtureLocation {
                        item: Some(item),
                        ..location.clone()
                    };
                    // Items of typed lists (`PodList` from the API) carry no type.
                    if let Some(map) = object.as_object_mut() {
                        if let Some(kind) = item_kind {
                            map.entry("kind").or_insert_with(|| kind.into());
                        }
                        if let Some(api_version) = item_api_version {
                            map.entry("apiVersion")
                                .or_insert_with(|| api_version.into());
                        }
                    }
                    push_checked(location, object, &mut objects, &mut errors);
                }
            }
            Some(Err(reason)) => errors.push(FixtureError::Object { location, reason }),
            None => push_checked(location, value, &mut objects, &mut errors),
        }
    }
    (objects, errors)
}

type ListItems<'a> = (&'a Vec<Value>, Option<&'a str>, Option<&'a str>);

/// The items of a list document with the type its items default to, or `None` when the
/// document is a single object.
fn list_items(value: &Value) -> Option<Result<ListItems<'_>, String>> {
    let kind = value.get("kind").and_then(Value::as_str)?;
    let item_kind = kind.strip_suffix("List")?;
    let typed = !item_kind.is_empty();
    let items = match value.get("items") {
        Some(Value::Array(items)) => items,
        // A kind that merely ends in `List` is an ordinary object.
        _ if typed => return None,
        Some(Value::Null) | None => return Some(Err("List has no items array".to_owned())),
        Some(_) => return Some(Err("List: items is not an array".to_owned())),
    };
    let api_version = value.get("apiVersion").and_then(Value::as_str);
    Some(Ok((
        items,
        api_version.filter(|_| typed),
        typed.then_some(item_kind),
    )))
}

fn push_checked(
    location: FixtureLocation,
    object: Value,
    objects: &mut Vec<(FixtureLocation, Value)>,
    errors: &mut Vec<FixtureError>,
) {
    match check_object(&object) {
        Ok(()) => objects.push((location, object)),
        Err(reason) => errors.push(FixtureError::Object { location, reason }),
    }
}

/// Checks the fields every stored object needs: `apiVersion`, `kind`, `metadata.name`,
/// and that `metadata` (and `metadata.namespace`, when given) have the right types.
pub(super) fn check_object(object: &Value) -> Result<(), String> {
    let Some(map) = object.as_object() else {
        return Err(format!("expected an object, got {}", type_name(object)));
    };
    let text = |value: Option<&Value>, field: &str| match value {
        Some(Value::String(s)) if !s.is_empty() => Ok(()),
        None | Some(Value::Null) => Err(format!("{field} is missing")),
        Some(Value::String(_)) => Err(format!("{field} is empty")),
        Some(other) => Err(format!(
            "{field} must be a string, got {}",
            type_name(other)
        )),
    };
    text(map.get("apiVersion"), "apiVersion")?;
    text(map.get("kind"), "kind")?;
    let metadata = match map.get("metadata") {
        Some(Value::Object(metadata)) => metadata,
        None | Some(Value::Null) => return Err("metadata.name is missing".to_owned()),
        Some(other) => {
            return Err(format!(
                "metadata must be an object, got {}",
                type_name(other)
            ));
        }
    };
    text(metadata.get("name"), "metadata.name")?;
    match metadata.get("namespace") {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(other) => {
            return Err(format!(
                "metadata.namespace must be a string, got {}",
                type_name(other)
            ));
        }
    }
    match metadata.get("labels") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(labels)) => match labels.iter().find(|(_, v)| !v.is_string()) {
            Some((key, _)) => Err(format!("metadata.labels.{key} must be a string")),
            None => Ok(()),
        },
        Some(other) => Err(format!(
            "metadata.labels must be an object, got {}",
            type_name(other)
        )),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
