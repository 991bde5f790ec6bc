//! The hook engine loop: startup, synchronization, events, schedules, queues, runs,
//! and applying what runs return.
//!
//! At start the `main` queue gets the onStartup runs (by order, then hook name); then
//! every kubernetes binding lists its objects (filling its snapshot), starts watching,
//! and queues a Synchronization run on `main` (unless disabled; on its own queue with
//! `waitForSynchronization: false`), where they run one at a time in hook order as
//! shell-operator runs them (`queue_synchronization` says why never beside each other).
//! Events of a binding are held until its Synchronization run succeeded. An Added or
//! Modified event whose jq filter result did not change is dropped. Contexts get their snapshots when the
//! run starts, so a run always sees the current state. A run's patches are applied
//! only when the run succeeded, all of them in order; the first failing patch fails the
//! run, which is then retried like any failed run. Metrics are applied likewise.
//!
//! [`Engine::drain`] processes everything queued, one task at a time, for
//! `operon hook test`; [`Engine::run_for`] is the full loop with one worker per queue,
//! schedules and backoff, for `operon hook run`.

use super::config::{KubernetesBinding, MAIN_QUEUE, ValidConfig};
use super::context::{self, SnapshotEntry, Snapshots};
use super::objects::BindingObjects;
use super::queue::{Queue, RateLimit, Task, TaskKind};
use super::runner::{Hook, HookError, HookRun};
use crate::metrics::{BindingMetrics, MetricError, Metrics, RunOutcome};
use operon_cluster::{Cluster, ClusterError, EventStream};
use operon_data::api::HookRunOutcome;
use operon_data::model::{
    BindingContext, BindingType, ConfigVersion, HookInput, ObjectAndFilter, RunnerContext,
    WatchEvent,
};
use operon_runner::context::Platform;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;
use tracing::Instrument;

/// A hook with its validated configuration.
#[derive(Clone)]
pub struct LoadedHook {
    /// What runs it.
    pub hook: Arc<dyn Hook>,
    /// Its configuration.
    pub config: ValidConfig,
}

/// Why a successful run's patches or metrics could not be applied; the run then
/// counts as failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    /// A metric operation is invalid (checked before any patch is applied).
    #[error("metrics: {0}")]
    Metrics(#[from] MetricError),
    /// A patch operation failed; the ones after it were not applied.
    #[error("patch operation {index} of {count}: {source}")]
    Patch {
        /// Its position, from 1.
        index: usize,
        /// How many the run submitted.
        count: usize,
        /// What the cluster said.
        #[source]
        source: ClusterError,
    },
}

/// What one run did, for the CLI and for tests.
#[derive(Debug, Clone)]
pub struct RunRecord {
    /// The hook.
    pub hook: String,
    /// The hook's index in the engine.
    pub(crate) hook_index: usize,
    /// The kubernetes bindings the run synchronizes: a Synchronization run's own, and
    /// those of Synchronization runs merged into it.
    pub synchronizes: Vec<usize>,
    /// The queue it ran on.
    pub queue: String,
    /// The binding contexts passed in.
    pub contexts: Vec<BindingContext>,
    /// The format of the hook's configuration, which decides the shape its contexts are
    /// written in for script hooks.
    pub config_version: ConfigVersion,
    /// What the hook returned and submitted.
    pub run: HookRun,
    /// Why applying the run's patches or metrics failed, if it did.
    pub apply_error: Option<ApplyError>,
    /// Whether the run counts as failed (hook error or apply error).
    pub failed: bool,
    /// A failure that the binding allows: counted, not retried.
    pub allowed_failure: bool,
    /// When a failed task will be retried.
    pub retry_in: Option<Duration>,
}

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum HookEngineError {
    /// A kubernetes binding's kind is unknown or its list failed.
    // The cluster's error is part of the message, not a `source`: printed as a chain
    // it would appear twice.
    #[error("hook {hook}, binding {binding:?}: {cause}")]
    Binding {
        /// The hook.
        hook: String,
        /// The binding.
        binding: String,
        /// What the cluster said.
        cause: ClusterError,
    },
}

/// A kubernetes binding's key: (hook index, binding index).
type BindingKey = (usize, usize);

#[derive(Default)]
struct State {
    queues: BTreeMap<String, Queue>,
    /// Per kubernetes binding, its objects, sorted as snapshots are.
    snapshots: HashMap<BindingKey, BindingObjects>,
    /// Bindings whose events may run the hook (their Synchronization run succeeded).
    synced: HashSet<BindingKey>,
    /// Events of bindings not synchronized yet, in order.
    held: HashMap<BindingKey, Vec<Task>>,
    /// Token buckets of hooks with `executionMinInterval`.
    limits: HashMap<usize, RateLimit>,
    /// Watch streams not yet handed to a pump.
    streams: Vec<(BindingKey, EventStream)>,
    /// Queues a worker is running a task of (drain mode runs one at a time anyway).
    busy: HashSet<String>,
    /// Metric handles per (hook, binding, queue), resolved once.
    handles: HashMap<(usize, String, String), BindingMetrics>,
    /// The same handles per kubernetes binding, for the event path (no key allocation,
    /// one reference count per event).
    kube_handles: HashMap<BindingKey, Arc<BindingMetrics>>,
    /// Per kubernetes binding, its `operon_kube_snapshot_objects` and
    /// `operon_kube_snapshot_bytes` series, set on every event.
    snapshot_gauges: HashMap<BindingKey, [prometheus::IntGauge; 2]>,
    /// Per queue, its `operon_tasks_queue_length` series, set on every push and run.
    queue_gauges: HashMap<String, prometheus::IntGauge>,
}

/// The hook engine.
pub struct Engine {
    hooks: Vec<LoadedHook>,
    cluster: Arc<dyn Cluster>,
    metrics: Arc<Metrics>,
    /// Which cluster, for every run's context (Diagnoses get it the same way).
    platform: Platform,
    state: Mutex<State>,
    wake: tokio::sync::Notify,
    /// Set by a shutdown: workers take no new task.
    stopping: AtomicBool,
    /// Set by [`Engine::take_over`]: events run hooks (before it, they only update
    /// snapshots).
    running: AtomicBool,
    /// The last runs of each hook, for `operon hook history`.
    pub(super) runs: super::history::History,
    /// Each hook's own log level, changed at run time.
    pub(super) log_levels: super::log_level::LogLevels,
    /// What each hook received and answered, when asked (`operon hook record`).
    pub(super) capture: super::capture::Capture,
    /// The shadow hooks of the process, run beside this engine's hooks on their inputs.
    pub(super) shadows: super::shadow::Shadows,
}

impl Engine {
    /// An engine for `hooks` over `cluster`, reporting to `metrics`.
    pub fn new(hooks: Vec<LoadedHook>, cluster: Arc<dyn Cluster>, metrics: Arc<Metrics>) -> Self {
        Self {
            runs: super::history::History::new(hooks.len()),
            log_levels: super::log_level::LogLevels::new(hooks.len()),
            capture: super::capture::Capture::new(hooks.len(), Default::default()),
            shadows: super::shadow::Shadows::default(),
            hooks,
            cluster,
            metrics,
            platform: Platform::from_env(),
            state: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            stopping: AtomicBool::new(false),
            running: AtomicBool::new(false),
        }
    }

    /// The same engine naming `platform` in its runs' context instead of the one
    /// `OPERON_CLUSTER_NAME` describes.
    #[cfg(test)]
    pub(crate) fn with_platform(mut self, platform: Platform) -> Self {
        self.platform = platform;
        self
    }

    /// The same engine capturing what its hooks receive and answer.
    pub fn with_capture(mut self, settings: super::capture::CaptureSettings) -> Self {
        self.capture = super::capture::Capture::new(self.hooks.len(), settings);
        self
    }

    /// The same engine, running the shadows `shadows` attaches to its hooks beside
    /// them ([`super::shadow`]).
    pub fn with_shadows(mut self, shadows: super::shadow::Shadows) -> Self {
        self.shadows = shadows;
        self
    }

    /// The hooks, in load order.
    pub fn hooks(&self) -> &[LoadedHook] {
        &self.hooks
    }

    /// The hook with a conversion binding for CustomResourceDefinition `crd`, by name
    /// (the first one: a CRD's conversion may chain several hooks' rules).
    pub fn converter_of(&self, crd: &str) -> Option<&str> {
        (self.hooks.iter())
            .find(|h| h.config.conversions.iter().any(|c| c.crd_name == crd))
            .map(|h| h.hook.name())
    }

    fn kube_metrics(&self, h: usize, binding: &KubernetesBinding) -> Arc<BindingMetrics> {
        let key = (h, binding.id.index);
        if let Some(handles) = self.lock().kube_handles.get(&key) {
            return handles.clone();
        }
        let handles = Arc::new(self.binding_metrics(h, &binding.name, &binding.queue));
        self.lock().kube_handles.insert(key, handles.clone());
        handles
    }

    fn binding_metrics(&self, h: usize, binding: &str, queue: &str) -> BindingMetrics {
        let mut state = self.lock();
        state
            .handles
            .entry((h, binding.to_owned(), queue.to_owned()))
            .or_insert_with(|| {
                self.metrics
                    .binding(self.hooks[h].hook.name(), binding, queue)
            })
            .clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent before it can panic, so a poisoned
        // lock still guards usable data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether queued runs of hook `h` are merged: shell-operator merges only for hooks
    /// declared in the v1 format.
    fn merges(&self, h: usize) -> bool {
        self.hooks[h].config.version == ConfigVersion::V1
    }

    fn push(&self, state: &mut State, queue: &str, mut task: Task) {
        task.trace.queued(queue);
        let q = state.queues.entry(queue.to_owned()).or_default();
        q.push(task);
        let length = q.len();
        self.set_queue_length(state, queue, length);
    }

    /// Sets `operon_tasks_queue_length` of `queue`, looking its series up once.
    fn set_queue_length(&self, state: &mut State, queue: &str, length: usize) {
        if let Some(gauge) = state.queue_gauges.get(queue) {
            return gauge.set(length as i64);
        }
        let gauge = self.metrics.tasks_queue_length.with_label_values(&[queue]);
        gauge.set(length as i64);
        state.queue_gauges.insert(queue.to_owned(), gauge);
    }

    /// Queues the onStartup runs, lists every kubernetes binding, and queues their
    /// Synchronization runs: [`Engine::observe`], then [`Engine::take_over`].
    pub async fn start(&self) -> Result<(), HookEngineError> {
        self.observe().await?;
        self.take_over();
        Ok(())
    }

    /// Lists and starts watching every kubernetes binding, keeping their snapshots, but
    /// runs nothing: what a standby replica does, so that its webhooks see the same
    /// snapshots as the leader's and a take-over starts from a warm state.
    pub async fn observe(&self) -> Result<(), HookEngineError> {
        for (h, loaded) in self.hooks.iter().enumerate() {
            for (b, binding) in loaded.config.kubernetes.iter().enumerate() {
                self.watch_binding(h, b, binding).await.map_err(|cause| {
                    HookEngineError::Binding {
                        hook: loaded.hook.name().to_owned(),
                        binding: binding.name.clone(),
                        cause,
                    }
                })?;
            }
        }
        Ok(())
    }

    /// Starts running: queues the onStartup runs (by order, then hook name) and one
    /// Synchronization run per kubernetes binding with its current objects; events
    /// from now on run hooks.
    pub fn take_over(&self) {
        self.take_over_after(None);
    }

    /// [`Engine::take_over`] from `previous`, an engine of the same hooks directory
    /// that ran before this one: a hook `previous` already had (the same loaded hook)
    /// gets no onStartup run again, as it did not start again; every kubernetes binding
    /// still gets its Synchronization run, since this engine's watches are new.
    pub fn take_over_from(&self, previous: &Engine) {
        self.take_over_after(Some(previous));
    }

    fn take_over_after(&self, previous: Option<&Engine>) {
        let kept = |loaded: &LoadedHook| {
            previous
                .is_some_and(|p| (p.hooks.iter()).any(|old| Arc::ptr_eq(&old.hook, &loaded.hook)))
        };
        let mut startup: Vec<(i32, &str, usize)> = self
            .hooks
            .iter()
            .enumerate()
            .filter(|(_, h)| !kept(h))
            .filter_map(|(i, h)| h.config.on_startup.map(|order| (order, h.hook.name(), i)))
            .collect();
        startup.sort();
        let mut state = self.lock();
        // Under the lock: an event is either before the take-over (in the snapshot the
        // Synchronization run carries) or after it (an Event run held until then).
        self.running.store(true, Ordering::SeqCst);
        for (_, _, hook) in startup {
            let task = Task {
                hook,
                merge: self.merges(hook),
                kind: TaskKind::OnStartup,
                contexts: vec![context::on_startup()],
                allow_failure: false,
                synchronizes: Vec::new(),
                queued_at: Instant::now(),
                trace: TaskTrace::of_kind(TaskKind::OnStartup, self.hooks[hook].hook.name(), ""),
                running: Vec::new(),
            };
            self.push(&mut state, MAIN_QUEUE, task);
        }
        for (h, loaded) in self.hooks.iter().enumerate() {
            for (b, binding) in loaded.config.kubernetes.iter().enumerate() {
                self.queue_synchronization(&mut state, h, b, binding);
            }
        }
        drop(state);
        self.wake.notify_waiters();
    }

    /// Queues an Event run of binding `key` for a change of `entry` (or holds it until
    /// the binding is synchronized), when the binding wants that kind of event.
    fn fire(
        &self,
        mut state: MutexGuard<'_, State>,
        key: BindingKey,
        kind: WatchEvent,
        item: ObjectAndFilter,
        root: tracing::Span,
    ) {
        self.count_snapshot(&mut state, key);
        let (h, b) = key;
        let binding = &self.hooks[h].config.kubernetes[b];
        // A standby keeps its snapshots current and runs nothing.
        if !self.running.load(Ordering::SeqCst) || !binding.execute_hook_on_event.contains(kind) {
            return;
        }
        let context = match &binding.group {
            Some(group) => context::group(&binding.name, group, Vec::new()),
            None => context::event(&binding.name, kind, item, Vec::new()),
        };
        let task = Task {
            hook: h,
            merge: self.merges(h),
            kind: TaskKind::Event,
            contexts: vec![context],
            allow_failure: binding.allow_failure,
            synchronizes: Vec::new(),
            queued_at: Instant::now(),
            trace: TaskTrace::new(root),
            running: Vec::new(),
        };
        if state.synced.contains(&key) {
            self.push(&mut state, &binding.queue, task);
            drop(state);
            self.wake.notify_waiters();
        } else {
            state.held.entry(key).or_default().push(task);
        }
    }

    /// Handles every event already waiting in the watch streams; returns how many.
    pub(crate) fn pump(&self) -> usize {
        let mut streams = std::mem::take(&mut self.lock().streams);
        let mut handled = 0;
        for (key, stream) in &mut streams {
            while let Ok(event) = stream.try_recv() {
                self.handle_event(*key, event);
                handled += 1;
            }
        }
        self.lock().streams.extend(streams);
        handled
    }

    /// Queues a run of schedule binding `s` of hook `h`.
    pub fn fire_schedule(&self, h: usize, s: usize) {
        let binding = &self.hooks[h].config.schedules[s];
        let context = match &binding.group {
            Some(group) => context::group(&binding.name, group, Vec::new()),
            None => context::schedule(&binding.name, Vec::new()),
        };
        let task = Task {
            hook: h,
            merge: self.merges(h),
            kind: TaskKind::Schedule,
            contexts: vec![context],
            allow_failure: binding.allow_failure,
            synchronizes: Vec::new(),
            queued_at: Instant::now(),
            trace: TaskTrace::of_kind(TaskKind::Schedule, self.hooks[h].hook.name(), &binding.name),
            running: Vec::new(),
        };
        let mut state = self.lock();
        self.push(&mut state, &binding.queue, task);
        drop(state);
        self.wake.notify_waiters();
    }

    /// The input of a run of hook `h` with `contexts`.
    fn input(&self, h: usize, contexts: Vec<BindingContext>) -> HookInput {
        let loaded = &self.hooks[h];
        HookInput {
            context: RunnerContext {
                cluster: self.platform.cluster.clone(),
                ..RunnerContext::new(loaded.hook.name(), loaded.config.settings.timeout)
            },
            binding_contexts: contexts,
        }
    }

    /// The snapshots a context of hook `h` carries.
    fn snapshots_for<'a_config>(
        &'a_config self,
        state: &State,
        h: usize,
        context: &BindingContext,
    ) -> Vec<operon_data::model::Snapshot> {
        let config = &self.hooks[h].config;
        fn union<'a>(names: &mut Vec<&'a str>, list: &'a [String]) {
            for name in list {
                if !names.contains(&name.as_str()) {
                    names.push(name.as_str());
                }
            }
        }
        let mut names: Vec<&str> = Vec::new();
        let mut add = |list: &'a_config [String]| union(&mut names, list);
        match context.type_ {
            BindingType::Group => {
                // Contexts read back from shell-operator JSON without `groupName` name
                // the group in `binding`.
                let group = Some(context.group.as_deref().unwrap_or(&context.binding));
                for k in config
                    .kubernetes
                    .iter()
                    .filter(|k| k.group.as_deref() == group)
                {
                    add(&k.include_snapshots_from);
                }
                for s in config
                    .schedules
                    .iter()
                    .filter(|s| s.group.as_deref() == group)
                {
                    add(&s.include_snapshots_from);
                }
            }
            BindingType::Schedule => {
                if let Some(s) = config.schedules.iter().find(|s| s.name == context.binding) {
                    add(&s.include_snapshots_from);
                }
            }
            BindingType::Event | BindingType::Synchronization => {
                if let Some(k) = config.kubernetes_binding(&context.binding) {
                    add(&k.include_snapshots_from);
                }
            }
            BindingType::Validating => {
                if let Some(v) = config.validating.iter().find(|v| v.name == context.binding) {
                    add(&v.include_snapshots_from);
                }
            }
            BindingType::Mutating => {
                if let Some(m) = config.mutating.iter().find(|m| m.name == context.binding) {
                    add(&m.include_snapshots_from);
                }
            }
            BindingType::Conversion => {
                if let Some(c) = config
                    .conversions
                    .iter()
                    .find(|c| c.name == context.binding)
                {
                    add(&c.include_snapshots_from);
                }
            }
            BindingType::OnStartup => {}
        }
        let mut snapshots = Snapshots::new();
        for name in names {
            let Some(b) = config.kubernetes.iter().position(|k| k.name == name) else {
                continue;
            };
            let entries = state
                .snapshots
                .get(&(h, b))
                .map(|s| {
                    s.entries()
                        .map(|(key, stored)| SnapshotEntry {
                            namespace: key.namespace().to_owned(),
                            name: key.name().to_owned(),
                            item: stored.item(),
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            snapshots.insert(name, entries);
        }
        snapshots.into_snapshots()
    }

    /// Takes the head of `queue` (merged with what follows it) if its hook's rate limit
    /// allows a run now; otherwise says how long to wait.
    fn take(&self, queue: &str) -> Result<Option<(Task, Vec<BindingContext>)>, Duration> {
        let mut state = self.lock();
        let Some(hook) = state
            .queues
            .get(queue)
            .and_then(|q| q.tasks().next())
            .map(|t| t.hook)
        else {
            return Ok(None);
        };
        // Asked before the head is taken: a head that waits keeps its contexts queued.
        if let Some(rate) = self.hooks[hook].config.settings.execution_rate {
            let now = Instant::now();
            let limit = state
                .limits
                .entry(hook)
                .or_insert_with(|| RateLimit::new(rate.min_interval, rate.burst));
            let wait = limit.wait(now);
            if !wait.is_zero() {
                return Err(wait);
            }
            limit.take(now);
        }
        let Some(mut task) = state.queues.get_mut(queue).and_then(Queue::head) else {
            return Ok(None);
        };
        // The queue handed over the head's contexts (a merged run can carry thousands):
        // they are moved into the run, not copied.
        let contexts: Vec<BindingContext> = std::mem::take(&mut task.contexts)
            .into_iter()
            .map(|c| BindingContext {
                snapshots: self.snapshots_for(&state, task.hook, &c),
                ..c
            })
            .collect();
        state.busy.insert(queue.to_owned());
        Ok(Some((task, contexts)))
    }

    /// Runs the head task of `queue` once. `Ok(None)`: the queue is empty. `Err(wait)`:
    /// the hook's rate limit says to wait that long (the task stays at the head and
    /// keeps absorbing new tasks).
    pub(crate) async fn run_head(&self, queue: &str) -> Result<Option<RunRecord>, Duration> {
        let Some((task, contexts)) = self.take(queue)? else {
            return Ok(None);
        };
        let loaded = &self.hooks[task.hook];
        let name = loaded.hook.name().to_owned();
        let binding_label = contexts
            .first()
            .map(|c| c.binding.clone())
            .unwrap_or_default();
        let handles = self.binding_metrics(task.hook, &binding_label, queue);
        handles.waited(task.queued_at.elapsed());
        let task_contexts = contexts.len();
        let span = spans::run(
            &task.trace.root,
            &name,
            queue,
            &binding_label,
            task_contexts,
        );
        let input = self.input(task.hook, contexts);
        let (run, input) = loaded
            .hook
            .handle(input, loaded.config.settings.timeout)
            .instrument(span.clone())
            .await;
        self.shadows.shadow(&name, &input, &run);
        let source = operon_runner::output_log::Source::Hook {
            hook: &name,
            binding: &binding_label,
            queue,
        };
        // In the run's span: the lines carry its trace id.
        span.in_scope(|| run.log_output_at(source, self.log_level(task.hook)));
        let apply_error = match &run.outcome {
            Ok(_) => self.apply(&name, &run, &span).await.err(),
            Err(_) => None,
        };
        let failed = run.outcome.is_err() || apply_error.is_some();
        spans::ended(&span, &run.outcome, apply_error.as_ref());
        let mut state = self.lock();
        state.busy.remove(queue);
        let mut retry_in = None;
        let allowed_failure = failed && task.allow_failure;
        let q = state.queues.entry(queue.to_owned()).or_default();
        let mut contexts = input.binding_contexts;
        if failed && !task.allow_failure {
            // The head runs again: it takes back a copy of its contexts without the
            // snapshots (read afresh at each run, and the largest part), which are set
            // aside while the rest is copied rather than copied and dropped.
            let retried = contexts
                .iter_mut()
                .map(|c| {
                    let snapshots = std::mem::take(&mut c.snapshots);
                    let copy = c.clone();
                    c.snapshots = snapshots;
                    copy
                })
                .collect();
            q.restore_head(retried);
            handles.run(run.elapsed, RunOutcome::Failed);
            if run.outcome.as_ref().is_err_and(HookError::is_limit) && q.split_head() {
                tracing::warn!(hook = %name, queue, contexts = task_contexts,
                    "the run hit a per-run limit with these binding contexts: the first half is tried again alone");
            }
            let jitter = Duration::from_millis(u64::from(getrandom::u32().unwrap_or(0) % 1000));
            retry_in = Some(q.failed(jitter));
        } else {
            handles.run(
                run.elapsed,
                if allowed_failure {
                    RunOutcome::AllowedFailure
                } else {
                    RunOutcome::Success
                },
            );
            q.done();
            for &b in &task.synchronizes {
                self.release(&mut state, (task.hook, b));
            }
        }
        let length = state.queues.get(queue).map_or(0, Queue::len);
        self.set_queue_length(&mut state, queue, length);
        drop(state);
        let record = RunRecord {
            hook: name,
            hook_index: task.hook,
            synchronizes: task.synchronizes,
            queue: queue.to_owned(),
            contexts,
            config_version: self.hooks[task.hook].config.version,
            run,
            apply_error,
            failed,
            allowed_failure,
            retry_in,
        };
        self.keep(task.hook, &record);
        Ok(Some(record))
    }

    /// A binding's Synchronization run succeeded: its held events may run now.
    fn release(&self, state: &mut State, key: BindingKey) {
        state.synced.insert(key);
        let queue = self.hooks[key.0].config.kubernetes[key.1].queue.clone();
        for task in state.held.remove(&key).unwrap_or_default() {
            self.push(state, &queue, task);
        }
    }

    /// Applies a successful run's patches (in order, stopping at the first failure)
    /// and metrics.
    async fn apply(
        &self,
        hook: &str,
        run: &HookRun,
        span: &tracing::Span,
    ) -> Result<(), ApplyError> {
        let metrics = self.metrics.hooks.prepare(hook, &run.metrics)?;
        for (i, patch) in run.patches.iter().enumerate() {
            let patch_span = spans::patch(span, i + 1, patch.name());
            self.cluster
                .apply(patch)
                .instrument(patch_span.clone())
                .await
                .map_err(|source| {
                    spans::failed(&patch_span, &source);
                    ApplyError::Patch {
                        index: i + 1,
                        count: run.patches.len(),
                        source,
                    }
                })?;
        }
        Ok(self.metrics.hooks.commit(metrics)?)
    }

    /// Whether any queue holds a task.
    #[cfg(test)]
    pub(crate) fn has_tasks(&self) -> bool {
        self.lock().queues.values().any(|q| !q.is_empty())
    }

    fn queue_names(&self) -> Vec<String> {
        self.lock().queues.keys().cloned().collect()
    }
}

impl RunRecord {
    /// How the run ended.
    pub fn outcome(&self) -> HookRunOutcome {
        match (self.failed, self.allowed_failure) {
            (false, _) => HookRunOutcome::Succeeded,
            (true, true) => HookRunOutcome::AllowedFailure,
            (true, false) => HookRunOutcome::Failed,
        }
    }

    /// Why it failed: the hook's error, or the patch or metric that could not be
    /// applied.
    pub fn error(&self) -> Option<String> {
        match (&self.run.outcome, &self.apply_error) {
            (Err(e), _) => Some(e.to_string()),
            (Ok(_), Some(e)) => Some(e.to_string()),
            (Ok(_), None) => None,
        }
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("hooks", &self.hooks.len())
            .finish_non_exhaustive()
    }
}

mod bindings;
mod inspect;
mod review;
mod run;
mod spans;
pub use inspect::{BindingInfo, BindingSnapshot, HookInfo, QueueInfo, TaskInfo};
pub(crate) use spans::TaskTrace;

#[cfg(test)]
mod tests;
