//! Which objects a [`Selector`] picks, with the API server's semantics: namespaces and
//! names as lists, label selectors with `matchLabels` and `matchExpressions`, field
//! selectors compared as strings.

use crate::{Resource, Selector};
use operon_data::model::{FieldOperator, FieldRequirement, LabelOperator, LabelSelector};
use serde_json::{Map, Value};

impl Selector {
    /// Whether `object`, of type `resource`, is one of the objects this selector picks.
    pub(crate) fn matches(&self, resource: &Resource, object: &Value) -> bool {
        let metadata = object.get("metadata");
        let text = |field: &str| metadata.and_then(|m| m.get(field)).and_then(Value::as_str);
        if resource.namespaced
            && let Some(namespaces) = &self.namespaces
        {
            let namespace = text("namespace").unwrap_or("");
            if !namespaces.iter().any(|n| n == namespace) {
                return false;
            }
        }
        if let Some(names) = &self.names {
            let name = text("name").unwrap_or("");
            if !names.iter().any(|n| n == name) {
                return false;
            }
        }
        if let Some(labels) = &self.labels {
            let object_labels = metadata
                .and_then(|m| m.get("labels"))
                .and_then(Value::as_object);
            if !labels_match(labels, object_labels) {
                return false;
            }
        }
        self.fields.iter().all(|field| field_matches(field, object))
    }
}

/// Whether `labels` (an object's `metadata.labels`, absent when it has none) satisfy
/// `selector`. An empty selector matches everything.
pub(super) fn labels_match(selector: &LabelSelector, labels: Option<&Map<String, Value>>) -> bool {
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    let labels_ok = selector
        .match_labels
        .iter()
        .all(|(key, value)| label(key) == Some(value.as_str()));
    labels_ok
        && selector.match_expressions.iter().all(|requirement| {
            let value = label(&requirement.key);
            let listed = || value.is_some_and(|v| requirement.values.iter().any(|x| x == v));
            match requirement.operator {
                LabelOperator::In => listed(),
                // As in Kubernetes, an object without the label is "not in" any set.
                LabelOperator::NotIn => !listed(),
                LabelOperator::Exists => value.is_some(),
                LabelOperator::DoesNotExist => value.is_none(),
            }
        })
}

/// Whether `object` satisfies one field requirement.
pub(super) fn field_matches(requirement: &FieldRequirement, object: &Value) -> bool {
    // Compared in place: selectors run on every write for every watcher.
    let equal = match lookup(object, &requirement.field) {
        None | Some(Value::Null) => requirement.value.is_empty(),
        Some(Value::String(s)) => *s == requirement.value,
        // Numbers and booleans compare by their text (`spec.replicas=3`).
        Some(other) => {
            let text = other.to_string();
            text == requirement.value
        }
    };
    match requirement.operator {
        FieldOperator::Equals => equal,
        FieldOperator::NotEquals => !equal,
    }
}

/// The value at a dotted path (`status.phase`) as a field selector sees it: strings as
/// they are, numbers and booleans as text, and a missing field or `null` as the empty
/// string (so `spec.nodeName=` selects unscheduled pods, as in Kubernetes).
#[cfg(test)]
pub(crate) fn field_value(object: &Value, path: &str) -> String {
    match lookup(object, path) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn lookup<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(object, |value, segment| value.get(segment))
}
