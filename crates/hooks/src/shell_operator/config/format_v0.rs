//! The legacy format without `configVersion` as serde types, as shell-operator reads
//! it (`pkg/hook/config/config_v0.go`, `schemas.go`).
//!
//! shell-operator's v0 schema refuses unknown keys only on the top level; the bindings
//! are plain objects read into Go structs, which skip keys they do not know. So the
//! binding types here accept unknown keys, and the reader warns about each. The v0
//! `selector` is v1's label selector type, which refuses unknown keys: stricter than
//! shell-operator, where a misspelt key would silently select everything.

use super::format_v1::LabelSelectorV1;
use super::values::{Flag, Integer};
use serde::Deserialize;
use serde_json::Value;

/// The document. The binding lists hold each binding unread.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct ConfigV0 {
    pub(crate) on_startup: Option<Integer<i32>>,
    pub(crate) schedule: Option<Vec<Value>>,
    pub(crate) on_kubernetes_event: Option<Vec<Value>>,
}

/// An item of `schedule`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct ScheduleV0 {
    pub(crate) name: Option<String>,
    pub(crate) crontab: Option<String>,
    pub(crate) allow_failure: Option<Flag>,
}

/// An item of `onKubernetesEvent`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct KubernetesV0 {
    pub(crate) name: Option<String>,
    pub(crate) event: Option<Vec<EventV0>>,
    pub(crate) kind: Option<String>,
    pub(crate) selector: Option<LabelSelectorV1>,
    pub(crate) object_name: Option<String>,
    pub(crate) namespace_selector: Option<NamespaceSelectorV0>,
    pub(crate) jq_filter: Option<String>,
    pub(crate) allow_failure: Option<Flag>,
}

/// A v0 event name.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum EventV0 {
    Add,
    Update,
    Delete,
}

/// `namespaceSelector`: `any: true` means every namespace, whatever `matchNames` says.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a mapping")]
pub(super) struct NamespaceSelectorV0 {
    pub(crate) match_names: Option<Vec<String>>,
    pub(crate) any: Option<Flag>,
}

/// What a v1 key on the v0 top level means.
const NEEDS_V1: &str = "needs configVersion: v1 (without it the v0 form is read)";

/// Keys refused for a known cause, with what to write instead.
pub(super) const HINTS: &[(&str, &str)] = &[
    ("kubernetes", NEEDS_V1),
    ("kubernetesValidating", NEEDS_V1),
    ("kubernetesMutating", NEEDS_V1),
    ("kubernetesCustomResourceConversion", NEEDS_V1),
    ("settings", NEEDS_V1),
];
