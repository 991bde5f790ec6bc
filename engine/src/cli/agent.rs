//! `operon agent`: runs the Diagnoses placed on one node (a DaemonSet pod per node).

use super::engine_args::{DiagnosisArgs, KubeArgs, OnNode, own_namespace};
use super::offload::{ModuleCa, OffloadDefaults};
use super::serve::shutdown_signal;
use anyhow::Context as _;
use operon::agent::{self, AgentOptions};
use operon::controllers::diagnosis::Role;
use operon::node_ops::NodeOps;
use operon::script::ScriptStore;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Arguments of `operon agent`.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The node this agent serves (from the downward API: `spec.nodeName`).
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
    /// The namespace of the agent's Lease [default: the pod's namespace].
    #[arg(long, env = "POD_NAMESPACE")]
    namespace: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
    /// Address of the health endpoints.
    #[arg(long, env = "OPERON_LISTEN_ADDRESS", default_value = "0.0.0.0")]
    listen_address: IpAddr,
    /// Port of the health endpoints.
    #[arg(long, env = "OPERON_AGENT_LISTEN_PORT", default_value_t = 9116)]
    listen_port: u16,
    /// Refuse to run a script step when any sandbox protection is unavailable.
    #[arg(long)]
    strict: bool,
    /// Where compiled modules are cached [default: $XDG_CACHE_HOME/operon/modules].
    #[arg(long, env = "OPERON_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Where the node's filesystem is mounted in this pod (a read-only hostPath of the
    /// node's `/`). The paths Operations declare read-only (`readOnlyPaths`) are then
    /// looked up under it, and script steps find it in `OPERON_NODE_ROOT`. Without it,
    /// those paths are the pod's own.
    #[arg(long, env = "OPERON_NODE_ROOT")]
    node_root: Option<PathBuf>,
    /// Where the agent keeps its state: the script store is `DIR/scripts` (0700).
    #[arg(long, env = "OPERON_DATA_ROOT", default_value = "/var/lib/operon")]
    data_root: PathBuf,
    /// The node's system D-Bus, where the systemd built-in
    /// (`/processor/systemdUnitCollector`) asks systemd about units.
    #[arg(long, env = "DBUS_SYSTEM_BUS_ADDRESS", default_value = operon::node_ops::DEFAULT_SYSTEMD_BUS)]
    systemd_bus: String,
    /// On SIGTERM, how long running Diagnoses may go on before they are cut off (keep
    /// it under the pod's terminationGracePeriodSeconds).
    #[arg(long, default_value = "25s", value_parser = humantime::parse_duration)]
    shutdown_grace: std::time::Duration,
    #[command(flatten)]
    diagnoses: DiagnosisArgs,
    #[command(flatten)]
    offload: super::offload::OffloadArgs,
}

/// Runs `operon agent`.
pub fn run(args: AgentArgs) -> anyhow::Result<ExitCode> {
    super::memory::limit_arenas();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(args))
}

async fn serve(args: AgentArgs) -> anyhow::Result<ExitCode> {
    super::memory::keep_trimmed();
    anyhow::ensure!(
        !args.node_name.is_empty(),
        "--node-name (NODE_NAME) is empty: set it from the downward API (spec.nodeName)"
    );
    if let Some(root) = &args.node_root {
        anyhow::ensure!(
            root.is_dir(),
            "--node-root (OPERON_NODE_ROOT) {} is not a directory: mount the node's / there \
             (a read-only hostPath), or leave it unset",
            root.display()
        );
    }
    args.diagnoses.registries.check()?;
    let scripts = args.data_root.join("scripts");
    let store = ScriptStore::open(&scripts)
        .with_context(|| format!("opening the script store {}", scripts.display()))?;
    let cluster = args.kube.connect().await?;
    let client = cluster.client().clone();
    let namespace = own_namespace(args.namespace.clone(), &client);
    let ctx = args.diagnoses.context(
        client.clone(),
        Role::Agent {
            node: args.node_name.clone(),
        },
        &namespace,
        args.cache_dir.clone(),
        args.strict,
        Some(OnNode {
            scripts: Arc::new(store),
            built_ins: Arc::new(
                NodeOps::new(client.clone(), args.node_name.clone())
                    .with_systemd_bus(args.systemd_bus.clone()),
            ),
            node_root: operon::runner::node_paths::NodeRoot::new(args.node_root.clone()),
        }),
    );
    offload(&args, &ctx)?;
    let options = AgentOptions {
        node: args.node_name.clone(),
        namespace,
        listen: SocketAddr::new(args.listen_address, args.listen_port),
        shutdown_grace: args.shutdown_grace,
    };
    agent::run(client, ctx, options, shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Lets the agent offload `wasm.runOn: Job` steps of the Diagnoses on its node to Jobs
/// fetching their modules from the module API of `operon serve`, which the agent does
/// not serve: --offload-module-url is required, and the CA is the one it fetches
/// modules with unless --offload-module-ca names another.
fn offload(args: &AgentArgs, ctx: &operon::controllers::diagnosis::Context) -> anyhow::Result<()> {
    let store = &args.diagnoses.module_store;
    let source_ca = store.source_ca();
    // The agent's store holds what it fetched from the replicas, so a module missing
    // there is missing from the module API too; without --module-source-ca it fetches
    // nothing and its store says nothing about what the replicas hold.
    let cache_dir = args
        .cache_dir
        .clone()
        .or_else(operon::sandbox::default_cache_dir);
    let catalog = source_ca.and_then(|_| store.catalog(cache_dir.as_deref()));
    args.offload.apply(
        ctx.processors(),
        OffloadDefaults {
            process: "operon agent",
            module_url: None,
            ca: source_ca.map(|path| ModuleCa::File(path.to_owned())),
            ca_named_by: "--module-source-ca (OPERON_MODULE_SOURCE_CA)",
            catalog,
        },
    )
}
