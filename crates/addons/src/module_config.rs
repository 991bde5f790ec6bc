//! One ModuleConfig (`moduleconfigs.operon.dev`) checked against the modules directory,
//! by the rules of Deckhouse's ModuleConfig validation, for the admission webhook of
//! `operon serve` and for the operator that reads the object (a second line of defense:
//! an object stored while no webhook answered, or checked against another directory).
//!
//! Deckhouse's `maintenance`, `updatePolicy` and `source` are refused by name: Operon
//! has no such thing, and a spec that asks for one must not look honoured.
//!
//! The name says what it sets: `global` (the global settings; `spec.enabled` refused),
//! a module of the directory by its name, or nothing (no such module: allowed with a
//! warning, as Deckhouse allows it, and unused). `spec.version` is required with
//! `spec.settings`; a version older than the module's latest is converted by its
//! `openapi/conversions` (`conversions`) with a warning, one no conversion
//! reaches is refused. The settings, converted and with the config schema's defaults
//! applied, must then match `openapi/config-values.yaml`, every problem named by its
//! field (`spec.settings.replicas`) — unless `spec.enabled` is false: as in Deckhouse,
//! a module can be disabled whatever its settings say, and settings that do not match
//! are then left out with a warning.

use super::AddonError;
use super::conversions::Conversions;
use super::layout::Layout;
use super::schema::Schema;
use operon_data::api::{GLOBAL_MODULE_CONFIG, ModuleConfigSpec, Problem};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// What ModuleConfigs are checked against: each module's config schema and
/// conversions, and the global ones. Built once from a layout.
#[derive(Debug)]
pub struct SettingsRules {
    global: Rules,
    /// By module name.
    modules: BTreeMap<String, Rules>,
}

#[derive(Debug)]
struct Rules {
    /// The values key (`echoServer`, `global`).
    key: String,
    /// `openapi/config-values.yaml`, compiled.
    schema: Option<Schema>,
    conversions: Conversions,
}

/// What a ModuleConfig's name makes it about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `global`: the global settings.
    Global,
    /// A module of the modules directory.
    Module {
        /// Its name (the ModuleConfig's).
        name: String,
        /// Its values key (`echoServer`).
        key: String,
    },
    /// No module has this name.
    Unknown,
}

impl Target {
    /// The values key of what it sets (`global` for the global settings).
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Global => Some(GLOBAL_MODULE_CONFIG),
            Self::Module { key, .. } => Some(key),
            Self::Unknown => None,
        }
    }
}

/// A ModuleConfig once checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// `metadata.name`.
    pub name: String,
    /// What it sets.
    pub target: Target,
    /// `metadata.generation`, when the API server set one.
    pub generation: Option<i64>,
    /// What refuses it, each naming its field; empty when it is taken.
    pub problems: Vec<Problem>,
    /// What is allowed but worth saying (admission warnings, the status message).
    pub warnings: Vec<String>,
    /// `spec.enabled`.
    pub enabled: Option<bool>,
    /// The settings at the latest version, defaults not applied: `None` when refused,
    /// for an unknown module, and for a disabled module whose settings do not match
    /// (they are not used while it is disabled).
    pub settings: Option<Value>,
    /// The latest settings version of what it sets (1 for an unknown module).
    pub version: u32,
}

impl Checked {
    /// Whether the object is taken.
    pub fn accepted(&self) -> bool {
        self.problems.is_empty()
    }
}

impl SettingsRules {
    /// The rules of `layout`'s modules and global settings.
    pub fn new(layout: &Layout) -> Result<Self, AddonError> {
        let compile = |section: &str, schema: Option<&Value>| {
            schema
                .map(|raw| {
                    Schema::new(raw, None).map_err(|reason| AddonError::Schema {
                        section: section.to_owned(),
                        which: "openapi/config-values.yaml".to_owned(),
                        reason,
                    })
                })
                .transpose()
        };
        let global = Rules {
            key: GLOBAL_MODULE_CONFIG.to_owned(),
            schema: compile("global", layout.global.config_schema.as_ref())?,
            conversions: layout.global.conversions.clone(),
        };
        let mut modules = BTreeMap::new();
        for module in &layout.modules {
            let section = format!("module {}", module.name);
            let rules = Rules {
                key: module.values_key.clone(),
                schema: compile(&section, module.config_schema.as_ref())?,
                conversions: module.conversions.clone(),
            };
            modules.insert(module.name.clone(), rules);
        }
        Ok(Self { global, modules })
    }

    /// The rules without a modules directory: every name but `global` is no module, and
    /// the global settings have no schema; the spec's shape is still checked.
    pub fn none() -> Self {
        Self {
            global: Rules {
                key: GLOBAL_MODULE_CONFIG.to_owned(),
                schema: None,
                conversions: Conversions::default(),
            },
            modules: BTreeMap::new(),
        }
    }

    /// Reads the modules directory (and the global hooks directory) for their rules.
    pub fn read(modules_dir: &Path, global_hooks_dir: Option<&Path>) -> Result<Self, AddonError> {
        Self::new(&Layout::read(modules_dir, global_hooks_dir)?)
    }

    /// Checks a ModuleConfig object, read as JSON so that one field of the wrong type
    /// does not hide the others' problems.
    pub fn check(&self, object: &Value) -> Checked {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let (target, rules) = if name == GLOBAL_MODULE_CONFIG {
            (Target::Global, Some(&self.global))
        } else {
            match self.modules.get(&name) {
                Some(rules) => (
                    Target::Module {
                        name: name.clone(),
                        key: rules.key.clone(),
                    },
                    Some(rules),
                ),
                None => (Target::Unknown, None),
            }
        };
        let mut found = Found::default();
        let spec = read_spec(object, &mut found);
        if let Some(rules) = rules {
            check_settings(&name, &target, rules, &spec, &mut found);
        } else {
            found.warnings.push(format!(
                "no module {name:?} in the modules directory: nothing uses this ModuleConfig"
            ));
        }
        let object_ref = format!("ModuleConfig/{name}");
        Checked {
            problems: found
                .problems
                .into_iter()
                .map(|(field, reason)| Problem::new(&object_ref, field, reason))
                .collect(),
            warnings: found.warnings,
            generation: object
                .pointer("/metadata/generation")
                .and_then(Value::as_i64),
            enabled: spec.enabled,
            settings: found.settings,
            version: rules.map_or(1, |r| r.conversions.latest()),
            name,
            target,
        }
    }
}

/// What a check found so far.
#[derive(Default)]
struct Found {
    /// `(field, reason)`.
    problems: Vec<(String, String)>,
    warnings: Vec<String>,
    /// The settings taken.
    settings: Option<Value>,
}

impl Found {
    fn problem(&mut self, field: &str, reason: String) {
        self.problems.push((field.to_owned(), reason));
    }
}

/// The spec's fields, read loosely.
struct Spec {
    enabled: Option<bool>,
    version: Option<u32>,
    settings: Option<Value>,
}

fn read_spec(object: &Value, found: &mut Found) -> Spec {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let field = |name: &str| spec.get(name).filter(|v| !v.is_null());
    let enabled = field("enabled").and_then(|v| {
        let flag = v.as_bool();
        if flag.is_none() {
            found.problem("spec.enabled", format!("{v} is not true or false"));
        }
        flag
    });
    let version = field("version").and_then(|v| {
        let version = v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n >= 1);
        if version.is_none() {
            found.problem(
                "spec.version",
                format!("{v} is not a settings version (an integer of 1 or more)"),
            );
        }
        version
    });
    for (name, reason) in ModuleConfigSpec::UNSUPPORTED {
        if field(name).is_some() {
            found.problem(&format!("spec.{name}"), reason.to_owned());
        }
    }
    let settings = field("settings").and_then(|v| {
        if v.is_object() {
            Some(v.clone())
        } else {
            found.problem("spec.settings", format!("{v} is not a mapping of settings"));
            None
        }
    });
    Spec {
        enabled,
        version,
        settings,
    }
}

/// Deckhouse's `validateCR` (the version and the conversion) and `validateSettings`
/// (the schema) on a known target's spec.
fn check_settings(name: &str, target: &Target, rules: &Rules, spec: &Spec, found: &mut Found) {
    let whose = match target {
        Target::Global => "the global settings".to_owned(),
        _ => format!("module {name}"),
    };
    if *target == Target::Global && spec.enabled.is_some() {
        found.problem(
            "spec.enabled",
            "the global settings cannot be turned off: remove spec.enabled".to_owned(),
        );
    }
    // A version or settings of the wrong type were reported: what they were meant to
    // be cannot be checked further.
    let unreadable = |field: &str| found.problems.iter().any(|(f, _)| f == field);
    if unreadable("spec.version") || unreadable("spec.settings") {
        return;
    }
    let before = found.problems.len();
    let latest = rules.conversions.latest();
    let has_settings = spec
        .settings
        .as_ref()
        .and_then(Value::as_object)
        .is_some_and(|s| !s.is_empty());
    let mut settings = spec
        .settings
        .clone()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let mut converted_from = None;
    match spec.version {
        None if has_settings => found.problem(
            "spec.version",
            format!(
                "required with spec.settings: the version of the schema of {whose} they \
                 are written for (the latest is {latest})"
            ),
        ),
        None => {}
        Some(version) => {
            if !has_settings {
                found.warnings.push(format!(
                    "spec.version has no effect without spec.settings: the defaults of \
                     version {latest} apply"
                ));
            }
            let supported = rules.conversions.supported();
            if !supported.contains(&version) {
                let older = match supported.split_last() {
                    Some((_, older)) if !older.is_empty() => {
                        let list: Vec<String> = older.iter().map(ToString::to_string).collect();
                        format!(", or one of {} (converted)", list.join(", "))
                    }
                    _ => String::new(),
                };
                let reason = format!(
                    "version {version} is not supported by {whose}: write version \
                     {latest}{older}"
                );
                if has_settings {
                    found.problem("spec.version", reason);
                } else {
                    found.warnings.push(format!("spec.version: {reason}"));
                }
            } else if version < latest && has_settings {
                match rules.conversions.to_latest(version, settings.clone()) {
                    Ok(new) => {
                        settings = new;
                        converted_from = Some(version);
                        found.warnings.push(format!(
                            "spec.version {version} is older than the latest of {whose}, \
                             {latest}: the settings were converted; write them for \
                             version {latest}"
                        ));
                    }
                    Err(e) => found.problem(
                        "spec.settings",
                        format!(
                            "cannot be converted from version {version} to {latest}: the \
                             step to version {}: {}",
                            e.to, e.reason
                        ),
                    ),
                }
            }
        }
    }
    if found.problems.len() > before {
        return;
    }
    let mismatches = rules
        .schema
        .as_ref()
        .map(|schema| {
            let mut with_defaults = settings.clone();
            schema.apply_defaults(&mut with_defaults);
            schema.located_problems("spec.settings", &with_defaults)
        })
        .unwrap_or_default();
    let note = converted_from
        .map(|from| format!(" (in the settings converted from version {from} to {latest})"))
        .unwrap_or_default();
    if mismatches.is_empty() {
        found.settings = Some(settings);
    } else if spec.enabled == Some(false) {
        let (path, reason) = &mismatches[0];
        let more = match mismatches.len() {
            1 => String::new(),
            n => format!(", and {} more", n - 1),
        };
        found.warnings.push(format!(
            "spec.settings do not match the openapi/config-values.yaml of {whose} \
             ({path}: {reason}{note}{more}): they are not used while the module is \
             disabled; fix them before enabling it"
        ));
    } else {
        for (path, reason) in mismatches {
            found.problem(&path, format!("{reason}{note}"));
        }
    }
}

#[cfg(test)]
mod tests;
