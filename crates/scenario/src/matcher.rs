//! Comparing what a test expects with what happened, as kuttl and Chainsaw compare
//! objects, and saying where they differ.
//!
//! A subset match: a map matches when each key it names matches (other keys of the
//! actual value are ignored); a list when it has as many items and each matches in
//! order; anything else when it is equal. An exact match compares everything. Each
//! difference names its path (`.spec.containers[0].image`) and both sides.

use serde_json::Value;
use std::fmt;

/// How much of the actual value the expectation speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The keys the expectation names; lists item by item.
    Subset,
    /// Everything.
    Exact,
}

/// One place where the actual value is not what was expected.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// Where, from the compared value's root: `.metadata.labels.app`, `[2]`.
    pub path: String,
    /// What the test expects there; `None` when the key should not be there.
    pub expected: Option<Value>,
    /// What is there; `None` when it is missing.
    pub actual: Option<Value>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "(the value)"
        } else {
            &self.path
        };
        match (&self.expected, &self.actual) {
            (Some(expected), Some(actual)) => write!(
                f,
                "{path}: expected {}, got {}",
                short(expected),
                short(actual)
            ),
            (Some(expected), None) => write!(f, "{path}: missing, expected {}", short(expected)),
            (None, Some(actual)) => write!(f, "{path}: not expected, got {}", short(actual)),
            (None, None) => write!(f, "{path}: differs"),
        }
    }
}

/// A value on one line, cut when long.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 200 {
        return text;
    }
    let cut: String = text.chars().take(200).collect();
    format!("{cut}… ({} bytes)", text.len())
}

/// Where `actual` is not what `expected` says, in `mode`.
pub fn compare(expected: &Value, actual: &Value, mode: Mode) -> Vec<Difference> {
    let mut differences = Vec::new();
    walk(expected, actual, mode, &mut String::new(), &mut differences);
    differences
}

fn walk(
    expected: &Value,
    actual: &Value,
    mode: Mode,
    path: &mut String,
    out: &mut Vec<Difference>,
) {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            for (key, want_value) in want {
                let len = path.len();
                push_key(path, key);
                match have.get(key) {
                    Some(have_value) => walk(want_value, have_value, mode, path, out),
                    None => out.push(Difference {
                        path: path.clone(),
                        expected: Some(want_value.clone()),
                        actual: None,
                    }),
                }
                path.truncate(len);
            }
            if mode == Mode::Exact {
                for (key, have_value) in have.iter().filter(|(k, _)| !want.contains_key(*k)) {
                    let len = path.len();
                    push_key(path, key);
                    out.push(Difference {
                        path: path.clone(),
                        expected: None,
                        actual: Some(have_value.clone()),
                    });
                    path.truncate(len);
                }
            }
        }
        (Value::Array(want), Value::Array(have)) => {
            for (index, (want_item, have_item)) in want.iter().zip(have).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                walk(want_item, have_item, mode, path, out);
                path.truncate(len);
            }
            for (index, want_item) in want.iter().enumerate().skip(have.len()) {
                out.push(Difference {
                    path: format!("{path}[{index}]"),
                    expected: Some(want_item.clone()),
                    actual: None,
                });
            }
            for (index, have_item) in have.iter().enumerate().skip(want.len()) {
                out.push(Difference {
                    path: format!("{path}[{index}]"),
                    expected: None,
                    actual: Some(have_item.clone()),
                });
            }
        }
        (want, have) if numbers_equal(want, have) || want == have => {}
        (want, have) => out.push(Difference {
            path: path.clone(),
            expected: Some(want.clone()),
            actual: Some(have.clone()),
        }),
    }
}

/// `1` and `1.0` are one number to a reader of YAML.
fn numbers_equal(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => a.is_number() && b.is_number() && x == y,
        _ => false,
    }
}

fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        path.push('.');
        path.push_str(key);
    } else {
        path.push_str(&format!("[{}]", Value::String(key.to_owned())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_subset_ignores_what_it_does_not_name() {
        let actual =
            json!({"metadata": {"name": "a", "uid": "x", "labels": {"app": "web", "tier": "1"}}});
        let expected = json!({"metadata": {"name": "a", "labels": {"app": "web"}}});
        assert_eq!(compare(&expected, &actual, Mode::Subset), vec![]);
        let differences = compare(&expected, &actual, Mode::Exact);
        let paths: Vec<&str> = differences.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, [".metadata.labels.tier", ".metadata.uid"]);
    }

    #[test]
    fn differences_name_their_path_and_both_sides() {
        let actual = json!({"data": {"a": "1"}, "spec": {"containers": [{"image": "nginx:1"}]}});
        let expected = json!({"data": {"b": "2"}, "spec": {"containers": [{"image": "nginx:2"}]}});
        let differences = compare(&expected, &actual, Mode::Subset);
        let text: Vec<String> = differences.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                ".data.b: missing, expected \"2\"",
                ".spec.containers[0].image: expected \"nginx:2\", got \"nginx:1\""
            ]
        );
    }

    #[test]
    fn lists_compare_item_by_item_and_by_length() {
        let differences = compare(&json!([1, 2]), &json!([1, 2, 3]), Mode::Subset);
        assert_eq!(differences[0].to_string(), "[2]: not expected, got 3");
        let differences = compare(
            &json!([{"a": 1}, {"b": 2}]),
            &json!([{"a": 1}]),
            Mode::Subset,
        );
        assert_eq!(
            differences[0].to_string(),
            "[1]: missing, expected {\"b\":2}"
        );
    }

    #[test]
    fn keys_with_dots_are_quoted_and_numbers_compare_by_value() {
        let actual = json!({"metadata": {"labels": {"app.kubernetes.io/name": "x"}}, "n": 1.0});
        let expected = json!({"metadata": {"labels": {"app.kubernetes.io/name": "y"}}, "n": 1});
        let differences = compare(&expected, &actual, Mode::Subset);
        assert_eq!(differences.len(), 1);
        assert_eq!(
            differences[0].path,
            ".metadata.labels[\"app.kubernetes.io/name\"]"
        );
    }

    #[test]
    fn a_type_mismatch_is_one_difference_and_long_values_are_cut() {
        let long = "x".repeat(500);
        let differences = compare(&json!({"a": {"b": 1}}), &json!({"a": long}), Mode::Subset);
        assert_eq!(differences.len(), 1);
        assert!(differences[0].to_string().contains("… (502 bytes)"));
    }
}
