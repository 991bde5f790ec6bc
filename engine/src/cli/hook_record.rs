//! `operon hook record NAME`: what a running `operon serve --capture-runs` kept of a
//! hook's runs, written as a test file that `operon test` replays against another
//! version of the hook.

use anyhow::Context as _;
use operon::scenario::record;
use operon::serve::debug;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `operon hook record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The hook, as `operon hook history` and `operon debug hook list` name it.
    name: String,
    /// The hook file or module the test runs (`subject.hook`, relative to the test
    /// file) [default: NAME].
    #[arg(long)]
    hook: Option<PathBuf>,
    /// Where to write the test file [default: stdout].
    #[arg(long, short = 'f')]
    file: Option<PathBuf>,
    /// The debug socket of `operon serve`.
    #[arg(
        long,
        visible_alias = "debug-socket",
        env = "DEBUG_UNIX_SOCKET",
        default_value = debug::DEFAULT_SOCKET
    )]
    debug_unix_socket: PathBuf,
}

/// Runs `operon hook record`.
pub fn run(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let path = format!("/hook/{}/capture", super::debug::path_segment(&args.name));
    let answer = runtime.block_on(debug::request(&args.debug_unix_socket, &path))?;
    let runs: Vec<Value> = serde_json::from_value(answer)
        .context("the debug socket's answer is not a list of captured runs")?;
    anyhow::ensure!(
        !runs.is_empty(),
        "no run of hook {} is captured: start operon serve with --capture-runs N, and let it run",
        args.name
    );
    let subject = args
        .hook
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    let text = record::to_yaml(&record::recorded_test(&args.name, subject, &runs));
    match &args.file {
        Some(file) => {
            std::fs::write(file, text)
                .with_context(|| format!("cannot write {}", file.display()))?;
            eprintln!(
                "{} runs of {} written to {}",
                runs.len(),
                args.name,
                file.display()
            );
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
