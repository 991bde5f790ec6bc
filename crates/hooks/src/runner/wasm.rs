//! A hook that is a wasm component of the `hook` world, called through the wasm
//! sandbox.

use super::{ConfigureError, Hook, HookError, HookRun};
use futures::future::BoxFuture;
use operon_data::model::{HookConfig, HookInput};
use operon_sandbox::{CallLimits, HookModule, Sandbox};
use std::sync::Arc;
use std::time::Duration;

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
                reason: Arc::new(ConfigureError::Call(e)),
            })
        })
    }

    fn handle(&self, input: HookInput, timeout: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        Box::pin(async move {
            let limits = CallLimits {
                timeout,
                ..self.limits.clone()
            };
            let report = self
                .sandbox
                .handle_hook(&self.module, &input, &limits)
                .await;
            (HookRun::from(report), input)
        })
    }
}
