//! A hook's configuration as the hook declared it, mirroring shell-operator's
//! `configVersion: v1` schema. `hooks::config::validate` turns it into the normalized
//! configuration the engine runs.

use super::selector::{FieldRequirement, LabelSelector, NamespaceSelector, WatchEvent};
use serde::Serialize;
use std::fmt;

/// A `schedule` binding: run the hook on a crontab.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleBindingConfig {
    /// The binding name passed back in binding contexts.
    pub name: String,
    /// A crontab with 5 fields (minute precision) or 6 fields (seconds first), a
    /// descriptor or `@every DURATION`, optionally after `TZ=ZONE `; UTC without one.
    pub crontab: String,
    /// When true a failed run is logged and counted but not retried.
    pub allow_failure: bool,
    /// The named queue the run goes to; `None` means the `main` queue.
    pub queue: Option<String>,
    /// The group this binding belongs to; grouped bindings receive a `Group` context.
    pub group: Option<String>,
    /// kubernetes bindings whose snapshots are added to this binding's contexts.
    pub include_snapshots_from: Vec<String>,
}

/// A `kubernetes` binding: watch objects and run the hook on their events. The default
/// is what a binding declaring nothing but its name and kind means.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KubernetesBindingConfig {
    /// The binding name passed back in binding contexts.
    pub name: String,
    /// `apiVersion` of the objects, e.g. `apps/v1`; `None` picks the preferred version.
    pub api_version: Option<String>,
    /// The kind, case-insensitive; a plural or short name (`po`) is accepted too.
    pub kind: String,
    /// Which events run the hook. `None` means all three; an empty list means none:
    /// the binding only keeps a snapshot for other bindings to read.
    pub execute_hook_on_event: Option<Vec<WatchEvent>>,
    /// Whether the hook runs once with all existing objects at start (default true).
    pub execute_hook_on_synchronization: Option<bool>,
    /// Whether later bindings wait for this one's synchronization (default true).
    pub wait_for_synchronization: Option<bool>,
    /// When false only the jq filter results are kept, never the full objects
    /// (default true).
    pub keep_full_objects_in_memory: Option<bool>,
    /// Watch only objects with one of these names.
    pub name_selector: Option<Vec<String>>,
    /// Watch only objects whose labels match.
    pub label_selector: Option<LabelSelector>,
    /// Watch only objects whose fields match.
    pub field_selector: Option<Vec<FieldRequirement>>,
    /// Which namespaces to watch; `None` means every namespace.
    pub namespace: Option<NamespaceSelector>,
    /// A jq filter applied to each object; an event whose filter result did not change
    /// does not run the hook.
    pub jq_filter: Option<String>,
    /// When true a failed run is logged and counted but not retried.
    pub allow_failure: bool,
    /// The named queue the runs go to; `None` means the `main` queue.
    pub queue: Option<String>,
    /// The group this binding belongs to.
    pub group: Option<String>,
    /// kubernetes bindings whose snapshots are added to this binding's contexts.
    pub include_snapshots_from: Vec<String>,
}

/// One rule of an admission webhook (the `rules` of a ValidatingWebhookConfiguration).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct WebhookRule {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    pub operations: Vec<String>,
    /// API groups, `""` for the core group, `*` for all.
    pub api_groups: Vec<String>,
    /// API versions, `*` for all.
    pub api_versions: Vec<String>,
    /// Resources (plural), optionally with a subresource (`pods/status`).
    pub resources: Vec<String>,
    /// `Cluster`, `Namespaced` or `*`; `None` means `*`.
    pub scope: Option<String>,
}

/// A CEL expression the API server evaluates before it calls an admission webhook
/// (`matchConditions` of the webhook configuration, Kubernetes 1.28+).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct MatchCondition {
    /// A name unique within the binding.
    pub name: String,
    /// The CEL expression; the request is sent only when it evaluates to true.
    pub expression: String,
}

/// A `kubernetesValidating` or `kubernetesMutating` binding: answer admission reviews.
/// shell-operator reads both sections into one type as well.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AdmissionBindingConfig {
    /// The binding name passed back in binding contexts.
    pub name: String,
    /// The requests this webhook receives.
    pub rules: Vec<WebhookRule>,
    /// `Fail` (default) or `Ignore`: what the API server does when the hook errs.
    pub failure_policy: Option<String>,
    /// `None` (default) or `NoneOnDryRun`.
    pub side_effects: Option<String>,
    /// Only objects whose labels match.
    pub label_selector: Option<LabelSelector>,
    /// Only objects in matching namespaces.
    pub namespace: Option<NamespaceSelector>,
    /// How long the API server waits for an answer, 1 to 30 seconds (default 10).
    pub timeout_seconds: Option<u32>,
    /// CEL conditions the API server checks before sending a request.
    pub match_conditions: Vec<MatchCondition>,
    /// Mutating bindings only: `Never` (default) or `IfNeeded`, whether the API server
    /// calls the webhook again after later mutations.
    pub reinvocation_policy: Option<String>,
    /// Operon's extension: `Deny`, `Warn` or `DryRun` ([`Enforcement`]), what the
    /// hook's answer does to the request; unset, the engine's default applies.
    pub enforcement: Option<String>,
    /// The group this binding belongs to.
    pub group: Option<String>,
    /// kubernetes bindings whose snapshots are added to this binding's contexts.
    pub include_snapshots_from: Vec<String>,
}

/// What an admission binding's answer does to the request: `Deny` (the hook's answer is
/// the API server's), `Warn` (allowed; a denial or failure is shown as a warning, a
/// patch is not applied) or `DryRun` (allowed; the answer is only logged and counted).
/// Rolling a rule out from `DryRun` to `Deny` shows what it would deny first.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub enum Enforcement {
    /// The answer is the API server's: a denial denies, a patch is applied, a failure
    /// is code 500 (shell-operator's behaviour, the default).
    #[default]
    Deny,
    /// The request is allowed; a denial or a failure reaches the client as an admission
    /// warning (kubectl prints `Warning: ...`), and a patch is recorded, not applied.
    Warn,
    /// The request is allowed and the client sees nothing: what the hook answered is
    /// only logged and counted.
    DryRun,
}

impl Enforcement {
    /// Every value, in the order they are documented.
    pub const ALL: [Self; 3] = [Self::Deny, Self::Warn, Self::DryRun];

    /// The name a configuration spells it with.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "Deny",
            Self::Warn => "Warn",
            Self::DryRun => "DryRun",
        }
    }
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A value that is not one of [`Enforcement::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an enforcement: use Deny, Warn or DryRun")]
pub struct UnknownEnforcement(pub String);

impl std::str::FromStr for Enforcement {
    type Err = UnknownEnforcement;

    /// Exactly as spelled in [`Enforcement::as_str`]: the API server's enumerations are
    /// case-sensitive too, and a Hook object's schema takes only these.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|e| e.as_str() == text)
            .ok_or_else(|| UnknownEnforcement(text.to_owned()))
    }
}

/// One conversion a `kubernetesCustomResourceConversion` binding performs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ConversionRule {
    /// The source `apiVersion`, e.g. `example.com/v1alpha1`.
    pub from_version: String,
    /// The target `apiVersion`.
    pub to_version: String,
}

/// A `kubernetesCustomResourceConversion` binding: convert custom resources.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConversionBindingConfig {
    /// The binding name passed back in binding contexts.
    pub name: String,
    /// The CustomResourceDefinition whose objects are converted.
    pub crd_name: String,
    /// The conversions this hook can do; chains are found by the engine.
    pub conversions: Vec<ConversionRule>,
    /// The group this binding belongs to.
    pub group: Option<String>,
    /// kubernetes bindings whose snapshots are added to this binding's contexts.
    pub include_snapshots_from: Vec<String>,
}

/// Settings that apply to the whole hook.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HookSettings {
    /// The minimum time between two runs, in milliseconds (token bucket refill).
    pub execution_min_interval_ms: Option<u64>,
    /// How many runs may happen back to back before `execution_min_interval_ms` applies.
    pub execution_burst: Option<u32>,
    /// The wall-clock budget of one run in milliseconds (default 60 000).
    pub timeout_ms: Option<u64>,
}

/// Which of shell-operator's configuration formats a hook declared; it decides the shape
/// of the binding contexts the hook receives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum ConfigVersion {
    /// The legacy form without `configVersion` (`onKubernetesEvent`): v0 binding
    /// contexts (`resourceEvent`, `resourceNamespace`, `resourceKind`, `resourceName`),
    /// no Synchronization run, and no merging of queued runs, as shell-operator does.
    V0,
    /// `configVersion: v1`, and every wasm hook.
    #[default]
    V1,
}

/// A hook's configuration as declared: what a wasm hook's `configure` returns and what
/// a script hook's `--config` output is read into.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HookConfig {
    /// The format the configuration was written in.
    pub version: ConfigVersion,
    /// Run once at start; hooks run in ascending order, then by name.
    pub on_startup: Option<i32>,
    /// Crontab bindings.
    pub schedule: Vec<ScheduleBindingConfig>,
    /// Kubernetes watch bindings.
    pub kubernetes: Vec<KubernetesBindingConfig>,
    /// Validating admission webhook bindings.
    pub kubernetes_validating: Vec<AdmissionBindingConfig>,
    /// Mutating admission webhook bindings.
    pub kubernetes_mutating: Vec<AdmissionBindingConfig>,
    /// CustomResource conversion webhook bindings.
    pub kubernetes_conversion: Vec<ConversionBindingConfig>,
    /// Hook-wide settings.
    pub settings: Option<HookSettings>,
}

/// The sections of a configuration that hold indexed bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BindingKind {
    /// `schedule`.
    Schedule,
    /// `kubernetes`.
    Kubernetes,
    /// `kubernetesValidating`.
    Validating,
    /// `kubernetesMutating`.
    Mutating,
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
            Self::Mutating => "kubernetesMutating",
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
pub fn location(kind: BindingKind, index: usize, name: &str) -> String {
    let id = BindingId { kind, index };
    if name.is_empty() {
        id.to_string()
    } else {
        format!("{id} {name:?}")
    }
}

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

/// Problems found so far in one hook's configuration, all reported together at the end.
pub struct Problems<'h> {
    hook: &'h str,
    /// The problems, in the order they were found.
    pub list: Vec<ConfigProblem>,
}

impl<'h> Problems<'h> {
    /// No problems yet with `hook`'s configuration.
    pub fn new(hook: &'h str) -> Self {
        Self {
            hook,
            list: Vec::new(),
        }
    }

    /// One more problem: in `binding` (none for hook-wide fields), at `field`.
    pub fn push(
        &mut self,
        binding: Option<&str>,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) {
        self.list.push(ConfigProblem {
            hook: self.hook.to_owned(),
            binding: binding.map(str::to_owned),
            field: field.into(),
            reason: reason.into(),
        });
    }

    /// `value` when nothing was found, else every problem.
    pub fn finish<T>(self, value: T) -> Result<T, Vec<ConfigProblem>> {
        if self.list.is_empty() {
            Ok(value)
        } else {
            Err(self.list)
        }
    }
}
