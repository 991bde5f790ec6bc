//! addon-operator's modules under `operon serve` (`--modules-dir`): the task queue of
//! [`operon_addons`] runs on the leader only (a replica that takes over builds it
//! afresh: global `onStartup` hooks, then a convergence), against the cluster `serve`
//! watches, objects going in by server-side apply. Its ConfigMap and the ModuleConfig
//! objects are watched, so a change converges again (the leader writes each
//! ModuleConfig's status); its metrics and its hooks' metrics are on serve's
//! `/metrics`; its queue is on the debug socket at `/queue/main` (addon-operator's
//! path; `operon modules queue` prints it).

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use operon_addons::AddonError;
use operon_addons::apply::ObjectWriter;
use operon_addons::operator::{Operator, QueueEvent, Settings};
use operon_addons::status::QueueView;
use operon_cluster::Cluster;
use operon_hooks::engine_set::EngineSet;
use operon_hooks::metrics::Metrics;
use operon_hooks::reload::{ReloadEntry, ReloadLog, Settle, Step, digest_off_runtime};
use operon_script::ScriptSandbox;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What the modules of `operon serve` need.
#[derive(Clone)]
pub struct ModulesOptions {
    /// The directories, the ConfigMap, the renderer, the deadlines.
    pub settings: Settings,
    /// Where release records live and namespaced objects without a namespace go.
    pub namespace: String,
    /// Server-side apply goes through this client; `None` writes through the cluster
    /// layer instead (the local cluster, in tests).
    pub client: Option<kube::Client>,
    /// Runs `enabled` programs and shell hooks.
    pub sandbox: ScriptSandbox,
    /// Where the queue is published, for the debug socket.
    pub view: QueueView,
}

impl std::fmt::Debug for ModulesOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModulesOptions")
            .field("settings", &self.settings)
            .field("namespace", &self.namespace)
            .field("server_side_apply", &self.client.is_some())
            .finish_non_exhaustive()
    }
}

/// The modules' task queue, running in the background; aborted when dropped (a
/// replica that stops leading stops converging at once).
pub(super) struct RunningModules {
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<Result<(), AddonError>>>,
}

/// Builds the operator (reading the layout, loading every hook, reading the ConfigMap)
/// and runs its queue until stopped. With `reload`, the modules and global hooks
/// directories are checked on its interval, and a change that loads is taken over by a
/// new operator ([`operon_addons::reload`]); what does not load is refused, logged and
/// counted, and the operator in use goes on.
pub(super) fn spawn(
    options: Arc<ModulesOptions>,
    cluster: Arc<dyn Cluster>,
    metrics: Arc<Metrics>,
    engines: EngineSet,
    reload: Option<(Duration, ReloadLog)>,
) -> RunningModules {
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn(async move {
        let writer = ObjectWriter::new(cluster, options.client.clone(), &options.namespace);
        let build = || async {
            Operator::new(
                options.settings.clone(),
                options.sandbox.clone(),
                writer.clone(),
                log_event,
            )
            .await
        };
        let mut operator = build().await?;
        operator.report_to(metrics.clone())?;
        operator.publish_to(options.view.clone());
        operator.show_hooks_in(engines);
        tracing::info!(
            modules = operator.layout().modules.len(),
            dir = %options.settings.modules_dir.display(),
            configmap = %options.settings.config_map,
            "running the modules' task queue"
        );
        let mut fingerprint = operator.fingerprint();
        let dirs = operon_addons::reload::watched_dirs(&options.settings);
        let digest = || digest_off_runtime(dirs.clone());
        let mut settle = Settle::new(digest().await);
        if let Some((_, log)) = &reload {
            let mut entry = ReloadEntry::now(RELOAD_SOURCE, "loaded");
            entry.added = fingerprint.modules.keys().cloned().collect();
            log.push(entry);
            crate::serve::reload::applied_now(&metrics, RELOAD_SOURCE);
        }
        loop {
            // A reload that loads, made while the queue runs.
            let mut next = None;
            // Module sources that could not be had are pulled again now and then: a
            // registry away at start must not keep its modules out until a restart.
            let unavailable = operator.layout().unavailable.len();
            let watching = async {
                let Some((interval, log)) = &reload else {
                    return std::future::pending().await;
                };
                let mut ticks = tokio::time::interval(*interval);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                ticks.tick().await;
                let retry_every = interval.saturating_mul(SOURCE_RETRY_TICKS);
                let mut retried = tokio::time::Instant::now();
                loop {
                    ticks.tick().await;
                    let now = digest().await;
                    let (tree, retry) = match settle.check(now.clone()) {
                        Step::Load(tree) => (tree, false),
                        _ if unavailable > 0 && retried.elapsed() >= retry_every => {
                            retried = tokio::time::Instant::now();
                            (now, true)
                        }
                        _ => continue,
                    };
                    match build().await {
                        // Nothing more came: the operator in use goes on.
                        Ok(operator)
                            if retry && operator.layout().unavailable.len() >= unavailable => {}
                        Ok(operator) => return (operator, tree),
                        Err(e) if retry => {
                            tracing::warn!(error = %e, "pulling the unavailable module sources again failed");
                        }
                        Err(e) => {
                            tracing::error!(dir = %options.settings.modules_dir.display(), error = %e,
                                "the changed modules do not load: the modules in use keep running");
                            (metrics.reloads_total)
                                .with_label_values(&[RELOAD_SOURCE, "refused"])
                                .inc();
                            let mut entry = ReloadEntry::now(RELOAD_SOURCE, "refused");
                            entry.error = Some(e.to_string());
                            log.push(entry);
                            settle.refused(tree);
                        }
                    }
                }
            };
            let until = async {
                tokio::select! {
                    _ = stopped.wait_for(|s| *s) => {}
                    loaded = watching => next = Some(loaded),
                }
            };
            operator.run_until(until).await?;
            let Some((mut reloaded, tree)) = next else {
                return Ok(());
            };
            let now = reloaded.fingerprint();
            reloaded.carry_from(&operator, &fingerprint, &now);
            let (added, changed, removed) = fingerprint.diff(&now);
            let global = fingerprint.global != now.global;
            tracing::info!(added = ?added, changed = ?changed, removed = ?removed, global_changed = global,
                "the modules are reloaded");
            (metrics.reloads_total)
                .with_label_values(&[RELOAD_SOURCE, "applied"])
                .inc();
            crate::serve::reload::applied_now(&metrics, RELOAD_SOURCE);
            if let Some((_, log)) = &reload {
                let mut entry = ReloadEntry::now(RELOAD_SOURCE, "applied");
                (entry.added, entry.changed, entry.removed) = (added, changed, removed);
                if global {
                    entry.changed.insert(0, "global".to_owned());
                }
                log.push(entry);
            }
            settle.applied(tree);
            fingerprint = now;
            operator = reloaded;
        }
    });
    RunningModules {
        stop,
        task: Some(task),
    }
}

/// The source label of the modules' reloads.
const RELOAD_SOURCE: &str = "modules";

/// Every how many reload intervals unavailable module sources are pulled again (a
/// minute with the default interval of 10 s).
const SOURCE_RETRY_TICKS: u32 = 6;

/// What the admission webhook checks ModuleConfigs against, replaced when the modules
/// change.
pub(crate) type ModuleSettings =
    Arc<std::sync::RwLock<Arc<operon_addons::module_config::SettingsRules>>>;

/// Keeps `rules` following the modules and global hooks directories, checked every
/// `interval`, until dropped. Every replica answers ModuleConfig admission, and only
/// the leader runs the operator that reloads the modules, so each replica reads the
/// schemas itself; a tree that does not read keeps the rules in use.
pub(super) async fn follow_settings(
    options: Arc<ModulesOptions>,
    rules: ModuleSettings,
    interval: Duration,
) {
    let dirs = operon_addons::reload::watched_dirs(&options.settings);
    let digest = || digest_off_runtime(dirs.clone());
    // The rules in use were read before this started: what changed in between is read
    // again once the tree settles.
    let mut settle = Settle::new(String::new());
    let mut first = true;
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Step::Load(tree) = settle.check(digest().await) else {
            continue;
        };
        let read = match operon_addons::operator::read_layout(&options.settings).await {
            Ok(layout) => operon_addons::module_config::SettingsRules::new(&layout),
            Err(e) => Err(e),
        };
        match read {
            Ok(read) => {
                *rules.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(read);
                if !std::mem::take(&mut first) {
                    tracing::info!(dir = %options.settings.modules_dir.display(),
                        "ModuleConfig admission follows the changed modules");
                }
                settle.applied(tree);
            }
            Err(e) => {
                first = false;
                tracing::warn!(dir = %options.settings.modules_dir.display(), error = %e,
                    "the changed modules do not read: ModuleConfigs are checked against the schemas in use");
                settle.refused(tree);
            }
        }
    }
}

impl RunningModules {
    /// Resolves with the error that stopped the queue; pending while it runs (and
    /// after it stopped without error).
    pub(super) async fn failed(&mut self) -> AddonError {
        let Some(task) = &mut self.task else {
            return std::future::pending().await;
        };
        let outcome = task.await;
        self.task = None;
        match outcome {
            Ok(Err(e)) => e,
            Ok(Ok(())) => std::future::pending().await,
            Err(e) => AddonError::TaskQueue(e),
        }
    }

    /// Stops taking tasks; the task in progress has `grace` to finish.
    pub(super) async fn stop(mut self, grace: Duration) {
        let _ = self.stop.send(true);
        let Some(task) = self.task.take() else { return };
        let abort = task.abort_handle();
        match tokio::time::timeout(grace, task).await {
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "the modules' task queue stopped with an error")
            }
            Ok(_) => tracing::info!("the modules' task queue stopped"),
            Err(_) => {
                abort.abort();
                tracing::warn!(
                    "the modules' task in progress did not finish within the grace period"
                );
            }
        }
    }
}

/// [`RunningModules::failed`] of the modules, when they run; pending otherwise.
pub(super) async fn failed(modules: &mut Option<RunningModules>) -> AddonError {
    match modules {
        Some(modules) => modules.failed().await,
        None => std::future::pending().await,
    }
}

impl Drop for RunningModules {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The debug socket's routes for the modules: `/queue/main` (JSON) and
/// `/queue/main.text`.
pub(super) fn debug_routes(view: QueueView) -> Router {
    Router::new()
        .route("/queue/main", get(queue))
        .route("/queue/main.text", get(queue_text))
        .with_state(view)
}

async fn queue(State(view): State<QueueView>) -> Response {
    Json(view.status()).into_response()
}

async fn queue_text(State(view): State<QueueView>) -> Response {
    QueueView::text(&view.status()).into_response()
}

/// One log line per queue event, with the fields an operator filters on.
fn log_event(event: &QueueEvent) {
    match event {
        QueueEvent::Started { task, waiting } => {
            tracing::debug!(task = %task, waiting = waiting.len(), "module task started");
        }
        QueueEvent::Finished {
            task,
            result: Ok(summary),
            elapsed,
            ..
        } => tracing::info!(task = %task, duration_ms = elapsed.as_secs_f64() * 1000.0,
            summary = %summary, "module task done"),
        QueueEvent::Finished {
            task,
            result: Err(error),
            elapsed,
            retry_in,
        } => tracing::warn!(task = %task, duration_ms = elapsed.as_secs_f64() * 1000.0,
            retry_in_s = retry_in.map(|d| d.as_secs_f64()), error = %error, "module task failed"),
        QueueEvent::ConfigChanged { queued } => {
            let queued: Vec<String> = queued.iter().map(ToString::to_string).collect();
            tracing::info!(queued = %queued.join(" "), "the modules' ConfigMap changed");
        }
        QueueEvent::ConvergedAfterChange { module, latency } => {
            tracing::info!(module = %module, latency_ms = latency.as_secs_f64() * 1000.0,
                "module applied after the ConfigMap change");
        }
        QueueEvent::ConfigRejected { reason } => {
            tracing::warn!(reason = %reason, "the modules' ConfigMap change is refused; nothing queued");
        }
        QueueEvent::ValuesChanged { hook, queued } => {
            let queued: Vec<String> = queued.iter().map(ToString::to_string).collect();
            tracing::info!(hook = %hook, queued = %queued.join(" "), "a hook changed values");
        }
        QueueEvent::PatchRejected { hook, reason } => {
            tracing::warn!(hook = %hook, reason = %reason, "a hook's values patch is refused");
        }
        QueueEvent::ModuleConfigChanged { name, queued } => {
            let queued: Vec<String> = queued.iter().map(ToString::to_string).collect();
            tracing::info!(moduleconfig = %name, queued = %queued.join(" "), "a ModuleConfig changed");
        }
        QueueEvent::ModuleConfigRefused { name, reason } => {
            tracing::warn!(moduleconfig = %name, reason = %reason,
                "a ModuleConfig is refused; its module keeps what it had");
        }
    }
}

#[cfg(test)]
mod tests;
