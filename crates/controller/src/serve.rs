//! `operon serve`, the controller process: hooks from a directory run by the hook
//! engine against a cluster (the kube layer in production, any [`Cluster`] in tests),
//! the HTTP endpoints (metrics, health, readiness), the debug endpoint on a unix
//! socket, addon-operator's modules on the leader ([`addons`]), audits of existing
//! objects on the leader ([`audit`]), and a graceful shutdown.

pub mod addons;
pub mod alerts;
pub mod audit;
pub mod debug;
#[cfg(test)]
mod fake_lease;
pub mod hook_objects;
mod http;
pub mod lease;
pub mod metrics_catalog;
pub(crate) mod module_webhooks;
pub mod modules;
pub mod reload;
pub mod webhook;

use lease::{LeaderElector, LeadershipLost};
use operon_cluster::Cluster;
use operon_hooks::capture::CaptureSettings;
use operon_hooks::engine::{Engine, HookEngineError, RunRecord};
use operon_hooks::engine_set::EngineSet;
use operon_hooks::load::{HookLoadError, HookLoader};
use operon_hooks::metrics::{MetricError, Metrics};
use operon_hooks::reload::{ReloadEntry, ReloadLog};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use webhook::register::{RegisterError, Registrar, register};
use webhook::tls::{ReloadingCert, TlsError};
use webhook::{WebhookEndpoint, WebhookKind};

/// What `operon serve` runs and where it listens.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The hooks directory (shell-operator's discovery rules).
    pub hooks_dir: PathBuf,
    /// Metrics, health and readiness.
    pub listen: SocketAddr,
    /// The debug endpoint; `None` turns it off.
    pub debug_socket: Option<PathBuf>,
    /// How long runs in progress may take to finish after a shutdown signal.
    pub grace: Duration,
    /// The server of validating bindings; required when a hook has one.
    pub admission_webhook: Option<WebhookEndpoint>,
    /// The server of conversion bindings; required when a hook has one.
    pub conversion_webhook: Option<WebhookEndpoint>,
    /// How long a webhook request may wait for its hook.
    pub webhook_timeout: Duration,
    /// The enforcement of validating and mutating bindings that declare none.
    pub webhook_enforcement: operon_data::model::Enforcement,
    /// The Alertmanager receiver on the HTTP port ([`alerts`]); `None` leaves its
    /// routes unmounted.
    pub alertmanager: Option<alerts::AlertmanagerOptions>,
    /// The module API ([`modules`]), served on the admission server's HTTPS port;
    /// `None` leaves its routes unmounted.
    pub module_api: Option<Arc<modules::ModuleApi>>,
    /// addon-operator's modules ([`addons`]), converged by the leader; `None` without
    /// `--modules-dir`.
    pub modules: Option<Arc<addons::ModulesOptions>>,
    /// What the hooks' runs received and answered, kept for `operon hook record`
    /// (nothing by default).
    pub capture: CaptureSettings,
    /// Hooks of the hooks directory run as shadows: (shadow, live), each by its name
    /// ([`operon_hooks::shadow`]). A shadow runs only beside its live hook.
    pub shadow_hooks: Vec<(String, String)>,
    /// The CA the leader's admission server is checked against when a follower passes
    /// it a module's review; `None`: followers answer those 503.
    pub leader_trust: Option<webhook::forward::LeaderTrust>,
    /// How often the hooks directory (and, with modules, the modules and global hooks
    /// directories) is checked for changes, which are loaded without a restart
    /// ([`reload`]); `None` loads them once, at start.
    pub reload_interval: Option<Duration>,
}

impl ServeOptions {
    /// Options with no webhook server.
    pub fn new(hooks_dir: PathBuf, listen: SocketAddr) -> Self {
        Self {
            hooks_dir,
            listen,
            debug_socket: None,
            grace: Duration::from_secs(30),
            admission_webhook: None,
            conversion_webhook: None,
            webhook_timeout: Duration::from_secs(9),
            webhook_enforcement: operon_data::model::Enforcement::Deny,
            alertmanager: None,
            module_api: None,
            modules: None,
            capture: CaptureSettings::default(),
            shadow_hooks: Vec::new(),
            leader_trust: None,
            reload_interval: None,
        }
    }
}

/// Why `operon serve` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A hook could not be loaded or its configuration is invalid.
    #[error(transparent)]
    Hook(#[from] HookLoadError),
    /// The engine could not start (a binding's kind or list failed).
    #[error(transparent)]
    Engine(#[from] HookEngineError),
    /// The metrics registry could not be built.
    #[error(transparent)]
    Metrics(#[from] MetricError),
    /// This replica stopped leading; it stopped running hooks and exits, so that it
    /// comes back as a follower.
    #[error(transparent)]
    LostLeadership(#[from] LeadershipLost),
    /// The webhook configurations could not be written.
    #[error(transparent)]
    Register(#[from] RegisterError),
    /// A webhook certificate is unusable.
    #[error("webhook certificate: {0}")]
    Tls(#[from] TlsError),
    /// A hook has a webhook binding but that webhook server is not configured.
    #[error(
        "hook {hook} has the {kind} binding {binding:?}, but no {kind} webhook server is configured (give {flags})"
    )]
    WebhookNotServed {
        /// The hook.
        hook: String,
        /// The binding.
        binding: String,
        /// `validating`, `mutating` or `conversion`.
        kind: &'static str,
        /// The flags that configure it.
        flags: &'static str,
    },
    /// `--shadow-hook` names a hook the hooks directory does not have.
    #[error(
        "--shadow-hook {shadow}={live}: the hooks directory has no hook named {shadow:?} (names as `operon debug hook list` shows them: {known})"
    )]
    ShadowNotFound {
        /// The shadow asked for.
        shadow: String,
        /// Its live hook.
        live: String,
        /// The hooks the directory has.
        known: String,
    },
    /// The modules' task queue could not start or stopped (a bad modules directory, a
    /// hook whose configuration is invalid, an unreadable ConfigMap).
    #[error("modules: {0}")]
    Modules(#[from] operon_addons::AddonError),
    /// An endpoint could not listen.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address or socket path.
        address: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What a replica coordinates with the others and writes to the API server.
#[derive(Default)]
pub struct Coordination {
    /// Leader election: only the leader runs hooks.
    pub elector: Option<LeaderElector>,
    /// Webhook registration, done by the leader.
    pub registrar: Option<Registrar>,
    /// The client the leader runs Operon's controllers with ([`crate::controllers`]),
    /// when the operon.dev CRDs are installed.
    pub controllers: Option<::kube::Client>,
    /// The Diagnosis controller the leader runs, when the operon.dev CRDs are installed.
    pub diagnoses: Option<Arc<crate::controllers::diagnosis::Context>>,
    /// The Hook objects the leader runs, when the Hook CRD is installed.
    pub hook_objects: Option<Arc<hook_objects::HookObjects>>,
    /// The audits the leader runs (`--audit-interval`), writing PolicyReports.
    pub audit: Option<audit::PeriodicAudit>,
}

/// How often webhook certificate files are looked at.
const CERT_RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// What the endpoints see of the process.
pub(crate) struct Status {
    metrics: Arc<Metrics>,
    /// The engine once the hooks are loaded.
    engine: watch::Sender<Option<Arc<Engine>>>,
    /// The engines beside it (Hook objects', modules'), for the debug socket.
    engines: EngineSet,
    /// With leader election: whether this replica leads.
    leading: watch::Sender<Option<bool>>,
    /// With modules: their queue, whose startup convergence readiness waits for.
    modules: Option<operon_addons::status::QueueView>,
    /// With modules: what the admission webhook checks ModuleConfigs against.
    module_settings: Option<addons::ModuleSettings>,
    /// Whether the leader's webhooks are registered (true without a registrar): until
    /// they are, the API server does not send admission requests, so objects created
    /// after `kubectl wait --for=condition=Ready` would pass unchecked.
    webhooks_registered: watch::Sender<bool>,
    /// With leader election: passes the reviews only the leader answers (modules') on
    /// to it.
    forwarder: Option<Arc<webhook::forward::Forwarder>>,
    /// Whether every binding of the hooks directory's engine was synchronized once:
    /// readiness waits for the first engine only, not for each one a reload makes.
    synchronized_once: std::sync::atomic::AtomicBool,
    /// What was loaded when, for the debug socket.
    pub(crate) reloads: ReloadLog,
}

impl Status {
    fn engine(&self) -> Option<Arc<Engine>> {
        self.engine.borrow().clone()
    }

    fn synchronized_once(&self, engine: &Engine) -> bool {
        use std::sync::atomic::Ordering;
        if !self.synchronized_once.load(Ordering::SeqCst) && engine.synchronized() {
            self.synchronized_once.store(true, Ordering::SeqCst);
        }
        self.synchronized_once.load(Ordering::SeqCst)
    }

    /// Ready once the engine runs, every binding synchronized, the webhooks are
    /// registered and the modules' startup convergence is done (addon-operator's
    /// readiness); a follower is ready as a standby once its hooks loaded.
    fn ready(&self) -> Result<(), String> {
        let leading = *self.leading.borrow();
        match self.engine() {
            Some(_) if leading == Some(false) => Ok(()),
            None => Err("hooks are loading".to_owned()),
            Some(engine) if !self.synchronized_once(&engine) => {
                Err("waiting for the Synchronization of every kubernetes binding".to_owned())
            }
            Some(_) if !*self.webhooks_registered.borrow() => {
                Err("waiting for the webhook configurations to be registered".to_owned())
            }
            Some(_) => self
                .modules
                .as_ref()
                .map_or(Ok(()), |view| view.startup_converged()),
        }
    }
}

/// Runs until `shutdown` resolves: loads the hooks, serves the endpoints, starts the
/// engine and runs it; then stops taking events and lets runs finish within the grace
/// period.
///
/// With a registrar, the leader writes the webhook configurations before it runs
/// hooks. With an elector, only the leader runs hooks: a replica loads its hooks, waits to
/// lead, and returns [`ServeError::LostLeadership`] when it stops leading (runs in
/// progress are cancelled at once: another replica may already run them).
pub async fn run(
    options: ServeOptions,
    loader: &HookLoader,
    cluster: Arc<dyn Cluster>,
    coordination: Coordination,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let metrics = Arc::new(Metrics::new()?);
    // What each script run got, so that a node without a protection shows on /metrics.
    operon_script::register_metrics(metrics.registry()).map_err(MetricError::from)?;
    // The Diagnoses the leader runs, and the modules it fetches (a replica's store).
    crate::controllers::diagnosis::metrics::register_metrics(metrics.registry())
        .and_then(|()| operon_store::fetch::register_metrics(metrics.registry()))
        .and_then(|()| operon_store::oci_modules::register_metrics(metrics.registry()))
        .and_then(|()| operon_cluster::kube::observe::register_metrics(metrics.registry()))
        .and_then(|()| audit::metrics::register_metrics(metrics.registry()))
        .and_then(|()| crate::controllers::trigger::metrics::register_metrics(metrics.registry()))
        .and_then(|()| lease::metrics::register_metrics(metrics.registry()))
        .map_err(MetricError::from)?;

    // Every replica answers admission, so every replica reads the modules' schemas.
    let module_settings = match &options.modules {
        Some(modules) => Some(Arc::new(std::sync::RwLock::new(Arc::new(
            operon_addons::module_config::SettingsRules::new(
                &operon_addons::operator::read_layout(&modules.settings).await?,
            )?,
        )))),
        None => None,
    };
    let status = Arc::new(Status {
        metrics: metrics.clone(),
        engine: watch::Sender::new(None),
        engines: EngineSet::default(),
        leading: watch::Sender::new(coordination.elector.as_ref().map(|_| false)),
        modules: options.modules.as_ref().map(|m| m.view.clone()),
        module_settings,
        webhooks_registered: watch::Sender::new(coordination.registrar.is_none()),
        forwarder: (coordination.elector.as_ref())
            .zip(options.leader_trust.clone())
            .map(|(elector, trust)| {
                Arc::new(webhook::forward::Forwarder::new(
                    elector.leader_address(),
                    trust,
                    elector.options().identity.clone(),
                ))
            }),
        synchronized_once: std::sync::atomic::AtomicBool::new(false),
        reloads: ReloadLog::default(),
    });
    // Every replica's ModuleConfig admission follows the modules' schemas as they change.
    let _module_settings = (options.modules.clone())
        .zip(status.module_settings.clone())
        .zip(options.reload_interval)
        .map(|((modules, rules), interval)| {
            crate::controllers::AbortOnDrop::spawn(addons::follow_settings(
                modules, rules, interval,
            ))
        });
    let (stop, stopped) = watch::channel(false);
    let mut servers = tokio::task::JoinSet::new();
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| ServeError::Listen {
            address: options.listen.to_string(),
            source,
        })?;
    tracing::info!(address = %options.listen, "serving /metrics, /metrics/hooks, /healthz, /readyz");
    let alerts = options.alertmanager.clone().map(|alertmanager| {
        tracing::info!(address = %options.listen, secret = %alertmanager.token_secret,
            "serving the Alertmanager receiver at /api/v2/alerts and /api/v1/alerts");
        let counter = crate::controllers::trigger::DiagnosesCounter::new();
        Arc::new(alerts::AlertReceiver::start(alertmanager, Some(counter)))
    });
    servers.spawn(http::serve(
        listener,
        status.clone(),
        alerts,
        stopped.clone(),
    ));
    for (endpoint, kind) in [
        (&options.admission_webhook, WebhookKind::Admission),
        (&options.conversion_webhook, WebhookKind::Conversion),
    ] {
        let Some(endpoint) = endpoint else { continue };
        let cert = ReloadingCert::load(endpoint.tls.clone())?;
        let config = cert.server_config()?;
        let listener = tokio::net::TcpListener::bind(endpoint.listen)
            .await
            .map_err(|source| ServeError::Listen {
                address: endpoint.listen.to_string(),
                source,
            })?;
        tracing::info!(address = %endpoint.listen, kind = ?kind, "serving webhooks over HTTPS");
        let watching = cert.watch(CERT_RELOAD_INTERVAL);
        let router = webhook::router(
            status.clone(),
            kind,
            options.webhook_timeout,
            options.webhook_enforcement,
        );
        let router = match (&options.module_api, kind) {
            (Some(api), WebhookKind::Admission) => {
                tracing::info!(address = %endpoint.listen, "serving the module API at /v1/modules");
                router.merge(modules::router(api.clone()))
            }
            _ => router,
        };
        let stopped = stopped.clone();
        servers.spawn(async move {
            webhook::serve_tls(listener, config, router, stopped).await;
            watching.abort();
        });
    }
    if options.module_api.is_some() && options.admission_webhook.is_none() {
        tracing::warn!(
            "the module API is not served: it needs the admission server's HTTPS \
            (--validating-webhook-server-cert and --validating-webhook-server-key, \
            --webhook-cert-dir or --webhook-self-signed)"
        );
    }
    if let Some(path) = &options.debug_socket {
        let listener = debug::bind(path).map_err(|source| ServeError::Listen {
            address: path.display().to_string(),
            source,
        })?;
        tracing::info!(socket = %path.display(), "serving the debug endpoint");
        let modules = options
            .modules
            .as_ref()
            .map(|m| addons::debug_routes(m.view.clone()));
        servers.spawn(debug::serve(
            listener,
            status.clone(),
            modules,
            stopped.clone(),
        ));
    }

    let outcome = run_engine(
        &options,
        loader,
        cluster,
        metrics,
        &status,
        coordination,
        shutdown,
    )
    .await;
    let _ = stop.send(true);
    while servers.join_next().await.is_some() {}
    if let Some(path) = &options.debug_socket {
        let _ = std::fs::remove_file(path);
    }
    outcome
}

async fn run_engine(
    options: &ServeOptions,
    loader: &HookLoader,
    cluster: Arc<dyn Cluster>,
    metrics: Arc<Metrics>,
    status: &Arc<Status>,
    coordination: Coordination,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    // shell-operator starts with an empty hooks directory (hooks may come later with a
    // new ConfigMap); so does `operon serve`, with a warning.
    let directory = reload::load_hooks(options, loader, cluster.as_ref(), None).await?;
    tracing::info!(hooks = directory.hooks.len(), dir = %options.hooks_dir.display(), "hooks loaded");
    // Shadows run beside their live hook only, never on bindings of their own.
    if let Some(error) = reload::missing_shadow(options, &directory) {
        return Err(error);
    }
    let shadows = operon_hooks::shadow::Shadows::default();
    let mut shadow_attachments = reload::ShadowAttachments::default();
    shadow_attachments.update(options, &directory, &metrics, &shadows);
    if let Some(error) = reload::unserved(options, &directory.hooks) {
        return Err(error);
    }
    let engine = reload::engine(
        options,
        directory.hooks.clone(),
        cluster.clone(),
        metrics.clone(),
        &shadows,
    );
    let mut shutdown = std::pin::pin!(shutdown);
    // Every replica lists and watches, so that a standby's webhooks see the same
    // snapshots as the leader's and a take-over starts warm; only the leader runs hooks.
    tokio::select! {
        observed = engine.observe() => observed?,
        () = &mut shutdown => return Ok(()),
    }
    let pumps = engine.spawn_pumps();
    tracing::info!("bindings listed and watched");
    status.engine.send_replace(Some(engine.clone()));
    reload::applied_now(&metrics, reload::SOURCE);
    let mut entry = ReloadEntry::now(reload::SOURCE, "loaded");
    entry.added = (engine.hooks().iter())
        .map(|h| h.hook.name().to_owned())
        .collect();
    status.reloads.push(entry);
    // Every replica follows the hooks directory, so that its webhooks answer with the
    // hooks in use; the leader's loop below moves its runs to each new engine.
    let reloader = reload::Reloader {
        options,
        loader,
        cluster: cluster.clone(),
        metrics: metrics.clone(),
        status: status.clone(),
        shadows: shadows.clone(),
    };
    let reloading = async move {
        match options.reload_interval.filter(|i| !i.is_zero()) {
            Some(interval) => {
                tracing::info!(dir = %options.hooks_dir.display(), ?interval,
                    "reloading the hooks directory when it changes");
                reloader
                    .follow(interval, directory, pumps, shadow_attachments)
                    .await
            }
            None => {
                let _kept = (pumps, shadow_attachments);
                std::future::pending().await
            }
        }
    };
    tokio::select! {
        outcome = lead_and_run(options, engine, cluster, status, coordination, shadows, shutdown) => outcome,
        () = reloading => Ok(()),
    }
}

/// The part of [`run_engine`] after the hooks directory's engine first listed and
/// watched: Hook objects, leadership, and on the leader the controllers, audits,
/// modules and the hooks' runs, moved to each engine a reload makes.
async fn lead_and_run(
    options: &ServeOptions,
    engine: Arc<Engine>,
    cluster: Arc<dyn Cluster>,
    status: &Arc<Status>,
    coordination: Coordination,
    shadows: operon_hooks::shadow::Shadows,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let Coordination {
        elector,
        registrar,
        controllers,
        diagnoses,
        hook_objects,
        audit,
    } = coordination;
    let lease = elector
        .as_ref()
        .map(|e| e.options().name.clone())
        .unwrap_or_default();
    // Without leader election this replica is the one that runs hooks.
    let leader = lease::metrics::leading(&lease);
    leader.set(i64::from(elector.is_none()));
    let modules_cluster = cluster.clone();
    let audit_cluster = cluster;
    let mut shutdown = std::pin::pin!(shutdown);
    // Every replica loads the Hook objects and serves their webhooks; only the leader
    // runs them (`leads` turns true with leadership). Dropped (aborted) when this
    // function returns.
    let (leads, leading) = watch::channel(elector.is_none());
    // What Hook objects and modules want registered as webhooks (and where each Hook
    // object's validating bindings may intercept, for audits).
    let owned_webhooks = webhook::owned::WebhookRegistry::default();
    let hook_registry = hook_objects.as_ref().map(|_| owned_webhooks.clone());
    let _hook_objects = hook_objects.clone().map(|objects| {
        let mut reporting = hook_objects::Reporting::new(
            status.metrics.clone(),
            status.engines.clone(),
            options.capture.clone(),
            leading,
        );
        reporting = reporting.with_webhooks(
            owned_webhooks.clone(),
            options.admission_webhook.is_some(),
            options.conversion_webhook.is_some(),
        );
        reporting = reporting.with_shadows(shadows.clone(), status.engine.subscribe());
        crate::controllers::AbortOnDrop::spawn(hook_objects::run(objects, reporting))
    });

    // Leadership: wait for it, then keep renewing in the background.
    let (stop_leading, mut lease_stopped) = watch::channel(false);
    let mut leadership = None;
    if let Some(mut elector) = elector {
        tracing::info!(lease = %elector.options().name, namespace = %elector.options().namespace,
                       identity = %elector.options().identity, "waiting to lead");
        tokio::select! {
            leading = elector.acquire(&mut lease_stopped) => if !leading { return Ok(()) },
            () = &mut shutdown => return Ok(()),
        }
        status.leading.send_replace(Some(true));
        leads.send_replace(true);
        leader.set(1);
        let (lost, lost_receiver) = tokio::sync::oneshot::channel();
        let renewing = tokio::spawn(async move {
            let outcome = elector.renew(&mut lease_stopped).await;
            if outcome.is_ok()
                && let Err(e) = elector.release().await
            {
                tracing::warn!(error = %e, "could not release the leader Lease");
            }
            let _ = lost.send(outcome);
        });
        leadership = Some((lost_receiver, renewing));
    }
    let lost = async {
        match &mut leadership {
            Some((lost, _)) => match lost.await {
                Ok(Err(e)) => e,
                _ => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    };
    let running = async {
        // Only the leader writes the webhook configurations (and writes them again when
        // the self-signed CA rotates); every replica serves them.
        // A reload before this replica led made the engine in use another.
        let mut engines = status.engine.subscribe();
        let engine = engines.borrow_and_update().clone().unwrap_or(engine);
        // A binding the API server cannot serve stops the engine, as a hook that does
        // not load does; what may pass (the API server away, a CRD not created yet) is
        // tried again while the rest runs.
        let mut _registering = match &registrar {
            Some(registrar) => Some(keep_registered(registrar, &engine, status).await?),
            None => None,
        };
        // Hook objects' and modules' webhooks, kept by the leader; aborted with this
        // block.
        let owners = hook_objects.is_some() || options.modules.is_some();
        let _owned_webhooks = registrar.clone().filter(|_| owners).map(|registrar| {
            crate::controllers::AbortOnDrop::spawn(webhook::owned::keep_registered(
                owned_webhooks.clone(),
                registrar,
            ))
        });
        let _module_webhooks = match &options.modules {
            Some(modules) => {
                let view = modules.view.clone();
                Some(crate::controllers::AbortOnDrop::spawn(
                    module_webhooks::follow(
                        status.engines.clone(),
                        owned_webhooks.clone(),
                        status.engine.subscribe(),
                        module_webhooks::Served {
                            admission: options.admission_webhook.is_some(),
                            conversion: options.conversion_webhook.is_some(),
                        },
                        move || view.startup_converged().is_ok(),
                    ),
                ))
            }
            None => {
                // No module runs here: configurations of modules are stale.
                owned_webhooks.synced("Module");
                None
            }
        };
        // The controllers stop when this block ends or is dropped (leadership lost):
        // the sender goes away and `changed` returns.
        let (_stop_controllers, mut controllers_stopped) = watch::channel(());
        if let Some(client) = controllers.clone() {
            tokio::spawn(crate::controllers::operation_set::run(client, async move {
                while controllers_stopped.changed().await.is_ok() {}
            }));
            tracing::info!("running the OperationSet controller");
        }
        if let Some(client) = controllers.clone() {
            let mut stopped = _stop_controllers.subscribe();
            let counter = crate::controllers::trigger::DiagnosesCounter::new();
            tokio::spawn(crate::controllers::trigger::run_with_metrics(
                client,
                Some(counter),
                async move { while stopped.changed().await.is_ok() {} },
            ));
            tracing::info!("running the Trigger controller");
        }
        // Aborted when this block ends or is dropped: a replica that stops leading
        // stops running Diagnoses at once, as another may already resume them.
        let _diagnosis_controller = diagnoses.clone().map(|ctx| {
            tracing::info!("running the Diagnosis controller");
            crate::controllers::AbortOnDrop::spawn(crate::controllers::diagnosis::run_controller(
                ctx,
                std::future::pending(),
            ))
        });
        // Aborted with this block, as the Diagnoses: another leader audits next.
        let _audit = audit.clone().map(|periodic| {
            let status = status.clone();
            let registry = hook_registry.clone();
            // The hooks directory's engine, then each Hook object's, its bindings kept to
            // the namespaces their webhooks are.
            let engines = move || {
                let directory = (status.engine().into_iter()).map(|engine| audit::AuditedEngine {
                    source: audit::HOOKS_DIRECTORY.to_owned(),
                    engine,
                    namespaces: Default::default(),
                });
                let objects = (status.engines.engines().into_iter())
                    .filter(|r| r.source == hook_objects::HOOK_OBJECT_SOURCE)
                    .filter_map(|r| {
                        let key = hook_objects::prepare::hook_of_run_name(
                            r.engine.hooks().first()?.hook.name(),
                        )?;
                        // A Hook not serving (yet) is left for the next audit.
                        let namespaces =
                            registry.as_ref()?.namespace_limits(&(&key).into())?;
                        Some(audit::AuditedEngine {
                            source: format!("Hook object {}/{}", key.0, key.1),
                            namespaces,
                            engine: r.engine,
                        })
                    });
                directory.chain(objects).collect()
            };
            tracing::info!(interval = ?periodic.interval, rate = periodic.settings.rate, "auditing existing objects");
            crate::controllers::AbortOnDrop::spawn(audit::run_periodically(
                periodic,
                audit_cluster.clone(),
                engines,
            ))
        });
        // Dropped (aborted) with this block when leadership is lost.
        let mut modules = options.modules.clone().map(|m| {
            let engines = status.engines.clone();
            let reload = (options.reload_interval.filter(|i| !i.is_zero()))
                .map(|interval| (interval, status.reloads.clone()));
            addons::spawn(
                m,
                modules_cluster.clone(),
                status.metrics.clone(),
                engines,
                reload,
            )
        });
        engine.take_over();
        tracing::info!("running hooks");
        let mut current = engine;
        loop {
            // Until shutdown, or until a reload makes another engine the one in use.
            let mut swapped = false;
            let stop = async {
                tokio::select! {
                    () = &mut shutdown => {}
                    changed = engines.changed() => swapped = changed.is_ok(),
                }
            };
            tokio::select! {
                () = current.run_until(stop, options.grace, log_run) => {}
                error = addons::failed(&mut modules) => return Err(error.into()),
            }
            let next = match engines.borrow_and_update().clone() {
                Some(next) if swapped && !Arc::ptr_eq(&next, &current) => next,
                _ if swapped => continue,
                _ => break,
            };
            if let Some(registrar) = &registrar {
                match keep_registered(registrar, &next, status).await {
                    Ok(task) => _registering = Some(task),
                    Err(e) => tracing::error!(error = %e,
                        "the webhooks of the reloaded hooks cannot be registered; the configurations written before stay"),
                }
            }
            next.take_over_from(&current);
            tracing::info!(hooks = next.hooks().len(), "running the reloaded hooks");
            current = next;
        }
        if let Some(modules) = modules {
            modules.stop(options.grace).await;
        }
        Ok::<(), ServeError>(())
    };
    let outcome = tokio::select! {
        outcome = running => outcome,
        // Dropping the engine's loop cancels every run in progress.
        lost = lost => {
            tracing::error!(error = %lost, "stopped leading; no hook runs any more");
            status.leading.send_replace(Some(false));
            return Err(lost.into());
        }
    };
    let _ = stop_leading.send(true);
    if let Some((_, renewing)) = leadership {
        let _ = renewing.await;
    }
    tracing::info!("engine stopped");
    outcome
}

/// Writes the webhook configurations of `engine`'s hooks, and keeps them written (a
/// failure that may pass is tried again, a CA rotation writes them again) until the
/// returned task is dropped. The leader does it; every replica serves them.
async fn keep_registered(
    registrar: &Registrar,
    engine: &Arc<Engine>,
    status: &Arc<Status>,
) -> Result<crate::controllers::AbortOnDrop, RegisterError> {
    let first = register(
        registrar.client(),
        engine.hooks(),
        &registrar.registration(),
    )
    .await;
    let first = match first {
        Err(e) if !e.may_pass() => return Err(e),
        first => first,
    };
    if first.as_ref().err().is_none_or(RegisterError::in_place) {
        status.webhooks_registered.send_replace(true);
    }
    let (registrar, engine, status) = (registrar.clone(), engine.clone(), status.clone());
    Ok(crate::controllers::AbortOnDrop::spawn(async move {
        // Stopped by aborting the task.
        let (_stop, stopped) = watch::channel(false);
        let registered = || {
            status.webhooks_registered.send_replace(true);
        };
        registrar
            .keep_registered(engine.hooks(), first, stopped, registered)
            .await;
    }))
}

/// One log line per hook run, with the fields an operator filters on.
fn log_run(record: &RunRecord) {
    let binding = record
        .contexts
        .first()
        .map(|c| c.binding.as_str())
        .unwrap_or_default();
    let event_type = record
        .contexts
        .first()
        .map(|c| c.type_.as_str())
        .unwrap_or_default();
    let watch_event = record
        .contexts
        .first()
        .and_then(|c| c.watch_event)
        .map(|e| e.as_str())
        .unwrap_or_default();
    let duration_ms = record.run.elapsed.as_secs_f64() * 1000.0;
    let error = match (&record.run.outcome, &record.apply_error) {
        (Err(e), _) => Some(e.to_string()),
        (Ok(_), Some(e)) => Some(e.to_string()),
        _ => None,
    };
    match error {
        None => tracing::info!(
            hook = %record.hook, binding, queue = %record.queue, event_type, watch_event,
            contexts = record.contexts.len(), patches = record.run.patches.len(),
            duration_ms, "hook run"
        ),
        Some(error) => tracing::warn!(
            hook = %record.hook, binding, queue = %record.queue, event_type, watch_event,
            contexts = record.contexts.len(), duration_ms,
            allowed_failure = record.allowed_failure,
            retry_in_s = record.retry_in.map(|d| d.as_secs_f64()),
            error = %error, "hook run failed"
        ),
    }
}

#[cfg(test)]
mod tests;
