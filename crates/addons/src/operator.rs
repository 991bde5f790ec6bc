//! The task queue that converges modules, with addon-operator's lifecycle: global
//! `onStartup` hooks, then a convergence (`beforeAll` hooks, discovery, ModuleDelete
//! for each disabled module that has a release, ModuleRun for each enabled one,
//! `afterAll` hooks), then changes: a change of the ConfigMap or of a ModuleConfig
//! (`config_sources`) to `global` or to an enabled flag converges again, a
//! change to one module's section runs that module; an
//! `afterHelm` hook that changes its module's values runs the module again, an
//! `afterAll` hook that changes the global values converges again.
//!
//! Unlike addon-operator, a failed ModuleRun or ModuleDelete does not hold the queue:
//! it is retried after a backoff (5 s doubling to 32 s, shell-operator's) while the
//! other modules go on. A failed global task (a global hook, discovery) does hold it,
//! as the modules depend on the global values. The task bodies are in the private
//! `tasks` module (the binding engines' phases in `sync`), the state they share is
//! [`Operator`].

use super::AddonError;
use super::apply::ObjectWriter;
use super::bindings::{BindingEngine, BindingPatch, SharedValues};
use super::config::{ConfigMapRef, ConfigValues};
use super::config_sources::ModuleConfigs;
use super::hooks::{self, AddonHook, Lifecycle, Owner};
use super::layout::Layout;
use super::metrics::ModuleMetrics;
use super::module_config::SettingsRules;
use super::render::Renderer;
use super::requirements::Platform;
use super::status::{ModuleState, QueueView};
use super::values::{Section, Source};
use operon_cluster::{Event, EventStream, Selector};
use operon_data::model::WatchEvent;
use operon_hooks::engine_set::EngineSet;
use operon_hooks::metrics::Metrics;
use operon_script::ScriptSandbox;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the operator runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The modules directory.
    pub modules_dir: PathBuf,
    /// The global hooks directory, if any.
    pub global_hooks_dir: Option<PathBuf>,
    /// Modules pulled from `oci://` references, read after the directories.
    pub sources: Option<super::sources::ModuleSources>,
    /// The ConfigMap of config values.
    pub config_map: ConfigMapRef,
    /// Renders charts.
    pub renderer: Renderer,
    /// The deadline of each hook and `enabled` program run.
    pub hook_timeout: Duration,
    /// The first retry delay of a failed task.
    pub retry_first: Duration,
    /// The longest retry delay.
    pub retry_max: Duration,
}

/// One task of the queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Task {
    /// Runs one global hook for a lifecycle binding.
    GlobalHookRun {
        /// The binding.
        binding: Lifecycle,
        /// The hook's name.
        hook: String,
    },
    /// Reads the ConfigMap, decides which modules are enabled and queues their
    /// ModuleRun and ModuleDelete tasks and the `afterAll` hooks.
    DiscoverModules,
    /// Applies the CRDs of a module's `crds/` (a module just enabled), before its
    /// ModuleRun.
    ModuleEnsureCrds {
        /// The module.
        module: String,
    },
    /// `onStartup` (first run only), the Synchronization of its kubernetes bindings
    /// (first run only), `beforeHelm`, render and apply, `afterHelm`.
    ModuleRun {
        /// The module.
        module: String,
    },
    /// `beforeDeleteHelm`, delete the release's objects, `afterDeleteHelm`.
    ModuleDelete {
        /// The module.
        module: String,
    },
    /// Deletes the release of a module whose directory is gone (no hooks: it has none
    /// any more).
    ModulePurge {
        /// The module.
        module: String,
    },
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::GlobalHookRun { binding, hook } => {
                write!(f, "GlobalHookRun:{}:{hook}", binding.name())
            }
            Self::DiscoverModules => f.write_str("DiscoverModules"),
            Self::ModuleEnsureCrds { module } => write!(f, "ModuleEnsureCRDs:{module}"),
            Self::ModuleRun { module } => write!(f, "ModuleRun:{module}"),
            Self::ModuleDelete { module } => write!(f, "ModuleDelete:{module}"),
            Self::ModulePurge { module } => write!(f, "ModulePurge:{module}"),
        }
    }
}

impl Task {
    /// Whether a failure of this task holds the queue (global tasks) or only this
    /// module (module tasks).
    pub(crate) fn holds_the_queue(&self) -> bool {
        matches!(self, Self::GlobalHookRun { .. } | Self::DiscoverModules)
    }
}

/// What the queue reports as it runs.
#[derive(Debug, Clone)]
pub enum QueueEvent {
    /// A task starts; `waiting` is the rest of the queue.
    Started {
        /// The task.
        task: Task,
        /// The tasks after it, in order.
        waiting: Vec<Task>,
    },
    /// A task ended.
    Finished {
        /// The task.
        task: Task,
        /// What it did, or why it failed.
        result: Result<String, String>,
        /// How long it ran.
        elapsed: Duration,
        /// When it failed: the delay before it runs again.
        retry_in: Option<Duration>,
    },
    /// The ConfigMap changed; `queued` is what the change queued.
    ConfigChanged {
        /// The tasks queued.
        queued: Vec<Task>,
    },
    /// A module's objects were applied after a ConfigMap change, `latency` after the
    /// change was seen.
    ConvergedAfterChange {
        /// The module.
        module: String,
        /// From the watch event to the end of the apply.
        latency: Duration,
    },
    /// The ConfigMap holds invalid values; nothing was queued.
    ConfigRejected {
        /// Why.
        reason: String,
    },
    /// A ModuleConfig changed (or was deleted); `queued` is what the change queued.
    ModuleConfigChanged {
        /// The ModuleConfig (several, comma-separated, after a re-list).
        name: String,
        /// The tasks queued.
        queued: Vec<Task>,
    },
    /// A ModuleConfig's spec is refused; its module keeps what it had.
    ModuleConfigRefused {
        /// The ModuleConfig.
        name: String,
        /// Every problem, each naming its field.
        reason: String,
    },
    /// A kubernetes or schedule binding run changed values; `queued` is what that
    /// queued.
    ValuesChanged {
        /// The hook.
        hook: String,
        /// The tasks queued.
        queued: Vec<Task>,
    },
    /// A kubernetes or schedule binding run wrote values patches that were refused.
    PatchRejected {
        /// The hook.
        hook: String,
        /// Why.
        reason: String,
    },
}

/// The state the tasks share.
pub struct Operator {
    pub(super) settings: Settings,
    pub(super) layout: Layout,
    pub(super) global_hooks: Vec<AddonHook>,
    pub(super) module_hooks: BTreeMap<String, Vec<AddonHook>>,
    pub(super) global: Section,
    pub(super) modules: BTreeMap<String, Section>,
    /// The config values in use: the ConfigMap's with the ModuleConfigs' over them.
    pub(super) config: ConfigValues,
    /// The ConfigMap's own config values.
    pub(super) config_map: ConfigValues,
    /// The ModuleConfig objects, their checks and their statuses.
    pub(super) module_configs: ModuleConfigs,
    /// The modules enabled by the last discovery, in module order.
    pub(super) enabled: Vec<String>,
    /// Modules whose `onStartup` hooks ran since they were last enabled.
    pub(super) started: BTreeSet<String>,
    pub(super) sandbox: ScriptSandbox,
    pub(super) writer: ObjectWriter,
    pub(super) metrics: ModuleMetrics,
    pub(super) queue: VecDeque<Task>,
    /// Failed module tasks waiting for their retry time.
    pub(super) retries: Vec<(Instant, Task)>,
    /// A failed global task holds the queue until then.
    pub(super) hold_until: Option<Instant>,
    /// Consecutive failures per task, for the backoff.
    pub(super) failures: BTreeMap<Task, u32>,
    /// Dry run: hooks run and change values in memory only (no kubernetes patches, no
    /// ConfigMap writes), and ModuleRun and ModuleDelete report what they would change.
    pub(super) dry_run: bool,
    /// When a ConfigMap change was seen, per module it queued: for the latency report.
    pub(super) changed_at: BTreeMap<String, Instant>,
    pub(super) on_event: Box<dyn Fn(&QueueEvent) + Send + Sync>,
    /// What binding runs see as values, refreshed after every change.
    pub(super) shared: SharedValues,
    pub(super) binding_tx: tokio::sync::mpsc::UnboundedSender<BindingPatch>,
    /// Taken by [`Operator::run_until`] while it runs.
    pub(super) binding_rx: Option<tokio::sync::mpsc::UnboundedReceiver<BindingPatch>>,
    /// The hook engines of the global hooks' and the enabled modules' bindings, which
    /// run only in [`Operator::run_until`].
    pub(super) engines: BTreeMap<String, BindingEngine>,
    pub(super) bindings_live: bool,
    /// `<moduleKey>Enabled` flags global hooks set, by module key.
    pub(super) dynamic_enabled: BTreeMap<String, bool>,
    pub(super) hook_metrics: Arc<Metrics>,
    /// Modules whose CRDs were applied since they were last enabled.
    pub(super) crds_ensured: BTreeSet<String>,
    /// What module requirements are checked against.
    pub(super) platform: Platform,
    /// Each module's state as the last discovery decided it, in module order.
    pub(super) states: Vec<ModuleState>,
    /// What the queue looks like, for whoever watches it.
    pub(super) view: QueueView,
    /// Where the binding engines and the lifecycle runs are shown (the debug socket of
    /// `operon serve`).
    pub(super) shown: EngineSet,
}

/// The layout of `settings`: its directories, then its module sources pulled (those
/// that cannot be had in [`Layout::unavailable`]).
pub async fn read_layout(settings: &Settings) -> Result<Layout, AddonError> {
    let Some(sources) = &settings.sources else {
        return Layout::read(&settings.modules_dir, settings.global_hooks_dir.as_deref());
    };
    let (pulled, unavailable) = sources.pull().await;
    let mut layout = Layout::read_with_sources(
        &settings.modules_dir,
        &pulled,
        settings.global_hooks_dir.as_deref(),
    )?;
    layout.unavailable.extend(unavailable);
    Ok(layout)
}

impl Operator {
    /// Reads the layout, loads and configures every hook, reads the ConfigMap through
    /// `writer`'s cluster and queues the startup tasks: global `onStartup` hooks, then a
    /// convergence.
    pub async fn new(
        settings: Settings,
        sandbox: ScriptSandbox,
        writer: ObjectWriter,
        on_event: impl Fn(&QueueEvent) + Send + Sync + 'static,
    ) -> Result<Self, AddonError> {
        let layout = read_layout(&settings).await?;
        let global_hooks = match &layout.global.hooks_dir {
            Some(dir) => hooks::load_dir(&sandbox, dir, Owner::Global, "global").await?,
            None => Vec::new(),
        };
        let mut module_hooks = BTreeMap::new();
        let mut modules = BTreeMap::new();
        for module in &layout.modules {
            let hooks = match &module.hooks_dir {
                Some(dir) => {
                    hooks::load_dir(
                        &sandbox,
                        dir,
                        Owner::Module(module.values_key.clone()),
                        &module.name,
                    )
                    .await?
                }
                None => Vec::new(),
            };
            module_hooks.insert(module.name.clone(), hooks);
            let section_of =
                |values: &Value| values.get(&module.values_key).cloned().unwrap_or(json!({}));
            let section = Section::new(
                &module.values_key,
                &format!("module {}", module.name),
                vec![
                    (Source::CommonValues, section_of(&module.common_values)),
                    (Source::ModuleValues, section_of(&module.static_values)),
                ],
                module.config_schema.as_ref(),
                module.values_schema.as_ref(),
            )?;
            modules.insert(module.name.clone(), section);
        }
        let global = Section::new(
            "global",
            "global",
            vec![(
                Source::CommonValues,
                layout
                    .common_values
                    .get("global")
                    .cloned()
                    .unwrap_or(json!({})),
            )],
            layout.global.config_schema.as_ref(),
            layout.global.values_schema.as_ref(),
        )?;
        let metrics = ModuleMetrics::new().map_err(AddonError::ModuleMetrics)?;
        let hook_metrics = Arc::new(Metrics::new().map_err(AddonError::HookMetricsRegistry)?);
        let (binding_tx, binding_rx) = tokio::sync::mpsc::unbounded_channel();
        let platform = Platform::new(writer.kubernetes_version().await);
        let module_configs = ModuleConfigs::new(SettingsRules::new(&layout)?);
        let mut operator = Self {
            settings,
            layout,
            global_hooks,
            module_hooks,
            global,
            modules,
            config: ConfigValues::default(),
            config_map: ConfigValues::default(),
            module_configs,
            enabled: Vec::new(),
            started: BTreeSet::new(),
            sandbox,
            writer,
            metrics,
            queue: VecDeque::new(),
            retries: Vec::new(),
            hold_until: None,
            dry_run: false,
            failures: BTreeMap::new(),
            changed_at: BTreeMap::new(),
            on_event: Box::new(on_event),
            shared: SharedValues::default(),
            binding_tx,
            binding_rx: Some(binding_rx),
            engines: BTreeMap::new(),
            bindings_live: false,
            dynamic_enabled: BTreeMap::new(),
            hook_metrics,
            crds_ensured: BTreeSet::new(),
            platform,
            states: Vec::new(),
            view: QueueView::default(),
            shown: EngineSet::default(),
        };
        let config_map = operator.read_config_map().await?;
        operator.check_config_map(&config_map)?;
        operator.config_map = config_map;
        // Its watch starts again in `run_until`, which lists again.
        operator.read_module_configs().await?;
        operator.take_config(operator.module_configs.over(&operator.config_map));
        for hook in hooks::with_binding(&operator.global_hooks, Lifecycle::OnStartup) {
            operator.queue.push_back(Task::GlobalHookRun {
                binding: Lifecycle::OnStartup,
                hook: hook.name.clone(),
            });
        }
        operator.queue_convergence();
        Ok(operator)
    }

    /// Turns the dry run on or off: hooks change values in memory only, and module
    /// tasks report the diff they would apply instead of applying it.
    pub fn set_dry_run(&mut self, dry_run: bool) {
        self.dry_run = dry_run;
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The metrics.
    pub fn metrics(&self) -> &ModuleMetrics {
        &self.metrics
    }

    /// The metrics hooks emitted (`$METRICS_PATH`), lifecycle and binding runs alike.
    pub fn hook_metrics(&self) -> &Metrics {
        &self.hook_metrics
    }

    /// Reports to `metrics` instead of the operator's own registry: the module metrics
    /// are registered there and hooks' runs and metrics go there (`operon serve`'s
    /// `/metrics`). Call it before [`Operator::run_until`].
    pub fn report_to(&mut self, metrics: Arc<Metrics>) -> Result<(), AddonError> {
        self.metrics
            .register_in(metrics.registry())
            .map_err(AddonError::RegisterModuleMetrics)?;
        self.hook_metrics = metrics;
        Ok(())
    }

    /// Shows the hooks' binding engines and lifecycle runs in `set` from now on (call
    /// it before [`Operator::run_until`]): `operon hook history` and `operon debug hook`
    /// see them.
    pub fn show_hooks_in(&mut self, set: EngineSet) {
        self.shown = set;
    }

    /// Publishes the queue to `view` from now on (one made before the operator, say).
    pub fn publish_to(&mut self, view: QueueView) {
        self.view = view;
        // A new operator (a replica that took over) converges afresh.
        self.view.update(|p| p.converged = false);
        self.publish(None);
    }

    /// Publishes the queue's state to the view given to [`Operator::publish_to`].
    pub(super) fn publish(&self, running: Option<&Task>) {
        self.view.update(|p| {
            p.running = running.map(|t| (t.clone(), Instant::now()));
            p.waiting = self.queue.iter().cloned().collect();
            p.retries = self
                .retries
                .iter()
                .map(|(at, t)| (t.clone(), *at, self.failures.get(t).copied().unwrap_or(0)))
                .collect();
            p.held_until = self.hold_until;
            p.enabled = self.enabled.clone();
            p.states = self.states.clone();
        });
    }

    /// The modules enabled by the last discovery, in order.
    pub fn enabled_modules(&self) -> &[String] {
        &self.enabled
    }

    /// Every module's state as the last discovery decided it, in module order (empty
    /// before the first discovery).
    pub fn module_states(&self) -> &[ModuleState] {
        &self.states
    }

    /// Checks `kubernetes` requirements against `version` instead of what the cluster
    /// answered (the local cluster stands for
    /// [`LOCAL_KUBERNETES_VERSION`](super::requirements::LOCAL_KUBERNETES_VERSION)).
    pub fn set_kubernetes_version(&mut self, version: semver::Version) {
        self.platform.kubernetes = Ok(version);
    }

    /// Runs the queued tasks up to and including the first discovery (global
    /// `onStartup` and `beforeAll` hooks, then DiscoverModules) and leaves the rest
    /// queued; returns the tasks that failed.
    pub async fn drain_until_discovered(&mut self) -> Vec<(Task, String)> {
        let mut failed = Vec::new();
        while let Some(task) = self.queue.pop_front() {
            let discovery = task == Task::DiscoverModules;
            if let Err(e) = self.run_task(task.clone()).await {
                failed.push((task.clone(), e));
                if task.holds_the_queue() {
                    self.retries.retain(|(_, t)| *t != task);
                    self.queue.retain(|t| *t != task);
                }
            }
            if discovery {
                break;
            }
        }
        failed
    }

    /// The tasks waiting, in order.
    pub(crate) fn queued(&self) -> Vec<Task> {
        self.queue.iter().cloned().collect()
    }

    /// The global values.
    pub fn global_values(&self) -> Result<Value, AddonError> {
        Ok(self.global.compute()?.values)
    }

    /// `module`'s values with the source of each leaf.
    pub fn module_values(&self, module: &str) -> Result<super::values::Computed, AddonError> {
        self.section(module)?.compute()
    }

    /// Checks `module`'s values for rendering (`x-required-for-helm` included), as a
    /// ModuleRun does after its `beforeHelm` hooks.
    pub fn check_for_helm(&self, module: &str) -> Result<(), AddonError> {
        self.section(module)?.check_for_helm()
    }

    /// The document hooks, `enabled` programs and charts of `module` see:
    /// `{"global": ..., "<moduleKey>": ...}`, with `global.enabledModules`.
    pub fn values_document(&self, module: &str) -> Result<Value, AddonError> {
        let section = self.section(module)?;
        let mut global = self.global.compute()?.values;
        global["enabledModules"] = json!(self.enabled);
        Ok(json!({"global": global, (section.key.clone()): section.compute()?.values}))
    }

    /// The config values `module` sees: `{"global": ..., "<moduleKey>": ...}`.
    pub(crate) fn config_document(&self, module: &str) -> Result<Value, AddonError> {
        let section = self.section(module)?;
        Ok(json!({"global": self.global.config(), (section.key.clone()): section.config()}))
    }

    pub(super) fn section(&self, module: &str) -> Result<&Section, AddonError> {
        self.modules
            .get(module)
            .ok_or_else(|| AddonError::UnknownModule(module.to_owned()))
    }

    /// Queues `beforeAll` hooks, discovery (which queues the rest).
    pub(super) fn queue_convergence(&mut self) {
        for hook in hooks::with_binding(&self.global_hooks, Lifecycle::BeforeAll) {
            self.queue.push_back(Task::GlobalHookRun {
                binding: Lifecycle::BeforeAll,
                hook: hook.name.clone(),
            });
        }
        self.queue.push_back(Task::DiscoverModules);
    }

    /// Queues `task` unless it is already waiting.
    pub(super) fn enqueue(&mut self, task: Task) -> bool {
        if self.queue.contains(&task) {
            return false;
        }
        self.retries.retain(|(_, t)| *t != task);
        self.queue.push_back(task);
        true
    }

    /// Runs every queued task and what they queue, failed module tasks excepted (they
    /// wait for their retry); returns the tasks that failed.
    pub async fn drain(&mut self) -> Vec<(Task, String)> {
        let mut failed = Vec::new();
        while let Some(task) = self.queue.pop_front() {
            if let Err(e) = self.run_task(task.clone()).await {
                failed.push((task.clone(), e));
                if task.holds_the_queue() {
                    // A scenario must end: the global task is reported, not retried.
                    self.retries.retain(|(_, t)| *t != task);
                    self.queue.retain(|t| *t != task);
                }
            }
        }
        // A change that queued nothing (a refused ModuleConfig) still shows.
        self.write_module_config_statuses().await;
        failed
    }

    /// The full loop until `shutdown`: queued tasks, retries when they are due, and
    /// ConfigMap changes as its watch reports them.
    pub async fn run_until(
        &mut self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), AddonError> {
        let cm = self.settings.config_map.clone();
        let cluster = self.writer.cluster().clone();
        let resource = cluster
            .resolve(Some("v1"), "ConfigMap")
            .await
            .map_err(|e| AddonError::ConfigMapAccess {
                configmap: cm.to_string(),
                key: String::new(),
                source: e.into(),
            })?;
        let selector = Selector {
            namespaces: Some(vec![cm.namespace.clone()]),
            names: Some(vec![cm.name.clone()]),
            ..Selector::default()
        };
        let (listed, mut events) =
            cluster
                .list_and_watch(&resource, &selector)
                .await
                .map_err(|e| AddonError::ConfigMapAccess {
                    configmap: cm.to_string(),
                    key: String::new(),
                    source: e.into(),
                })?;
        // What changed since the operator was made, if anything.
        self.config_changed(listed.into_iter().next().as_ref());
        let mut configs = self.relist_module_configs().await?;
        let mut shutdown = std::pin::pin!(shutdown);
        let mut watching = true;
        self.bindings_live = true;
        self.view.update(|p| p.started = true);
        self.refresh_shared();
        // Tasks wait for Synchronization runs and take their values patches: the
        // receiver is the operator's while a task runs, the loop's in between.
        if let Err(e) = self.sync_engines().await {
            self.bindings_live = false;
            self.engines.clear();
            return Err(e);
        }
        let mut patches = self
            .binding_rx
            .take()
            .expect("run_until is not re-entered: it takes &mut self");
        let result = loop {
            while let Ok(event) = events.try_recv() {
                self.take_event(&event);
            }
            while let Some(event) = configs.as_mut().and_then(|c| c.try_recv().ok()) {
                self.take_module_config_event(&event);
            }
            let now = Instant::now();
            let due: Vec<Task> = self
                .retries
                .iter()
                .filter(|(at, _)| *at <= now)
                .map(|(_, t)| t.clone())
                .collect();
            self.retries.retain(|(at, _)| *at > now);
            for task in due {
                self.enqueue(task);
            }
            let held = self.hold_until.filter(|at| *at > now);
            if held.is_none() {
                self.hold_until = None;
                if let Some(task) = self.queue.pop_front() {
                    self.binding_rx = Some(patches);
                    let _ = self.run_task(task).await;
                    let synced = self.sync_engines().await;
                    patches = self
                        .binding_rx
                        .take()
                        .expect("tasks leave the receiver in place");
                    if let Err(e) = synced {
                        break Err(e);
                    }
                    continue;
                }
            }
            if held.is_none() && self.retries.is_empty() {
                // The queue is empty and nothing failed: the startup convergence (or a
                // later one) is done. Readiness only ever needs the first.
                self.view.update(|p| p.converged = true);
            }
            self.publish(None);
            self.write_module_config_statuses().await;
            let next_retry = self
                .retries
                .iter()
                .map(|(at, _)| *at)
                .chain(held)
                .chain(self.module_configs.retry_writes_at())
                .min();
            let sleep = next_retry.map_or(Duration::from_secs(3600), |at| {
                at.saturating_duration_since(Instant::now())
            });
            tokio::select! {
                () = &mut shutdown => break Ok(()),
                Some(patch) = patches.recv() => self.take_binding_patch(patch).await,
                event = events.recv(), if watching => match event {
                    Some(event) => self.take_event(&event),
                    None => {
                        tracing::warn!(configmap = %cm, "the ConfigMap watch ended");
                        watching = false;
                    }
                },
                event = next_event(&mut configs) => match event {
                    Some(event) => self.take_module_config_event(&event),
                    None => {
                        tracing::warn!("the ModuleConfig watch ended");
                        configs = None;
                    }
                },
                () = tokio::time::sleep(sleep) => {}
            }
        };
        self.bindings_live = false;
        self.engines.clear();
        self.binding_rx = Some(patches);
        self.view.update(|p| p.started = false);
        result
    }

    /// The values documents binding runs see, recomputed.
    pub(super) fn refresh_shared(&self) {
        let mut docs = BTreeMap::new();
        if let Ok(global) = self.global.compute() {
            let mut global = global.values;
            global["enabledModules"] = json!(self.enabled);
            docs.insert(
                "global".to_owned(),
                (
                    json!({"global": global}),
                    json!({"global": self.global.config()}),
                ),
            );
        }
        for name in self.modules.keys() {
            if let (Ok(values), Ok(config)) =
                (self.values_document(name), self.config_document(name))
            {
                docs.insert(name.clone(), (values, config));
            }
        }
        *self
            .shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = docs;
    }

    fn take_event(&mut self, event: &Event) {
        match event.kind {
            WatchEvent::Deleted => self.config_changed(None),
            _ => self.config_changed(Some(&event.object)),
        }
    }

    /// The checksum of what global hooks change: the global values and the enabled
    /// flags they set.
    pub(super) fn global_checksum(&self) -> Result<String, AddonError> {
        Ok(super::values::checksum(&json!([
            self.global.compute()?.values,
            self.dynamic_enabled
        ])))
    }

    /// The delay before retry `n` (1-based): 5 s doubling, capped (shell-operator's).
    pub(super) fn backoff(&self, n: u32) -> Duration {
        let factor = 1u32 << n.saturating_sub(1).min(16);
        (self.settings.retry_first * factor).min(self.settings.retry_max)
    }
}

/// The next event of `stream`; never, without one.
async fn next_event(stream: &mut Option<EventStream>) -> Option<Event> {
    match stream {
        Some(stream) => stream.recv().await,
        None => std::future::pending().await,
    }
}

impl fmt::Debug for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operator")
            .field("modules", &self.layout.modules.len())
            .field("enabled", &self.enabled)
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}
