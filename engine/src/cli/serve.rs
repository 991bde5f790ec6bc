//! `operon serve`: the controller against a Kubernetes API server.

use super::engine_args::own_namespace;
use super::engine_args::{DiagnosisArgs, KubeArgs};
use super::hook::loader;
use anyhow::Context as _;
use operon::cluster::kube::KubeCluster;
use operon::controllers::diagnosis::Role;
use operon::hooks::capture::CaptureSettings;
use operon::hooks::load::HookLoader;
use operon::hooks::runner::{AccessScope, ClusterAccess, ClusterAccessError};
use operon::sandbox::CallLimits;
use operon::serve::alerts::{AlertmanagerOptions, SecretRef};
use operon::serve::lease::{LeaderElector, LeaseOptions};
use operon::serve::webhook::WebhookEndpoint;
use operon::serve::webhook::register::{ClientTarget, Registrar, Registration, SelfSignedCa};
use operon::serve::webhook::selfsigned::{SelfSigned, SelfSignedOptions, service_dns_names};
use operon::serve::webhook::tls::TlsFiles;
use operon::serve::{self, Coordination, ServeOptions};
use operon::store::ModuleLocator;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `operon serve` (shell-operator's flag names where it has them).
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    jq: super::hook::JqArgs,
    /// The hooks: `*.wasm` components and executables (shell-operator's discovery rules).
    #[arg(long, env = "OPERON_HOOKS_DIR", default_value = "/hooks")]
    hooks_dir: PathBuf,
    #[command(flatten)]
    kube: KubeArgs,
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
    /// How long to go on as before after SIGTERM, webhooks and all, before shutting
    /// down: a Pod being deleted leaves its Service's endpoints at once, but every
    /// node's kube-proxy applies that a moment later, and admission requests sent to it
    /// meanwhile would fail if its webhook server had stopped.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    shutdown_delay: Duration,
    /// Keep what this many of each hook's last runs received and answered (binding
    /// contexts, reviews, patches, answers), for `operon hook record`; 0 keeps nothing.
    /// Secret data is redacted.
    #[arg(long, env = "OPERON_CAPTURE_RUNS", default_value_t = 0)]
    capture_runs: usize,
    /// At most this much captured JSON per hook, e.g. `1MiB` (the oldest runs go first).
    #[arg(long, env = "OPERON_CAPTURE_BYTES", default_value = "1MiB")]
    capture_bytes: bytesize::ByteSize,
    /// Also redact these fields in every captured object, as dotted paths
    /// (`spec.password`, `metadata.annotations.token`); repeatable or comma-separated.
    #[arg(long, env = "OPERON_CAPTURE_REDACT", value_delimiter = ',')]
    capture_redact: Vec<String>,
    /// Runs hook SHADOW of the hooks directory as the shadow of hook LIVE
    /// (`SHADOW=LIVE`, names as `operon debug hook list` shows them; LIVE may be a
    /// Hook object's `Hook/NS/NAME`): it gets LIVE's inputs instead of running on its
    /// own bindings, and its patches and answers are compared with LIVE's and never
    /// applied. Repeatable or comma-separated.
    #[arg(long, env = "OPERON_SHADOW_HOOKS", value_delimiter = ',', value_parser = shadow_pair)]
    shadow_hook: Vec<(String, String)>,
    /// How often the hooks directory (and, with --modules-dir, the modules and global
    /// hooks directories) is checked for changes, which are then loaded without a
    /// restart: a hooks ConfigMap update needs no rollout. A tree that does not load is
    /// refused, with the file and the reason, and the one in use keeps running. `0`
    /// loads them once, at start.
    #[arg(long, env = "OPERON_RELOAD_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
    reload_interval: Duration,
    /// The validating webhook server's certificate (PEM), reloaded when it changes.
    #[arg(
        long,
        env = "VALIDATING_WEBHOOK_SERVER_CERT",
        requires = "validating_webhook_server_key"
    )]
    validating_webhook_server_cert: Option<PathBuf>,
    /// The validating webhook server's private key (PEM).
    #[arg(
        long,
        env = "VALIDATING_WEBHOOK_SERVER_KEY",
        requires = "validating_webhook_server_cert"
    )]
    validating_webhook_server_key: Option<PathBuf>,
    /// Accept only clients (API servers) with a certificate signed by this CA (PEM).
    #[arg(long, env = "VALIDATING_WEBHOOK_CLIENT_CA")]
    validating_webhook_client_ca: Option<PathBuf>,
    /// Address of the validating webhook server.
    #[arg(
        long,
        env = "VALIDATING_WEBHOOK_LISTEN_ADDRESS",
        default_value = "0.0.0.0"
    )]
    validating_webhook_listen_address: IpAddr,
    /// Port of the validating webhook server.
    #[arg(long, env = "VALIDATING_WEBHOOK_LISTEN_PORT", default_value_t = 9680)]
    validating_webhook_listen_port: u16,
    /// The conversion webhook server's certificate (PEM), reloaded when it changes.
    #[arg(
        long,
        env = "CONVERSION_WEBHOOK_SERVER_CERT",
        requires = "conversion_webhook_server_key"
    )]
    conversion_webhook_server_cert: Option<PathBuf>,
    /// The conversion webhook server's private key (PEM).
    #[arg(
        long,
        env = "CONVERSION_WEBHOOK_SERVER_KEY",
        requires = "conversion_webhook_server_cert"
    )]
    conversion_webhook_server_key: Option<PathBuf>,
    /// Accept only clients (API servers) with a certificate signed by this CA (PEM).
    #[arg(long, env = "CONVERSION_WEBHOOK_CLIENT_CA")]
    conversion_webhook_client_ca: Option<PathBuf>,
    /// Address of the conversion webhook server.
    #[arg(
        long,
        env = "CONVERSION_WEBHOOK_LISTEN_ADDRESS",
        default_value = "0.0.0.0"
    )]
    conversion_webhook_listen_address: IpAddr,
    /// Port of the conversion webhook server.
    #[arg(long, env = "CONVERSION_WEBHOOK_LISTEN_PORT", default_value_t = 9681)]
    conversion_webhook_listen_port: u16,
    /// The CA (PEM) that signed the admission server's certificate: given, the leader
    /// registers the Validating- and MutatingWebhookConfiguration with it as caBundle.
    #[arg(long, env = "VALIDATING_WEBHOOK_CA")]
    validating_webhook_ca: Option<PathBuf>,
    /// The ValidatingWebhookConfiguration the leader writes.
    #[arg(
        long,
        env = "VALIDATING_WEBHOOK_CONFIGURATION_NAME",
        default_value = "operon-webhooks"
    )]
    validating_webhook_configuration_name: String,
    /// Do not register the webhook that checks Operon's own resources (Operations,
    /// OperationSets, Triggers, Diagnoses) on create and update; it is registered with
    /// the ValidatingWebhookConfiguration by default.
    #[arg(long, env = "OPERON_SKIP_RESOURCES_WEBHOOK")]
    skip_resources_webhook: bool,
    /// The MutatingWebhookConfiguration the leader writes for mutating bindings (the
    /// admission server answers them; its CA is --validating-webhook-ca).
    #[arg(
        long,
        env = "MUTATING_WEBHOOK_CONFIGURATION_NAME",
        default_value = "operon-webhooks"
    )]
    mutating_webhook_configuration_name: String,
    /// The Service in front of the validating server (in the engine's namespace).
    #[arg(
        long,
        env = "VALIDATING_WEBHOOK_SERVICE_NAME",
        default_value = "operon-webhooks"
    )]
    validating_webhook_service_name: String,
    /// That Service's port.
    #[arg(long, default_value_t = 443)]
    validating_webhook_service_port: u16,
    /// Register a URL (`https://HOST:PORT`) instead of the Service, for an engine
    /// running outside the cluster.
    #[arg(long)]
    validating_webhook_url_base: Option<String>,
    /// The CA (PEM) that signed the conversion server's certificate: given, the leader
    /// writes the conversion webhook into the CRDs of conversion bindings.
    #[arg(long, env = "CONVERSION_WEBHOOK_CA")]
    conversion_webhook_ca: Option<PathBuf>,
    /// The Service in front of the conversion server (in the engine's namespace).
    #[arg(
        long,
        env = "CONVERSION_WEBHOOK_SERVICE_NAME",
        default_value = "operon-webhooks"
    )]
    conversion_webhook_service_name: String,
    /// That Service's port.
    #[arg(long, default_value_t = 9681)]
    conversion_webhook_service_port: u16,
    /// Register a URL (`https://HOST:PORT`) instead of the Service.
    #[arg(long)]
    conversion_webhook_url_base: Option<String>,
    /// Serve the webhooks with a certificate Operon makes and keeps itself: a CA and a
    /// serving certificate for the webhook Services (and the hosts of the URL bases),
    /// stored in the Secret --webhook-tls-secret so every replica serves the same one,
    /// renewed before it expires; the leader registers its CA as caBundle. A server
    /// given its own --*-webhook-server-cert keeps that one.
    #[arg(long, env = "OPERON_WEBHOOK_SELF_SIGNED")]
    webhook_self_signed: bool,
    /// A directory holding `tls.crt`, `tls.key` and optionally `ca.crt` (a mounted
    /// kubernetes.io/tls Secret, e.g. cert-manager's) for both webhook servers: the
    /// certificate of a server not given its own --*-webhook-server-cert, and, when
    /// `ca.crt` is there, the CA registered for a server not given its own --*-webhook-ca.
    /// Reloaded when the files change, like the others.
    #[arg(
        long,
        env = "OPERON_WEBHOOK_CERT_DIR",
        conflicts_with = "webhook_self_signed"
    )]
    webhook_cert_dir: Option<PathBuf>,
    /// The Secret (in the engine's namespace) holding the self-signed CA and certificate.
    #[arg(
        long,
        env = "OPERON_WEBHOOK_TLS_SECRET",
        default_value = "operon-webhook-tls"
    )]
    webhook_tls_secret: String,
    /// Where the self-signed certificate and key are written for the servers to read
    /// [default: $TMPDIR/operon-webhook-tls].
    #[arg(long, env = "OPERON_WEBHOOK_TLS_DIR")]
    webhook_tls_dir: Option<PathBuf>,
    /// How long a webhook request waits for its hook (below the webhooks' timeoutSeconds).
    #[arg(long, default_value = "9s", value_parser = humantime::parse_duration)]
    webhook_timeout: Duration,
    /// What the answers of validating and mutating bindings that declare no
    /// `enforcement` do: Deny (the hook's answer is the API server's), Warn (requests
    /// are allowed, denials and failures shown as warnings, patches not applied) or
    /// DryRun (requests are allowed; answers are only logged and counted as would_deny).
    #[arg(long, env = "OPERON_WEBHOOK_ENFORCEMENT", default_value = "Deny")]
    webhook_enforcement: operon::model::Enforcement,
    /// Audit the objects that exist this long after the previous audit ended, e.g. `1h`:
    /// the leader sends every validating binding a review of each object its rules
    /// match, and writes what they answer as PolicyReports and ClusterPolicyReports
    /// (when their CRDs are installed). Off when not given.
    #[arg(long, env = "OPERON_AUDIT_INTERVAL", value_parser = super::audit::interval)]
    audit_interval: Option<Duration>,
    /// Reviews per second an audit sends at most (one at a time).
    #[arg(long, env = "OPERON_AUDIT_RATE", default_value_t = operon::serve::audit::DEFAULT_RATE, value_parser = super::audit::rate)]
    audit_rate: f64,
    /// Serve the Alertmanager receiver (`POST /api/v2/alerts`, `/api/v1/alerts`) on the
    /// metrics port, authenticated by the bearer token in key `token` of this Secret
    /// (`NAMESPACE/NAME`, re-read when it changes); without it the routes are not served.
    #[arg(long, env = "OPERON_ALERTMANAGER_TOKEN_SECRET")]
    alertmanager_token_secret: Option<SecretRef>,
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
    /// Do not run Operon's controllers (OperationSet status) even when the operon.dev
    /// CRDs are installed.
    #[arg(long, env = "OPERON_NO_CONTROLLERS")]
    no_controllers: bool,
    /// Script hooks that call kubectl themselves: `all`, or hook names separated by
    /// commas. They get the network and this pod's ServiceAccount credentials
    /// (read-only), so they can do what the account may; off by default.
    #[arg(long, env = "OPERON_HOOK_CLUSTER_ACCESS", value_parser = parse_scope)]
    hook_cluster_access: Option<AccessScope>,
    /// Where compiled modules are cached [default: $XDG_CACHE_HOME/operon/modules].
    #[arg(long, env = "OPERON_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    #[command(flatten)]
    diagnoses: DiagnosisArgs,
    #[command(flatten)]
    module_api: super::module_store::ModuleApiArgs,
    #[command(flatten)]
    addon_modules: super::modules::ServeModulesArgs,
    #[command(flatten)]
    offload: super::offload::OffloadArgs,
}

fn parse_scope(text: &str) -> Result<AccessScope, String> {
    text.parse().map_err(|e: ClusterAccessError| e.to_string())
}

/// Runs `operon serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    args.jq.apply();
    super::memory::limit_arenas();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(args))
}

async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    super::memory::keep_trimmed();
    args.diagnoses.registries.check()?;
    let mut loader = loader(args.cache_dir.clone(), args.strict)?;
    if let Some(scope) = args.hook_cluster_access.clone() {
        loader = loader.with_cluster_access(ClusterAccess::from_pod(scope)?);
    }
    let cluster = args.kube.connect().await?;
    let namespace = own_namespace(args.leader_election_namespace.clone(), cluster.client());
    let self_signed = match args.webhook_self_signed {
        true => Some(self_signed(&args, &cluster, &namespace).await?),
        false => None,
    };
    let mut options = ServeOptions {
        hooks_dir: args.hooks_dir.clone(),
        listen: SocketAddr::new(args.listen_address, args.listen_port),
        debug_socket: Some(PathBuf::from(&args.debug_unix_socket))
            .filter(|p| !p.as_os_str().is_empty()),
        grace: args.graceful_shutdown_period,
        admission_webhook: endpoint(
            server_file(
                &args.validating_webhook_server_cert,
                &args,
                &self_signed,
                "tls.crt",
            ),
            server_file(
                &args.validating_webhook_server_key,
                &args,
                &self_signed,
                "tls.key",
            ),
            args.validating_webhook_client_ca.clone(),
            SocketAddr::new(
                args.validating_webhook_listen_address,
                args.validating_webhook_listen_port,
            ),
        ),
        conversion_webhook: endpoint(
            server_file(
                &args.conversion_webhook_server_cert,
                &args,
                &self_signed,
                "tls.crt",
            ),
            server_file(
                &args.conversion_webhook_server_key,
                &args,
                &self_signed,
                "tls.key",
            ),
            args.conversion_webhook_client_ca.clone(),
            SocketAddr::new(
                args.conversion_webhook_listen_address,
                args.conversion_webhook_listen_port,
            ),
        ),
        webhook_timeout: args.webhook_timeout,
        webhook_enforcement: args.webhook_enforcement,
        alertmanager: args.alertmanager_token_secret.clone().map(|token_secret| {
            AlertmanagerOptions {
                client: cluster.client().clone(),
                token_secret,
            }
        }),
        module_api: None,
        modules: {
            // The cache the Diagnoses' runners use (the pulled wasm modules' store is
            // made once, by whichever asks first).
            let cache_dir = (args.cache_dir.clone()).or_else(operon::sandbox::default_cache_dir);
            args.addon_modules.options(
                &namespace,
                cluster.client(),
                args.strict,
                args.diagnoses.registries.modules(
                    args.diagnoses
                        .module_store
                        .catalog(args.cache_dir.as_deref()),
                    cache_dir.as_deref(),
                ),
                cache_dir.as_deref(),
            )?
        },
        capture: CaptureSettings {
            runs_per_hook: args.capture_runs,
            bytes_per_hook: usize::try_from(args.capture_bytes.as_u64()).unwrap_or(usize::MAX),
            redact: args.capture_redact.clone(),
        },
        shadow_hooks: args.shadow_hook.clone(),
        leader_trust: None,
        reload_interval: Some(args.reload_interval).filter(|i| !i.is_zero()),
    };
    let registrar = registration(&args, &namespace, self_signed.as_ref())?.map(|registration| {
        let registrar = Registrar::new(cluster.client().clone(), registration);
        match &self_signed {
            Some(s) => registrar.with_self_signed(SelfSignedCa {
                bundle: s.ca.clone(),
                admission: args.validating_webhook_ca.is_none()
                    && args.validating_webhook_server_cert.is_none(),
                conversion: args.conversion_webhook_ca.is_none()
                    && args.conversion_webhook_server_cert.is_none(),
            }),
            None => registrar,
        }
    });
    // Operon's own controllers run where its CRDs are installed; `operon serve` used for
    // hooks alone needs neither the CRDs nor the RBAC for them.
    let controllers = if args.no_controllers {
        None
    } else {
        match operon::controllers::crds_installed(cluster.client()).await {
            Ok(true) => Some(cluster.client().clone()),
            Ok(false) => {
                tracing::info!(
                    "the operon.dev CRDs are not installed: Operon's controllers do not run"
                );
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot tell whether the operon.dev CRDs are installed: Operon's controllers do not run");
                None
            }
        }
    };
    let elector = if args.leader_elect {
        let mut lease = LeaseOptions::new(&args.leader_election_lease_name, &namespace);
        lease.lease_duration = args.leader_election_lease_duration;
        lease.renew_deadline = args.leader_election_renew_deadline;
        lease.retry_period = args.leader_election_retry_period;
        anyhow::ensure!(
            lease.renew_deadline < lease.lease_duration,
            "--leader-election-renew-deadline must be shorter than --leader-election-lease-duration, or a leader could still run hooks after another took over"
        );
        // Followers pass the reviews of addon-operator modules (which run on the
        // leader only) to the leader's admission server, at $POD_IP.
        let pod_ip = std::env::var("POD_IP").ok();
        let pod_ip = pod_ip.and_then(|ip| ip.parse::<std::net::IpAddr>().ok());
        if let (Some(ip), Some(_)) = (pod_ip, &options.admission_webhook) {
            let address = std::net::SocketAddr::new(ip, args.validating_webhook_listen_port);
            lease.advertise = Some(serve::webhook::forward::LeaderAddress {
                url: format!("https://{address}"),
                server_name: (self_signed.is_some() || args.webhook_cert_dir.is_some())
                    .then(|| format!("{}.{namespace}.svc", args.validating_webhook_service_name)),
            });
        }
        options.leader_trust = match (&self_signed, ca_of(&args, &args.validating_webhook_ca)) {
            (_, Some(path)) => Some(serve::webhook::forward::LeaderTrust::File(path)),
            (Some(s), None) => Some(serve::webhook::forward::LeaderTrust::Live(s.ca.clone())),
            (None, None) => None,
        };
        Some(LeaderElector::new(cluster.client().clone(), lease))
    } else {
        None
    };
    let diagnoses = controllers.clone().map(|client| {
        args.diagnoses.context(
            client,
            Role::Controller,
            &namespace,
            args.cache_dir.clone(),
            args.strict,
            None,
        )
    });
    if let (Some(client), Some(ctx)) = (&controllers, &diagnoses) {
        let ca = match (&self_signed, ca_of(&args, &args.validating_webhook_ca)) {
            (_, Some(path)) => Some(super::module_store::SourceCa::File(path)),
            (Some(s), None) => Some(super::module_store::SourceCa::Pem(s.ca.borrow().clone())),
            (None, None) => None,
        };
        let server_name = (self_signed.is_some() || args.webhook_cert_dir.is_some())
            .then(|| format!("{}.{namespace}.svc", args.validating_webhook_service_name));
        options.module_api = args
            .module_api
            .start(
                client,
                ctx,
                &args.diagnoses.module_store,
                args.cache_dir.as_deref(),
                ca,
                server_name,
                args.validating_webhook_listen_port,
            )
            .await?;
        // Offloaded wasm steps fetch their modules from the module API, so only a
        // replica serving it offloads them.
        if options.module_api.is_some() {
            let ca = match (&self_signed, ca_of(&args, &args.validating_webhook_ca)) {
                (_, Some(path)) => Some(super::offload::ModuleCa::File(path)),
                (Some(s), None) => Some(super::offload::ModuleCa::Live(s.ca.clone())),
                (None, None) => None,
            };
            let service = format!(
                "https://{}.{namespace}.svc:{}",
                args.validating_webhook_service_name, args.validating_webhook_service_port
            );
            let catalog = args
                .diagnoses
                .module_store
                .catalog(args.cache_dir.as_deref());
            args.offload.apply(
                ctx.processors(),
                super::offload::OffloadDefaults {
                    process: "operon serve",
                    module_url: Some(service),
                    ca,
                    ca_named_by: "admission server's CA (self-signed, --validating-webhook-ca or ca.crt of --webhook-cert-dir)",
                    catalog,
                },
            )?;
        }
    }
    let client = cluster.client().clone();
    let cluster = Arc::new(cluster);
    let hook_objects = match (&controllers, &diagnoses) {
        (Some(client), Some(ctx)) => {
            let catalog = args
                .diagnoses
                .module_store
                .catalog(args.cache_dir.as_deref());
            let mut modules = ModuleLocator::new(args.diagnoses.modules.clone());
            if let Some(catalog) = catalog.clone() {
                modules = modules.with_catalog(catalog);
            }
            if let Some(oci) = ctx.processors().modules().oci() {
                modules = modules.with_oci(oci.clone());
            }
            let sandbox = ctx.processors().wasm_sandbox()?;
            let loader = HookLoader::new(sandbox, CallLimits::default(), args.strict);
            // Hooks with runOn: Job go where offloaded steps go.
            let offload = ctx.processors().offload_target().map(|target| {
                serve::hook_objects::prepare::HookOffload {
                    target,
                    client: client.clone(),
                    platform: ctx.processors().platform().clone(),
                }
            });
            serve::hook_objects::setup(
                client,
                modules,
                catalog.as_deref(),
                loader,
                cluster.clone(),
                offload,
            )
            .await
        }
        _ => None,
    };
    serve::run(
        options,
        &loader,
        cluster,
        Coordination {
            elector,
            registrar,
            controllers,
            diagnoses,
            hook_objects,
            audit: args
                .audit_interval
                .map(|interval| serve::audit::PeriodicAudit {
                    store: serve::audit::store::ReportStore::new(client.clone()),
                    interval,
                    settings: serve::audit::AuditSettings {
                        rate: args.audit_rate,
                        timeout: args.webhook_timeout,
                        enforcement: args.webhook_enforcement,
                    },
                }),
        },
        delayed(shutdown_signal(), args.shutdown_delay),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// The self-signed certificate, ready for the servers: its files, and its CA bundle as
/// it changes.
struct SelfSignedTls {
    cert: PathBuf,
    key: PathBuf,
    ca: tokio::sync::watch::Receiver<Vec<u8>>,
}

/// Makes or reads the self-signed certificate (before any server starts: they need its
/// files) and keeps it renewed in the background.
async fn self_signed(
    args: &ServeArgs,
    cluster: &KubeCluster,
    namespace: &str,
) -> anyhow::Result<SelfSignedTls> {
    let dir = args
        .webhook_tls_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("operon-webhook-tls"));
    let mut options = SelfSignedOptions::for_service(
        namespace,
        &args.webhook_tls_secret,
        &args.validating_webhook_service_name,
        dir,
    );
    for name in service_dns_names(&args.conversion_webhook_service_name, namespace) {
        if !options.dns_names.contains(&name) {
            options.dns_names.push(name);
        }
    }
    // An engine outside the cluster is reached at its URL bases: their hosts go in too.
    for base in [
        &args.validating_webhook_url_base,
        &args.conversion_webhook_url_base,
    ]
    .into_iter()
    .flatten()
    {
        let host = url_host(base)
            .with_context(|| format!("{base} is not an https://HOST[:PORT] URL base"))?;
        match host.parse::<IpAddr>() {
            Ok(ip) if !options.ip_addresses.contains(&ip) => options.ip_addresses.push(ip),
            Ok(_) => {}
            Err(_) if !options.dns_names.contains(&host) => options.dns_names.push(host),
            Err(_) => {}
        }
    }
    let keeper = SelfSigned::new(cluster.client().clone(), options);
    let bundle = keeper
        .ensure()
        .await
        .context("preparing the self-signed webhook certificate")?;
    let ca = keeper.ca_bundle();
    tokio::spawn(async move {
        // The process ends with the runtime; the refresher needs no stop signal of its own.
        let (_keep, never) = tokio::sync::watch::channel(false);
        keeper.run(never).await;
    });
    Ok(SelfSignedTls {
        cert: bundle.cert_path,
        key: bundle.key_path,
        ca,
    })
}

/// A webhook server's certificate or key (`file` is `tls.crt` or `tls.key`): its own
/// flag, else the file in --webhook-cert-dir, else the self-signed one.
fn server_file(
    flag: &Option<PathBuf>,
    args: &ServeArgs,
    self_signed: &Option<SelfSignedTls>,
    file: &str,
) -> Option<PathBuf> {
    flag.clone()
        .or_else(|| in_cert_dir(args, file))
        .or_else(|| {
            self_signed.as_ref().map(|s| match file {
                "tls.key" => s.key.clone(),
                _ => s.cert.clone(),
            })
        })
}

/// `file` in --webhook-cert-dir, when that is given.
fn in_cert_dir(args: &ServeArgs, file: &str) -> Option<PathBuf> {
    args.webhook_cert_dir.as_ref().map(|dir| dir.join(file))
}

/// The CA to register for a server: its own flag, else `ca.crt` of --webhook-cert-dir
/// when the directory has one.
fn ca_of(args: &ServeArgs, flag: &Option<PathBuf>) -> Option<PathBuf> {
    flag.clone()
        .or_else(|| in_cert_dir(args, "ca.crt").filter(|path| path.exists()))
}

/// The host of `https://HOST[:PORT][/PATH]` (brackets of an IPv6 address removed).
fn url_host(base: &str) -> Option<String> {
    let rest = base.strip_prefix("https://")?;
    let authority = rest.split('/').next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.split(':').next()?,
    };
    (!host.is_empty()).then(|| host.to_owned())
}

/// What the leader registers, when a CA is given for a webhook server or the
/// certificate is self-signed.
fn registration(
    args: &ServeArgs,
    namespace: &str,
    self_signed: Option<&SelfSignedTls>,
) -> anyhow::Result<Option<Registration>> {
    if ca_of(args, &args.validating_webhook_ca).is_none()
        && ca_of(args, &args.conversion_webhook_ca).is_none()
        && self_signed.is_none()
    {
        return Ok(None);
    }
    let read = |path: &Option<PathBuf>| -> anyhow::Result<Vec<u8>> {
        match path {
            Some(path) => {
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))
            }
            None => Ok(Vec::new()),
        }
    };
    let target = |url: &Option<String>, name: &str, port: u16| match url {
        Some(base) => ClientTarget::Url(base.clone()),
        None => ClientTarget::Service {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            port,
        },
    };
    Ok(Some(Registration {
        validating_configuration: args.validating_webhook_configuration_name.clone(),
        mutating_configuration: args.mutating_webhook_configuration_name.clone(),
        admission: target(
            &args.validating_webhook_url_base,
            &args.validating_webhook_service_name,
            args.validating_webhook_service_port,
        ),
        conversion: target(
            &args.conversion_webhook_url_base,
            &args.conversion_webhook_service_name,
            args.conversion_webhook_service_port,
        ),
        admission_ca: read(&ca_of(args, &args.validating_webhook_ca))?,
        conversion_ca: read(&ca_of(args, &args.conversion_webhook_ca))?,
        own_resources: !args.skip_resources_webhook,
    }))
}

fn endpoint(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
    listen: SocketAddr,
) -> Option<WebhookEndpoint> {
    Some(WebhookEndpoint {
        listen,
        tls: TlsFiles {
            cert: cert?,
            key: key?,
            client_ca,
        },
    })
}

/// `signal`, passed on `delay` after it came.
async fn delayed(signal: impl Future<Output = ()>, delay: Duration) {
    signal.await;
    if !delay.is_zero() {
        tracing::info!(
            delay = ?delay,
            "serving on while the Pod leaves its Services' endpoints"
        );
        tokio::time::sleep(delay).await;
    }
}

/// SIGTERM (what Kubernetes sends) or Ctrl-C.
pub(super) async fn shutdown_signal() {
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

/// `SHADOW=LIVE` of `--shadow-hook`.
fn shadow_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((shadow, live)) if !shadow.trim().is_empty() && !live.trim().is_empty() => {
            Ok((shadow.trim().to_owned(), live.trim().to_owned()))
        }
        _ => Err(format!(
            "{text:?} is not SHADOW=LIVE (the shadow hook's name, then the live hook's)"
        )),
    }
}
