//! Hook configuration: the checks that turn a hook's [`HookConfig`] into the
//! [`ValidConfig`] the engine runs, and the reader of shell-operator's configuration
//! files (`configVersion: v1` and the legacy v0) into a [`HookConfig`].
//!
//! The two steps are separate on purpose. A wasm hook hands over a typed
//! [`HookConfig`]; a script hook prints shell-operator YAML or JSON, which
//! [`parse_shell_operator`] reads checking only its *shape* (field names and types).
//! Every rule about *meaning* lives in [`validate`], so both kinds of hooks are held
//! to the same rules. Both report every problem they find at once, each naming the
//! hook, the binding and the field in shell-operator's spelling
//! (`kubernetes[2] "pods": labelSelector.matchExpressions[0].values: ...`), so a hook
//! author fixes a configuration in one round instead of one error per restart.
//!
//! [`ValidConfig`] is what the engine reads: defaults applied, group members added to
//! `includeSnapshotsFrom`, crontabs parsed into [`Crontab`]s, jq filters compiled,
//! and every binding given a stable [`BindingId`].

use crate::jq;
use crate::sandbox::bindings::types::{
    ConversionBinding as WitConversionBinding, ConversionRule, FieldOperator, FieldRequirement,
    HookConfig, HookSettings, KubernetesBinding as WitKubernetesBinding, LabelOperator,
    LabelRequirement, LabelSelector, NamespaceSelector, ScheduleBinding as WitScheduleBinding,
    ValidatingBinding as WitValidatingBinding, WatchEvent, WebhookRule,
};
use ::cron::{Schedule, TimeUnitSpec as _};
use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::Offset;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::ops::Bound::{Excluded, Unbounded};
use std::str::FromStr as _;
use std::time::Duration;

/// The queue a binding without `queue` uses.
pub const MAIN_QUEUE: &str = "main";

/// A hook's run budget when `settings` does not give one. shell-operator has no
/// timeout at all, so a stuck hook blocks its queue forever; a minute is far above what
/// a hook should take and still frees the queue.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the API server waits for a validating hook when the binding does not say
/// (the Kubernetes and shell-operator default).
pub const DEFAULT_WEBHOOK_TIMEOUT_SECONDS: u32 = 10;

/// One thing wrong with a hook's configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigProblem {
    /// The hook whose configuration is wrong.
    pub hook: String,
    /// The binding, e.g. `kubernetes[2] "pods"`; `None` for hook-wide fields
    /// (`settings`, `onStartup`) and for the document as a whole.
    pub binding: Option<String>,
    /// The field in shell-operator's spelling, e.g. `labelSelector.matchLabels`; empty
    /// when the problem is about the whole binding or document.
    pub field: String,
    /// What is wrong and, where it helps, what to write instead.
    pub reason: String,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hook {:?}: ", self.hook)?;
        if let Some(binding) = &self.binding {
            write!(f, "{binding}: ")?;
        }
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.reason)
    }
}

/// Problems found so far, all reported together at the end.
struct Problems<'h> {
    hook: &'h str,
    list: Vec<ConfigProblem>,
}

impl<'h> Problems<'h> {
    fn new(hook: &'h str) -> Self {
        Self {
            hook,
            list: Vec::new(),
        }
    }

    fn push(&mut self, binding: Option<&str>, field: impl Into<String>, reason: impl Into<String>) {
        self.list.push(ConfigProblem {
            hook: self.hook.to_owned(),
            binding: binding.map(str::to_owned),
            field: field.into(),
            reason: reason.into(),
        });
    }

    fn finish<T>(self, value: T) -> Result<T, Vec<ConfigProblem>> {
        if self.list.is_empty() {
            Ok(value)
        } else {
            Err(self.list)
        }
    }
}

/// What [`validate`] calls to check a kubernetes binding's `apiVersion` (when given)
/// and `kind`: `Ok` when the cluster knows them, otherwise why not.
pub type KindExists = dyn Fn(Option<&str>, &str) -> Result<(), String>;

/// A kind-checker that accepts every kind, for checking a configuration without a
/// cluster (`kind` is then only checked to be non-empty).
pub fn any_kind(_api_version: Option<&str>, _kind: &str) -> Result<(), String> {
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Binding identities
// ---------------------------------------------------------------------------------------

/// The sections of a configuration that hold indexed bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BindingKind {
    /// `schedule`.
    Schedule,
    /// `kubernetes`.
    Kubernetes,
    /// `kubernetesValidating`.
    Validating,
    /// `kubernetesCustomResourceConversion`.
    Conversion,
}

impl BindingKind {
    /// The section's name in shell-operator's configuration.
    pub fn section(self) -> &'static str {
        match self {
            Self::Schedule => "schedule",
            Self::Kubernetes => "kubernetes",
            Self::Validating => "kubernetesValidating",
            Self::Conversion => "kubernetesCustomResourceConversion",
        }
    }
}

/// A binding's stable identity: its section and its position there. Unlike the name,
/// which a hook may change, it is cheap to copy and hash, so the engine keys its
/// per-binding state (watches, snapshots, metrics handles) by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BindingId {
    /// The section.
    pub kind: BindingKind,
    /// The position in the section, from 0, as in the configuration.
    pub index: usize,
}

impl fmt::Display for BindingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.kind.section(), self.index)
    }
}

/// `kubernetes[2] "pods"`, or `kubernetes[2]` for a binding without a name.
fn location(kind: BindingKind, index: usize, name: &str) -> String {
    let id = BindingId { kind, index };
    if name.is_empty() {
        id.to_string()
    } else {
        format!("{id} {name:?}")
    }
}

// ---------------------------------------------------------------------------------------
// The validated configuration
// ---------------------------------------------------------------------------------------

/// A hook's configuration after [`validate`]: every option the hook gave, with defaults
/// applied, ready for the engine.
#[derive(Debug, Clone)]
pub struct ValidConfig {
    /// The hook's name, kept so the config can be reported on its own.
    pub hook: String,
    /// The `onStartup` order: hooks run at start in ascending order, then by name.
    /// `None` when the hook has no `onStartup` binding.
    pub on_startup: Option<i32>,
    /// `schedule` bindings, in configuration order.
    pub schedules: Vec<ScheduleBinding>,
    /// `kubernetes` bindings, in configuration order.
    pub kubernetes: Vec<KubernetesBinding>,
    /// `kubernetesValidating` bindings, in configuration order.
    pub validating: Vec<ValidatingBinding>,
    /// `kubernetesCustomResourceConversion` bindings, in configuration order.
    pub conversions: Vec<ConversionBinding>,
    /// Hook-wide settings.
    pub settings: Settings,
}

impl ValidConfig {
    /// The kubernetes binding called `name`; snapshots are looked up this way.
    pub fn kubernetes_binding(&self, name: &str) -> Option<&KubernetesBinding> {
        self.kubernetes.iter().find(|b| b.name == name)
    }

    /// The name of the binding `id`, if the hook has it.
    pub fn binding_name(&self, id: BindingId) -> Option<&str> {
        let index = id.index;
        match id.kind {
            BindingKind::Schedule => self.schedules.get(index).map(|b| b.name.as_str()),
            BindingKind::Kubernetes => self.kubernetes.get(index).map(|b| b.name.as_str()),
            BindingKind::Validating => self.validating.get(index).map(|b| b.name.as_str()),
            BindingKind::Conversion => self.conversions.get(index).map(|b| b.name.as_str()),
        }
    }
}

/// A validated `schedule` binding.
#[derive(Debug, Clone)]
pub struct ScheduleBinding {
    /// Stable identity (`schedule[i]`).
    pub id: BindingId,
    /// The name passed back in binding contexts.
    pub name: String,
    /// When the binding fires.
    pub crontab: Crontab,
    /// Whether a failed run is counted and dropped instead of retried.
    pub allow_failure: bool,
    /// The queue its runs go to (default [`MAIN_QUEUE`]).
    pub queue: String,
    /// The group the binding belongs to; its contexts are then `Group` contexts.
    pub group: Option<String>,
    /// The kubernetes bindings whose snapshots its contexts carry: the ones the hook
    /// named, then every kubernetes binding of its group, without repeats.
    pub include_snapshots_from: Vec<String>,
}

/// The watch events a kubernetes binding runs its hook on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventSet {
    /// `Added`.
    pub added: bool,
    /// `Modified`.
    pub modified: bool,
    /// `Deleted`.
    pub deleted: bool,
}

impl EventSet {
    /// Every event: what a binding without `executeHookOnEvent` runs on.
    pub const ALL: Self = Self {
        added: true,
        modified: true,
        deleted: true,
    };

    /// No event: a binding that only keeps a snapshot for others.
    pub const NONE: Self = Self {
        added: false,
        modified: false,
        deleted: false,
    };

    /// Whether `event` runs the hook.
    pub fn contains(self, event: WatchEvent) -> bool {
        match event {
            WatchEvent::Added => self.added,
            WatchEvent::Modified => self.modified,
            WatchEvent::Deleted => self.deleted,
        }
    }

    /// Whether no event runs the hook.
    pub fn is_empty(self) -> bool {
        self == Self::NONE
    }

    fn insert(&mut self, event: WatchEvent) {
        match event {
            WatchEvent::Added => self.added = true,
            WatchEvent::Modified => self.modified = true,
            WatchEvent::Deleted => self.deleted = true,
        }
    }
}

/// A validated `kubernetes` binding.
#[derive(Debug, Clone)]
pub struct KubernetesBinding {
    /// Stable identity (`kubernetes[i]`).
    pub id: BindingId,
    /// The name passed back in binding contexts and used by `includeSnapshotsFrom`.
    pub name: String,
    /// `apiVersion` of the objects; `None` picks the preferred version.
    pub api_version: Option<String>,
    /// The kind as the hook wrote it (case-insensitive; plurals and short names are
    /// accepted, the cluster resolves them).
    pub kind: String,
    /// The events that run the hook (default: all three).
    pub execute_hook_on_event: EventSet,
    /// Whether the hook runs once with every existing object at start (default true).
    pub execute_hook_on_synchronization: bool,
    /// Whether the hook's later bindings wait for this binding's Synchronization run
    /// (default true; `false` only on a named queue).
    pub wait_for_synchronization: bool,
    /// Whether contexts and snapshots carry the full objects or only filter results
    /// (default true).
    pub keep_full_objects_in_memory: bool,
    /// Only objects with one of these names; `None` for any name.
    pub name_selector: Option<Vec<String>>,
    /// Only objects whose labels match; `matchLabels` keys are unique and sorted.
    pub label_selector: Option<LabelSelector>,
    /// Only objects whose fields match (all requirements hold); empty for any.
    pub field_selector: Vec<FieldRequirement>,
    /// Which namespaces to watch; `None` for every namespace.
    pub namespace: Option<NamespaceSelector>,
    /// The jq filter applied to every object, compiled once here.
    pub jq_filter: Option<jq::Filter>,
    /// Whether a failed run is counted and dropped instead of retried.
    pub allow_failure: bool,
    /// The queue its event runs go to (default [`MAIN_QUEUE`]); Synchronization runs
    /// always go to the main queue, as in shell-operator.
    pub queue: String,
    /// The group the binding belongs to.
    pub group: Option<String>,
    /// The kubernetes bindings whose snapshots its contexts carry (the ones named, then
    /// the group's, without repeats).
    pub include_snapshots_from: Vec<String>,
}

/// What the API server does when a validating hook fails or times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailurePolicy {
    /// Reject the request (the default).
    Fail,
    /// Admit the request.
    Ignore,
}

impl FailurePolicy {
    /// The name the ValidatingWebhookConfiguration uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fail => "Fail",
            Self::Ignore => "Ignore",
        }
    }
}

/// A validated `kubernetesValidating` binding.
#[derive(Debug, Clone)]
pub struct ValidatingBinding {
    /// Stable identity (`kubernetesValidating[i]`).
    pub id: BindingId,
    /// The webhook name (a fully qualified domain name) and binding context name.
    pub name: String,
    /// The requests the webhook receives; a rule without `scope` means `*`.
    pub rules: Vec<WebhookRule>,
    /// What the API server does when the hook fails (default [`FailurePolicy::Fail`]).
    pub failure_policy: FailurePolicy,
    /// The webhook's `objectSelector`.
    pub label_selector: Option<LabelSelector>,
    /// The webhook's `namespaceSelector` (from `namespace.labelSelector`).
    pub namespace_label_selector: Option<LabelSelector>,
    /// How long the API server waits, 1 to 30 seconds (default 10).
    pub timeout_seconds: u32,
    /// The group, used only to include its snapshots.
    pub group: Option<String>,
    /// The kubernetes bindings whose snapshots its contexts carry.
    pub include_snapshots_from: Vec<String>,
}

/// A validated `kubernetesCustomResourceConversion` binding.
#[derive(Debug, Clone)]
pub struct ConversionBinding {
    /// Stable identity (`kubernetesCustomResourceConversion[i]`).
    pub id: BindingId,
    /// The binding context name.
    pub name: String,
    /// The CustomResourceDefinition (`<plural>.<group>`) whose objects are converted.
    pub crd_name: String,
    /// The conversion steps this hook performs; the engine chains them.
    pub conversions: Vec<ConversionRule>,
    /// The group, used only to include its snapshots.
    pub group: Option<String>,
    /// The kubernetes bindings whose snapshots its contexts carry.
    pub include_snapshots_from: Vec<String>,
}

/// `settings.executionMinInterval` and `settings.executionBurst`: a token bucket
/// throttling the hook's runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutionRate {
    /// The time one token takes to come back.
    pub min_interval: Duration,
    /// How many runs may happen back to back (default 1).
    pub burst: u32,
}

/// Hook-wide settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Throttling of the hook's runs; `None` runs it as often as tasks arrive.
    pub execution_rate: Option<ExecutionRate>,
    /// The wall-clock budget of one run (default [`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
}

// ---------------------------------------------------------------------------------------
// Crontabs
// ---------------------------------------------------------------------------------------

/// A parsed `schedule` crontab, with the meaning shell-operator's cron library
/// (robfig/cron) gives it, in UTC.
///
/// - 5 fields (`minute hour day-of-month month day-of-week`) fire at second 0; 6 fields
///   put seconds first.
/// - Day of week counts 0 (or 7) as Sunday and accepts `sun`..`sat`. When both day
///   fields are restricted a day matching *either* fires, as in a crontab.
/// - `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`,
///   and `@every <duration>` (Go syntax, e.g. `1h30m`) are accepted.
///
/// The `cron` crate parses the fields; the search for the next slot is done here
/// because the crate numbers days of week from 1 = Sunday, requires both day fields
/// to match, and speaks `chrono`, which Operon does not use.
#[derive(Debug, Clone)]
pub struct Crontab {
    /// As the hook wrote it, for messages and the debug interface.
    source: String,
    rule: Rule,
}

#[derive(Debug, Clone)]
enum Rule {
    Fields(Box<CronFields>),
    /// `@every`: a fixed period from each fire, not aligned to the clock.
    Every(Duration),
}

#[derive(Debug, Clone)]
struct CronFields {
    /// Six fields for the crate, day of week always `*` (matched here).
    schedule: Schedule,
    /// Allowed days of week, bit 0 = Sunday.
    days_of_week: u8,
    /// Whether day of month was written as `*` or `?` (possibly with a step), which in
    /// robfig/cron makes the two day fields combine with "and" instead of "or".
    day_of_month_star: bool,
    /// The same for day of week.
    day_of_week_star: bool,
}

impl PartialEq for Crontab {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl fmt::Display for Crontab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl Crontab {
    /// Parses a crontab, or says why it is not one.
    pub fn parse(text: &str) -> Result<Self, String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err("a crontab is required, e.g. \"*/5 * * * *\"".to_owned());
        }
        if trimmed.starts_with("TZ=") || trimmed.starts_with("CRON_TZ=") {
            return Err("time zones are not supported: schedules run in UTC".to_owned());
        }
        let rule = if let Some(descriptor) = trimmed.strip_prefix('@') {
            match descriptor.split_once(char::is_whitespace) {
                Some((every, period)) if every.eq_ignore_ascii_case("every") => {
                    let period = parse_go_duration(period.trim())?;
                    if period < Duration::from_secs(1) {
                        return Err(format!("@every needs at least 1s, got {period:?}"));
                    }
                    Rule::Every(period)
                }
                _ => Rule::Fields(Box::new(CronFields::parse(expand_descriptor(trimmed)?)?)),
            }
        } else {
            Rule::Fields(Box::new(CronFields::parse(trimmed)?))
        };
        Ok(Self {
            source: text.to_owned(),
            rule,
        })
    }

    /// The crontab as the hook wrote it.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The first time strictly after `after` at which the binding fires, or `None` if
    /// it never fires again (e.g. `0 0 30 2 *`).
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.rule {
            Rule::Every(period) => {
                let whole = Timestamp::from_second(floor_second(after)).ok()?;
                let period = jiff::SignedDuration::try_from(*period).ok()?;
                whole.checked_add(period).ok()
            }
            Rule::Fields(fields) => fields.next_after(after),
        }
    }
}

/// The six-field expansion of a robfig/cron descriptor.
fn expand_descriptor(text: &str) -> Result<&'static str, String> {
    Ok(match text.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 0 1 1 *",
        "@monthly" => "0 0 0 1 * *",
        "@weekly" => "0 0 0 * * 0",
        "@daily" | "@midnight" => "0 0 0 * * *",
        "@hourly" => "0 0 * * * *",
        _ => {
            return Err(format!(
                "unknown descriptor {text:?}: use @yearly, @monthly, @weekly, @daily, \
                 @hourly, @every <duration>, or 5 or 6 fields"
            ));
        }
    })
}

/// Whole seconds of `t`, rounded towards the past.
fn floor_second(t: Timestamp) -> i64 {
    let seconds = t.as_second();
    if t.subsec_nanosecond() < 0 {
        seconds - 1
    } else {
        seconds
    }
}

impl CronFields {
    fn parse(text: &str) -> Result<Self, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let (second, minute, hour, day_of_month, month, day_of_week) = match *fields.as_slice() {
            [minute, hour, dom, month, dow] => ("0", minute, hour, dom, month, dow),
            [second, minute, hour, dom, month, dow] => (second, minute, hour, dom, month, dow),
            _ => {
                return Err(format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) or 6 \
                     (seconds first), found {}",
                    fields.len()
                ));
            }
        };
        let days_of_week = parse_days_of_week(day_of_week)
            .map_err(|reason| format!("day of week {day_of_week:?}: {reason}"))?;
        let schedule = Schedule::from_str(&format!(
            "{second} {minute} {hour} {day_of_month} {month} *"
        ))
        .map_err(|e| format!("invalid crontab {text:?}: {e}"))?;
        Ok(Self {
            schedule,
            days_of_week,
            day_of_month_star: is_star_field(day_of_month),
            day_of_week_star: is_star_field(day_of_week),
        })
    }

    fn day_matches(&self, date: Date) -> bool {
        let day = u32::try_from(date.day()).unwrap_or(0);
        let in_month = self.schedule.days_of_month().includes(day);
        let weekday = date.weekday().to_sunday_zero_offset();
        let in_week = self.days_of_week & (1 << weekday) != 0;
        if self.day_of_month_star || self.day_of_week_star {
            in_month && in_week
        } else {
            in_month || in_week
        }
    }

    fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let s = &self.schedule;
        let start = Timestamp::from_second(floor_second(after).checked_add(1)?).ok()?;
        let mut t = Offset::UTC.to_datetime(start);
        // Every rule has a slot within a leap-year cycle (29 February is the rarest day
        // a single day field can ask for), so a search past that finds nothing.
        let last_year = t.year().saturating_add(8);
        loop {
            if t.year() > last_year {
                return None;
            }
            let month = u32::try_from(t.month()).ok()?;
            let hour = u32::try_from(t.hour()).ok()?;
            let minute = u32::try_from(t.minute()).ok()?;
            let second = u32::try_from(t.second()).ok()?;
            t = if !s.months().includes(month) {
                match s.months().range((Excluded(month), Unbounded)).next() {
                    Some(next) => {
                        start_of_day(Date::new(t.year(), i8::try_from(next).ok()?, 1).ok()?)
                    }
                    None => start_of_day(Date::new(t.year().checked_add(1)?, 1, 1).ok()?),
                }
            } else if !self.day_matches(t.date()) {
                start_of_day(t.date().tomorrow().ok()?)
            } else if !s.hours().includes(hour) {
                match s.hours().range((Excluded(hour), Unbounded)).next() {
                    Some(next) => t.date().at(i8::try_from(next).ok()?, 0, 0, 0),
                    None => start_of_day(t.date().tomorrow().ok()?),
                }
            } else if !s.minutes().includes(minute) {
                match s.minutes().range((Excluded(minute), Unbounded)).next() {
                    Some(next) => t.date().at(t.hour(), i8::try_from(next).ok()?, 0, 0),
                    None => next_hour(t)?,
                }
            } else if !s.seconds().includes(second) {
                match s.seconds().range((Excluded(second), Unbounded)).next() {
                    Some(next) => t
                        .date()
                        .at(t.hour(), t.minute(), i8::try_from(next).ok()?, 0),
                    None => next_minute(t)?,
                }
            } else {
                return Offset::UTC.to_timestamp(t).ok();
            };
        }
    }
}

fn start_of_day(date: Date) -> DateTime {
    date.at(0, 0, 0, 0)
}

fn next_hour(t: DateTime) -> Option<DateTime> {
    if t.hour() < 23 {
        Some(t.date().at(t.hour() + 1, 0, 0, 0))
    } else {
        Some(start_of_day(t.date().tomorrow().ok()?))
    }
}

fn next_minute(t: DateTime) -> Option<DateTime> {
    if t.minute() < 59 {
        Some(t.date().at(t.hour(), t.minute() + 1, 0, 0))
    } else {
        next_hour(t)
    }
}

/// robfig/cron's "star bit": a field any of whose items starts with `*` or `?`.
fn is_star_field(field: &str) -> bool {
    field
        .split(',')
        .any(|item| item.starts_with('*') || item.starts_with('?'))
}

/// A day-of-week field as a bit set (bit 0 = Sunday). Items are separated by commas;
/// each is `*`/`?`, a day, or `day-day`, optionally with `/step`; a lone day before a
/// step (`1/2`) runs to Saturday, as in robfig/cron.
fn parse_days_of_week(field: &str) -> Result<u8, String> {
    let mut days = 0u8;
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step = step
                    .parse::<usize>()
                    .ok()
                    .filter(|&step| step >= 1)
                    .ok_or_else(|| format!("step {step:?} is not a positive number"))?;
                (range, Some(step))
            }
            None => (item, None),
        };
        let (first, last) = if range == "*" || range == "?" {
            (0, 6)
        } else if let Some((first, last)) = range.split_once('-') {
            (day_of_week(first)?, day_of_week(last)?)
        } else {
            let day = day_of_week(range)?;
            (day, if step.is_some() { 6 } else { day })
        };
        if first > last {
            return Err(format!("{item:?} runs backwards"));
        }
        for day in (first..=last).step_by(step.unwrap_or(1)) {
            days |= 1 << (day % 7);
        }
    }
    Ok(days)
}

/// One day of week: 0-7 (0 and 7 are Sunday) or a three-letter English name.
fn day_of_week(text: &str) -> Result<u8, String> {
    const NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    if let Ok(day) = text.parse::<u8>() {
        return if day <= 7 {
            Ok(day)
        } else {
            Err(format!("{day} is not 0-7 (0 and 7 are Sunday)"))
        };
    }
    let lower = text.to_ascii_lowercase();
    NAMES
        .iter()
        .position(|name| *name == lower)
        .and_then(|day| u8::try_from(day).ok())
        .ok_or_else(|| format!("{text:?} is not a day of the week (0-7 or sun..sat)"))
}

/// A Go duration (`time.ParseDuration`): a sequence of decimal numbers with units
/// `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`, e.g. `3s`, `1h30m`, `1.5h`; `0` alone is
/// zero. Negative durations are refused: nothing here can wait a negative time.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {text:?}: use e.g. \"3s\", \"500ms\", \"1h30m\"");
    let rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() || rest.starts_with('-') {
        return Err(invalid());
    }
    let mut total = 0f64;
    let mut rest = rest;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let (number, tail) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return Err(invalid());
        }
        let number: f64 = number.parse().map_err(|_| invalid())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let nanos_per_unit = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(invalid()),
        };
        total += number * nanos_per_unit;
        rest = tail;
    }
    // Go's own limit: about 292 years.
    if !total.is_finite() || total > i64::MAX as f64 {
        return Err(format!("duration {text:?} is too long"));
    }
    Ok(Duration::from_nanos(total as u64))
}

// ---------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------

/// Checks `config` of `hook` and returns the normalized configuration, or every
/// problem found.
///
/// `kind_exists` resolves a kubernetes binding's `apiVersion` and `kind` (e.g. through
/// [`crate::cluster::Cluster::resolve`]); [`any_kind`] skips that check.
pub fn validate(
    hook: &str,
    config: &HookConfig,
    kind_exists: &KindExists,
) -> Result<ValidConfig, Vec<ConfigProblem>> {
    let mut check = Checker::new(hook, config);
    check.names(config);

    let schedules: Vec<_> = (config.schedule.iter().enumerate())
        .filter_map(|(index, binding)| check.schedule(index, binding))
        .collect();
    let kubernetes: Vec<_> = (config.kubernetes.iter().enumerate())
        .filter_map(|(index, binding)| check.kubernetes(index, binding, kind_exists))
        .collect();
    let validating: Vec<_> = (config.kubernetes_validating.iter().enumerate())
        .filter_map(|(index, binding)| check.validating(index, binding))
        .collect();
    let conversions: Vec<_> = (config.kubernetes_conversion.iter().enumerate())
        .filter_map(|(index, binding)| check.conversion(index, binding))
        .collect();
    let settings = check.settings(config.settings.as_ref());

    let has_bindings = config.on_startup.is_some()
        || !config.schedule.is_empty()
        || !config.kubernetes.is_empty()
        || !config.kubernetes_validating.is_empty()
        || !config.kubernetes_conversion.is_empty();
    if !has_bindings {
        check.problems.push(
            None,
            "",
            "the hook has no bindings (onStartup, schedule, kubernetes, kubernetesValidating \
             or kubernetesCustomResourceConversion), so it would never run",
        );
    }

    check.problems.finish(ValidConfig {
        hook: hook.to_owned(),
        on_startup: config.on_startup,
        schedules,
        kubernetes,
        validating,
        conversions,
        settings,
    })
}

/// The state shared by the per-binding checks.
struct Checker<'a> {
    problems: Problems<'a>,
    /// Names of the kubernetes bindings, which `includeSnapshotsFrom` may name.
    kubernetes_names: HashSet<&'a str>,
    /// Per group, its kubernetes bindings in configuration order.
    group_members: HashMap<&'a str, Vec<&'a str>>,
}

impl<'a> Checker<'a> {
    fn new(hook: &'a str, config: &'a HookConfig) -> Self {
        let mut group_members: HashMap<&str, Vec<&str>> = HashMap::new();
        for binding in &config.kubernetes {
            if let Some(group) = &binding.group {
                group_members
                    .entry(group.as_str())
                    .or_default()
                    .push(binding.name.as_str());
            }
        }
        Self {
            problems: Problems::new(hook),
            kubernetes_names: config.kubernetes.iter().map(|b| b.name.as_str()).collect(),
            group_members,
        }
    }

    /// Names are non-empty and unique across every section: binding contexts and
    /// `includeSnapshotsFrom` refer to bindings by name alone.
    fn names(&mut self, config: &HookConfig) {
        let sections = [
            (
                BindingKind::Schedule,
                config.schedule.iter().map(|b| &b.name).collect::<Vec<_>>(),
            ),
            (
                BindingKind::Kubernetes,
                config.kubernetes.iter().map(|b| &b.name).collect(),
            ),
            (
                BindingKind::Validating,
                config
                    .kubernetes_validating
                    .iter()
                    .map(|b| &b.name)
                    .collect(),
            ),
            (
                BindingKind::Conversion,
                config
                    .kubernetes_conversion
                    .iter()
                    .map(|b| &b.name)
                    .collect(),
            ),
        ];
        let all = sections.iter().flat_map(|(kind, names)| {
            names
                .iter()
                .enumerate()
                .map(move |(index, name)| (*kind, index, *name))
        });
        let mut seen: HashMap<&str, BindingId> = HashMap::new();
        for (kind, index, name) in all {
            let at = location(kind, index, name);
            if name.trim().is_empty() {
                self.problems
                    .push(Some(&at), "name", "a binding needs a non-empty name");
            } else if let Some(first) = seen.get(name.as_str()) {
                self.problems.push(
                    Some(&at),
                    "name",
                    format!(
                        "{name:?} is already the name of {first}: binding names must be \
                         unique across all bindings of a hook"
                    ),
                );
            } else {
                seen.insert(name, BindingId { kind, index });
            }
        }
    }

    fn queue(&mut self, at: &str, queue: Option<&String>) -> String {
        let Some(queue) = queue else {
            return MAIN_QUEUE.to_owned();
        };
        let valid = !queue.is_empty()
            && queue
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c));
        if !valid {
            self.problems.push(
                Some(at),
                "queue",
                format!(
                    "{queue:?} is not a valid queue name: use lowercase letters, digits, \
                     '-', '_' and '.'"
                ),
            );
        }
        queue.clone()
    }

    fn group(&mut self, at: &str, group: Option<&String>) -> Option<String> {
        let group = group?;
        if group.trim().is_empty() {
            self.problems
                .push(Some(at), "group", "an empty group name: omit group instead");
        }
        Some(group.clone())
    }

    /// Checks `includeSnapshotsFrom` and returns it merged with the group's kubernetes
    /// bindings, the way shell-operator merges them: named first, then the group's,
    /// each once.
    fn snapshots(&mut self, at: &str, include: &[String], group: Option<&str>) -> Vec<String> {
        for name in include {
            if !self.kubernetes_names.contains(name.as_str()) {
                self.problems.push(
                    Some(at),
                    "includeSnapshotsFrom",
                    format!("{name:?} is not the name of a kubernetes binding of this hook"),
                );
            }
        }
        let members = group.and_then(|g| self.group_members.get(g));
        let mut merged: Vec<String> = Vec::with_capacity(include.len());
        for name in include
            .iter()
            .map(String::as_str)
            .chain(members.into_iter().flatten().copied())
        {
            if !merged.iter().any(|m| m == name) {
                merged.push(name.to_owned());
            }
        }
        merged
    }

    fn schedule(&mut self, index: usize, binding: &WitScheduleBinding) -> Option<ScheduleBinding> {
        let at = location(BindingKind::Schedule, index, &binding.name);
        let crontab = Crontab::parse(&binding.crontab)
            .map_err(|reason| self.problems.push(Some(&at), "crontab", reason))
            .ok();
        let queue = self.queue(&at, binding.queue.as_ref());
        let group = self.group(&at, binding.group.as_ref());
        let include_snapshots_from =
            self.snapshots(&at, &binding.include_snapshots_from, group.as_deref());
        Some(ScheduleBinding {
            id: BindingId {
                kind: BindingKind::Schedule,
                index,
            },
            name: binding.name.clone(),
            crontab: crontab?,
            allow_failure: binding.allow_failure,
            queue,
            group,
            include_snapshots_from,
        })
    }

    fn kubernetes(
        &mut self,
        index: usize,
        binding: &WitKubernetesBinding,
        kind_exists: &KindExists,
    ) -> Option<KubernetesBinding> {
        let at = location(BindingKind::Kubernetes, index, &binding.name);
        let p = &mut self.problems;

        let api_version_ok = match binding.api_version.as_deref() {
            Some(api_version) => check_api_version(api_version)
                .map_err(|reason| p.push(Some(&at), "apiVersion", reason))
                .is_ok(),
            None => true,
        };
        if binding.kind.trim().is_empty() {
            p.push(
                Some(&at),
                "kind",
                "kind is required, e.g. Pod or deployments",
            );
        } else if api_version_ok
            && let Err(reason) = kind_exists(binding.api_version.as_deref(), &binding.kind)
        {
            p.push(Some(&at), "kind", reason);
        }

        let execute_hook_on_event = match &binding.execute_hook_on_event {
            None => EventSet::ALL,
            Some(events) => {
                let mut set = EventSet::NONE;
                for event in events {
                    if set.contains(*event) {
                        p.push(
                            Some(&at),
                            "executeHookOnEvent",
                            format!("{} is listed twice", watch_event_name(*event)),
                        );
                    }
                    set.insert(*event);
                }
                set
            }
        };

        if let Some(names) = &binding.name_selector {
            if names.is_empty() {
                p.push(
                    Some(&at),
                    "nameSelector.matchNames",
                    "an empty list matches no object: omit nameSelector to watch every name",
                );
            }
            if names.iter().any(|n| n.trim().is_empty()) {
                p.push(
                    Some(&at),
                    "nameSelector.matchNames",
                    "names must not be empty",
                );
            }
        }

        let label_selector = binding
            .label_selector
            .as_ref()
            .map(|s| check_label_selector(p, &at, "labelSelector", s));

        let field_selector = binding.field_selector.clone().unwrap_or_default();
        for (i, requirement) in field_selector.iter().enumerate() {
            let field = &requirement.field;
            let path = format!("fieldSelector.matchExpressions[{i}].field");
            if field.trim().is_empty() {
                p.push(Some(&at), path, "a field is required, e.g. status.phase");
            } else if field.contains(|c: char| c.is_whitespace() || ",=!".contains(c)) {
                p.push(Some(&at), path, format!("{field:?} is not a field path"));
            } else if field == "metadata.name"
                && binding
                    .name_selector
                    .as_ref()
                    .is_some_and(|n| !n.is_empty())
            {
                p.push(
                    Some(&at),
                    path,
                    "metadata.name and nameSelector.matchNames are mutually exclusive",
                );
            }
        }

        let namespace = binding
            .namespace
            .as_ref()
            .map(|ns| check_namespace_selector(p, &at, ns, true));

        let jq_filter = match binding.jq_filter.as_deref() {
            None => None,
            Some(text) if text.trim().is_empty() => {
                p.push(
                    Some(&at),
                    "jqFilter",
                    "an empty filter: omit jqFilter instead",
                );
                None
            }
            Some(text) => jq::compile(text)
                .map_err(|e| p.push(Some(&at), "jqFilter", e.to_string()))
                .ok(),
        };

        let queue = self.queue(&at, binding.queue.as_ref());
        let wait_for_synchronization = binding.wait_for_synchronization.unwrap_or(true);
        if !wait_for_synchronization && queue == MAIN_QUEUE {
            self.problems.push(
                Some(&at),
                "waitForSynchronization",
                "false needs a named queue: Synchronization runs on the main queue, so a \
                 binding on the main queue always waits for it",
            );
        }
        let group = self.group(&at, binding.group.as_ref());
        let include_snapshots_from =
            self.snapshots(&at, &binding.include_snapshots_from, group.as_deref());

        Some(KubernetesBinding {
            id: BindingId {
                kind: BindingKind::Kubernetes,
                index,
            },
            name: binding.name.clone(),
            api_version: binding.api_version.clone(),
            kind: binding.kind.clone(),
            execute_hook_on_event,
            execute_hook_on_synchronization: binding
                .execute_hook_on_synchronization
                .unwrap_or(true),
            wait_for_synchronization,
            keep_full_objects_in_memory: binding.keep_full_objects_in_memory.unwrap_or(true),
            name_selector: binding.name_selector.clone(),
            label_selector,
            field_selector,
            namespace,
            jq_filter,
            allow_failure: binding.allow_failure,
            queue,
            group,
            include_snapshots_from,
        })
    }

    fn validating(
        &mut self,
        index: usize,
        binding: &WitValidatingBinding,
    ) -> Option<ValidatingBinding> {
        let at = location(BindingKind::Validating, index, &binding.name);
        let p = &mut self.problems;

        if !binding.name.trim().is_empty() && !is_webhook_name(&binding.name) {
            p.push(
                Some(&at),
                "name",
                "a validating binding's name is its webhook's name: a lowercase domain \
                 with at least three segments, e.g. policy.example.com",
            );
        }

        if binding.rules.is_empty() {
            p.push(Some(&at), "rules", "at least one rule is required");
        }
        for (i, rule) in binding.rules.iter().enumerate() {
            let field = |name: &str| format!("rules[{i}].{name}");
            const OPERATIONS: [&str; 5] = ["CREATE", "UPDATE", "DELETE", "CONNECT", "*"];
            if rule.operations.is_empty() {
                p.push(
                    Some(&at),
                    field("operations"),
                    "at least one operation is required",
                );
            }
            for operation in &rule.operations {
                if !OPERATIONS.contains(&operation.as_str()) {
                    p.push(
                        Some(&at),
                        field("operations"),
                        format!("{operation:?} is not CREATE, UPDATE, DELETE, CONNECT or *"),
                    );
                }
            }
            for (name, list) in [
                ("apiGroups", &rule.api_groups),
                ("apiVersions", &rule.api_versions),
                ("resources", &rule.resources),
            ] {
                if list.is_empty() {
                    p.push(
                        Some(&at),
                        field(name),
                        "at least one entry is required (\"*\" for all)",
                    );
                }
            }
            if let Some(scope) = &rule.scope
                && !["Cluster", "Namespaced", "*"].contains(&scope.as_str())
            {
                p.push(
                    Some(&at),
                    field("scope"),
                    format!("{scope:?} is not Cluster, Namespaced or *"),
                );
            }
        }

        let failure_policy = match binding.failure_policy.as_deref() {
            None | Some("Fail") => FailurePolicy::Fail,
            Some("Ignore") => FailurePolicy::Ignore,
            Some(other) => {
                p.push(
                    Some(&at),
                    "failurePolicy",
                    format!("{other:?} is not Fail or Ignore"),
                );
                FailurePolicy::Fail
            }
        };

        let timeout_seconds = binding
            .timeout_seconds
            .unwrap_or(DEFAULT_WEBHOOK_TIMEOUT_SECONDS);
        if !(1..=30).contains(&timeout_seconds) {
            p.push(
                Some(&at),
                "timeoutSeconds",
                format!("{timeout_seconds} is not between 1 and 30 seconds"),
            );
        }

        let label_selector = binding
            .label_selector
            .as_ref()
            .map(|s| check_label_selector(p, &at, "labelSelector", s));
        let namespace_label_selector = binding
            .namespace
            .as_ref()
            .and_then(|ns| check_namespace_selector(p, &at, ns, false).label_selector);

        let group = self.group(&at, binding.group.as_ref());
        let include_snapshots_from =
            self.snapshots(&at, &binding.include_snapshots_from, group.as_deref());

        Some(ValidatingBinding {
            id: BindingId {
                kind: BindingKind::Validating,
                index,
            },
            name: binding.name.clone(),
            rules: binding.rules.clone(),
            failure_policy,
            label_selector,
            namespace_label_selector,
            timeout_seconds,
            group,
            include_snapshots_from,
        })
    }

    fn conversion(
        &mut self,
        index: usize,
        binding: &WitConversionBinding,
    ) -> Option<ConversionBinding> {
        let at = location(BindingKind::Conversion, index, &binding.name);
        let p = &mut self.problems;

        if binding.crd_name.trim().is_empty() {
            p.push(
                Some(&at),
                "crdName",
                "the CustomResourceDefinition's name is required, e.g. crontabs.example.com",
            );
        } else if !is_dns_subdomain(&binding.crd_name) || !binding.crd_name.contains('.') {
            p.push(
                Some(&at),
                "crdName",
                format!(
                    "{:?} is not a CustomResourceDefinition name (<plural>.<group>)",
                    binding.crd_name
                ),
            );
        }
        if binding.conversions.is_empty() {
            p.push(
                Some(&at),
                "conversions",
                "at least one conversion is required",
            );
        }
        let mut seen: HashSet<(&str, &str)> = HashSet::new();
        for (i, rule) in binding.conversions.iter().enumerate() {
            let from = rule.from_version.as_str();
            let to = rule.to_version.as_str();
            if from.trim().is_empty() {
                p.push(
                    Some(&at),
                    format!("conversions[{i}].fromVersion"),
                    "required",
                );
            }
            if to.trim().is_empty() {
                p.push(Some(&at), format!("conversions[{i}].toVersion"), "required");
            }
            if !from.is_empty() && from == to {
                p.push(
                    Some(&at),
                    format!("conversions[{i}]"),
                    format!("fromVersion and toVersion are both {from:?}"),
                );
            } else if !seen.insert((from, to)) {
                p.push(
                    Some(&at),
                    format!("conversions[{i}]"),
                    format!("the conversion {from} -> {to} is listed twice"),
                );
            }
        }

        let group = self.group(&at, binding.group.as_ref());
        let include_snapshots_from =
            self.snapshots(&at, &binding.include_snapshots_from, group.as_deref());

        Some(ConversionBinding {
            id: BindingId {
                kind: BindingKind::Conversion,
                index,
            },
            name: binding.name.clone(),
            crd_name: binding.crd_name.clone(),
            conversions: binding.conversions.clone(),
            group,
            include_snapshots_from,
        })
    }

    fn settings(&mut self, settings: Option<&HookSettings>) -> Settings {
        let Some(settings) = settings else {
            return Settings {
                execution_rate: None,
                timeout: DEFAULT_TIMEOUT,
            };
        };
        let p = &mut self.problems;
        let field = "settings.executionMinInterval";
        let min_interval = settings
            .execution_min_interval_ms
            .map(Duration::from_millis);
        if min_interval == Some(Duration::ZERO) {
            p.push(
                None,
                field,
                "must be longer than 0: omit it to not throttle the hook",
            );
        }
        if settings.execution_burst == Some(0) {
            p.push(None, "settings.executionBurst", "must be at least 1");
        }
        if settings.execution_burst.is_some() && min_interval.is_none() {
            p.push(
                None,
                "settings.executionBurst",
                "has no effect without settings.executionMinInterval",
            );
        }
        if settings.timeout_ms == Some(0) {
            p.push(None, "settings.timeout", "must be longer than 0");
        }
        Settings {
            execution_rate: min_interval.map(|min_interval| ExecutionRate {
                min_interval,
                burst: settings.execution_burst.unwrap_or(1).max(1),
            }),
            timeout: settings
                .timeout_ms
                .map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        }
    }
}

fn watch_event_name(event: WatchEvent) -> &'static str {
    match event {
        WatchEvent::Added => "Added",
        WatchEvent::Modified => "Modified",
        WatchEvent::Deleted => "Deleted",
    }
}

/// `v1` or `group/version`.
fn check_api_version(api_version: &str) -> Result<(), String> {
    let valid = match api_version.split_once('/') {
        None => is_dns_label(api_version),
        Some((group, version)) => is_dns_subdomain(group) && is_dns_label(version),
    };
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{api_version:?} is not an apiVersion (e.g. v1 or apps/v1); omit it for the \
             preferred version"
        ))
    }
}

/// Checks a label selector and returns it with `matchLabels` keys made unique (the
/// last value wins, as for every string map of the contract) and sorted.
fn check_label_selector(
    p: &mut Problems<'_>,
    at: &str,
    field: &str,
    selector: &LabelSelector,
) -> LabelSelector {
    for (key, value) in &selector.match_labels {
        if let Err(reason) = check_label_key(key) {
            p.push(Some(at), format!("{field}.matchLabels"), reason);
        }
        if let Err(reason) = check_label_value(value) {
            p.push(Some(at), format!("{field}.matchLabels.{key}"), reason);
        }
    }
    for (i, requirement) in selector.match_expressions.iter().enumerate() {
        let path = format!("{field}.matchExpressions[{i}]");
        if let Err(reason) = check_label_key(&requirement.key) {
            p.push(Some(at), format!("{path}.key"), reason);
        }
        match requirement.operator {
            LabelOperator::In | LabelOperator::NotIn => {
                if requirement.values.is_empty() {
                    p.push(
                        Some(at),
                        format!("{path}.values"),
                        "In and NotIn need at least one value",
                    );
                }
                for value in &requirement.values {
                    if let Err(reason) = check_label_value(value) {
                        p.push(Some(at), format!("{path}.values"), reason);
                    }
                }
            }
            LabelOperator::Exists | LabelOperator::DoesNotExist => {
                if !requirement.values.is_empty() {
                    p.push(
                        Some(at),
                        format!("{path}.values"),
                        "Exists and DoesNotExist take no values",
                    );
                }
            }
        }
    }
    let match_labels: BTreeMap<&String, &String> =
        selector.match_labels.iter().map(|(k, v)| (k, v)).collect();
    LabelSelector {
        match_labels: match_labels
            .into_iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        match_expressions: selector.match_expressions.clone(),
    }
}

/// Checks a namespace selector; `names_allowed` is false for admission webhooks,
/// whose `namespaceSelector` can only match labels.
fn check_namespace_selector(
    p: &mut Problems<'_>,
    at: &str,
    selector: &NamespaceSelector,
    names_allowed: bool,
) -> NamespaceSelector {
    if selector.name_selector.is_none() && selector.label_selector.is_none() {
        p.push(
            Some(at),
            "namespace",
            "give nameSelector or labelSelector, or omit namespace to watch every namespace",
        );
    }
    if let Some(names) = &selector.name_selector {
        if !names_allowed {
            p.push(
                Some(at),
                "namespace.nameSelector",
                "a webhook selects namespaces by labels only: use namespace.labelSelector \
                 with the kubernetes.io/metadata.name label",
            );
        } else if names.is_empty() {
            p.push(
                Some(at),
                "namespace.nameSelector.matchNames",
                "an empty list matches no namespace: omit it to watch every namespace",
            );
        }
        for name in names {
            if !is_dns_label(name) {
                p.push(
                    Some(at),
                    "namespace.nameSelector.matchNames",
                    format!("{name:?} is not a namespace name"),
                );
            }
        }
    }
    NamespaceSelector {
        name_selector: selector.name_selector.clone(),
        label_selector: selector
            .label_selector
            .as_ref()
            .map(|s| check_label_selector(p, at, "namespace.labelSelector", s)),
    }
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name of at most 63
/// characters.
fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && !is_dns_subdomain(prefix)
    {
        return Err(format!(
            "label key {key:?}: the prefix must be a lowercase DNS subdomain"
        ));
    }
    if name.is_empty() || !is_label_name(name) {
        return Err(format!(
            "label key {key:?}: the name must be at most 63 letters, digits, '-', '_' or \
             '.', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// A label value: empty, or like a label key's name.
fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_name(value) {
        Ok(())
    } else {
        Err(format!(
            "label value {value:?}: at most 63 letters, digits, '-', '_' or '.', starting \
             and ending with a letter or digit"
        ))
    }
}

fn is_label_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
}

/// RFC 1123 label: lowercase letters, digits and '-', at most 63, alphanumeric ends.
fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters.
fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns_label)
}

/// Webhook names must be fully qualified: a subdomain with at least three segments.
fn is_webhook_name(text: &str) -> bool {
    is_dns_subdomain(text) && text.split('.').count() >= 3
}

// ---------------------------------------------------------------------------------------
// shell-operator configuration files
// ---------------------------------------------------------------------------------------

/// Reads a shell-operator hook configuration (what a hook prints for `--config`), YAML
/// or JSON, into the contract's [`HookConfig`].
///
/// `configVersion: v1` uses shell-operator's v1 field names. Without `configVersion`
/// the legacy v0 form is read (`onStartup`, `schedule{name, crontab, allowFailure}`,
/// `onKubernetesEvent{name, event: [add|update|delete], kind, selector, objectName,
/// namespaceSelector{matchNames, any}, jqFilter, allowFailure}`) and mapped to v1; such
/// hooks then receive v1 binding contexts.
///
/// Only the shape is checked here: every unknown field (a typo must not silently turn
/// an option off) and every value of the wrong type is a problem. What the values
/// mean is checked by [`validate`]. As in shell-operator, a `schedule` or `kubernetes`
/// binding without `name` is called `schedule` or `kubernetes` (`onKubernetesEvent`
/// in v0).
///
/// Operon's one extension is `settings.timeout` (a duration such as `30s`): the
/// run budget, which shell-operator does not have. Options shell-operator accepts but
/// ignores (`resynchronizationPeriod`) or that Operon does not offer
/// (`kubernetesMutating`, `matchConditions`, `sideEffects: NoneOnDryRun`) are problems
/// with a reason, so nothing is silently dropped.
pub fn parse_shell_operator(hook: &str, text: &str) -> Result<HookConfig, Vec<ConfigProblem>> {
    let mut r = Reader {
        problems: Problems::new(hook),
    };
    let document = match parse_document(text) {
        Ok(document) => document,
        Err(reason) => {
            r.problems.push(None, "", reason);
            return Err(r.problems.list);
        }
    };
    let config = match document.as_object().map(|map| map.get("configVersion")) {
        None => {
            r.problems.push(
                None,
                "",
                format!(
                    "the configuration must be a mapping, not {}",
                    type_name(&document)
                ),
            );
            None
        }
        Some(None) => r.config_v0(&document),
        Some(Some(Value::String(version))) if version == "v1" => r.config_v1(&document),
        Some(Some(other)) => {
            r.problems.push(
                None,
                "configVersion",
                format!("{other} is not a supported version: use v1 (or omit it for v0)"),
            );
            None
        }
    };
    match config {
        Some(config) => r.problems.finish(config),
        None => Err(r.problems.list),
    }
}

fn parse_document(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Err("the configuration is empty".to_owned());
    }
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))
    } else {
        yaml_serde::from_str(text).map_err(|e| format!("not valid YAML: {e}"))
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Where a value sits: the binding (once known) and the field path inside it.
#[derive(Debug, Clone, Default)]
struct At {
    binding: Option<String>,
    path: String,
}

impl At {
    fn binding(kind: BindingKind, index: usize, name: &str) -> Self {
        Self {
            binding: Some(location(kind, index, name)),
            path: String::new(),
        }
    }

    /// A top-level field outside any binding.
    fn top(field: &str) -> Self {
        Self {
            binding: None,
            path: field.to_owned(),
        }
    }

    fn key(&self, key: &str) -> Self {
        Self {
            binding: self.binding.clone(),
            path: if self.path.is_empty() {
                key.to_owned()
            } else {
                format!("{}.{key}", self.path)
            },
        }
    }

    fn item(&self, index: usize) -> Self {
        Self {
            binding: self.binding.clone(),
            path: format!("{}[{index}]", self.path),
        }
    }
}

/// Fields that exist elsewhere but are not accepted, with the reason to give.
type Refused<'a> = &'a [(&'a str, &'a str)];

const RESYNC_REFUSED: (&str, &str) = (
    "resynchronizationPeriod",
    "not supported: shell-operator accepts it but does nothing with it; remove it",
);

/// A reader of one configuration document that records every shape problem.
struct Reader<'h> {
    problems: Problems<'h>,
}

impl Reader<'_> {
    fn problem(&mut self, at: &At, reason: impl Into<String>) {
        self.problems
            .push(at.binding.as_deref(), at.path.clone(), reason);
    }

    /// `value` as a mapping whose keys are all in `allowed`.
    fn object<'v>(
        &mut self,
        at: &At,
        value: &'v Value,
        allowed: &[&str],
        refused: Refused<'_>,
    ) -> Option<&'v Map<String, Value>> {
        let Some(map) = value.as_object() else {
            self.problem(
                at,
                format!("expected a mapping, found {}", type_name(value)),
            );
            return None;
        };
        for key in map.keys() {
            if allowed.contains(&key.as_str()) {
                continue;
            }
            let reason = match refused.iter().find(|(name, _)| name == key) {
                Some((_, reason)) => (*reason).to_owned(),
                None => unknown_field_reason(key, allowed),
            };
            self.problem(&at.key(key), reason);
        }
        Some(map)
    }

    /// A field's value; `null` counts as absent, as it does for shell-operator.
    fn field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
        map.get(key).filter(|v| !v.is_null())
    }

    fn string(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<String> {
        match Self::field(map, key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.problem(
                    &at.key(key),
                    format!("expected a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn bool(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<bool> {
        match Self::field(map, key)? {
            Value::Bool(b) => Some(*b),
            // Quoted booleans are common in hand-written YAML; their meaning is clear.
            Value::String(s) if s == "true" => Some(true),
            Value::String(s) if s == "false" => Some(false),
            other => {
                self.problem(
                    &at.key(key),
                    format!("expected true or false, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn integer(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<i64> {
        let value = Self::field(map, key)?;
        let number = match value {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
            // shell-operator reads executionBurst as a string; accept both spellings.
            Value::String(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        };
        if number.is_none() {
            self.problem(&at.key(key), format!("expected an integer, found {value}"));
        }
        number
    }

    fn list<'v>(&mut self, at: &At, map: &'v Map<String, Value>, key: &str) -> Option<&'v [Value]> {
        match Self::field(map, key)? {
            Value::Array(items) => Some(items),
            other => {
                self.problem(
                    &at.key(key),
                    format!("expected a list, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn string_list(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<Vec<String>> {
        let items = self.list(at, map, key)?;
        let at = at.key(key);
        Some(self.strings(&at, items))
    }

    fn strings(&mut self, at: &At, items: &[Value]) -> Vec<String> {
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) => out.push(s.clone()),
                other => self.problem(
                    &at.item(i),
                    format!("expected a string, found {}", type_name(other)),
                ),
            }
        }
        out
    }

    fn duration_ms(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<u64> {
        let text = self.string(at, map, key)?;
        match parse_go_duration(text.trim()) {
            Ok(duration) => Some(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)),
            Err(reason) => {
                self.problem(&at.key(key), reason);
                None
            }
        }
    }

    /// The `name` of a binding item, read first so later problems can name it.
    fn binding_name(value: &Value, default: &str) -> String {
        match value.get("name") {
            Some(Value::String(name)) => name.clone(),
            _ => default.to_owned(),
        }
    }

    /// Each item of the list at `key`, with its index.
    fn items<'v>(
        &mut self,
        map: &'v Map<String, Value>,
        key: &str,
    ) -> impl Iterator<Item = (usize, &'v Value)> + use<'v> {
        self.list(&At::top(""), map, key)
            .unwrap_or_default()
            .iter()
            .enumerate()
    }

    fn on_startup(&mut self, map: &Map<String, Value>) -> Option<i32> {
        let at = At::top("");
        let order = self.integer(&at, map, "onStartup")?;
        match i32::try_from(order) {
            Ok(order) => Some(order),
            Err(_) => {
                self.problem(&at.key("onStartup"), format!("{order} is out of range"));
                None
            }
        }
    }

    // --- v1 ---------------------------------------------------------------------------

    fn config_v1(&mut self, document: &Value) -> Option<HookConfig> {
        const TOP: &[&str] = &[
            "configVersion",
            "onStartup",
            "schedule",
            "kubernetes",
            "kubernetesValidating",
            "kubernetesCustomResourceConversion",
            "settings",
        ];
        const REFUSED: Refused<'_> = &[
            (
                "kubernetesMutating",
                "mutating webhooks are not supported by Operon",
            ),
            (
                "onKubernetesEvent",
                "this is the v0 spelling: with configVersion v1 use kubernetes",
            ),
        ];
        let map = self.object(&At::top(""), document, TOP, REFUSED)?;
        let on_startup = self.on_startup(map);
        let schedule = (self.items(map, "schedule"))
            .filter_map(|(i, item)| self.schedule_v1(i, item))
            .collect();
        let kubernetes = (self.items(map, "kubernetes"))
            .filter_map(|(i, item)| self.kubernetes_v1(i, item))
            .collect();
        let kubernetes_validating = (self.items(map, "kubernetesValidating"))
            .filter_map(|(i, item)| self.validating_v1(i, item))
            .collect();
        let kubernetes_conversion = (self.items(map, "kubernetesCustomResourceConversion"))
            .filter_map(|(i, item)| self.conversion_v1(i, item))
            .collect();
        let settings = Self::field(map, "settings").and_then(|s| self.settings_v1(s));
        Some(HookConfig {
            on_startup,
            schedule,
            kubernetes,
            kubernetes_validating,
            kubernetes_conversion,
            settings,
        })
    }

    fn schedule_v1(&mut self, index: usize, value: &Value) -> Option<WitScheduleBinding> {
        const FIELDS: &[&str] = &[
            "name",
            "crontab",
            "allowFailure",
            "queue",
            "group",
            "includeSnapshotsFrom",
        ];
        let name = Self::binding_name(value, "schedule");
        let at = At::binding(BindingKind::Schedule, index, &name);
        let map = self.object(&at, value, FIELDS, &[])?;
        Some(WitScheduleBinding {
            name: self.string(&at, map, "name").unwrap_or(name),
            crontab: self.string(&at, map, "crontab").unwrap_or_default(),
            allow_failure: self.bool(&at, map, "allowFailure").unwrap_or(false),
            queue: self.string(&at, map, "queue"),
            group: self.string(&at, map, "group"),
            include_snapshots_from: self
                .string_list(&at, map, "includeSnapshotsFrom")
                .unwrap_or_default(),
        })
    }

    fn kubernetes_v1(&mut self, index: usize, value: &Value) -> Option<WitKubernetesBinding> {
        const FIELDS: &[&str] = &[
            "name",
            "apiVersion",
            "kind",
            "executeHookOnEvent",
            "watchEvent",
            "executeHookOnSynchronization",
            "waitForSynchronization",
            "keepFullObjectsInMemory",
            "nameSelector",
            "labelSelector",
            "fieldSelector",
            "namespace",
            "jqFilter",
            "allowFailure",
            "queue",
            "group",
            "includeSnapshotsFrom",
        ];
        let name = Self::binding_name(value, "kubernetes");
        let at = At::binding(BindingKind::Kubernetes, index, &name);
        let map = self.object(&at, value, FIELDS, &[RESYNC_REFUSED])?;

        // `watchEvent` is the older spelling; shell-operator prefers
        // `executeHookOnEvent` when both are given, which would drop the other silently.
        let events_key = match (
            map.contains_key("executeHookOnEvent"),
            map.contains_key("watchEvent"),
        ) {
            (true, true) => {
                self.problem(
                    &at.key("watchEvent"),
                    "give only executeHookOnEvent (watchEvent is its older spelling)",
                );
                "executeHookOnEvent"
            }
            (false, true) => "watchEvent",
            _ => "executeHookOnEvent",
        };
        let execute_hook_on_event = self.list(&at, map, events_key).map(|items| {
            let at = at.key(events_key);
            let names = self.strings(&at, items);
            names
                .iter()
                .enumerate()
                .filter_map(|(i, name)| match name.as_str() {
                    "Added" => Some(WatchEvent::Added),
                    "Modified" => Some(WatchEvent::Modified),
                    "Deleted" => Some(WatchEvent::Deleted),
                    other => {
                        self.problem(
                            &at.item(i),
                            format!("{other:?} is not Added, Modified or Deleted"),
                        );
                        None
                    }
                })
                .collect()
        });

        let name_selector = Self::field(map, "nameSelector")
            .and_then(|v| self.name_selector(&at.key("nameSelector"), v));
        let label_selector = Self::field(map, "labelSelector")
            .and_then(|v| self.label_selector(&at.key("labelSelector"), v));
        let field_selector = Self::field(map, "fieldSelector")
            .and_then(|v| self.field_selector(&at.key("fieldSelector"), v));
        let namespace = Self::field(map, "namespace")
            .and_then(|v| self.namespace_selector(&at.key("namespace"), v, true));

        Some(WitKubernetesBinding {
            name: self.string(&at, map, "name").unwrap_or(name),
            api_version: self.string(&at, map, "apiVersion"),
            kind: self.string(&at, map, "kind").unwrap_or_default(),
            execute_hook_on_event,
            execute_hook_on_synchronization: self.bool(&at, map, "executeHookOnSynchronization"),
            wait_for_synchronization: self.bool(&at, map, "waitForSynchronization"),
            keep_full_objects_in_memory: self.bool(&at, map, "keepFullObjectsInMemory"),
            name_selector,
            label_selector,
            field_selector,
            namespace,
            jq_filter: self.string(&at, map, "jqFilter"),
            allow_failure: self.bool(&at, map, "allowFailure").unwrap_or(false),
            queue: self.string(&at, map, "queue"),
            group: self.string(&at, map, "group"),
            include_snapshots_from: self
                .string_list(&at, map, "includeSnapshotsFrom")
                .unwrap_or_default(),
        })
    }

    /// `{matchNames: [...]}`; a bare list is accepted too, as shell-operator's own
    /// documentation writes `namespace.nameSelector` that way.
    fn name_selector(&mut self, at: &At, value: &Value) -> Option<Vec<String>> {
        if let Value::Array(items) = value {
            return Some(self.strings(at, items));
        }
        let map = self.object(at, value, &["matchNames"], &[])?;
        match self.string_list(at, map, "matchNames") {
            Some(names) => Some(names),
            None => {
                if !map.contains_key("matchNames") {
                    self.problem(&at.key("matchNames"), "required");
                }
                None
            }
        }
    }

    fn label_selector(&mut self, at: &At, value: &Value) -> Option<LabelSelector> {
        let map = self.object(at, value, &["matchLabels", "matchExpressions"], &[])?;
        let mut match_labels = Vec::new();
        if let Some(labels) = Self::field(map, "matchLabels") {
            let labels_at = at.key("matchLabels");
            match labels.as_object() {
                Some(labels) => {
                    for (key, value) in labels {
                        match value {
                            Value::String(v) => match_labels.push((key.clone(), v.clone())),
                            other => self.problem(
                                &labels_at.key(key),
                                format!(
                                    "label values are strings, found {} (quote it)",
                                    type_name(other)
                                ),
                            ),
                        }
                    }
                }
                None => self.problem(
                    &labels_at,
                    format!("expected a mapping, found {}", type_name(labels)),
                ),
            }
        }
        let mut match_expressions = Vec::new();
        for (i, item) in self
            .list(at, map, "matchExpressions")
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let item_at = at.key("matchExpressions").item(i);
            let Some(expression) = self.object(&item_at, item, &["key", "operator", "values"], &[])
            else {
                continue;
            };
            for key in ["key", "operator"] {
                if Self::field(expression, key).is_none() {
                    self.problem(&item_at.key(key), "required");
                }
            }
            let key = self.string(&item_at, expression, "key");
            let operator = match self.string(&item_at, expression, "operator").as_deref() {
                Some("In") => Some(LabelOperator::In),
                Some("NotIn") => Some(LabelOperator::NotIn),
                Some("Exists") => Some(LabelOperator::Exists),
                Some("DoesNotExist") => Some(LabelOperator::DoesNotExist),
                Some(other) => {
                    self.problem(
                        &item_at.key("operator"),
                        format!("{other:?} is not In, NotIn, Exists or DoesNotExist"),
                    );
                    None
                }
                None => None,
            };
            let values = self
                .string_list(&item_at, expression, "values")
                .unwrap_or_default();
            if let (Some(key), Some(operator)) = (key, operator) {
                match_expressions.push(LabelRequirement {
                    key,
                    operator,
                    values,
                });
            }
        }
        Some(LabelSelector {
            match_labels,
            match_expressions,
        })
    }

    fn field_selector(&mut self, at: &At, value: &Value) -> Option<Vec<FieldRequirement>> {
        let map = self.object(at, value, &["matchExpressions"], &[])?;
        let items = self.list(at, map, "matchExpressions").unwrap_or_default();
        let mut requirements = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let item_at = at.key("matchExpressions").item(i);
            let Some(expression) =
                self.object(&item_at, item, &["field", "operator", "value"], &[])
            else {
                continue;
            };
            for key in ["field", "operator", "value"] {
                if Self::field(expression, key).is_none() {
                    self.problem(&item_at.key(key), "required");
                }
            }
            let field = self.string(&item_at, expression, "field");
            let operator = match self.string(&item_at, expression, "operator").as_deref() {
                Some("=" | "==" | "Equals") => Some(FieldOperator::Equals),
                Some("!=" | "NotEquals") => Some(FieldOperator::NotEquals),
                Some(other) => {
                    self.problem(
                        &item_at.key("operator"),
                        format!("{other:?} is not =, ==, Equals, != or NotEquals"),
                    );
                    None
                }
                None => None,
            };
            let value = self.string(&item_at, expression, "value");
            if let (Some(field), Some(operator), Some(value)) = (field, operator, value) {
                requirements.push(FieldRequirement {
                    field,
                    operator,
                    value,
                });
            }
        }
        Some(requirements)
    }

    fn namespace_selector(
        &mut self,
        at: &At,
        value: &Value,
        names_allowed: bool,
    ) -> Option<NamespaceSelector> {
        let allowed: &[&str] = if names_allowed {
            &["nameSelector", "labelSelector"]
        } else {
            &["labelSelector"]
        };
        let refused: Refused<'_> = &[(
            "nameSelector",
            "a webhook selects namespaces by labels only: use labelSelector with the \
             kubernetes.io/metadata.name label",
        )];
        let map = self.object(at, value, allowed, refused)?;
        let name_selector = if names_allowed {
            Self::field(map, "nameSelector")
                .and_then(|v| self.name_selector(&at.key("nameSelector"), v))
        } else {
            None
        };
        let label_selector = Self::field(map, "labelSelector")
            .and_then(|v| self.label_selector(&at.key("labelSelector"), v));
        Some(NamespaceSelector {
            name_selector,
            label_selector,
        })
    }

    fn validating_v1(&mut self, index: usize, value: &Value) -> Option<WitValidatingBinding> {
        const FIELDS: &[&str] = &[
            "name",
            "rules",
            "failurePolicy",
            "sideEffects",
            "labelSelector",
            "namespace",
            "timeoutSeconds",
            "group",
            "includeSnapshotsFrom",
        ];
        const REFUSED: Refused<'_> = &[(
            "matchConditions",
            "not supported by Operon: use labelSelector and namespace.labelSelector",
        )];
        let name = Self::binding_name(value, "");
        let at = At::binding(BindingKind::Validating, index, &name);
        let map = self.object(&at, value, FIELDS, REFUSED)?;

        // Operon registers every webhook with `sideEffects: None`, shell-operator's
        // default; a hook that claims side effects would be registered wrongly.
        match self.string(&at, map, "sideEffects").as_deref() {
            None | Some("None") => {}
            Some(other) => self.problem(
                &at.key("sideEffects"),
                format!(
                    "{other:?} is not supported: Operon registers webhooks with sideEffects \
                     None, so hooks must not have side effects"
                ),
            ),
        }

        let mut rules = Vec::new();
        for (i, item) in self
            .list(&at, map, "rules")
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            const RULE: &[&str] = &[
                "operations",
                "apiGroups",
                "apiVersions",
                "resources",
                "scope",
            ];
            let rule_at = at.key("rules").item(i);
            let Some(rule) = self.object(&rule_at, item, RULE, &[]) else {
                continue;
            };
            rules.push(WebhookRule {
                operations: self
                    .string_list(&rule_at, rule, "operations")
                    .unwrap_or_default(),
                api_groups: self
                    .string_list(&rule_at, rule, "apiGroups")
                    .unwrap_or_default(),
                api_versions: self
                    .string_list(&rule_at, rule, "apiVersions")
                    .unwrap_or_default(),
                resources: self
                    .string_list(&rule_at, rule, "resources")
                    .unwrap_or_default(),
                scope: self.string(&rule_at, rule, "scope"),
            });
        }

        let timeout_seconds = self.integer(&at, map, "timeoutSeconds").and_then(|t| {
            u32::try_from(t)
                .map_err(|_| {
                    self.problem(&at.key("timeoutSeconds"), format!("{t} is out of range"))
                })
                .ok()
        });
        let label_selector = Self::field(map, "labelSelector")
            .and_then(|v| self.label_selector(&at.key("labelSelector"), v));
        let namespace = Self::field(map, "namespace")
            .and_then(|v| self.namespace_selector(&at.key("namespace"), v, false));

        Some(WitValidatingBinding {
            name: self.string(&at, map, "name").unwrap_or(name),
            rules,
            failure_policy: self.string(&at, map, "failurePolicy"),
            label_selector,
            namespace,
            timeout_seconds,
            group: self.string(&at, map, "group"),
            include_snapshots_from: self
                .string_list(&at, map, "includeSnapshotsFrom")
                .unwrap_or_default(),
        })
    }

    fn conversion_v1(&mut self, index: usize, value: &Value) -> Option<WitConversionBinding> {
        const FIELDS: &[&str] = &[
            "name",
            "crdName",
            "conversions",
            "group",
            "includeSnapshotsFrom",
        ];
        const REFUSED: Refused<'_> = &[(
            "conversion",
            "unknown field: the list of rules is called conversions",
        )];
        let name = Self::binding_name(value, "");
        let at = At::binding(BindingKind::Conversion, index, &name);
        let map = self.object(&at, value, FIELDS, REFUSED)?;
        let mut conversions = Vec::new();
        for (i, item) in self
            .list(&at, map, "conversions")
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let rule_at = at.key("conversions").item(i);
            let Some(rule) = self.object(&rule_at, item, &["fromVersion", "toVersion"], &[]) else {
                continue;
            };
            conversions.push(ConversionRule {
                from_version: self
                    .string(&rule_at, rule, "fromVersion")
                    .unwrap_or_default(),
                to_version: self.string(&rule_at, rule, "toVersion").unwrap_or_default(),
            });
        }
        Some(WitConversionBinding {
            name: self.string(&at, map, "name").unwrap_or(name),
            crd_name: self.string(&at, map, "crdName").unwrap_or_default(),
            conversions,
            group: self.string(&at, map, "group"),
            include_snapshots_from: self
                .string_list(&at, map, "includeSnapshotsFrom")
                .unwrap_or_default(),
        })
    }

    fn settings_v1(&mut self, value: &Value) -> Option<HookSettings> {
        let at = At::top("settings");
        let map = self.object(
            &at,
            value,
            &["executionMinInterval", "executionBurst", "timeout"],
            &[],
        )?;
        let execution_burst = self.integer(&at, map, "executionBurst").and_then(|b| {
            u32::try_from(b)
                .map_err(|_| {
                    self.problem(&at.key("executionBurst"), format!("{b} is out of range"))
                })
                .ok()
        });
        Some(HookSettings {
            execution_min_interval_ms: self.duration_ms(&at, map, "executionMinInterval"),
            execution_burst,
            timeout_ms: self.duration_ms(&at, map, "timeout"),
        })
    }

    // --- v0 ---------------------------------------------------------------------------

    fn config_v0(&mut self, document: &Value) -> Option<HookConfig> {
        const REFUSED: Refused<'_> = &[
            (
                "kubernetes",
                "needs configVersion: v1 (without it the v0 form is read)",
            ),
            (
                "kubernetesValidating",
                "needs configVersion: v1 (without it the v0 form is read)",
            ),
            (
                "kubernetesCustomResourceConversion",
                "needs configVersion: v1 (without it the v0 form is read)",
            ),
            (
                "settings",
                "needs configVersion: v1 (without it the v0 form is read)",
            ),
        ];
        let map = self.object(
            &At::top(""),
            document,
            &["onStartup", "schedule", "onKubernetesEvent"],
            REFUSED,
        )?;
        let on_startup = self.on_startup(map);
        let schedule = (self.items(map, "schedule"))
            .filter_map(|(i, item)| {
                let name = Self::binding_name(item, "schedule");
                let at = At::binding(BindingKind::Schedule, i, &name);
                let m = self.object(&at, item, &["name", "crontab", "allowFailure"], &[])?;
                Some(WitScheduleBinding {
                    name: self.string(&at, m, "name").unwrap_or(name),
                    crontab: self.string(&at, m, "crontab").unwrap_or_default(),
                    allow_failure: self.bool(&at, m, "allowFailure").unwrap_or(false),
                    queue: None,
                    group: None,
                    include_snapshots_from: Vec::new(),
                })
            })
            .collect();
        let kubernetes = (self.items(map, "onKubernetesEvent"))
            .filter_map(|(i, item)| self.kubernetes_v0(i, item))
            .collect();
        Some(HookConfig {
            on_startup,
            schedule,
            kubernetes,
            kubernetes_validating: Vec::new(),
            kubernetes_conversion: Vec::new(),
            settings: None,
        })
    }

    fn kubernetes_v0(&mut self, index: usize, value: &Value) -> Option<WitKubernetesBinding> {
        const FIELDS: &[&str] = &[
            "name",
            "event",
            "kind",
            "selector",
            "objectName",
            "namespaceSelector",
            "jqFilter",
            "allowFailure",
        ];
        let name = Self::binding_name(value, "onKubernetesEvent");
        let at = At::binding(BindingKind::Kubernetes, index, &name);
        let map = self.object(&at, value, FIELDS, &[])?;

        // A v0 binding without `event` runs on every event, as v0 documented (the
        // current shell-operator converter turns it into a binding that never runs).
        let execute_hook_on_event = self.string_list(&at, map, "event").map(|names| {
            names
                .iter()
                .enumerate()
                .filter_map(|(i, name)| match name.as_str() {
                    "add" => Some(WatchEvent::Added),
                    "update" => Some(WatchEvent::Modified),
                    "delete" => Some(WatchEvent::Deleted),
                    other => {
                        self.problem(
                            &at.key("event").item(i),
                            format!("{other:?} is not add, update or delete"),
                        );
                        None
                    }
                })
                .collect()
        });

        let name_selector = self.string(&at, map, "objectName").map(|name| vec![name]);
        let label_selector =
            Self::field(map, "selector").and_then(|v| self.label_selector(&at.key("selector"), v));
        let namespace = Self::field(map, "namespaceSelector").and_then(|v| {
            let ns_at = at.key("namespaceSelector");
            let ns = self.object(&ns_at, v, &["matchNames", "any"], &[])?;
            let any = self.bool(&ns_at, ns, "any").unwrap_or(false);
            let names = self.string_list(&ns_at, ns, "matchNames");
            match (any, names) {
                (true, _) | (false, None) => None,
                (false, Some(names)) => Some(NamespaceSelector {
                    name_selector: Some(names),
                    label_selector: None,
                }),
            }
        });

        Some(WitKubernetesBinding {
            name: self.string(&at, map, "name").unwrap_or(name),
            api_version: None,
            kind: self.string(&at, map, "kind").unwrap_or_default(),
            execute_hook_on_event,
            execute_hook_on_synchronization: None,
            wait_for_synchronization: None,
            keep_full_objects_in_memory: None,
            name_selector,
            label_selector,
            field_selector: None,
            namespace,
            jq_filter: self.string(&at, map, "jqFilter"),
            allow_failure: self.bool(&at, map, "allowFailure").unwrap_or(false),
            queue: None,
            group: None,
            include_snapshots_from: Vec::new(),
        })
    }
}

/// "unknown field", with the closest allowed name when one is near enough to be the
/// intended one.
fn unknown_field_reason(key: &str, allowed: &[&str]) -> String {
    let closest = allowed
        .iter()
        .map(|name| {
            (
                edit_distance(&key.to_ascii_lowercase(), &name.to_ascii_lowercase()),
                name,
            )
        })
        .min_by_key(|(distance, _)| *distance)
        .filter(|(distance, name)| *distance <= 2 || distance * 4 <= name.len());
    match closest {
        Some((_, name)) => format!("unknown field; did you mean {name}?"),
        None if allowed.is_empty() => "unknown field".to_owned(),
        None => format!("unknown field; expected one of: {}", allowed.join(", ")),
    }
}

/// Levenshtein distance, for typo suggestions on short field names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> HookConfig {
        parse_shell_operator("hook.sh", text).unwrap_or_else(|problems| {
            panic!("unexpected problems: {problems:#?}");
        })
    }

    fn valid(config: &HookConfig) -> ValidConfig {
        validate("hook.sh", config, &any_kind).unwrap_or_else(|problems| {
            panic!("unexpected problems: {problems:#?}");
        })
    }

    fn problems(config: &HookConfig) -> Vec<String> {
        match validate("hook.sh", config, &any_kind) {
            Ok(_) => panic!("expected problems"),
            Err(problems) => problems.iter().map(ToString::to_string).collect(),
        }
    }

    fn parse_problems(text: &str) -> Vec<String> {
        match parse_shell_operator("hook.sh", text) {
            Ok(config) => panic!("expected problems, got {config:?}"),
            Err(problems) => problems.iter().map(ToString::to_string).collect(),
        }
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("timestamp")
    }

    #[test]
    fn parses_every_v1_kubernetes_field() {
        let config = parse(
            r#"
configVersion: v1
onStartup: 10
kubernetes:
- name: "Monitor pods in cache tier"
  apiVersion: v1
  kind: Pod
  executeHookOnEvent: [ "Added", "Modified" ]
  executeHookOnSynchronization: false
  waitForSynchronization: false
  keepFullObjectsInMemory: false
  nameSelector:
    matchNames: [pod-0, pod-1]
  labelSelector:
    matchLabels:
      myLabel: myLabelValue
    matchExpressions:
    - key: tier
      operator: In
      values: ["cache"]
  fieldSelector:
    matchExpressions:
    - field: status.phase
      operator: "!="
      value: Pending
  namespace:
    nameSelector:
      matchNames: ["proj-production"]
    labelSelector:
      matchLabels: {env: production}
  jqFilter: ".metadata.labels"
  includeSnapshotsFrom: ["Monitor pods in cache tier"]
  allowFailure: true
  queue: cache-pods
  group: pods
settings:
  executionMinInterval: 3s
  executionBurst: 2
  timeout: 1m30s
"#,
        );
        assert_eq!(config.on_startup, Some(10));
        let k = &config.kubernetes[0];
        assert_eq!(k.name, "Monitor pods in cache tier");
        assert_eq!(k.api_version.as_deref(), Some("v1"));
        assert_eq!(k.kind, "Pod");
        assert_eq!(
            k.execute_hook_on_event,
            Some(vec![WatchEvent::Added, WatchEvent::Modified])
        );
        assert_eq!(k.execute_hook_on_synchronization, Some(false));
        assert_eq!(k.wait_for_synchronization, Some(false));
        assert_eq!(k.keep_full_objects_in_memory, Some(false));
        assert_eq!(
            k.name_selector,
            Some(vec!["pod-0".to_owned(), "pod-1".to_owned()])
        );
        let labels = k.label_selector.as_ref().expect("labelSelector");
        assert_eq!(
            labels.match_labels,
            vec![("myLabel".to_owned(), "myLabelValue".to_owned())]
        );
        assert_eq!(labels.match_expressions[0].key, "tier");
        assert_eq!(labels.match_expressions[0].operator, LabelOperator::In);
        assert_eq!(labels.match_expressions[0].values, vec!["cache".to_owned()]);
        let fields = k.field_selector.as_ref().expect("fieldSelector");
        assert_eq!(fields[0].field, "status.phase");
        assert_eq!(fields[0].operator, FieldOperator::NotEquals);
        assert_eq!(fields[0].value, "Pending");
        let ns = k.namespace.as_ref().expect("namespace");
        assert_eq!(ns.name_selector, Some(vec!["proj-production".to_owned()]));
        assert!(ns.label_selector.is_some());
        assert_eq!(k.jq_filter.as_deref(), Some(".metadata.labels"));
        assert!(k.allow_failure);
        assert_eq!(k.queue.as_deref(), Some("cache-pods"));
        assert_eq!(k.group.as_deref(), Some("pods"));
        assert_eq!(k.include_snapshots_from, vec![k.name.clone()]);
        let settings = config.settings.as_ref().expect("settings");
        assert_eq!(settings.execution_min_interval_ms, Some(3_000));
        assert_eq!(settings.execution_burst, Some(2));
        assert_eq!(settings.timeout_ms, Some(90_000));

        let valid = valid(&config);
        let k = &valid.kubernetes[0];
        assert_eq!(k.id.to_string(), "kubernetes[0]");
        assert_eq!(
            k.execute_hook_on_event,
            EventSet {
                added: true,
                modified: true,
                deleted: false
            }
        );
        assert_eq!(
            k.jq_filter.as_ref().map(jq::Filter::text),
            Some(".metadata.labels")
        );
        assert_eq!(
            valid.settings.execution_rate,
            Some(ExecutionRate {
                min_interval: Duration::from_secs(3),
                burst: 2
            })
        );
        assert_eq!(valid.settings.timeout, Duration::from_secs(90));
    }

    #[test]
    fn parses_schedules_webhooks_and_json() {
        let config = parse(
            r#"{
  "configVersion": "v1",
  "schedule": [
    {"crontab": "*/5 * * * *"},
    {"name": "every 10 seconds", "crontab": "*/10 * * * * *", "allowFailure": true,
     "queue": "every-ten", "includeSnapshotsFrom": ["kubernetes"], "group": "g"}
  ],
  "kubernetes": [{"kind": "ConfigMap", "executeHookOnEvent": []}],
  "kubernetesValidating": [{
    "name": "private-repo-policy.example.com",
    "rules": [{"apiGroups": ["stable.example.com"], "apiVersions": ["v1"],
               "operations": ["CREATE"], "resources": ["crontabs"], "scope": "Namespaced"}],
    "failurePolicy": "Ignore", "sideEffects": "None", "timeoutSeconds": 5,
    "namespace": {"labelSelector": {"matchLabels": {"env": "prod"}}}
  }],
  "kubernetesCustomResourceConversion": [{
    "name": "conversions", "crdName": "crontabs.stable.example.com",
    "conversions": [{"fromVersion": "unstable.crontab.io/v1beta1",
                     "toVersion": "stable.example.com/v1beta1"}]
  }]
}"#,
        );
        assert_eq!(config.schedule[0].name, "schedule");
        assert_eq!(config.schedule[1].crontab, "*/10 * * * * *");
        assert!(config.schedule[1].allow_failure);
        assert_eq!(config.kubernetes[0].name, "kubernetes");
        assert_eq!(config.kubernetes[0].execute_hook_on_event, Some(vec![]));
        let v = &config.kubernetes_validating[0];
        assert_eq!(v.rules[0].operations, vec!["CREATE".to_owned()]);
        assert_eq!(v.rules[0].scope.as_deref(), Some("Namespaced"));
        assert_eq!(v.failure_policy.as_deref(), Some("Ignore"));
        assert_eq!(v.timeout_seconds, Some(5));
        assert_eq!(config.kubernetes_conversion[0].conversions.len(), 1);

        let valid = valid(&config);
        assert!(valid.kubernetes[0].execute_hook_on_event.is_empty());
        assert_eq!(valid.schedules[1].queue, "every-ten");
        assert_eq!(valid.validating[0].failure_policy, FailurePolicy::Ignore);
        assert!(valid.validating[0].namespace_label_selector.is_some());
        assert_eq!(
            valid.binding_name(BindingId {
                kind: BindingKind::Conversion,
                index: 0
            }),
            Some("conversions")
        );
    }

    #[test]
    fn legacy_v0_is_mapped_to_v1() {
        let config = parse(
            r#"
onStartup: 1
schedule:
- crontab: "0 * * * *"
  allowFailure: true
onKubernetesEvent:
- name: pods
  kind: pod
  event: [add, update]
  selector:
    matchLabels: {app: web}
  objectName: web-0
  namespaceSelector:
    matchNames: [default]
  jqFilter: .metadata.labels
- kind: namespace
  event: [delete]
  namespaceSelector: {any: true}
- kind: node
"#,
        );
        assert_eq!(config.on_startup, Some(1));
        assert_eq!(config.schedule[0].name, "schedule");
        assert!(config.schedule[0].allow_failure);
        let pods = &config.kubernetes[0];
        assert_eq!(
            pods.execute_hook_on_event,
            Some(vec![WatchEvent::Added, WatchEvent::Modified])
        );
        assert_eq!(pods.name_selector, Some(vec!["web-0".to_owned()]));
        assert_eq!(
            pods.namespace
                .as_ref()
                .and_then(|n| n.name_selector.clone()),
            Some(vec!["default".to_owned()])
        );
        assert!(pods.label_selector.is_some());
        let namespaces = &config.kubernetes[1];
        assert_eq!(namespaces.name, "onKubernetesEvent");
        assert_eq!(
            namespaces.execute_hook_on_event,
            Some(vec![WatchEvent::Deleted])
        );
        assert_eq!(namespaces.namespace, None);
        assert_eq!(config.kubernetes[2].execute_hook_on_event, None);
    }

    #[test]
    fn unknown_and_mistyped_fields_are_all_reported() {
        let problems = parse_problems(
            r#"
configVersion: v1
kubernetes:
- name: pods
  kind: Pod
  executeHookOnEvents: [Added]
  resynchronizationPeriod: 10s
  allowFailure: maybe
  labelSelector:
    matchLabels: {enabled: true}
  fieldSelector:
    matchExpressions:
    - {field: status.phase, operator: "<", value: x}
kubernetesMutating: []
settings:
  executionMinInterval: 3 seconds
"#,
        );
        let expected = [
            r#"hook "hook.sh": kubernetes[0] "pods": executeHookOnEvents: unknown field; did you mean executeHookOnEvent?"#,
            r#"hook "hook.sh": kubernetes[0] "pods": resynchronizationPeriod: not supported"#,
            r#"hook "hook.sh": kubernetes[0] "pods": allowFailure: expected true or false"#,
            r#"hook "hook.sh": kubernetes[0] "pods": labelSelector.matchLabels.enabled: label values are strings"#,
            r#"hook "hook.sh": kubernetes[0] "pods": fieldSelector.matchExpressions[0].operator: "<" is not"#,
            r#"hook "hook.sh": kubernetesMutating: mutating webhooks are not supported"#,
            r#"hook "hook.sh": settings.executionMinInterval: invalid duration"#,
        ];
        for prefix in expected {
            assert!(
                problems.iter().any(|p| p.starts_with(prefix)),
                "missing {prefix:?} in {problems:#?}"
            );
        }
        assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    }

    #[test]
    fn v1_fields_without_config_version_point_at_it() {
        let problems = parse_problems("kubernetes:\n- kind: Pod\n");
        assert_eq!(
            problems,
            vec![
                r#"hook "hook.sh": kubernetes: needs configVersion: v1 (without it the v0 form is read)"#
            ]
        );
        let problems = parse_problems("configVersion: v2\nonStartup: 1\n");
        assert!(problems[0].contains("configVersion: \"v2\" is not a supported version"));
        assert!(parse_problems("").len() == 1);
        assert!(parse_problems("- a\n- b\n")[0].contains("must be a mapping"));
        assert!(parse_problems("{bad json")[0].contains("not valid JSON"));
    }

    #[test]
    fn defaults_are_applied() {
        let config = parse(
            "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n\
             kubernetesValidating:\n- name: a.example.com\n  rules:\n  - {operations: [CREATE], \
             apiGroups: [''], apiVersions: [v1], resources: [pods]}\n",
        );
        let valid = valid(&config);
        let k = &valid.kubernetes[0];
        assert_eq!(k.execute_hook_on_event, EventSet::ALL);
        assert!(k.execute_hook_on_synchronization);
        assert!(k.wait_for_synchronization);
        assert!(k.keep_full_objects_in_memory);
        assert!(!k.allow_failure);
        assert_eq!(k.queue, MAIN_QUEUE);
        assert!(k.jq_filter.is_none());
        assert!(k.include_snapshots_from.is_empty());
        assert_eq!(valid.on_startup, None);
        assert_eq!(valid.settings.execution_rate, None);
        assert_eq!(valid.settings.timeout, DEFAULT_TIMEOUT);
        assert_eq!(valid.validating[0].failure_policy, FailurePolicy::Fail);
        assert_eq!(
            valid.validating[0].timeout_seconds,
            DEFAULT_WEBHOOK_TIMEOUT_SECONDS
        );

        let burst_defaults = HookConfig {
            settings: Some(HookSettings {
                execution_min_interval_ms: Some(500),
                execution_burst: None,
                timeout_ms: None,
            }),
            ..config
        };
        assert_eq!(
            valid_config_rate(&burst_defaults),
            Some(ExecutionRate {
                min_interval: Duration::from_millis(500),
                burst: 1
            })
        );
    }

    fn valid_config_rate(config: &HookConfig) -> Option<ExecutionRate> {
        valid(config).settings.execution_rate
    }

    #[test]
    fn group_members_are_added_to_include_snapshots_from() {
        let config = parse(
            r#"
configVersion: v1
schedule:
- name: periodic-checking
  crontab: "0 */3 * * *"
  group: pods
  includeSnapshotsFrom: [extra]
kubernetes:
- name: monitor-pods
  kind: Pod
  jqFilter: .metadata.labels
  group: pods
- name: configmap-content
  kind: ConfigMap
  group: pods
- name: extra
  kind: Secret
kubernetesValidating:
- name: check.example.com
  group: pods
  rules: [{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*"]}]
"#,
        );
        let valid = valid(&config);
        assert_eq!(
            valid.schedules[0].include_snapshots_from,
            vec!["extra", "monitor-pods", "configmap-content"]
        );
        assert_eq!(
            valid.kubernetes[0].include_snapshots_from,
            vec!["monitor-pods", "configmap-content"]
        );
        assert!(valid.kubernetes[2].include_snapshots_from.is_empty());
        assert_eq!(
            valid.validating[0].include_snapshots_from,
            vec!["monitor-pods", "configmap-content"]
        );
        assert!(valid.kubernetes_binding("extra").is_some());
    }

    #[test]
    fn every_problem_is_reported_with_binding_and_field() {
        let config = parse(
            r#"
configVersion: v1
schedule:
- name: pods
  crontab: "* * *"
  queue: Main
kubernetes:
- name: pods
  kind: Pod
  executeHookOnEvent: [Added, Added]
  labelSelector:
    matchLabels: {"bad key!": x}
    matchExpressions:
    - {key: tier, operator: In}
    - {key: tier, operator: Exists, values: [x]}
  nameSelector: {matchNames: [web]}
  fieldSelector:
    matchExpressions: [{field: metadata.name, operator: "=", value: web}]
  namespace: {nameSelector: {matchNames: []}}
  jqFilter: ".metadata | bogus_function"
  includeSnapshotsFrom: [nothing]
  waitForSynchronization: false
- name: ""
  kind: ""
kubernetesValidating:
- name: short.name
  rules: [{operations: [PATCH], apiGroups: [], apiVersions: [v1], resources: [pods], scope: All}]
  failurePolicy: Maybe
  timeoutSeconds: 31
  namespace: {labelSelector: {matchExpressions: [{key: a, operator: DoesNotExist}]}}
kubernetesCustomResourceConversion:
- name: conv
  crdName: crontabs
  conversions:
  - {fromVersion: v1, toVersion: v1}
settings:
  executionBurst: 0
  timeout: 0s
"#,
        );
        let problems = problems(&config);
        let expected = [
            r#"schedule[0] "pods": crontab: expected 5 fields"#,
            r#"schedule[0] "pods": queue: "Main" is not a valid queue name"#,
            r#"kubernetes[0] "pods": name: "pods" is already the name of schedule[0]"#,
            r#"kubernetes[0] "pods": executeHookOnEvent: Added is listed twice"#,
            r#"kubernetes[0] "pods": labelSelector.matchLabels: label key "bad key!""#,
            r#"kubernetes[0] "pods": labelSelector.matchExpressions[0].values: In and NotIn need"#,
            r#"kubernetes[0] "pods": labelSelector.matchExpressions[1].values: Exists and DoesNotExist take no values"#,
            r#"kubernetes[0] "pods": fieldSelector.matchExpressions[0].field: metadata.name and nameSelector"#,
            r#"kubernetes[0] "pods": namespace.nameSelector.matchNames: an empty list"#,
            r#"kubernetes[0] "pods": jqFilter: jq filter"#,
            r#"kubernetes[0] "pods": includeSnapshotsFrom: "nothing" is not the name"#,
            r#"kubernetes[0] "pods": waitForSynchronization: false needs a named queue"#,
            r#"kubernetes[1]: name: a binding needs a non-empty name"#,
            r#"kubernetes[1]: kind: kind is required"#,
            r#"kubernetesValidating[0] "short.name": name: a validating binding's name"#,
            r#"kubernetesValidating[0] "short.name": rules[0].operations: "PATCH""#,
            r#"kubernetesValidating[0] "short.name": rules[0].apiGroups: at least one"#,
            r#"kubernetesValidating[0] "short.name": rules[0].scope: "All""#,
            r#"kubernetesValidating[0] "short.name": failurePolicy: "Maybe""#,
            r#"kubernetesValidating[0] "short.name": timeoutSeconds: 31"#,
            r#"kubernetesCustomResourceConversion[0] "conv": crdName: "crontabs""#,
            r#"kubernetesCustomResourceConversion[0] "conv": conversions[0]: fromVersion and toVersion"#,
            "settings.executionBurst: must be at least 1",
            "settings.executionBurst: has no effect without",
            "settings.timeout: must be longer than 0",
        ];
        for fragment in expected {
            assert!(
                problems
                    .iter()
                    .any(|p| p.starts_with(&format!("hook \"hook.sh\": {fragment}"))),
                "missing {fragment:?} in {problems:#?}"
            );
        }
        assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    }

    #[test]
    fn kinds_are_checked_by_the_given_checker() {
        let config = parse(
            "configVersion: v1\nkubernetes:\n- kind: Pdo\n- kind: Pod\n  apiVersion: a/b/c\n",
        );
        let only_pods = |_: Option<&str>, kind: &str| {
            if kind == "Pod" {
                Ok(())
            } else {
                Err(format!("unknown kind {kind:?}"))
            }
        };
        let problems: Vec<String> = validate("hook.sh", &config, &only_pods)
            .expect_err("problems")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            problems
                .iter()
                .any(|p| p.contains("kubernetes[0] \"kubernetes\": kind: unknown kind \"Pdo\""))
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("apiVersion: \"a/b/c\" is not an apiVersion"))
        );
        // Two unnamed kubernetes bindings share shell-operator's default name.
        assert!(
            problems
                .iter()
                .any(|p| p.contains("name: \"kubernetes\" is already"))
        );
    }

    #[test]
    fn a_hook_without_bindings_is_refused() {
        let config = parse("configVersion: v1\nsettings:\n  executionMinInterval: 1s\n");
        assert_eq!(
            problems(&config),
            vec![
                "hook \"hook.sh\": the hook has no bindings (onStartup, schedule, kubernetes, \
                 kubernetesValidating or kubernetesCustomResourceConversion), so it would never run"
            ]
        );
    }

    #[test]
    fn crontab_with_five_fields_fires_at_second_zero() {
        let every_five = Crontab::parse("*/5 * * * *").expect("valid");
        assert_eq!(
            every_five.next_after(at("2024-05-01T10:02:30Z")),
            Some(at("2024-05-01T10:05:00Z"))
        );
        assert_eq!(
            every_five.next_after(at("2024-05-01T10:05:00Z")),
            Some(at("2024-05-01T10:10:00Z"))
        );
        let every_ten_seconds = Crontab::parse("*/10 * * * * *").expect("valid");
        assert_eq!(
            every_ten_seconds.next_after(at("2024-05-01T10:02:30.5Z")),
            Some(at("2024-05-01T10:02:40Z"))
        );
        let night = Crontab::parse("0 2 */3 * * *").expect("valid");
        assert_eq!(
            night.next_after(at("2024-05-01T10:02:30Z")),
            Some(at("2024-05-01T12:02:00Z"))
        );
    }

    #[test]
    fn crontab_days_follow_crontab_rules() {
        // 2024-05-04 is a Saturday; 0 is Sunday.
        let sunday = Crontab::parse("0 9 * * 0").expect("valid");
        assert_eq!(
            sunday.next_after(at("2024-05-04T12:00:00Z")),
            Some(at("2024-05-05T09:00:00Z"))
        );
        let weekdays = Crontab::parse("30 8 * * mon-fri").expect("valid");
        assert_eq!(
            weekdays.next_after(at("2024-05-04T12:00:00Z")),
            Some(at("2024-05-06T08:30:00Z"))
        );
        // Both day fields restricted: either one fires (the 10th, or a Sunday).
        let either = Crontab::parse("0 0 10 * sun").expect("valid");
        assert_eq!(
            either.next_after(at("2024-05-06T00:00:00Z")),
            Some(at("2024-05-10T00:00:00Z"))
        );
        assert_eq!(
            either.next_after(at("2024-05-10T00:00:00Z")),
            Some(at("2024-05-12T00:00:00Z"))
        );
        let leap = Crontab::parse("0 0 29 2 *").expect("valid");
        assert_eq!(
            leap.next_after(at("2024-03-01T00:00:00Z")),
            Some(at("2028-02-29T00:00:00Z"))
        );
        let never = Crontab::parse("0 0 30 2 *").expect("valid");
        assert_eq!(never.next_after(at("2024-03-01T00:00:00Z")), None);
    }

    #[test]
    fn crontab_descriptors_and_errors() {
        let daily = Crontab::parse("@daily").expect("valid");
        assert_eq!(
            daily.next_after(at("2024-05-01T10:00:00Z")),
            Some(at("2024-05-02T00:00:00Z"))
        );
        let every = Crontab::parse("@every 1h30m").expect("valid");
        assert_eq!(
            every.next_after(at("2024-05-01T10:00:00.7Z")),
            Some(at("2024-05-01T11:30:00Z"))
        );
        assert_eq!(every.as_str(), "@every 1h30m");
        for bad in [
            "",
            "* * *",
            "* * * 22 *",
            "* * * * 8",
            "@fortnightly",
            "@every 10ms",
            "TZ=Europe/Berlin 0 * * * *",
        ] {
            assert!(Crontab::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn go_durations() {
        let ms = |text| parse_go_duration(text).map(|d| d.as_millis());
        assert_eq!(ms("3s"), Ok(3_000));
        assert_eq!(ms("1h30m"), Ok(5_400_000));
        assert_eq!(ms("1.5h"), Ok(5_400_000));
        assert_eq!(ms("250ms"), Ok(250));
        assert_eq!(ms("0"), Ok(0));
        for bad in ["", "3", "s", "-1s", "3 s", "1d"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn label_syntax() {
        assert!(check_label_key("app").is_ok());
        assert!(check_label_key("app.kubernetes.io/name").is_ok());
        assert!(check_label_key("Example.com/name").is_err());
        assert!(check_label_key("-app").is_err());
        assert!(check_label_key(&"a".repeat(64)).is_err());
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("v1.2_x-y").is_ok());
        assert!(check_label_value("has space").is_err());
    }

    #[test]
    fn problems_display_hook_binding_field_and_reason() {
        let problem = ConfigProblem {
            hook: "pods.sh".to_owned(),
            binding: Some("kubernetes[2] \"pods\"".to_owned()),
            field: "kind".to_owned(),
            reason: "kind is required".to_owned(),
        };
        assert_eq!(
            problem.to_string(),
            "hook \"pods.sh\": kubernetes[2] \"pods\": kind: kind is required"
        );
    }
}
