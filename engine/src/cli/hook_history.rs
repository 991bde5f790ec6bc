//! `operon hook history [NAME]`: the last runs of the hooks of a running `operon
//! serve`, asked through its debug socket (the engine keeps them:
//! [`operon::hooks::history`]).

use super::output::{self, Format};
use operon::api::HookRunOutcome;
use operon::hooks::history::RunEntry;
use operon::serve::debug;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `operon hook history`.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// Only this hook's runs, each followed by its patches and the end of its stderr.
    name: Option<String>,
    /// The debug socket of `operon serve`.
    #[arg(
        long,
        visible_alias = "debug-socket",
        env = "DEBUG_UNIX_SOCKET",
        default_value = debug::DEFAULT_SOCKET
    )]
    debug_unix_socket: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Runs `operon hook history`.
pub fn run(args: HistoryArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let path = match &args.name {
        Some(name) => format!("/hook/{}/history", super::debug::path_segment(name)),
        None => "/hook/history".to_owned(),
    };
    let answer = runtime.block_on(debug::request(&args.debug_unix_socket, &path))?;
    if args.output != Format::Table {
        output::print_structured(args.output, &answer)?;
        return Ok(ExitCode::SUCCESS);
    }
    let runs: Vec<RunEntry> = serde_json::from_value(answer)?;
    print!("{}", render(&runs, args.name.is_some()));
    Ok(ExitCode::SUCCESS)
}

/// One line per run, oldest first; with `detailed` (one hook asked for), each run's
/// patches and stderr tail under it.
fn render(runs: &[RunEntry], detailed: bool) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            vec![
                run.started
                    .round(jiff::Unit::Second)
                    .unwrap_or(run.started)
                    .to_string(),
                run.hook.clone(),
                run.bindings.join(","),
                run.trigger.clone(),
                outcome(run.outcome).to_owned(),
                duration(run.duration_ms),
                run.patches.to_string(),
                run.error
                    .as_deref()
                    .map(|e| e.replace('\n', " "))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    let header = [
        "TIME", "HOOK", "BINDING", "TRIGGER", "OUTCOME", "DURATION", "PATCHES", "ERROR",
    ];
    let table = output::table(&header, &rows);
    if !detailed {
        return table;
    }
    let mut lines = table.lines();
    let mut out = String::new();
    if let Some(header) = lines.next() {
        out.push_str(header);
        out.push('\n');
    }
    for (line, run) in lines.zip(runs) {
        out.push_str(line);
        out.push('\n');
        for patch in &run.patch_descriptions {
            let _ = writeln!(out, "    patch: {patch}");
        }
        if run.patches > run.patch_descriptions.len() {
            let more = run.patches - run.patch_descriptions.len();
            let _ = writeln!(out, "    patch: ... and {more} more");
        }
        if let Some(code) = run.exit_code {
            let _ = writeln!(out, "    exit code: {code}");
        }
        if !run.stderr_tail.is_empty() {
            let cut = if run.stderr_truncated { " (end)" } else { "" };
            let _ = writeln!(out, "    stderr{cut}:");
            for line in run.stderr_tail.lines() {
                let _ = writeln!(out, "      {line}");
            }
        }
    }
    out
}

fn outcome(outcome: HookRunOutcome) -> &'static str {
    match outcome {
        HookRunOutcome::Succeeded => "Succeeded",
        HookRunOutcome::Failed => "Failed",
        HookRunOutcome::AllowedFailure => "AllowedFailure",
    }
}

fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(hook: &str, outcome: HookRunOutcome) -> RunEntry {
        RunEntry {
            hook: hook.to_owned(),
            bindings: vec!["pods".to_owned()],
            binding_type: "Event".to_owned(),
            trigger: "Added Pod shop/web-0".to_owned(),
            queue: "main".to_owned(),
            started: "2026-12-01T10:00:00.4Z".parse().unwrap(),
            duration_ms: 1250,
            outcome,
            error: None,
            patches: 0,
            patch_descriptions: Vec::new(),
            exit_code: None,
            stderr_tail: String::new(),
            stderr_truncated: false,
        }
    }

    #[test]
    fn one_line_per_run_and_details_only_for_one_hook() {
        let mut failed = entry("pods.sh", HookRunOutcome::Failed);
        failed.error = Some("hook pods.sh failed (exit code 3): no\nsuch pod".to_owned());
        failed.exit_code = Some(3);
        failed.stderr_tail = "looking up web-0\nno such pod\n".to_owned();
        failed.patches = 1;
        failed.patch_descriptions = vec!["MergePatch Pod shop/web-0".to_owned()];
        let runs = [entry("pods.sh", HookRunOutcome::Succeeded), failed];
        let table = render(&runs, false);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert!(lines[0].starts_with("TIME"));
        assert!(
            lines[1].starts_with("2026-12-01T10:00:00Z  pods.sh  pods"),
            "{table}"
        );
        assert!(lines[2].contains("Failed"), "{table}");
        assert!(lines[2].ends_with("(exit code 3): no such pod"), "{table}");
        let detailed = render(&runs, true);
        assert!(
            detailed.contains("    patch: MergePatch Pod shop/web-0\n"),
            "{detailed}"
        );
        assert!(detailed.contains("    exit code: 3\n"), "{detailed}");
        assert!(
            detailed.ends_with("    stderr:\n      looking up web-0\n      no such pod\n"),
            "{detailed}"
        );
        assert_eq!(duration(42), "42ms");
        assert_eq!(duration(1300), "1.3s");
    }
}
