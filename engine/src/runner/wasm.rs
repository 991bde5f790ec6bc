//! The wasm runner: an operation component called through the sandbox.

use super::{RunError, RunOutput, RunRequest, Runner};
use crate::model::{OperationInput, OwnerReference, RunnerContext};
use crate::sandbox::{CallLimits, OperationModule, Sandbox};
use futures::future::BoxFuture;
use std::collections::BTreeMap;

/// Runs an operation component's `run` export.
#[derive(Debug, Clone)]
pub struct WasmRunner {
    sandbox: Sandbox,
    module: OperationModule,
    /// The Operation's `wasm.config`, under every run's input.
    config: BTreeMap<String, String>,
    /// Limits besides the timeout, which comes with each request.
    limits: CallLimits,
}

impl WasmRunner {
    /// A runner for `module` with the Operation's `config` and the call limits.
    pub fn new(
        sandbox: Sandbox,
        module: OperationModule,
        config: BTreeMap<String, String>,
        limits: CallLimits,
    ) -> Self {
        Self {
            sandbox,
            module,
            config,
            limits,
        }
    }
}

impl Runner for WasmRunner {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move {
            let mut parameters = self.config.clone();
            parameters.extend(request.input.clone());
            let input = OperationInput {
                context: RunnerContext {
                    name: request.name.clone(),
                    dry_run: request.dry_run,
                    timeout_ms: u64::try_from(request.timeout.as_millis()).unwrap_or(u64::MAX),
                    node: request.node.clone(),
                    namespace: request.namespace.clone(),
                    owner: request
                        .owner
                        .clone()
                        .map(|(kind, name, uid)| OwnerReference {
                            api_version: crate::api::API_VERSION.to_owned(),
                            kind,
                            name,
                            uid,
                        }),
                },
                parameters,
                results: request.results.clone(),
                args: Vec::new(),
            };
            let limits = CallLimits {
                timeout: request.timeout,
                ..self.limits.clone()
            };
            let report = self
                .sandbox
                .run_operation(&self.module, input, &limits)
                .await;
            for record in &report.logs {
                tracing::debug!(run = %request.name, level = ?record.level, "{}", record.message);
            }
            match report.outcome {
                Ok(out) => Ok(RunOutput {
                    results: out.results,
                    output: out.output,
                }),
                Err(e) => Err(RunError::new(e.to_string())),
            }
        })
    }
}
