//! `ModuleConfig`: the settings of one addon-operator module, and whether it runs, as
//! Deckhouse's `ModuleConfig` (`deckhouse.io/v1alpha1`) gives them, in Operon's group
//! (cluster-scoped, named after the module; `global` holds the global settings). The
//! spec is the user's: `enabled`, `settings` and the `version` of the settings' schema
//! they are written for. The status is the modules' leader's: whether the module runs
//! and is ready, the settings version in use, a one-line message and conditions.
//!
//! Types only: what the settings must look like is the module's (its
//! `openapi/config-values.yaml` and conversions), checked by the addons crate, at
//! admission and again when the object is read.

use super::condition::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of the ModuleConfig that holds the global settings (Deckhouse's
/// `ModuleConfig/global`): no module, and it cannot be disabled.
pub const GLOBAL_MODULE_CONFIG: &str = "global";

/// A ModuleConfig: `metadata.name` is the module's name (`echo-server`, not its values
/// key); its settings become the module's config values.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operon.dev",
    version = "v1alpha1",
    kind = "ModuleConfig",
    plural = "moduleconfigs",
    shortname = "mc",
    status = "ModuleConfigStatus",
    printcolumn = r#"{"name":"Enabled","type":"boolean","jsonPath":".status.enabled"}"#,
    printcolumn = r#"{"name":"Ready","type":"boolean","jsonPath":".status.ready"}"#,
    printcolumn = r#"{"name":"Version","type":"integer","jsonPath":".status.version"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Message","type":"string","jsonPath":".status.message"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ModuleConfigSpec {
    /// Turns the module on or off. It takes the place of the ConfigMap's
    /// `<moduleKey>Enabled` key; absent, the module's `values.yaml` flags decide. The
    /// module's `enabled` program and its `module.yaml` requirements may still disable
    /// it. Not allowed on `global`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The module's settings: its config values, checked against its
    /// `openapi/config-values.yaml` (defaults applied first). They take the place of the
    /// ConfigMap's `<moduleKey>` key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "settings_schema")]
    pub settings: Option<serde_json::Value>,
    /// The version of the settings' schema they are written for; required with
    /// `settings`. An older version than the module's latest is converted by the
    /// module's `openapi/conversions/vN.yaml` files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub version: Option<i64>,
    /// Deckhouse's maintenance mode (`NoResourceReconciliation`). Operon has none: a
    /// ModuleConfig that sets it is refused, so that it is not taken as honoured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<String>,
    /// Deckhouse's module update policy. Operon does not download or update modules: a
    /// ModuleConfig that sets it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<String>,
    /// Deckhouse's module source. Operon's modules come from its modules directory: a
    /// ModuleConfig that sets it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl ModuleConfigSpec {
    /// Deckhouse's fields Operon does not support, as written in a spec, with why.
    pub const UNSUPPORTED: [(&'static str, &'static str); 3] = [
        (
            "maintenance",
            "Deckhouse's maintenance mode is not supported: Operon always reconciles an \
             enabled module; disable it (spec.enabled: false) to stop it",
        ),
        (
            "updatePolicy",
            "Deckhouse's module update policies are not supported: Operon's modules come \
             from its modules directory and are updated with it",
        ),
        (
            "source",
            "Deckhouse's module sources are not supported: Operon's modules come from its \
             modules directory (--modules-dir)",
        ),
    ];
}

fn settings_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// What the modules' leader made of a ModuleConfig.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleConfigStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Whether the module runs, as the last discovery decided it (this object's
    /// `spec.enabled`, the module's `enabled` program and requirements). Absent for
    /// `global` and for a name that is no module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Whether the module runs and its last ModuleRun since these settings were taken
    /// succeeded. Absent for `global` and for a name that is no module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// The version of the settings in use: the module's latest, which older settings
    /// were converted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// What is wrong, or the module's state, in one line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// `SettingsAccepted` (the spec was taken; false with the reason when it was
    /// refused, and the module keeps what it had) and `Ready` (the module runs with
    /// these settings and its last ModuleRun succeeded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt as _;

    #[test]
    fn the_crd_is_cluster_scoped_with_a_status_and_deckhouses_columns() {
        let crd = ModuleConfig::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.plural, "moduleconfigs");
        assert_eq!(crd.spec.names.short_names, Some(vec!["mc".to_owned()]));
        let version = &crd.spec.versions[0];
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        let columns: Vec<String> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(
            columns,
            ["Enabled", "Ready", "Version", "Age", "Message"].map(String::from)
        );
        let spec = serde_json::to_value(&version.schema).unwrap();
        let settings = &spec["openAPIV3Schema"]["properties"]["spec"]["properties"]["settings"];
        assert_eq!(settings["x-kubernetes-preserve-unknown-fields"], true);
        let version = &spec["openAPIV3Schema"]["properties"]["spec"]["properties"]["version"];
        assert_eq!(version["minimum"], 1.0);
    }

    #[test]
    fn a_spec_reads_deckhouses_fields() {
        let spec: ModuleConfigSpec = serde_json::from_value(serde_json::json!({
            "enabled": true, "version": 2, "settings": {"replicas": 3},
        }))
        .unwrap();
        assert_eq!(spec.enabled, Some(true));
        assert_eq!(spec.version, Some(2));
        assert_eq!(spec.settings.unwrap()["replicas"], 3);
        let empty: ModuleConfigSpec = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(serde_json::to_value(&empty).unwrap(), serde_json::json!({}));
    }
}
