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
    pub(crate) config_version: String,
    pub(crate) on_startup: Option<Integer<i32>>,
    pub(crate) schedule: Option<Vec<Value>>,
    pub(crate) kubernetes: Option<Vec<Value>>,
    pub(crate) kubernetes_validating: Option<Vec<Value>>,
    pub(crate) kubernetes_mutating: Option<Vec<Value>>,
    #[serde(rename = "kubernetesCustomResourceConversion")]
    pub(crate) kubernetes_conversion: Option<Vec<Value>>,
    pub(crate) settings: Option<SettingsV1>,
}

/// An item of `schedule`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct ScheduleV1 {
    pub(crate) name: Option<String>,
    pub(crate) crontab: Option<String>,
    pub(crate) allow_failure: Option<Flag>,
    pub(crate) include_snapshots_from: Option<Vec<String>>,
    pub(crate) queue: Option<String>,
    pub(crate) group: Option<String>,
}

/// An item of `kubernetes`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct KubernetesV1 {
    pub(crate) name: Option<String>,
    pub(crate) api_version: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) execute_hook_on_event: Option<Vec<EventV1>>,
    /// The older spelling of `executeHookOnEvent`.
    pub(crate) watch_event: Option<Vec<EventV1>>,
    pub(crate) execute_hook_on_synchronization: Option<Flag>,
    pub(crate) wait_for_synchronization: Option<Flag>,
    pub(crate) keep_full_objects_in_memory: Option<Flag>,
    pub(crate) name_selector: Option<NameSelector>,
    pub(crate) label_selector: Option<LabelSelectorV1>,
    pub(crate) field_selector: Option<FieldSelectorV1>,
    pub(crate) namespace: Option<NamespaceV1>,
    pub(crate) jq_filter: Option<String>,
    pub(crate) allow_failure: Option<Flag>,
    /// Accepted by shell-operator's schema and then ignored.
    pub(crate) resynchronization_period: Option<String>,
    pub(crate) include_snapshots_from: Option<Vec<String>>,
    pub(crate) queue: Option<String>,
    pub(crate) group: Option<String>,
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
    pub(crate) match_labels: Option<BTreeMap<String, LabelValue>>,
    pub(crate) match_expressions: Option<Vec<LabelExpressionV1>>,
}

/// An item of `labelSelector.matchExpressions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct LabelExpressionV1 {
    pub(crate) key: String,
    pub(crate) operator: LabelOperatorV1,
    pub(crate) values: Option<Vec<String>>,
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
    pub(crate) match_expressions: Vec<FieldExpressionV1>,
}

/// An item of `fieldSelector.matchExpressions`: the schema wants all three keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping")]
pub(super) struct FieldExpressionV1 {
    pub(crate) field: String,
    pub(crate) operator: FieldOperatorV1,
    pub(crate) value: String,
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
    pub(crate) name_selector: Option<NameSelector>,
    pub(crate) label_selector: Option<LabelSelectorV1>,
}

/// An item of `kubernetesValidating` or `kubernetesMutating`: shell-operator reads both
/// with this one type. `reinvocationPolicy` (mutating ones) and `enforcement` are
/// Operon's additions.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct AdmissionV1 {
    pub(crate) name: Option<String>,
    pub(crate) rules: Option<Vec<WebhookRuleV1>>,
    pub(crate) failure_policy: Option<String>,
    pub(crate) side_effects: Option<String>,
    pub(crate) label_selector: Option<LabelSelectorV1>,
    pub(crate) namespace: Option<AdmissionNamespaceV1>,
    pub(crate) timeout_seconds: Option<Integer<u32>>,
    pub(crate) match_conditions: Option<Vec<MatchConditionV1>>,
    pub(crate) reinvocation_policy: Option<String>,
    pub(crate) enforcement: Option<String>,
    pub(crate) include_snapshots_from: Option<Vec<String>>,
    pub(crate) group: Option<String>,
}

/// An item of an admission binding's `rules`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct WebhookRuleV1 {
    pub(crate) operations: Option<Vec<String>>,
    pub(crate) api_groups: Option<Vec<String>>,
    pub(crate) api_versions: Option<Vec<String>>,
    pub(crate) resources: Option<Vec<String>>,
    pub(crate) scope: Option<String>,
}

/// `namespace` of an admission binding: a webhook selects namespaces by labels only.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct AdmissionNamespaceV1 {
    pub(crate) label_selector: Option<LabelSelectorV1>,
}

/// An item of `matchConditions`. Its schema does not refuse other keys.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a mapping")]
pub(super) struct MatchConditionV1 {
    pub(crate) name: Option<String>,
    pub(crate) expression: Option<String>,
}

/// An item of `kubernetesCustomResourceConversion`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct ConversionV1 {
    pub(crate) name: Option<String>,
    pub(crate) crd_name: Option<String>,
    pub(crate) conversions: Option<Vec<ConversionRuleV1>>,
    pub(crate) include_snapshots_from: Option<Vec<String>>,
    pub(crate) group: Option<String>,
}

/// An item of `conversions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct ConversionRuleV1 {
    pub(crate) from_version: Option<String>,
    pub(crate) to_version: Option<String>,
}

/// `settings`. `timeout` is Operon's addition: the run budget.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct SettingsV1 {
    pub(crate) execution_min_interval: Option<GoDuration>,
    pub(crate) execution_burst: Option<Integer<u32>>,
    pub(crate) timeout: Option<GoDuration>,
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
