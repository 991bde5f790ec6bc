//! The `configVersion: v1` format as serde types, field for field as shell-operator
//! reads it (`pkg/hook/config/config_v1.go`, `schemas.go`).
//!
//! An object whose schema has `additionalProperties: false` refuses unknown keys here
//! too (`deny_unknown_fields`); the others (`matchConditions` items) accept them, and
//! the reader warns. Every field is optional unless the schema requires it: defaults
//! are applied by `convert`, meaning is checked by `hooks::config::validate`. The
//! binding lists are read item by item, so that a problem in one binding does not hide
//! a problem in another.

use super::values::{Flag, GoDuration, Integer, LabelValue, NameSelector};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The document. The binding lists hold each binding unread.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct ConfigV1 {
    /// Always `v1`: the version is looked at first, to choose this format.
    #[expect(dead_code, reason = "listed so that the key is known; read before")]
    pub config_version: String,
    pub on_startup: Option<Integer<i32>>,
    pub schedule: Option<Vec<Value>>,
    pub kubernetes: Option<Vec<Value>>,
    pub kubernetes_validating: Option<Vec<Value>>,
    pub kubernetes_mutating: Option<Vec<Value>>,
    #[serde(rename = "kubernetesCustomResourceConversion")]
    pub kubernetes_conversion: Option<Vec<Value>>,
    pub settings: Option<SettingsV1>,
}

/// An item of `schedule`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct ScheduleV1 {
    pub name: Option<String>,
    pub crontab: Option<String>,
    pub allow_failure: Option<Flag>,
    pub include_snapshots_from: Option<Vec<String>>,
    pub queue: Option<String>,
    pub group: Option<String>,
}

/// An item of `kubernetes`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct KubernetesV1 {
    pub name: Option<String>,
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub execute_hook_on_event: Option<Vec<EventV1>>,
    /// The older spelling of `executeHookOnEvent`.
    pub watch_event: Option<Vec<EventV1>>,
    pub execute_hook_on_synchronization: Option<Flag>,
    pub wait_for_synchronization: Option<Flag>,
    pub keep_full_objects_in_memory: Option<Flag>,
    pub name_selector: Option<NameSelector>,
    pub label_selector: Option<LabelSelectorV1>,
    pub field_selector: Option<FieldSelectorV1>,
    pub namespace: Option<NamespaceV1>,
    pub jq_filter: Option<String>,
    pub allow_failure: Option<Flag>,
    /// Accepted by shell-operator's schema and then ignored.
    pub resynchronization_period: Option<String>,
    pub include_snapshots_from: Option<Vec<String>>,
    pub queue: Option<String>,
    pub group: Option<String>,
}

/// A watch event name in `executeHookOnEvent`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(super) enum EventV1 {
    Added,
    Modified,
    Deleted,
}

/// A Kubernetes label selector (`metav1.LabelSelector`); the v0 `selector` too.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct LabelSelectorV1 {
    pub match_labels: Option<BTreeMap<String, LabelValue>>,
    pub match_expressions: Option<Vec<LabelExpressionV1>>,
}

/// An item of `labelSelector.matchExpressions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct LabelExpressionV1 {
    pub key: String,
    pub operator: LabelOperatorV1,
    pub values: Option<Vec<String>>,
}

/// The operator of a label expression.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(super) enum LabelOperatorV1 {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// `fieldSelector`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct FieldSelectorV1 {
    pub match_expressions: Vec<FieldExpressionV1>,
}

/// An item of `fieldSelector.matchExpressions`: the schema wants all three keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping")]
pub(super) struct FieldExpressionV1 {
    pub field: String,
    pub operator: FieldOperatorV1,
    pub value: String,
}

/// The operator of a field expression, in each spelling shell-operator accepts.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(super) enum FieldOperatorV1 {
    #[serde(rename = "=", alias = "==", alias = "Equals")]
    Equals,
    #[serde(rename = "!=", alias = "NotEquals")]
    NotEquals,
}

/// `namespace` of a kubernetes binding.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct NamespaceV1 {
    pub name_selector: Option<NameSelector>,
    pub label_selector: Option<LabelSelectorV1>,
}

/// An item of `kubernetesValidating` or `kubernetesMutating`: shell-operator reads both
/// with this one type. `reinvocationPolicy` is Operon's addition for mutating ones.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct AdmissionV1 {
    pub name: Option<String>,
    pub rules: Option<Vec<WebhookRuleV1>>,
    pub failure_policy: Option<String>,
    pub side_effects: Option<String>,
    pub label_selector: Option<LabelSelectorV1>,
    pub namespace: Option<AdmissionNamespaceV1>,
    pub timeout_seconds: Option<Integer<u32>>,
    pub match_conditions: Option<Vec<MatchConditionV1>>,
    pub reinvocation_policy: Option<String>,
    pub include_snapshots_from: Option<Vec<String>>,
    pub group: Option<String>,
}

/// An item of an admission binding's `rules`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct WebhookRuleV1 {
    pub operations: Option<Vec<String>>,
    pub api_groups: Option<Vec<String>>,
    pub api_versions: Option<Vec<String>>,
    pub resources: Option<Vec<String>>,
    pub scope: Option<String>,
}

/// `namespace` of an admission binding: a webhook selects namespaces by labels only.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct AdmissionNamespaceV1 {
    pub label_selector: Option<LabelSelectorV1>,
}

/// An item of `matchConditions`. Its schema does not refuse other keys.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a mapping")]
pub(super) struct MatchConditionV1 {
    pub name: Option<String>,
    pub expression: Option<String>,
}

/// An item of `kubernetesCustomResourceConversion`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct ConversionV1 {
    pub name: Option<String>,
    pub crd_name: Option<String>,
    pub conversions: Option<Vec<ConversionRuleV1>>,
    pub include_snapshots_from: Option<Vec<String>>,
    pub group: Option<String>,
}

/// An item of `conversions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct ConversionRuleV1 {
    pub from_version: Option<String>,
    pub to_version: Option<String>,
}

/// `settings`. `timeout` is Operon's addition: the run budget.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct SettingsV1 {
    pub execution_min_interval: Option<GoDuration>,
    pub execution_burst: Option<Integer<u32>>,
    pub timeout: Option<GoDuration>,
}

/// Keys refused for a known cause, with what to write instead.
pub(super) const HINTS: &[(&str, &str)] = &[(
    "onKubernetesEvent",
    "this is the v0 spelling: with configVersion v1 use kubernetes",
)];

/// As [`HINTS`], inside an admission binding.
pub(super) const ADMISSION_HINTS: &[(&str, &str)] = &[(
    "namespace.nameSelector",
    "a webhook selects namespaces by labels only: use labelSelector with the \
     kubernetes.io/metadata.name label",
)];
