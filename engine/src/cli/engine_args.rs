//! The arguments `operon serve` and `operon agent` share: how to reach the API server,
//! how Diagnoses run (the runners' factory, the module store followed), and the
//! namespace the process works in.

use anyhow::Context as _;
use operon::cluster::kube::{KubeCluster, KubeOptions};
use operon::controllers::diagnosis::{self, Role, status::Limits};
use operon::runner::processors::{ProcessorSettings, Processors};
use operon::store::ModuleLocator;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where a pod finds its namespace.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// How to reach the API server (`operon serve` and `operon agent`).
#[derive(Debug, Clone, clap::Args)]
pub struct KubeArgs {
    /// A kubeconfig file [default: $KUBECONFIG, ~/.kube/config, then the in-cluster
    /// service account].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// A kubeconfig context other than the current one.
    #[arg(long)]
    context: Option<String>,
    /// Sustained API requests per second (0: no limit).
    #[arg(long, env = "KUBE_CLIENT_QPS", default_value_t = 5.0)]
    kube_client_qps: f32,
    /// API requests allowed in a burst above the QPS.
    #[arg(long, env = "KUBE_CLIENT_BURST", default_value_t = 10)]
    kube_client_burst: u32,
}

impl KubeArgs {
    /// Connects to the API server these flags name.
    pub async fn connect(&self) -> anyhow::Result<KubeCluster> {
        let options = KubeOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            qps: self.kube_client_qps,
            burst: self.kube_client_burst,
            ..KubeOptions::default()
        };
        KubeCluster::connect(&options)
            .await
            .context("connecting to the Kubernetes API server")
    }
}

/// What runs steps on a node's agent besides the runners of every Diagnosis.
pub struct OnNode {
    /// The script store script steps run from.
    pub scripts: Arc<operon::script::ScriptStore>,
    /// The built-in processors of address-less `/processor/` steps.
    pub built_ins: Arc<dyn operon::runner::builtin::BuiltIns>,
    /// Where the node's filesystem is mounted, for the paths steps declare read-only.
    pub node_root: operon::runner::node_paths::NodeRoot,
}

/// How Diagnoses run (`operon serve` and `operon agent`).
#[derive(Debug, Clone, clap::Args)]
pub struct DiagnosisArgs {
    /// Directory of wasm modules named `<name>.wasm`, for the `wasm.module` names and
    /// digests of Operations.
    #[arg(long, env = "OPERON_MODULES_DIR")]
    pub modules: Option<PathBuf>,
    /// How many Diagnoses run at once.
    #[arg(long, env = "OPERON_DIAGNOSIS_CONCURRENCY", default_value_t = 16)]
    pub diagnosis_concurrency: u16,
    /// How long a Diagnosis waits for its OperationSet, Operations, pod or agent before
    /// it fails.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub diagnosis_wait_limit: Duration,
    /// How long a Diagnosis placed on a node that is not Ready waits for the node
    /// before it fails (a Diagnosis' `spec.nodeNotReadyTimeoutSeconds` overrides it).
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub diagnosis_node_wait: Duration,
    /// Results longer than this many bytes go to the Diagnosis' results ConfigMap.
    #[arg(long, default_value_t = 64 * 1024)]
    pub result_value_limit: usize,
    /// The results kept in a Diagnosis' status stay under this many bytes.
    #[arg(long, default_value_t = 512 * 1024)]
    pub results_limit: usize,
    #[command(flatten)]
    pub module_store: super::module_store::ModuleStoreArgs,
    #[command(flatten)]
    pub registries: super::module_oci::EngineRegistryArgs,
}

impl DiagnosisArgs {
    /// The Diagnosis controller for `role`, whose runners cache compiled modules in
    /// `cache_dir`; on a node (the agent) they run scripts from its store and
    /// address-less `/processor/` steps with its built-ins.
    pub fn context(
        &self,
        client: kube::Client,
        role: Role,
        agent_namespace: &str,
        cache_dir: Option<PathBuf>,
        strict: bool,
        on_node: Option<OnNode>,
    ) -> Arc<diagnosis::Context> {
        let (script_store, built_ins, node_root) = match on_node {
            Some(on_node) => (
                Some(on_node.scripts),
                Some(on_node.built_ins),
                on_node.node_root,
            ),
            // The controller reads what the API server knows of a Diagnosis' node.
            None => (
                None,
                Some(
                    Arc::new(operon::node_ops::ControllerOps::new(client.clone()))
                        as Arc<dyn operon::runner::builtin::BuiltIns>,
                ),
                Default::default(),
            ),
        };
        let cache_dir = cache_dir.or_else(operon::sandbox::default_cache_dir);
        let processors = Processors::new(ProcessorSettings {
            cache_dir: cache_dir.clone(),
            strict,
            modules: self.with_oci(
                self.locator(&client, &role, cache_dir.as_deref()),
                cache_dir.as_deref(),
            ),
            script_store,
            built_ins,
            kube: Some(operon::runner::processors::KubeClient(client.clone())),
            node_root,
            ..ProcessorSettings::default()
        });
        let mut settings = diagnosis::Settings::new(role, agent_namespace);
        settings.concurrency = self.diagnosis_concurrency.max(1);
        settings.wait_limit = self.diagnosis_wait_limit;
        settings.node_wait = self.diagnosis_node_wait;
        settings.limits = Limits {
            per_value: self.result_value_limit,
            per_diagnosis: self.results_limit,
        };
        Arc::new(diagnosis::Context::new(
            client,
            Arc::new(processors),
            settings,
        ))
    }
}

impl DiagnosisArgs {
    /// `locator`, pulling `oci://` modules too (refused, saying why, when no registry
    /// is allowed).
    pub fn with_oci(
        &self,
        locator: ModuleLocator,
        cache_dir: Option<&std::path::Path>,
    ) -> ModuleLocator {
        let catalog = self.module_store.catalog(cache_dir);
        match self.registries.modules(catalog, cache_dir) {
            Some(oci) => locator.with_oci(oci),
            None => locator,
        }
    }

    /// Where wasm modules are found: --modules, and the module store named by the
    /// cluster's Modules. An agent keeps its store in step with the Modules here (a
    /// replica of `operon serve` does so beside its module API, see `module_api`).
    fn locator(
        &self,
        client: &kube::Client,
        role: &Role,
        cache_dir: Option<&std::path::Path>,
    ) -> ModuleLocator {
        let locator = ModuleLocator::new(self.modules.clone());
        let Some(catalog) = self.module_store.catalog(cache_dir) else {
            return locator;
        };
        // An agent fetches from the replicas of `operon serve`, which needs their CA;
        // without one it finds modules in --modules only.
        if let Role::Agent { node } = role {
            match self.module_store.fetcher(None) {
                Ok(None) => {
                    tracing::info!("no --module-source-ca: uploaded modules are not fetched");
                    return locator;
                }
                Ok(fetcher) => {
                    let replica = self
                        .module_store
                        .replica(format!("agent/{node}"), None, None);
                    tokio::spawn(operon::store::replica::follow(
                        client.clone(),
                        catalog.clone(),
                        fetcher,
                        replica,
                        None,
                    ));
                }
                Err(e) => tracing::error!(error = %format!("{e:#}"), "cannot fetch modules"),
            }
        }
        locator.with_catalog(catalog)
    }
}

/// The namespace this process works in: `given`, else the pod's (from its service
/// account), else the kubeconfig context's.
pub(super) fn own_namespace(given: Option<String>, client: &kube::Client) -> String {
    given
        .or_else(|| {
            std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
                .ok()
                .map(|n| n.trim().to_owned())
        })
        .unwrap_or_else(|| client.default_namespace().to_owned())
}
