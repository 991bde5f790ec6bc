//! Hook configuration: the checks that turn a hook's [`HookConfig`](operon_data::model::HookConfig) into the
//! [`ValidConfig`] the engine runs.
//!
//! The two steps are separate on purpose. A wasm hook hands over a typed
//! [`HookConfig`](operon_data::model::HookConfig); a script hook prints shell-operator YAML or JSON, which
//! [`crate::shell_operator::config::parse`] reads checking only its *shape* (field names and types).
//! Every rule about *meaning* lives in [`validate`], so both kinds of hooks are held
//! to the same rules. Both report every problem they find at once, each naming the
//! hook, the binding and the field in shell-operator's spelling
//! (`kubernetes[2] "pods": labelSelector.matchExpressions[0].values: ...`), so a hook
//! author fixes a configuration in one round instead of one error per restart.
//!
//! [`ValidConfig`] is what the engine reads: defaults applied, group members added to
//! `includeSnapshotsFrom`, crontabs parsed into [`Schedule`]s, jq filters compiled,
//! and every binding given a stable [`BindingId`].

mod validate;

pub use operon_data::model::config::{BindingId, BindingKind, ConfigProblem};
pub use validate::validate;

use operon_cluster::ClusterError;
use operon_data::model::{
    ConfigVersion, FieldRequirement, LabelSelector, MatchCondition, NamespaceSelector, WatchEvent,
    WebhookRule,
};
pub use operon_data::model::{ConversionRule, Enforcement};
use operon_data::schedule::Schedule;
use operon_jq as jq;
use std::time::Duration;
/// The queue a binding without `queue` uses.
pub const MAIN_QUEUE: &str = "main";

/// A hook's run budget when `settings` does not give one. shell-operator has no
/// timeout at all, so a stuck hook blocks its queue forever; a minute is far above what
/// a hook should take and still frees the queue.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the API server waits for a validating hook when the binding does not say
/// (the Kubernetes and shell-operator default).
pub(crate) const DEFAULT_WEBHOOK_TIMEOUT_SECONDS: u32 = 10;

/// What [`validate`] calls to check a kubernetes binding's `apiVersion` (when given)
/// and `kind`: `Ok` when the cluster knows them, otherwise why not.
pub(crate) type KindExists<'a> = dyn Fn(Option<&str>, &str) -> Result<(), ClusterError> + 'a;

/// A kind-checker that accepts every kind, for checking a configuration without a
/// cluster (`kind` is then only checked to be non-empty).
pub fn any_kind(_api_version: Option<&str>, _kind: &str) -> Result<(), ClusterError> {
    Ok(())
}

/// A hook's configuration after [`validate`]: every option the hook gave, with defaults
/// applied, ready for the engine.
#[derive(Debug, Clone)]
pub struct ValidConfig {
    /// The hook's name, kept so the config can be reported on its own.
    pub hook: String,
    /// The format it was declared in, which decides the shape of its binding contexts.
    pub(crate) version: ConfigVersion,
    /// What is accepted but will have no effect (e.g. a hook with settings and no
    /// bindings), for the operator to see.
    pub warnings: Vec<ConfigProblem>,
    /// The `onStartup` order: hooks run at start in ascending order, then by name.
    /// `None` when the hook has no `onStartup` binding.
    pub on_startup: Option<i32>,
    /// `schedule` bindings, in configuration order.
    pub schedules: Vec<ScheduleBinding>,
    /// `kubernetes` bindings, in configuration order.
    pub kubernetes: Vec<KubernetesBinding>,
    /// `kubernetesValidating` bindings, in configuration order.
    pub validating: Vec<AdmissionBinding>,
    /// `kubernetesMutating` bindings, in configuration order.
    pub mutating: Vec<AdmissionBinding>,
    /// `kubernetesCustomResourceConversion` bindings, in configuration order.
    pub conversions: Vec<ConversionBinding>,
    /// Hook-wide settings.
    pub settings: Settings,
}

impl ValidConfig {
    /// The kubernetes binding called `name`; snapshots are looked up this way.
    pub(crate) fn kubernetes_binding(&self, name: &str) -> Option<&KubernetesBinding> {
        self.kubernetes.iter().find(|b| b.name == name)
    }

    /// The name of the binding `id`, if the hook has it.
    #[cfg(test)]
    pub(crate) fn binding_name(&self, id: BindingId) -> Option<&str> {
        let index = id.index;
        match id.kind {
            BindingKind::Schedule => self.schedules.get(index).map(|b| b.name.as_str()),
            BindingKind::Kubernetes => self.kubernetes.get(index).map(|b| b.name.as_str()),
            BindingKind::Validating => self.validating.get(index).map(|b| b.name.as_str()),
            BindingKind::Mutating => self.mutating.get(index).map(|b| b.name.as_str()),
            BindingKind::Conversion => self.conversions.get(index).map(|b| b.name.as_str()),
        }
    }
}

/// A validated `schedule` binding.
#[derive(Debug, Clone)]
pub struct ScheduleBinding {
    /// The name passed back in binding contexts.
    pub name: String,
    /// When the binding fires.
    pub(crate) crontab: Schedule,
    /// Whether a failed run is counted and dropped instead of retried.
    pub(crate) allow_failure: bool,
    /// The queue its runs go to (default [`MAIN_QUEUE`]).
    pub queue: String,
    /// The group the binding belongs to; its contexts are then `Group` contexts.
    pub(crate) group: Option<String>,
    /// The kubernetes bindings whose snapshots its contexts carry: the ones the hook
    /// named, then every kubernetes binding of its group, without repeats.
    pub(crate) include_snapshots_from: Vec<String>,
}

/// The watch events a kubernetes binding runs its hook on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct EventSet {
    /// `Added`.
    pub(crate) added: bool,
    /// `Modified`.
    pub(crate) modified: bool,
    /// `Deleted`.
    pub(crate) deleted: bool,
}

impl EventSet {
    /// Every event: what a binding without `executeHookOnEvent` runs on.
    pub(crate) const ALL: Self = Self {
        added: true,
        modified: true,
        deleted: true,
    };

    /// No event: a binding that only keeps a snapshot for others.
    pub(crate) const NONE: Self = Self {
        added: false,
        modified: false,
        deleted: false,
    };

    /// Whether `event` runs the hook.
    pub(crate) fn contains(self, event: WatchEvent) -> bool {
        match event {
            WatchEvent::Added => self.added,
            WatchEvent::Modified => self.modified,
            WatchEvent::Deleted => self.deleted,
        }
    }

    /// Whether no event runs the hook.
    #[cfg(test)]
    pub(crate) fn is_empty(self) -> bool {
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
    pub(crate) id: BindingId,
    /// The name passed back in binding contexts and used by `includeSnapshotsFrom`.
    pub name: String,
    /// `apiVersion` of the objects; `None` picks the preferred version.
    pub api_version: Option<String>,
    /// The kind as the hook wrote it (case-insensitive; plurals and short names are
    /// accepted, the cluster resolves them).
    pub kind: String,
    /// The events that run the hook (default: all three).
    pub(crate) execute_hook_on_event: EventSet,
    /// Whether the hook runs once with every existing object at start (default true).
    pub(crate) execute_hook_on_synchronization: bool,
    /// Whether the hook's later bindings wait for this binding's Synchronization run
    /// (default true; `false` only on a named queue).
    pub(crate) wait_for_synchronization: bool,
    /// Whether contexts and snapshots carry the full objects or only filter results
    /// (default true).
    pub(crate) keep_full_objects_in_memory: bool,
    /// Only objects with one of these names; `None` for any name.
    pub(crate) name_selector: Option<Vec<String>>,
    /// Only objects whose labels match; `matchLabels` keys are unique and sorted.
    pub label_selector: Option<LabelSelector>,
    /// Only objects whose fields match (all requirements hold); empty for any.
    pub(crate) field_selector: Vec<FieldRequirement>,
    /// Which namespaces to watch; `None` for every namespace.
    pub namespace: Option<NamespaceSelector>,
    /// The jq filter applied to every object, compiled once here.
    pub(crate) jq_filter: Option<jq::Filter>,
    /// Whether a failed run is counted and dropped instead of retried.
    pub(crate) allow_failure: bool,
    /// The queue its event runs go to (default [`MAIN_QUEUE`]); Synchronization runs
    /// always go to the main queue, as in shell-operator.
    pub queue: String,
    /// The group the binding belongs to.
    pub(crate) group: Option<String>,
    /// The kubernetes bindings whose snapshots its contexts carry (the ones named, then
    /// the group's, without repeats).
    pub(crate) include_snapshots_from: Vec<String>,
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

/// `sideEffects` of an admission webhook: what the API server may assume about calling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SideEffects {
    /// Calling the webhook changes nothing (the default); dry-run requests are sent too.
    None,
    /// The webhook changes nothing when the request is a dry run (`dryRun: true`).
    NoneOnDryRun,
}

impl SideEffects {
    /// The name the webhook configuration uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::NoneOnDryRun => "NoneOnDryRun",
        }
    }
}

/// `reinvocationPolicy` of a mutating webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReinvocationPolicy {
    /// Called once per admission (the default).
    Never,
    /// Called again when a later mutating webhook changed the object.
    IfNeeded,
}

impl ReinvocationPolicy {
    /// The name the MutatingWebhookConfiguration uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Never => "Never",
            Self::IfNeeded => "IfNeeded",
        }
    }
}

/// How many `matchConditions` the API server accepts per webhook.
pub(crate) const MAX_MATCH_CONDITIONS: usize = 64;

/// A validated `kubernetesValidating` or `kubernetesMutating` binding.
#[derive(Debug, Clone)]
pub struct AdmissionBinding {
    /// Stable identity (`kubernetesValidating[i]` or `kubernetesMutating[i]`).
    pub(crate) id: BindingId,
    /// The webhook name (a fully qualified domain name) and binding context name.
    pub name: String,
    /// The requests the webhook receives; a rule without `scope` means `*`.
    pub rules: Vec<WebhookRule>,
    /// What the API server does when the hook fails (default [`FailurePolicy::Fail`]).
    pub failure_policy: FailurePolicy,
    /// The webhook's `sideEffects` (default [`SideEffects::None`]).
    pub side_effects: SideEffects,
    /// The webhook's `objectSelector`.
    pub label_selector: Option<LabelSelector>,
    /// The webhook's `namespaceSelector` (from `namespace.labelSelector`).
    pub namespace_label_selector: Option<LabelSelector>,
    /// How long the API server waits, 1 to 30 seconds (default 10).
    pub timeout_seconds: u32,
    /// CEL conditions the API server evaluates before calling (sent as they are).
    pub match_conditions: Vec<MatchCondition>,
    /// For mutating bindings, whether the API server calls again after later
    /// mutations (default [`ReinvocationPolicy::Never`]); `None` for validating ones.
    pub reinvocation_policy: Option<ReinvocationPolicy>,
    /// Operon's `enforcement`: what the answer does to the request. `None` when the
    /// binding does not say, so that `operon serve --webhook-enforcement` decides.
    pub enforcement: Option<Enforcement>,
    /// The kubernetes bindings whose snapshots its contexts carry.
    pub(crate) include_snapshots_from: Vec<String>,
}

impl AdmissionBinding {
    /// Whether this is a `kubernetesMutating` binding.
    pub fn is_mutating(&self) -> bool {
        self.id.kind == BindingKind::Mutating
    }

    /// The enforcement its answers get: its own, else `default` (the engine's).
    pub fn enforcement_or(&self, default: Enforcement) -> Enforcement {
        self.enforcement.unwrap_or(default)
    }
}

/// A validated `kubernetesCustomResourceConversion` binding.
#[derive(Debug, Clone)]
pub struct ConversionBinding {
    /// The binding context name.
    pub name: String,
    /// The CustomResourceDefinition (`<plural>.<group>`) whose objects are converted.
    pub crd_name: String,
    /// The conversion steps this hook performs; the engine chains them.
    pub conversions: Vec<ConversionRule>,
    /// The kubernetes bindings whose snapshots its contexts carry.
    pub(crate) include_snapshots_from: Vec<String>,
}

/// `settings.executionMinInterval` and `settings.executionBurst`: a token bucket
/// throttling the hook's runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExecutionRate {
    /// The time one token takes to come back.
    pub(crate) min_interval: Duration,
    /// How many runs may happen back to back (default 1).
    pub(crate) burst: u32,
}

/// Hook-wide settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Throttling of the hook's runs; `None` runs it as often as tasks arrive.
    pub(crate) execution_rate: Option<ExecutionRate>,
    /// The wall-clock budget of one run (default 60 s).
    pub timeout: Duration,
}
