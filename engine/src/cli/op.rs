//! `operon op ...`: run one operation component locally, with no cluster; or, as the
//! container of an offloaded wasm step (`wasm.runOn: Job`), a module fetched by digest
//! from the module API of `operon serve`, with the step's input and runner context
//! read from the files the Job runner mounts and its results written as the
//! container's termination message.

use super::output::{self, Format};
use anyhow::Context as _;
use operon::model::MetricOperation;
use operon::model::PatchOperation;
use operon::model::{LogRecord, OperationInput, OwnerReference};
use operon::runner::context::RunContext;
use operon::sandbox::{self, CallLimits, ModuleDigest, Sandbox, SandboxConfig};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Subcommands of `operon op`.
#[derive(Debug, clap::Subcommand)]
pub enum OpCommand {
    /// Run an operation's `run` export once in the sandbox and print its results.
    Run(Box<OpRunArgs>),
}

/// Arguments of `operon op run`.
#[derive(Debug, clap::Args)]
pub struct OpRunArgs {
    /// The operation component (a `.wasm` built for wasm32-wasip2).
    #[arg(required_unless_present = "digest", conflicts_with = "digest")]
    module: Option<PathBuf>,
    /// Run the module with this digest (`sha256:<hex>`), fetched from --module-url;
    /// bytes of any other digest are refused.
    #[arg(long, requires_all = ["module_url", "module_ca"], value_parser = parse_digest)]
    digest: Option<ModuleDigest>,
    #[command(flatten)]
    module_api: ModuleApiArgs,
    /// A JSON object of strings: the parameters, overlaying --param (an offloaded
    /// step's `input.json`).
    #[arg(long)]
    input_file: Option<PathBuf>,
    /// A JSON object of strings: the earlier results, overlaying --result.
    #[arg(long)]
    results_file: Option<PathBuf>,
    /// The runner context as a Job step gets it (`context.json`: name, dryRun, timeout,
    /// platform); --name, --node, --namespace, --dry-run and --timeout override it.
    #[arg(long)]
    context_file: Option<PathBuf>,
    /// Write the results (a JSON object) to this file, or the error when the run
    /// fails: a Job step's termination message, at most 4096 bytes.
    #[arg(long)]
    result_file: Option<PathBuf>,
    /// A parameter passed to the operation, as KEY=VALUE (repeatable).
    #[arg(long = "param", short = 'p', value_parser = key_value)]
    params: Vec<(String, String)>,
    /// A result of an earlier operation, as KEY=VALUE (repeatable); results also
    /// overlay parameters of the same name, as in a Diagnosis.
    #[arg(long = "result", short = 'r', value_parser = key_value)]
    results: Vec<(String, String)>,
    /// A positional argument (repeatable), as resolved from an Operation's argKeys.
    #[arg(long = "arg")]
    args: Vec<String>,
    /// Wall-clock limit of the run, e.g. `500ms`, `5s`, `2m` [default: the context
    /// file's, else 30s].
    #[arg(long, value_parser = humantime::parse_duration)]
    timeout: Option<Duration>,
    /// Memory limit of the run, e.g. `64MiB`.
    #[arg(long, default_value = "64MiB")]
    memory: bytesize::ByteSize,
    /// The run's name, passed to the guest in its runner context.
    #[arg(long)]
    name: Option<String>,
    /// The node the run is about, passed in the runner context.
    #[arg(long)]
    node: Option<String>,
    /// The namespace the run belongs to, passed in the runner context.
    #[arg(long)]
    namespace: Option<String>,
    /// Tell the guest not to change anything.
    #[arg(long)]
    dry_run: bool,
    /// Where compiled modules are cached [default: $XDG_CACHE_HOME/operon/modules].
    #[arg(long, env = "OPERON_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile the module even if a cached artifact exists, and cache nothing.
    #[arg(long)]
    no_cache: bool,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Where a module is fetched by digest: the module API of `operon serve`.
#[derive(Debug, clap::Args)]
pub struct ModuleApiArgs {
    /// The module API to fetch --digest from, e.g. `https://operon-webhooks.operon.svc`.
    #[arg(long)]
    module_url: Option<String>,
    /// The name the module API's certificate is checked against [default: the URL's
    /// host].
    #[arg(long)]
    module_server_name: Option<String>,
    /// The CA (PEM) of the module API's certificate.
    #[arg(long)]
    module_ca: Option<PathBuf>,
    /// The bearer token sent to the module API, re-read at the fetch.
    #[arg(long, default_value = operon::runner::offload::TOKEN_FILE)]
    token_file: PathBuf,
}

impl ModuleApiArgs {
    /// The bytes of `digest` from the module API, checked against the digest.
    pub async fn fetch(&self, digest: &ModuleDigest) -> anyhow::Result<Vec<u8>> {
        use operon::store::fetch::{Fetcher, Token};
        let (Some(url), Some(ca)) = (&self.module_url, &self.module_ca) else {
            anyhow::bail!("--digest needs --module-url and --module-ca");
        };
        let pem = std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?;
        let fetcher = Fetcher::new(&pem, ca.clone(), Token::File(self.token_file.clone()))?;
        // The fetcher keeps only bytes whose sha256 is the digest, in a store of its
        // own that lives as long as this run.
        let dir = tempfile::tempdir().context("creating a directory for the module")?;
        let store =
            operon::store::BlobStore::open(dir.path(), operon::store::DEFAULT_MAX_MODULE_BYTES)?;
        let source = operon::api::ModuleSource {
            replica: String::new(),
            url: url.clone(),
            server_name: self.module_server_name.clone(),
            digest: digest.to_string(),
        };
        fetcher.fetch(&source, digest, &store).await?;
        store
            .get(digest)?
            .ok_or_else(|| anyhow::anyhow!("module {digest} went missing after its fetch"))
    }
}

/// Parses `KEY=VALUE` (the value may contain `=`).
pub fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

pub(super) fn parse_digest(text: &str) -> Result<ModuleDigest, String> {
    ModuleDigest::parse(text)
        .ok_or_else(|| format!("{text:?} is not a digest: expected sha256:<64 hex digits>"))
}

/// Runs `operon op ...`.
pub fn run(cmd: OpCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        OpCommand::Run(args) => run_once(*args),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RunSummary<'a> {
    module: String,
    digest: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorSummary>,
    elapsed_ms: f64,
    context: ContextSummary<'a>,
    results: BTreeMap<&'a str, &'a str>,
    output: &'a str,
    logs: &'a [LogRecord],
    patches: &'a [PatchOperation],
    metrics: &'a [MetricOperation],
    stdout: &'a str,
    stderr: &'a str,
}

/// The runner context the guest got.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ContextSummary<'a> {
    name: &'a str,
    dry_run: bool,
    timeout_ms: u64,
    node: Option<&'a str>,
    namespace: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a OwnerReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<&'a str>,
}

#[derive(Serialize)]
struct ErrorSummary {
    kind: &'static str,
    message: String,
}

/// The sandbox of a one-shot run of `memory` bytes: a single slot, sized for it;
/// compiled modules cached in `cache_dir` (or the default) unless `no_cache`.
pub(super) fn one_shot(memory: u64, cache_dir: Option<&Path>, no_cache: bool) -> SandboxConfig {
    let defaults = SandboxConfig::default();
    SandboxConfig {
        max_concurrent_calls: 1,
        max_memory_bytes: defaults.max_memory_bytes.max(memory),
        cache_dir: match no_cache {
            true => None,
            false => cache_dir
                .map(Path::to_owned)
                .or_else(sandbox::default_cache_dir),
        },
        ..defaults
    }
}

fn run_once(args: OpRunArgs) -> anyhow::Result<ExitCode> {
    let config = one_shot(
        args.memory.as_u64(),
        args.cache_dir.as_deref(),
        args.no_cache,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let prepared = prepare(&args, config, &runtime);
    let (sandbox, module, source, input, limits) = match prepared {
        Ok(prepared) => prepared,
        // The Job runner reports the termination message's last line as the step's
        // error: a fetch or load failure must reach it too.
        Err(e) => {
            if let Some(path) = &args.result_file {
                write_result_file(path, &format!("error: {}", super::error_text(&e)))?;
            }
            return Err(e);
        }
    };
    let context = input.context.clone();
    let report = runtime.block_on(sandbox.run_operation(&module, input, &limits));

    let (results, output_text) = match &report.outcome {
        // Later keys win, as the contract says.
        Ok(out) => (
            out.results
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
            out.output.as_str(),
        ),
        Err(_) => (BTreeMap::new(), ""),
    };
    let summary = RunSummary {
        module: source,
        digest: module.digest().to_string(),
        status: if report.outcome.is_ok() {
            "Succeeded"
        } else {
            "Failed"
        },
        error: report.outcome.as_ref().err().map(|e| ErrorSummary {
            kind: e.kind(),
            message: e.to_string(),
        }),
        elapsed_ms: report.elapsed.as_secs_f64() * 1e3,
        context: ContextSummary {
            name: &context.name,
            dry_run: context.dry_run,
            timeout_ms: context.timeout_ms,
            node: context.node.as_deref(),
            namespace: context.namespace.as_deref(),
            owner: context.owner.as_ref(),
            cluster: context.cluster.as_deref(),
        },
        results,
        output: output_text,
        logs: &report.logs,
        patches: &report.patches,
        metrics: &report.metrics,
        stdout: &report.stdout,
        stderr: &report.stderr,
    };
    match args.output {
        Format::Table => print_table(&summary),
        other => output::print_structured(other, &summary)?,
    }
    if let Some(path) = &args.result_file {
        let text = match &report.outcome {
            Ok(_) => result_message(&summary.results),
            Err(e) => Err(format!("error: operation {} failed: {e}", summary.module)),
        };
        match text {
            Ok(text) => write_result_file(path, &text)?,
            Err(message) => {
                write_result_file(path, &message)?;
                if report.outcome.is_ok() {
                    eprintln!("{message}");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
    }
    Ok(match &report.outcome {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: operation {} failed: {e}", summary.module);
            ExitCode::FAILURE
        }
    })
}

/// The module, its description for the report, the input and the limits of a run.
type Prepared = (
    Sandbox,
    operon::sandbox::OperationModule,
    String,
    OperationInput,
    CallLimits,
);

/// Loads the module (from its file or, by digest, from the module API) and builds
/// the input from the flags and the files.
fn prepare(
    args: &OpRunArgs,
    config: SandboxConfig,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<Prepared> {
    let sandbox = Sandbox::new(config)?;
    let (module, source) = match (&args.module, &args.digest) {
        (Some(path), _) => (
            sandbox
                .load_operation_file(path)
                .with_context(|| format!("cannot load {}", path.display()))?,
            path.display().to_string(),
        ),
        (None, Some(digest)) => {
            let bytes = runtime.block_on(args.module_api.fetch(digest))?;
            let module = sandbox
                .load_operation(&digest.to_string(), &bytes)
                .with_context(|| format!("cannot load module {digest}"))?;
            (module, digest.to_string())
        }
        (None, None) => anyhow::bail!("name a module file or --digest"),
    };
    let context =
        match &args.context_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                Some(RunContext::from_json(&text).map_err(|e| {
                    anyhow::anyhow!("{}: not a runner context: {e}", path.display())
                })?)
            }
            None => None,
        };
    let timeout = args
        .timeout
        .or(context.as_ref().map(|c| c.timeout))
        .unwrap_or(Duration::from_secs(30));
    let mut context = context.unwrap_or_else(|| RunContext {
        name: String::new(),
        dry_run: false,
        timeout,
        node: None,
        namespace: None,
        owner: None,
        platform: Default::default(),
        traceparent: None,
    });
    context.timeout = timeout;
    context.dry_run |= args.dry_run;
    if let Some(name) = &args.name {
        context.name = name.clone();
    }
    if context.name.is_empty() {
        context.name = match &args.module {
            Some(path) => module_name(path),
            None => "operation".to_owned(),
        };
    }
    if args.node.is_some() {
        context.node = args.node.clone();
    }
    if args.namespace.is_some() {
        context.namespace = args.namespace.clone();
    }
    let mut parameters: BTreeMap<String, String> = args.params.iter().cloned().collect();
    let mut results: BTreeMap<String, String> = args.results.iter().cloned().collect();
    if let Some(path) = &args.results_file {
        results.extend(string_map(path)?);
    }
    parameters.extend(results.clone());
    if let Some(path) = &args.input_file {
        parameters.extend(string_map(path)?);
    }
    let input = OperationInput {
        context: context.wasm(),
        parameters,
        results,
        args: args.args.clone(),
    };
    let limits = CallLimits {
        timeout,
        memory_bytes: args.memory.as_u64(),
        ..CallLimits::default()
    };
    Ok((sandbox, module, source, input, limits))
}

/// A JSON object of strings from `path`.
fn string_map(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{}: expected a JSON object of strings", path.display()))
}

/// The termination message of a successful run: its results as a JSON object, or why
/// they do not fit.
fn result_message(results: &BTreeMap<&str, &str>) -> Result<String, String> {
    let text = serde_json::to_string(results).unwrap_or_default();
    let bound = operon::runner::job::MAX_TERMINATION_MESSAGE;
    if text.len() > bound {
        return Err(format!(
            "error: the results are {} bytes as JSON, more than a termination message holds ({bound}); return fewer or shorter results",
            text.len()
        ));
    }
    Ok(text)
}

fn write_result_file(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn module_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "operation".to_owned())
}

fn print_table(s: &RunSummary<'_>) {
    println!("module   {}", s.module);
    println!("digest   {}", s.digest);
    println!("status   {} in {:.2} ms", s.status, s.elapsed_ms);
    let c = &s.context;
    println!(
        "context  name={} dryRun={} timeout={}ms node={} namespace={} cluster={}",
        c.name,
        c.dry_run,
        c.timeout_ms,
        c.node.unwrap_or("-"),
        c.namespace.unwrap_or("-"),
        c.cluster.unwrap_or("-")
    );
    if let Some(o) = c.owner {
        println!("owner    {}/{} (uid {})", o.kind, o.name, o.uid);
    }
    if let Some(e) = &s.error {
        println!("error    [{}] {}", e.kind, e.message);
    }
    if !s.results.is_empty() {
        let rows: Vec<Vec<String>> = s
            .results
            .iter()
            .map(|(k, v)| vec![(*k).to_owned(), (*v).to_owned()])
            .collect();
        print!("\n{}", output::table(&["RESULT", "VALUE"], &rows));
    }
    if !s.output.is_empty() {
        println!("\noutput:\n{}", s.output.trim_end());
    }
    if !s.logs.is_empty() {
        println!("\nlogs:");
        for record in s.logs {
            let fields: Vec<String> = record
                .fields
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            println!(
                "  {:<5} {} {}",
                format!("{:?}", record.level).to_uppercase(),
                record.message,
                fields.join(" ")
            );
        }
    }
    if !s.patches.is_empty() {
        println!("\npatch operations (not applied: `op run` has no cluster):");
        for p in s.patches {
            println!("  {}", serde_json::to_string(p).unwrap_or_default());
        }
    }
    if !s.metrics.is_empty() {
        println!("\nmetric operations:");
        for m in s.metrics {
            println!("  {}", serde_json::to_string(m).unwrap_or_default());
        }
    }
    for (name, text) in [("stdout", s.stdout), ("stderr", s.stderr)] {
        if !text.is_empty() {
            println!("\n{name}:\n{}", text.trim_end());
        }
    }
}
