//! The objects a list found, handed to a reader that takes them one at a time.
//!
//! A watch keeps each listed object as the JSON text the API server sent until its
//! reader takes it: decoded into a `Value`, a Pod is about eight times its text (every
//! non-empty map is a B-tree node of its own), and a list of 10,000 Pods held as values
//! until the last page came was most of `operon serve`'s peak memory. Taking the objects
//! decodes them one by one, so the reader can drop each after keeping what it needs.

use crate::namespace_and_name;
use serde_json::Value;
use std::sync::Arc;

/// Listed objects, sorted by namespace then name; iterating takes them as values.
#[derive(Debug, Default)]
pub struct Listed {
    items: Vec<Item>,
}

#[derive(Debug)]
enum Item {
    /// An object already decoded (the in-memory cluster's, or one the watch had to
    /// decode to tell its name).
    Value(Value),
    /// An object as the API server listed it.
    Text(Text),
}

/// One object of a list page, as text, with what sorting needs.
#[derive(Debug, Clone)]
pub(crate) struct Text {
    pub(crate) namespace: Box<str>,
    pub(crate) name: Box<str>,
    pub(crate) json: Box<str>,
    /// `apiVersion` and `kind`, set on the object where it lacks them (list items do).
    pub(crate) type_meta: Arc<(String, String)>,
}

impl Item {
    fn key(&self) -> (&str, &str) {
        match self {
            Item::Value(value) => namespace_and_name(value),
            Item::Text(text) => (&text.namespace, &text.name),
        }
    }
}

impl Listed {
    /// How many objects the list holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the list found nothing.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn push_text(&mut self, text: Text) {
        self.items.push(Item::Text(text));
    }

    pub(crate) fn push_value(&mut self, value: Value) {
        self.items.push(Item::Value(value));
    }

    pub(crate) fn append(&mut self, other: Listed) {
        self.items.extend(other.items);
    }

    pub(crate) fn sort(&mut self) {
        self.items.sort_by(|a, b| a.key().cmp(&b.key()));
    }
}

impl From<Vec<Value>> for Listed {
    fn from(values: Vec<Value>) -> Self {
        Self {
            items: values.into_iter().map(Item::Value).collect(),
        }
    }
}

impl IntoIterator for Listed {
    type Item = Value;
    type IntoIter = IntoIter;

    fn into_iter(self) -> IntoIter {
        IntoIter {
            items: self.items.into_iter(),
        }
    }
}

/// The objects of a [`Listed`], decoded as they are taken.
pub struct IntoIter {
    items: std::vec::IntoIter<Item>,
}

impl Iterator for IntoIter {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        loop {
            match self.items.next()? {
                Item::Value(value) => return Some(value),
                Item::Text(text) => match text.decode() {
                    Ok(value) => return Some(value),
                    // The text parsed once as JSON when its page came; what can fail
                    // now is the decoder's nesting limit, which the object's page
                    // would have failed before lists kept text, and listed again
                    // without end.
                    Err(error) => tracing::warn!(
                        object = %crate::namespaced_name(
                            Some(&*text.namespace).filter(|n| !n.is_empty()),
                            &text.name
                        ),
                        kind = %text.type_meta.1,
                        error = %error,
                        "a listed object does not decode; it is left out of the list"
                    ),
                },
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.items.len()))
    }
}

impl Text {
    /// The object as a value, with `apiVersion` and `kind`.
    pub(crate) fn decode(&self) -> Result<Value, serde_json::Error> {
        let value = serde_json::from_str(&self.json)?;
        Ok(with_type_meta(value, &self.type_meta.0, &self.type_meta.1))
    }
}

/// The object with `apiVersion` and `kind` set when it lacks either (list items do),
/// otherwise as the API server sent it.
pub(crate) fn with_type_meta(object: Value, api_version: &str, kind: &str) -> Value {
    let mut map = match object {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    let missing = |map: &serde_json::Map<String, Value>, field: &str| {
        map.get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    };
    if missing(&map, "apiVersion") || missing(&map, "kind") {
        map.insert(
            "apiVersion".to_owned(),
            Value::String(api_version.to_owned()),
        );
        map.insert("kind".to_owned(), Value::String(kind.to_owned()));
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(namespace: &str, name: &str, json: &str) -> Text {
        Text {
            namespace: namespace.into(),
            name: name.into(),
            json: json.into(),
            type_meta: Arc::new(("v1".to_owned(), "Pod".to_owned())),
        }
    }

    #[test]
    fn text_items_decode_with_their_type_and_sort_with_values() {
        let mut listed = Listed::default();
        listed.push_text(text(
            "b",
            "x",
            r#"{"metadata":{"namespace":"b","name":"x"}}"#,
        ));
        listed.push_value(json!({"kind": "Pod", "metadata": {"namespace": "a", "name": "y"}}));
        listed.push_text(text(
            "a",
            "z",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"a","name":"z"}}"#,
        ));
        listed.sort();
        assert_eq!(listed.len(), 3);
        let values: Vec<Value> = listed.into_iter().collect();
        assert_eq!(
            values,
            vec![
                json!({"kind": "Pod", "metadata": {"namespace": "a", "name": "y"}}),
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "a", "name": "z"}}),
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "b", "name": "x"}}),
            ]
        );
    }

    #[test]
    fn namespace_order_is_by_namespace_then_name_not_by_joined_path() {
        // "a-b/x" sorts before "a/y" as one string; as (namespace, name) "a" comes first.
        let mut listed = Listed::default();
        listed.push_text(text(
            "a-b",
            "x",
            r#"{"metadata":{"namespace":"a-b","name":"x"}}"#,
        ));
        listed.push_text(text(
            "a",
            "y",
            r#"{"metadata":{"namespace":"a","name":"y"}}"#,
        ));
        listed.sort();
        let names: Vec<String> = listed
            .into_iter()
            .map(|v| namespace_and_name(&v).0.to_owned())
            .collect();
        assert_eq!(names, ["a", "a-b"]);
    }

    #[test]
    fn an_object_nested_past_the_decoders_limit_is_left_out_not_the_rest() {
        let deep = format!(
            r#"{{"metadata":{{"name":"deep"}},"spec":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let mut listed = Listed::default();
        listed.push_text(text("", "deep", &deep));
        listed.push_text(text("", "fine", r#"{"metadata":{"name":"fine"}}"#));
        let names: Vec<String> = listed
            .into_iter()
            .map(|v| namespace_and_name(&v).1.to_owned())
            .collect();
        assert_eq!(names, ["fine"]);
    }
}
