//! `operon hook handle`: one run of a wasm hook on the binding contexts of a file. It
//! is the container of a Hook's run offloaded to a Job (`spec.runOn: Job`), which
//! fetches the module by digest from the module API; with a module file it replays a
//! run locally. The run's report (answer, patches, metrics, logs) is the last line it
//! prints on stdout, and goes to --result-file (a Job's termination message) when it
//! fits there; otherwise that file says the report is in the log, with a summary of
//! the run. When the run cannot happen the file says why.

use super::op::{ModuleApiArgs, one_shot, parse_digest};
use anyhow::Context as _;
use operon::hooks::Hook as _;
use operon::hooks::WasmHook;
use operon::hooks::runner::job::{HookReport, REPORT_IN_LOG};
use operon::model::HookInput;
use operon::sandbox::{CallLimits, ModuleDigest, Sandbox};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `operon hook handle`.
#[derive(Debug, clap::Args)]
pub struct HandleArgs {
    /// The hook component (a `.wasm` of the `hook` world).
    #[arg(required_unless_present = "digest", conflicts_with = "digest")]
    module: Option<PathBuf>,
    /// Run the module with this digest (`sha256:<hex>`), fetched from --module-url;
    /// bytes of any other digest are refused.
    #[arg(long, requires_all = ["module_url", "module_ca"], value_parser = parse_digest)]
    digest: Option<ModuleDigest>,
    #[command(flatten)]
    module_api: ModuleApiArgs,
    /// The run's input as JSON: its runner context and binding contexts, as the engine
    /// writes them for a Job (`hook-input.json`).
    #[arg(long)]
    input_file: PathBuf,
    /// Write a one-line summary of the run, or why it could not run, to this file.
    #[arg(long)]
    result_file: Option<PathBuf>,
    /// Memory limit of the run, e.g. `64MiB` or a number of bytes.
    #[arg(long, default_value = "64MiB")]
    memory: bytesize::ByteSize,
    /// Where compiled modules are cached [default: $XDG_CACHE_HOME/operon/modules].
    #[arg(long, env = "OPERON_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile the module even if a cached artifact exists, and cache nothing.
    #[arg(long)]
    no_cache: bool,
}

/// Runs `operon hook handle`: exits 0 once a report is printed (a failed hook run is
/// in the report), 1 when there is none to print.
pub async fn run(args: HandleArgs) -> anyhow::Result<ExitCode> {
    let line = match handle(&args).await {
        Ok(line) => line,
        Err(e) => {
            if let Some(path) = &args.result_file {
                write(path, &format!("error: {}", super::error_text(&e)))?;
            }
            return Err(e);
        }
    };
    if let Some(path) = &args.result_file {
        write(path, &line.summary)?;
    }
    println!("{}", line.report);
    Ok(ExitCode::SUCCESS)
}

struct Printed {
    report: String,
    summary: String,
}

async fn handle(args: &HandleArgs) -> anyhow::Result<Printed> {
    let text = std::fs::read_to_string(&args.input_file)
        .with_context(|| format!("reading {}", args.input_file.display()))?;
    let input: HookInput = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a hook run's input (its runner context and binding contexts)",
            args.input_file.display()
        )
    })?;
    let memory = args.memory.as_u64();
    let sandbox = Sandbox::new(one_shot(memory, args.cache_dir.as_deref(), args.no_cache))?;
    let (name, module) = match (&args.module, &args.digest) {
        (Some(path), _) => (
            path.display().to_string(),
            sandbox
                .load_hook_file(path)
                .with_context(|| format!("cannot load {}", path.display()))?,
        ),
        (None, Some(digest)) => {
            let bytes = args.module_api.fetch(digest).await?;
            let module = sandbox
                .load_hook(&digest.to_string(), &bytes)
                .with_context(|| format!("cannot load module {digest} as a hook"))?;
            (digest.to_string(), module)
        }
        (None, None) => anyhow::bail!("name a module file or --digest"),
    };
    let timeout = Duration::from_millis(input.context.timeout_ms.max(1));
    let limits = CallLimits {
        timeout,
        memory_bytes: memory,
        ..CallLimits::default()
    };
    let hook = WasmHook::new(name.clone(), sandbox, module, limits);
    let (run, _) = hook.handle(input, timeout).await;
    let report = HookReport::of(&run);
    let line = report.to_line()?;
    let bound = operon::runner::job::MAX_TERMINATION_MESSAGE;
    if line.len() <= bound {
        return Ok(Printed {
            summary: line.clone(),
            report: line,
        });
    }
    let summary = match &report.error {
        Some(e) => format!("hook {name} failed: {e}"),
        None => format!(
            "hook {name} ran in {} ms: {} patches, {} metric operations, {} log records",
            report.elapsed_ms,
            report.patches.len(),
            report.metrics.len(),
            report.logs.len()
        ),
    };
    Ok(Printed {
        report: line,
        summary: cut(&format!("{REPORT_IN_LOG}{summary}"), bound),
    })
}

/// `text` cut to `bound` bytes, on a character boundary.
fn cut(text: &str, bound: usize) -> String {
    let mut end = text.len().min(bound);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
