//! The flags with which `operon serve` and `operon agent` keep their module store: where
//! the bytes live, how other replicas' bytes are fetched, and, for `operon serve`, the
//! module API it serves and advertises in the Modules' `status.sources`.

use anyhow::Context as _;
use operon::store::fetch::{Fetcher, Token};
use operon::store::replica::{self, ReplicaOptions};
use operon::store::{BlobStore, DEFAULT_MAX_MODULE_BYTES, ModuleCatalog};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The module store of `operon serve` and `operon agent`.
#[derive(Debug, Clone, clap::Args)]
pub struct ModuleStoreArgs {
    /// Where uploaded and fetched modules are kept, by digest [default: CACHE_DIR/store].
    #[arg(long, env = "OPERON_MODULE_STORE")]
    module_store: Option<PathBuf>,
    /// The largest module taken, in bytes.
    #[arg(long, env = "OPERON_MODULE_MAX_BYTES", default_value_t = DEFAULT_MAX_MODULE_BYTES)]
    module_max_bytes: u64,
    /// How long modules no Module and no Operation refers to stay in the store.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    module_gc_grace: Duration,
    /// The CA (PEM) of the replicas' module API, to fetch modules from them, read again
    /// when it changes (checked every minute and when a TLS handshake fails; a rewrite
    /// that holds no certificate keeps the last good CA) [serve: default the admission
    /// server's CA].
    #[arg(long, env = "OPERON_MODULE_SOURCE_CA")]
    module_source_ca: Option<PathBuf>,
    /// The bearer token sent when fetching modules from a replica.
    #[arg(
        long,
        env = "OPERON_MODULE_FETCH_TOKEN_FILE",
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )]
    module_fetch_token_file: PathBuf,
    /// The catalog, opened once and shared by the runners and the module API.
    #[arg(skip)]
    catalog: OnceLock<Option<Arc<ModuleCatalog>>>,
}

impl ModuleStoreArgs {
    /// The store's catalog (opened at the first call); `None`, logged, when the store
    /// cannot be opened: modules are then found in --modules only.
    pub fn catalog(&self, cache_dir: Option<&Path>) -> Option<Arc<ModuleCatalog>> {
        self.catalog
            .get_or_init(|| {
                let dir = self
                    .module_store
                    .clone()
                    .or_else(|| cache_dir.map(|d| d.join("store")))?;
                match BlobStore::open(&dir, self.module_max_bytes) {
                    Ok(store) => Some(Arc::new(ModuleCatalog::new(store))),
                    Err(e) => {
                        tracing::error!(error = %e, "cannot open the module store: uploaded modules are not available");
                        None
                    }
                }
            })
            .clone()
    }

    /// How modules are fetched from replicas: trusting --module-source-ca, read again
    /// when it changes (a rotated CA needs no restart), else `fallback`.
    pub fn fetcher(&self, fallback: Option<SourceCa>) -> anyhow::Result<Option<Fetcher>> {
        let token = Token::File(self.module_fetch_token_file.clone());
        let fetcher = match (&self.module_source_ca, fallback) {
            // A file not there yet is waited for (see Fetcher::from_ca_file).
            (Some(path), _) => Fetcher::from_ca_file(path.clone(), token),
            (None, Some(SourceCa::File(path))) => Fetcher::from_ca_file(path, token),
            (None, Some(SourceCa::Pem(pem))) => {
                Fetcher::new(&pem, PathBuf::from("the admission server's CA"), token)?
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(fetcher))
    }

    /// The --module-source-ca file, if given.
    pub fn source_ca(&self) -> Option<&Path> {
        self.module_source_ca.as_deref()
    }

    /// How this process takes part in keeping modules.
    pub fn replica(
        &self,
        identity: String,
        advertise: Option<replica::Advertised>,
        pods_namespace: Option<String>,
    ) -> ReplicaOptions {
        ReplicaOptions {
            identity,
            advertise,
            gc_grace: self.module_gc_grace,
            pods_namespace,
        }
    }
}

/// The module API of `operon serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ModuleApiArgs {
    /// Do not serve the module API (nor keep the module store in step with the Modules).
    #[arg(long, env = "OPERON_NO_MODULE_API")]
    no_module_api: bool,
    /// The URL at which the other replicas and the agents fetch modules from this one
    /// [default: https://$POD_IP:<--validating-webhook-listen-port>].
    #[arg(long, env = "OPERON_MODULE_API_URL")]
    module_api_url: Option<String>,
    /// The name the others check this replica's certificate against [default: the
    /// webhook Service's DNS name with a self-signed or --webhook-cert-dir
    /// certificate, else the URL's host].
    #[arg(long, env = "OPERON_MODULE_API_SERVER_NAME")]
    module_api_server_name: Option<String>,
}

/// The CA the replicas' module APIs are trusted with when --module-source-ca is not
/// given: the admission server's.
#[derive(Debug, Clone)]
pub enum SourceCa {
    /// A file (--validating-webhook-ca, or ca.crt of the certificate directory), read
    /// again when it changes, as --module-source-ca is.
    File(PathBuf),
    /// The CA as this process made it (self-signed).
    Pem(Vec<u8>),
}

impl ModuleApiArgs {
    /// Starts keeping the module store in step with the Modules and returns the API to
    /// serve; `None` when it is turned off, the Module CRD is not installed or the
    /// store cannot be opened. `ca` is the admission server's CA (trusted when fetching
    /// from the other replicas), `server_name` the name its certificate carries and
    /// `port` its port.
    #[allow(clippy::too_many_arguments)] // Each is one fact of `operon serve`'s setup.
    pub async fn start(
        &self,
        client: &kube::Client,
        ctx: &Arc<operon::controllers::diagnosis::Context>,
        store: &ModuleStoreArgs,
        cache_dir: Option<&Path>,
        ca: Option<SourceCa>,
        server_name: Option<String>,
        port: u16,
    ) -> anyhow::Result<Option<Arc<operon::serve::modules::ModuleApi>>> {
        if self.no_module_api {
            return Ok(None);
        }
        match replica::modules_installed(client).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!("the Module CRD is not installed: the module API is not served");
                return Ok(None);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot tell whether the Module CRD is installed: the module API is not served");
                return Ok(None);
            }
        }
        let Some(catalog) = store.catalog(cache_dir) else {
            return Ok(None);
        };
        let url = self.module_api_url.clone().or_else(|| {
            let ip: std::net::IpAddr = std::env::var("POD_IP").ok()?.parse().ok()?;
            Some(format!("https://{}", std::net::SocketAddr::new(ip, port)))
        });
        if url.is_none() {
            tracing::warn!(
                "no --module-api-url and no $POD_IP: the other replicas cannot fetch modules from this one"
            );
        }
        let advertise = url.map(|url| replica::Advertised {
            url,
            server_name: self.module_api_server_name.clone().or(server_name),
        });
        let pod_name = std::env::var("POD_NAME").ok().filter(|n| !n.is_empty());
        // In a Pod, the replicas listed as sources are the Deployment's Pods, and one
        // whose Pod is gone is taken off the list.
        let pods_namespace = pod_name
            .as_ref()
            .and_then(|_| std::env::var("POD_NAMESPACE").ok())
            .filter(|n| !n.is_empty());
        let identity = pod_name
            .or_else(|| advertise.as_ref().map(|a| a.url.clone()))
            .unwrap_or_else(|| "operon-serve".to_owned());
        let replica = store.replica(identity, advertise, pods_namespace);
        let fetcher = store.fetcher(ca)?;
        let sandbox = ctx
            .processors()
            .wasm_sandbox()
            .context("starting the wasm sandbox for the module API")?;
        tokio::spawn(replica::follow(
            client.clone(),
            catalog.clone(),
            fetcher,
            replica.clone(),
            Some(sandbox.clone()),
        ));
        Ok(Some(Arc::new(operon::serve::modules::ModuleApi::new(
            client.clone(),
            operon::serve::modules::auth::Authorizer::new(client.clone()),
            catalog,
            sandbox,
            replica,
        ))))
    }
}
