//! What an audit's answers become: one `wgpolicyk8s.io/v1alpha2` report per audited
//! object (a PolicyReport in its namespace, a ClusterPolicyReport for a cluster-scoped
//! object) holding one result per binding that reviewed it, with the summary the
//! CRD's printer columns show. No I/O: [`super::store`] writes what this builds.
//!
//! One report per object, as Kubewarden's audit scanner and Kyverno write them: a
//! namespace's worth of results in one object would outgrow what the API server
//! stores (1.5 MiB) in a large namespace, and a report owned by its object goes with
//! it. Reports are named `operon-<object uid>`, so that they never take the name of a
//! report another engine (Kyverno, Kubewarden: `<object uid>`) keeps for the same
//! object.

use super::targets::AUDITED_OPERATION;
use crate::serve::webhook::review::AdmissionOutcome;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use operon_data::model::Enforcement;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The reports' group and version.
pub const API_VERSION: &str = "wgpolicyk8s.io/v1alpha2";
/// The kind of a namespaced object's report.
pub const POLICY_REPORT: &str = "PolicyReport";
/// The kind of a cluster-scoped object's report.
pub const CLUSTER_POLICY_REPORT: &str = "ClusterPolicyReport";
/// `source` of every result: the engine that wrote it.
pub const SOURCE: &str = "operon";
/// The label that marks a report as Operon's: stale ones are found by it.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "operon");
/// What report names start with.
const NAME_PREFIX: &str = "operon-";
/// The longest name the API server takes (a DNS subdomain).
const MAX_NAME: usize = 253;

/// What a result says of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Admitted as it is.
    Pass,
    /// Denied by an enforced (`Deny`) binding: the API server would refuse it now.
    Fail,
    /// Admitted with warnings, or denied by a binding that is not enforced (`Warn`,
    /// `DryRun`): it would be refused once the binding is.
    Warn,
    /// The hook failed, timed out or gave no answer.
    Error,
    /// Not reviewed: the binding has `matchConditions`, which an audit does not
    /// evaluate.
    Skip,
}

impl Verdict {
    /// Every verdict, in the order of the CRD's summary.
    pub const ALL: [Self; 5] = [Self::Pass, Self::Fail, Self::Warn, Self::Error, Self::Skip];

    /// The value of a result's `result` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Warn => "warn",
            Self::Error => "error",
            Self::Skip => "skip",
        }
    }
}

/// What the hook answered, before its binding's enforcement: `properties.answer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Allowed.
    Allowed,
    /// Denied.
    Denied,
    /// No answer: the hook failed, timed out or wrote nothing.
    Failed,
    /// Not asked ([`Verdict::Skip`]).
    NotReviewed,
}

impl Answer {
    fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::Failed => "failed",
            Self::NotReviewed => "not reviewed",
        }
    }
}

/// A hook's answer to an audit review, judged under its binding's enforcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The result.
    pub verdict: Verdict,
    /// What the hook answered.
    pub answer: Answer,
    /// The denial's message, the failure, or the warnings (a pass has none).
    pub message: String,
    /// The warnings the hook gave.
    pub warnings: Vec<String>,
}

/// `outcome` under `enforcement`: a denial fails only under `Deny`; under `Warn` and
/// `DryRun` it is a warning, as the request itself would be allowed (with a warning
/// under `Warn`); a failure is an error whatever the enforcement, since the hook
/// needs fixing either way (as `operon_webhook_requests_total` counts it).
pub fn judge(outcome: AdmissionOutcome, enforcement: Enforcement) -> Judged {
    match outcome {
        AdmissionOutcome::Failed(message) => Judged {
            verdict: Verdict::Error,
            answer: Answer::Failed,
            message,
            warnings: Vec::new(),
        },
        AdmissionOutcome::Answered(answer) if answer.allowed => Judged {
            verdict: match answer.warnings.is_empty() {
                true => Verdict::Pass,
                false => Verdict::Warn,
            },
            answer: Answer::Allowed,
            message: answer.warnings.join("; "),
            warnings: answer.warnings,
        },
        AdmissionOutcome::Answered(answer) => Judged {
            verdict: match enforcement {
                Enforcement::Deny => Verdict::Fail,
                Enforcement::Warn | Enforcement::DryRun => Verdict::Warn,
            },
            answer: Answer::Denied,
            message: answer
                .message
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "denied without a message".to_owned()),
            warnings: answer.warnings,
        },
    }
}

/// The object a result is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Subject {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// The namespace; `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
    /// `metadata.uid`: the report's name and owner.
    pub uid: Option<String>,
    /// `metadata.resourceVersion`: which state of the object was reviewed.
    pub resource_version: Option<String>,
}

impl Subject {
    /// The subject `object` is, of a namespaced resource or not.
    pub fn of(object: &Value, namespaced: bool) -> Self {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        Self {
            api_version: text("/apiVersion").unwrap_or_default(),
            kind: text("/kind").unwrap_or_default(),
            namespace: text("/metadata/namespace").filter(|_| namespaced),
            name: text("/metadata/name").unwrap_or_default(),
            uid: text("/metadata/uid"),
            resource_version: text("/metadata/resourceVersion"),
        }
    }

    /// `Kind namespace/name`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} {}",
            self.kind,
            operon_cluster::namespaced_name(self.namespace.as_deref(), &self.name)
        )
    }

    /// The name of its report: `operon-<uid>`; an object without a uid (never one an
    /// API server lists) gets `operon-<kind>-<name>`.
    pub fn report_name(&self) -> String {
        let mut name = match &self.uid {
            Some(uid) => format!("{NAME_PREFIX}{uid}"),
            None => format!(
                "{NAME_PREFIX}{}-{}",
                self.kind.to_ascii_lowercase(),
                self.name
            ),
        };
        name.truncate(MAX_NAME);
        name
    }

    fn reference(&self, with_version: bool) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version.clone()),
            kind: Some(self.kind.clone()),
            namespace: self.namespace.clone(),
            name: Some(self.name.clone()),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone().filter(|_| with_version),
            field_path: None,
        }
    }
}

/// One binding's verdict on one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The object.
    pub subject: Subject,
    /// Where the hook comes from (the hooks directory, a Hook object).
    pub source: String,
    /// The hook: the result's `policy`.
    pub hook: String,
    /// The binding (its webhook's name): the result's `rule`.
    pub binding: String,
    /// The binding's enforcement.
    pub enforcement: Enforcement,
    /// The judged answer.
    pub judged: Judged,
    /// When the review was answered.
    pub at: jiff::Timestamp,
}

/// A `wgpolicyk8s.io/v1alpha2` PolicyReport or ClusterPolicyReport.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// [`POLICY_REPORT`] or [`CLUSTER_POLICY_REPORT`].
    pub kind: &'static str,
    /// Name, namespace, Operon's label, and the object as owner (its report goes when
    /// it goes).
    pub metadata: ObjectMeta,
    /// The object reviewed.
    pub scope: ObjectReference,
    /// How many results of each kind.
    pub summary: Summary,
    /// One per binding that reviewed the object.
    pub results: Vec<ReportResult>,
}

/// The counts of a report's results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Results `pass`.
    pub pass: u32,
    /// Results `fail`.
    pub fail: u32,
    /// Results `warn`.
    pub warn: u32,
    /// Results `error`.
    pub error: u32,
    /// Results `skip`.
    pub skip: u32,
}

impl Summary {
    fn count(&mut self, verdict: Verdict) {
        let counter = match verdict {
            Verdict::Pass => &mut self.pass,
            Verdict::Fail => &mut self.fail,
            Verdict::Warn => &mut self.warn,
            Verdict::Error => &mut self.error,
            Verdict::Skip => &mut self.skip,
        };
        *counter += 1;
    }
}

/// One result of a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportResult {
    /// [`SOURCE`].
    pub source: &'static str,
    /// The hook.
    pub policy: String,
    /// The binding.
    pub rule: String,
    /// `pass`, `fail`, `warn`, `error` or `skip`.
    pub result: &'static str,
    /// Whether the binding is enforced (`Deny`): a result of a binding being rolled out
    /// (`Warn`, `DryRun`) does not count against the object yet.
    pub scored: bool,
    /// Why; empty for a pass.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the review was answered.
    pub timestamp: Timestamp,
    /// The object reviewed.
    pub resources: Vec<ObjectReference>,
    /// `engine` (where the hook comes from), `enforcement`, `answer` (what the hook
    /// answered before its enforcement: `allowed`, `denied`, `failed`, `not
    /// reviewed`), `operation` (`CREATE`) and, when the hook gave any, `warnings`.
    pub properties: BTreeMap<String, String>,
}

/// A protobuf Timestamp, as the CRD spells `timestamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Timestamp {
    /// Seconds since the Unix epoch.
    pub seconds: i64,
    /// Nanoseconds within the second.
    pub nanos: i32,
}

impl From<jiff::Timestamp> for Timestamp {
    fn from(at: jiff::Timestamp) -> Self {
        Self {
            seconds: at.as_second(),
            nanos: at.subsec_nanosecond(),
        }
    }
}

impl Report {
    /// Whether this is a ClusterPolicyReport.
    pub fn cluster_scoped(&self) -> bool {
        self.kind == CLUSTER_POLICY_REPORT
    }

    /// The report's name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The report's namespace; `None` for a ClusterPolicyReport.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata.namespace.as_deref()
    }

    /// The report as JSON.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a report serializes")
    }
}

/// The reports of `findings`: one per object, its results sorted by source, hook and
/// binding (an object two rules of a binding reach, through two groups of one kind,
/// keeps its first result), the reports sorted by namespace, kind and name of their
/// object (cluster-scoped ones first).
pub fn reports(findings: &[Finding]) -> Vec<Report> {
    let mut by_subject: BTreeMap<(Option<&str>, &str, &str, &str), Vec<&Finding>> =
        BTreeMap::new();
    for finding in findings {
        let subject = &finding.subject;
        let key = (
            subject.namespace.as_deref(),
            subject.kind.as_str(),
            subject.name.as_str(),
            subject.uid.as_deref().unwrap_or_default(),
        );
        by_subject.entry(key).or_default().push(finding);
    }
    by_subject
        .into_values()
        .map(|findings| report(&findings))
        .collect()
}

fn report(findings: &[&Finding]) -> Report {
    let subject = &findings[0].subject;
    let mut seen = BTreeSet::new();
    let mut kept: Vec<&Finding> = findings
        .iter()
        .copied()
        .filter(|f| seen.insert((&f.source, &f.hook, &f.binding)))
        .collect();
    kept.sort_by(|a, b| (&a.source, &a.hook, &a.binding).cmp(&(&b.source, &b.hook, &b.binding)));
    let mut summary = Summary::default();
    let results = kept
        .iter()
        .map(|finding| {
            summary.count(finding.judged.verdict);
            result(finding)
        })
        .collect();
    let owner = subject.uid.as_ref().map(|uid| OwnerReference {
        api_version: subject.api_version.clone(),
        kind: subject.kind.clone(),
        name: subject.name.clone(),
        uid: uid.clone(),
        controller: None,
        block_owner_deletion: None,
    });
    Report {
        api_version: API_VERSION,
        kind: match subject.namespace {
            Some(_) => POLICY_REPORT,
            None => CLUSTER_POLICY_REPORT,
        },
        metadata: ObjectMeta {
            name: Some(subject.report_name()),
            namespace: subject.namespace.clone(),
            labels: Some(BTreeMap::from([(
                MANAGED_BY.0.to_owned(),
                MANAGED_BY.1.to_owned(),
            )])),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        scope: subject.reference(true),
        summary,
        results,
    }
}

fn result(finding: &Finding) -> ReportResult {
    let judged = &finding.judged;
    let mut properties = BTreeMap::from([
        ("engine".to_owned(), finding.source.clone()),
        ("enforcement".to_owned(), finding.enforcement.to_string()),
        ("answer".to_owned(), judged.answer.as_str().to_owned()),
        ("operation".to_owned(), AUDITED_OPERATION.to_owned()),
    ]);
    if !judged.warnings.is_empty() {
        properties.insert("warnings".to_owned(), judged.warnings.join("\n"));
    }
    ReportResult {
        source: SOURCE,
        policy: finding.hook.clone(),
        rule: finding.binding.clone(),
        result: judged.verdict.as_str(),
        scored: finding.enforcement == Enforcement::Deny,
        message: judged.message.clone(),
        timestamp: finding.at.into(),
        resources: vec![finding.subject.reference(false)],
        properties,
    }
}
