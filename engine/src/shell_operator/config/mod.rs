//! shell-operator hook configurations (what a hook prints for `--config`), YAML or
//! JSON, `configVersion: v1` or the legacy v0 form, read into the declared
//! [`HookConfig`].
//!
//! Only the *shape* is checked here (field names and types, in shell-operator's
//! spelling); every rule about *meaning* lives in `hooks::config::validate`, so wasm and
//! script hooks are held to the same rules. Every problem is reported at once.

use super::duration::parse_go_duration;
use crate::model::HookConfig;
use crate::model::config::{BindingKind, ConfigProblem, Problems, location};
use serde_json::{Map, Value};

mod v0;
mod v1;
mod write;

pub use write::to_json;

/// Reads a shell-operator hook configuration (what a hook prints for `--config`), YAML
/// or JSON, into the contract's [`HookConfig`].
///
/// `configVersion: v1` uses shell-operator's v1 field names. Without `configVersion`
/// the legacy v0 form is read (`onStartup`, `schedule{name, crontab, allowFailure}`,
/// `onKubernetesEvent{name, event: [add|update|delete], kind, selector, objectName,
/// namespaceSelector{matchNames, any}, jqFilter, allowFailure}`) and mapped to v1; such
/// hooks then receive v1 binding contexts.
///
/// Only the shape is checked here: every unknown field (a typo must not silently turn
/// an option off) and every value of the wrong type is a problem. What the values
/// mean is checked by [`crate::hooks::config::validate`]. As in shell-operator, a
/// `schedule` or `kubernetes` binding without `name` is called `schedule` or
/// `kubernetes` (`onKubernetesEvent` in v0).
///
/// Operon's one extension is `settings.timeout` (a duration such as `30s`): the
/// run budget, which shell-operator does not have. Options shell-operator accepts but
/// ignores (`resynchronizationPeriod`) are accepted with a warning, as existing hooks
/// must load; options that Operon does not offer yet (`kubernetesMutating`,
/// `matchConditions`, `sideEffects: NoneOnDryRun`) are problems with a reason, so
/// nothing is silently dropped. [`parse_with_warnings`] also returns the warnings.
pub fn parse(hook: &str, text: &str) -> Result<HookConfig, Vec<ConfigProblem>> {
    parse_with_warnings(hook, text).map(|parsed| parsed.config)
}

/// A configuration that reads, with what it holds that is accepted but ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The configuration as declared.
    pub config: HookConfig,
    /// Options accepted and ignored, as shell-operator ignores them, each naming the
    /// binding and the field.
    pub warnings: Vec<ConfigProblem>,
}

/// [`parse`], also returning the warnings.
pub fn parse_with_warnings(hook: &str, text: &str) -> Result<Parsed, Vec<ConfigProblem>> {
    let mut r = Reader {
        problems: Problems::new(hook),
        warnings: Problems::new(hook),
    };
    let document = match parse_document(text) {
        Ok(document) => document,
        Err(reason) => {
            r.problems.push(None, "", reason);
            return Err(r.problems.list);
        }
    };
    let config = match document.as_object().map(|map| map.get("configVersion")) {
        None => {
            r.problems.push(
                None,
                "",
                format!(
                    "the configuration must be a mapping, not {}",
                    type_name(&document)
                ),
            );
            None
        }
        Some(None) => r.config_v0(&document),
        Some(Some(Value::String(version))) if version == "v1" => r.config_v1(&document),
        Some(Some(other)) => {
            r.problems.push(
                None,
                "configVersion",
                format!("{other} is not a supported version: use v1 (or omit it for v0)"),
            );
            None
        }
    };
    match config {
        Some(config) => r.problems.finish(Parsed {
            config,
            warnings: r.warnings.list,
        }),
        None => Err(r.problems.list),
    }
}

fn parse_document(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Err("the configuration is empty".to_owned());
    }
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))
    } else {
        yaml_serde::from_str(text).map_err(|e| format!("not valid YAML: {e}"))
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Where a value sits: the binding (once known) and the field path inside it.
#[derive(Debug, Clone, Default)]
struct At {
    binding: Option<String>,
    path: String,
}

impl At {
    fn binding(kind: BindingKind, index: usize, name: &str) -> Self {
        Self {
            binding: Some(location(kind, index, name)),
            path: String::new(),
        }
    }

    /// A top-level field outside any binding.
    fn top(field: &str) -> Self {
        Self {
            binding: None,
            path: field.to_owned(),
        }
    }

    fn key(&self, key: &str) -> Self {
        Self {
            binding: self.binding.clone(),
            path: if self.path.is_empty() {
                key.to_owned()
            } else {
                format!("{}.{key}", self.path)
            },
        }
    }

    fn item(&self, index: usize) -> Self {
        Self {
            binding: self.binding.clone(),
            path: format!("{}[{index}]", self.path),
        }
    }
}

/// Fields that exist elsewhere but are not accepted, with the reason to give.
type Refused<'a> = &'a [(&'a str, &'a str)];

/// A reader of one configuration document that records every shape problem.
struct Reader<'h> {
    problems: Problems<'h>,
    /// Options accepted but ignored.
    warnings: Problems<'h>,
}

impl Reader<'_> {
    fn problem(&mut self, at: &At, reason: impl Into<String>) {
        self.problems
            .push(at.binding.as_deref(), at.path.clone(), reason);
    }

    fn warning(&mut self, at: &At, reason: impl Into<String>) {
        self.warnings
            .push(at.binding.as_deref(), at.path.clone(), reason);
    }

    /// A field shell-operator accepts as a string and then ignores: a warning when it
    /// is a string, a problem otherwise (shell-operator refuses that too).
    fn ignored_string(&mut self, at: &At, map: &Map<String, Value>, key: &str) {
        if self.string(at, map, key).is_some() {
            self.warning(
                &at.key(key),
                "ignored: shell-operator accepts it but does nothing with it, and neither \
                 does Operon; it can be removed",
            );
        }
    }

    /// `value` as a mapping whose keys are all in `allowed`.
    fn object<'v>(
        &mut self,
        at: &At,
        value: &'v Value,
        allowed: &[&str],
        refused: Refused<'_>,
    ) -> Option<&'v Map<String, Value>> {
        let Some(map) = value.as_object() else {
            self.problem(
                at,
                format!("expected a mapping, found {}", type_name(value)),
            );
            return None;
        };
        for key in map.keys() {
            if allowed.contains(&key.as_str()) {
                continue;
            }
            let reason = match refused.iter().find(|(name, _)| name == key) {
                Some((_, reason)) => (*reason).to_owned(),
                None => unknown_field_reason(key, allowed),
            };
            self.problem(&at.key(key), reason);
        }
        Some(map)
    }

    /// A field's value; `null` counts as absent, as it does for shell-operator.
    fn field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
        map.get(key).filter(|v| !v.is_null())
    }

    fn string(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<String> {
        match Self::field(map, key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.problem(
                    &at.key(key),
                    format!("expected a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn bool(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<bool> {
        match Self::field(map, key)? {
            Value::Bool(b) => Some(*b),
            // Quoted booleans are common in hand-written YAML; their meaning is clear.
            Value::String(s) if s == "true" => Some(true),
            Value::String(s) if s == "false" => Some(false),
            other => {
                self.problem(
                    &at.key(key),
                    format!("expected true or false, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn integer(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<i64> {
        let value = Self::field(map, key)?;
        let number = match value {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
            // shell-operator reads executionBurst as a string; accept both spellings.
            Value::String(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        };
        if number.is_none() {
            self.problem(&at.key(key), format!("expected an integer, found {value}"));
        }
        number
    }

    fn list<'v>(&mut self, at: &At, map: &'v Map<String, Value>, key: &str) -> Option<&'v [Value]> {
        match Self::field(map, key)? {
            Value::Array(items) => Some(items),
            other => {
                self.problem(
                    &at.key(key),
                    format!("expected a list, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn string_list(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<Vec<String>> {
        let items = self.list(at, map, key)?;
        let at = at.key(key);
        Some(self.strings(&at, items))
    }

    fn strings(&mut self, at: &At, items: &[Value]) -> Vec<String> {
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) => out.push(s.clone()),
                other => self.problem(
                    &at.item(i),
                    format!("expected a string, found {}", type_name(other)),
                ),
            }
        }
        out
    }

    fn duration_ms(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<u64> {
        let text = self.string(at, map, key)?;
        match parse_go_duration(text.trim()) {
            Ok(duration) => Some(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)),
            Err(reason) => {
                self.problem(&at.key(key), reason.to_string());
                None
            }
        }
    }

    /// The `name` of a binding item, read first so later problems can name it.
    fn binding_name(value: &Value, default: &str) -> String {
        match value.get("name") {
            Some(Value::String(name)) => name.clone(),
            _ => default.to_owned(),
        }
    }

    /// Each item of the list at `key`, with its index.
    fn items<'v>(
        &mut self,
        map: &'v Map<String, Value>,
        key: &str,
    ) -> impl Iterator<Item = (usize, &'v Value)> + use<'v> {
        self.list(&At::top(""), map, key)
            .unwrap_or_default()
            .iter()
            .enumerate()
    }

    fn on_startup(&mut self, map: &Map<String, Value>) -> Option<i32> {
        let at = At::top("");
        let order = self.integer(&at, map, "onStartup")?;
        match i32::try_from(order) {
            Ok(order) => Some(order),
            Err(_) => {
                self.problem(&at.key("onStartup"), format!("{order} is out of range"));
                None
            }
        }
    }

    // --- v1 ---------------------------------------------------------------------------
}

/// "unknown field", with the closest allowed name when one is near enough to be the
/// intended one.
fn unknown_field_reason(key: &str, allowed: &[&str]) -> String {
    let closest = allowed
        .iter()
        .map(|name| {
            (
                edit_distance(&key.to_ascii_lowercase(), &name.to_ascii_lowercase()),
                name,
            )
        })
        .min_by_key(|(distance, _)| *distance)
        .filter(|(distance, name)| *distance <= 2 || distance * 4 <= name.len());
    match closest {
        Some((_, name)) => format!("unknown field; did you mean {name}?"),
        None if allowed.is_empty() => "unknown field".to_owned(),
        None => format!("unknown field; expected one of: {}", allowed.join(", ")),
    }
}

/// Levenshtein distance, for typo suggestions on short field names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests;
