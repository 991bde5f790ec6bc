//! `operon op ...`: run one operation component locally, with no cluster.

use super::output::{self, Format};
use anyhow::Context as _;
use operon::model::MetricOperation;
use operon::model::PatchOperation;
use operon::model::{LogRecord, OperationInput, RunnerContext};
use operon::sandbox::{self, CallLimits, Sandbox, SandboxConfig};
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
    module: PathBuf,
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
    /// Wall-clock limit of the run, e.g. `500ms`, `5s`, `2m`.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    timeout: Duration,
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

/// Parses `KEY=VALUE` (the value may contain `=`).
pub fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
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
}

#[derive(Serialize)]
struct ErrorSummary {
    kind: &'static str,
    message: String,
}

fn run_once(args: OpRunArgs) -> anyhow::Result<ExitCode> {
    let memory = args.memory.as_u64();
    let defaults = SandboxConfig::default();
    let config = SandboxConfig {
        // A one-shot run needs a single slot; size it for the requested memory.
        max_concurrent_calls: 1,
        max_memory_bytes: defaults.max_memory_bytes.max(memory),
        cache_dir: if args.no_cache {
            None
        } else {
            args.cache_dir.clone().or_else(sandbox::default_cache_dir)
        },
        ..defaults
    };
    let sandbox = Sandbox::new(config)?;
    let module = sandbox
        .load_operation_file(&args.module)
        .with_context(|| format!("cannot load {}", args.module.display()))?;

    let mut parameters: BTreeMap<String, String> = args.params.iter().cloned().collect();
    parameters.extend(args.results.iter().cloned());
    let input = OperationInput {
        context: RunnerContext {
            name: args
                .name
                .clone()
                .unwrap_or_else(|| module_name(&args.module)),
            dry_run: args.dry_run,
            timeout_ms: u64::try_from(args.timeout.as_millis()).unwrap_or(u64::MAX),
            node: args.node.clone(),
            namespace: args.namespace.clone(),
            owner: None,
        },
        parameters,
        results: args.results.iter().cloned().collect(),
        args: args.args.clone(),
    };
    let limits = CallLimits {
        timeout: args.timeout,
        memory_bytes: memory,
        ..CallLimits::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
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
        module: args.module.display().to_string(),
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
    Ok(match &report.outcome {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: operation {} failed: {e}", summary.module);
            ExitCode::FAILURE
        }
    })
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
        "context  name={} dryRun={} timeout={}ms node={} namespace={}",
        c.name,
        c.dry_run,
        c.timeout_ms,
        c.node.unwrap_or("-"),
        c.namespace.unwrap_or("-")
    );
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
