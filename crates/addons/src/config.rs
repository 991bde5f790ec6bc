//! The ConfigMap of config values (`--config-map`, addon-operator's
//! `ADDON_OPERATOR_CONFIG_MAP`): YAML text under `global`, `<moduleKey>`, and
//! `"true"`/`"false"` under `<moduleKey>Enabled`, read into typed config values, and
//! the merge patch that writes a section back.

use super::AddonError;
use super::layout::parse_yaml_mapping;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Which ConfigMap holds the config values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for ConfigMapRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The config values a ConfigMap holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ConfigValues {
    /// The `global` section.
    pub(crate) global: Value,
    /// Sections by values key.
    pub(crate) modules: BTreeMap<String, Value>,
    /// `<moduleKey>Enabled` flags, by values key.
    pub(crate) enabled: BTreeMap<String, bool>,
    /// The sections (and flags) a ModuleConfig gives instead of the ConfigMap: the
    /// ModuleConfig's name, by values key (`global` included).
    pub(crate) governed: BTreeMap<String, String>,
}

impl ConfigValues {
    /// Reads the `data` of `object` (a ConfigMap; `None` when it does not exist, which is
    /// no config at all).
    pub(crate) fn from_object(
        cm: &ConfigMapRef,
        object: Option<&Value>,
    ) -> Result<Self, AddonError> {
        let mut out = Self {
            global: json!({}),
            ..Self::default()
        };
        let Some(data) = object
            .and_then(|o| o.get("data"))
            .and_then(Value::as_object)
        else {
            return Ok(out);
        };
        for (key, text) in data {
            let problem = |reason: String| AddonError::ConfigMap {
                configmap: cm.to_string(),
                key: key.clone(),
                reason,
            };
            let text = text
                .as_str()
                .ok_or_else(|| problem("not a string".to_owned()))?;
            if let Some(module) = key.strip_suffix("Enabled") {
                let flag = match text.trim() {
                    "true" => true,
                    "false" => false,
                    other => return Err(problem(format!("{other:?} is not true or false"))),
                };
                out.enabled.insert(module.to_owned(), flag);
            } else if key == "global" {
                out.global = parse_yaml_mapping(text).map_err(problem)?;
            } else {
                out.modules
                    .insert(key.clone(), parse_yaml_mapping(text).map_err(problem)?);
            }
        }
        Ok(out)
    }

    /// The config section of `key` (`{}` when absent).
    pub(crate) fn section(&self, key: &str) -> Value {
        if key == "global" {
            return self.global.clone();
        }
        self.modules.get(key).cloned().unwrap_or_else(|| json!({}))
    }
}

/// The merge patch that sets section `key` of the ConfigMap to `values`, as YAML text.
pub(crate) fn section_patch(key: &str, values: &Value) -> Result<Value, String> {
    let text = yaml_serde::to_string(values).map_err(|e| e.to_string())?;
    Ok(json!({"data": {key: text}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm() -> ConfigMapRef {
        ConfigMapRef {
            namespace: "ns".into(),
            name: "addon-operator".into(),
        }
    }

    #[test]
    fn sections_and_flags() {
        let object = json!({"data": {
            "global": "param1: 200\n",
            "someModule": "param1: Long string\nparam2: FOO\n",
            "someModuleEnabled": "true",
        }});
        let c = ConfigValues::from_object(&cm(), Some(&object)).unwrap();
        assert_eq!(c.global, json!({"param1": 200}));
        assert_eq!(c.section("someModule")["param2"], "FOO");
        assert!(c.enabled["someModule"]);
        assert_eq!(c.section("other"), json!({}));
    }

    #[test]
    fn bad_flags_and_sections_name_the_key() {
        let object = json!({"data": {"echoEnabled": "yes"}});
        let err = ConfigValues::from_object(&cm(), Some(&object)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ConfigMap ns/addon-operator: key echoEnabled: \"yes\" is not true or false"
        );
        let object = json!({"data": {"echo": "- a\n"}});
        let err = ConfigValues::from_object(&cm(), Some(&object)).unwrap_err();
        assert!(
            err.to_string().contains("key echo: expected a mapping"),
            "{err}"
        );
    }

    #[test]
    fn no_config_map_is_no_config() {
        let c = ConfigValues::from_object(&cm(), None).unwrap();
        assert_eq!(c.global, json!({}));
        assert!(c.modules.is_empty() && c.enabled.is_empty());
    }
}
