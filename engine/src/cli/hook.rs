//! `operon hook test` and `operon hook run`: hooks against the local cluster, with no
//! real cluster.

use super::output::{self, Format};
use anyhow::{Context as _, bail};
use operon::cluster::local::LocalCluster;
use operon::hooks::engine::{Engine, RunRecord};
use operon::hooks::load::{self, HookLoadError, HookLoader};
use operon::metrics::Metrics;
use operon::model::WatchEvent;
use operon::sandbox::{self, CallLimits, Sandbox, SandboxConfig};
use operon::scenario::ScenarioError;
use operon::scenario::hooks::{HookUnderTest, load_hook, run_json, server_answer};
use operon::shell_operator;
use operon::store::ModuleLocator;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Subcommands of `operon hook`.
#[derive(Debug, clap::Subcommand)]
pub enum HookCommand {
    /// Load a hook, print its validated configuration, then run a scenario against
    /// fixture objects and print every run.
    Test(TestArgs),
    /// Run the full engine loop (queues, schedules, retries) over a hooks directory
    /// against fixture objects, printing runs as they happen.
    Run(HookRunArgs),
    /// Run a wasm hook once on the binding contexts of a file and print the run's
    /// report as one JSON line: the container of a Hook run offloaded to a Job.
    Handle(Box<super::hook_handle::HandleArgs>),
    /// Print the last runs of a running `operon serve`'s hooks (through its debug
    /// socket), newest last; with a hook's name, its patches and the end of its stderr
    /// too.
    History(super::hook_history::HistoryArgs),
    /// Write what a running `operon serve --capture-runs` kept of a hook's runs as a
    /// test file, for `operon test` to replay against another version of the hook.
    Record(super::hook_record::RecordArgs),
}

/// A scenario event: `added|modified|deleted:FILE`.
#[derive(Debug, Clone)]
pub struct ScenarioEvent {
    kind: WatchEvent,
    file: PathBuf,
}

fn scenario_event(text: &str) -> Result<ScenarioEvent, String> {
    let (kind, file) = text
        .split_once(':')
        .ok_or_else(|| format!("expected added|modified|deleted:FILE, got {text:?}"))?;
    let kind = match kind.to_ascii_lowercase().as_str() {
        "added" | "add" => WatchEvent::Added,
        "modified" | "update" | "modify" => WatchEvent::Modified,
        "deleted" | "delete" => WatchEvent::Deleted,
        other => {
            return Err(format!(
                "unknown event {other:?}: use added, modified or deleted"
            ));
        }
    };
    Ok(ScenarioEvent {
        kind,
        file: PathBuf::from(file),
    })
}

/// Arguments of `operon hook test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The hook: a wasm component of the `hook` world, an executable shell-operator
    /// hook (run with `--config`, then with binding context files), a module name or
    /// `sha256:` digest (found in --modules), or a Hook object's YAML (its
    /// `spec.module` found the same way, its overrides and permissions applied).
    hook: PathBuf,
    /// Directory of wasm modules named `<name>.wasm`, where module names and digests
    /// are found (as `operon run --modules` finds an Operation's `wasm.module`).
    #[arg(long, env = "OPERON_MODULES_DIR")]
    modules: Option<PathBuf>,
    /// Fixture objects (multi-document YAML; `kind: List` accepted), repeatable.
    #[arg(long)]
    objects: Vec<PathBuf>,
    /// A watch event after synchronization, as `added|modified|deleted:FILE`
    /// (repeatable, applied in order; a file may hold several objects).
    #[arg(long = "event", value_parser = scenario_event)]
    events: Vec<ScenarioEvent>,
    /// Fire this schedule binding after the events (repeatable).
    #[arg(long = "schedule")]
    schedules: Vec<String>,
    /// Send an AdmissionReview or ConversionReview (JSON or YAML file) to a validating,
    /// mutating or conversion binding, as `BINDING:FILE`, after the schedules
    /// (repeatable); prints the answer `operon serve` would send and, for a mutation,
    /// the object after the patch.
    #[arg(long = "review")]
    reviews: Vec<String>,
    /// Where compiled modules are cached [default: $XDG_CACHE_HOME/operon/modules].
    #[arg(long, env = "OPERON_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Refuse to run a script hook when any sandbox protection is unavailable.
    #[arg(long)]
    strict: bool,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
    #[command(flatten)]
    jq: JqArgs,
}

/// The jq run limits a command sets for the process.
#[derive(Debug, Clone, clap::Args)]
pub struct JqArgs {
    /// How long one run of a jq filter (a binding's jqFilter, a JQPatch) may take
    /// before it fails with a limit error, e.g. `500ms`, `3s` (at most 60s).
    #[arg(long = "jq-timeout", env = "OPERON_JQ_TIMEOUT", default_value = "1s", value_parser = jq_timeout)]
    pub jq_timeout: Duration,
    /// How many bytes of values one run of a jq filter may build before it fails with
    /// a limit error, e.g. `64MiB`, `1GiB` (from 1MiB to 4GiB).
    #[arg(long = "jq-memory", env = "OPERON_JQ_MEMORY", default_value = "256MiB", value_parser = jq_memory)]
    pub jq_memory: usize,
}

impl JqArgs {
    /// Sets the limits for every jq run of this process.
    pub fn apply(&self) {
        operon::jq::set_time_limit(self.jq_timeout);
        operon::jq::set_memory_limit(self.jq_memory);
    }
}

/// A jq memory limit: a byte size from 1 MiB to 4 GiB. Below a mebibyte, ordinary
/// filters over a few objects fail; above a few gibibytes, the limit no longer stands
/// between a filter and the process's memory.
fn jq_memory(text: &str) -> Result<usize, String> {
    let size: bytesize::ByteSize = text
        .trim()
        .parse()
        .map_err(|e| format!("{text:?} is not a byte size such as 64MiB: {e}"))?;
    let bytes = size.as_u64();
    if !(1 << 20..=4 << 30).contains(&bytes) {
        return Err(format!("{text} is not between 1MiB and 4GiB"));
    }
    usize::try_from(bytes).map_err(|_| format!("{text} does not fit in this machine's memory"))
}

/// A jq time limit: a duration from 1 ms to 60 s.
fn jq_timeout(text: &str) -> Result<Duration, String> {
    let time = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if time < Duration::from_millis(1) || time > Duration::from_secs(60) {
        return Err(format!("{text} is not between 1ms and 60s"));
    }
    Ok(time)
}

/// Arguments of `operon hook run`.
#[derive(Debug, clap::Args)]
pub struct HookRunArgs {
    /// A directory of hooks: `*.wasm` components and executables (shell-operator's
    /// discovery rules: hidden files, `lib/` and .yaml/.json/.md/.txt are skipped).
    hooks_dir: PathBuf,
    /// Refuse to run a script hook when any sandbox protection is unavailable.
    #[arg(long)]
    strict: bool,
    /// Fixture objects, repeatable.
    #[arg(long)]
    objects: Vec<PathBuf>,
    /// How long to run, e.g. `10s`.
    #[arg(long = "for", default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Where compiled modules are cached [default: $XDG_CACHE_HOME/operon/modules].
    #[arg(long, env = "OPERON_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    #[command(flatten)]
    jq: JqArgs,
}

/// Runs `operon hook ...`.
pub fn run(cmd: HookCommand) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match cmd {
        HookCommand::Test(args) => {
            args.jq.apply();
            runtime.block_on(test(args))
        }
        HookCommand::Run(args) => {
            args.jq.apply();
            runtime.block_on(run_dir(args))
        }
        HookCommand::Handle(args) => runtime.block_on(super::hook_handle::run(*args)),
        HookCommand::History(args) => super::hook_history::run(args),
        HookCommand::Record(args) => super::hook_record::run(args),
    }
}

pub(super) fn loader(cache_dir: Option<PathBuf>, strict: bool) -> anyhow::Result<HookLoader> {
    Ok(HookLoader::new(
        sandbox(cache_dir)?,
        CallLimits::default(),
        strict,
    ))
}

/// The wasm sandbox hooks of a local command load into.
pub(super) fn sandbox(cache_dir: Option<PathBuf>) -> anyhow::Result<Sandbox> {
    Ok(Sandbox::new(SandboxConfig {
        cache_dir: cache_dir.or_else(sandbox::default_cache_dir),
        max_concurrent_calls: 16,
        ..SandboxConfig::default()
    })?)
}

pub(super) fn load_fixtures(cluster: &LocalCluster, files: &[PathBuf]) -> anyhow::Result<()> {
    for file in files {
        if let Err(problems) = cluster.load_file(file) {
            for p in &problems {
                eprintln!("error: {p}");
            }
            bail!("cannot load fixtures from {}", file.display());
        }
    }
    Ok(())
}

/// Prints every problem of an invalid configuration; the error says how many.
pub(super) fn invalid_configuration(
    hook: &str,
    problems: &[impl std::fmt::Display],
) -> anyhow::Error {
    for p in problems {
        eprintln!("error: {p}");
    }
    anyhow::anyhow!(
        "hook {hook} has an invalid configuration ({} problems)",
        problems.len()
    )
}

/// The hook `args.hook` names, configured, and the cluster its patches go to, as
/// `operon test` loads it: a hook file; a module name or `sha256:` digest found in
/// --modules; or a Hook object's YAML, whose `spec.module` is found the same way (or
/// beside the YAML) and whose patches are held to its permissions, as `operon serve`
/// holds them.
async fn hook_under_test(
    args: &TestArgs,
    loader: &HookLoader,
    cluster: &Arc<LocalCluster>,
) -> anyhow::Result<HookUnderTest> {
    let locator = ModuleLocator::new(args.modules.clone());
    match load_hook(&args.hook, Path::new("."), &locator, loader, cluster).await {
        Err(ScenarioError::InvalidHook { hook, problems }) => {
            Err(invalid_configuration(&hook, &problems))
        }
        other => {
            let hook = other?;
            for note in &hook.notes {
                eprintln!("note: {note}");
            }
            for warning in &hook.warnings {
                eprintln!("warning: {warning}");
            }
            Ok(hook)
        }
    }
}

fn print_record(index: usize, record: &RunRecord) {
    let value = run_json(record);
    let status = value["status"].as_str().unwrap_or_default();
    println!(
        "\n── run {index}: {} on queue {} — {status} in {:.2} ms",
        record.hook,
        record.queue,
        record.run.elapsed.as_secs_f64() * 1e3
    );
    if let Some(error) = value["error"].as_str() {
        println!("error: {error}");
    }
    println!(
        "binding contexts:\n{}",
        indent(&serde_json::to_string_pretty(&value["bindingContexts"]).unwrap_or_default())
    );
    for (title, key) in [
        ("patches", "patches"),
        ("metrics", "metrics"),
        ("logs", "logs"),
    ] {
        let items = value[key].as_array().cloned().unwrap_or_default();
        if !items.is_empty() {
            println!("{title}:");
            for item in items {
                println!("  {item}");
            }
        }
    }
    if let Some(v) = value.get("validating").filter(|v| !v.is_null()) {
        println!("validating response: {v}");
    }
    if let Some(v) = value.get("conversion").filter(|v| !v.is_null()) {
        println!("conversion response: {v}");
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

async fn test(args: TestArgs) -> anyhow::Result<ExitCode> {
    let cluster = Arc::new(LocalCluster::new());
    // Script hooks that call kubectl reach these same objects through the local API,
    // served until this function returns.
    let api = operon::cluster::local::LocalApi::start(cluster.clone()).await?;
    let access = operon::hooks::runner::ClusterAccess::local(
        operon::hooks::runner::AccessScope::All,
        api.dir(),
    )?;
    let loader = loader(args.cache_dir.clone(), args.strict)?.with_cluster_access(access);
    load_fixtures(&cluster, &args.objects)?;
    let HookUnderTest {
        loaded,
        declared,
        cluster: engine_cluster,
        ..
    } = hook_under_test(&args, &loader, &cluster).await?;
    // Printed as shell-operator's v1 document, the form hook authors write.
    let raw = shell_operator::config::to_json(&declared);
    let schedule_index: Vec<usize> = args
        .schedules
        .iter()
        .map(|name| {
            loaded
                .config
                .schedules
                .iter()
                .position(|s| &s.name == name)
                .with_context(|| format!("the hook has no schedule binding {name:?}"))
        })
        .collect::<anyhow::Result<_>>()?;
    let table = args.output == Format::Table;
    if table {
        println!("hook {}: configuration is valid", loaded.hook.name());
        println!("{}", indent(&serde_json::to_string_pretty(&raw)?));
    }
    let metrics = Arc::new(Metrics::new()?);
    let engine = Engine::new(vec![loaded], engine_cluster, metrics);
    engine.start().await?;
    let mut records: Vec<RunRecord> = Vec::new();
    let mut collect = |r: &RunRecord| {
        if table {
            print_record(records.len() + 1, r);
        }
        records.push(r.clone());
    };
    engine.drain(&mut collect).await;
    for event in &args.events {
        let text = std::fs::read_to_string(&event.file)
            .with_context(|| format!("cannot read {}", event.file.display()))?;
        for document in yaml_serde::Deserializer::from_str(&text) {
            let object = <Value as serde::Deserialize>::deserialize(document)
                .with_context(|| format!("{} is not valid YAML", event.file.display()))?;
            if object.is_null() {
                continue;
            }
            cluster
                .apply_watch_event(event.kind, object)
                .with_context(|| format!("cannot apply the event from {}", event.file.display()))?;
        }
        engine.drain(&mut collect).await;
    }
    for index in schedule_index {
        engine.fire_schedule(0, index);
        engine.drain(&mut collect).await;
    }
    let mut answers = Vec::new();
    for review in &args.reviews {
        let (binding, file) = review
            .split_once(':')
            .with_context(|| format!("--review expects BINDING:FILE, got {review:?}"))?;
        let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?;
        let value: Value = yaml_serde::from_str(&text)
            .with_context(|| format!("{file} is not a JSON or YAML review"))?;
        let record = engine
            .review(0, binding, value.to_string())
            .await
            .with_context(|| {
                format!("the hook has no validating, mutating or conversion binding {binding:?}")
            })?;
        collect(&record);
        let answer = server_answer(&engine, binding, &value, &record);
        if table {
            println!(
                "answer sent to the API server:\n{}",
                indent(&serde_json::to_string_pretty(&answer["answer"])?)
            );
            if let Some(object) = answer.get("patchedObject") {
                println!(
                    "object after the patch:\n{}",
                    indent(&serde_json::to_string_pretty(object)?)
                );
            }
        }
        answers.push(answer);
    }
    let failed = records.iter().any(|r| r.failed && !r.allowed_failure);
    let objects = cluster.objects();
    match args.output {
        Format::Table => {
            println!("\nobjects after the scenario:");
            for object in &objects {
                println!("  {object}");
            }
        }
        other => output::print_structured(
            other,
            &json!({
                "configuration": raw,
                "runs": records.iter().map(run_json).collect::<Vec<_>>(),
                "reviews": answers,
                "objects": objects,
            }),
        )?,
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn run_dir(args: HookRunArgs) -> anyhow::Result<ExitCode> {
    let cluster = Arc::new(LocalCluster::new());
    // Script hooks that call kubectl reach these same objects through the local API,
    // served until this function returns.
    let api = operon::cluster::local::LocalApi::start(cluster.clone()).await?;
    let access = operon::hooks::runner::ClusterAccess::local(
        operon::hooks::runner::AccessScope::All,
        api.dir(),
    )?;
    let loader = loader(args.cache_dir.clone(), args.strict)?.with_cluster_access(access);
    load_fixtures(&cluster, &args.objects)?;
    let mut hooks = Vec::new();
    // Asked beside each other, taken (and their warnings printed) in path order.
    let jobs = (loader.hooks_in(&args.hooks_dir)?.into_iter())
        .map(|hook| load::configure(hook, cluster.as_ref()));
    let configured = load::in_order(jobs, loader.discovery(), |(loaded, _)| {
        for warning in &loaded.config.warnings {
            eprintln!("warning: {warning}");
        }
        hooks.push(loaded);
    });
    match configured.await {
        Err(HookLoadError::Invalid { hook, problems }) => {
            return Err(invalid_configuration(&hook, &problems));
        }
        other => other?,
    }
    eprintln!(
        "running {} hooks for {}",
        hooks.len(),
        humantime::format_duration(args.duration)
    );
    let metrics = Arc::new(Metrics::new()?);
    let engine = Arc::new(Engine::new(hooks, cluster, metrics.clone()));
    engine.start().await?;
    let started = std::time::Instant::now();
    engine
        .run_for(args.duration, move |r: &RunRecord| {
            let v = run_json(r);
            println!(
                "{:>8.3}s {} [{}] {} ({} contexts, {} patches, {} metrics){}",
                started.elapsed().as_secs_f64(),
                r.hook,
                r.queue,
                v["status"].as_str().unwrap_or_default(),
                r.contexts.len(),
                r.run.patches.len(),
                r.run.metrics.len(),
                match (&v["error"], r.retry_in) {
                    (Value::String(e), Some(wait)) =>
                        format!(": {e}; retry in {}", humantime::format_duration(wait)),
                    (Value::String(e), None) => format!(": {e}"),
                    _ => String::new(),
                }
            );
        })
        .await;
    println!("\n{}{}", metrics.render(), metrics.render_hooks());
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod jq_args_tests {
    use super::JqArgs;
    use clap::Parser;
    use std::time::Duration;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        jq: JqArgs,
    }

    #[test]
    fn the_jq_timeout_is_a_bounded_duration() {
        let parse = |args: &[&str]| Cli::try_parse_from([&["operon"], args].concat());
        assert_eq!(
            parse(&["--jq-timeout", "250ms"]).unwrap().jq.jq_timeout,
            Duration::from_millis(250)
        );
        assert_eq!(
            parse(&["--jq-timeout", "5s"]).unwrap().jq.jq_timeout,
            Duration::from_secs(5)
        );
        if std::env::var_os("OPERON_JQ_TIMEOUT").is_none() {
            assert_eq!(parse(&[]).unwrap().jq.jq_timeout, Duration::from_secs(1));
        }
        for bad in ["0s", "2m", "soon"] {
            let error = parse(&["--jq-timeout", bad]).unwrap_err().to_string();
            assert!(error.contains("--jq-timeout"), "{error}");
        }
        assert!(
            parse(&["--jq-timeout", "2m"])
                .unwrap_err()
                .to_string()
                .contains("not between 1ms and 60s")
        );
    }

    #[test]
    fn the_jq_memory_is_a_bounded_byte_size() {
        let parse = |args: &[&str]| Cli::try_parse_from([&["operon"], args].concat());
        for (text, bytes) in [
            ("64MiB", 64 << 20),
            ("1MiB", 1 << 20),
            ("4GiB", 4 << 30),
            ("1.5GiB", 3 << 29),
            ("100MB", 100_000_000),
            ("2097152", 2 << 20),
        ] {
            assert_eq!(parse(&["--jq-memory", text]).unwrap().jq.jq_memory, bytes);
        }
        if std::env::var_os("OPERON_JQ_MEMORY").is_none() {
            assert_eq!(parse(&[]).unwrap().jq.jq_memory, operon::jq::DEFAULT_MEMORY);
        }
        for bad in ["1000KiB", "5GiB", "0", "lots", "-1MiB"] {
            let error = parse(&[&format!("--jq-memory={bad}")])
                .unwrap_err()
                .to_string();
            assert!(error.contains("--jq-memory"), "{bad}: {error}");
        }
        assert!(
            parse(&["--jq-memory", "5GiB"])
                .unwrap_err()
                .to_string()
                .contains("5GiB is not between 1MiB and 4GiB")
        );
        assert!(
            parse(&["--jq-memory", "lots"])
                .unwrap_err()
                .to_string()
                .contains("\"lots\" is not a byte size such as 64MiB")
        );
    }

    /// `apply` sets the memory limit of every later run of the process: a filter the
    /// default budget lets through stops at a lowered one.
    #[test]
    fn a_lowered_jq_memory_stops_what_the_default_lets_through() {
        use operon::jq::{JqError, Limit, Limits};
        let filter = operon::jq::compile_uncached(r#""x" * 8000000 | length"#).unwrap();
        let input = serde_json::Value::Null;
        assert_eq!(
            filter.run_within(&input, &Limits::default()).unwrap(),
            [serde_json::json!(8_000_000)]
        );
        let cli = Cli::try_parse_from(["operon", "--jq-memory", "4MiB"]).unwrap();
        cli.jq.apply();
        let lowered = filter.run(&input);
        // Back to the default, for the other tests of the process.
        operon::jq::set_memory_limit(operon::jq::DEFAULT_MEMORY);
        match lowered {
            Err(JqError::Limit {
                filter: text,
                limit,
            }) => {
                assert_eq!(text, filter.text());
                assert_eq!(limit, Limit::Memory(4 << 20));
            }
            other => panic!("expected the memory limit, got {other:?}"),
        }
    }
}
