//! KubeDiag `scriptRunner` operations through the pipeline's [`Runner`] contract, run in
//! the script sandbox.
//!
//! The semantics are the pipeline's script runner's: `argKeys` values become positional
//! arguments (a missing key is an error, not a silent shift), stdout and stderr
//! interleaved become `operation.<key>.output`, a non-zero exit or a timeout fails the
//! run with `operation.<key>.error`, and the shebang is honoured (a script without one
//! runs under `/bin/sh`, as KubeDiag forces). The runner context reaches the script as
//! `OPERON_*` variables (see [`super::context`]); a dry run keeps the script off the
//! network, so nothing outside the sandbox can change.

use super::context::{Platform, RunContext};
use super::node_paths::{NODE_ROOT_ENV, NodeRoot};
use super::{DryRun, RunError, RunOutput, RunRequest, Runner};
use futures::future::BoxFuture;
use operon_script::{Limits, OutputMode, RunStatus, SandboxRequest, ScriptSandbox, ScriptStore};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a runner's script text comes from.
#[derive(Debug, Clone)]
pub enum ScriptSource {
    /// The text itself (an Operation's `script` field).
    Inline(String),
    /// A script kept in the agent's store, read at each run.
    Stored {
        /// The store.
        store: Arc<ScriptStore>,
        /// The script's name (its Operation's name).
        name: String,
    },
}

/// Runs one KubeDiag script operation in the sandbox.
#[derive(Debug, Clone)]
pub struct SandboxedScriptRunner {
    sandbox: ScriptSandbox,
    source: ScriptSource,
    /// Input keys whose values are the positional arguments.
    arg_keys: Vec<String>,
    /// The key of `operation.<key>.output` / `operation.<key>.error`.
    result_key: Option<String>,
    /// Environment variables the Operation declares, besides the sandbox's basics.
    env: Vec<(String, String)>,
    /// Whether the Operation asked for the network.
    network: bool,
    /// The node's paths the Operation may read.
    read_only: Vec<std::path::PathBuf>,
    /// Where the node's files are.
    node_root: NodeRoot,
    /// Output beyond this many bytes fails the run.
    output_limit: usize,
    /// Limits, when the Operation overrides the sandbox's.
    limits: Option<Limits>,
    /// The Operation's strict-mode field, when it has one.
    strict: Option<bool>,
    /// The platform part of the runner context.
    platform: Platform,
    /// The Operation's name, in the records of what the script prints.
    operation: String,
}

impl SandboxedScriptRunner {
    /// A runner for `source`, KubeDiag style.
    pub fn new(
        sandbox: ScriptSandbox,
        source: ScriptSource,
        arg_keys: Vec<String>,
        result_key: Option<String>,
    ) -> Self {
        Self {
            sandbox,
            source,
            arg_keys,
            result_key,
            env: Vec::new(),
            network: false,
            read_only: Vec::new(),
            node_root: NodeRoot::default(),
            output_limit: 1 << 20,
            limits: None,
            strict: None,
            platform: Platform::default(),
            operation: String::new(),
        }
    }

    /// Names the Operation in the records of what the script prints.
    pub(crate) fn with_operation(mut self, name: &str) -> Self {
        self.operation = name.to_owned();
        self
    }

    /// Tells scripts which platform they run on (`OPERON_CLUSTER`).
    pub(crate) fn with_platform(mut self, platform: Platform) -> Self {
        self.platform = platform;
        self
    }

    /// Passes these variables to the script (the Operation's allow-list).
    pub(crate) fn with_env(mut self, env: Vec<(String, String)>) -> Self {
        self.env = env;
        self
    }

    /// Lets the script read `paths` of the node.
    pub fn with_read_only(mut self, paths: Vec<std::path::PathBuf>) -> Self {
        self.read_only = paths;
        self
    }

    /// Looks the read-only paths up under `root`, and tells the script where it is
    /// (`$OPERON_NODE_ROOT`).
    pub fn with_node_root(mut self, root: NodeRoot) -> Self {
        self.node_root = root;
        self
    }

    /// Grants the network.
    pub(crate) fn with_network(mut self, network: bool) -> Self {
        self.network = network;
        self
    }

    /// Sets strict mode for this Operation.
    pub(crate) fn with_strict(mut self, strict: bool) -> Self {
        self.strict = Some(strict);
        self
    }

    fn args(&self, input: &BTreeMap<String, String>) -> Result<Vec<String>, RunError> {
        self.arg_keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                input.get(key).cloned().ok_or_else(|| {
                    RunError::new(format!(
                        "argKeys[{i}] is {key:?}, which is not among the input keys; \
                         pass it as a parameter or produce it in an earlier operation"
                    ))
                })
            })
            .collect()
    }

    fn failure(&self, message: String, output: &str, error: &str) -> RunError {
        let mut results = BTreeMap::new();
        if let Some(key) = &self.result_key {
            results.insert(format!("operation.{key}.output"), output.to_owned());
            results.insert(format!("operation.{key}.error"), error.to_owned());
        }
        RunError::new(message).with_results(results)
    }

    async fn run_once(&self, request: &RunRequest) -> Result<RunOutput, RunError> {
        let args = self.args(&request.input)?;
        let text = match &self.source {
            ScriptSource::Inline(text) => text.clone(),
            ScriptSource::Stored { store, name } => store
                .read(name)
                .map_err(|e| RunError::caused_by(format!("cannot read the script: {e}"), e))?,
        };
        let run = self.sandbox.prepare().map_err(RunError::from_source)?;
        let script = run
            .create_file("script", text.as_bytes(), true)
            .map_err(RunError::from_source)?;
        let (program, args) = if text.starts_with("#!") {
            (script, args)
        } else {
            let mut all = vec![script.display().to_string()];
            all.extend(args);
            ("/bin/sh".into(), all)
        };
        let mut sandboxed = SandboxRequest::new(request.name.clone(), program);
        sandboxed.args = args;
        sandboxed.env = self.env.clone();
        sandboxed
            .env
            .extend(RunContext::new(request, &self.platform).env());
        // A dry run changes nothing outside the sandbox: without a network a script
        // cannot reach the API server or anything else.
        sandboxed.network = self.network && !request.dry_run;
        sandboxed
            .env
            .push((NODE_ROOT_ENV.to_owned(), self.node_root.env_value()));
        // Looked up at each run: the node's files come and go (a journal rotated in).
        sandboxed.read_only = Vec::with_capacity(self.read_only.len());
        for declared in &self.read_only {
            let found = self
                .node_root
                .resolve(declared)
                .map_err(|e| RunError::caused_by(format!("scriptRunner.readOnlyPaths: {e}"), e))?;
            sandboxed.read_only.extend(found);
        }
        sandboxed.timeout = request.timeout;
        sandboxed.output = OutputMode::Combined;
        sandboxed.output_limit = self.output_limit;
        sandboxed.limits = self.limits.clone();
        sandboxed.strict = self.strict;
        let outcome = self
            .sandbox
            .run(&run, &sandboxed)
            .await
            .map_err(RunError::from_source)?;
        let output = String::from_utf8_lossy(&outcome.stdout).into_owned();
        crate::output_log::log_output(
            crate::output_log::Source::Step {
                run: &request.name,
                operation: &self.operation,
            },
            "combined",
            &output,
        );
        match outcome.status {
            RunStatus::Exited(0) => {
                let mut results = BTreeMap::new();
                if let Some(key) = &self.result_key {
                    results.insert(format!("operation.{key}.output"), output.clone());
                }
                Ok(RunOutput { results, output })
            }
            RunStatus::TimedOut => Err(self.failure(
                format!(
                    "script timed out after {}; every process of the run was killed",
                    humantime::format_duration(request.timeout)
                ),
                &output,
                "timeout",
            )),
            RunStatus::OutputExceeded => Err(self.failure(
                format!(
                    "script output exceeded {} bytes; the script was killed",
                    self.output_limit
                ),
                &output,
                "output too large",
            )),
            status @ RunStatus::Exited(_) => {
                let tail = output
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("");
                let message = if tail.is_empty() {
                    format!("script failed ({status})")
                } else {
                    format!("script failed ({status}): {tail}")
                };
                Err(self.failure(message, &output, &status.to_string()))
            }
        }
    }
}

impl Runner for SandboxedScriptRunner {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(self.run_once(request))
    }

    fn dry_run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<DryRun, RunError>> {
        Box::pin(async move {
            let output = self.run_once(request).await?;
            let network = if self.network {
                "without the network it asks for"
            } else {
                "without network"
            };
            Ok(DryRun {
                action: format!("ran in the script sandbox {network}, with OPERON_DRY_RUN=true"),
                detail: None,
                output,
            })
        })
    }
}
