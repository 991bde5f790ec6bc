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
const MAX_NAME: usize = operon_data::conventions::names::MAX_SUBDOMAIN;

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
    let mut by_subject: BTreeMap<(Option<&str>, &str, &str, &str), Vec<&Finding>> = BTreeMap::new();
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

#[cfg(test)]
mod tests {
    use super::*;
    use operon_data::model::ValidatingResponse;
    use serde_json::json;

    fn answered(allowed: bool, message: Option<&str>, warnings: &[&str]) -> AdmissionOutcome {
        AdmissionOutcome::Answered(ValidatingResponse {
            allowed,
            message: message.map(str::to_owned),
            warnings: warnings.iter().map(|w| (*w).to_owned()).collect(),
            patch: None,
        })
    }

    #[test]
    fn answers_are_judged_under_their_enforcement() {
        let verdicts =
            |outcome: AdmissionOutcome| Enforcement::ALL.map(|e| judge(outcome.clone(), e).verdict);
        use Verdict::*;
        assert_eq!(verdicts(answered(true, None, &[])), [Pass, Pass, Pass]);
        assert_eq!(
            verdicts(answered(true, None, &["careful"])),
            [Warn, Warn, Warn]
        );
        assert_eq!(
            verdicts(answered(false, Some("no"), &[])),
            [Fail, Warn, Warn]
        );
        assert_eq!(
            verdicts(AdmissionOutcome::Failed("hook h failed: exit 1".into())),
            [Error, Error, Error]
        );
        let denied = judge(
            answered(false, Some("no latest"), &["w"]),
            Enforcement::DryRun,
        );
        assert_eq!(
            denied,
            Judged {
                verdict: Warn,
                answer: Answer::Denied,
                message: "no latest".into(),
                warnings: vec!["w".into()]
            }
        );
        assert_eq!(
            judge(answered(false, None, &[]), Enforcement::Deny).message,
            "denied without a message"
        );
        let warned = judge(answered(true, None, &["a", "b"]), Enforcement::Deny);
        assert_eq!(
            (warned.message.as_str(), warned.answer),
            ("a; b", Answer::Allowed)
        );
    }

    fn subject(namespace: Option<&str>, kind: &str, name: &str, uid: &str) -> Subject {
        Subject {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
            uid: Some(uid.into()),
            resource_version: Some("7".into()),
        }
    }

    fn finding(
        subject: &Subject,
        hook: &str,
        binding: &str,
        judged: Judged,
        enforcement: Enforcement,
    ) -> Finding {
        Finding {
            subject: subject.clone(),
            source: "hooks directory".into(),
            hook: hook.into(),
            binding: binding.into(),
            enforcement,
            judged,
            at: jiff::Timestamp::from_second(1_800_000_000).unwrap(),
        }
    }

    #[test]
    fn each_object_gets_one_report_with_a_result_per_binding() {
        let web = subject(Some("shop"), "Pod", "web", "u-web");
        let shop = subject(None, "Namespace", "shop", "u-shop");
        let findings = vec![
            finding(
                &web,
                "b.sh",
                "pinned.example.com",
                judge(answered(false, Some("pin it"), &[]), Enforcement::Deny),
                Enforcement::Deny,
            ),
            finding(
                &shop,
                "a.sh",
                "owner.example.com",
                judge(answered(true, None, &[]), Enforcement::Deny),
                Enforcement::Deny,
            ),
            finding(
                &web,
                "a.sh",
                "team.example.com",
                judge(
                    answered(false, Some("no team"), &["w1", "w2"]),
                    Enforcement::DryRun,
                ),
                Enforcement::DryRun,
            ),
            // The same binding again (a second group of the same kind): kept once.
            finding(
                &web,
                "a.sh",
                "team.example.com",
                judge(answered(true, None, &[]), Enforcement::DryRun),
                Enforcement::DryRun,
            ),
        ];
        let reports = reports(&findings);
        assert_eq!(reports.len(), 2);
        // Cluster-scoped first.
        let cluster = reports[0].to_value();
        assert_eq!(cluster["kind"], "ClusterPolicyReport");
        assert_eq!(cluster["metadata"]["name"], "operon-u-shop");
        assert!(cluster["metadata"].get("namespace").is_none());
        assert_eq!(
            cluster["summary"],
            json!({"pass": 1, "fail": 0, "warn": 0, "error": 0, "skip": 0})
        );
        assert!(
            cluster["results"][0].get("message").is_none(),
            "a pass says nothing"
        );

        let report = reports[1].to_value();
        assert_eq!(
            report["metadata"],
            json!({"name": "operon-u-web", "namespace": "shop",
                   "labels": {"app.kubernetes.io/managed-by": "operon"},
                   "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u-web"}]})
        );
        assert_eq!(report["apiVersion"], "wgpolicyk8s.io/v1alpha2");
        assert_eq!(report["kind"], "PolicyReport");
        assert_eq!(
            report["scope"],
            json!({"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "web",
                   "uid": "u-web", "resourceVersion": "7"})
        );
        assert_eq!(
            report["summary"],
            json!({"pass": 0, "fail": 1, "warn": 1, "error": 0, "skip": 0})
        );
        assert_eq!(
            report["results"],
            json!([
                {"source": "operon", "policy": "a.sh", "rule": "team.example.com",
                 "result": "warn", "scored": false, "message": "no team",
                 "timestamp": {"seconds": 1_800_000_000, "nanos": 0},
                 "resources": [{"apiVersion": "v1", "kind": "Pod", "namespace": "shop",
                                "name": "web", "uid": "u-web"}],
                 "properties": {"engine": "hooks directory", "enforcement": "DryRun",
                                "answer": "denied", "operation": "CREATE",
                                "warnings": "w1\nw2"}},
                {"source": "operon", "policy": "b.sh", "rule": "pinned.example.com",
                 "result": "fail", "scored": true, "message": "pin it",
                 "timestamp": {"seconds": 1_800_000_000, "nanos": 0},
                 "resources": [{"apiVersion": "v1", "kind": "Pod", "namespace": "shop",
                                "name": "web", "uid": "u-web"}],
                 "properties": {"engine": "hooks directory", "enforcement": "Deny",
                                "answer": "denied", "operation": "CREATE"}},
            ])
        );
    }

    #[test]
    fn subjects_come_from_objects_and_name_their_reports() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "resourceVersion": "3"}});
        let subject = Subject::of(&pod, true);
        assert_eq!(
            subject,
            Subject {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("shop".into()),
                name: "web".into(),
                uid: Some("u-1".into()),
                resource_version: Some("3".into()),
            }
        );
        assert_eq!(subject.report_name(), "operon-u-1");
        assert_eq!(subject.describe(), "Pod shop/web");
        // A cluster-scoped resource has no namespace, whatever the object says.
        assert_eq!(Subject::of(&pod, false).namespace, None);
        let no_uid = Subject {
            uid: None,
            name: "x".repeat(300),
            ..subject
        };
        let name = no_uid.report_name();
        assert!(name.starts_with("operon-pod-xxx"), "{name}");
        assert_eq!(name.len(), 253);
        let reports = reports(&[finding(
            &no_uid,
            "h",
            "b",
            judge(answered(true, None, &[]), Enforcement::Deny),
            Enforcement::Deny,
        )]);
        assert!(
            reports[0].metadata.owner_references.is_none(),
            "no uid, no owner"
        );
    }
}
