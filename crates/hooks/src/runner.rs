//! The one interface every hook implements, whatever runs it: [`Hook`] gives its
//! configuration and handles runs with typed binding contexts, returning typed patches,
//! metrics and responses ([`HookRun`]). The engine cannot tell one kind of hook from
//! another.
//!
//! The implementations live beside the contract: `wasm` (a component of the `hook`
//! world, in the wasm sandbox) and `script` (a shell-operator hook, run unchanged in
//! the script sandbox, whose files become the same typed values).

pub(crate) mod cluster_access;
mod error;
pub mod job;
pub(crate) mod script;
pub(crate) mod wasm;

pub use cluster_access::{AccessScope, ClusterAccess, ClusterAccessError};
pub use error::{ConfigureError, HookError};
pub use script::{
    DiscoveryError, ExtraFiles, ScriptHook, ScriptHookError, ScriptHookSettings, discover,
};
pub use wasm::WasmHook;

use futures::future::BoxFuture;
use operon_data::model::{
    HookConfig, HookInput, HookOutput, LogRecord, MetricOperation, PatchOperation,
};
use std::time::Duration;

/// Everything one hook run produced. Patches and metrics are applied by the engine
/// only when `outcome` is `Ok`.
#[derive(Debug, Clone)]
pub struct HookRun {
    /// The hook's answer, or why the run failed.
    pub outcome: Result<HookOutput, HookError>,
    /// Patch operations submitted, in order.
    pub patches: Vec<PatchOperation>,
    /// Metric operations submitted, in order.
    pub metrics: Vec<MetricOperation>,
    /// Log records.
    pub logs: Vec<LogRecord>,
    /// Captured stdout.
    pub stdout: String,
    /// Captured stderr.
    pub stderr: String,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
}

impl HookRun {
    /// Logs everything the run printed or emitted ([`operon_runner::output_log`]).
    pub fn log_output(&self, source: operon_runner::output_log::Source<'_>) {
        self.log_output_at(source, None);
    }

    /// [`HookRun::log_output`] under the hook's own log level (`None`: every record at
    /// its level).
    pub fn log_output_at(
        &self,
        source: operon_runner::output_log::Source<'_>,
        level: Option<operon_data::model::LogLevel>,
    ) {
        use operon_runner::output_log::{log_output_at, log_records_at};
        log_output_at(source, "stdout", &self.stdout, level);
        log_output_at(source, "stderr", &self.stderr, level);
        log_records_at(source, &self.logs, level);
    }
}

impl From<operon_sandbox::CallReport<HookOutput>> for HookRun {
    /// The run a wasm hook's call made (its values patches, if any, are left out: the
    /// caller takes them first).
    fn from(report: operon_sandbox::CallReport<HookOutput>) -> Self {
        Self {
            outcome: report.outcome.map_err(HookError::Call),
            patches: report.patches,
            metrics: report.metrics,
            logs: report.logs,
            stdout: report.stdout,
            stderr: report.stderr,
            elapsed: report.elapsed,
        }
    }
}

/// A hook, whatever runs it.
pub trait Hook: Send + Sync {
    /// The hook's name (its file name, relative to the hooks directory).
    fn name(&self) -> &str;

    /// Asks the hook for its configuration (shell-operator's `--config`).
    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>>;

    /// Runs the hook once with `input`, stopping it at `timeout`. The input is handed
    /// back unchanged with the run, so the caller keeps its contexts (which can hold
    /// thousands of objects) without copying them.
    fn handle(&self, input: HookInput, timeout: Duration) -> BoxFuture<'_, (HookRun, HookInput)>;
}
