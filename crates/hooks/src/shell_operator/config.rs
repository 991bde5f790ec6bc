//! shell-operator hook configurations (what a hook prints for `--config`), YAML or
//! JSON, `configVersion: v1` or the legacy v0 form, read into the declared
//! [`HookConfig`].
//!
//! Each concern has its own file: the formats as serde types (`format_v1`,
//! `format_v0`, with the scalar values in `values`), reading them so that every
//! problem is reported at once (`read`), and the conversion to the contract with
//! shell-operator's defaults (`convert`). Only the *shape* is checked here (field
//! names and types, in shell-operator's spelling); every rule about *meaning* lives in
//! `hooks::config::validate`, so wasm and script hooks are held to the same rules.
//! [`to_json`] writes a configuration back in the v1 format.

use operon_data::model::HookConfig;
use operon_data::model::config::ConfigProblem;
use serde_json::Value;

mod convert;
mod format_v0;
mod format_v1;
mod read;
mod values;
mod write;

pub use write::to_json;

/// Reads a shell-operator hook configuration (what a hook prints for `--config`), YAML
/// or JSON, into the contract's [`HookConfig`].
///
/// `configVersion: v1` uses shell-operator's v1 field names, every section included:
/// `kubernetesValidating` and `kubernetesMutating` (with `matchConditions` and
/// `sideEffects`), and `kubernetesCustomResourceConversion`. Without `configVersion`
/// the legacy v0 form is read (`onStartup`, `schedule{name, crontab, allowFailure}`,
/// `onKubernetesEvent{name, event: [add|update|delete], kind, selector, objectName,
/// namespaceSelector{matchNames, any}, jqFilter, allowFailure}`) and mapped to v1 (see
/// [`operon_data::model::ConfigVersion::V0`]). `configVersion: v0` written out is refused, as
/// shell-operator refuses it.
///
/// Only the shape is checked here: an unknown field is a problem wherever
/// shell-operator refuses it (a typo must not silently turn an option off), with the
/// nearest known name as a suggestion, and so is every value of the wrong type. What
/// the values mean is checked by [`crate::config::validate`]. As in
/// shell-operator, a `schedule` or `kubernetes` binding without `name` is called
/// `schedule` or `kubernetes` (`onKubernetesEvent` in v0).
///
/// Operon's extensions are `settings.timeout` (a duration such as `30s`: the run
/// budget, which shell-operator does not have), `reinvocationPolicy` on mutating
/// bindings and `enforcement` on validating and mutating ones (`Deny`, `Warn`,
/// `DryRun`: shell-operator refuses the unknown key, so a hook using it is Operon's). What shell-operator accepts and ignores loads with a warning, as existing
/// hooks must load: `resynchronizationPeriod`, and unknown keys where its schema does
/// not refuse them (v0 bindings, `matchConditions` items). `parse_with_warnings`
/// also returns the warnings.
pub fn parse(hook: &str, text: &str) -> Result<HookConfig, Vec<ConfigProblem>> {
    parse_with_warnings(hook, text).map(|parsed| parsed.config)
}

/// A configuration that reads, with what it holds that is accepted but ignored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parsed {
    /// The configuration as declared.
    pub(crate) config: HookConfig,
    /// Options accepted and ignored, as shell-operator ignores them, each naming the
    /// binding and the field.
    pub(crate) warnings: Vec<ConfigProblem>,
}

/// [`parse`], also returning the warnings.
pub(crate) fn parse_with_warnings(hook: &str, text: &str) -> Result<Parsed, Vec<ConfigProblem>> {
    let mut reader = read::Reader::new(hook);
    let config = match parse_document(text) {
        Ok(document) => read_version(&mut reader, document),
        Err(reason) => {
            reader.problem(None, "", reason);
            None
        }
    };
    reader
        .finish(config)
        .map(|(config, warnings)| Parsed { config, warnings })
}

/// The document as JSON values. YAML is read as YAML 1.2 (`yes` is a string), into
/// the same values JSON gives, as shell-operator turns YAML into JSON first.
fn parse_document(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Err("the configuration is empty".to_owned());
    }
    // A key given twice (the second silently winning), a number no JSON integer holds
    // and a document over the limits are refused here with where they are, in JSON too.
    let scanned = operon_data::yaml_scan::scan(text, operon_data::yaml_scan::LIMITS);
    let findings: Vec<String> = (scanned.documents.iter())
        .flat_map(|document| &document.findings)
        .map(|f| match f.field.as_str() {
            "" => f.reason.clone(),
            field => format!("{field}: {}", f.reason),
        })
        .collect();
    if !findings.is_empty() {
        return Err(findings.join("; "));
    }
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))
    } else {
        yaml_serde::from_str(text).map_err(|e| format!("not valid YAML: {e}"))
    }
}

/// Picks the format by `configVersion` and reads the document in it.
fn read_version(reader: &mut read::Reader<'_>, document: Value) -> Option<HookConfig> {
    let Value::Object(map) = &document else {
        reader.problem(
            None,
            "",
            format!(
                "the configuration must be a mapping, not {}",
                type_name(&document)
            ),
        );
        return None;
    };
    match map.get("configVersion") {
        None => convert::config_v0(reader, document),
        Some(Value::String(version)) if version == "v1" => convert::config_v1(reader, document),
        // shell-operator's v0 schema has no configVersion key and refuses unknown keys.
        Some(Value::String(version)) if version == "v0" => {
            reader.problem(
                None,
                "configVersion",
                "shell-operator refuses configVersion: v0 written out: omit configVersion \
                 for the v0 form, or use v1",
            );
            None
        }
        Some(other) => {
            reader.problem(
                None,
                "configVersion",
                format!("{other} is not a supported version: use v1 (or omit it for v0)"),
            );
            None
        }
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

#[cfg(test)]
mod tests;
