//! Reading a part of a configuration into its serde format type while reporting every
//! problem in it, not only the first.
//!
//! serde stops at the first error. So each error is recorded with its field path
//! (`serde_path_to_error`), the part it points at is removed from the value, and the
//! read is tried again, until it succeeds or nothing is left to remove: one problem
//! never hides another. The value read after removals is only used to find more
//! problems; a configuration with any problem is refused as a whole.
//!
//! The read goes through `serde_value` with this module's own error type, so unknown
//! and missing fields arrive as data (the key, the allowed keys) rather than as text.

use operon_data::model::config::{ConfigProblem, Problems};
use serde::de::{self, DeserializeOwned, Expected, Unexpected};
use serde_json::Value;
use std::fmt;

/// Specific reasons for keys that are refused for a known cause, by field path (e.g.
/// `namespace.nameSelector`): said instead of "unknown field".
pub(super) type Hints<'a> = &'a [(&'a str, &'a str)];

/// What is said of a key that shell-operator ignores without refusing it.
const IGNORED_KEY: &str = "ignored: shell-operator does not know this field and skips it, \
                           and so does Operon";

/// A bound on the retries, far above any real configuration's problem count: each
/// retry removes a part of a finite value, so this only caps a pathological input.
const MAX_PASSES: usize = 1_000;

/// Collects the problems and warnings of one configuration document.
pub(super) struct Reader<'h> {
    problems: Problems<'h>,
    warnings: Problems<'h>,
}

impl<'h> Reader<'h> {
    pub(super) fn new(hook: &'h str) -> Self {
        Self {
            problems: Problems::new(hook),
            warnings: Problems::new(hook),
        }
    }

    /// A problem of `binding` (or of the document, when `None`) at `field`.
    pub(super) fn problem(
        &mut self,
        binding: Option<&str>,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) {
        self.problems.push(binding, field, reason);
    }

    /// Something accepted and ignored, as shell-operator ignores it.
    pub(super) fn warning(
        &mut self,
        binding: Option<&str>,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) {
        self.warnings.push(binding, field, reason);
    }

    /// `value` when nothing was wrong, with the warnings; every problem otherwise.
    pub(super) fn finish<T>(
        self,
        value: Option<T>,
    ) -> Result<(T, Vec<ConfigProblem>), Vec<ConfigProblem>> {
        match value {
            Some(value) => self.problems.finish((value, self.warnings.list)),
            None => Err(self.problems.list),
        }
    }

    /// Reads `value` as a `T`, recording every problem of it under `binding`. `None`
    /// when the value as a whole is unusable (not a mapping, say); a `Some` may still
    /// come with problems, recorded here.
    pub(super) fn read<T: DeserializeOwned>(
        &mut self,
        binding: Option<&str>,
        mut value: Value,
        hints: Hints<'_>,
    ) -> Option<T> {
        let mut removals = Removals::default();
        // Fields already reported, so that a required field removed for being wrong
        // is not reported a second time as missing.
        let mut reported: Vec<Vec<Step>> = Vec::new();
        for _ in 0..MAX_PASSES {
            let mut ignored = Vec::new();
            let (at, error) = match attempt::<T>(&value, &mut ignored) {
                Ok(read) => {
                    for path in ignored {
                        self.ignored_key::<T>(binding, &path);
                    }
                    return Some(read);
                }
                Err(failure) => failure,
            };
            let mut path = removals.original(&at);
            let reason = match error {
                // The path ends with the key: serde_path_to_error captures string keys
                // before they are matched, and JSON keys are strings.
                ShapeError::UnknownField { field, expected } => {
                    let text = path_text(&path);
                    match hints.iter().find(|(hinted, _)| *hinted == text) {
                        Some((_, hint)) => Some((*hint).to_owned()),
                        None => Some(unknown_field_reason(&field, expected)),
                    }
                }
                ShapeError::MissingField(field) => {
                    path.push(Step::Key(field.to_owned()));
                    (!reported.contains(&path)).then(|| "required".to_owned())
                }
                ShapeError::Invalid(reason) => Some(reason),
            };
            if let Some(reason) = reason {
                self.problem(binding, path_text(&path), reason);
                reported.push(path);
            }
            if !removals.remove(&mut value, &at) {
                return None;
            }
        }
        self.problem(binding, "", "too many problems to list them all");
        None
    }

    /// A warning for a key that a tolerant object (one shell-operator reads without
    /// refusing unknown keys) does not know, with a suggestion when the key sits on
    /// the top level of `T`, whose fields are known.
    fn ignored_key<T: DeserializeOwned>(&mut self, binding: Option<&str>, path: &[Step]) {
        let reason = match path {
            [Step::Key(key)] => match closest(key, serde_aux::prelude::serde_introspect::<T>()) {
                Some(name) => format!("{IGNORED_KEY}; did you mean {name}?"),
                None => IGNORED_KEY.to_owned(),
            },
            _ => IGNORED_KEY.to_owned(),
        };
        self.warning(binding, path_text(path), reason);
    }
}

/// One read of `value`: the result, or where it failed and why. Keys that tolerant
/// types skipped are added to `ignored`.
fn attempt<T: DeserializeOwned>(
    value: &Value,
    ignored: &mut Vec<Vec<Step>>,
) -> Result<T, (Vec<Step>, ShapeError)> {
    let value = serde_value::to_value(value)
        .map_err(|e| (Vec::new(), ShapeError::Invalid(e.to_string())))?;
    let deserializer = serde_value::ValueDeserializer::<ShapeError>::new(value);
    let mut skipped = |path: serde_ignored::Path<'_>| ignored.push(ignored_steps(&path));
    let deserializer = serde_ignored::Deserializer::new(deserializer, &mut skipped);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let steps = (error.path().iter())
            .map_while(|segment| match segment {
                serde_path_to_error::Segment::Seq { index } => Some(Step::Index(*index)),
                serde_path_to_error::Segment::Map { key } => Some(Step::Key(key.clone())),
                // Neither occurs in the format types; stop the path where it is known.
                serde_path_to_error::Segment::Enum { .. }
                | serde_path_to_error::Segment::Unknown => None,
            })
            .collect();
        (steps, error.into_inner())
    })
}

fn ignored_steps(path: &serde_ignored::Path<'_>) -> Vec<Step> {
    let mut steps = match path {
        serde_ignored::Path::Root => return Vec::new(),
        serde_ignored::Path::Seq { parent, .. }
        | serde_ignored::Path::Map { parent, .. }
        | serde_ignored::Path::Some { parent }
        | serde_ignored::Path::NewtypeStruct { parent }
        | serde_ignored::Path::NewtypeVariant { parent } => ignored_steps(parent),
    };
    match path {
        serde_ignored::Path::Seq { index, .. } => steps.push(Step::Index(*index)),
        serde_ignored::Path::Map { key, .. } => steps.push(Step::Key(key.clone())),
        _ => {}
    }
    steps
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// `labelSelector.matchExpressions[0].operator`, as shell-operator's users write it.
fn path_text(path: &[Step]) -> String {
    let mut text = String::new();
    for step in path {
        match step {
            Step::Key(key) if text.is_empty() => text.push_str(key),
            Step::Key(key) => {
                text.push('.');
                text.push_str(key);
            }
            Step::Index(index) => text.push_str(&format!("[{index}]")),
        }
    }
    text
}

/// The list items removed so far, so that paths into the shortened value can be told
/// in the positions the author wrote.
#[derive(Default)]
struct Removals {
    /// Each list (by its path in the original value) with the original positions of
    /// the items removed from it.
    lists: Vec<(Vec<Step>, Vec<usize>)>,
}

impl Removals {
    /// `path` (in the current value) in the original value's positions.
    fn original(&self, path: &[Step]) -> Vec<Step> {
        let mut original = Vec::with_capacity(path.len());
        for step in path {
            let step = match step {
                Step::Index(index) => Step::Index(self.original_index(&original, *index)),
                key => key.clone(),
            };
            original.push(step);
        }
        original
    }

    fn original_index(&self, list: &[Step], index: usize) -> usize {
        let Some((_, removed)) = self.lists.iter().find(|(path, _)| path == list) else {
            return index;
        };
        let mut original = index;
        // `removed` is sorted: each removal at or before the position shifts it on.
        for &gone in removed {
            if gone <= original {
                original += 1;
            }
        }
        original
    }

    /// Removes what `path` (in the current value) points at; false when it points at
    /// the whole value or at nothing.
    fn remove(&mut self, value: &mut Value, path: &[Step]) -> bool {
        let Some((last, parent)) = path.split_last() else {
            return false;
        };
        let mut node = &mut *value;
        for step in parent {
            node = match (step, node) {
                (Step::Key(key), Value::Object(map)) => match map.get_mut(key) {
                    Some(child) => child,
                    None => return false,
                },
                (Step::Index(index), Value::Array(items)) => match items.get_mut(*index) {
                    Some(child) => child,
                    None => return false,
                },
                _ => return false,
            };
        }
        match (last, node) {
            (Step::Key(key), Value::Object(map)) => map.remove(key).is_some(),
            (Step::Index(index), Value::Array(items)) if *index < items.len() => {
                items.remove(*index);
                let list = self.original(parent);
                let gone = self.original_index(&list, *index);
                match self.lists.iter_mut().find(|(path, _)| *path == list) {
                    Some((_, removed)) => {
                        let at = removed.partition_point(|&r| r < gone);
                        removed.insert(at, gone);
                    }
                    None => self.lists.push((list, vec![gone])),
                }
                true
            }
            _ => false,
        }
    }
}

/// Why a read failed, as data where the reader acts on it.
#[derive(Debug, thiserror::Error)]
enum ShapeError {
    /// A key the object does not have.
    #[error("unknown field {field}")]
    UnknownField {
        /// The key as written.
        field: String,
        /// The keys the object has.
        expected: &'static [&'static str],
    },
    /// A required key that is absent.
    #[error("missing field {0}")]
    MissingField(&'static str),
    /// Any other problem, phrased for the author.
    #[error("{0}")]
    Invalid(String),
}

impl de::Error for ShapeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Self::Invalid(message.to_string())
    }

    fn invalid_type(found: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self::Invalid(format!(
            "expected {}, found {}",
            expected_text(expected),
            found_text(&found)
        ))
    }

    fn invalid_value(found: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self::invalid_type(found, expected)
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        Self::Invalid(format!("{variant:?} is not {}", one_of(expected)))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        Self::UnknownField {
            field: field.to_owned(),
            expected,
        }
    }

    fn missing_field(field: &'static str) -> Self {
        Self::MissingField(field)
    }
}

/// serde's names for what it expected, in the words of a YAML author.
fn expected_text(expected: &dyn Expected) -> String {
    match expected.to_string().as_str() {
        "a sequence" => "a list".to_owned(),
        "a map" => "a mapping".to_owned(),
        // What `serde_value` says when an enum (a fixed set of strings) gets another type.
        "string or map" => "a string".to_owned(),
        other => other.to_owned(),
    }
}

/// A value as its author wrote it: the scalar itself, or what kind of thing it is.
pub(super) fn found_text(found: &Unexpected<'_>) -> String {
    match found {
        Unexpected::Bool(b) => b.to_string(),
        Unexpected::Unsigned(n) => n.to_string(),
        Unexpected::Signed(n) => n.to_string(),
        Unexpected::Float(f) => f.to_string(),
        Unexpected::Str(s) => format!("{s:?}"),
        Unexpected::Unit | Unexpected::Option => "null".to_owned(),
        Unexpected::Seq => "a list".to_owned(),
        Unexpected::Map => "a mapping".to_owned(),
        other => other.to_string(),
    }
}

/// `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names {
        [] => "anything".to_owned(),
        [only] => (*only).to_owned(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// "unknown field", with the closest allowed key when one is near enough to be the
/// intended one.
fn unknown_field_reason(key: &str, allowed: &[&str]) -> String {
    match closest(key, allowed) {
        Some(name) => format!("unknown field; did you mean {name}?"),
        None if allowed.is_empty() => "unknown field".to_owned(),
        None => format!("unknown field; expected one of: {}", allowed.join(", ")),
    }
}

/// The allowed key nearest to `key` by edit distance, ignoring case, when it is close
/// enough to be a misspelling: two edits, or a quarter of the name for long names.
fn closest<'a>(key: &str, allowed: &[&'a str]) -> Option<&'a str> {
    let key = key.to_ascii_lowercase();
    allowed
        .iter()
        .map(|name| (strsim::levenshtein(&key, &name.to_ascii_lowercase()), *name))
        .min_by_key(|(distance, _)| *distance)
        .filter(|(distance, name)| *distance <= 2 || distance * 4 <= name.len())
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[expect(dead_code, reason = "only read to find problems")]
    struct Item {
        name: String,
        values: Option<Vec<u8>>,
    }

    fn problems(value: Value) -> Vec<String> {
        let mut reader = Reader::new("h");
        reader.read::<Vec<Item>>(None, value, &[]);
        match reader.finish(Some(())) {
            Ok(_) => Vec::new(),
            Err(problems) => problems.into_iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn every_problem_is_reported_at_the_position_written() {
        let problems = problems(json!([
            {"name": 1},
            "not a mapping",
            {"name": "ok", "values": [1, "x", 2, "y"], "nmae": "n"},
            {"values": []},
        ]));
        assert_eq!(
            problems,
            [
                r#"hook "h": [0].name: expected a string, found 1"#,
                r#"hook "h": [1]: expected struct Item, found "not a mapping""#,
                r#"hook "h": [2].nmae: unknown field; did you mean name?"#,
                r#"hook "h": [2].values[1]: expected u8, found "x""#,
                r#"hook "h": [2].values[3]: expected u8, found "y""#,
                r#"hook "h": [3].name: required"#,
            ]
        );
    }

    #[test]
    fn a_wrong_required_field_is_not_also_missing() {
        assert_eq!(
            problems(json!([{"name": true}])),
            [r#"hook "h": [0].name: expected a string, found true"#]
        );
    }

    #[test]
    fn suggestions_need_a_near_name() {
        assert_eq!(closest("jqFiltr", &["jqFilter", "kind"]), Some("jqFilter"));
        assert_eq!(closest("JQFILTER", &["jqFilter"]), Some("jqFilter"));
        assert_eq!(closest("selector", &["jqFilter", "kind"]), None);
        assert_eq!(
            one_of(&["Added", "Modified", "Deleted"]),
            "Added, Modified or Deleted"
        );
    }
}
