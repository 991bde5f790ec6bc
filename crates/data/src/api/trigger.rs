//! `Trigger`: what creates Diagnoses (a Prometheus alert, a Kubernetes event, a cron
//! schedule). The types live here; matching lives in `crate::triggers`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A Trigger: when its source matches, a Diagnosis of `operationSet` is created.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operon.dev",
    version = "v1alpha1",
    kind = "Trigger",
    plural = "triggers",
    shortname = "trig",
    status = "TriggerStatus",
    printcolumn = r#"{"name":"OperationSet","type":"string","jsonPath":".spec.operationSet"}"#,
    printcolumn = r#"{"name":"LastSchedule","type":"date","jsonPath":".status.lastScheduleTime"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct TriggerSpec {
    /// The OperationSet the created Diagnoses run.
    pub operation_set: String,
    /// The node of the created Diagnoses, unless the source names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Parameters of the created Diagnoses.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// The `spec.serviceAccountName` of the created Diagnoses: a ServiceAccount of the
    /// Trigger's namespace whose RBAC permissions their node-changing steps act under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// The `spec.runOn` of the created Diagnoses: `Controller` for a Trigger on a node
    /// that stopped answering (its Ready condition, the node controller's `NodeNotReady`
    /// Event), whose own agent cannot run them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_on: Option<super::DiagnosisRunOn>,
    /// Exactly one source.
    pub source_template: SourceTemplate,
    /// How many Diagnoses this Trigger may create in a time window; a match over the
    /// limit creates none (logged and counted in
    /// `operon_trigger_diagnoses_total{outcome="rate_limited"}`). Unset: 10 per 60 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

/// A token bucket: up to `diagnoses` at once, refilled evenly over `perSeconds`, so a
/// storm of matching alerts or events cannot flood the cluster with Diagnoses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimit {
    /// How many Diagnoses the window allows (at least 1), and the largest burst.
    #[serde(default = "default_rate_limit_diagnoses")]
    #[schemars(range(min = 1))]
    pub diagnoses: u32,
    /// The window in seconds (at least 1, at most 86400).
    #[serde(default = "default_rate_limit_seconds")]
    #[schemars(range(min = 1, max = 86400))]
    pub per_seconds: u32,
}

impl RateLimit {
    /// What a Trigger without `rateLimit` gets: enough for a handful of distinct alerts
    /// or events at once, not for a storm.
    pub const DEFAULT: Self = Self {
        diagnoses: 10,
        per_seconds: 60,
    };
    /// The longest window, a day: a longer one would refill so slowly that a Trigger
    /// that used its burst would look dead.
    pub const MAX_SECONDS: u32 = 86_400;
}

impl Default for RateLimit {
    fn default() -> Self {
        Self::DEFAULT
    }
}

fn default_rate_limit_diagnoses() -> u32 {
    RateLimit::DEFAULT.diagnoses
}

fn default_rate_limit_seconds() -> u32 {
    RateLimit::DEFAULT.per_seconds
}

/// The source of a Trigger: exactly one of the templates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceTemplate {
    /// Match Prometheus alerts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus_alert_template: Option<PrometheusAlertTemplate>,
    /// Match Kubernetes events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_event_template: Option<KubernetesEventTemplate>,
    /// Fire on a schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron_template: Option<CronTemplate>,
}

/// Which Prometheus alerts match, and how they become a Diagnosis.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusAlertTemplate {
    /// Regular expressions every one of which must match (unset ones match anything).
    #[serde(default)]
    pub regexp: PrometheusAlertRegexp,
    /// The alert label that holds the node name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name_reference_label: Option<String>,
    /// The alert label that holds the pod's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_namespace_reference_label: Option<String>,
    /// The alert label that holds the pod's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name_reference_label: Option<String>,
    /// The alert label that holds the container's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_reference_label: Option<String>,
    /// Alert labels copied into the Diagnosis' parameters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameter_injection_labels: Vec<String>,
}

/// Regular expressions on a Prometheus alert's fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusAlertRegexp {
    /// On the `alertname` label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_name: Option<String>,
    /// Per label: the label must exist and match.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Per annotation: the annotation must exist and match.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// On `startsAt` (RFC 3339 text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<String>,
    /// On `endsAt` (RFC 3339 text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<String>,
    /// On `generatorURL`.
    #[serde(
        default,
        rename = "generatorURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub generator_url: Option<String>,
}

/// Which Kubernetes events match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesEventTemplate {
    /// Regular expressions every one of which must match (unset ones match anything).
    #[serde(default)]
    pub regexp: KubernetesEventRegexp,
}

/// Regular expressions on a core/v1 Event's fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesEventRegexp {
    /// On `metadata.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// On `metadata.namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// On `reason`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// On `message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// On `source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<EventSourceRegexp>,
}

/// Regular expressions on an Event's `source`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventSourceRegexp {
    /// On `source.component`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    /// On `source.host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// A schedule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronTemplate {
    /// A crontab with 5 fields (or 6, seconds first), a descriptor (`@daily`) or
    /// `@every DURATION`, optionally after `TZ=ZONE ` (e.g. `TZ=Europe/Berlin 0 6 * * *`);
    /// UTC without one.
    pub schedule: String,
}

/// What the Trigger did last.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerStatus {
    /// When the cron template last created a Diagnosis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
}

impl Trigger {
    /// `Trigger/<name>`, for messages.
    pub fn object_ref(&self) -> String {
        format!(
            "Trigger/{}",
            self.metadata.name.as_deref().unwrap_or("<unnamed>")
        )
    }
}
