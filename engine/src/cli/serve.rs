//! `operon serve`: the controller against a Kubernetes API server.

use super::hook::loader;
use anyhow::Context as _;
use operon::cluster::kube::{KubeCluster, KubeOptions};
use operon::serve::lease::{LeaderElector, LeaseOptions};
use operon::serve::{self, ServeOptions};

/// Where a pod finds its namespace.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `operon serve` (shell-operator's flag names where it has them).
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The hooks: `*.wasm` components and executables (shell-operator's discovery rules).
    #[arg(long, env = "OPERON_HOOKS_DIR", default_value = "/hooks")]
    hooks_dir: PathBuf,
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
    /// Address of the metrics and health endpoints.
    #[arg(long, env = "OPERON_LISTEN_ADDRESS", default_value = "0.0.0.0")]
    listen_address: IpAddr,
    /// Port of the metrics and health endpoints.
    #[arg(long, env = "OPERON_LISTEN_PORT", default_value_t = 9115)]
    listen_port: u16,
    /// The debug endpoint's unix socket; an empty value turns it off.
    #[arg(long, env = "DEBUG_UNIX_SOCKET", default_value = serve::debug::DEFAULT_SOCKET)]
    debug_unix_socket: String,
    /// How long hook runs in progress may take to finish after SIGTERM.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    graceful_shutdown_period: Duration,
    /// Run hooks only while holding a coordination.k8s.io Lease, so that of several
    /// replicas exactly one runs them.
    #[arg(long, env = "OPERON_LEADER_ELECT")]
    leader_elect: bool,
    /// The Lease's namespace [default: $POD_NAMESPACE, the service account's namespace,
    /// then the kubeconfig's].
    #[arg(long, env = "POD_NAMESPACE")]
    leader_election_namespace: Option<String>,
    /// The Lease's name.
    #[arg(long, default_value = "operon")]
    leader_election_lease_name: String,
    /// How long a Lease not renewed stays its holder's.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    leader_election_lease_duration: Duration,
    /// How long the leader tries to renew before it stops leading (below the duration).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    leader_election_renew_deadline: Duration,
    /// How often to try to take or renew the Lease.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    leader_election_retry_period: Duration,
    /// Refuse to run a script hook when any sandbox protection is unavailable.
    #[arg(long)]
    strict: bool,
    /// Where compiled modules are cached [default: $XDG_CACHE_HOME/operon/modules].
    #[arg(long, env = "OPERON_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
}

/// Runs `operon serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(args))
}

async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let loader = loader(args.cache_dir.clone(), args.strict)?;
    let kube = KubeOptions {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        qps: args.kube_client_qps,
        burst: args.kube_client_burst,
        ..KubeOptions::default()
    };
    let cluster = KubeCluster::connect(&kube)
        .await
        .context("connecting to the Kubernetes API server")?;
    let options = ServeOptions {
        hooks_dir: args.hooks_dir,
        listen: SocketAddr::new(args.listen_address, args.listen_port),
        debug_socket: Some(PathBuf::from(args.debug_unix_socket))
            .filter(|p| !p.as_os_str().is_empty()),
        grace: args.graceful_shutdown_period,
    };
    let elector = if args.leader_elect {
        let namespace = args
            .leader_election_namespace
            .clone()
            .or_else(|| {
                std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
                    .ok()
                    .map(|n| n.trim().to_owned())
            })
            .unwrap_or_else(|| cluster.client().default_namespace().to_owned());
        let mut lease = LeaseOptions::new(&args.leader_election_lease_name, &namespace);
        lease.lease_duration = args.leader_election_lease_duration;
        lease.renew_deadline = args.leader_election_renew_deadline;
        lease.retry_period = args.leader_election_retry_period;
        anyhow::ensure!(
            lease.renew_deadline < lease.lease_duration,
            "--leader-election-renew-deadline must be shorter than --leader-election-lease-duration, or a leader could still run hooks after another took over"
        );
        Some(LeaderElector::new(cluster.client().clone(), lease))
    } else {
        None
    };
    serve::run(
        options,
        &loader,
        Arc::new(cluster),
        elector,
        shutdown_signal(),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM (what Kubernetes sends) or Ctrl-C.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = term => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: shutting down"),
    }
}
