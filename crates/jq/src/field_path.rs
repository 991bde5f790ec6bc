//! Filters that only read a chain of fields (`.`, `.metadata.labels`), run without jaq.
//!
//! Most `jqFilter`s of hooks are such a chain, and running one through jaq first turns
//! the whole watched object into jaq's values (a Pod: a few hundred allocations) to
//! read one field of it. Here the field is read from the JSON value directly, and the
//! output is what jaq's run would give: numbers come out as jq prints them (see
//! [`super::value`]), an input nested deeper than [`MAX_DEPTH`] is still refused, and
//! any step jq would fail on (a field of a number, say) leaves the run to jaq, which
//! then reports jq's error.

use super::budget::MAX_DEPTH;
use serde_json::Value;

/// jq's keywords: `.if` and the like are not read here, whatever jaq makes of them.
const KEYWORDS: &[&str] = &[
    "and", "or", "if", "then", "elif", "else", "end", "as", "def", "reduce", "foreach", "try",
    "catch", "label", "import", "include", "__loc__",
];

/// The field names of `text` when it is `.` or `.a.b...` with plain identifiers and no
/// space; `None` for anything else.
pub(super) fn parse(text: &str) -> Option<Vec<String>> {
    let text = text.trim();
    if text == "." {
        return Some(Vec::new());
    }
    let rest = text.strip_prefix('.')?;
    rest.split('.')
        .map(|field| {
            let mut chars = field.chars();
            let first = chars.next()?;
            let plain = (first.is_ascii_alphabetic() || first == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !KEYWORDS.contains(&field);
            plain.then(|| field.to_owned())
        })
        .collect()
}

/// The one output of reading `fields` from `input`; `None` when jaq must run instead
/// (a step jq fails on, or an input too deep for it).
pub(super) fn read(fields: &[String], input: &Value) -> Option<Value> {
    if !within_depth(input, MAX_DEPTH) {
        return None;
    }
    let mut value = input;
    for field in fields {
        value = match value {
            Value::Null => &Value::Null,
            Value::Object(map) => map.get(field).unwrap_or(&Value::Null),
            _ => return None,
        };
    }
    Some(as_jq_prints(value))
}

/// Whether `value` nests at most `depth` levels of arrays and objects, as jaq is given
/// it.
fn within_depth(value: &Value, depth: usize) -> bool {
    match value {
        Value::Array(items) => depth
            .checked_sub(1)
            .is_some_and(|depth| items.iter().all(|item| within_depth(item, depth))),
        Value::Object(map) => depth
            .checked_sub(1)
            .is_some_and(|depth| map.values().all(|item| within_depth(item, depth))),
        _ => true,
    }
}

/// `value` as it comes back out of jaq: the same, but for doubles, which are printed as
/// jq prints them.
fn as_jq_prints(value: &Value) -> Value {
    match value {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => {
            super::value::from_f64(n.as_f64().unwrap_or(f64::NAN))
        }
        Value::Array(items) => Value::Array(items.iter().map(as_jq_prints).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), as_jq_prints(item)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limits, compile_uncached};
    use serde_json::json;

    #[test]
    fn only_plain_field_chains_are_read_here() {
        assert_eq!(parse(" . "), Some(vec![]));
        assert_eq!(
            parse(".metadata.labels"),
            Some(vec!["metadata".to_owned(), "labels".to_owned()])
        );
        assert_eq!(
            parse("._a1.B_"),
            Some(vec!["_a1".to_owned(), "B_".to_owned()])
        );
        for other in [
            "", "..", ".a.", ".a..b", ". a", ".a .b", ".a?", ".[\"a\"]", ".\"a\"", ".a[0]",
            ".a | .b", ".1a", ".if", ".a.end", "$__loc__", ".a-b", ".é",
        ] {
            assert_eq!(parse(other), None, "{other:?}");
        }
    }

    /// Every filter here gives, read directly, exactly what jaq gives: the same outputs
    /// or the same error.
    #[test]
    fn reading_a_field_chain_gives_what_jaq_gives() {
        let object = json!({
            "metadata": {"name": "web", "labels": {"app": "web", "tier": null},
                         "annotations": {}},
            "spec": {"replicas": 3, "ratio": 2.5, "whole": 2.0, "negative_zero": -0.0,
                     "huge": 1e300, "max_u64": u64::MAX, "min_i64": i64::MIN,
                     "small": 1e-7, "list": [1, 2.0, {"x": 3.0}]},
            "status": null,
        });
        let mut deep = json!(1);
        for _ in 0..MAX_DEPTH + 1 {
            deep = json!([deep]);
        }
        let inputs = [
            object.clone(),
            Value::Null,
            json!(7),
            json!("text"),
            json!([1, 2]),
            json!({"metadata": deep.clone()}),
            deep,
        ];
        let filters = [
            ".",
            ".metadata",
            ".metadata.labels",
            ".metadata.labels.app",
            ".metadata.labels.tier",
            ".metadata.labels.missing.deeper",
            ".metadata.name.first",
            ".spec",
            ".spec.replicas",
            ".spec.ratio",
            ".spec.whole",
            ".spec.negative_zero",
            ".spec.huge",
            ".spec.max_u64",
            ".spec.min_i64",
            ".spec.small",
            ".spec.list",
            ".status.phase",
            ".nothing",
        ];
        let limits = Limits::default();
        let text = |result: Result<Vec<Value>, crate::JqError>| match result {
            Ok(outputs) => format!("ok {}", Value::Array(outputs)),
            Err(e) => format!("error {e}"),
        };
        for filter in filters {
            let compiled = compile_uncached(filter).unwrap();
            assert!(compiled.inner.fields.is_some(), "{filter} is read directly");
            for input in &inputs {
                assert_eq!(
                    text(compiled.run_within(input, &limits)),
                    text(compiled.run_jaq_within(input, &limits)),
                    "{filter} on {}",
                    input.to_string().chars().take(80).collect::<String>()
                );
            }
        }
    }
}
