//! `operon run`, `operon validate` and `operon graph`: diagnosis pipelines from YAML
//! files, with no cluster.

use super::op::key_value;
use super::output::{self, Format};
use anyhow::{Context as _, bail};
use operon::api::{
    Diagnosis, DiagnosisPhase, DiagnosisSpec, NodePhase, NodeRecord, OperationSet, Problem,
};
use operon::cluster::kube::{KubeCluster, KubeOptions};
use operon::graph;
use operon::manifest::{self, Manifests};
use operon::pipeline::{self, CheckpointFile, CheckpointFuture, PlanError, Progress};
use operon::runner::offload::OffloadTarget;
use operon::runner::processors::{ProcessorSettings, Processors};
use operon::sandbox::{self, ModuleDigest};
use operon::store::oci;
use operon::store::oci_modules::{AllowList, OciModuleError, OciModules, pin_operations};
use operon::store::{BlobStore, DEFAULT_MAX_MODULE_BYTES, ModuleLocator};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Arguments of `operon run`.
#[derive(Debug, clap::Args)]
pub struct DiagnoseArgs {
    /// YAML files or directories holding Operations, OperationSets and Diagnoses.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The Diagnosis to run (needed when the files hold several).
    #[arg(long, conflicts_with = "operation_set")]
    diagnosis: Option<String>,
    /// Run this OperationSet in a Diagnosis made from the command line.
    #[arg(long)]
    operation_set: Option<String>,
    /// A parameter, as KEY=VALUE (repeatable); overrides the Diagnosis' own.
    #[arg(long = "param", short = 'p', value_parser = key_value)]
    params: Vec<(String, String)>,
    /// The node the Diagnosis is about (for `--operation-set`, or to override).
    #[arg(long)]
    node: Option<String>,
    /// Persist the Diagnosis after every node to this file, and resume from it when it
    /// already holds a started run of the same Diagnosis.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Directory of wasm modules named `<name>.wasm`, for `wasm.module` names and digests.
    #[arg(long)]
    modules: Option<PathBuf>,
    /// Where compiled modules are cached [default: $XDG_CACHE_HOME/operon/modules].
    #[arg(long, env = "OPERON_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Refuse to run a script step when any sandbox protection is unavailable.
    #[arg(long)]
    strict: bool,
    /// The node's filesystem is mounted here (a node's disk, a copy of its logs): the
    /// paths steps declare read-only are looked up under it, and script steps find it
    /// in `OPERON_NODE_ROOT` [default: this machine's /].
    #[arg(long)]
    node_root: Option<PathBuf>,
    /// Walk the pipeline without side effects: wasm and script steps run in their
    /// sandboxes (patches recorded, not applied; scripts without network), job,
    /// argoWorkflow and httpServer steps print what they would do.
    #[arg(long)]
    dry_run: bool,
    /// With --dry-run: the engine's image, to show the Jobs `wasm.runOn: Job` steps
    /// would run in (`operon run` itself creates no Job).
    #[arg(long, requires = "dry_run")]
    image: Option<String>,
    /// With --dry-run and --image: the module API those Jobs would fetch modules from.
    #[arg(
        long,
        requires = "image",
        default_value = "https://operon-webhooks.operon.svc:443"
    )]
    offload_module_url: String,
    /// Output format of the final status.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// How `oci://` modules are pulled (any registry: the files are yours).
    #[command(flatten)]
    registry: super::module_oci::RegistryArgs,
    #[command(flatten)]
    verification: super::module_oci::VerificationArgs,
}

/// Arguments of `operon validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// YAML files or directories.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// Graph picture formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    /// Graphviz.
    Dot,
    /// Mermaid flowchart.
    Mermaid,
}

/// Arguments of `operon graph`.
#[derive(Debug, clap::Args)]
pub struct GraphArgs {
    /// YAML files or directories holding the OperationSet (and optionally a Diagnosis
    /// with a status, e.g. the output of `operon run -o yaml`).
    #[arg(required_unless_present = "cluster", conflicts_with = "cluster")]
    paths: Vec<PathBuf>,
    /// The OperationSet to draw [with `--cluster`: the Diagnosis' own].
    #[arg(long, required_unless_present = "cluster")]
    operation_set: Option<String>,
    /// Colour nodes with the outcomes recorded in this Diagnosis' status (a Diagnosis
    /// in the given files, or with `--cluster` a live one).
    #[arg(long, conflicts_with = "status")]
    diagnosis: Option<String>,
    /// Read the Diagnosis and its OperationSet from the cluster of the kubeconfig.
    #[arg(long, requires = "diagnosis")]
    cluster: bool,
    /// The Diagnosis' namespace [default: the kubeconfig context's].
    #[arg(long, short = 'n', requires = "cluster")]
    namespace: Option<String>,
    /// A kubeconfig file [default: $KUBECONFIG, then ~/.kube/config].
    #[arg(long, requires = "cluster")]
    kubeconfig: Option<PathBuf>,
    /// A kubeconfig context other than the current one.
    #[arg(long, requires = "cluster")]
    context: Option<String>,
    /// Colour nodes with the outcomes of a finished run: a file holding one Diagnosis
    /// with its status, e.g. saved from `operon run -o yaml` or `--checkpoint`.
    #[arg(long)]
    status: Option<PathBuf>,
    /// Picture format.
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    format: GraphFormat,
}

fn print_problems(problems: &[Problem]) {
    for p in problems {
        if p.field.is_empty() {
            eprintln!("error: {}: {}", p.object, p.reason);
        } else {
            eprintln!("error: {}: {}: {}", p.object, p.field, p.reason);
        }
    }
}

/// Runs `operon validate`.
pub fn validate(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let (manifests, mut problems) = manifest::load(&args.paths);
    problems.extend(manifests.validate());
    let count = manifests.len();
    if problems.is_empty() {
        println!("{count} objects are valid");
        for set in manifests.operation_sets.values() {
            if let Ok(g) = graph::validate(&set.object, |_| true) {
                println!(
                    "  {}: {} nodes, {} paths",
                    set.object.object_ref(),
                    g.len(),
                    g.path_count()
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    } else {
        print_problems(&problems);
        eprintln!("{} problems in {count} objects", problems.len());
        Ok(ExitCode::FAILURE)
    }
}

/// Runs `operon graph`.
pub fn draw(args: GraphArgs) -> anyhow::Result<ExitCode> {
    if args.cluster {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (set, diagnosis) = runtime.block_on(live(&args))?;
        print!("{}", picture(&set, Some(diagnosis), args.format));
        return Ok(ExitCode::SUCCESS);
    }
    let (manifests, problems) = manifest::load(&args.paths);
    let wanted = args.operation_set.clone().unwrap_or_default();
    let Some(set) = manifests.operation_sets.get(&wanted) else {
        print_problems(&problems);
        bail!(
            "no OperationSet {wanted:?} in the given files (found: {})",
            names(manifests.operation_sets.keys())
        );
    };
    let diagnosis = match (&args.diagnosis, &args.status) {
        (Some(name), _) => Some(
            manifests
                .diagnoses
                .get(name)
                .with_context(|| format!("no Diagnosis {name:?} in the given files"))?
                .object
                .clone(),
        ),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            Some(
                yaml_serde::from_str::<Diagnosis>(&text)
                    .with_context(|| format!("{} does not hold a Diagnosis", path.display()))?,
            )
        }
        (None, None) => None,
    };
    print!("{}", picture(&set.object, diagnosis, args.format));
    Ok(ExitCode::SUCCESS)
}

/// A live Diagnosis and the OperationSet it runs, read from the cluster.
async fn live(args: &GraphArgs) -> anyhow::Result<(OperationSet, Diagnosis)> {
    use kube::Api;
    let options = KubeOptions {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        ..KubeOptions::default()
    };
    let cluster = KubeCluster::connect(&options)
        .await
        .context("connecting to the Kubernetes API server")?;
    let client = cluster.client().clone();
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let name = args.diagnosis.clone().unwrap_or_default();
    let diagnosis = Api::<Diagnosis>::namespaced(client.clone(), &namespace)
        .get(&name)
        .await
        .with_context(|| format!("reading Diagnosis {namespace}/{name}"))?;
    let set_name = args
        .operation_set
        .clone()
        .unwrap_or_else(|| diagnosis.spec.operation_set.clone());
    let set = Api::<OperationSet>::all(client)
        .get(&set_name)
        .await
        .with_context(|| format!("reading OperationSet {set_name}"))?;
    Ok((set, diagnosis))
}

/// `set` drawn in `format`, its nodes coloured with `diagnosis`' outcomes.
fn picture(set: &OperationSet, diagnosis: Option<Diagnosis>, format: GraphFormat) -> String {
    let (outcomes, path) = match diagnosis {
        None => (BTreeMap::new(), Vec::new()),
        Some(d) => {
            let status = d.status.unwrap_or_default();
            let outcomes = status.nodes.iter().map(|r| (r.id, r.phase)).collect();
            let path = status.succeeded_path.iter().map(|p| p.id).collect();
            (outcomes, path)
        }
    };
    match format {
        GraphFormat::Dot => graph::to_dot(set, &outcomes, &path),
        GraphFormat::Mermaid => graph::to_mermaid(set, &outcomes, &path),
    }
}

fn names<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    let all: Vec<&str> = keys.map(String::as_str).collect();
    if all.is_empty() {
        "none".to_owned()
    } else {
        all.join(", ")
    }
}

/// Prints progress on stderr and persists checkpoints.
struct Console {
    checkpoint: Option<CheckpointFile>,
    started: Instant,
}

impl Progress for Console {
    type Error = pipeline::CheckpointError;

    fn node_started(&mut self, id: usize, operation: &str) {
        eprintln!("  … node {id} {operation}");
    }

    fn node_finished(&mut self, record: &NodeRecord) {
        match record.phase {
            NodePhase::Succeeded => eprintln!(
                "  ✓ node {} {} ({} ms){}",
                record.id,
                record.operation,
                record.duration_millis,
                record
                    .dry_run
                    .as_ref()
                    .map(|d| format!(": {}", d.action))
                    .unwrap_or_default()
            ),
            NodePhase::Failed => eprintln!(
                "  ✗ node {} {} ({} ms): {}",
                record.id,
                record.operation,
                record.duration_millis,
                first_line(record.error.as_deref().unwrap_or(""))
            ),
        }
    }

    fn checkpoint<'a>(&'a mut self, diagnosis: &'a Diagnosis) -> CheckpointFuture<'a> {
        let saved = match &self.checkpoint {
            Some(file) => file.save(diagnosis),
            None => Ok(()),
        };
        Box::pin(std::future::ready(saved))
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// Picks the Diagnosis to run: named, made from `--operation-set`, the only one, or
/// resumed from the checkpoint file.
fn pick_diagnosis(manifests: &Manifests, args: &DiagnoseArgs) -> anyhow::Result<Diagnosis> {
    let mut diagnosis = if let Some(set) = &args.operation_set {
        let mut d = Diagnosis::new(
            &format!("local-{set}"),
            DiagnosisSpec {
                operation_set: set.clone(),
                node_name: None,
                pod_reference: None,
                parameters: BTreeMap::new(),
                service_account_name: None,
                dry_run: false,
                ..Default::default()
            },
        );
        d.metadata.namespace = Some("default".to_owned());
        d
    } else if let Some(name) = &args.diagnosis {
        manifests
            .diagnoses
            .get(name)
            .map(|d| d.object.clone())
            .with_context(|| {
                format!(
                    "no Diagnosis {name:?} in the given files (found: {})",
                    names(manifests.diagnoses.keys())
                )
            })?
    } else {
        match manifests.diagnoses.len() {
            1 => manifests
                .diagnoses
                .values()
                .next()
                .map(|d| d.object.clone())
                .unwrap_or_else(|| unreachable!()),
            0 => bail!("the files hold no Diagnosis: pass --operation-set NAME to run one"),
            _ => bail!(
                "the files hold several Diagnoses ({}): pick one with --diagnosis NAME",
                names(manifests.diagnoses.keys())
            ),
        }
    };
    diagnosis
        .spec
        .parameters
        .extend(args.params.iter().cloned());
    if args.node.is_some() {
        diagnosis.spec.node_name = args.node.clone();
    }
    diagnosis.spec.dry_run |= args.dry_run;
    if diagnosis.metadata.uid.is_none() {
        // A local run has no API server to assign one; derive a stable one so that
        // results keyed by uid are reproducible.
        let name = diagnosis.metadata.name.clone().unwrap_or_default();
        diagnosis.metadata.uid = Some(format!(
            "local-{}",
            &ModuleDigest::of(name.as_bytes()).to_string()[7..19]
        ));
    }
    if let Some(path) = &args.checkpoint
        && let Some(saved) = CheckpointFile::new(path).resume(&diagnosis)?
    {
        eprintln!("resuming {} from {}", saved.object_ref(), path.display());
        diagnosis = saved;
    }
    Ok(diagnosis)
}

/// Runs `operon run`.
pub fn run(args: DiagnoseArgs) -> anyhow::Result<ExitCode> {
    // Refused even when no step names an oci:// module: the flag says what is wanted.
    args.verification.load()?;
    if let Some(root) = &args.node_root {
        anyhow::ensure!(
            root.is_dir(),
            "--node-root {} is not a directory",
            root.display()
        );
    }
    let (mut manifests, load_problems) = manifest::load(&args.paths);
    let mut diagnosis = pick_diagnosis(&manifests, &args)?;
    let set_name = diagnosis.spec.operation_set.clone();
    let Some(set) = manifests.operation_sets.get(&set_name) else {
        print_problems(&load_problems);
        bail!(
            "{}: OperationSet {set_name:?} is not in the given files (found: {})",
            diagnosis.object_ref(),
            names(manifests.operation_sets.keys())
        );
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let cache_dir = args.cache_dir.clone().or_else(sandbox::default_cache_dir);
    let mut modules = ModuleLocator::new(args.modules.clone());
    if let Some(oci) = pull_oci_modules(
        &args,
        &mut manifests.operations,
        cache_dir.as_deref(),
        &runtime,
    )? {
        modules = modules.with_oci(oci);
    }
    // Problems of objects this run does not use are not worth refusing the run for.
    let processors = Processors::new(ProcessorSettings {
        cache_dir,
        strict: args.strict,
        modules,
        node_root: operon::runner::node_paths::NodeRoot::new(args.node_root.clone()),
        ..ProcessorSettings::default()
    });
    if let Some(image) = &args.image {
        // Only rendered, never run: the CA the pods would trust is the cluster's.
        processors.set_offload(OffloadTarget {
            image: image.clone(),
            module_url: args.offload_module_url.clone(),
            server_name: None,
            ca: tokio::sync::watch::channel(Vec::new()).1,
            catalog: None,
        });
    }
    let plan = match pipeline::plan(&set.object, &manifests, &processors) {
        Ok(plan) => plan,
        Err(e) => {
            if matches!(e, PlanError::InvalidGraph { .. }) {
                print_problems(&load_problems);
            }
            print_problems(e.problems());
            return Err(e.into());
        }
    };
    let graph = &plan.graph;

    eprintln!(
        "running {} ({}, {} nodes, {} paths)",
        diagnosis.object_ref(),
        set.object.object_ref(),
        graph.len(),
        graph.path_count()
    );
    let mut console = Console {
        checkpoint: args.checkpoint.as_ref().map(CheckpointFile::new),
        started: Instant::now(),
    };
    let phase = runtime.block_on(pipeline::execute(
        &mut diagnosis,
        graph,
        &plan.steps,
        &mut console,
    ))?;
    let elapsed = console.started.elapsed();
    match args.output {
        Format::Table => print_status(&diagnosis, elapsed),
        other => output::print_structured(other, &diagnosis)?,
    }
    Ok(if phase == DiagnosisPhase::Succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Pulls the `oci://` modules of the Operations `operon run` may run (into
/// `<cache>/oci-modules`, with the docker config.json's credentials) and pins them:
/// each such Operation names its module by digest from here on. `None` when no
/// Operation names one.
fn pull_oci_modules(
    args: &DiagnoseArgs,
    operations: &mut std::collections::BTreeMap<String, manifest::Loaded<operon::api::Operation>>,
    cache_dir: Option<&std::path::Path>,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<Option<std::sync::Arc<OciModules>>> {
    let named = operations.values().any(|op| {
        op.object
            .spec
            .processor
            .wasm
            .as_ref()
            .is_some_and(|wasm| oci::is_oci(&wasm.module))
    });
    if !named {
        return Ok(None);
    }
    let root = match cache_dir {
        Some(dir) => dir.join("oci-modules"),
        None => std::env::temp_dir().join(format!("operon-oci-modules-{}", std::process::id())),
    };
    let blobs = BlobStore::open(&root, DEFAULT_MAX_MODULE_BYTES)
        .with_context(|| format!("the module store {}", root.display()))?;
    let oci = args.verification.apply(OciModules::new(
        blobs,
        args.registry.options()?,
        AllowList::any(),
    ))?;
    let mut pins = std::collections::BTreeMap::new();
    let started = Instant::now();
    runtime.block_on(pin_operations(
        &oci,
        operations.values_mut().map(|op| &mut op.object),
        &mut pins,
        |_, reference| {
            std::future::ready(args.registry.auth(&reference).map_err(OciModuleError::Oci))
        },
    ))?;
    for (operation, pinned) in &pins {
        eprintln!(
            "Operation {operation}: module pinned to {pinned} ({:.2}s)",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(Some(std::sync::Arc::new(oci)))
}

/// One line of a value for a table cell; multi-line values say how long they are.
fn cell(value: &str) -> String {
    let lines = value.lines().count();
    let first: String = first_line(value).chars().take(60).collect();
    let cut = first.len() < first_line(value).len();
    match (lines > 1, cut) {
        (true, _) => format!("{first} … ({lines} lines)"),
        (false, true) => format!("{first} …"),
        (false, false) => first,
    }
}

fn print_status(diagnosis: &Diagnosis, elapsed: Duration) {
    let status = diagnosis.status.clone().unwrap_or_default();
    let phase = status
        .phase
        .map_or("Unknown".to_owned(), |p| format!("{p:?}"));
    println!(
        "\n{}: {phase} in {} ms",
        diagnosis.object_ref(),
        elapsed.as_millis()
    );
    if !status.succeeded_path.is_empty() {
        let path: Vec<String> = status
            .succeeded_path
            .iter()
            .map(|p| format!("{} {}", p.id, p.operation))
            .collect();
        println!("succeeded path: {}", path.join(" → "));
    }
    for c in &status.conditions {
        if c.type_ == pipeline::COMPLETE && status.phase != Some(DiagnosisPhase::Succeeded) {
            println!("reason: {} ({})", c.reason, c.message);
        }
    }
    let rows: Vec<Vec<String>> = status
        .nodes
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                r.operation.clone(),
                format!("{:?}", r.phase),
                format!("{} ms", r.duration_millis),
                format!("{} B", r.output_size),
                cell(r.error.as_deref().unwrap_or("")),
            ]
        })
        .collect();
    if !rows.is_empty() {
        print!(
            "\n{}",
            output::table(
                &["NODE", "OPERATION", "PHASE", "DURATION", "OUTPUT", "ERROR"],
                &rows
            )
        );
    }
    if diagnosis.spec.dry_run {
        println!("\ndry run: nothing outside the sandboxes changed");
        for r in &status.nodes {
            if let Some(d) = &r.dry_run {
                println!("  node {} {}: {}", r.id, r.operation, d.action);
                if let Some(detail) = &d.detail {
                    for line in detail.lines() {
                        println!("      {line}");
                    }
                }
            }
        }
    }
    if !status.failed_paths.is_empty() {
        println!("\nfailed paths:");
        for f in &status.failed_paths {
            let ids: Vec<String> = f.nodes.iter().map(i64::to_string).collect();
            println!("  {}: {}", ids.join(" → "), cell(&f.reason));
        }
        if status.failed_paths_omitted > 0 {
            println!("  … and {} more", status.failed_paths_omitted);
        }
    }
    if !status.operation_results.is_empty() {
        let rows: Vec<Vec<String>> = status
            .operation_results
            .iter()
            .map(|(k, v)| vec![k.clone(), cell(v)])
            .collect();
        print!("\n{}", output::table(&["RESULT", "VALUE"], &rows));
    }
}
