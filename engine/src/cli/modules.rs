//! `operon modules run|values|render|list`: addon-operator's modules directory against the
//! local cluster (fixture objects) or an API server (`--kubeconfig`); `operon modules
//! queue`: the module queue of a running `operon serve`; and the modules flags of
//! `operon serve` ([`ServeModulesArgs`]).

use super::output::{self, Format};
use anyhow::{Context as _, bail};
use operon::addons::apply::ObjectWriter;
use operon::addons::config::ConfigMapRef;
use operon::addons::operator::{Operator, QueueEvent, Settings};
use operon::addons::render::Renderer;
use operon::addons::schema::dotted;
use operon::addons::status::{QueueStatus, QueueView};
use operon::cluster::Cluster;
use operon::cluster::kube::{KubeCluster, KubeOptions};
use operon::cluster::local::LocalCluster;
use operon::model::WatchEvent;
use operon::script::ScriptSandbox;
use operon::serve::addons::ModulesOptions;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Subcommands of `operon modules`.
#[derive(Debug, clap::Subcommand)]
pub enum ModulesCommand {
    /// Run the task queue: global onStartup hooks, then beforeAll, discovery,
    /// ModuleDelete/ModuleRun per module and afterAll, then ConfigMap changes; prints
    /// the queue as it runs.
    Run(RunArgs),
    /// Print a module's merged values with the source of each key.
    Values(ModuleArgs),
    /// Print the objects a module would apply (with --diff: what applying would change).
    Render(RenderArgs),
    /// Print the module task queue of a running `operon serve` (its debug socket), as
    /// addon-operator's `queue list` does.
    Queue(QueueArgs),
    /// List the modules in the order they run, each enabled or disabled with the
    /// reason (its flags, its enabled script, its module.yaml requirements); global
    /// onStartup and beforeAll hooks run first as a dry run.
    List(ListArgs),
}

/// Arguments of `operon modules list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    common: Common,
    /// The Kubernetes version module.yaml `kubernetes` requirements are checked
    /// against [default: the API server's with --kubeconfig, else 1.32.0, the local
    /// cluster's].
    #[arg(long)]
    kubernetes_version: Option<String>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Arguments of `operon modules queue`.
#[derive(Debug, clap::Args)]
pub struct QueueArgs {
    /// The debug socket of `operon serve`.
    #[arg(long, env = "DEBUG_UNIX_SOCKET", default_value = operon::serve::debug::DEFAULT_SOCKET)]
    debug_unix_socket: PathBuf,
    /// Output format (`table` prints one line per task).
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// The modules flags of `operon serve` (addon-operator's names and variables).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeModulesArgs {
    /// addon-operator's modules directory (`NNN-name/` modules and `values.yaml`), or
    /// several joined by `:`; the leader converges them. Without it (and without
    /// --module-source) `operon serve` runs no modules.
    #[arg(long, env = "MODULES_DIR")]
    modules_dir: Option<PathBuf>,
    /// An addon-operator module from an OCI registry, pinned by digest:
    /// `oci://REGISTRY/REPOSITORY[:TAG]@sha256:DIGEST` (repeatable, or comma-separated;
    /// read after --modules-dir, whose modules win a name). Pulled from a registry
    /// --allow-registry names, checked against --module-verification, unpacked into
    /// the cache directory.
    #[arg(
        long = "module-source",
        env = "OPERON_MODULE_SOURCES",
        value_delimiter = ','
    )]
    module_sources: Vec<String>,
    /// A Secret of the engine's namespace (`kubernetes.io/dockerconfigjson`) with
    /// credentials for the module sources' registries (repeatable, or
    /// comma-separated; the first with an entry for a registry is used).
    #[arg(
        long = "module-source-pull-secret",
        env = "OPERON_MODULE_SOURCE_PULL_SECRETS",
        value_delimiter = ','
    )]
    module_source_pull_secrets: Vec<String>,
    /// The global hooks directory (hooks in `hooks/` when it exists, schemas in
    /// `openapi/`).
    #[arg(long, env = "GLOBAL_HOOKS_DIR", requires = "modules_dir")]
    global_hooks_dir: Option<PathBuf>,
    /// The ConfigMap of the modules' config values, `NAMESPACE/NAME` or `NAME` in the
    /// modules' namespace; watched: a change converges again.
    #[arg(
        long,
        env = "ADDON_OPERATOR_CONFIG_MAP",
        default_value = "addon-operator"
    )]
    config_map: String,
    /// The namespace of the modules' release records, of their namespaced objects
    /// without a namespace and of the ConfigMap [default: the engine's namespace].
    #[arg(long, env = "ADDON_OPERATOR_NAMESPACE")]
    modules_namespace: Option<String>,
    /// The `helm` program that renders charts (`helm template`).
    #[arg(long, env = "HELM_BINARY", default_value = "helm")]
    helm_binary: PathBuf,
    /// The deadline of each module hook, `enabled` program and render, and of the wait
    /// for a module's bindings to synchronize.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    module_hook_timeout: Duration,
}

impl ServeModulesArgs {
    /// The modules of `operon serve`, when --modules-dir or --module-source is given;
    /// `namespace` is the engine's, `client` applies objects and reads the pull
    /// Secrets, `oci` pulls (the wasm modules' allow-list and verification) into
    /// `cache_dir`.
    pub fn options(
        &self,
        namespace: &str,
        client: &kube::Client,
        strict: bool,
        oci: Option<Arc<operon::store::oci_modules::OciModules>>,
        cache_dir: Option<&std::path::Path>,
    ) -> anyhow::Result<Option<Arc<ModulesOptions>>> {
        if self.modules_dir.is_none() && self.module_sources.is_empty() {
            return Ok(None);
        }
        let modules_dir = self.modules_dir.clone().unwrap_or_default();
        // The layout is read at once so that a bad directory stops the engine at start,
        // on every replica, not only when one leads.
        operon::addons::layout::Layout::read(&modules_dir, self.global_hooks_dir.as_deref())
            .with_context(|| format!("reading the modules directory {}", modules_dir.display()))?;
        let sources = match self.module_sources.is_empty() {
            true => None,
            false => {
                let oci = oci.context(
                    "--module-source: no store to pull into (see the error above about oci:// modules)",
                )?;
                let root = cache_dir.map(|dir| dir.join("addon-modules")).context(
                    "--module-source: no cache directory to unpack modules into (--cache-dir)",
                )?;
                let client = client.clone();
                let secrets: Vec<operon::api::SecretReference> = (self.module_source_pull_secrets)
                    .iter()
                    .map(|name| operon::api::SecretReference {
                        name: name.trim().to_owned(),
                    })
                    .collect();
                let secrets = Arc::new(secrets);
                let secret_namespace = namespace.to_owned();
                let auth: operon::addons::sources::AuthFor = Arc::new(move |reference: String| {
                    let (client, secrets, namespace) =
                        (client.clone(), secrets.clone(), secret_namespace.clone());
                    Box::pin(async move {
                        operon::store::oci_modules::secret_auth(
                            &client,
                            &namespace,
                            "--module-source-pull-secret",
                            &secrets,
                            &reference,
                        )
                        .await
                    })
                });
                let sources = operon::addons::sources::ModuleSources::new(
                    self.module_sources
                        .iter()
                        .map(|r| r.trim().to_owned())
                        .collect(),
                    operon::store::addon_modules::AddonModules::new(oci, root),
                    auth,
                );
                sources.check()?;
                Some(sources)
            }
        };
        let namespace = self
            .modules_namespace
            .clone()
            .unwrap_or_else(|| namespace.to_owned());
        let common = Common {
            modules_dir: Some(modules_dir),
            module_sources: Vec::new(),
            registry: Default::default(),
            verification: Default::default(),
            global_hooks_dir: self.global_hooks_dir.clone(),
            config_map: self.config_map.clone(),
            namespace: namespace.clone(),
            objects: Vec::new(),
            kubeconfig: None,
            helm_binary: self.helm_binary.clone(),
            hook_timeout: self.module_hook_timeout,
            strict,
        };
        let mut settings = settings(&common);
        settings.sources = sources;
        Ok(Some(Arc::new(ModulesOptions {
            settings,
            namespace,
            client: Some(client.clone()),
            sandbox: ScriptSandbox::with_this_binary(strict)?,
            view: QueueView::default(),
        })))
    }
}

/// Where the modules are and which cluster they go to.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// The modules directory (`NNN-name/` modules and `values.yaml`), or several joined
    /// by `:` (the first one with a module's name wins).
    #[arg(long, env = "MODULES_DIR", required_unless_present = "module_sources")]
    modules_dir: Option<PathBuf>,
    /// An addon-operator module from an OCI registry, pinned by digest:
    /// `oci://REGISTRY/REPOSITORY[:TAG]@sha256:DIGEST` (repeatable, or comma-separated;
    /// read after --modules-dir, whose modules win a name). Any registry (the command
    /// line is yours); unpacked into $XDG_CACHE_HOME/operon/addon-modules.
    #[arg(
        long = "module-source",
        env = "OPERON_MODULE_SOURCES",
        value_delimiter = ','
    )]
    module_sources: Vec<String>,
    /// How module sources are pulled.
    #[command(flatten)]
    registry: super::module_oci::RegistryArgs,
    #[command(flatten)]
    verification: super::module_oci::VerificationArgs,
    /// The global hooks directory (hooks in `hooks/` when it exists, schemas in
    /// `openapi/`).
    #[arg(long, env = "GLOBAL_HOOKS_DIR")]
    global_hooks_dir: Option<PathBuf>,
    /// The ConfigMap of config values, `NAMESPACE/NAME` or `NAME` in --namespace.
    #[arg(
        long,
        env = "ADDON_OPERATOR_CONFIG_MAP",
        default_value = "addon-operator"
    )]
    config_map: String,
    /// The namespace of releases, release records and the ConfigMap.
    #[arg(
        long,
        short = 'n',
        env = "ADDON_OPERATOR_NAMESPACE",
        default_value = "default"
    )]
    namespace: String,
    /// Fixture objects for the local cluster (repeatable), the ConfigMap and
    /// ModuleConfigs among them; ignored with --kubeconfig.
    #[arg(long)]
    objects: Vec<PathBuf>,
    /// Work against this API server instead of the local cluster: objects go in by
    /// server-side apply (field manager operon).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The `helm` program that renders charts (`helm template`).
    #[arg(long, env = "HELM_BINARY", default_value = "helm")]
    helm_binary: PathBuf,
    /// The deadline of each hook, `enabled` program and render.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    hook_timeout: Duration,
    /// Refuse to run a script when any sandbox protection is unavailable.
    #[arg(long)]
    strict: bool,
}

/// Arguments of `operon modules run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// Run until the queue is empty, then exit (1 when a task failed).
    #[arg(long, conflicts_with = "duration")]
    once: bool,
    /// How long to run; without it (and without --once) until interrupted.
    #[arg(long = "for", value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// A change to the local cluster once the startup tasks are done, as
    /// `added|modified|deleted:FILE` (repeatable, applied in order a second apart):
    /// a new ConfigMap or ModuleConfig, say.
    #[arg(long = "event")]
    events: Vec<String>,
    /// Change nothing: hooks change values in memory only (their kubernetes patches
    /// and ConfigMap writes are dropped), and each ModuleRun prints the diff it would
    /// apply.
    #[arg(long)]
    dry_run: bool,
}

/// Arguments naming one module.
#[derive(Debug, clap::Args)]
pub struct ModuleArgs {
    #[command(flatten)]
    common: Common,
    /// The module (its name or its values key).
    module: String,
    /// Skip the hooks: show the static and config values only. By default the startup
    /// tasks run first as a dry run (hooks change values in memory only, nothing is
    /// applied), so that values patched by hooks show.
    #[arg(long)]
    no_hooks: bool,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Arguments of `operon modules render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    #[command(flatten)]
    module: ModuleArgs,
    /// Compare with the cluster instead: objects to create, fields to change, objects
    /// the module's release has and the render lacks (deleted on apply). Changes
    /// nothing.
    #[arg(long)]
    diff: bool,
}

/// Runs `operon modules ...`.
pub fn run(cmd: ModulesCommand) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match cmd {
        ModulesCommand::Run(args) => runtime.block_on(run_queue(args)),
        ModulesCommand::Values(args) => runtime.block_on(values(args)),
        ModulesCommand::Render(args) => runtime.block_on(render(args)),
        ModulesCommand::Queue(args) => runtime.block_on(queue(args)),
        ModulesCommand::List(args) => runtime.block_on(list(args)),
    }
}

async fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let kubernetes = args
        .kubernetes_version
        .as_deref()
        .map(operon::addons::requirements::parse_version)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--kubernetes-version: {e}"))?;
    let target = target(&args.common).await?;
    let mut operator = operator(&args.common, &target, warn_of_refusals).await?;
    if let Some(version) = kubernetes {
        operator.set_kubernetes_version(version);
    }
    operator.set_dry_run(true);
    for (task, e) in operator.drain_until_discovered().await {
        eprintln!("warning: {task} failed: {e}");
    }
    let states = operator.module_states();
    // Where each module came from matters once some come from a registry; a directory
    // alone keeps addon-operator's four columns.
    let with_sources = !args.common.module_sources.is_empty();
    match args.output {
        Format::Table => {
            let rows: Vec<Vec<String>> = states
                .iter()
                .map(|m| {
                    let (state, reason) = match m.state.split_once(' ') {
                        Some((state, reason)) if !m.enabled => (state, reason),
                        _ => (m.state.as_str(), ""),
                    };
                    let mut row = vec![
                        m.name.clone(),
                        m.order.map_or_else(|| "-".to_owned(), |o| o.to_string()),
                        state.to_owned(),
                        reason.to_owned(),
                    ];
                    if with_sources {
                        row.push(m.source.clone());
                    }
                    row
                })
                .collect();
            let mut header = vec!["MODULE", "ORDER", "STATE", "REASON"];
            if with_sources {
                header.push("SOURCE");
            }
            print!("{}", output::table(&header, &rows));
        }
        other => output::print_structured(other, &states)?,
    }
    Ok(ExitCode::SUCCESS)
}

async fn queue(args: QueueArgs) -> anyhow::Result<ExitCode> {
    let answer = match operon::serve::debug::request(&args.debug_unix_socket, "/queue/main").await {
        Err(operon::serve::debug::DebugError::Answer(text)) if text.is_empty() => {
            bail!("this operon serve runs no modules (it has no --modules-dir)")
        }
        other => other?,
    };
    match args.output {
        Format::Table => {
            let status: QueueStatus = serde_json::from_value(answer)
                .context("the debug socket's answer is not a module queue")?;
            print!("{}", QueueView::text(&status));
        }
        other => output::print_structured(other, &answer)?,
    }
    Ok(ExitCode::SUCCESS)
}

struct Target {
    writer: ObjectWriter,
    local: Option<Arc<LocalCluster>>,
}

async fn target(common: &Common) -> anyhow::Result<Target> {
    if let Some(kubeconfig) = &common.kubeconfig {
        let options = KubeOptions {
            kubeconfig: Some(kubeconfig.clone()),
            // A convergence applies many objects at once: don't throttle to
            // shell-operator's 5 QPS.
            qps: 50.0,
            burst: 100,
            ..KubeOptions::default()
        };
        let cluster = KubeCluster::connect(&options)
            .await
            .with_context(|| format!("connecting with {}", kubeconfig.display()))?;
        let client = cluster.client().clone();
        let cluster: Arc<dyn Cluster> = Arc::new(cluster);
        return Ok(Target {
            writer: ObjectWriter::new(cluster, Some(client), &common.namespace),
            local: None,
        });
    }
    let local = Arc::new(LocalCluster::new());
    // As on a cluster where Operon is installed: ModuleConfigs among the fixtures are read.
    let crd = module_config_crd()?;
    local
        .load_yaml(&crd, "Operon's ModuleConfig CRD")
        .map_err(|problems| anyhow::anyhow!("{problems:?}"))?;
    for file in &common.objects {
        if let Err(problems) = local.load_file(file) {
            for p in &problems {
                eprintln!("error: {p}");
            }
            bail!("cannot load fixtures from {}", file.display());
        }
    }
    let cluster: Arc<dyn Cluster> = local.clone();
    Ok(Target {
        writer: ObjectWriter::new(cluster, None, &common.namespace),
        local: Some(local),
    })
}

/// The ModuleConfig CRD as YAML.
fn module_config_crd() -> anyhow::Result<String> {
    use kube::CustomResourceExt as _;
    Ok(yaml_serde::to_string(&operon::api::ModuleConfig::crd())?)
}

impl Common {
    /// Where modules were looked for, for messages.
    fn describe(&self) -> String {
        let mut places: Vec<String> = self
            .modules_dir
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        places.extend(self.module_sources.iter().cloned());
        places.join(", ")
    }
}

/// The module sources of `operon modules`: from any registry, with the credentials
/// of the docker config.json, unpacked into the user's cache.
fn cli_sources(common: &Common) -> anyhow::Result<Option<operon::addons::sources::ModuleSources>> {
    use operon::store::oci_modules::{AllowList, OciModuleError, OciModules};
    if common.module_sources.is_empty() {
        return Ok(None);
    }
    let cache = operon::sandbox::default_cache_dir()
        .and_then(|dir| dir.parent().map(|p| p.to_owned()))
        .unwrap_or_else(std::env::temp_dir);
    let blobs = operon::store::BlobStore::open(
        cache.join("oci-modules"),
        operon::store::DEFAULT_MAX_MODULE_BYTES,
    )
    .with_context(|| format!("the module store {}", cache.join("oci-modules").display()))?;
    let oci = common.verification.apply(OciModules::new(
        blobs,
        common.registry.options()?,
        AllowList::any(),
    ))?;
    let registry = common.registry.clone();
    let auth: operon::addons::sources::AuthFor = Arc::new(move |reference: String| {
        let auth = registry.auth(&reference).map_err(OciModuleError::Oci);
        Box::pin(std::future::ready(auth))
    });
    let sources = operon::addons::sources::ModuleSources::new(
        common
            .module_sources
            .iter()
            .map(|r| r.trim().to_owned())
            .collect(),
        operon::store::addon_modules::AddonModules::new(Arc::new(oci), cache.join("addon-modules")),
        auth,
    );
    sources.check()?;
    Ok(Some(sources))
}

fn settings(common: &Common) -> Settings {
    let config_map = match common.config_map.split_once('/') {
        Some((ns, name)) => ConfigMapRef {
            namespace: ns.to_owned(),
            name: name.to_owned(),
        },
        None => ConfigMapRef {
            namespace: common.namespace.clone(),
            name: common.config_map.clone(),
        },
    };
    Settings {
        modules_dir: common.modules_dir.clone().unwrap_or_default(),
        global_hooks_dir: common.global_hooks_dir.clone(),
        sources: None,
        config_map,
        renderer: Renderer {
            helm: common.helm_binary.clone(),
            namespace: common.namespace.clone(),
            timeout: common.hook_timeout,
        },
        hook_timeout: common.hook_timeout,
        retry_first: Duration::from_secs(5),
        retry_max: Duration::from_secs(32),
    }
}

async fn operator(
    common: &Common,
    target: &Target,
    on_event: impl Fn(&QueueEvent) + Send + Sync + 'static,
) -> anyhow::Result<Operator> {
    let sandbox = ScriptSandbox::with_this_binary(common.strict)?;
    let mut settings = settings(common);
    settings.sources = cli_sources(common)?;
    Ok(Operator::new(settings, sandbox, target.writer.clone(), on_event).await?)
}

fn print_event(event: &QueueEvent) {
    let now = jiff::Timestamp::now();
    match event {
        QueueEvent::Started { task, waiting } => {
            let rest: Vec<String> = waiting.iter().map(ToString::to_string).collect();
            println!("{now} queue: [{task}] {}", rest.join(" "));
        }
        QueueEvent::Finished {
            task,
            result,
            elapsed,
            retry_in,
        } => match result {
            Ok(summary) => println!("{now}   {task}: ok in {elapsed:.1?}: {summary}"),
            Err(e) => println!(
                "{now}   {task}: FAILED in {elapsed:.1?}: {e}; retry in {:?}",
                retry_in.unwrap_or_default()
            ),
        },
        QueueEvent::ConfigChanged { queued } => {
            let queued: Vec<String> = queued.iter().map(ToString::to_string).collect();
            println!("{now} ConfigMap changed: queued [{}]", queued.join(" "));
        }
        QueueEvent::ConvergedAfterChange { module, latency } => {
            println!("{now}   module {module} applied {latency:.1?} after the ConfigMap change");
        }
        QueueEvent::ValuesChanged { hook, queued } => {
            let queued: Vec<String> = queued.iter().map(ToString::to_string).collect();
            println!(
                "{now} hook {hook} changed values: queued [{}]",
                queued.join(" ")
            );
        }
        QueueEvent::PatchRejected { hook, reason } => {
            println!("{now} values patch of hook {hook} refused: {reason}");
        }
        QueueEvent::ConfigRejected { reason } => {
            println!("{now} ConfigMap change rejected, nothing queued: {reason}");
        }
        QueueEvent::ModuleConfigChanged { name, queued } => {
            let queued: Vec<String> = queued.iter().map(ToString::to_string).collect();
            println!(
                "{now} ModuleConfig {name} changed: queued [{}]",
                queued.join(" ")
            );
        }
        QueueEvent::ModuleConfigRefused { name, reason } => {
            println!("{now} ModuleConfig {name} refused, its module keeps what it had: {reason}");
        }
    }
}

/// What the commands that print modules' state say on stderr of the queue's events:
/// config values that are not taken.
fn warn_of_refusals(event: &QueueEvent) {
    match event {
        QueueEvent::ConfigRejected { reason } => {
            eprintln!("warning: the ConfigMap is not taken: {reason}");
        }
        QueueEvent::ModuleConfigRefused { name, reason } => {
            eprintln!("warning: ModuleConfig {name} is not taken: {reason}");
        }
        _ => {}
    }
}

async fn run_queue(args: RunArgs) -> anyhow::Result<ExitCode> {
    let target = target(&args.common).await?;
    let mut events = Vec::new();
    for text in &args.events {
        let (kind, file) = text
            .split_once(':')
            .with_context(|| format!("--event {text:?}: expected added|modified|deleted:FILE"))?;
        let kind = match kind {
            "added" => WatchEvent::Added,
            "modified" => WatchEvent::Modified,
            "deleted" => WatchEvent::Deleted,
            other => bail!("--event {text:?}: unknown event {other:?}"),
        };
        let content = std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?;
        for document in
            operon::addons::render::documents(&content, file).map_err(anyhow::Error::msg)?
        {
            events.push((kind, document));
        }
    }
    if !events.is_empty() && target.local.is_none() {
        bail!("--event changes the local cluster; with --kubeconfig change the API server instead");
    }
    let mut operator = operator(&args.common, &target, print_event).await?;
    operator.set_dry_run(args.dry_run);
    if args.once {
        let mut failed = operator.drain().await;
        for (kind, object) in events {
            if let Some(local) = &target.local {
                local.apply_watch_event(kind, object.clone())?;
            }
            if object["kind"] == "ModuleConfig" {
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                operator.module_config_changed(kind, name, &object);
            } else {
                operator.config_changed((kind != WatchEvent::Deleted).then_some(&object));
            }
            failed.extend(operator.drain().await);
        }
        print!(
            "{}{}",
            operator.metrics().text(),
            operator.hook_metrics().render_hooks()
        );
        return Ok(if failed.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let local = target.local.clone();
    let changes = async move {
        if let Some(local) = local {
            for (kind, object) in events {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if let Err(e) = local.apply_watch_event(kind, object) {
                    eprintln!("error: --event: {e}");
                }
            }
        }
    };
    let stop = async move {
        match args.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    let both = async {
        tokio::join!(changes, stop);
    };
    operator.run_until(both).await?;
    Ok(ExitCode::SUCCESS)
}

/// The startup tasks as a dry run, so that values show what hooks patch; failures
/// are warnings (the values are shown as far as they got).
async fn dry_startup(operator: &mut Operator, skip: bool) {
    if skip {
        return;
    }
    operator.set_dry_run(true);
    for (task, e) in operator.drain().await {
        eprintln!("warning: {task} failed: {e}");
    }
}

async fn values(args: ModuleArgs) -> anyhow::Result<ExitCode> {
    let target = target(&args.common).await?;
    let mut operator = operator(&args.common, &target, warn_of_refusals).await?;
    let module = operator
        .layout()
        .module(&args.module)
        .map(|m| m.name.clone())
        .with_context(|| format!("no module {} in {}", args.module, args.common.describe()))?;
    dry_startup(&mut operator, args.no_hooks).await;
    let computed = operator.module_values(&module)?;
    let key = operator
        .layout()
        .module(&module)
        .map(|m| m.values_key.clone())
        .unwrap_or_default();
    let sources: Vec<Value> = computed
        .sources
        .iter()
        .map(|(pointer, source)| {
            json!({"path": dotted(&key, pointer), "value": computed.values.pointer(pointer),
                   "source": source.to_string()})
        })
        .collect();
    match args.output {
        Format::Table => {
            print!(
                "{}",
                yaml_serde::to_string(&json!({(key.clone()): computed.values}))?
            );
            println!();
            let rows: Vec<Vec<String>> = sources
                .iter()
                .map(|s| {
                    vec![
                        s["path"].as_str().unwrap_or_default().to_owned(),
                        s["value"].to_string(),
                        s["source"].as_str().unwrap_or_default().to_owned(),
                    ]
                })
                .collect();
            print!("{}", output::table(&["PATH", "VALUE", "SOURCE"], &rows));
        }
        other => output::print_structured(
            other,
            &json!({"module": module, "values": {(key): computed.values}, "sources": sources}),
        )?,
    }
    Ok(ExitCode::SUCCESS)
}

async fn render(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let common = &args.module.common;
    let target = target(common).await?;
    let mut operator = operator(common, &target, |_| {}).await?;
    let module = operator
        .layout()
        .module(&args.module.module)
        .cloned()
        .with_context(|| format!("no module {} in {}", args.module.module, common.describe()))?;
    dry_startup(&mut operator, args.module.no_hooks).await;
    operator.check_for_helm(&module.name)?;
    let document = operator.values_document(&module.name)?;
    let objects = settings(common).renderer.render(&module, &document).await?;
    if args.diff {
        for line in target.writer.diff(&module.name, objects).await? {
            println!("{line}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let prepared = target.writer.prepare(&module.name, objects).await?;
    let objects: Vec<&Value> = prepared.iter().map(|(_, o)| o).collect();
    match args.module.output {
        Format::Json => output::print_structured(Format::Json, &objects)?,
        _ => {
            for object in objects {
                print!("---\n{}", yaml_serde::to_string(object)?);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
