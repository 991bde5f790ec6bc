//! `operon test`: finds test files, runs each test against the in-memory cluster and
//! prints PASS or FAIL per step with what differed; JUnit XML and JSON for CI.

use super::output::{self, Format};
use operon::scenario::file::{self, Test};
use operon::scenario::report::{self, TestReport};
use operon::scenario::{self, Options};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `operon test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Test files, or directories searched for `*.test.yaml` and `*.test.yml`
    /// [default: the current directory].
    paths: Vec<PathBuf>,
    /// Only the tests whose name contains this text.
    #[arg(long)]
    run: Option<String>,
    /// Also write the results as JUnit XML to this file.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Print the JSON schema of test files and exit.
    #[arg(long)]
    schema: bool,
    /// Output format (`table`: PASS or FAIL per step, with what differed).
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// Where wasm modules named by name or `sha256:` digest are found, for tests that
    /// do not say (`modules:`); a cargo target directory will do.
    #[arg(long, env = "OPERON_MODULES_DIR")]
    modules: Option<PathBuf>,
    /// Where compiled modules are cached [default: $XDG_CACHE_HOME/operon/modules].
    #[arg(long, env = "OPERON_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Refuse to run a script when any sandbox protection is unavailable.
    #[arg(long)]
    strict: bool,
    /// The `helm` program that renders modules' charts.
    #[arg(long, env = "HELM_BINARY", default_value = "helm")]
    helm_binary: PathBuf,
    #[command(flatten)]
    jq: super::hook::JqArgs,
}

/// Runs `operon test`.
pub fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    if args.schema {
        println!("{}", serde_json::to_string_pretty(&file::schema())?);
        return Ok(ExitCode::SUCCESS);
    }
    args.jq.apply();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run_all(args))
}

async fn run_all(args: TestArgs) -> anyhow::Result<ExitCode> {
    let paths = match args.paths.is_empty() {
        true => vec![PathBuf::from(".")],
        false => args.paths.clone(),
    };
    let mut files = Vec::new();
    for path in &paths {
        find(path, &mut files)?;
    }
    files.sort();
    files.dedup();
    anyhow::ensure!(
        !files.is_empty(),
        "no test files (*.test.yaml, *.test.yml) in {}",
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let options = Options {
        sandbox: super::hook::sandbox(args.cache_dir.clone())?,
        modules: args.modules.clone(),
        cache_dir: args
            .cache_dir
            .clone()
            .or_else(operon::sandbox::default_cache_dir),
        strict: args.strict,
        helm: args.helm_binary.clone(),
    };
    let table = args.output == Format::Table;
    let mut reports = Vec::new();
    for path in &files {
        let tests: Vec<Test> = match file::read(path) {
            Ok(tests) => tests,
            Err(error) => {
                // The error names the file, its line and field: no test name to add.
                let report = TestReport {
                    file: path.clone(),
                    name: String::new(),
                    error: Some(error.to_string()),
                    steps: Vec::new(),
                };
                if table {
                    print_report(&report);
                }
                reports.push(report);
                continue;
            }
        };
        for test in tests.iter().filter(|t| {
            args.run
                .as_ref()
                .is_none_or(|r| t.name.contains(r.as_str()))
        }) {
            let report = scenario::run_test(test, path, &options).await;
            if table {
                print_report(&report);
            }
            reports.push(report);
        }
    }
    if let Some(junit) = &args.junit {
        std::fs::write(junit, report::junit(&reports))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", junit.display()))?;
    }
    let passed = reports.iter().filter(|r| r.passed()).count();
    let steps: usize = reports.iter().map(|r| r.steps.len()).sum();
    let failed_steps: usize = reports
        .iter()
        .map(|r| r.steps.iter().filter(|s| !s.passed()).count())
        .sum();
    match args.output {
        Format::Table => println!(
            "\n{}: {passed} passed, {} failed ({}, {failed_steps} failed)",
            plural(reports.len(), "test"),
            reports.len() - passed,
            plural(steps, "step"),
        ),
        other => output::print_structured(
            other,
            &serde_json::json!({
                "passed": passed == reports.len(),
                "tests": reports,
            }),
        )?,
    }
    Ok(if passed == reports.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn plural(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// Test files under `path`: itself when it is a file, else every `*.test.yaml` and
/// `*.test.yml` below it (hidden directories and `target/` skipped).
fn find(path: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if path.is_file() {
        files.push(path.to_owned());
        return Ok(());
    }
    let entries = std::fs::read_dir(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let child = entry.path();
        if entry.file_type()?.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                find(&child, files)?;
            }
        } else if name.ends_with(".test.yaml") || name.ends_with(".test.yml") {
            files.push(child);
        }
    }
    Ok(())
}

fn print_report(report: &TestReport) {
    let file = report.file.display();
    for step in &report.steps {
        let verdict = if step.passed() { "PASS" } else { "FAIL" };
        println!(
            "{verdict} {file}: {} / {} ({:.1} ms)",
            report.name,
            step.name,
            step.elapsed.as_secs_f64() * 1e3
        );
        for failure in &step.failures {
            println!("       {failure}");
        }
    }
    match &report.error {
        Some(error) if report.name.is_empty() => println!("ERROR {error}"),
        Some(error) => println!("ERROR {file}: {}: {error}", report.name),
        None => {}
    }
}
