//! `operon debug`: asks a running `operon serve` through its debug socket (and sets a
//! hook's own log level there).

use super::output::{self, Format};
use operon::serve::debug;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;

/// `operon debug ...`.
#[derive(Debug, clap::Subcommand)]
pub enum DebugCommand {
    /// The engine's queues.
    #[command(subcommand)]
    Queue(QueueCommand),
    /// The engine's hooks.
    #[command(subcommand)]
    Hook(HookCommand),
    /// What was loaded and reloaded.
    #[command(subcommand)]
    Reload(ReloadCommand),
}

/// `operon debug reload ...`.
#[derive(Debug, clap::Subcommand)]
pub enum ReloadCommand {
    /// The hooks directory at start and each reload of it and of the modules, applied
    /// or refused (with the file and the reason), oldest first.
    History(Target),
}

/// `operon debug queue ...`.
#[derive(Debug, clap::Subcommand)]
pub enum QueueCommand {
    /// Every queue with its waiting tasks.
    List(Target),
}

/// `operon debug hook ...`.
#[derive(Debug, clap::Subcommand)]
pub enum HookCommand {
    /// Every hook with its bindings.
    List(Target),
    /// The objects a hook's kubernetes bindings hold.
    Snapshot {
        /// The hook's name.
        name: String,
        #[command(flatten)]
        target: Target,
    },
    /// Set a hook's own log level until `operon serve` restarts: its records below the
    /// level are dropped, and those below info but at or above it are logged at info
    /// with `hook_level` (so `--log` need not change); `default` logs every record at
    /// its own level again.
    LogLevel {
        /// The hook's name.
        name: String,
        /// The level.
        #[arg(value_parser = ["trace", "debug", "info", "warn", "error", "default"])]
        level: String,
        #[command(flatten)]
        target: Target,
    },
}

/// Where the engine is and how to print.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// The debug socket of `operon serve`.
    #[arg(long, env = "DEBUG_UNIX_SOCKET", default_value = debug::DEFAULT_SOCKET)]
    debug_unix_socket: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Runs `operon debug ...`.
pub fn run(cmd: DebugCommand) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let get = hyper::Method::GET;
    let (target, method, path) = match &cmd {
        DebugCommand::Queue(QueueCommand::List(t)) => (t, get, "/queue/list".to_owned()),
        DebugCommand::Hook(HookCommand::List(t)) => (t, get, "/hook/list".to_owned()),
        DebugCommand::Reload(ReloadCommand::History(t)) => (t, get, "/reload/history".to_owned()),
        DebugCommand::Hook(HookCommand::Snapshot { name, target }) => (
            target,
            get,
            format!("/hook/{}/snapshot", path_segment(name)),
        ),
        DebugCommand::Hook(HookCommand::LogLevel {
            name,
            level,
            target,
        }) => (
            target,
            hyper::Method::PUT,
            format!("/hook/{}/log-level/{level}", path_segment(name)),
        ),
    };
    let answer = runtime.block_on(debug::request_with(
        &target.debug_unix_socket,
        method,
        &path,
    ))?;
    if target.output != Format::Table {
        output::print_structured(target.output, &answer)?;
        return Ok(ExitCode::SUCCESS);
    }
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(true) => "yes".to_owned(),
        Value::Bool(false) => "no".to_owned(),
        other => other.to_string(),
    };
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    match cmd {
        DebugCommand::Queue(_) => {
            println!(
                "{:<24} {:>6} {:>8} {:>8}  HEAD",
                "QUEUE", "TASKS", "RUNNING", "FAILURES"
            );
            for q in list(&answer) {
                let tasks = list(&q["tasks"]);
                let head = tasks
                    .first()
                    .map(|t| {
                        let bindings = bindings_summary(list(&t["bindings"]).iter().map(text));
                        format!("{} {} {}", text(&t["hook"]), text(&t["kind"]), bindings)
                    })
                    .unwrap_or_default();
                println!(
                    "{:<24} {:>6} {:>8} {:>8}  {head}",
                    text(&q["name"]),
                    tasks.len(),
                    text(&q["running"]),
                    text(&q["failures"])
                );
            }
        }
        DebugCommand::Hook(HookCommand::List(_)) => {
            println!(
                "{:<28} {:<16} {:<24} {:<36} {:<16} {:>8}  {:<6}  LOG LEVEL",
                "HOOK", "SOURCE", "BINDING", "TYPE", "QUEUE", "OBJECTS", "SYNCED"
            );
            for hook in list(&answer) {
                let level = match &hook["log_level"] {
                    Value::Null => "default".to_owned(),
                    level => text(level),
                };
                for b in list(&hook["bindings"]) {
                    println!(
                        "{:<28} {:<16} {:<24} {:<36} {:<16} {:>8}  {:<6}  {level}",
                        text(&hook["name"]),
                        text(&hook["source"]),
                        text(&b["name"]),
                        text(&b["binding_type"]),
                        text(&b["queue"]),
                        text(&b["objects"]),
                        text(&b["synchronized"])
                    );
                }
            }
        }
        DebugCommand::Hook(HookCommand::LogLevel { .. }) => {
            let level = match &answer["log_level"] {
                Value::Null => "default".to_owned(),
                level => text(level),
            };
            println!("{}: log level {level}", text(&answer["hook"]));
        }
        DebugCommand::Reload(_) => {
            println!("{:<28} {:<28} {:<8}  WHAT", "AT", "SOURCE", "OUTCOME");
            for entry in list(&answer) {
                println!(
                    "{:<28} {:<28} {:<8}  {}",
                    text(&entry["at"]),
                    text(&entry["source"]),
                    text(&entry["outcome"]),
                    reload_summary(&entry)
                );
            }
        }
        DebugCommand::Hook(HookCommand::Snapshot { .. }) => {
            for b in list(&answer) {
                let objects = list(&b["objects"]);
                println!("{} ({} objects)", text(&b["binding"]), objects.len());
                for o in objects {
                    let shown = match &o["filter_result"] {
                        Value::Null => text(&o["object"]),
                        result => text(result),
                    };
                    println!("  {shown}");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A hook's name as one segment of a debug socket path: a hook in a subdirectory of
/// the hooks directory has a `/` in its name.
pub(super) fn path_segment(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

/// What a reload entry brought: `+added ~changed -removed`, or why it was refused.
fn reload_summary(entry: &Value) -> String {
    let names = |field: &str, sign: char| {
        (entry[field].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .map(move |name| format!("{sign}{name}"))
    };
    let mut parts: Vec<String> = names("added", '+')
        .chain(names("changed", '~'))
        .chain(names("removed", '-'))
        .collect();
    if let Some(error) = entry["error"].as_str() {
        parts.push(error.to_owned());
    }
    parts.join(" ")
}

/// The bindings of a task's contexts, runs of one binding counted: a combined task
/// carries a context per event, thousands under load.
fn bindings_summary(names: impl Iterator<Item = String>) -> String {
    let mut runs: Vec<(String, usize)> = Vec::new();
    for name in names {
        match runs.last_mut() {
            Some((last, n)) if *last == name => *n += 1,
            _ => runs.push((name, 1)),
        }
    }
    runs.into_iter()
        .map(|(name, n)| if n == 1 { name } else { format!("{name}×{n}") })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_reload_entry_reads_as_what_it_brought() {
        let applied = serde_json::json!({
            "added": ["a.sh"], "changed": ["b.sh", "c.wasm"], "removed": ["d.sh"]
        });
        assert_eq!(super::reload_summary(&applied), "+a.sh ~b.sh ~c.wasm -d.sh");
        let refused = serde_json::json!({"error": "hook e.sh: not valid JSON"});
        assert_eq!(super::reload_summary(&refused), "hook e.sh: not valid JSON");
    }

    #[test]
    fn a_combined_tasks_bindings_are_counted_not_repeated() {
        let names = ["pods", "pods", "pods", "nodes", "pods"].map(str::to_owned);
        assert_eq!(
            super::bindings_summary(names.into_iter()),
            "pods×3,nodes,pods"
        );
    }
}
