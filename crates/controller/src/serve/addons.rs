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
use operon_hooks::hooks::engines::EngineSet;
use operon_hooks::hooks::reload::{ReloadEntry, ReloadLog, Settle, Step, tree_digest};
use operon_hooks::metrics::Metrics;
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
        let digest = || {
            let dirs = dirs.clone();
            async move {
                tokio::task::spawn_blocking(move || tree_digest(&dirs))
                    .await
                    .unwrap_or_default()
            }
        };
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
    let digest = || {
        let dirs = dirs.clone();
        async move {
            tokio::task::spawn_blocking(move || tree_digest(&dirs))
                .await
                .unwrap_or_default()
        }
    };
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
            Err(e) => AddonError::Hook(format!("the modules' task queue panicked: {e}")),
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
mod tests {
    use super::*;
    use crate::serve::{Coordination, ServeError, ServeOptions};
    use operon_addons::config::ConfigMapRef;
    use operon_addons::render::Renderer;
    use operon_cluster::local::LocalCluster;
    use operon_data::model::WatchEvent;
    use operon_hooks::hooks::load::HookLoader;
    use operon_sandbox::{CallLimits, Sandbox, SandboxConfig};
    use operon_script::{Launcher, ScriptSandboxConfig};
    use std::net::SocketAddr;
    use std::path::Path;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Modules of manifests only: no script runs, so the sandbox's launcher is never
    /// started.
    fn options(modules: &Path) -> Arc<ModulesOptions> {
        let launcher = Launcher {
            program: "/nonexistent/launcher".into(),
            args: Vec::new(),
        };
        Arc::new(ModulesOptions {
            settings: Settings {
                modules_dir: modules.to_owned(),
                global_hooks_dir: None,
                sources: None,
                config_map: ConfigMapRef {
                    namespace: "ops".into(),
                    name: "addon-operator".into(),
                },
                renderer: Renderer {
                    helm: "helm".into(),
                    namespace: "ops".into(),
                    timeout: Duration::from_secs(10),
                },
                hook_timeout: Duration::from_secs(10),
                retry_first: Duration::from_millis(100),
                retry_max: Duration::from_secs(1),
            },
            namespace: "ops".into(),
            client: None,
            sandbox: ScriptSandbox::new(ScriptSandboxConfig::new(launcher)).unwrap(),
            view: QueueView::default(),
        })
    }

    fn loader() -> HookLoader {
        let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
        HookLoader::new(sandbox, CallLimits::default(), false)
    }

    async fn get(address: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: operon\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    async fn config_map(cluster: &LocalCluster, name: &str) -> Option<serde_json::Value> {
        let resource = cluster.resolve(Some("v1"), "ConfigMap").unwrap();
        Cluster::get(cluster, &resource, Some("ops"), name)
            .await
            .unwrap()
    }

    async fn until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
        for _ in 0..200 {
            if let Some(found) = check().await {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serve_converges_modules_shows_their_queue_and_metrics_and_follows_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("hooks")).unwrap();
        write(
            d,
            "modules/values.yaml",
            "appEnabled: true\napp: {replicas: 2}\n",
        );
        write(
            d,
            "modules/001-app/manifests/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: b\n",
        );
        // A wasm beforeHelm hook: no script runs, and its run is in the history.
        std::fs::create_dir_all(d.join("modules/001-app/hooks")).unwrap();
        std::fs::copy(
            operon_tests::VALUES_HOOK,
            d.join("modules/001-app/hooks/values.wasm"),
        )
        .unwrap();
        let cluster = Arc::new(LocalCluster::new());
        let address: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let listener = std::net::TcpListener::bind(address).unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let socket = d.join("debug.socket");
        let options = ServeOptions {
            debug_socket: Some(socket.clone()),
            grace: Duration::from_secs(5),
            modules: Some(options(&d.join("modules"))),
            ..ServeOptions::new(d.join("hooks"), address)
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = cluster.clone();
        let server = tokio::spawn(async move {
            crate::serve::run(options, &loader(), served, Coordination::default(), async {
                let _ = stopped.await;
            })
            .await
        });

        let applied = until("the module's ConfigMap", async || {
            config_map(&cluster, "app").await
        })
        .await;
        assert_eq!(applied["data"]["a"], "b");
        let queue = until("the queue after the convergence", async || {
            let answer = crate::serve::debug::request(&socket, "/queue/main")
                .await
                .ok()?;
            (answer["enabledModules"] == serde_json::json!(["app"])).then_some(answer)
        })
        .await;
        assert_eq!(queue["runningQueue"], true);
        // The module hook's lifecycle run is in `operon hook history`, by its name.
        let runs = crate::serve::debug::request(&socket, "/hook/history")
            .await
            .unwrap();
        assert_eq!(runs[0]["hook"], "app/values.wasm", "{runs}");
        assert_eq!(runs[0]["bindings"], serde_json::json!(["beforeHelm"]));
        assert_eq!(runs[0]["outcome"], "Succeeded", "{runs}");
        let own = crate::serve::debug::request(&socket, "/hook/app%2Fvalues.wasm/history")
            .await
            .unwrap();
        assert_eq!(own, runs);
        let metrics = get(address, "/metrics").await;
        assert!(
            metrics.contains("operon_module_enabled{module=\"app\"} 1"),
            "{metrics}"
        );
        assert!(
            metrics.contains("operon_module_run_seconds_count{module=\"app\"} 1"),
            "{metrics}"
        );

        // The ConfigMap disables the module: its objects and release record go.
        let config: serde_json::Value = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "addon-operator", "namespace": "ops"},
            "data": {"appEnabled": "false"},
        });
        cluster
            .apply_watch_event(WatchEvent::Added, config)
            .unwrap();
        until("the module's objects deleted", async || {
            let gone = config_map(&cluster, "app").await.is_none()
                && config_map(&cluster, "operon-module-app").await.is_none();
            gone.then_some(())
        })
        .await;
        let metrics = get(address, "/metrics").await;
        assert!(
            metrics.contains("operon_module_enabled{module=\"app\"} 0"),
            "{metrics}"
        );
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    async fn module_config_status(cluster: &LocalCluster) -> Option<serde_json::Value> {
        let resource = cluster.resolve(None, "ModuleConfig").unwrap();
        let object = Cluster::get(cluster, &resource, None, "app")
            .await
            .unwrap()?;
        object.get("status").cloned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serve_follows_module_configs_and_writes_their_status() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("hooks")).unwrap();
        // No flag enables the module: its ModuleConfig will.
        write(
            d,
            "modules/001-app/manifests/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
        );
        let cluster = Arc::new(LocalCluster::new());
        let crd = yaml_serde::to_string(
            &<operon_data::api::ModuleConfig as kube::CustomResourceExt>::crd(),
        )
        .unwrap();
        cluster.load_yaml(&crd, "operon CRDs").unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let options = ServeOptions {
            grace: Duration::from_secs(5),
            modules: Some(options(&d.join("modules"))),
            ..ServeOptions::new(d.join("hooks"), address)
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = cluster.clone();
        let server = tokio::spawn(async move {
            crate::serve::run(options, &loader(), served, Coordination::default(), async {
                let _ = stopped.await;
            })
            .await
        });
        let module_config = |generation: i64, enabled: bool| {
            serde_json::json!({
                "apiVersion": "operon.dev/v1alpha1", "kind": "ModuleConfig",
                "metadata": {"name": "app", "generation": generation},
                "spec": {"enabled": enabled},
            })
        };
        // Created after the queue started: its watch brings it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(config_map(&cluster, "app").await.is_none());
        cluster
            .apply_watch_event(WatchEvent::Added, module_config(1, true))
            .unwrap();
        until("the module's ConfigMap", async || {
            config_map(&cluster, "app").await
        })
        .await;
        let status = until("the ModuleConfig ready", async || {
            module_config_status(&cluster)
                .await
                .filter(|s| s["ready"] == true)
        })
        .await;
        assert_eq!(status["enabled"], true);
        assert_eq!(status["observedGeneration"], 1);
        assert_eq!(status["message"], "Enabled and ready");

        cluster
            .apply_watch_event(WatchEvent::Modified, module_config(2, false))
            .unwrap();
        let status = until("the ModuleConfig disabled", async || {
            module_config_status(&cluster)
                .await
                .filter(|s| s["enabled"] == false)
        })
        .await;
        assert_eq!(status["observedGeneration"], 2);
        assert_eq!(status["message"], "Disabled by ModuleConfig app");
        // Discovery says so before the ModuleDelete that follows it has run.
        until("the module's objects deleted", async || {
            config_map(&cluster, "app").await.is_none().then_some(())
        })
        .await;
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    struct Replica {
        server: tokio::task::JoinHandle<Result<(), ServeError>>,
        stop: tokio::sync::oneshot::Sender<()>,
        socket: std::path::PathBuf,
    }

    fn replica(
        name: &str,
        dir: &Path,
        cluster: &Arc<LocalCluster>,
        leases: &Arc<std::sync::Mutex<crate::serve::fake_lease::FakeLeases>>,
    ) -> Replica {
        let socket = dir.join(format!("{name}.socket"));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let options = ServeOptions {
            debug_socket: Some(socket.clone()),
            grace: Duration::from_secs(5),
            modules: Some(options(&dir.join("modules"))),
            ..ServeOptions::new(dir.join("hooks"), address)
        };
        let mut lease = crate::serve::lease::LeaseOptions::new("operon", "ops");
        lease.identity = name.to_owned();
        lease.lease_duration = Duration::from_secs(2);
        lease.renew_deadline = Duration::from_secs(1);
        lease.retry_period = Duration::from_millis(100);
        let elector = crate::serve::lease::LeaderElector::new(
            crate::serve::fake_lease::client(leases.clone()),
            lease,
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let cluster: Arc<dyn Cluster> = cluster.clone();
        let server = tokio::spawn(async move {
            crate::serve::run(
                options,
                &loader(),
                cluster,
                Coordination {
                    elector: Some(elector),
                    ..Coordination::default()
                },
                async {
                    let _ = stopped.await;
                },
            )
            .await
        });
        Replica {
            server,
            stop,
            socket,
        }
    }

    /// Whether the replica's module queue runs, once its debug socket answers.
    async fn runs_queue(replica: &Replica) -> Option<bool> {
        let answer = crate::serve::debug::request(&replica.socket, "/queue/main")
            .await
            .ok()?;
        answer["runningQueue"].as_bool()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_the_leader_converges_modules_and_a_new_leader_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("hooks")).unwrap();
        write(d, "modules/values.yaml", "appEnabled: true\n");
        write(
            d,
            "modules/001-app/manifests/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
        );
        let cluster = Arc::new(LocalCluster::new());
        let leases = Arc::new(std::sync::Mutex::new(
            crate::serve::fake_lease::FakeLeases::default(),
        ));
        let a = replica("a", d, &cluster, &leases);
        until("a leads and converges", async || {
            (runs_queue(&a).await == Some(true) && config_map(&cluster, "app").await.is_some())
                .then_some(())
        })
        .await;
        let b = replica("b", d, &cluster, &leases);
        until("b answers on its debug socket", async || {
            runs_queue(&b).await
        })
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(runs_queue(&b).await, Some(false), "b stands by");

        // a goes; the config disables the module; b takes over, reads the config
        // afresh and deletes what a applied.
        a.stop.send(()).unwrap();
        a.server.await.unwrap().unwrap();
        let config = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "addon-operator", "namespace": "ops"},
            "data": {"appEnabled": "false"},
        });
        cluster
            .apply_watch_event(WatchEvent::Added, config)
            .unwrap();
        until("b leads and deletes the module's objects", async || {
            (runs_queue(&b).await == Some(true) && config_map(&cluster, "app").await.is_none())
                .then_some(())
        })
        .await;
        b.stop.send(()).unwrap();
        b.server.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readyz_waits_for_the_modules_startup_convergence() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("hooks")).unwrap();
        write(d, "modules/values.yaml", "appEnabled: true\n");
        // A kind the cluster does not serve: the ModuleRun fails and is retried.
        let manifest = "modules/001-app/manifests/object.yaml";
        write(
            d,
            manifest,
            "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: app\n",
        );
        let cluster = Arc::new(LocalCluster::new());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let options = ServeOptions {
            grace: Duration::from_secs(5),
            modules: Some(options(&d.join("modules"))),
            ..ServeOptions::new(d.join("hooks"), address)
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = cluster.clone();
        let server = tokio::spawn(async move {
            crate::serve::run(options, &loader(), served, Coordination::default(), async {
                let _ = stopped.await;
            })
            .await
        });
        // The listener may not be bound yet: wait for it before asking.
        until("the listener", async || {
            tokio::net::TcpStream::connect(address).await.ok()
        })
        .await;
        let waiting = until("a retried ModuleRun named by /readyz", async || {
            let answer = get(address, "/readyz").await;
            answer.contains("(failed 2 times)").then_some(answer)
        })
        .await;
        assert!(
            waiting.lines().next().unwrap().contains(" 503 "),
            "{waiting}"
        );
        assert!(
            waiting.contains("waiting for the modules' startup convergence: ModuleRun:app"),
            "{waiting}"
        );
        // The manifest is fixed: the next retry succeeds and the convergence is done.
        write(
            d,
            manifest,
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
        );
        let ready = until("/readyz ready", async || {
            let answer = get(address, "/readyz").await;
            let ok = answer.lines().next().is_some_and(|l| l.contains(" 200 "));
            ok.then_some(answer)
        })
        .await;
        assert!(config_map(&cluster, "app").await.is_some(), "{ready}");
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    async fn data(cluster: &LocalCluster, name: &str) -> Option<String> {
        let object = config_map(cluster, name).await?;
        Some(object["data"]["a"].as_str().unwrap_or_default().to_owned())
    }

    async fn last_reload(socket: &Path) -> Option<serde_json::Value> {
        let reloads = crate::serve::debug::request(socket, "/reload/history")
            .await
            .ok()?;
        reloads.as_array()?.last().cloned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_module_added_changed_refused_and_removed_converges_without_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("hooks")).unwrap();
        let manifest = |name: &str, a: &str| {
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: {a}\n")
        };
        write(d, "modules/values.yaml", "appEnabled: true\n");
        write(
            d,
            "modules/001-app/manifests/cm.yaml",
            &manifest("app", "one"),
        );
        let cluster = Arc::new(LocalCluster::new());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let socket = d.join("debug.socket");
        let options = ServeOptions {
            debug_socket: Some(socket.clone()),
            grace: Duration::from_secs(5),
            modules: Some(options(&d.join("modules"))),
            reload_interval: Some(Duration::from_millis(100)),
            ..ServeOptions::new(d.join("hooks"), address)
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = cluster.clone();
        let server = tokio::spawn(async move {
            crate::serve::run(options, &loader(), served, Coordination::default(), async {
                let _ = stopped.await;
            })
            .await
        });
        until("the module applied", async || {
            data(&cluster, "app").await.filter(|a| a == "one")
        })
        .await;

        // A module comes, enabled by its own values.yaml: it converges.
        write(d, "modules/002-extra/values.yaml", "extraEnabled: true\n");
        write(
            d,
            "modules/002-extra/manifests/cm.yaml",
            &manifest("extra", "x"),
        );
        until("the new module applied", async || {
            data(&cluster, "extra").await
        })
        .await;
        let added = until("the reload recorded", async || {
            last_reload(&socket)
                .await
                .filter(|r| r["added"] == serde_json::json!(["extra"]))
        })
        .await;
        assert_eq!(added["source"], "modules");
        assert_eq!(added["outcome"], "applied");

        // A module changes: its new manifest is applied.
        write(
            d,
            "modules/001-app/manifests/cm.yaml",
            &manifest("app", "two"),
        );
        until("the changed module applied", async || {
            data(&cluster, "app").await.filter(|a| a == "two")
        })
        .await;
        let changed = until("the reload recorded", async || {
            last_reload(&socket)
                .await
                .filter(|r| r["changed"] == serde_json::json!(["app"]))
        })
        .await;
        assert!(changed.get("added").is_none(), "{changed}");

        // A module that does not load: refused with its file, the rest goes on.
        write(d, "modules/003-bad/values.yaml", "bad: [not, a, mapping\n");
        let refused = until("the refused reload", async || {
            last_reload(&socket)
                .await
                .filter(|r| r["outcome"] == "refused")
        })
        .await;
        let error = refused["error"].as_str().unwrap();
        assert!(error.contains("003-bad/values.yaml"), "{error}");
        let queue = crate::serve::debug::request(&socket, "/queue/main")
            .await
            .unwrap();
        assert_eq!(
            queue["enabledModules"],
            serde_json::json!(["app", "extra"]),
            "{queue}"
        );

        // Modules go: the release of the one that was enabled is deleted.
        std::fs::remove_dir_all(d.join("modules/003-bad")).unwrap();
        std::fs::remove_dir_all(d.join("modules/002-extra")).unwrap();
        until("the removed module's objects deleted", async || {
            config_map(&cluster, "extra").await.is_none().then_some(())
        })
        .await;
        let removed = until("the reload recorded", async || {
            last_reload(&socket)
                .await
                .filter(|r| r["removed"] == serde_json::json!(["extra"]))
        })
        .await;
        assert_eq!(removed["outcome"], "applied");
        assert_eq!(data(&cluster, "app").await.as_deref(), Some("two"));
        let metrics = get(address, "/metrics").await;
        assert!(
            metrics.contains(r#"operon_reloads_total{outcome="refused",source="modules"} 1"#),
            "{metrics}"
        );
        assert!(
            !metrics.contains(r#"operon_module_enabled{module="extra"}"#),
            "{metrics}"
        );
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_bad_modules_directory_stops_serve_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("hooks")).unwrap();
        write(d, "modules/001-app/values.yaml", "app: [not, a, mapping\n");
        let address: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let options = ServeOptions {
            modules: Some(options(&d.join("modules"))),
            ..ServeOptions::new(d.join("hooks"), address)
        };
        let error = crate::serve::run(
            options,
            &loader(),
            Arc::new(LocalCluster::new()),
            Coordination::default(),
            std::future::pending(),
        )
        .await
        .unwrap_err();
        assert!(matches!(error, ServeError::Modules(_)), "{error}");
        let message = error.to_string();
        assert!(
            message.starts_with("modules: ") && message.contains("001-app/values.yaml"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn module_config_admission_follows_a_module_added_and_keeps_its_rules_on_a_bad_tree() {
        let dir = tempfile::tempdir().unwrap();
        let modules = dir.path().join("modules");
        write(
            &modules,
            "001-app/manifests/app.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
        );
        let options = options(&modules);
        let layout = operon_addons::operator::read_layout(&options.settings)
            .await
            .unwrap();
        let rules: ModuleSettings = Arc::new(std::sync::RwLock::new(Arc::new(
            operon_addons::module_config::SettingsRules::new(&layout).unwrap(),
        )));
        let checked = |rules: &ModuleSettings| {
            let config = serde_json::json!({
                "apiVersion": "operon.dev/v1alpha1", "kind": "ModuleConfig",
                "metadata": {"name": "extra"},
                "spec": {"enabled": true, "version": 1, "settings": {"replicas": "two"}}});
            rules.read().unwrap().check(&config)
        };
        let before = checked(&rules);
        assert!(
            before.problems.is_empty(),
            "an unknown module is only warned about"
        );
        assert!(!before.warnings.is_empty());
        let _following = crate::controllers::AbortOnDrop::spawn(follow_settings(
            options,
            rules.clone(),
            Duration::from_millis(20),
        ));
        write(
            &modules,
            "002-extra/manifests/extra.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n",
        );
        write(
            &modules,
            "002-extra/openapi/config-values.yaml",
            "type: object\nproperties:\n  replicas:\n    type: integer\n",
        );
        let problems = until("the new module's schema", async || {
            let checked = checked(&rules);
            (!checked.problems.is_empty()).then_some(checked.problems)
        })
        .await;
        let text = format!("{problems:?}");
        assert!(text.contains("spec.settings.replicas"), "{text}");
        // A tree that does not read keeps the rules in use.
        write(&modules, "003-bad/values.yaml", "bad: [not, a, mapping\n");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !checked(&rules).problems.is_empty(),
            "the rules in use stay"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_module_source_unavailable_at_start_is_pulled_again_and_runs() {
        use operon_runner::store::addon_modules::AddonModules;
        use operon_runner::store::oci::{OciClient, OciOptions, RegistryAuth};
        use operon_runner::store::oci_modules::{AllowList, OciModules};
        use std::sync::atomic::{AtomicBool, Ordering};

        let registry = operon_tests::registry::FakeRegistry::new(Some("puller:secret"));
        let host = registry.serve().await;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            d,
            "published/manifests/app.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-source\ndata:\n  pulled: \"yes\"\n",
        );
        write(d, "published/module.yaml", "name: pulled\n");
        let archive = operon_runner::store::addon_archive::pack(&d.join("published")).unwrap();
        let oci_options = OciOptions {
            extra_ca_pem: Vec::new(),
            plain_http: vec![host.clone()],
        };
        let granted = RegistryAuth::Basic("puller".into(), "secret".into());
        let tag = format!("oci://{host}/mods/pulled:1");
        let pushed = OciClient::new(&oci_options)
            .push_addon(&tag, &archive, "pulled", &granted)
            .await
            .unwrap();
        let reference = format!("{tag}@{}", pushed.manifest_digest);
        // The registry refuses the credentials given at start, and takes them later.
        let allowed = Arc::new(AtomicBool::new(false));
        let auth: operon_addons::sources::AuthFor = {
            let allowed = allowed.clone();
            Arc::new(move |_| {
                let auth = if allowed.load(Ordering::SeqCst) {
                    RegistryAuth::Basic("puller".into(), "secret".into())
                } else {
                    RegistryAuth::Basic("puller".into(), "wrong".into())
                };
                Box::pin(async move { Ok(auth) })
            })
        };
        let blobs = operon_runner::store::BlobStore::open(d.join("store"), 64 << 20).unwrap();
        let oci = Arc::new(OciModules::new(
            blobs,
            oci_options,
            AllowList::new([host.clone()]),
        ));
        let sources = operon_addons::sources::ModuleSources::new(
            vec![reference],
            AddonModules::new(oci, d.join("cache")),
            auth,
        );
        std::fs::create_dir_all(d.join("hooks")).unwrap();
        write(d, "modules/values.yaml", "pulledEnabled: true\n");
        let mut modules = (*options(&d.join("modules"))).clone();
        modules.settings.sources = Some(sources);
        let cluster = Arc::new(LocalCluster::new());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let serve_options = ServeOptions {
            grace: Duration::from_secs(5),
            modules: Some(Arc::new(modules)),
            reload_interval: Some(Duration::from_millis(50)),
            ..ServeOptions::new(d.join("hooks"), address)
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = cluster.clone();
        let server = tokio::spawn(async move {
            crate::serve::run(
                serve_options,
                &loader(),
                served,
                Coordination::default(),
                async {
                    let _ = stopped.await;
                },
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            config_map(&cluster, "from-source").await,
            None,
            "not pulled yet"
        );
        allowed.store(true, Ordering::SeqCst);
        until("the pulled module applied", async || {
            let object = config_map(&cluster, "from-source").await?;
            (object["data"]["pulled"] == "yes").then_some(())
        })
        .await;
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }
}
