//! The one interface every hook implements, and its wasm implementation.

use crate::runner::BoxFuture;
use crate::sandbox::bindings::kubernetes::PatchOperation;
use crate::sandbox::bindings::metrics::MetricOperation;
use crate::sandbox::{
    CallLimits, HookConfig, HookInput, HookModule, HookOutput, LogRecord, Sandbox,
};
use std::time::Duration;

/// Why a hook could not be configured or run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HookError {
    /// The hook's program failed to give its configuration.
    #[error("hook {hook}: cannot get its configuration: {reason}")]
    Configure {
        /// The hook's name.
        hook: String,
        /// Why.
        reason: String,
    },
    /// A run failed (the hook errored, timed out, hit a limit...).
    #[error("{0}")]
    Run(String),
}

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

/// A hook, whatever runs it.
pub trait Hook: Send + Sync {
    /// The hook's name (its file name, relative to the hooks directory).
    fn name(&self) -> &str;

    /// Asks the hook for its configuration (shell-operator's `--config`).
    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>>;

    /// Runs the hook once with `input`, stopping it at `timeout`.
    fn handle<'a>(&'a self, input: &'a HookInput, timeout: Duration) -> BoxFuture<'a, HookRun>;
}

/// A hook that is a wasm component of the `hook` world.
#[derive(Debug, Clone)]
pub struct WasmHook {
    name: String,
    sandbox: Sandbox,
    module: HookModule,
    /// Limits besides the timeout, which comes with each run.
    limits: CallLimits,
}

impl WasmHook {
    /// A hook named `name` running `module`.
    pub fn new(name: String, sandbox: Sandbox, module: HookModule, limits: CallLimits) -> Self {
        Self {
            name,
            sandbox,
            module,
            limits,
        }
    }
}

impl Hook for WasmHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async move {
            let report = self
                .sandbox
                .configure_hook(&self.module, &self.name, &self.limits)
                .await;
            report.outcome.map_err(|e| HookError::Configure {
                hook: self.name.clone(),
                reason: e.to_string(),
            })
        })
    }

    fn handle<'a>(&'a self, input: &'a HookInput, timeout: Duration) -> BoxFuture<'a, HookRun> {
        Box::pin(async move {
            let limits = CallLimits {
                timeout,
                ..self.limits.clone()
            };
            let report = self.sandbox.handle_hook(&self.module, input, &limits).await;
            HookRun {
                outcome: report.outcome.map_err(|e| HookError::Run(e.to_string())),
                patches: report.patches,
                metrics: report.metrics,
                logs: report.logs,
                stdout: report.stdout,
                stderr: report.stderr,
                elapsed: report.elapsed,
            }
        })
    }
}
