//! Prometheus alerts: the alert as Alertmanager posts it, and a compiled
//! `prometheusAlertTemplate` that matches alerts and reads the Diagnosis' subject and
//! parameters from their labels.

use super::{Problems, map_field, matches_optional};
use jiff::Timestamp;
use operon_data::api::{PodReference, PrometheusAlertTemplate};
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One alert, in the shape Alertmanager posts to webhooks and Prometheus posts to
/// `/api/v1/alerts` and `/api/v2/alerts` (unknown fields such as `fingerprint` are
/// ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusAlert {
    /// `firing` or `resolved` in Alertmanager's webhook messages; absent from what
    /// Prometheus posts, where only `endsAt` tells.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) status: String,
    /// Identify the alert; `alertname` is its name.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Describe the alert (summary, runbook, ...).
    #[serde(default)]
    pub(crate) annotations: BTreeMap<String, String>,
    /// When the alert started firing (RFC 3339), kept as sent: templates match the text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) starts_at: String,
    /// When the alert ends or ended (RFC 3339), kept as sent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) ends_at: String,
    /// The Prometheus expression browser link that produced the alert.
    #[serde(
        default,
        rename = "generatorURL",
        skip_serializing_if = "String::is_empty"
    )]
    pub(crate) generator_url: String,
}

impl PrometheusAlert {
    /// Whether the alert had ended at `now`; Alertmanager delivers resolved alerts too,
    /// and they should not start a Diagnosis.
    ///
    /// `status: resolved` says so whatever the clocks say (Alertmanager's may be ahead
    /// of ours). Otherwise an `endsAt` that is missing, unparseable or Go's zero time
    /// (`0001-01-01…`, which Alertmanager sends for "not set") means the alert is still
    /// firing.
    pub fn is_resolved_at(&self, now: Timestamp) -> bool {
        if self.status == "resolved" {
            return true;
        }
        match self.ends_at.parse::<Timestamp>() {
            Ok(ends_at) => ends_at > Timestamp::UNIX_EPOCH && ends_at <= now,
            Err(_) => false,
        }
    }
}

/// What identifies one firing of an alert: its labels and when it started. A firing
/// re-delivered by Alertmanager has both the same; the same alert firing again after
/// it resolved starts later.
pub(super) fn identity(alert: &PrometheusAlert) -> Vec<String> {
    // The same instant may be written with or without fractional zeros by different
    // senders; the canonical form keeps them one Diagnosis.
    let starts_at = alert
        .starts_at
        .parse::<Timestamp>()
        .map_or_else(|_| alert.starts_at.clone(), |t| t.to_string());
    let mut parts = Vec::with_capacity(2 * alert.labels.len() + 1);
    for (name, value) in &alert.labels {
        parts.push(name.clone());
        parts.push(value.clone());
    }
    parts.push(starts_at);
    parts
}

/// A one-line description of the alert, for the Diagnosis' cause annotation: its
/// labels in Prometheus' notation and its start, what the name's hash covers.
pub(super) fn cause(alert: &PrometheusAlert) -> String {
    let labels: Vec<String> = alert
        .labels
        .iter()
        .map(|(name, value)| format!("{name}={value:?}"))
        .collect();
    format!("{{{}}} startsAt={}", labels.join(", "), alert.starts_at)
}

/// A compiled `prometheusAlertTemplate`.
#[derive(Debug, Clone)]
pub(super) struct AlertMatcher {
    /// On the `alertname` label (missing = empty).
    alert_name: Option<Regex>,
    /// Per label: the label must exist and match.
    labels: Vec<(String, Regex)>,
    /// Per annotation: the annotation must exist and match.
    annotations: Vec<(String, Regex)>,
    starts_at: Option<Regex>,
    ends_at: Option<Regex>,
    generator_url: Option<Regex>,
    /// Label naming the node; KubeDiag treats an empty label name as unset, and so do we.
    node_name_label: Option<String>,
    pod_namespace_label: Option<String>,
    pod_name_label: Option<String>,
    container_label: Option<String>,
    /// Labels copied into the parameters.
    injection_labels: Vec<String>,
}

impl AlertMatcher {
    /// Compiles `template` (at `field`), or records why it does not compile.
    pub(super) fn compile(
        template: &PrometheusAlertTemplate,
        field: &str,
        problems: &mut Problems,
    ) -> Option<Self> {
        let before = problems.len();
        let regexp = &template.regexp;
        let base = format!("{field}.regexp");
        let optional = |problems: &mut Problems, name: &str, pattern: &Option<String>| {
            pattern
                .as_deref()
                .and_then(|p| problems.regex(&format!("{base}.{name}"), p))
        };
        let keyed = |problems: &mut Problems, map: &str, patterns: &BTreeMap<String, String>| {
            let parent = format!("{base}.{map}");
            patterns
                .iter()
                .filter_map(|(key, pattern)| {
                    let regex = problems.regex(&map_field(&parent, key), pattern)?;
                    Some((key.clone(), regex))
                })
                .collect::<Vec<_>>()
        };
        // In the order of the fields, so problems read top to bottom like the YAML.
        let alert_name = optional(problems, "alertName", &regexp.alert_name);
        let labels = keyed(problems, "labels", &regexp.labels);
        let annotations = keyed(problems, "annotations", &regexp.annotations);
        let starts_at = optional(problems, "startsAt", &regexp.starts_at);
        let ends_at = optional(problems, "endsAt", &regexp.ends_at);
        let generator_url = optional(problems, "generatorURL", &regexp.generator_url);
        if problems.len() > before {
            return None;
        }
        let label = |name: &Option<String>| name.clone().filter(|n| !n.is_empty());
        Some(Self {
            alert_name,
            labels,
            annotations,
            starts_at,
            ends_at,
            generator_url,
            node_name_label: label(&template.node_name_reference_label),
            pod_namespace_label: label(&template.pod_namespace_reference_label),
            pod_name_label: label(&template.pod_name_reference_label),
            container_label: label(&template.container_reference_label),
            injection_labels: template.parameter_injection_labels.clone(),
        })
    }

    /// Whether every set regular expression matches `alert`.
    pub(super) fn matches(&self, alert: &PrometheusAlert) -> bool {
        let alert_name = alert.labels.get("alertname").map_or("", String::as_str);
        let keyed = |patterns: &[(String, Regex)], values: &BTreeMap<String, String>| {
            patterns
                .iter()
                .all(|(key, regex)| values.get(key).is_some_and(|value| regex.is_match(value)))
        };
        matches_optional(self.alert_name.as_ref(), alert_name)
            && keyed(&self.labels, &alert.labels)
            && keyed(&self.annotations, &alert.annotations)
            && matches_optional(self.starts_at.as_ref(), &alert.starts_at)
            && matches_optional(self.ends_at.as_ref(), &alert.ends_at)
            && matches_optional(self.generator_url.as_ref(), &alert.generator_url)
    }

    /// The node named by the node reference label, when it is set and present.
    pub(super) fn node_name(&self, alert: &PrometheusAlert) -> Option<String> {
        label_value(alert, self.node_name_label.as_ref())
    }

    /// The pod named by the reference labels, when both namespace and name are present:
    /// half a reference names no pod.
    pub(super) fn pod_reference(&self, alert: &PrometheusAlert) -> Option<PodReference> {
        Some(PodReference {
            namespace: label_value(alert, self.pod_namespace_label.as_ref())?,
            name: label_value(alert, self.pod_name_label.as_ref())?,
            container: label_value(alert, self.container_label.as_ref()),
        })
    }

    /// The injection labels present on `alert`, as parameters.
    pub(super) fn injected_parameters<'a>(
        &'a self,
        alert: &'a PrometheusAlert,
    ) -> impl Iterator<Item = (String, String)> + 'a {
        self.injection_labels.iter().filter_map(|name| {
            let value = alert.labels.get(name)?;
            Some((name.clone(), value.clone()))
        })
    }
}

/// The value of label `name` on `alert`; Prometheus treats an empty label as absent.
fn label_value(alert: &PrometheusAlert, name: Option<&String>) -> Option<String> {
    alert
        .labels
        .get(name?)
        .filter(|value| !value.is_empty())
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::super::new_diagnosis::tests::assert_valid_name;
    use super::super::new_diagnosis::{CAUSE_ANNOTATION, TRIGGER_ANNOTATION, TRIGGER_LABEL};
    use super::super::tests::trigger;
    use super::super::{CompiledTrigger, SOURCE_LABEL};
    use super::*;

    const TRIGGER: &str = r#"
apiVersion: operon.dev/v1alpha1
kind: Trigger
metadata: {name: disk-pressure}
spec:
  operationSet: disk-diagnosis
  nodeName: fallback-node
  parameters: {mode: quick, instance: from-trigger}
  sourceTemplate:
    prometheusAlertTemplate:
      regexp:
        alertName: ^NodeDisk
        labels: {severity: ^(warning|critical)$}
        annotations: {summary: disk}
        startsAt: ^2024-
        endsAt: ^2024-
        generatorURL: prometheus
      nodeNameReferenceLabel: node
      podNamespaceReferenceLabel: namespace
      podNameReferenceLabel: pod
      containerReferenceLabel: container
      parameterInjectionLabels: [instance, device, absent]
"#;

    fn compiled(yaml: &str) -> CompiledTrigger {
        CompiledTrigger::new(&trigger(yaml)).expect("valid Trigger")
    }

    fn alert() -> PrometheusAlert {
        serde_json::from_value(serde_json::json!({
            "status": "firing",
            "labels": {
                "alertname": "NodeDiskPressure",
                "severity": "critical",
                "node": "node-1",
                "namespace": "shop",
                "pod": "cart-0",
                "container": "app",
                "instance": "10.0.0.1:9100",
                "device": "/dev/sda1",
            },
            "annotations": {"summary": "disk almost full"},
            "startsAt": "2024-05-01T10:00:00Z",
            "endsAt": "2024-05-01T11:00:00Z",
            "generatorURL": "http://prometheus:9090/graph?g0.expr=x",
            "fingerprint": "abc",
        }))
        .expect("alert JSON")
    }

    #[test]
    fn a_matching_alert_makes_a_diagnosis() {
        let new = compiled(TRIGGER).match_alert(&alert()).expect("matches");
        assert_valid_name(&new.name);
        assert!(
            new.name.starts_with("prometheus-alert.disk-pressure."),
            "{}",
            new.name
        );
        assert_eq!(new.namespace, "operon");
        assert_eq!(new.spec.operation_set, "disk-diagnosis");
        assert_eq!(new.spec.node_name.as_deref(), Some("node-1"));
        assert_eq!(
            new.spec.pod_reference,
            Some(PodReference {
                namespace: "shop".into(),
                name: "cart-0".into(),
                container: Some("app".into()),
            })
        );
        assert_eq!(new.labels[TRIGGER_LABEL], "disk-pressure");
        assert_eq!(new.labels[SOURCE_LABEL], "prometheus-alert");
        assert!(new.annotations[CAUSE_ANNOTATION].contains("NodeDiskPressure"));
    }

    #[test]
    fn injection_labels_override_trigger_parameters() {
        let new = compiled(TRIGGER).match_alert(&alert()).expect("matches");
        let expected = BTreeMap::from([
            ("mode".to_owned(), "quick".to_owned()),
            ("instance".to_owned(), "10.0.0.1:9100".to_owned()),
            ("device".to_owned(), "/dev/sda1".to_owned()),
        ]);
        // `absent` is not on the alert, so it is not injected.
        assert_eq!(new.spec.parameters, expected);
    }

    #[test]
    fn each_field_kind_can_reject() {
        let t = compiled(TRIGGER);
        type Change = fn(&mut PrometheusAlert);
        let cases: [(&str, Change); 8] = [
            ("alertName", |a| {
                a.labels.insert("alertname".into(), "CPUThrottling".into());
            }),
            ("label value", |a| {
                a.labels.insert("severity".into(), "info".into());
            }),
            ("label missing", |a| {
                a.labels.remove("severity");
            }),
            ("annotation value", |a| {
                a.annotations.insert("summary".into(), "cpu busy".into());
            }),
            ("annotation missing", |a| {
                a.annotations.clear();
            }),
            ("startsAt", |a| a.starts_at = "2023-12-31T00:00:00Z".into()),
            ("endsAt", |a| a.ends_at = "2025-01-01T00:00:00Z".into()),
            ("generatorURL", |a| {
                a.generator_url = "http://grafana".into()
            }),
        ];
        for (what, change) in cases {
            let mut alert = alert();
            change(&mut alert);
            assert!(t.match_alert(&alert).is_none(), "{what} should not match");
        }
    }

    #[test]
    fn missing_alertname_is_the_empty_string() {
        let t = compiled(
            "metadata: {name: t}\nspec: {operationSet: s, sourceTemplate: {prometheusAlertTemplate: {regexp: {alertName: '^$'}}}}",
        );
        assert!(t.match_alert(&PrometheusAlert::default()).is_some());
        assert!(t.match_alert(&alert()).is_none());
    }

    #[test]
    fn an_empty_template_matches_everything() {
        let t = compiled(
            "metadata: {name: t}\nspec: {operationSet: s, sourceTemplate: {prometheusAlertTemplate: {}}}",
        );
        let new = t.match_alert(&PrometheusAlert::default()).expect("matches");
        assert_eq!(new.spec.node_name, None);
        assert_eq!(new.spec.pod_reference, None);
        assert!(new.spec.parameters.is_empty());
    }

    #[test]
    fn missing_reference_labels_are_unset_not_a_mismatch() {
        let t = compiled(TRIGGER);
        let mut alert = alert();
        alert.labels.remove("node");
        alert.labels.remove("namespace");
        alert.labels.remove("container");
        let new = t.match_alert(&alert).expect("still matches");
        assert_eq!(new.spec.node_name.as_deref(), Some("fallback-node"));
        assert_eq!(new.spec.pod_reference, None, "a pod needs a namespace too");

        let mut pod_only = super::tests::alert();
        pod_only.labels.remove("node");
        pod_only.labels.remove("container");
        let new = t.match_alert(&pod_only).expect("matches");
        assert_eq!(
            new.spec.pod_reference,
            Some(PodReference {
                namespace: "shop".into(),
                name: "cart-0".into(),
                container: None,
            })
        );
        assert_eq!(new.spec.node_name.as_deref(), Some("fallback-node"));
    }

    #[test]
    fn names_are_deterministic_per_firing() {
        let t = compiled(TRIGGER);
        let first = t.match_alert(&alert()).expect("matches");
        let mut redelivered = alert();
        redelivered
            .annotations
            .insert("summary".into(), "disk still full".into());
        redelivered.ends_at = "2024-05-01T12:00:00Z".into();
        redelivered.starts_at = "2024-05-01T10:00:00.000Z".into();
        assert_eq!(
            t.match_alert(&redelivered).expect("matches").name,
            first.name
        );

        let mut refired = alert();
        refired.starts_at = "2024-05-02T10:00:00Z".into();
        assert_ne!(t.match_alert(&refired).expect("matches").name, first.name);
        let mut other_pod = alert();
        other_pod.labels.insert("pod".into(), "cart-1".into());
        assert_ne!(t.match_alert(&other_pod).expect("matches").name, first.name);
    }

    #[test]
    fn odd_trigger_names_give_valid_diagnosis_names() {
        let t = compiled(
            "metadata: {name: 'Disk_Pressure/Alert'}\nspec: {operationSet: s, sourceTemplate: {prometheusAlertTemplate: {}}}",
        );
        let new = t.match_alert(&alert()).expect("matches");
        assert_valid_name(&new.name);
        assert!(
            new.name
                .starts_with("prometheus-alert.disk-pressure-alert-"),
            "{}",
            new.name
        );
        assert!(new.labels[TRIGGER_LABEL].starts_with("disk-pressure-alert-"));
        assert_eq!(new.annotations[TRIGGER_ANNOTATION], "Disk_Pressure/Alert");
    }

    #[test]
    fn resolution_follows_ends_at() {
        let now: Timestamp = "2024-05-01T10:30:00Z".parse().expect("time");
        let mut alert = alert();
        assert!(!alert.is_resolved_at(now));
        alert.ends_at = "2024-05-01T10:29:00Z".into();
        assert!(alert.is_resolved_at(now));
        alert.ends_at = "0001-01-01T00:00:00Z".into();
        assert!(!alert.is_resolved_at(now));
        alert.ends_at = String::new();
        assert!(!alert.is_resolved_at(now));
        alert.ends_at = "2024-05-01T10:31:00Z".into();
        alert.status = "resolved".into();
        assert!(
            alert.is_resolved_at(now),
            "the status wins over a clock ahead"
        );
    }

    #[test]
    fn alert_serialises_generator_url_by_its_alertmanager_name() {
        let json = serde_json::to_value(alert()).expect("serialise");
        assert!(json.get("generatorURL").is_some(), "{json}");
        assert!(json.get("startsAt").is_some(), "{json}");
    }
}
