//! Audits: the validating bindings of running hook engines review the objects that
//! already exist, and what they answer becomes `wgpolicyk8s.io/v1alpha2` PolicyReports
//! and ClusterPolicyReports, so that a rule added after its objects shows what it
//! would refuse (`kubectl get policyreports -A`).
//!
//! What this owns: which objects each binding reviews ([`targets`]), the review each
//! gets ([`synthetic`]), one review at a time at a bounded rate, the results and their
//! reports ([`report`]), writing them and removing stale ones ([`store`]), the audit
//! of `operon serve --audit-interval` on the leader ([`run_periodically`]) and the
//! count of results (`operon_audit_results_total`). It runs hooks only through
//! [`Engine::audit_review`]: the engines are their owners' (the hooks directory's, and
//! Hook objects', each binding kept to the namespaces its webhook is).

pub(crate) mod metrics;
pub mod report;
pub mod store;
pub mod synthetic;
pub mod targets;

#[cfg(test)]
mod tests;

use crate::serve::webhook::review::admission_outcome;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use operon_cluster::{Cluster, ClusterError};
use operon_data::error_text::error_chain as chain;
use operon_data::model::Enforcement;
use operon_hooks::config::AdmissionBinding;
use operon_hooks::engine::Engine;
use report::{Answer, Finding, Judged, Subject, Verdict};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{ReportStore, StoreError, Synced};
use targets::LeftOut;

/// The `source` of the engine of the hooks directory.
pub const HOOKS_DIRECTORY: &str = "hooks directory";

/// An engine whose validating bindings are audited, with where its hooks come from
/// (each result's `properties.engine`).
#[derive(Debug, Clone)]
pub struct AuditedEngine {
    /// Where its hooks come from: [`HOOKS_DIRECTORY`], a Hook object.
    pub source: String,
    /// The engine.
    pub engine: Arc<Engine>,
    /// The namespaces each binding is kept to, by binding (a Hook object's, as its
    /// permissions keep its webhook): the API server would send it nothing else. A
    /// binding not named reviews every namespace its rules reach.
    pub namespaces: std::collections::BTreeMap<String, Vec<String>>,
}

/// How an audit reviews.
#[derive(Debug, Clone, Copy)]
pub struct AuditSettings {
    /// Reviews per second at most (one at a time).
    pub rate: f64,
    /// How long one review may wait for its hook (as `--webhook-timeout`).
    pub timeout: Duration,
    /// The enforcement of bindings that declare none (as `--webhook-enforcement`).
    pub enforcement: Enforcement,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            rate: DEFAULT_RATE,
            timeout: Duration::from_secs(9),
            enforcement: Enforcement::Deny,
        }
    }
}

/// Reviews per second by default: an audit runs beside the webhooks on the same
/// hooks, and a script hook that takes 20 ms then uses under half a core; 10,000
/// reviews take 8 min 20 s at least.
pub const DEFAULT_RATE: f64 = 20.0;

/// Why a binding, or part of it, is not audited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAudited {
    /// A rule, or part of one, is left out.
    #[error(transparent)]
    Rule(#[from] LeftOut),
    /// The API server does not serve a resource a rule names (at its scope).
    #[error("{resource}: the cluster serves no such resource at the rule's scope")]
    NotServed {
        /// `group/version resource`.
        resource: String,
    },
    /// Its objects are reported as `skip`.
    #[error(
        "its matchConditions (CEL) are not evaluated by audits: its objects are reported as skip, not reviewed"
    )]
    MatchConditions,
}

/// A binding, or part of one, that an audit does not review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Where its hook comes from.
    pub source: String,
    /// The hook.
    pub hook: String,
    /// The binding.
    pub binding: String,
    /// Why.
    pub reason: NotAudited,
}

/// A resource whose objects an audit could not list: their reports are kept as they
/// were.
#[derive(Debug, thiserror::Error)]
#[error("hook {hook} binding {binding}: cannot list {resource}")]
pub struct Unlisted {
    /// The hook.
    pub hook: String,
    /// The binding.
    pub binding: String,
    /// `group/version resource`.
    pub resource: String,
    /// Why.
    #[source]
    pub error: ClusterError,
}

/// What one audit found.
#[derive(Debug, Default)]
pub struct Audit {
    /// One per object and binding.
    pub findings: Vec<Finding>,
    /// What was not audited, and why.
    pub skipped: Vec<Skipped>,
    /// What could not be listed.
    pub unlisted: Vec<Unlisted>,
    /// How many reviews ran.
    pub reviews: usize,
    /// How long the audit took.
    pub elapsed: Duration,
}

impl Audit {
    /// Whether every resource was listed: only then are reports of objects this audit
    /// did not see stale.
    pub fn complete(&self) -> bool {
        self.unlisted.is_empty()
    }

    /// How many results of `verdict` it found.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.findings
            .iter()
            .filter(|f| f.judged.verdict == verdict)
            .count()
    }
}

/// Paces reviews: at most `rate` a second, no burst.
struct Pace(Option<DefaultDirectRateLimiter>);

impl Pace {
    fn new(rate: f64) -> Self {
        let limiter = (rate > 0.0 && rate.is_finite()).then(|| {
            // `with_period` fails only for a zero period, which a finite rate never gives.
            let quota = Quota::with_period(Duration::from_secs_f64(1.0 / rate))
                .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX));
            RateLimiter::direct(quota)
        });
        Self(limiter)
    }

    async fn wait(&self) {
        if let Some(limiter) = &self.0 {
            limiter.until_ready().await;
        }
    }
}

/// Reviews every object each validating binding of `engines` matches, in the order of
/// the engines, their hooks and bindings; objects of each resource by namespace then
/// name. Nothing is written: [`report::reports`] makes the reports of its findings.
pub async fn audit(
    cluster: &dyn Cluster,
    engines: &[AuditedEngine],
    settings: &AuditSettings,
) -> Audit {
    let started = Instant::now();
    let pace = Pace::new(settings.rate);
    let mut audit = Audit::default();
    for audited in engines {
        for (h, loaded) in audited.engine.hooks().iter().enumerate() {
            for binding in &loaded.config.validating {
                let reviewer = Reviewer {
                    engine: audited,
                    h,
                    hook: loaded.hook.name(),
                    binding,
                    enforcement: binding.enforcement_or(settings.enforcement),
                    settings,
                    pace: &pace,
                };
                reviewer.review_all(cluster, &mut audit).await;
            }
        }
    }
    audit.elapsed = started.elapsed();
    audit
}

/// One binding's part of an audit.
struct Reviewer<'a> {
    engine: &'a AuditedEngine,
    h: usize,
    hook: &'a str,
    binding: &'a AdmissionBinding,
    enforcement: Enforcement,
    settings: &'a AuditSettings,
    pace: &'a Pace,
}

impl Reviewer<'_> {
    fn skipped(&self, reason: NotAudited) -> Skipped {
        Skipped {
            source: self.engine.source.clone(),
            hook: self.hook.to_owned(),
            binding: self.binding.name.clone(),
            reason,
        }
    }

    async fn review_all(&self, cluster: &dyn Cluster, audit: &mut Audit) {
        let rules = targets::audited_rules(self.binding);
        let evaluated = self.binding.match_conditions.is_empty();
        audit.skipped.extend(
            (rules.left_out.into_iter()).map(|left_out| self.skipped(NotAudited::Rule(left_out))),
        );
        if !evaluated && !rules.resources.is_empty() {
            audit
                .skipped
                .push(self.skipped(NotAudited::MatchConditions));
        }
        for rule in &rules.resources {
            let named = format!("{} {}", rule.api_version(), rule.resource);
            let listed = match targets::resolve(cluster, rule).await {
                Ok(Some(resource)) => {
                    let selection = targets::selection(self.binding, &resource);
                    targets::objects(cluster, &resource, &selection)
                        .await
                        .map(|objects| Some((resource, objects)))
                }
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            let (resource, objects) = match listed {
                Ok(Some(found)) => found,
                Ok(None) => {
                    audit
                        .skipped
                        .push(self.skipped(NotAudited::NotServed { resource: named }));
                    continue;
                }
                Err(error) => {
                    tracing::warn!(hook = %self.hook, binding = %self.binding.name,
                        resource = %named, error = %error, "audit: cannot list the objects a binding reviews; their reports are kept");
                    audit.unlisted.push(Unlisted {
                        hook: self.hook.to_owned(),
                        binding: self.binding.name.clone(),
                        resource: named,
                        error,
                    });
                    continue;
                }
            };
            let limit = self.engine.namespaces.get(&self.binding.name);
            let is_namespace = resource.group.is_empty() && resource.plural == "namespaces";
            for object in objects {
                // As the webhook's namespaceSelector: a namespaced object by its
                // namespace, a Namespace by its own name, other cluster-scoped ones not.
                if let Some(names) = limit {
                    let (namespace, name) = operon_cluster::namespace_and_name(&object);
                    let place = match (resource.namespaced, is_namespace) {
                        (true, _) => Some(namespace),
                        (false, true) => Some(name),
                        (false, false) => None,
                    };
                    if place.is_some_and(|p| !names.iter().any(|n| n == p)) {
                        continue;
                    }
                }
                let subject = Subject::of(&object, resource.namespaced);
                let judged = match evaluated {
                    true => {
                        self.pace.wait().await;
                        audit.reviews += 1;
                        let review = synthetic::review(&resource, &object, &synthetic::new_uid());
                        drop(object);
                        self.review(&review, &subject).await
                    }
                    false => Judged {
                        verdict: Verdict::Skip,
                        answer: Answer::NotReviewed,
                        message: NotAudited::MatchConditions.to_string(),
                        warnings: Vec::new(),
                    },
                };
                metrics::found(self.hook, &self.binding.name, judged.verdict);
                audit.findings.push(Finding {
                    subject,
                    source: self.engine.source.clone(),
                    hook: self.hook.to_owned(),
                    binding: self.binding.name.clone(),
                    enforcement: self.enforcement,
                    judged,
                    at: jiff::Timestamp::now(),
                });
            }
        }
    }

    /// The hook's answer to `review`, judged under the binding's enforcement.
    async fn review(&self, review: &serde_json::Value, subject: &Subject) -> Judged {
        let (hook, binding) = (self.hook, self.binding.name.as_str());
        let run = self
            .engine
            .engine
            .audit_review(self.h, binding, review.to_string());
        let output = match tokio::time::timeout(self.settings.timeout, run).await {
            Err(_) => Err(format!(
                "hook {hook} did not answer within {}s",
                self.settings.timeout.as_secs_f64()
            )),
            Ok(None) => Err(format!("hook {hook} has no binding {binding}")),
            Ok(Some(record)) => record
                .run
                .outcome
                .map_err(|e| format!("hook {hook} failed: {e}")),
        };
        let judged = report::judge(
            admission_outcome(hook, binding, false, review, output),
            self.enforcement,
        );
        tracing::debug!(hook = %hook, binding = %binding, object = %subject.describe(),
            result = judged.verdict.as_str(), message = %judged.message, "audit review");
        judged
    }
}

/// An audit whose reports are written: its findings, and what writing them did.
#[derive(Debug)]
pub struct Reported {
    /// What the audit found.
    pub audit: Audit,
    /// The reports written.
    pub synced: Synced,
}

/// Audits `engines` and writes the reports to `store`, deleting stale ones when every
/// resource could be listed.
pub async fn audit_and_report(
    cluster: &dyn Cluster,
    engines: &[AuditedEngine],
    settings: &AuditSettings,
    store: &ReportStore,
) -> Result<Reported, StoreError> {
    let audit = audit(cluster, engines, settings).await;
    let reports = report::reports(&audit.findings);
    let synced = store.sync(&reports, audit.complete()).await?;
    Ok(Reported { audit, synced })
}

/// What `operon serve --audit-interval` runs on the leader.
#[derive(Debug, Clone)]
pub struct PeriodicAudit {
    /// Where the reports go.
    pub store: ReportStore,
    /// The pause between the end of one audit and the start of the next.
    pub interval: Duration,
    /// How each audit reviews.
    pub settings: AuditSettings,
}

/// Audits the engines `engines` gives, then again `interval` after each audit ended,
/// until dropped. While the report CRDs are not installed nothing is reviewed; that is
/// logged once (and again if they go after being there).
pub async fn run_periodically(
    periodic: PeriodicAudit,
    cluster: Arc<dyn Cluster>,
    engines: impl Fn() -> Vec<AuditedEngine> + Send,
) {
    let mut installed = None;
    loop {
        match periodic.store.installed().await {
            Ok(true) => {
                installed = Some(true);
                let engines = engines();
                match audit_and_report(
                    cluster.as_ref(),
                    &engines,
                    &periodic.settings,
                    &periodic.store,
                )
                .await
                {
                    Ok(reported) => log_reported(&reported),
                    Err(e) => {
                        tracing::warn!(error = %chain(&e), "audit: the reports could not be written")
                    }
                }
            }
            Ok(false) => {
                if installed != Some(false) {
                    tracing::info!(
                        "the PolicyReport and ClusterPolicyReport CRDs ({}) are not installed: audits do not run",
                        report::API_VERSION
                    );
                }
                installed = Some(false);
            }
            Err(e) => tracing::warn!(error = %chain(&e), "audit: skipped"),
        }
        tokio::time::sleep(periodic.interval).await;
    }
}

fn log_reported(reported: &Reported) {
    let (audit, synced) = (&reported.audit, &reported.synced);
    for skipped in &audit.skipped {
        tracing::debug!(hook = %skipped.hook, binding = %skipped.binding, reason = %skipped.reason, "audit: not audited");
    }
    for failed in &synced.failed {
        tracing::warn!(error = %chain(failed), "audit: a report was not written");
    }
    tracing::info!(
        reviews = audit.reviews,
        pass = audit.count(Verdict::Pass),
        fail = audit.count(Verdict::Fail),
        warn = audit.count(Verdict::Warn),
        error = audit.count(Verdict::Error),
        skip = audit.count(Verdict::Skip),
        written = synced.written,
        unchanged = synced.unchanged,
        deleted = synced.deleted,
        failed = synced.failed.len(),
        complete = audit.complete(),
        duration_ms = audit.elapsed.as_secs_f64() * 1000.0,
        "audit done"
    );
}
