//! Typed failures of the sandbox: loading a module and calling it.
//!
//! Every message says what happened and what the user can change.

use super::host::HostLimitExceeded;
use std::path::PathBuf;
use std::time::Duration;

/// Why a component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read module {path}: {source}")]
    Read {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not WebAssembly at all.
    #[error("{name} is not a WebAssembly file (it does not start with \\0asm)")]
    NotWasm {
        /// The module's name or digest.
        name: String,
    },
    /// A core module was given where a component is needed.
    #[error(
        "{name} is a core WebAssembly module, not a component: build it with \
         `cargo build --target wasm32-wasip2` (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule {
        /// The module's name or digest.
        name: String,
    },
    /// The component failed to compile.
    #[error("{name} is not a valid component: {reason}")]
    Invalid {
        /// The module's name or digest.
        name: String,
        /// What the compiler reported.
        reason: String,
    },
    /// The component implements another world than the one asked for.
    #[error(
        "{name} is a component for the `{found}` world, but an `{expected}` was expected{hint}"
    )]
    WrongWorld {
        /// The module's name or digest.
        name: String,
        /// The world the caller needs.
        expected: &'static str,
        /// The world the component implements, as far as its exports tell.
        found: String,
        /// What the user can do about it.
        hint: &'static str,
    },
    /// The component lacks an export its world requires, or has one of the wrong type.
    #[error(
        "{name} does not implement the `{world}` world of operon:engine ({}): {reason}; \
         build it with operon-sdk (`operon_sdk::{macro_name}!`)",
        super::module::LINKED_VERSIONS
    )]
    MissingExport {
        /// The module's name or digest.
        name: String,
        /// The world the caller needs.
        world: &'static str,
        /// What is missing.
        reason: String,
        /// The SDK macro that generates the export.
        macro_name: &'static str,
    },
    /// The component imports something the host does not provide.
    #[error(
        "{name} imports something Operon does not provide: {reason}. Operon provides WASI 0.2 \
         (with no files, environment or network) and operon:engine {} (log, kubernetes, metrics)",
        super::module::LINKED_VERSIONS
    )]
    Incompatible {
        /// The module's name or digest.
        name: String,
        /// What wasmtime reported.
        reason: String,
    },
}

/// Which bounded output a guest overran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputKind {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// The results and output text returned by the guest.
    Result,
    /// Log records.
    Logs,
    /// Patch operations (count or bytes).
    Patches,
    /// Metric operations.
    Metrics,
}

impl std::fmt::Display for OutputKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OutputKind::Stdout => "stdout",
            OutputKind::Stderr => "stderr",
            OutputKind::Result => "the returned result",
            OutputKind::Logs => "log output",
            OutputKind::Patches => "patch operations",
            OutputKind::Metrics => "metric operations",
        })
    }
}

/// Why a call failed. The engine keeps serving calls after any of these.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The call ran past its deadline.
    #[error("timed out after {}: raise the timeout or make the guest finish sooner", humantime::format_duration(*.limit))]
    Timeout {
        /// The deadline that was exceeded.
        limit: Duration,
    },
    /// The guest asked for more memory than allowed.
    #[error(
        "exceeded the memory limit of {limit} bytes (it asked for {requested} bytes): \
         raise the memory limit or make the guest use less"
    )]
    MemoryLimit {
        /// The limit.
        limit: u64,
        /// The total the guest asked for.
        requested: u64,
    },
    /// The guest overran a bounded output.
    #[error("{what} exceeded its limit ({detail}): write less or raise the limit")]
    OutputTooLarge {
        /// Which output.
        what: OutputKind,
        /// The limit, in words.
        detail: String,
    },
    /// The guest recursed deeper than the wasm stack allows.
    #[error("wasm stack overflow: the guest recursed too deeply (stack limit {limit} bytes)")]
    StackOverflow {
        /// The configured maximum wasm stack.
        limit: usize,
    },
    /// The guest trapped (a panic, an `unreachable`, an out-of-bounds access...).
    #[error("guest trapped: {}", panic.as_deref().map_or_else(|| message.clone(), |p| format!("panicked: {p}")))]
    Trap {
        /// What wasmtime reported, with the wasm backtrace.
        message: String,
        /// The guest's panic message, recovered from its stderr, when it panicked.
        panic: Option<String>,
    },
    /// The guest returned an error.
    #[error("{0}")]
    Failed(String),
    /// The engine could not start the call (for example every instance slot is busy).
    #[error("could not start the call: {0}")]
    Start(String),
}

impl CallError {
    /// A stable, kebab-case name of the failure, for machine-readable output and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Timeout { .. } => "timeout",
            CallError::MemoryLimit { .. } => "memory-limit",
            CallError::OutputTooLarge { .. } => "output-too-large",
            CallError::StackOverflow { .. } => "stack-overflow",
            CallError::Trap { .. } => "trap",
            CallError::Failed(_) => "failed",
            CallError::Start(_) => "start",
        }
    }

    /// Maps a budget exhausted through a host import to the output it concerns.
    pub(crate) fn from_host_limit(limit: HostLimitExceeded) -> Self {
        let what = match limit {
            HostLimitExceeded::Logs { .. } => OutputKind::Logs,
            HostLimitExceeded::PatchOperations { .. } | HostLimitExceeded::PatchBytes { .. } => {
                OutputKind::Patches
            }
            HostLimitExceeded::MetricOperations { .. } => OutputKind::Metrics,
        };
        CallError::OutputTooLarge {
            what,
            detail: limit.to_string(),
        }
    }
}
