//! The wasm runner: an operation component called through the sandbox.

use super::context::{Platform, RunContext};
use super::node_paths::NodeRoot;
use super::{DryRun, RunError, RunOutput, RunRequest, Runner};
use futures::future::BoxFuture;
use operon_data::model::{OperationInput, PatchOperation};
use operon_sandbox::{CallLimits, OperationModule, ReadOnlyDir, Sandbox};
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
    /// The node's directories the guest may read (`wasm.readOnlyPaths`), each at its
    /// node path.
    read_only: Vec<std::path::PathBuf>,
    /// Where the node's files are.
    node_root: NodeRoot,
    /// The platform part of the runner context (the cluster's name).
    platform: Platform,
    /// The Operation's name, in the records of what the guest prints.
    operation: String,
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
            read_only: Vec::new(),
            node_root: NodeRoot::default(),
            platform: Platform::default(),
            operation: String::new(),
        }
    }

    /// Names the Operation in the records of what the guest prints.
    pub(crate) fn with_operation(mut self, name: &str) -> Self {
        self.operation = name.to_owned();
        self
    }

    /// Lets the guest read the node's directories `paths`, found under `root`.
    pub(crate) fn with_read_only(mut self, paths: Vec<std::path::PathBuf>, root: NodeRoot) -> Self {
        self.read_only = paths;
        self.node_root = root;
        self
    }

    /// The runner, telling guests they run on `platform`.
    pub(crate) fn with_platform(mut self, platform: Platform) -> Self {
        self.platform = platform;
        self
    }
}

impl WasmRunner {
    /// One call of the guest: its output and the patch operations it submitted (which
    /// the pipeline does not apply; a dry run reports them).
    async fn call(
        &self,
        request: &RunRequest,
    ) -> Result<(RunOutput, Vec<PatchOperation>), RunError> {
        // A granted directory missing on this node fails the run by name rather than
        // leaving the guest to report a file it cannot find.
        let mut read_only_dirs = Vec::with_capacity(self.read_only.len());
        for declared in &self.read_only {
            let found = self
                .node_root
                .resolve(declared)
                .map_err(|e| RunError::caused_by(format!("wasm.readOnlyPaths: {e}"), e))?;
            match found {
                Some(host) if host.is_dir() => read_only_dirs.push(ReadOnlyDir {
                    host,
                    guest: declared.to_string_lossy().into_owned(),
                }),
                _ => {
                    return Err(RunError::new(format!(
                        "wasm.readOnlyPaths: {} is not a directory on this node",
                        declared.display()
                    )));
                }
            }
        }
        let mut parameters = self.config.clone();
        parameters.extend(request.input.clone());
        let input = OperationInput {
            context: RunContext::new(request, &self.platform).wasm(),
            parameters,
            results: request.results.clone(),
            args: Vec::new(),
        };
        let limits = CallLimits {
            timeout: request.timeout,
            read_only_dirs,
            ..self.limits.clone()
        };
        let report = self
            .sandbox
            .run_operation(&self.module, input, &limits)
            .await;
        let source = crate::output_log::Source::Step {
            run: &request.name,
            operation: &self.operation,
        };
        crate::output_log::log_output(source, "stdout", &report.stdout);
        crate::output_log::log_output(source, "stderr", &report.stderr);
        crate::output_log::log_records(source, &report.logs);
        match report.outcome {
            Ok(out) => Ok((
                RunOutput {
                    results: out.results,
                    output: out.output,
                },
                report.patches,
            )),
            Err(e) => Err(RunError::from_source(e)),
        }
    }
}

impl Runner for WasmRunner {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move { self.call(request).await.map(|(output, _)| output) })
    }

    fn dry_run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<DryRun, RunError>> {
        Box::pin(async move {
            let (output, patches) = self.call(request).await?;
            Ok(DryRun {
                action: format!(
                    "ran in the wasm sandbox with dryRun set; {} patch operations recorded, not applied",
                    patches.len()
                ),
                detail: (!patches.is_empty()).then(|| serde_json::json!({ "patches": patches })),
                output,
            })
        })
    }
}
