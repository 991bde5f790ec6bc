//! Keeping one engine's module store in step with the cluster's Module objects: every
//! replica of `operon serve` and every agent watches the Modules, learns each name's
//! digest, fetches the bytes it lacks from a replica listed in the Module's
//! `status.sources` (checking the digest), and, when it serves the module API itself,
//! lists itself there once it holds them. Bytes no Module, no Operation and no Hook
//! refer to any more are removed after a grace period.

use super::catalog::ModuleCatalog;
use super::fetch::Fetcher;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::runtime::{WatchStreamExt as _, reflector, watcher};
use kube::{Api, Client, ResourceExt as _};
use operon_data::api::{Hook, Module, ModuleSource, Operation};
use operon_sandbox::{ModuleDigest, Sandbox};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often missing modules are fetched again and unreferenced ones looked for.
const RESYNC: Duration = Duration::from_secs(10);
/// How many times a status update is tried against concurrent writers.
const STATUS_ATTEMPTS: usize = 8;

/// How this engine takes part.
#[derive(Debug, Clone)]
pub struct ReplicaOptions {
    /// This replica's name (its pod name), as listed in `status.sources`.
    pub identity: String,
    /// Where this replica serves its module API, when it does: it then lists itself
    /// as a source of every module it holds.
    pub advertise: Option<Advertised>,
    /// How long bytes no Module or Operation refers to are kept.
    pub gc_grace: Duration,
    /// The namespace whose Pods the replicas are, when this engine runs in one
    /// (`$POD_NAMESPACE`): a replica listed in `status.sources` whose Pod is gone is
    /// removed there, so that nobody keeps fetching from an address that no longer
    /// answers. `None` outside a Pod, where replica names are no Pod names.
    pub pods_namespace: Option<String>,
}

/// The module API of this replica as others reach it.
#[derive(Debug, Clone)]
pub struct Advertised {
    /// Its base URL, e.g. `https://10.1.2.3:9443`.
    pub url: String,
    /// The name its certificate is checked against, when not the URL's host.
    pub server_name: Option<String>,
}

impl ReplicaOptions {
    /// The `status.sources` entry of this replica for `digest`.
    pub fn source(&self, digest: &ModuleDigest) -> Option<ModuleSource> {
        let advertised = self.advertise.as_ref()?;
        Some(ModuleSource {
            replica: self.identity.clone(),
            url: advertised.url.clone(),
            server_name: advertised.server_name.clone(),
            digest: digest.to_string(),
        })
    }
}

/// Whether the API server serves the Module resource (its CRD is installed).
pub async fn modules_installed(client: &Client) -> Result<bool, kube::Error> {
    match client
        .list_api_group_resources(operon_data::api::API_VERSION)
        .await
    {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == "modules")),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Adds (or updates) `source` in the `status.sources` of Module `name`, with the
/// resourceVersion read as precondition, trying again on a conflict.
pub async fn record_source(
    api: &Api<Module>,
    name: &str,
    source: &ModuleSource,
) -> Result<(), kube::Error> {
    update_sources(api, name, |sources| {
        if sources.contains(source) {
            return false;
        }
        sources.retain(|s| s.replica != source.replica);
        sources.push(source.clone());
        sources.sort_by(|a, b| a.replica.cmp(&b.replica));
        true
    })
    .await
}

/// Removes `replica` from the `status.sources` of Module `name` (a no-op when it is
/// not listed), with the same precondition and retries as [`record_source`].
pub(crate) async fn forget_source(
    api: &Api<Module>,
    name: &str,
    replica: &str,
) -> Result<(), kube::Error> {
    update_sources(api, name, |sources| {
        let before = sources.len();
        sources.retain(|s| s.replica != replica);
        sources.len() != before
    })
    .await
}

/// Reads Module `name`'s status, lets `change` edit its sources (it says whether it
/// changed them) and writes them back with the resourceVersion read, reading again
/// after a conflict with another writer.
async fn update_sources(
    api: &Api<Module>,
    name: &str,
    mut change: impl FnMut(&mut Vec<ModuleSource>) -> bool,
) -> Result<(), kube::Error> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut module = api.get_status(name).await?;
        let status = module.status.get_or_insert_with(Default::default);
        if !change(&mut status.sources) {
            return Ok(());
        }
        let params = PostParams {
            field_manager: Some(operon_data::conventions::FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        match api.replace_status(name, &params, &module).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < STATUS_ATTEMPTS => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Follows the Modules until the task is dropped. With `sandbox`, a fetched module is
/// compiled (and its artifact cached) at once, so that its first run does not wait.
pub async fn follow(
    client: Client,
    catalog: Arc<ModuleCatalog>,
    fetcher: Option<Fetcher>,
    options: ReplicaOptions,
    sandbox: Option<Sandbox>,
) {
    let modules: Api<Module> = Api::all(client.clone());
    let operations: Api<Operation> = Api::all(client.clone());
    let hooks: Api<Hook> = Api::all(client.clone());
    // Only a replica that lists itself keeps the list true: an agent lists nothing and
    // may not read Pods.
    let pods: Option<Api<Pod>> = match (&options.pods_namespace, &options.advertise) {
        (Some(namespace), Some(_)) => Some(Api::namespaced(client, namespace)),
        _ => None,
    };
    let (reader, writer) = reflector::store::<Module>();
    let events = reflector::reflector(writer, watcher(modules.clone(), watcher::Config::default()))
        .default_backoff();
    futures::pin_mut!(events);
    let follower = Follower {
        catalog,
        fetcher,
        options,
        modules,
        sandbox,
        fetching: Arc::default(),
        unreferenced: Mutex::default(),
    };
    let mut listed = false;
    let mut resync = tokio::time::interval(RESYNC);
    loop {
        tokio::select! {
            event = events.next() => match event {
                None => return,
                // Until a (re-)list completes the cache holds part of the Modules.
                Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => continue,
                Some(Ok(_)) => listed = true,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching Modules");
                    continue;
                }
            },
            _ = resync.tick() => {
                if listed {
                    let modules = reader.state();
                    follower.collect_garbage(&operations, &hooks, &modules).await;
                    if let Some(pods) = &pods {
                        follower.forget_departed(pods, &modules).await;
                    }
                }
            }
        }
        if listed {
            follower.sync(&reader.state());
        }
    }
}

struct Follower {
    catalog: Arc<ModuleCatalog>,
    fetcher: Option<Fetcher>,
    options: ReplicaOptions,
    modules: Api<Module>,
    /// Compiles fetched modules ahead of their first run.
    sandbox: Option<Sandbox>,
    /// Digests being fetched, so that events arriving meanwhile start no second fetch.
    fetching: Arc<Mutex<HashSet<ModuleDigest>>>,
    /// When each stored digest was first seen referenced by nothing.
    unreferenced: Mutex<HashMap<ModuleDigest, Instant>>,
}

impl Follower {
    fn sync(&self, modules: &[Arc<Module>]) {
        let mut names = Vec::new();
        for module in modules {
            let name = module.name_any();
            let Some(digest) = ModuleDigest::parse(&module.spec.digest) else {
                tracing::warn!(module = %name, digest = %module.spec.digest,
                    "Module/{name}: spec.digest is not sha256:<64 hex digits>; ignored");
                continue;
            };
            names.push((name.clone(), digest));
            if self.catalog.blobs().contains(&digest) {
                self.advertise(module, &name, &digest);
            } else {
                self.fetch(module.clone(), name, digest);
            }
        }
        self.catalog.replace(names);
    }

    /// Lists this replica as a source of `digest` when it is not listed yet.
    fn advertise(&self, module: &Module, name: &str, digest: &ModuleDigest) {
        let Some(source) = self.options.source(digest) else {
            return;
        };
        let listed = module
            .status
            .as_ref()
            .is_some_and(|s| s.sources.contains(&source));
        if listed {
            return;
        }
        let api = self.modules.clone();
        let name = name.to_owned();
        tokio::spawn(async move {
            if let Err(e) = record_source(&api, &name, &source).await {
                tracing::warn!(module = %name, error = %e, "cannot list this replica as a source");
            }
        });
    }

    fn fetch(&self, module: Arc<Module>, name: String, digest: ModuleDigest) {
        let Some(fetcher) = self.fetcher.clone() else {
            tracing::warn!(module = %name, %digest, "no module source CA configured: cannot fetch modules");
            return;
        };
        let sources: Vec<ModuleSource> = module
            .status
            .iter()
            .flat_map(|s| &s.sources)
            .filter(|s| s.digest == module.spec.digest && s.replica != self.options.identity)
            .cloned()
            .collect();
        if sources.is_empty() {
            tracing::debug!(module = %name, %digest, "no replica holds the module yet");
            return;
        }
        if !self.lock_fetching().insert(digest) {
            return;
        }
        let fetching = self.fetching.clone();
        let blobs = self.catalog.blobs().clone();
        let own = self.options.source(&digest);
        let api = self.modules.clone();
        let sandbox = self.sandbox.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            for source in &sources {
                match fetcher.fetch(source, &digest, &blobs).await {
                    Ok(()) => {
                        tracing::info!(module = %name, %digest, from = %source.replica,
                            ms = started.elapsed().as_millis() as u64, "module fetched");
                        if let Some(sandbox) = sandbox.clone() {
                            compile(sandbox, &blobs, &name, digest).await;
                            tracing::info!(module = %name, %digest,
                                ms = started.elapsed().as_millis() as u64, "module ready");
                        }
                        if let Some(own) = &own
                            && let Err(e) = record_source(&api, &name, own).await
                        {
                            tracing::warn!(module = %name, error = %e, "cannot list this replica as a source");
                        }
                        break;
                    }
                    Err(e) => tracing::warn!(module = %name, error = %e, "cannot fetch a module"),
                }
            }
            fetching
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&digest);
        });
    }

    /// Fetches each pinned digest that no Module names (a named one comes through
    /// [`Self::sync`]) and this store lacks, from the other replicas serving the module
    /// API: they keep pinned bytes after their Module moved on to other bytes, so a
    /// replica started since can still run a Hook or Operation pinning them.
    fn fetch_pinned(
        &self,
        pinned: &HashSet<ModuleDigest>,
        named: &HashSet<ModuleDigest>,
        modules: &[Arc<Module>],
    ) {
        let Some(fetcher) = self.fetcher.clone() else {
            return;
        };
        let blobs = self.catalog.blobs();
        let missing: Vec<ModuleDigest> = pinned
            .iter()
            .filter(|d| !named.contains(d) && !blobs.contains(d))
            .copied()
            .collect();
        let peers = peers(modules, &self.options.identity);
        if missing.is_empty() || peers.is_empty() {
            return;
        }
        for digest in missing {
            if !self.lock_fetching().insert(digest) {
                continue;
            }
            let (fetcher, peers) = (fetcher.clone(), peers.clone());
            let (fetching, blobs) = (self.fetching.clone(), blobs.clone());
            let sandbox = self.sandbox.clone();
            tokio::spawn(async move {
                match fetch_from_peers(&fetcher, &peers, &digest, &blobs).await {
                    Ok(peer) => {
                        tracing::info!(%digest, from = %peer, "pinned module fetched");
                        if let Some(sandbox) = sandbox {
                            compile(sandbox, &blobs, &digest.to_string(), digest).await;
                        }
                    }
                    Err(errors) => tracing::warn!(%digest, errors = %errors.join("; "),
                        "no replica could give a pinned module"),
                }
                fetching
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&digest);
            });
        }
    }

    /// Removes from the Modules' `status.sources` every other replica whose Pod no
    /// longer exists. A Pod that is terminating still serves its bytes and stays
    /// listed; a Pod that cannot be read (an API error) is left for the next round.
    async fn forget_departed(&self, pods: &Api<Pod>, modules: &[Arc<Module>]) {
        let listed: BTreeSet<&str> = modules
            .iter()
            .filter_map(|m| m.status.as_ref())
            .flat_map(|s| &s.sources)
            .map(|s| s.replica.as_str())
            .filter(|r| *r != self.options.identity && is_pod_name(r))
            .collect();
        for replica in listed {
            match pods.get_opt(replica).await {
                Ok(Some(_)) => continue,
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(%replica, error = %e, "reading a module replica's Pod");
                    continue;
                }
            }
            let holding = modules.iter().filter(|m| {
                m.status
                    .as_ref()
                    .is_some_and(|s| s.sources.iter().any(|s| s.replica == replica))
            });
            for module in holding {
                let name = module.name_any();
                match forget_source(&self.modules, &name, replica).await {
                    Ok(()) => tracing::info!(module = %name, %replica,
                        "Module/{name}: replica {replica} has no Pod any more; removed from status.sources"),
                    Err(e) => tracing::warn!(module = %name, %replica, error = %e,
                        "cannot remove a departed replica from status.sources"),
                }
            }
        }
    }

    fn lock_fetching(&self) -> std::sync::MutexGuard<'_, HashSet<ModuleDigest>> {
        self.fetching.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Removes stored bytes referenced by no Module, no Operation and no Hook for longer
    /// than the grace period.
    /// Removes the bytes nothing refers to after the grace period, and fetches the
    /// digests Operations and Hooks pin that this store lacks (see [`Self::fetch_pinned`]).
    async fn collect_garbage(
        &self,
        operations: &Api<Operation>,
        hooks: &Api<Hook>,
        modules: &[Arc<Module>],
    ) {
        let mut pinned = match operations.list(&ListParams::default()).await {
            Ok(list) => list
                .items
                .iter()
                .filter_map(|op| op.spec.processor.wasm.as_ref())
                .filter_map(|wasm| ModuleDigest::parse(&wasm.module))
                .collect::<HashSet<_>>(),
            Err(e) => {
                // Without the Operations, nothing can be known unreferenced.
                tracing::debug!(error = %e, "listing Operations for module garbage collection");
                return;
            }
        };
        match hooks.list(&ListParams::default()).await {
            Ok(list) => pinned.extend(
                list.items
                    .iter()
                    .filter_map(|hook| ModuleDigest::parse(&hook.spec.module)),
            ),
            // An agent may not read Hooks (it runs none), and an older cluster may
            // have no Hook CRD: no Hook pins anything there.
            Err(kube::Error::Api(e)) if e.code == 403 || e.code == 404 => {}
            Err(e) => {
                tracing::debug!(error = %e, "listing Hooks for module garbage collection");
                return;
            }
        }
        let named: HashSet<ModuleDigest> =
            self.catalog.names().into_iter().map(|(_, d)| d).collect();
        self.fetch_pinned(&pinned, &named, modules);
        // Pulled from a registry for an `oci://` reference: no peer has to give them.
        pinned.extend(self.catalog.retained());
        let stored = match self.catalog.blobs().list() {
            Ok(stored) => stored,
            Err(e) => {
                tracing::warn!(error = %e, "listing the module store");
                return;
            }
        };
        let now = Instant::now();
        let mut unreferenced = self.unreferenced.lock().unwrap_or_else(|e| e.into_inner());
        let candidates = collectable(&stored, &named, &pinned);
        unreferenced.retain(|digest, _| candidates.contains(digest));
        for digest in candidates {
            let since = *unreferenced.entry(digest).or_insert(now);
            if now.duration_since(since) >= self.options.gc_grace {
                match self.catalog.blobs().remove(&digest) {
                    Ok(_) => {
                        tracing::info!(%digest, "removed a module no Module, Operation or Hook refers to")
                    }
                    Err(e) => {
                        tracing::warn!(%digest, error = %e, "cannot remove an unreferenced module")
                    }
                }
                unreferenced.remove(&digest);
            }
        }
    }
}

/// The replicas other than `identity` that serve the module API, one per URL, as the
/// Modules' `status.sources` list them.
pub(crate) fn peers(modules: &[Arc<Module>], identity: &str) -> Vec<ModuleSource> {
    let mut peers: Vec<ModuleSource> = Vec::new();
    let listed = modules
        .iter()
        .filter_map(|m| m.status.as_ref())
        .flat_map(|s| &s.sources);
    for source in listed {
        if source.replica != identity && !peers.iter().any(|p| p.url == source.url) {
            peers.push(source.clone());
        }
    }
    peers
}

/// Fetches `digest` into `blobs` from the first of `peers` that gives it (bytes of
/// another digest are refused by the store); the replica it came from, or what each
/// peer answered.
pub async fn fetch_from_peers(
    fetcher: &Fetcher,
    peers: &[ModuleSource],
    digest: &ModuleDigest,
    blobs: &super::BlobStore,
) -> Result<String, Vec<String>> {
    let mut errors = Vec::new();
    for peer in peers {
        let source = ModuleSource {
            digest: digest.to_string(),
            ..peer.clone()
        };
        match fetcher.fetch(&source, digest, blobs).await {
            Ok(()) => return Ok(peer.replica.clone()),
            Err(e) => errors.push(format!("{}: {e}", peer.replica)),
        }
    }
    Err(errors)
}

/// Compiles the stored `digest` (caching its artifact); a module that does not load is
/// logged: its runs report the same error.
async fn compile(sandbox: Sandbox, blobs: &super::BlobStore, name: &str, digest: ModuleDigest) {
    let blobs = blobs.clone();
    let label = format!("module {name:?}");
    let outcome = tokio::task::spawn_blocking(move || {
        let bytes = blobs
            .get(&digest)
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        super::inspect(&sandbox, &label, &bytes).map_err(|e| e.to_string())
    })
    .await;
    match outcome {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::warn!(module = %name, %digest, error = %e, "a fetched module does not load")
        }
        Err(e) => tracing::warn!(module = %name, %digest, error = %e, "compiling a fetched module"),
    }
}

/// Whether `name` can be a Pod's name (a DNS subdomain): a replica started outside a
/// Pod is listed under its URL, which no Pod lookup should be made for.
fn is_pod_name(name: &str) -> bool {
    operon_data::conventions::names::is_dns_subdomain(name)
}

/// The stored digests neither a Module names nor an Operation pins.
fn collectable(
    stored: &[super::blobs::StoredBlob],
    named: &HashSet<ModuleDigest>,
    pinned: &HashSet<ModuleDigest>,
) -> HashSet<ModuleDigest> {
    stored
        .iter()
        .map(|b| b.digest)
        .filter(|d| !named.contains(d) && !pinned.contains(d))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bytes_nothing_refers_to_are_collectable() {
        let blob = |bytes: &[u8]| super::super::blobs::StoredBlob {
            digest: ModuleDigest::of(bytes),
            size: 1,
            stored: std::time::SystemTime::UNIX_EPOCH,
        };
        let stored = [blob(b"named"), blob(b"pinned"), blob(b"orphan")];
        let named = HashSet::from([ModuleDigest::of(b"named")]);
        let pinned = HashSet::from([ModuleDigest::of(b"pinned")]);
        assert_eq!(
            collectable(&stored, &named, &pinned),
            HashSet::from([ModuleDigest::of(b"orphan")])
        );
    }

    fn module_json(resource_version: &str, sources: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "Module",
            "metadata": {"name": "probe", "resourceVersion": resource_version},
            "spec": {"digest": ModuleDigest::of(b"m").to_string(), "world": "operation",
                     "witVersion": "0.2.0", "size": 1, "uploadedBy": "alice",
                     "uploadedAt": "2026-11-24T00:00:00Z"},
            "status": {"sources": sources},
        })
    }

    #[tokio::test]
    async fn a_source_is_recorded_with_the_resource_version_read_and_retried_on_conflict() {
        let (client, mut api) = operon_cluster::kube::mock::pair();
        let modules: Api<Module> = Api::all(client);
        let digest = ModuleDigest::of(b"m");
        let source = ModuleSource {
            replica: "operon-b".into(),
            url: "https://10.0.0.2:9680".into(),
            server_name: Some("operon-webhooks.operon.svc".into()),
            digest: digest.to_string(),
        };
        let other = serde_json::json!([{"replica": "operon-a", "url": "https://10.0.0.1:9680",
                                         "digest": digest.to_string()}]);
        let recording = tokio::spawn({
            let source = source.clone();
            async move { record_source(&modules, "probe", &source).await }
        });
        const STATUS: &str = "/apis/operon.dev/v1alpha1/modules/probe/status";
        for (read, answer) in [("7", 409), ("8", 200)] {
            let call = api.next().await;
            assert_eq!((call.method.as_str(), call.uri.as_str()), ("GET", STATUS));
            call.answer(200, module_json(read, other.clone()));
            let call = api.next().await;
            assert_eq!(
                (call.method.as_str(), call.uri.as_str()),
                ("PUT", format!("{STATUS}?&fieldManager=operon").as_str())
            );
            let body = call.json();
            assert_eq!(body["metadata"]["resourceVersion"], read);
            let replicas: Vec<&str> = body["status"]["sources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["replica"].as_str().unwrap())
                .collect();
            assert_eq!(replicas, ["operon-a", "operon-b"]);
            assert_eq!(
                body["status"]["sources"][1]["serverName"],
                "operon-webhooks.operon.svc"
            );
            match answer {
                409 => call.fail(409, "Conflict", "the object has been modified"),
                _ => call.answer(200, body),
            }
        }
        recording.await.unwrap().unwrap();
        api.quiet().await;
    }

    #[tokio::test]
    async fn a_source_already_listed_is_not_written_again() {
        let (client, mut api) = operon_cluster::kube::mock::pair();
        let modules: Api<Module> = Api::all(client);
        let digest = ModuleDigest::of(b"m");
        let listed = serde_json::json!([{"replica": "operon-a", "url": "https://10.0.0.1:9680",
                                          "digest": digest.to_string()}]);
        let source: ModuleSource = serde_json::from_value(listed[0].clone()).unwrap();
        let recording =
            tokio::spawn(async move { record_source(&modules, "probe", &source).await });
        let call = api.next().await;
        assert_eq!(call.method, "GET");
        call.answer(200, module_json("3", listed));
        recording.await.unwrap().unwrap();
        api.quiet().await;
    }

    /// Answers the lists garbage collection makes: no Operation, and `hooks` (a list of
    /// Hook specs) or, with `None`, a 403 as an agent gets.
    async fn answer_lists(
        api: &mut operon_cluster::kube::mock::MockApi,
        hooks: Option<Vec<serde_json::Value>>,
    ) {
        let call = api.next().await;
        assert!(
            call.uri
                .starts_with("/apis/operon.dev/v1alpha1/operations?"),
            "{}",
            call.uri
        );
        call.answer(
            200,
            serde_json::json!({"apiVersion": "operon.dev/v1alpha1", "kind": "OperationList",
                                             "metadata": {"resourceVersion": "1"}, "items": []}),
        );
        let call = api.next().await;
        assert!(
            call.uri.starts_with("/apis/operon.dev/v1alpha1/hooks?"),
            "{}",
            call.uri
        );
        match hooks {
            Some(specs) => {
                let items: Vec<serde_json::Value> = specs
                    .into_iter()
                    .enumerate()
                    .map(|(i, spec)| {
                        serde_json::json!({
                        "apiVersion": "operon.dev/v1alpha1", "kind": "Hook",
                        "metadata": {"name": format!("h{i}"), "namespace": "demo"}, "spec": spec})
                    })
                    .collect();
                call.answer(200, serde_json::json!({"apiVersion": "operon.dev/v1alpha1", "kind": "HookList",
                                                     "metadata": {"resourceVersion": "1"}, "items": items}));
            }
            None => call.fail(403, "Forbidden", "hooks.operon.dev is forbidden"),
        }
    }

    #[tokio::test]
    async fn bytes_a_hook_pins_by_digest_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = super::super::BlobStore::open(dir.path(), 1024).unwrap();
        let (pinned, orphan) = (blobs.put(b"pinned").unwrap(), blobs.put(b"orphan").unwrap());
        let (client, mut api) = operon_cluster::kube::mock::pair();
        let follower = Follower {
            catalog: Arc::new(ModuleCatalog::new(blobs.clone())),
            fetcher: None,
            options: ReplicaOptions {
                identity: "operon-a".into(),
                advertise: None,
                gc_grace: Duration::ZERO,
                pods_namespace: None,
            },
            modules: Api::all(client.clone()),
            sandbox: None,
            fetching: Arc::default(),
            unreferenced: Mutex::default(),
        };
        let (operations, hooks) = (Api::all(client.clone()), Api::all(client));
        let collecting = async {
            follower.collect_garbage(&operations, &hooks, &[]).await;
        };
        let hook = serde_json::json!({"module": pinned.to_string()});
        tokio::join!(collecting, answer_lists(&mut api, Some(vec![hook])));
        assert!(blobs.contains(&pinned));
        assert!(!blobs.contains(&orphan));
        // An agent, which may not list Hooks, still collects (it runs no Hook).
        let collecting = async {
            follower.collect_garbage(&operations, &hooks, &[]).await;
        };
        tokio::join!(collecting, answer_lists(&mut api, None));
        assert!(!blobs.contains(&pinned));
        api.quiet().await;
    }

    #[tokio::test]
    async fn a_replica_whose_pod_is_gone_is_taken_off_the_sources() {
        let (client, mut api) = operon_cluster::kube::mock::pair();
        let digest = ModuleDigest::of(b"m").to_string();
        let entry = |replica: &str, ip: u8| {
            serde_json::json!({"replica": replica, "url": format!("https://10.0.0.{ip}:9680"),
                               "digest": digest})
        };
        // Itself, a replica whose Pod is gone, one whose Pod runs, and one started
        // outside a Pod (listed under its URL).
        let sources = serde_json::json!([
            entry("operon-a", 1),
            entry("operon-b", 2),
            entry("operon-c", 3),
            entry("https://10.0.0.4:9680", 4)
        ]);
        let modules = [Arc::new(
            serde_json::from_value::<Module>(module_json("5", sources.clone())).unwrap(),
        )];
        let dir = tempfile::tempdir().unwrap();
        let follower = Follower {
            catalog: Arc::new(ModuleCatalog::new(
                super::super::BlobStore::open(dir.path(), 1024).unwrap(),
            )),
            fetcher: None,
            options: ReplicaOptions {
                identity: "operon-a".into(),
                advertise: None,
                gc_grace: Duration::ZERO,
                pods_namespace: Some("operon".into()),
            },
            modules: Api::all(client.clone()),
            sandbox: None,
            fetching: Arc::default(),
            unreferenced: Mutex::default(),
        };
        let pods: Api<Pod> = Api::namespaced(client, "operon");
        let forgetting = async { follower.forget_departed(&pods, &modules).await };
        let answering = async {
            let call = api.next().await;
            assert_eq!(
                (call.method.as_str(), call.uri.as_str()),
                ("GET", "/api/v1/namespaces/operon/pods/operon-b")
            );
            call.fail(404, "NotFound", "pods \"operon-b\" not found");
            const STATUS: &str = "/apis/operon.dev/v1alpha1/modules/probe/status";
            let call = api.next().await;
            assert_eq!((call.method.as_str(), call.uri.as_str()), ("GET", STATUS));
            call.answer(200, module_json("6", sources.clone()));
            let call = api.next().await;
            assert_eq!(call.method, "PUT");
            let body = call.json();
            assert_eq!(body["metadata"]["resourceVersion"], "6");
            let left: Vec<&str> = body["status"]["sources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["replica"].as_str().unwrap())
                .collect();
            assert_eq!(left, ["operon-a", "operon-c", "https://10.0.0.4:9680"]);
            call.answer(200, body);
            let call = api.next().await;
            assert_eq!(
                (call.method.as_str(), call.uri.as_str()),
                ("GET", "/api/v1/namespaces/operon/pods/operon-c")
            );
            call.answer(
                200,
                serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"name": "operon-c", "namespace": "operon"}}),
            );
        };
        tokio::join!(forgetting, answering);
        api.quiet().await;
    }

    #[test]
    fn peers_are_the_other_replicas_once_each() {
        let module = |sources: serde_json::Value| -> Arc<Module> {
            Arc::new(serde_json::from_value(module_json("1", sources)).unwrap())
        };
        let entry = |replica: &str, url: &str, digest: &[u8]| {
            serde_json::json!({"replica": replica, "url": url,
                               "digest": ModuleDigest::of(digest).to_string()})
        };
        let modules = [
            module(serde_json::json!([
                entry("operon-a", "https://10.0.0.1:9680", b"m"),
                entry("operon-b", "https://10.0.0.2:9680", b"m")
            ])),
            module(serde_json::json!([
                entry("operon-b", "https://10.0.0.2:9680", b"n"),
                entry("operon-c", "https://10.0.0.3:9680", b"n")
            ])),
        ];
        let found: Vec<String> = peers(&modules, "operon-a")
            .into_iter()
            .map(|p| p.replica)
            .collect();
        assert_eq!(found, ["operon-b", "operon-c"]);
    }

    #[test]
    fn a_replica_without_an_api_advertises_nothing() {
        let digest = ModuleDigest::of(b"m");
        let mut options = ReplicaOptions {
            identity: "agent-a".into(),
            advertise: None,
            gc_grace: Duration::from_secs(60),
            pods_namespace: None,
        };
        assert_eq!(options.source(&digest), None);
        options.advertise = Some(Advertised {
            url: "https://10.0.0.1:9443".into(),
            server_name: Some("operon-modules.operon.svc".into()),
        });
        let source = options.source(&digest).unwrap();
        assert_eq!(source.digest, digest.to_string());
        assert_eq!(source.replica, "agent-a");
    }
}
