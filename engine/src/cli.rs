//! Command-line parsing and dispatch. Each subcommand lives in its own module and
//! returns an exit code; errors are printed once, here.

mod agent;
mod audit;
mod convert;
mod debug;
mod diagnose;
mod engine_args;
mod hook;
mod hook_handle;
mod hook_history;
mod hook_record;
mod memory;
mod module;
mod module_oci;
mod module_sign;
mod module_store;
mod modules;
mod offload;
mod op;
mod output;
mod seccomp;
mod serve;
mod test;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Operon: a WebAssembly-sandboxed operation engine for Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "operon", version, about, propagate_version = true)]
struct Cli {
    /// Log filter for the engine's own logs (e.g. `info`, `operon=debug`); logs go to
    /// stderr [default: info for `serve`, warn otherwise].
    #[arg(long, alias = "log-level", global = true, env = "OPERON_LOG")]
    log: Option<String>,

    /// Log format: `text`, `color` or `json` (one object per line).
    #[arg(long, global = true, env = "LOG_TYPE", value_enum, default_value_t = LogType::Text)]
    log_type: LogType,

    /// Script sandbox protections that `--strict` (and an Operation's `strict: true`)
    /// does without, comma-separated, e.g. `private_proc` in a pod, whose container
    /// runtime masks /proc so that no new one can be mounted. The runs still report them.
    #[arg(
        long,
        global = true,
        env = "OPERON_STRICT_EXCEPT",
        value_delimiter = ','
    )]
    strict_except: Vec<String>,

    /// Export Operon's traces (one per hook event, review and Diagnosis run) over OTLP
    /// to this collector, e.g. `http://otel-collector:4317`; off when unset. For HTTP,
    /// the base URL (`/v1/traces` is added).
    #[arg(
        long,
        global = true,
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL"
    )]
    otlp_endpoint: Option<String>,

    /// The OTLP transport: `grpc`, `http/protobuf` (or `http`) or `http/json`.
    #[arg(
        long,
        global = true,
        env = "OTEL_EXPORTER_OTLP_PROTOCOL",
        value_enum,
        default_value_t = OtlpProtocol::Grpc
    )]
    otlp_protocol: OtlpProtocol,

    /// The share of traces recorded, from 0 to 1 (a trace continued from a caller
    /// follows the caller's decision).
    #[arg(
        long,
        global = true,
        env = "OTEL_TRACES_SAMPLER_ARG",
        default_value_t = 1.0,
        value_name = "RATIO"
    )]
    otlp_sampling_ratio: f64,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OtlpProtocol {
    Grpc,
    #[value(name = "http/protobuf", alias = "http")]
    HttpProtobuf,
    #[value(name = "http/json")]
    HttpJson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogType {
    Text,
    Color,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Work with operations (WASI components of the `operation` world).
    #[command(subcommand)]
    Op(op::OpCommand),
    /// Test and run hooks (shell-operator's model) against local fixture objects.
    #[command(subcommand)]
    Hook(hook::HookCommand),
    /// addon-operator's modules: run the task queue, show a module's values, render it.
    #[command(subcommand)]
    Modules(modules::ModulesCommand),
    /// Upload, list, download and remove the wasm modules of `operon serve`; push, pull,
    /// sign and verify modules in OCI registries.
    #[command(subcommand)]
    Module(module::ModuleCommand),
    /// Run test files of hooks, Hook objects, modules and pipelines against local
    /// objects; PASS or FAIL per step, exit code 1 on any failure.
    Test(Box<test::TestArgs>),
    /// Run a Diagnosis of an OperationSet from YAML files, with no cluster.
    Run(Box<diagnose::DiagnoseArgs>),
    /// Check Operations, OperationSets, Triggers and Diagnoses; report every problem.
    Validate(diagnose::ValidateArgs),
    /// Draw an OperationSet as Graphviz DOT or Mermaid, with a Diagnosis' outcomes.
    Graph(diagnose::GraphArgs),
    /// Run hooks against a Kubernetes API server: the controller, with metrics, health
    /// and readiness endpoints and a debug socket.
    Serve(Box<serve::ServeArgs>),
    /// Review existing objects with the validating bindings of a hooks directory and
    /// write what they answer as PolicyReports (or print it, for objects from files).
    Audit(Box<audit::AuditArgs>),
    /// Run the Diagnoses placed on one node (`operon agent --node-name`, a DaemonSet).
    Agent(Box<agent::AgentArgs>),
    /// Ask a running `operon serve` about its queues, hooks and snapshots.
    #[command(subcommand)]
    Debug(debug::DebugCommand),
    /// Rewrite other tools' objects into Operon's (`operon convert kubediag FILES`).
    #[command(subcommand)]
    Convert(convert::ConvertCommand),
    /// Print the CustomResourceDefinitions of operon.dev/v1alpha1 as YAML.
    Crds,
    /// Print the seccomp profile Operon's pods run under (it lets the script sandbox
    /// create namespaces in a container), or install it in a kubelet's directory.
    SeccompProfile(seccomp::SeccompArgs),
    /// Print the versions of Operon, wasmtime and the WIT contract.
    Version {
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = output::Format::Table)]
        output: output::Format,
    },
}

/// Parses the command line, runs it and maps failures to exit code 1.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = match cli.command {
        // The long-running ones, whose log is where hooks' output goes.
        Command::Serve(_)
        | Command::Agent(_)
        | Command::SeccompProfile(_)
        | Command::Modules(modules::ModulesCommand::Run(_)) => "info",
        _ => "warn",
    };
    let filter =
        tracing_subscriber::EnvFilter::try_new(cli.log.as_deref().unwrap_or(default_level))
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let format = match cli.log_type {
        LogType::Json => operon::telemetry::LogFormat::Json,
        LogType::Color => operon::telemetry::LogFormat::Color,
        LogType::Text => operon::telemetry::LogFormat::Text,
    };
    let otlp = cli
        .otlp_endpoint
        .clone()
        .filter(|e| !e.is_empty())
        .map(|endpoint| operon::telemetry::OtlpSettings {
            endpoint,
            protocol: match cli.otlp_protocol {
                OtlpProtocol::Grpc => operon::telemetry::Protocol::Grpc,
                OtlpProtocol::HttpProtobuf => operon::telemetry::Protocol::HttpProtobuf,
                OtlpProtocol::HttpJson => operon::telemetry::Protocol::HttpJson,
            },
            sampling_ratio: cli.otlp_sampling_ratio,
        });
    let telemetry =
        match operon::telemetry::subscriber(filter, format, std::io::stderr, otlp.as_ref()) {
            Ok((dispatch, telemetry)) => {
                tracing_subscriber::util::SubscriberInitExt::init(dispatch);
                telemetry
            }
            Err(e) => {
                eprintln!("error: --otlp-endpoint: {e}: {}", error_chain(&e));
                return ExitCode::FAILURE;
            }
        };
    let code = run(cli.command, &cli.strict_except);
    // The last batch of spans goes out before the process ends.
    telemetry.shutdown();
    code
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut causes = Vec::new();
    let mut source = e.source();
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    causes.join(": ")
}

fn run(command: Command, strict_except: &[String]) -> ExitCode {
    if let Err(e) = operon::script::sandbox::set_strict_exceptions(strict_except) {
        eprintln!("error: --strict-except (OPERON_STRICT_EXCEPT): {e}");
        return ExitCode::FAILURE;
    }
    let result = match command {
        Command::Op(cmd) => op::run(cmd),
        Command::Hook(cmd) => hook::run(cmd),
        Command::Modules(cmd) => modules::run(cmd),
        Command::Module(cmd) => module::run(cmd),
        Command::Run(args) => diagnose::run(*args),
        Command::Test(args) => test::run(*args),
        Command::Validate(args) => diagnose::validate(args),
        Command::Graph(args) => diagnose::draw(args),
        Command::Version { output } => version(output),
        Command::Serve(args) => serve::run(*args),
        Command::Audit(args) => audit::run(*args),
        Command::Agent(args) => agent::run(*args),
        Command::Debug(cmd) => debug::run(cmd),
        Command::Convert(cmd) => convert::run(cmd),
        Command::SeccompProfile(args) => seccomp::run(args),
        Command::Crds => {
            print!("{}", operon::api::crds_yaml());
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, `: `-separated as anyhow's `{:#}` prints them,
/// but a cause the line already holds is not repeated: a library error that names its
/// cause in its message keeps it as its `source()` too.
pub(crate) fn error_text(error: &anyhow::Error) -> String {
    operon::error_text::error_chain(error.as_ref())
}

fn version(format: output::Format) -> anyhow::Result<ExitCode> {
    let wit: Vec<String> = (operon::sandbox::WitVersion::ALL.iter())
        .map(|v| format!("operon:engine@{}", v.as_str()))
        .collect();
    let info = serde_json::json!({
        "operon": env!("CARGO_PKG_VERSION"),
        "wit": wit,
        "wasmtime": "48.0.8",
        "worlds": ["operation", "hook"],
    });
    match format {
        output::Format::Table => {
            println!("operon   {}", env!("CARGO_PKG_VERSION"));
            println!("wit      {} (worlds: operation, hook)", wit.join(", "));
            println!("wasmtime 48.0.8");
        }
        other => output::print_structured(other, &info)?,
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::error_text;

    /// An error that names its cause in its message and keeps it as its source.
    #[derive(Debug, thiserror::Error)]
    #[error("hook a.sh: {0}")]
    struct Named(#[source] std::io::Error);

    #[test]
    fn a_cause_the_message_already_names_is_not_repeated() {
        let e = anyhow::Error::new(Named(std::io::Error::other("gone"))).context("loading hooks");
        assert_eq!(error_text(&e), "loading hooks: hook a.sh: gone");
        let e = anyhow::Error::new(std::io::Error::other("gone")).context("loading hooks");
        assert_eq!(error_text(&e), format!("{e:#}"));
    }
}
