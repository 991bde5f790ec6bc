//! The `kubernetes` and `schedule` bindings of global and module hooks, run by the hook
//! engine ([`operon_hooks::engine::Engine`]) like any shell-operator hook: one engine
//! for the global hooks, started once the global `onStartup` hooks ran, and one per
//! enabled module, started by its first ModuleRun after its `onStartup` hooks and
//! stopped when it is deleted (the operator waits for their Synchronization). Each run
//! sees the current values through `$VALUES_PATH` and `$CONFIG_VALUES_PATH`; the values
//! patches it writes go back to the operator ([`BindingPatch`]), which applies them
//! and runs the module (or converges, for global values) when they change the values.
//! The engine applies the run's kubernetes patches and metrics itself.
//!
//! As addon-operator's EnableScheduleBindings step, schedule bindings fire only once
//! their owner's Synchronization is done ([`BindingEngine::enable_schedules`]): a
//! crontab tick before that runs nothing. Lifecycle runs read the snapshots of the
//! hook's kubernetes bindings from the engine ([`lifecycle_snapshots`]).

use super::hooks::AddonHook;
use futures::future::BoxFuture;
use operon_cluster::Cluster;
use operon_data::model::{BindingContext, BindingType, HookConfig, HookInput, Snapshot};
use operon_hooks::engine::{Engine, HookEngineError, LoadedHook};
use operon_hooks::engine_set::{EngineSet, Registration};
use operon_hooks::load::{HookLoadError, configure};
use operon_hooks::metrics::Metrics;
use operon_hooks::{Hook, HookError, HookRun};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The values documents each owner's hooks see: `global` or a module name →
/// (values, config values).
pub(crate) type SharedValues = Arc<Mutex<BTreeMap<String, (Value, Value)>>>;

/// Values patches a binding run wrote, for the operator to apply.
#[derive(Debug)]
pub(crate) struct BindingPatch {
    /// The hook.
    pub(crate) hook: String,
    /// `None` for a global hook, else the module.
    pub(crate) module: Option<String>,
    /// Patches of the memory values.
    pub(crate) values_patch: Vec<json_patch::PatchOperation>,
    /// Patches of the config values.
    pub(crate) config_patch: Vec<json_patch::PatchOperation>,
}

/// An addon hook as the hook engine sees it: its shell-operator bindings only (the
/// lifecycle ones, `onStartup` included, belong to the operator's queue).
struct BoundHook {
    hook: AddonHook,
    /// `global` or the module's name: the key of its documents in `values`.
    owner: String,
    module: Option<String>,
    values: SharedValues,
    patches: tokio::sync::mpsc::UnboundedSender<BindingPatch>,
    /// Set once the owner's Synchronization is done: schedule contexts run from then.
    schedules: Arc<AtomicBool>,
}

impl BoundHook {
    /// Whether a schedule binding fired `context`: a Schedule context, or a Group one
    /// whose binding is one of the hook's schedules.
    fn fired_by_schedule(&self, context: &BindingContext) -> bool {
        match context.type_ {
            BindingType::Schedule => true,
            BindingType::Group => {
                let config = &self.hook.config;
                config.schedule.iter().any(|s| s.name == context.binding)
                    && !config.kubernetes.iter().any(|k| k.name == context.binding)
            }
            _ => false,
        }
    }
}

impl Hook for BoundHook {
    fn name(&self) -> &str {
        &self.hook.name
    }

    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        let config = HookConfig {
            on_startup: None,
            ..self.hook.config.clone()
        };
        Box::pin(async move { Ok(config) })
    }

    fn handle(&self, input: HookInput, timeout: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        Box::pin(async move {
            let mut input = input;
            if !self.schedules.load(Ordering::Acquire) {
                input
                    .binding_contexts
                    .retain(|c| !self.fired_by_schedule(c));
                if input.binding_contexts.is_empty() {
                    // A tick of a schedule not enabled yet: nothing runs.
                    let run = HookRun {
                        outcome: Ok(operon_data::model::HookOutput::default()),
                        patches: Vec::new(),
                        metrics: Vec::new(),
                        logs: Vec::new(),
                        stdout: String::new(),
                        stderr: String::new(),
                        elapsed: Duration::ZERO,
                    };
                    return (run, input);
                }
            }
            let (values, config) = self
                .values
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&self.owner)
                .cloned()
                .unwrap_or_else(|| (json!({}), json!({})));
            let (mut run, patches) = self.hook.run_input(&input, &values, &config, timeout).await;
            // A review answers the API server; it has no place to change values in, as
            // addon-operator has no webhook of module hooks at all.
            let review = input.binding_contexts.iter().any(|c| {
                matches!(
                    c.type_,
                    BindingType::Validating | BindingType::Mutating | BindingType::Conversion
                )
            });
            match patches {
                Ok((values_patch, config_patch)) if review => {
                    if !values_patch.is_empty() || !config_patch.is_empty() {
                        tracing::warn!(hook = %self.hook.name,
                            "values patches written while answering a review are ignored");
                    }
                }
                Ok((values_patch, config_patch)) => {
                    if !values_patch.is_empty() || !config_patch.is_empty() {
                        // The receiver is gone only when the operator stopped.
                        let _ = self.patches.send(BindingPatch {
                            hook: self.hook.name.clone(),
                            module: self.module.clone(),
                            values_patch,
                            config_patch,
                        });
                    }
                }
                Err(e) if run.outcome.is_ok() => run.outcome = Err(HookError::Output(Arc::new(e))),
                Err(_) => {}
            }
            (run, input)
        })
    }
}

/// Why the engine of an owner's kubernetes and schedule bindings cannot start. The
/// errors are boxed, as they are large, and handed out unboxed by
/// [`Error::source`](std::error::Error::source), so that a downcast finds their type.
#[derive(Debug)]
pub enum BindingsError {
    /// A hook did not give a configuration the engine can run.
    Load(Box<HookLoadError>),
    /// The engine's first lists failed.
    Start(Box<HookEngineError>),
}

impl std::fmt::Display for BindingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Load(e) => e.fmt(f),
            Self::Start(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BindingsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Load(e) => Some(&**e),
            Self::Start(e) => Some(&**e),
        }
    }
}

/// Where the engine of `module`'s hooks (`None`: the global hooks) comes from in an
/// [`EngineSet`]: `module NAME` or `global hooks`. [`owner_of_source`] reads it back.
pub fn engine_source(module: Option<&str>) -> String {
    match module {
        Some(module) => format!("module {module}"),
        None => GLOBAL_HOOKS_SOURCE.to_owned(),
    }
}

/// The source of the global hooks' engine.
const GLOBAL_HOOKS_SOURCE: &str = "global hooks";

/// The owner of an engine of an [`EngineSet`] with `source`, when it is one of the
/// operator's: `Some(Some(module))`, `Some(None)` for the global hooks.
pub fn owner_of_source(source: &str) -> Option<Option<&str>> {
    if source == GLOBAL_HOOKS_SOURCE {
        return Some(None);
    }
    source.strip_prefix("module ").map(Some)
}

/// A running hook engine for one owner's bindings (or none, for an owner without
/// bindings); stopped when dropped: no new run starts, a run in progress has 5 s.
pub(crate) struct BindingEngine {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    engine: Option<Arc<Engine>>,
    /// `(hook, binding)` of the kubernetes bindings whose Synchronization a ModuleRun
    /// waits for: those on the `main` queue and those with `waitForSynchronization`
    /// (addon-operator waits for no other).
    waited: Vec<(String, String)>,
    schedules: Arc<AtomicBool>,
    /// Keeps the engine on the debug socket while it runs.
    _shown: Option<Registration>,
}

impl BindingEngine {
    /// The engine of an owner whose hooks have no kubernetes or schedule binding.
    pub(crate) fn idle() -> Self {
        Self {
            stop: None,
            engine: None,
            waited: Vec::new(),
            schedules: Arc::new(AtomicBool::new(true)),
            _shown: None,
        }
    }

    /// Lets schedule bindings run: the owner's Synchronization is done.
    pub(crate) fn enable_schedules(&self) {
        self.schedules.store(true, Ordering::Release);
    }

    /// Stops schedule bindings from running: the owner is being deleted (its
    /// kubernetes bindings stay until its `afterDeleteHelm` hooks ran).
    pub(crate) fn disable_schedules(&self) {
        self.schedules.store(false, Ordering::Release);
    }

    /// Whether schedule bindings run.
    pub(crate) fn schedules_enabled(&self) -> bool {
        self.schedules.load(Ordering::Acquire)
    }

    /// The waited-for bindings whose Synchronization is not done yet, as
    /// `hook/binding`.
    pub(crate) fn pending_synchronization(&self) -> Vec<String> {
        let Some(engine) = &self.engine else {
            return Vec::new();
        };
        let mut pending = Vec::new();
        for hook in engine.hook_infos() {
            for binding in &hook.bindings {
                if binding.synchronized == Some(false)
                    && self
                        .waited
                        .iter()
                        .any(|(h, b)| *h == hook.name && *b == binding.name)
                {
                    pending.push(format!("{}/{}", hook.name, binding.name));
                }
            }
        }
        pending
    }
}

/// The snapshots a lifecycle run of `hook` carries: one per kubernetes binding of the
/// hook, by binding name, with the objects `engine` holds for it (none when its owner's
/// engine does not run: a run without live bindings), as addon-operator's
/// `KubernetesSnapshots` gives them.
pub(crate) fn lifecycle_snapshots(
    engine: Option<&BindingEngine>,
    hook: &AddonHook,
) -> Vec<Snapshot> {
    let held = engine
        .and_then(|e| e.engine.as_ref())
        .and_then(|e| e.hook_snapshot(&hook.name));
    match held {
        Some(snapshots) => snapshots
            .into_iter()
            .map(|s| Snapshot {
                binding: s.binding,
                objects: s.objects,
            })
            .collect(),
        None => hook
            .config
            .kubernetes
            .iter()
            .map(|k| Snapshot {
                binding: k.name.clone(),
                objects: Vec::new(),
            })
            .collect(),
    }
}

impl Drop for BindingEngine {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts an engine for the hooks of `hooks` that have kubernetes or schedule
/// bindings, or webhook bindings (which `operon serve` serves from this engine); `None`
/// when none has.
pub(crate) async fn start(
    hooks: &[AddonHook],
    module: Option<&str>,
    cluster: Arc<dyn Cluster>,
    metrics: Arc<Metrics>,
    values: SharedValues,
    patches: tokio::sync::mpsc::UnboundedSender<BindingPatch>,
    shown: &EngineSet,
) -> Result<Option<BindingEngine>, BindingsError> {
    let owner = module.unwrap_or("global").to_owned();
    let mut loaded: Vec<LoadedHook> = Vec::new();
    let mut waited = Vec::new();
    let schedules = Arc::new(AtomicBool::new(false));
    for hook in hooks.iter().filter(|h| {
        let config = &h.config;
        !config.kubernetes.is_empty()
            || !config.schedule.is_empty()
            || !config.kubernetes_validating.is_empty()
            || !config.kubernetes_mutating.is_empty()
            || !config.kubernetes_conversion.is_empty()
    }) {
        for binding in &hook.config.kubernetes {
            let main = binding.queue.as_deref().is_none_or(|q| q == "main");
            if main || binding.wait_for_synchronization.unwrap_or(true) {
                waited.push((hook.name.clone(), binding.name.clone()));
            }
        }
        let bound: Arc<dyn Hook> = Arc::new(BoundHook {
            hook: hook.clone(),
            owner: owner.clone(),
            module: module.map(str::to_owned),
            values: values.clone(),
            patches: patches.clone(),
            schedules: schedules.clone(),
        });
        let (ready, _) = configure(bound, cluster.as_ref())
            .await
            .map_err(|e| BindingsError::Load(Box::new(e)))?;
        loaded.push(ready);
    }
    if loaded.is_empty() {
        return Ok(None);
    }
    let engine = Arc::new(Engine::new(loaded, cluster, metrics));
    engine
        .start()
        .await
        .map_err(|e| BindingsError::Start(Box::new(e)))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = engine.clone();
    tokio::spawn(async move {
        running
            .run_until(
                async {
                    let _ = stopped.await;
                },
                Duration::from_secs(5),
                move |record| {
                    if let Err(e) = &record.run.outcome {
                        tracing::warn!(hook = %record.hook, "binding run failed: {e}");
                    }
                },
            )
            .await;
    });
    let source = engine_source(module);
    Ok(Some(BindingEngine {
        stop: Some(stop),
        _shown: Some(shown.register(source, engine.clone())),
        engine: Some(engine),
        waited,
        schedules,
    }))
}
