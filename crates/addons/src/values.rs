//! Values, layered as addon-operator layers them (lowest priority first): the common
//! `values.yaml`, the module's `values.yaml`, the config schema's defaults, the config
//! values (the ConfigMap's section, or a ModuleConfig's settings), the values schema's
//! defaults, then the JSON patches hooks submitted. Config values (what users set, kept
//! in the ConfigMap or a ModuleConfig) and memory values
//! (what hooks patched, lost on restart) stay apart; each key remembers the layer that
//! set it, for `operon modules values`.

use super::AddonError;
use super::schema::{Schema, dotted};
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The layer a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// `MODULES_DIR/values.yaml`.
    CommonValues,
    /// The module's own `values.yaml`.
    ModuleValues,
    /// A `default` of `openapi/config-values.yaml`.
    ConfigSchemaDefault,
    /// The ConfigMap.
    ConfigMap,
    /// A ModuleConfig's `spec.settings`.
    ModuleConfig,
    /// A `default` of `openapi/values.yaml`.
    ValuesSchemaDefault,
    /// A JSON patch a hook submitted.
    HookPatch,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::CommonValues => "modules/values.yaml",
            Self::ModuleValues => "module values.yaml",
            Self::ConfigSchemaDefault => "openapi/config-values.yaml default",
            Self::ConfigMap => "ConfigMap",
            Self::ModuleConfig => "ModuleConfig",
            Self::ValuesSchemaDefault => "openapi/values.yaml default",
            Self::HookPatch => "hook patch",
        })
    }
}

/// The values of one section (`global` or one module), layer by layer.
#[derive(Debug)]
pub(crate) struct Section {
    /// The section's key: `global` or the module's values key.
    pub(crate) key: String,
    /// What names the section in errors (`global` or `module echo`).
    pub(crate) label: String,
    /// The static layers, in order.
    statics: Vec<(Source, Value)>,
    /// The config values (the ConfigMap's section or a ModuleConfig's settings), `{}`
    /// when absent.
    config: Value,
    /// Where the config values came from.
    config_source: Source,
    config_schema: Option<Schema>,
    values_schema: Option<Schema>,
    /// Memory patches, in the order hooks submitted them.
    patches: Vec<json_patch::PatchOperation>,
}

/// A section's values with the layer of each leaf.
#[derive(Debug, Clone, PartialEq)]
pub struct Computed {
    /// The merged values.
    pub values: Value,
    /// The layer that last set each leaf, by JSON pointer.
    pub sources: BTreeMap<String, Source>,
}

impl Section {
    /// A section with its static layers and schemas.
    pub(crate) fn new(
        key: &str,
        label: &str,
        statics: Vec<(Source, Value)>,
        config_schema: Option<&Value>,
        values_schema: Option<&Value>,
    ) -> Result<Self, AddonError> {
        let compile = |which: &str, raw: &Value, config: Option<&Value>| {
            Schema::new(raw, config).map_err(|reason| AddonError::Schema {
                section: label.to_owned(),
                which: which.to_owned(),
                reason,
            })
        };
        Ok(Self {
            key: key.to_owned(),
            label: label.to_owned(),
            statics,
            config: Value::Object(Map::new()),
            config_source: Source::ConfigMap,
            config_schema: config_schema
                .map(|s| compile("openapi/config-values.yaml", s, None))
                .transpose()?,
            values_schema: values_schema
                .map(|s| compile("openapi/values.yaml", s, config_schema))
                .transpose()?,
            patches: Vec::new(),
        })
    }

    /// The config values.
    pub(crate) fn config(&self) -> &Value {
        &self.config
    }

    /// Checks `config` against the config schema (its defaults applied first).
    pub(crate) fn check_config(&self, config: &Value) -> Result<(), AddonError> {
        if let Some(schema) = &self.config_schema {
            let mut with_defaults = config.clone();
            schema.apply_defaults(&mut with_defaults);
            let problems = schema.problems(&self.key, &with_defaults);
            if !problems.is_empty() {
                return Err(AddonError::InvalidValues {
                    section: self.label.clone(),
                    which: "config values".to_owned(),
                    problems,
                });
            }
        }
        Ok(())
    }

    /// Replaces the config values, after checking them.
    pub(crate) fn set_config(&mut self, config: Value) -> Result<(), AddonError> {
        self.check_config(&config)?;
        self.config = config;
        Ok(())
    }

    /// Says where the config values came from (for the source of each value).
    pub(crate) fn set_config_source(&mut self, source: Source) {
        self.config_source = source;
    }

    /// The memory patches so far.
    pub(crate) fn patches(&self) -> &[json_patch::PatchOperation] {
        &self.patches
    }

    /// Adds memory patches (paths relative to the values document, `/KEY/...`) if the
    /// values they give are valid; nothing changes otherwise.
    pub(crate) fn add_patches(
        &mut self,
        ops: Vec<json_patch::PatchOperation>,
    ) -> Result<(), AddonError> {
        let before = self.patches.len();
        self.patches.extend(ops);
        if let Err(e) = self.compute() {
            self.patches.truncate(before);
            return Err(e);
        }
        Ok(())
    }

    /// Checks the merged values for rendering: the values schema (the config schema
    /// when there is none) with its `x-required-for-helm` properties required.
    pub(crate) fn check_for_helm(&self) -> Result<(), AddonError> {
        let values = self.compute()?.values;
        let Some(schema) = self.values_schema.as_ref().or(self.config_schema.as_ref()) else {
            return Ok(());
        };
        if !schema.has_helm_requirements() {
            return Ok(());
        }
        let problems = schema.helm_problems(&self.key, &values);
        if problems.is_empty() {
            return Ok(());
        }
        Err(AddonError::InvalidValues {
            section: self.label.clone(),
            which: "values for rendering (x-required-for-helm)".to_owned(),
            problems,
        })
    }

    /// The merged, validated values.
    pub(crate) fn compute(&self) -> Result<Computed, AddonError> {
        let mut values = Value::Object(Map::new());
        let mut sources = BTreeMap::new();
        for (source, layer) in &self.statics {
            merge_into(&mut values, layer, "", *source, &mut sources);
        }
        if let Some(schema) = &self.config_schema {
            for pointer in schema.apply_defaults(&mut values) {
                sources.insert(pointer, Source::ConfigSchemaDefault);
            }
        }
        merge_into(
            &mut values,
            &self.config,
            "",
            self.config_source,
            &mut sources,
        );
        if let Some(schema) = &self.values_schema {
            for pointer in schema.apply_defaults(&mut values) {
                sources.insert(pointer, Source::ValuesSchemaDefault);
            }
        }
        if !self.patches.is_empty() {
            let mut document = Value::Object(Map::from_iter([(self.key.clone(), values)]));
            for op in &self.patches {
                apply_op(&mut document, op).map_err(|reason| AddonError::Patch {
                    section: self.label.clone(),
                    reason,
                })?;
                let path = op_path(op);
                if let Some(rest) = path.strip_prefix(&format!("/{}", self.key)) {
                    sources.retain(|p, _| !(p == rest || p.starts_with(&format!("{rest}/"))));
                    if !matches!(op, json_patch::PatchOperation::Remove(_)) {
                        sources.insert(rest.to_owned(), Source::HookPatch);
                    }
                }
            }
            values = document
                .get_mut(&self.key)
                .map(Value::take)
                .unwrap_or_else(|| Value::Object(Map::new()));
        }
        // A leaf recorded for an empty mapping that later layers filled is no leaf.
        let pointers: Vec<String> = sources.keys().cloned().collect();
        sources.retain(|p, _| !pointers.iter().any(|q| q.starts_with(&format!("{p}/"))));
        if let Some(schema) = &self.values_schema {
            let problems = schema.problems(&self.key, &values);
            if !problems.is_empty() {
                return Err(AddonError::InvalidValues {
                    section: self.label.clone(),
                    which: "values".to_owned(),
                    problems,
                });
            }
        }
        Ok(Computed { values, sources })
    }
}

/// Deep merge as addon-operator's `MergeValues`: mappings merge key by key, anything
/// else (lists included) replaces. Records the source of each leaf it sets.
fn merge_into(
    target: &mut Value,
    layer: &Value,
    pointer: &str,
    source: Source,
    sources: &mut BTreeMap<String, Source>,
) {
    match (target, layer) {
        (Value::Object(target), Value::Object(layer)) => {
            for (key, value) in layer {
                let child = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                match target.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge_into(existing, value, &child, source, sources);
                    }
                    _ => {
                        sources.retain(|p, _| !p.starts_with(&format!("{child}/")));
                        target.insert(key.clone(), value.clone());
                        record_leaves(value, &child, source, sources);
                    }
                }
            }
        }
        (target, layer) => {
            *target = layer.clone();
            record_leaves(layer, pointer, source, sources);
        }
    }
}

fn record_leaves(value: &Value, pointer: &str, source: Source, out: &mut BTreeMap<String, Source>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let p = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                record_leaves(child, &p, source, out);
            }
        }
        _ => {
            out.insert(pointer.to_owned(), source);
        }
    }
}

fn op_path(op: &json_patch::PatchOperation) -> String {
    use json_patch::PatchOperation as Op;
    match op {
        Op::Add(o) => o.path.to_string(),
        Op::Remove(o) => o.path.to_string(),
        Op::Replace(o) => o.path.to_string(),
        Op::Move(o) => o.path.to_string(),
        Op::Copy(o) => o.path.to_string(),
        Op::Test(o) => o.path.to_string(),
    }
}

/// Applies one operation; removing what is not there is no error (addon-operator's
/// `IgnoreNonExistentPaths`), and `add` creates missing parent mappings.
fn apply_op(document: &mut Value, op: &json_patch::PatchOperation) -> Result<(), String> {
    use json_patch::PatchOperation as Op;
    if let Op::Remove(remove) = op
        && document.pointer(remove.path.as_str()).is_none()
    {
        return Ok(());
    }
    if let Op::Add(add) = op {
        // Hooks write `add /echo/a/b` without creating `/echo/a` first.
        let mut current = &mut *document;
        let tokens: Vec<String> = add
            .path
            .as_str()
            .split('/')
            .skip(1)
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        if let Some((_, parents)) = tokens.split_last() {
            for token in parents {
                let Value::Object(map) = current else { break };
                current = map
                    .entry(token.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
            }
        }
    }
    json_patch::patch(document, std::slice::from_ref(op)).map_err(|e| e.to_string())
}

/// Why a values patch file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PatchFileError {
    /// The file is not JSON.
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// An item is not a JSON Patch operation.
    #[error("item {item}: {operation} is not a JSON Patch operation: {source}")]
    NotAnOperation {
        /// The item's index in the file (0-based).
        item: usize,
        /// The item.
        operation: Value,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// Reads a values patch file: JSON Patch operations as one JSON array, or one
/// operation (or array) per line, as addon-operator accepts.
pub(crate) fn parse_patch_file(
    text: &str,
) -> Result<Vec<json_patch::PatchOperation>, PatchFileError> {
    let mut ops = Vec::new();
    for (i, item) in serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .enumerate()
    {
        let item = item.map_err(PatchFileError::NotJson)?;
        let list = match item {
            Value::Array(list) => list,
            other => vec![other],
        };
        for op in list {
            let parsed: json_patch::PatchOperation =
                serde_json::from_value(op.clone()).map_err(|source| {
                    PatchFileError::NotAnOperation {
                        item: i,
                        operation: op,
                        source,
                    }
                })?;
            ops.push(parsed);
        }
    }
    Ok(ops)
}

/// Checks that every operation stays under `/KEY` (a hook may patch its own section
/// only) and returns them.
pub(crate) fn check_patch_paths(
    ops: Vec<json_patch::PatchOperation>,
    key: &str,
    hook: &str,
) -> Result<Vec<json_patch::PatchOperation>, AddonError> {
    let root = format!("/{key}");
    for op in &ops {
        let path = op_path(op);
        if path != root && !path.starts_with(&format!("{root}/")) {
            return Err(AddonError::PatchOutsideSection {
                hook: hook.to_owned(),
                path: dotted("", &path),
                key: key.to_owned(),
            });
        }
    }
    Ok(ops)
}

/// Applies config patches to `config` (a section's config values, as `{KEY: ...}`
/// document paths) and returns the new section.
pub(crate) fn patched_config(
    config: &Value,
    key: &str,
    ops: &[json_patch::PatchOperation],
) -> Result<Value, String> {
    let mut document = Value::Object(Map::from_iter([(key.to_owned(), config.clone())]));
    for op in ops {
        apply_op(&mut document, op)?;
    }
    Ok(document
        .get_mut(key)
        .map(Value::take)
        .unwrap_or_else(|| Value::Object(Map::new())))
}

/// A stable checksum of a JSON value (keys sorted, as serde_json's maps keep them).
pub(crate) fn checksum(value: &Value) -> String {
    hex::encode(Sha256::digest(value.to_string().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn section() -> Section {
        Section::new(
            "echo",
            "module echo",
            vec![
                (
                    Source::CommonValues,
                    json!({"replicas": 1, "image": {"tag": "a"}}),
                ),
                (
                    Source::ModuleValues,
                    json!({"image": {"tag": "b", "repo": "r"}}),
                ),
            ],
            Some(&json!({"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "message": {"type": "string", "default": "hi"}}})),
            Some(
                &json!({"type": "object", "x-extend": {"schema": "config-values.yaml"},
                "properties": {"image": {"type": "object"},
                               "internal": {"type": "object", "default": {}}}}),
            ),
        )
        .unwrap()
    }

    #[test]
    fn layers_merge_in_addon_operator_order_with_sources() {
        let mut s = section();
        s.set_config(json!({"replicas": 3})).unwrap();
        let c = s.compute().unwrap();
        assert_eq!(
            c.values,
            json!({"replicas": 3, "image": {"tag": "b", "repo": "r"}, "message": "hi", "internal": {}})
        );
        assert_eq!(c.sources["/replicas"], Source::ConfigMap);
        assert_eq!(c.sources["/image/tag"], Source::ModuleValues);
        assert_eq!(c.sources["/message"], Source::ConfigSchemaDefault);
        assert_eq!(c.sources["/internal"], Source::ValuesSchemaDefault);
    }

    #[test]
    fn patches_are_memory_values_and_invalid_ones_are_refused() {
        let mut s = section();
        let ops = parse_patch_file(
            r#"{"op":"add","path":"/echo/internal/ready","value":true}
               [{"op":"remove","path":"/echo/nothing"}]"#,
        )
        .unwrap();
        s.add_patches(ops).unwrap();
        let c = s.compute().unwrap();
        assert_eq!(c.values["internal"]["ready"], true);
        assert_eq!(c.sources["/internal/ready"], Source::HookPatch);
        assert_eq!(s.config(), &json!({}), "config values are not touched");

        let bad =
            parse_patch_file(r#"[{"op":"add","path":"/echo/replicas","value":"x"}]"#).unwrap();
        let err = s.add_patches(bad).unwrap_err().to_string();
        assert!(
            err.contains("module echo") && err.contains("echo.replicas"),
            "{err}"
        );
        assert_eq!(s.patches().len(), 2, "the refused patch is dropped");
    }

    #[test]
    fn config_errors_name_the_section_and_path() {
        let mut s = section();
        let err = s
            .set_config(json!({"replicas": "many"}))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("module echo") && err.contains("echo.replicas"),
            "{err}"
        );
    }

    #[test]
    fn values_required_for_helm_are_checked_apart() {
        let mut s = Section::new(
            "echo",
            "module echo",
            vec![],
            None,
            Some(&json!({"type": "object", "x-required-for-helm": ["host"],
                         "properties": {"host": {"type": "string"}}})),
        )
        .unwrap();
        s.compute().unwrap();
        let err = s.check_for_helm().unwrap_err().to_string();
        assert!(
            err.starts_with(
                "module echo values for rendering (x-required-for-helm) are not valid: echo: "
            ) && err.contains("\"host\""),
            "{err}"
        );
        let ops = parse_patch_file(r#"[{"op":"add","path":"/echo/host","value":"h"}]"#).unwrap();
        s.add_patches(ops).unwrap();
        s.check_for_helm().unwrap();
    }

    #[test]
    fn a_hook_may_patch_its_own_section_only() {
        let ops = parse_patch_file(r#"[{"op":"add","path":"/global/x","value":1}]"#).unwrap();
        let err = check_patch_paths(ops, "echo", "hooks/a.sh")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("hooks/a.sh") && err.contains("global.x"),
            "{err}"
        );
    }

    #[test]
    fn a_patch_file_that_does_not_parse_keeps_why() {
        let error = parse_patch_file("[{\"op\": \"add\"}]").unwrap_err();
        let PatchFileError::NotAnOperation {
            item: 0, source, ..
        } = &error
        else {
            panic!("{error:?}")
        };
        assert_eq!(
            error.to_string(),
            format!("item 0: {{\"op\":\"add\"}} is not a JSON Patch operation: {source}")
        );
        let error = AddonError::ValuesPatchFile {
            hook: "echo/hooks/a.sh".into(),
            variable: "VALUES_JSON_PATCH_PATH",
            source: parse_patch_file("{").unwrap_err(),
        };
        assert!(
            error
                .to_string()
                .starts_with("hook echo/hooks/a.sh: $VALUES_JSON_PATCH_PATH: not JSON: "),
            "{error}"
        );
        let file = std::error::Error::source(&error).unwrap();
        assert!(matches!(
            file.downcast_ref::<PatchFileError>(),
            Some(PatchFileError::NotJson(_))
        ));
        assert!(file.source().unwrap().is::<serde_json::Error>());
    }
}
