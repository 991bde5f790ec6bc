//! [`NewDiagnosis`]: what a matched Trigger asks the controller to create, and the
//! deterministic, always-valid Kubernetes names it gets.

use super::SourceKind;
use operon_data::api::{Diagnosis, DiagnosisSpec};
use operon_data::conventions::names;
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;

/// The namespace of created Diagnoses unless the caller moves them: Operon's own
/// install namespace, where KubeDiag used `kubediag`. Triggers are cluster-scoped, so
/// the Diagnoses they create need a namespace chosen by the installation, not by them.
pub(crate) const DEFAULT_NAMESPACE: &str = "operon";

/// Label holding the creating Trigger's name, to list a Trigger's Diagnoses.
pub(crate) const TRIGGER_LABEL: &str = "operon.dev/trigger";

/// Label holding the source kind: `prometheus-alert`, `kubernetes-event` or `cron`.
pub const SOURCE_LABEL: &str = "operon.dev/trigger-source";

/// Annotation holding the Trigger's full name, for when the label had to be shortened
/// (label values are limited to 63 characters, Trigger names to 253).
pub(crate) const TRIGGER_ANNOTATION: &str = "operon.dev/trigger";

/// Annotation saying what fired: the alert's labels and start, the event, or the slot.
/// It shows what the hash in the Diagnosis' name was computed from.
pub(crate) const CAUSE_ANNOTATION: &str = "operon.dev/cause";

/// The longest Kubernetes object name (a DNS-1123 subdomain).
const MAX_NAME: usize = names::MAX_SUBDOMAIN;
/// The longest label value.
const MAX_LABEL_VALUE: usize = names::MAX_LABEL;
/// Hex digits of the hash in a name: 48 bits keep accidental collisions between one
/// Trigger's alerts or events negligible while the name stays readable.
const SHORT_HASH: usize = 12;
/// Hex digits of the hash that keeps two different, shortened Trigger names apart.
const NAME_HASH: usize = 8;

/// A Diagnosis a Trigger asks to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDiagnosis {
    /// `<source prefix>.<trigger>.<hash or slot>`, a valid Kubernetes name that is the
    /// same every time the same alert, event occurrence or slot is seen.
    pub name: String,
    /// Operon's install namespace (`operon`) unless the caller changes it.
    pub namespace: String,
    /// What to run, and about what.
    pub(crate) spec: DiagnosisSpec,
    /// `operon.dev/trigger` (the Trigger's name) and [`SOURCE_LABEL`].
    pub labels: BTreeMap<String, String>,
    /// [`TRIGGER_ANNOTATION`] and [`CAUSE_ANNOTATION`].
    pub(crate) annotations: BTreeMap<String, String>,
}

impl NewDiagnosis {
    /// A Diagnosis of `trigger`, from a `kind` source, named by `suffix`.
    pub(super) fn build(
        trigger: &str,
        kind: SourceKind,
        suffix: &str,
        spec: DiagnosisSpec,
        cause: String,
    ) -> Self {
        let labels = BTreeMap::from([
            (TRIGGER_LABEL.to_owned(), label_value(trigger)),
            (SOURCE_LABEL.to_owned(), kind.prefix().to_owned()),
        ]);
        let annotations = BTreeMap::from([
            (TRIGGER_ANNOTATION.to_owned(), trigger.to_owned()),
            (CAUSE_ANNOTATION.to_owned(), cause),
        ]);
        Self {
            name: diagnosis_name(kind.prefix(), trigger, suffix),
            namespace: DEFAULT_NAMESPACE.to_owned(),
            spec,
            labels,
            annotations,
        }
    }

    /// The Diagnosis object to create (no status).
    pub fn into_diagnosis(self) -> Diagnosis {
        let mut diagnosis = Diagnosis::new(&self.name, self.spec);
        diagnosis.metadata.namespace = Some(self.namespace);
        diagnosis.metadata.labels = Some(self.labels);
        diagnosis.metadata.annotations = Some(self.annotations);
        diagnosis
    }
}

impl From<NewDiagnosis> for Diagnosis {
    fn from(new: NewDiagnosis) -> Self {
        new.into_diagnosis()
    }
}

/// A short hex hash of `parts`, scoped to one Trigger and source kind so that two
/// Triggers matching the same alert never produce the same name.
pub(super) fn short_hash(trigger: &str, kind: SourceKind, parts: &[String]) -> String {
    let mut hasher = Sha256::new();
    // Length prefixes keep ("ab", "c") and ("a", "bc") apart.
    for part in [kind.prefix(), trigger]
        .into_iter()
        .chain(parts.iter().map(String::as_str))
    {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    let mut digest = hex::encode(hasher.finalize());
    digest.truncate(SHORT_HASH);
    digest
}

/// `<prefix>.<trigger>.<suffix>`, with the trigger part made valid and short enough.
/// `prefix` and `suffix` are already valid segments (a fixed word, hex or digits).
fn diagnosis_name(prefix: &str, trigger: &str, suffix: &str) -> String {
    let budget = MAX_NAME.saturating_sub(prefix.len() + suffix.len() + 2);
    format!("{prefix}.{}.{suffix}", name_part(trigger, budget))
}

/// `trigger` unchanged when it is already a valid name of at most `budget` characters,
/// else [`shortened`].
fn name_part(trigger: &str, budget: usize) -> String {
    if trigger.len() <= budget && names::is_dns_subdomain(trigger) {
        trigger.to_owned()
    } else {
        shortened(trigger, budget)
    }
}

/// A cleaned form of `text` of at most `max` characters, ending in a hash of the
/// original so that two names that clean up alike ("Disk" and "disk") stay apart. The
/// result is both a valid name and a valid label value.
fn shortened(text: &str, max: usize) -> String {
    let hash = &hex::encode(Sha256::digest(text.as_bytes()))[..NAME_HASH];
    let mut cleaned = sanitize(text);
    cleaned.truncate(max.saturating_sub(NAME_HASH + 1));
    let cleaned = cleaned.trim_end_matches(['-', '.']);
    if cleaned.is_empty() {
        hash.to_owned()
    } else {
        format!("{cleaned}-{hash}")
    }
}

/// Lowercase, with every run of characters outside `[a-z0-9.]` turned into one `-`,
/// and dot-separated segments that start and end with a letter or digit. The result
/// is ASCII, so truncating it by bytes is safe.
fn sanitize(text: &str) -> String {
    let mut dashed = String::with_capacity(text.len());
    for c in text.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' {
            c
        } else {
            '-'
        };
        if !(c == '-' && dashed.ends_with('-')) {
            dashed.push(c);
        }
    }
    dashed
        .split('.')
        .map(|segment| segment.trim_matches('-'))
        .filter(|segment| !segment.is_empty())
        .collect::<Vec<_>>()
        .join(".")
}

/// `trigger` as a label value: unchanged when valid (always, for a Trigger name the
/// API server accepted that is at most 63 characters), else cleaned, shortened and
/// hashed ([`shortened`]).
fn label_value(trigger: &str) -> String {
    if names::label_value(trigger).is_ok() {
        trigger.to_owned()
    } else {
        shortened(trigger, MAX_LABEL_VALUE)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A valid Kubernetes object name.
    pub(crate) fn assert_valid_name(name: &str) {
        assert!(
            names::is_dns_subdomain(name),
            "{name:?} is not a valid name"
        );
    }

    #[test]
    fn valid_trigger_names_are_kept() {
        assert_eq!(
            diagnosis_name("cron", "node.disk-check", "1700000000"),
            "cron.node.disk-check.1700000000"
        );
        assert_eq!(label_value("node.disk-check"), "node.disk-check");
    }

    #[test]
    fn odd_characters_and_uppercase_are_cleaned_and_hashed() {
        let name = diagnosis_name("prometheus-alert", "Disk_Pressure  Alert!", "abc123");
        assert_valid_name(&name);
        assert!(
            name.starts_with("prometheus-alert.disk-pressure-alert-"),
            "{name}"
        );
        assert!(name.ends_with(".abc123"), "{name}");
        // Names that clean up alike stay apart.
        assert_ne!(
            diagnosis_name("cron", "Disk", "1"),
            diagnosis_name("cron", "disk-", "1")
        );
        assert_ne!(
            diagnosis_name("cron", "Disk", "1"),
            diagnosis_name("cron", "disk", "1")
        );
    }

    #[test]
    fn dots_and_dashes_at_segment_edges_are_removed() {
        for trigger in ["-a..b-", ".x.", "--", "Ünïcødé", "", "a.-b"] {
            let name = diagnosis_name("kubernetes-event", trigger, "0f");
            assert_valid_name(&name);
            let label = label_value(trigger);
            assert!(label.len() <= MAX_LABEL_VALUE, "{label}");
        }
    }

    #[test]
    fn long_names_fit_in_253_characters() {
        let long = "a".repeat(300);
        let name = diagnosis_name("kubernetes-event", &long, "0123456789ab");
        assert_valid_name(&name);
        assert_eq!(name.len(), MAX_NAME);
        let label = label_value(&long);
        assert!(label.len() <= MAX_LABEL_VALUE, "{label}");
        assert!(label.starts_with("aaaa"), "{label}");
        // A valid 253-character Trigger name still leaves room for prefix and suffix.
        let max = format!("{}.{}", "b".repeat(126), "c".repeat(126));
        assert_valid_name(&diagnosis_name("prometheus-alert", &max, "0123456789ab"));
    }

    #[test]
    fn short_hash_is_scoped_and_unambiguous() {
        let parts = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let a = short_hash("t", SourceKind::PrometheusAlert, &parts(&["ab", "c"]));
        assert_eq!(a.len(), SHORT_HASH);
        assert_eq!(
            a,
            short_hash("t", SourceKind::PrometheusAlert, &parts(&["ab", "c"]))
        );
        assert_ne!(
            a,
            short_hash("t", SourceKind::PrometheusAlert, &parts(&["a", "bc"]))
        );
        assert_ne!(
            a,
            short_hash("u", SourceKind::PrometheusAlert, &parts(&["ab", "c"]))
        );
        assert_ne!(
            a,
            short_hash("t", SourceKind::KubernetesEvent, &parts(&["ab", "c"]))
        );
    }

    #[test]
    fn into_diagnosis_carries_metadata() {
        let spec = DiagnosisSpec {
            operation_set: "s".into(),
            node_name: Some("n".into()),
            pod_reference: None,
            parameters: BTreeMap::new(),
            service_account_name: None,
            dry_run: false,
            ..Default::default()
        };
        let new = NewDiagnosis::build("t", SourceKind::Cron, "60", spec.clone(), "c".into());
        let diagnosis: Diagnosis = new.into();
        assert_eq!(diagnosis.metadata.name.as_deref(), Some("cron.t.60"));
        assert_eq!(diagnosis.metadata.namespace.as_deref(), Some("operon"));
        let labels = diagnosis.metadata.labels.unwrap_or_default();
        assert_eq!(labels[TRIGGER_LABEL], "t");
        assert_eq!(labels[SOURCE_LABEL], "cron");
        let annotations = diagnosis.metadata.annotations.unwrap_or_default();
        assert_eq!(annotations[CAUSE_ANNOTATION], "c");
        assert_eq!(diagnosis.spec, spec);
        assert!(diagnosis.status.is_none());
    }
}
