//! Hook objects (`hooks.operon.dev`): hooks run from uploaded modules, loaded as they
//! appear, change and disappear, with no restart. Each Hook object gets its own hook
//! engine (its own queues and snapshots) over a cluster that refuses patches outside
//! the Hook's permissions ([`operon_hooks::permitted`]); a change of the object, or of
//! the Module its `spec.module` names, drops that engine and starts another, and a
//! deleted Hook's engine is dropped. Every replica loads each Hook and watches its
//! bindings, so that every replica answers its admission webhooks ([`webhooks`]);
//! only the leader runs it, writes its status and registers its webhooks (as the
//! hooks directory's engine does).
//!
//! What this owns: following the Hook objects (a kube-runtime watcher; a re-list drops
//! the Hooks it no longer finds), preparing each ([`prepare`]), writing its status
//! (`status`) and registering its webhooks ([`webhooks`]), and showing each engine to
//! the debug socket and the webhook servers while it runs (an [`EngineSet`]). It does
//! not touch the hooks of the hooks directory.

pub mod prepare;
mod shadow;
pub(crate) mod status;
pub mod webhooks;

use crate::controllers::AbortOnDrop;
use crate::serve::webhook::owned::{HOOK_OBJECT_PREFIX, OwnedWebhooks, Owner, WebhookRegistry};
use futures::StreamExt as _;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use operon_cluster::Cluster;
use operon_data::api::{ConditionStatus, Hook, HookBindingStatus, HookStatus};
use operon_hooks::capture::CaptureSettings;
use operon_hooks::engine::Engine;
use operon_hooks::engine_set::EngineSet;
use operon_hooks::load::HookLoader;
use operon_hooks::metrics::Metrics;
use operon_store::ModuleLocator;
use status::{StatusWriter, set_condition};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// How often Hooks whose module was missing look for it again (a fetched module does
/// not change any name, so nothing else says it arrived).
const RECHECK: Duration = Duration::from_secs(5);
/// The first wait before an engine whose watches failed to start is tried again; it
/// doubles up to [`MAX_BACKOFF`].
const BACKOFF: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What running Hook objects needs.
pub struct HookObjects {
    client: Client,
    /// Resolves `spec.module` (the cluster's Modules, and --modules).
    modules: ModuleLocator,
    /// Loads wasm hooks, in the wasm sandbox it was given (`operon serve` gives the
    /// Diagnosis runners' one, so a module is compiled once for both).
    loader: HookLoader,
    /// The cluster each Hook's engine watches and patches through its permissions.
    cluster: Arc<dyn Cluster>,
    /// Wakes the loop when a Module points to new bytes.
    catalog_changes: Option<tokio::sync::watch::Receiver<u64>>,
    /// Where the runs of Hooks with `runOn: Job` go, when this engine offloads.
    offload: Option<prepare::HookOffload>,
}

impl std::fmt::Debug for HookObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookObjects").finish_non_exhaustive()
    }
}

impl HookObjects {
    /// Hook objects read through `client`, their modules found by `modules` and loaded
    /// by `loader`, their engines over `cluster`.
    pub(crate) fn new(
        client: Client,
        modules: ModuleLocator,
        loader: HookLoader,
        cluster: Arc<dyn Cluster>,
    ) -> Self {
        Self {
            client,
            modules,
            loader,
            cluster,
            catalog_changes: None,
            offload: None,
        }
    }

    /// Lets Hooks with `runOn: Job` run, in Jobs of `offload`.
    pub(crate) fn with_offload(mut self, offload: Option<prepare::HookOffload>) -> Self {
        self.offload = offload;
        self
    }

    /// Reloads the Hooks naming a module when the module's name points to new bytes.
    pub(crate) fn with_catalog_changes(
        mut self,
        changes: tokio::sync::watch::Receiver<u64>,
    ) -> Self {
        self.catalog_changes = Some(changes);
        self
    }
}

/// The Hook objects of the cluster behind `client`, their modules found by `modules`
/// (reloaded when a name of `catalog` changes), loaded by `loader`; `None`, logged,
/// when the Hook CRD is not installed.
pub async fn setup(
    client: &Client,
    modules: ModuleLocator,
    catalog: Option<&operon_store::ModuleCatalog>,
    loader: HookLoader,
    cluster: Arc<dyn Cluster>,
    offload: Option<prepare::HookOffload>,
) -> Option<Arc<HookObjects>> {
    match hooks_installed(client).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!("the Hook CRD is not installed: Hook objects do not run");
            return None;
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot tell whether the Hook CRD is installed: Hook objects do not run");
            return None;
        }
    }
    let mut objects =
        HookObjects::new(client.clone(), modules, loader, cluster).with_offload(offload);
    if let Some(catalog) = catalog {
        objects = objects.with_catalog_changes(catalog.subscribe());
    }
    Some(Arc::new(objects))
}

/// Whether the API server serves the Hook resource (its CRD is installed).
pub(crate) async fn hooks_installed(client: &Client) -> Result<bool, kube::Error> {
    match client
        .list_api_group_resources(operon_data::api::API_VERSION)
        .await
    {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == "hooks")),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Where a Hook object's hook comes from, in `operon debug hook list`.
pub const HOOK_OBJECT_SOURCE: &str = "Hook object";

type Key = (String, String);

/// One Hook object being run.
struct Running {
    object: Arc<Hook>,
    /// What the current engine was made from: a change starts another.
    fingerprint: Option<String>,
    writer: Arc<StatusWriter>,
    /// Loading, then running, the hook; dropped to stop it.
    task: Option<AbortOnDrop>,
}

/// Where each Hook object's engine reports besides its status.
pub(crate) struct Reporting {
    pub(crate) metrics: Arc<Metrics>,
    /// The debug socket's and the webhook servers' view: an engine is in it while it
    /// runs.
    pub(crate) engines: EngineSet,
    /// What its runs keep for `operon hook record`, as the hooks directory's engine.
    pub(crate) capture: CaptureSettings,
    /// Whether this replica leads: only then do engines run, statuses get written
    /// and webhooks registered.
    pub(crate) leading: tokio::sync::watch::Receiver<bool>,
    /// What each Hook wants registered.
    registry: WebhookRegistry,
    /// Whether this process serves admission webhooks: a Hook with a validating or
    /// mutating binding needs it.
    admission_served: bool,
    /// Whether it serves conversion webhooks: a Hook with a conversion binding needs it.
    conversion_served: bool,
    /// The process's shadow hooks: Hook engines run them beside their hooks, and a
    /// Hook with `spec.shadowOf` attaches to them.
    shadows: operon_hooks::shadow::Shadows,
    /// The hooks directory's engine, where a shadow's live hook may be.
    main: Option<tokio::sync::watch::Receiver<Option<Arc<Engine>>>>,
}

impl Reporting {
    /// Reports to `metrics`, each engine in `engines` while it runs, capturing as
    /// `capture` says; engines run once `leading` holds.
    pub(crate) fn new(
        metrics: Arc<Metrics>,
        engines: EngineSet,
        capture: CaptureSettings,
        leading: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        Self {
            metrics,
            engines,
            capture,
            leading,
            registry: WebhookRegistry::default(),
            admission_served: false,
            conversion_served: false,
            shadows: Default::default(),
            main: None,
        }
    }

    /// Runs the shadows of `shadows` beside the Hooks' hooks, and lets Hooks shadow
    /// hooks of `main` (the hooks directory's engine) or of other Hooks.
    pub(crate) fn with_shadows(
        mut self,
        shadows: operon_hooks::shadow::Shadows,
        main: tokio::sync::watch::Receiver<Option<Arc<Engine>>>,
    ) -> Self {
        self.shadows = shadows;
        self.main = Some(main);
        self
    }

    /// The hooks directory's engine, once its hooks are loaded.
    pub(crate) fn main_engine(&self) -> Option<Arc<Engine>> {
        self.main.as_ref().and_then(|m| m.borrow().clone())
    }

    /// Lets Hooks have validating and mutating bindings when this process has an
    /// admission server (`admission`), conversion bindings when it has a conversion
    /// server (`conversion`), their registrations wanted in `registry` (which the
    /// leader keeps, when this engine registers webhooks).
    pub(crate) fn with_webhooks(
        mut self,
        registry: WebhookRegistry,
        admission: bool,
        conversion: bool,
    ) -> Self {
        self.admission_served = admission;
        self.conversion_served = conversion;
        self.registry = registry;
        self
    }
}

/// Runs the Hook objects until the future is dropped, reporting as `reporting` says.
/// Every replica runs it: followers load the Hooks and serve their webhooks, and run
/// them once they lead.
pub(crate) async fn run(objects: Arc<HookObjects>, reporting: Reporting) {
    let reporting = Arc::new(reporting);
    let api: Api<Hook> = Api::all(objects.client.clone());
    let events = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(events);
    let mut running: HashMap<Key, Running> = HashMap::new();
    let mut relisted: Option<HashSet<Key>> = None;
    let mut recheck = tokio::time::interval(RECHECK);
    let mut changes = objects.catalog_changes.clone();
    tracing::info!("running Hook objects");
    loop {
        let catalog_changed = async {
            match changes.as_mut() {
                Some(changes) => {
                    if changes.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = events.next() => match event {
                None => return,
                Some(Ok(watcher::Event::Apply(hook))) => {
                    upsert(&objects, &reporting, &mut running, hook);
                }
                Some(Ok(watcher::Event::Delete(hook))) => {
                    reporting.registry.forget(&key(&hook).into());
                    if running.remove(&key(&hook)).is_some() {
                        tracing::info!(hook = %prepare::run_name(&hook), "Hook deleted; its engine stopped");
                    }
                }
                Some(Ok(watcher::Event::Init)) => relisted = Some(HashSet::new()),
                Some(Ok(watcher::Event::InitApply(hook))) => {
                    relisted.get_or_insert_with(HashSet::new).insert(key(&hook));
                    upsert(&objects, &reporting, &mut running, hook);
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    // Deletes during a watch gap (after a 410) come as absences.
                    if let Some(seen) = relisted.take() {
                        running.retain(|k, _| {
                            let kept = seen.contains(k);
                            if !kept {
                                reporting.registry.forget(&k.into());
                            }
                            kept
                        });
                    }
                    reporting.registry.synced("Hook");
                }
                Some(Err(e)) => tracing::warn!(error = %e, "watching Hooks"),
            },
            () = catalog_changed => reconcile_all(&objects, &reporting, &mut running),
            _ = recheck.tick() => reconcile_all(&objects, &reporting, &mut running),
        }
    }
}

fn key(hook: &Hook) -> Key {
    (hook.namespace().unwrap_or_default(), hook.name_any())
}

fn upsert(
    objects: &Arc<HookObjects>,
    reporting: &Arc<Reporting>,
    running: &mut HashMap<Key, Running>,
    hook: Hook,
) {
    let k = key(&hook);
    let hook = Arc::new(hook);
    let entry = running.entry(k.clone()).or_insert_with(|| {
        let api: Api<Hook> = Api::namespaced(objects.client.clone(), &k.0);
        let current = hook.status.clone().unwrap_or_default();
        let leading = reporting.leading.clone();
        Running {
            object: hook.clone(),
            fingerprint: None,
            writer: Arc::new(StatusWriter::start(api, k.1.clone(), current, leading)),
            task: None,
        }
    });
    entry.object = hook;
    reconcile(objects, reporting, entry);
}

fn reconcile_all(
    objects: &Arc<HookObjects>,
    reporting: &Arc<Reporting>,
    running: &mut HashMap<Key, Running>,
) {
    for entry in running.values_mut() {
        reconcile(objects, reporting, entry);
    }
}

/// Starts (again) the engine of `entry` when what it is made from changed: the spec, or
/// the module file `spec.module` leads to (a name that now points to other bytes, a
/// module that arrived).
fn reconcile(objects: &Arc<HookObjects>, reporting: &Arc<Reporting>, entry: &mut Running) {
    let hook = entry.object.clone();
    // An `oci://` module is pulled by the task: it names the same bytes until the spec
    // changes.
    let located = (!operon_store::oci::is_oci(&hook.spec.module))
        .then(|| prepare::locate(&objects.modules, &hook));
    let fingerprint = format!(
        "{}|{:?}|{}",
        hook.metadata.generation.unwrap_or_default(),
        located.as_ref().map(|l| l.as_ref().map_err(|r| &r.message)),
        serde_json::to_string(&hook.spec).unwrap_or_default(),
    );
    if entry.fingerprint.as_deref() == Some(fingerprint.as_str()) {
        return;
    }
    entry.fingerprint = Some(fingerprint);
    // The previous engine stops before the next one loads; its webhooks stay
    // registered until this one is loaded or refused.
    entry.task = None;
    reporting.registry.loading(&key(&hook).into());
    let writer = entry.writer.clone();
    let objects = objects.clone();
    let reporting = reporting.clone();
    entry.task = Some(AbortOnDrop::spawn(async move {
        let (path, pinned) = match located {
            Some(Ok(path)) => (path, None),
            Some(Err(refusal)) => return refuse(&reporting, &hook, &writer, &refusal),
            None => match pull(&objects, &reporting, &hook, &writer).await {
                Some((path, pinned)) => (path, Some(pinned)),
                None => return,
            },
        };
        run_hook(&objects, reporting, &hook, &path, pinned, &writer).await
    }));
}

/// Pulls the `oci://` module of `hook`, trying again with a growing pause while the
/// failure may pass (the registry down, a tag or a Secret not there yet), each failure
/// in the status; `None` when it cannot.
async fn pull(
    objects: &HookObjects,
    reporting: &Reporting,
    hook: &Hook,
    writer: &StatusWriter,
) -> Option<(std::path::PathBuf, String)> {
    let mut backoff = BACKOFF;
    loop {
        match prepare::pull_oci(&objects.client, &objects.modules, hook).await {
            Ok(pulled) => return Some(pulled),
            Err((refusal, false)) => {
                refuse(reporting, hook, writer, &refusal);
                return None;
            }
            Err((mut refusal, true)) => {
                refusal.message = format!("{} (tried again in {backoff:?})", refusal.message);
                refuse(reporting, hook, writer, &refusal);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF * 5);
            }
        }
    }
}

/// Records that `hook` does not load; its webhooks go (nothing would answer them).
fn refuse(reporting: &Reporting, hook: &Hook, writer: &StatusWriter, refusal: &prepare::Refusal) {
    tracing::warn!(hook = %prepare::run_name(hook), reason = refusal.reason,
        error = %refusal.message, "a Hook does not load");
    reporting.registry.forget(&key(hook).into());
    writer.update(|status| {
        // A pin stands while its spec does: a registry down for a while must not
        // let the tag move under the Hook.
        if status.observed_generation != hook.metadata.generation {
            status.pinned_module = None;
        }
        status.observed_generation = hook.metadata.generation;
        status.digest = None;
        status.bindings.clear();
        status.last_error = Some(refusal.message.clone());
        set_condition(
            &mut status.conditions,
            "Loaded",
            ConditionStatus::False,
            refusal.reason,
            &refusal.message,
        );
        set_condition(
            &mut status.conditions,
            "Ready",
            ConditionStatus::False,
            "NotLoaded",
            "the hook is not loaded (see the Loaded condition)",
        );
    });
}

/// Before this engine's first run of a `runOn: Job` hook: deletes the inputs of runs an
/// engine before it (a leader that died, an engine replaced by a spec change) left
/// between creating them and handing them to their Jobs. Only one engine runs a Hook,
/// so none of them is in use. A failure is logged: the inputs go with the Hook.
async fn remove_interrupted_inputs(offload: &prepare::HookOffload, hook: &Hook, name: &str) {
    let (Some(namespace), Some(uid)) = (hook.namespace(), hook.uid()) else {
        return;
    };
    let selector = format!("{}={uid}", operon_runner::job::HOOK_UID_LABEL);
    let removed = operon_runner::job::remove_interrupted_inputs(
        offload.client.clone(),
        &namespace,
        &selector,
        &uid,
    )
    .await;
    match removed {
        Ok(0) => {}
        Ok(n) => tracing::info!(hook = %name, removed = n,
            "deleted the input ConfigMaps of runs an earlier engine left unfinished"),
        Err(e) => tracing::warn!(hook = %name, error = %e,
            "cannot look for input ConfigMaps of unfinished runs; they stay until the Hook is deleted"),
    }
}

/// Loads the hook and runs its engine until dropped.
async fn run_hook(
    objects: &HookObjects,
    reporting: Arc<Reporting>,
    hook: &Hook,
    path: &std::path::Path,
    pinned: Option<String>,
    writer: &StatusWriter,
) {
    let name = prepare::run_name(hook);
    let prepared = match prepare::prepare(
        hook,
        path,
        &objects.loader,
        objects.cluster.clone(),
        objects.offload.as_ref(),
    )
    .await
    {
        Ok(prepared) => prepared,
        Err(refusal) => return refuse(&reporting, hook, writer, &refusal),
    };
    if let Some(refusal) = unserved(&reporting, &prepared.webhooks) {
        return refuse(&reporting, hook, writer, &refusal);
    }
    tracing::info!(hook = %name, digest = %prepared.digest, bindings = prepared.bindings.len(), "Hook loaded");
    writer.update(|status| {
        *status = HookStatus {
            observed_generation: hook.metadata.generation,
            digest: Some(prepared.digest.to_string()),
            pinned_module: pinned.clone(),
            bindings: prepared.bindings.clone(),
            last_run: status.last_run.take(),
            last_error: None,
            // Failures of an engine before this one stay: they have their times.
            last_failures: std::mem::take(&mut status.last_failures),
            // So do a shadow's comparisons with the same live hook.
            shadow: status
                .shadow
                .take()
                .filter(|s| hook.spec.shadow_of.as_ref() == Some(&s.live)),
            conditions: std::mem::take(&mut status.conditions),
        };
        set_condition(
            &mut status.conditions,
            "Loaded",
            ConditionStatus::True,
            "Loaded",
            format!("module {} ({})", hook.spec.module, prepared.digest),
        );
        set_condition(
            &mut status.conditions,
            "Ready",
            ConditionStatus::False,
            "Starting",
            "listing and watching the kubernetes bindings",
        );
    });
    if let Some(live) = &hook.spec.shadow_of {
        // A shadow answers no request itself: what it had registered goes.
        reporting
            .registry
            .serving(&key(hook).into(), OwnedWebhooks::default());
        if let Err(refusal) = shadow::run(&reporting, &name, live, prepared, writer).await {
            refuse(&reporting, hook, writer, &refusal);
        }
        return;
    }
    let metrics = Arc::new(reporting.metrics.for_hook_object(&name));
    let _series = ForgetSeries {
        metrics: metrics.clone(),
        hook: name.clone(),
        bindings: prepared.bindings.clone(),
    };
    let mut backoff = BACKOFF;
    let engine = loop {
        let engine = Arc::new(
            Engine::new(
                vec![prepared.loaded.clone()],
                prepared.cluster.clone(),
                metrics.clone(),
            )
            .with_capture(reporting.capture.clone())
            .with_shadows(reporting.shadows.clone()),
        );
        // Every replica lists and watches, so that its webhooks see the snapshots the
        // leader's runs see.
        match engine.observe().await {
            Ok(()) => break engine,
            Err(e) => {
                let message = format!("{e} (tried again in {backoff:?})");
                tracing::warn!(hook = %name, error = %message, "a Hook's bindings cannot be watched");
                writer.update(|status| {
                    status.last_error = Some(message.clone());
                    set_condition(
                        &mut status.conditions,
                        "Ready",
                        ConditionStatus::False,
                        "WatchFailed",
                        message,
                    );
                });
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    };
    // Out of the debug socket's and the webhook servers' view when this task ends:
    // the Hook changed or went.
    let _registration = reporting
        .engines
        .register(HOOK_OBJECT_SOURCE, engine.clone());
    let _pumps = engine.spawn_pumps();
    let key = key(hook);
    let has_webhooks = !prepared.webhooks.is_empty();
    reporting
        .registry
        .serving(&(&key).into(), prepared.webhooks.clone());
    let _following = has_webhooks.then(|| follow_registration(&reporting, &key, writer));
    if !has_webhooks {
        writer.update(|status| {
            status
                .conditions
                .retain(|c| c.type_ != "WebhooksRegistered");
        });
    }
    let mut leading = reporting.leading.clone();
    if leading.wait_for(|l| *l).await.is_err() {
        return;
    }
    if let Some(offload) = objects.offload.as_ref().filter(|_| hook.spec.offloaded()) {
        remove_interrupted_inputs(offload, hook, &name).await;
    }
    writer.update(|status| {
        set_condition(
            &mut status.conditions,
            "Ready",
            ConditionStatus::True,
            "Running",
            "the hook runs on its bindings",
        );
    });
    engine.take_over();
    let handle = writer.handle();
    engine
        .run_until(std::future::pending(), Duration::ZERO, move |record| {
            handle.send_modify(|status| status::record_run(status, record));
        })
        .await;
}

/// Why `webhooks` cannot be served here: a conversion binding without a conversion
/// server, or one for a CRD the hooks directory converts (a CRD has one conversion
/// webhook); an admission binding without an admission server.
fn unserved(reporting: &Reporting, webhooks: &OwnedWebhooks) -> Option<prepare::Refusal> {
    if let Some(crd) = webhooks.conversions.first() {
        if !reporting.conversion_served {
            return Some(prepare::Refusal::new(
                "WebhookNotServed",
                format!(
                    "it converts {crd}, but this engine serves no conversion webhook (start it with a conversion server: --conversion-webhook-server-cert and --conversion-webhook-server-key, --webhook-cert-dir or --webhook-self-signed)"
                ),
            ));
        }
        let converted = reporting.main_engine().and_then(|main| {
            (webhooks.conversions.iter())
                .find_map(|crd| Some((main.converter_of(crd)?.to_owned(), crd.clone())))
        });
        if let Some((hook, crd)) = converted {
            return Some(prepare::Refusal::new(
                "ConversionConflict",
                format!(
                    "CustomResourceDefinition {crd} has one conversion webhook, and the hooks directory's hook {hook} converts it"
                ),
            ));
        }
    }
    (webhooks.admits() && !reporting.admission_served).then(|| {
        prepare::Refusal::new(
            "WebhookNotServed",
            format!(
                "bindings {:?} are admission webhooks, but this engine serves none (start it with an admission server: --validating-webhook-server-cert and --validating-webhook-server-key, --webhook-cert-dir or --webhook-self-signed)",
                webhooks.names()
            ),
        )
    })
}

/// Keeps the `WebhooksRegistered` condition of Hook `key` as its registrations go,
/// until dropped.
fn follow_registration(reporting: &Reporting, key: &Key, writer: &StatusWriter) -> AbortOnDrop {
    let mut outcomes = reporting.registry.outcomes();
    let key = key.clone();
    let handle = writer.handle();
    AbortOnDrop::spawn(async move {
        loop {
            let outcome = (outcomes.borrow_and_update())
                .get(&Owner::from(&key))
                .cloned();
            if let Some(outcome) = outcome {
                handle.send_modify(|status| {
                    let (state, reason, message) = match outcome {
                        Ok(()) => (
                            ConditionStatus::True,
                            "Registered",
                            format!(
                                "the webhooks are registered (admission configurations {}; conversions point at /{}/{}/{}/convert/)",
                                Owner::from(&key).configuration_name(),
                                HOOK_OBJECT_PREFIX,
                                key.0,
                                key.1
                            ),
                        ),
                        Err(e) => (ConditionStatus::False, "RegistrationFailed", e),
                    };
                    set_condition(
                        &mut status.conditions,
                        "WebhooksRegistered",
                        state,
                        reason,
                        message,
                    );
                });
            }
            if outcomes.changed().await.is_err() {
                return;
            }
        }
    })
}

/// Removes the series of a Hook's engine when it stops (the Hook changed or went), so
/// that `/metrics` does not keep reporting an engine that no longer runs.
struct ForgetSeries {
    metrics: Arc<Metrics>,
    hook: String,
    bindings: Vec<HookBindingStatus>,
}

impl Drop for ForgetSeries {
    fn drop(&mut self) {
        let gauge = &self.metrics.tasks_queue_length;
        gauge.remove_label_values(&[operon_hooks::config::MAIN_QUEUE]);
        for binding in &self.bindings {
            let queue = binding
                .queue
                .as_deref()
                .unwrap_or(operon_hooks::config::MAIN_QUEUE);
            gauge.remove_label_values(&[queue]);
            self.metrics
                .forget_binding(&self.hook, &binding.name, queue);
        }
    }
}

#[cfg(test)]
mod tests;
