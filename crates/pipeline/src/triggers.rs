//! Trigger matching: Prometheus alerts, Kubernetes events and cron schedules into
//! Diagnoses.
//!
//! A [`Trigger`] is validated and compiled once into a [`CompiledTrigger`]: every
//! regular expression is compiled and the schedule parsed at load, never per alert.
//! The compiled trigger then answers pure questions with no I/O and no clock of its
//! own: does this alert match ([`CompiledTrigger::match_alert`]), does this event
//! ([`CompiledTrigger::match_event`]), is a scheduled run due
//! ([`CompiledTrigger::due`]). Each "yes" is a [`NewDiagnosis`] that the caller creates.
//!
//! Regular expressions match **unanchored**, like Go's `regexp.MatchString` that
//! KubeDiag used: `Disk` matches `NodeDiskPressure`. Anchor with `^…$` to match a whole
//! value. The syntax is the `regex` crate's, which accepts RE2's (KubeDiag's) syntax.
//!
//! Diagnosis names are deterministic: the same alert, the same event occurrence or the
//! same schedule slot always yields the same name, so a re-delivered alert or a
//! restarted controller gets `AlreadyExists` instead of creating a second Diagnosis.

mod alert;
mod alertmanager;
mod cron;
mod event;
mod new_diagnosis;
mod rate;

pub use self::cron::last_schedule_or_creation;
pub use alert::PrometheusAlert;
pub use alertmanager::{AlertPost, AlertPostError};
pub use event::{from_events_v1, last_occurrence};
pub use new_diagnosis::{NewDiagnosis, SOURCE_LABEL};
pub use rate::TokenBucket;

use alert::AlertMatcher;
use event::EventMatcher;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use operon_data::api::{DiagnosisRunOn, DiagnosisSpec, Problem, RateLimit, Trigger};
use operon_data::schedule::Schedule;
use regex::Regex;
use std::collections::BTreeMap;

/// Which kind of source a Trigger listens to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// `prometheusAlertTemplate`: alerts posted by Alertmanager.
    PrometheusAlert,
    /// `kubernetesEventTemplate`: core/v1 Events.
    KubernetesEvent,
    /// `cronTemplate`: a schedule.
    Cron,
}

impl SourceKind {
    /// The prefix of the names of the Diagnoses this kind creates (KubeDiag's prefixes).
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            Self::PrometheusAlert => "prometheus-alert",
            Self::KubernetesEvent => "kubernetes-event",
            Self::Cron => "cron",
        }
    }
}

/// A Trigger whose regular expressions and schedule are compiled, ready to match.
#[derive(Debug, Clone)]
pub struct CompiledTrigger {
    /// The Trigger's name: it names and labels every Diagnosis it creates.
    name: String,
    /// Copied into every Diagnosis.
    operation_set: String,
    /// The node of a Diagnosis whose source names none.
    node_name: Option<String>,
    /// The base parameters; alert labels may be injected on top.
    parameters: BTreeMap<String, String>,
    /// The ServiceAccount the created Diagnoses name.
    service_account_name: Option<String>,
    /// Where the created Diagnoses run.
    run_on: Option<DiagnosisRunOn>,
    /// Exactly one source, as validated.
    source: Source,
    /// `spec.rateLimit`, or the default.
    rate_limit: RateLimit,
}

#[derive(Debug, Clone)]
enum Source {
    PrometheusAlert(AlertMatcher),
    KubernetesEvent(EventMatcher),
    Cron(Schedule),
}

impl CompiledTrigger {
    /// Validates `trigger` and compiles its source, reporting every problem at once.
    ///
    /// The checks: a name; a non-empty `operationSet`; exactly one of
    /// `prometheusAlertTemplate`, `kubernetesEventTemplate`, `cronTemplate`; every
    /// regular expression compiles; the schedule parses (see [`Self::next_fire_after`]).
    pub fn new(trigger: &Trigger) -> Result<Self, Vec<Problem>> {
        let mut problems = Problems::new(trigger.object_ref());
        let name = trigger.metadata.name.clone().unwrap_or_default();
        if name.is_empty() {
            problems.push("metadata.name", "a Trigger needs a name");
        }
        let spec = &trigger.spec;
        if spec.operation_set.trim().is_empty() {
            problems.push("spec.operationSet", "must name an OperationSet");
        }

        let templates = &spec.source_template;
        const BASE: &str = "spec.sourceTemplate";
        // Every template that is set is compiled, even when more than one is, so that
        // a user fixing "more than one source" does not then discover the next problem.
        let mut sources = Vec::new();
        if let Some(template) = &templates.prometheus_alert_template {
            let field = format!("{BASE}.prometheusAlertTemplate");
            sources.push((
                "prometheusAlertTemplate",
                AlertMatcher::compile(template, &field, &mut problems).map(Source::PrometheusAlert),
            ));
        }
        if let Some(template) = &templates.kubernetes_event_template {
            let field = format!("{BASE}.kubernetesEventTemplate");
            sources.push((
                "kubernetesEventTemplate",
                EventMatcher::compile(template, &field, &mut problems).map(Source::KubernetesEvent),
            ));
        }
        if let Some(template) = &templates.cron_template {
            let field = format!("{BASE}.cronTemplate.schedule");
            let schedule = Schedule::parse(&template.schedule)
                .map_err(|error| problems.push(&field, error.to_string()))
                .ok();
            sources.push(("cronTemplate", schedule.map(Source::Cron)));
        }
        let rate_limit = spec.rate_limit.unwrap_or_default();
        if spec.rate_limit.is_some() {
            check_rate_limit(&rate_limit, &mut problems);
        }
        if sources.len() != 1 {
            let found = if sources.is_empty() {
                "none is set".to_owned()
            } else {
                let names: Vec<&str> = sources.iter().map(|(name, _)| *name).collect();
                format!("found {}", names.join(", "))
            };
            problems.push(
                BASE,
                format!(
                    "set exactly one of prometheusAlertTemplate, kubernetesEventTemplate, \
                     cronTemplate ({found})"
                ),
            );
        }

        match (problems.into_result(), sources.pop()) {
            (Ok(()), Some((_, Some(source)))) => Ok(Self {
                name,
                operation_set: spec.operation_set.clone(),
                node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
                parameters: spec.parameters.clone(),
                service_account_name: spec.service_account_name.clone().filter(|a| !a.is_empty()),
                run_on: spec.run_on,
                source,
                rate_limit,
            }),
            (Err(problems), _) => Err(problems),
            // A source that failed to compile always recorded a problem.
            (Ok(()), _) => Err(vec![Problem::new(
                trigger.object_ref(),
                BASE,
                "the source could not be compiled",
            )]),
        }
    }

    /// The Trigger's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many Diagnoses this Trigger may create, and over how long.
    pub fn rate_limit(&self) -> RateLimit {
        self.rate_limit
    }

    /// The kind of source this Trigger listens to.
    pub fn kind(&self) -> SourceKind {
        match self.source {
            Source::PrometheusAlert(_) => SourceKind::PrometheusAlert,
            Source::KubernetesEvent(_) => SourceKind::KubernetesEvent,
            Source::Cron(_) => SourceKind::Cron,
        }
    }

    /// The Diagnosis to create for `alert`, when this is an alert Trigger and the alert
    /// matches every regular expression.
    ///
    /// This does not look at the clock: callers skip resolved alerts themselves (see
    /// [`PrometheusAlert::is_resolved_at`]), as KubeDiag did.
    pub fn match_alert(&self, alert: &PrometheusAlert) -> Option<NewDiagnosis> {
        let Source::PrometheusAlert(matcher) = &self.source else {
            return None;
        };
        if !matcher.matches(alert) {
            return None;
        }
        let mut parameters = self.parameters.clone();
        parameters.extend(matcher.injected_parameters(alert));
        let spec = DiagnosisSpec {
            operation_set: self.operation_set.clone(),
            node_name: matcher.node_name(alert).or_else(|| self.node_name.clone()),
            pod_reference: matcher.pod_reference(alert),
            parameters,
            service_account_name: self.service_account_name.clone(),
            run_on: self.run_on,
            dry_run: false,
            ..Default::default()
        };
        let hash = new_diagnosis::short_hash(
            &self.name,
            SourceKind::PrometheusAlert,
            &alert::identity(alert),
        );
        Some(NewDiagnosis::build(
            &self.name,
            SourceKind::PrometheusAlert,
            &hash,
            spec,
            alert::cause(alert),
        ))
    }

    /// The Diagnosis to create for `event`, when this is an event Trigger and the event
    /// matches every regular expression.
    ///
    /// Every occurrence of an event (each increment of its `count`) is a new match.
    pub fn match_event(&self, event: &Event) -> Option<NewDiagnosis> {
        let Source::KubernetesEvent(matcher) = &self.source else {
            return None;
        };
        if !matcher.matches(event) {
            return None;
        }
        let subject = event::subject(event);
        let spec = DiagnosisSpec {
            operation_set: self.operation_set.clone(),
            node_name: subject.node_name.or_else(|| self.node_name.clone()),
            pod_reference: subject.pod_reference,
            parameters: self.parameters.clone(),
            service_account_name: self.service_account_name.clone(),
            run_on: self.run_on,
            dry_run: false,
            ..Default::default()
        };
        let hash = new_diagnosis::short_hash(
            &self.name,
            SourceKind::KubernetesEvent,
            &event::identity(event),
        );
        Some(NewDiagnosis::build(
            &self.name,
            SourceKind::KubernetesEvent,
            &hash,
            spec,
            event::cause(event),
        ))
    }

    /// The first schedule slot strictly after `after`, when this is a cron Trigger.
    ///
    /// The schedule means what robfig/cron, KubeDiag's cron library, makes of it (see
    /// [`operon_data::schedule`]): five fields (minute precision) or six (seconds first),
    /// descriptors and `@every`, in UTC unless a `TZ=`/`CRON_TZ=` prefix names a zone.
    pub fn next_fire_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.source {
            Source::Cron(schedule) => schedule.next_after(after),
            _ => None,
        }
    }

    /// The slot to fire now, if any: the latest slot at or before `now` that is after
    /// `last`.
    ///
    /// `last` is when the Trigger last fired (its `status.lastScheduleTime`, falling back
    /// to its creation time: [`last_schedule_or_creation`]); with no `last` at all the
    /// latest slot fires. A controller that was down over several slots fires once, for
    /// the latest one, and then records that slot as `lastScheduleTime`. An `@every`
    /// Trigger's slots are `last` plus whole periods (see
    /// [`Schedule::latest_due`](operon_data::schedule::Schedule::latest_due)).
    pub fn due(&self, last: Option<Timestamp>, now: Timestamp) -> Option<Timestamp> {
        let Source::Cron(schedule) = &self.source else {
            return None;
        };
        schedule.latest_due(last, now)
    }

    /// The Diagnosis for schedule slot `slot` (as returned by [`Self::due`]), when this
    /// is a cron Trigger and the slot is not before 1970 (a negative second count would
    /// not make a valid name).
    pub fn scheduled_diagnosis(&self, slot: Timestamp) -> Option<NewDiagnosis> {
        let Source::Cron(schedule) = &self.source else {
            return None;
        };
        let seconds = u64::try_from(slot.as_second()).ok()?;
        let spec = DiagnosisSpec {
            operation_set: self.operation_set.clone(),
            node_name: self.node_name.clone(),
            pod_reference: None,
            parameters: self.parameters.clone(),
            service_account_name: self.service_account_name.clone(),
            run_on: self.run_on,
            dry_run: false,
            ..Default::default()
        };
        Some(NewDiagnosis::build(
            &self.name,
            SourceKind::Cron,
            &seconds.to_string(),
            spec,
            format!("schedule {:?} slot {slot}", schedule.as_str()),
        ))
    }
}

/// Records what is wrong with `spec.rateLimit`.
fn check_rate_limit(limit: &RateLimit, problems: &mut Problems) {
    if limit.diagnoses == 0 {
        problems.push(
            "spec.rateLimit.diagnoses",
            "must be at least 1 (a Trigger that should create nothing is deleted instead)",
        );
    }
    if limit.per_seconds == 0 || limit.per_seconds > RateLimit::MAX_SECONDS {
        problems.push(
            "spec.rateLimit.perSeconds",
            format!(
                "must be between 1 and {} (a day), not {}",
                RateLimit::MAX_SECONDS,
                limit.per_seconds
            ),
        );
    }
}

/// Every problem with `trigger`; empty when [`CompiledTrigger::new`] accepts it.
pub fn validate(trigger: &Trigger) -> Vec<Problem> {
    CompiledTrigger::new(trigger).err().unwrap_or_default()
}

/// Compiles a user's regular expression. `Regex::is_match` finds a match anywhere in the
/// text, which is Go's `regexp.MatchString` semantics that KubeDiag's Triggers rely on.
fn compile_regex(pattern: &str) -> Result<Regex, regex::Error> {
    Regex::new(pattern)
}

/// `true` when `regex` is unset or matches `text` somewhere.
fn matches_optional(regex: Option<&Regex>, text: &str) -> bool {
    regex.is_none_or(|regex| regex.is_match(text))
}

/// The problems found while compiling one Trigger.
struct Problems {
    object: String,
    list: Vec<Problem>,
}

impl Problems {
    fn new(object: String) -> Self {
        Self {
            object,
            list: Vec::new(),
        }
    }

    fn push(&mut self, field: impl Into<String>, reason: impl Into<String>) {
        self.list
            .push(Problem::new(self.object.clone(), field, reason));
    }

    fn len(&self) -> usize {
        self.list.len()
    }

    /// Compiles `pattern`, recording a problem at `field` when it does not compile.
    fn regex(&mut self, field: &str, pattern: &str) -> Option<Regex> {
        match compile_regex(pattern) {
            Ok(regex) => Some(regex),
            Err(error) => {
                self.push(field, format!("invalid regular expression: {error}"));
                None
            }
        }
    }

    fn into_result(self) -> Result<(), Vec<Problem>> {
        if self.list.is_empty() {
            Ok(())
        } else {
            Err(self.list)
        }
    }
}

/// `parent.key`, or `parent["key"]` when the key is not a plain identifier (label and
/// annotation names may contain dots or slashes), so the path stays unambiguous.
fn map_field(parent: &str, key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!("{parent}.{key}")
    } else {
        format!("{parent}[{}]", serde_json::Value::from(key))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A Trigger from YAML; panics on bad YAML, which is a bug in the test.
    pub(crate) fn trigger(yaml: &str) -> Trigger {
        yaml_serde::from_str(yaml).expect("test Trigger YAML")
    }

    fn problems(yaml: &str) -> Vec<Problem> {
        CompiledTrigger::new(&trigger(yaml)).expect_err("the Trigger should be rejected")
    }

    fn fields(problems: &[Problem]) -> Vec<&str> {
        problems.iter().map(|p| p.field.as_str()).collect()
    }

    #[test]
    fn accepts_each_single_source() {
        for source in [
            "prometheusAlertTemplate: {regexp: {alertName: Disk}}",
            "prometheusAlertTemplate: {}",
            "kubernetesEventTemplate: {regexp: {reason: BackOff}}",
            "cronTemplate: {schedule: '*/5 * * * *'}",
        ] {
            let yaml = format!(
                "apiVersion: operon.dev/v1alpha1\nkind: Trigger\nmetadata: {{name: t}}\n\
                 spec:\n  operationSet: s\n  sourceTemplate:\n    {source}\n"
            );
            let compiled = CompiledTrigger::new(&trigger(&yaml));
            assert!(compiled.is_ok(), "{source}: {compiled:?}");
        }
    }

    #[test]
    fn kind_reports_the_source() {
        let t = trigger(
            "metadata: {name: t}\nspec: {operationSet: s, sourceTemplate: {cronTemplate: {schedule: '@daily'}}}",
        );
        let compiled = CompiledTrigger::new(&t).expect("valid");
        assert_eq!(compiled.kind(), SourceKind::Cron);
        assert_eq!(compiled.name(), "t");
    }

    #[test]
    fn rejects_no_source() {
        let problems = problems("metadata: {name: t}\nspec: {operationSet: s, sourceTemplate: {}}");
        assert_eq!(fields(&problems), ["spec.sourceTemplate"]);
        assert!(problems[0].reason.contains("none is set"), "{problems:?}");
        assert_eq!(problems[0].object, "Trigger/t");
    }

    #[test]
    fn rejects_two_sources_naming_both() {
        let problems = problems(
            "metadata: {name: t}\nspec:\n  operationSet: s\n  sourceTemplate:\n    \
             kubernetesEventTemplate: {}\n    cronTemplate: {schedule: '@hourly'}\n",
        );
        assert_eq!(fields(&problems), ["spec.sourceTemplate"]);
        assert!(
            problems[0]
                .reason
                .contains("found kubernetesEventTemplate, cronTemplate"),
            "{problems:?}"
        );
    }

    #[test]
    fn rejects_empty_operation_set_and_missing_name() {
        let problems = problems(
            "metadata: {}\nspec: {operationSet: ' ', sourceTemplate: {cronTemplate: {schedule: '@daily'}}}",
        );
        assert_eq!(fields(&problems), ["metadata.name", "spec.operationSet"]);
        assert_eq!(problems[0].object, "Trigger/<unnamed>");
    }

    #[test]
    fn reports_every_bad_regexp_with_its_path() {
        let problems = problems(
            r#"
metadata: {name: t}
spec:
  operationSet: s
  sourceTemplate:
    prometheusAlertTemplate:
      regexp:
        alertName: "("
        labels: {severity: "[", ok: "fine", "app.kubernetes.io/name": "*"}
        annotations: {summary: "a{2"}
        startsAt: "(?P<>x)"
        endsAt: "\\"
        generatorURL: "["
"#,
        );
        let base = "spec.sourceTemplate.prometheusAlertTemplate.regexp";
        let expected = [
            format!("{base}.alertName"),
            format!(r#"{base}.labels["app.kubernetes.io/name"]"#),
            format!("{base}.labels.severity"),
            format!("{base}.annotations.summary"),
            format!("{base}.startsAt"),
            format!("{base}.endsAt"),
            format!("{base}.generatorURL"),
        ];
        assert_eq!(fields(&problems), expected);
        for problem in &problems {
            assert!(
                problem.reason.starts_with("invalid regular expression: "),
                "{problem}"
            );
        }
    }

    #[test]
    fn reports_bad_event_regexps_with_their_paths() {
        let problems = problems(
            r#"
metadata: {name: t}
spec:
  operationSet: s
  sourceTemplate:
    kubernetesEventTemplate:
      regexp: {name: "(", namespace: "[", reason: ")", message: "x{", source: {component: "(", host: "["}}
"#,
        );
        let base = "spec.sourceTemplate.kubernetesEventTemplate.regexp";
        assert_eq!(
            fields(&problems),
            [
                format!("{base}.name"),
                format!("{base}.namespace"),
                format!("{base}.reason"),
                format!("{base}.message"),
                format!("{base}.source.component"),
                format!("{base}.source.host"),
            ]
        );
    }

    #[test]
    fn reports_all_problems_at_once() {
        let problems = problems(
            r#"
metadata: {name: t}
spec:
  operationSet: ""
  sourceTemplate:
    prometheusAlertTemplate: {regexp: {alertName: "("}}
    cronTemplate: {schedule: "* * *"}
"#,
        );
        assert_eq!(
            fields(&problems),
            [
                "spec.operationSet",
                "spec.sourceTemplate.prometheusAlertTemplate.regexp.alertName",
                "spec.sourceTemplate.cronTemplate.schedule",
                "spec.sourceTemplate",
            ]
        );
    }

    #[test]
    fn rate_limit_defaults_and_is_checked_field_by_field() {
        let t = CompiledTrigger::new(&trigger(
            "metadata: {name: t}\nspec: {operationSet: s, sourceTemplate: {kubernetesEventTemplate: {}}}",
        ))
        .expect("valid");
        assert_eq!(t.rate_limit(), RateLimit::DEFAULT);
        let t = CompiledTrigger::new(&trigger(
            "metadata: {name: t}\nspec: {operationSet: s, rateLimit: {diagnoses: 3}, sourceTemplate: {kubernetesEventTemplate: {}}}",
        ))
        .expect("valid");
        assert_eq!(
            t.rate_limit(),
            RateLimit {
                diagnoses: 3,
                per_seconds: 60
            }
        );
        let problems = problems(
            "metadata: {name: t}\nspec: {operationSet: s, rateLimit: {diagnoses: 0, perSeconds: 90000}, sourceTemplate: {kubernetesEventTemplate: {}}}",
        );
        assert_eq!(
            fields(&problems),
            ["spec.rateLimit.diagnoses", "spec.rateLimit.perSeconds"]
        );
        assert!(problems[1].reason.contains("not 90000"), "{problems:?}");
        let zero_window = self::tests::problems(
            "metadata: {name: t}\nspec: {operationSet: s, rateLimit: {perSeconds: 0}, sourceTemplate: {kubernetesEventTemplate: {}}}",
        );
        assert_eq!(fields(&zero_window), ["spec.rateLimit.perSeconds"]);
    }

    #[test]
    fn validate_is_empty_for_a_valid_trigger() {
        let t = trigger(
            "metadata: {name: t}\nspec: {operationSet: s, sourceTemplate: {kubernetesEventTemplate: {}}}",
        );
        assert!(validate(&t).is_empty());
    }

    #[test]
    fn sources_only_answer_their_own_kind() {
        let cron = CompiledTrigger::new(&trigger(
            "metadata: {name: t}\nspec: {operationSet: s, sourceTemplate: {cronTemplate: {schedule: '@daily'}}}",
        ))
        .expect("valid");
        assert!(cron.match_alert(&PrometheusAlert::default()).is_none());
        assert!(cron.match_event(&Event::default()).is_none());
        let events = CompiledTrigger::new(&trigger(
            "metadata: {name: t}\nspec: {operationSet: s, sourceTemplate: {kubernetesEventTemplate: {}}}",
        ))
        .expect("valid");
        assert!(events.next_fire_after(Timestamp::UNIX_EPOCH).is_none());
        assert!(events.due(None, Timestamp::UNIX_EPOCH).is_none());
        assert!(events.scheduled_diagnosis(Timestamp::UNIX_EPOCH).is_none());
        assert!(events.match_alert(&PrometheusAlert::default()).is_none());
    }

    #[test]
    fn regexps_are_unanchored_like_go() {
        let regex = compile_regex("Disk").expect("valid");
        assert!(regex.is_match("NodeDiskPressure"));
        let anchored = compile_regex("^Disk$").expect("valid");
        assert!(!anchored.is_match("NodeDiskPressure"));
    }
}
