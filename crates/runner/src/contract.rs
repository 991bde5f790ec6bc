//! The one interface every operation's processor implements: a [`Runner`] takes a
//! [`RunRequest`] (the input map, the runner context, a timeout) and returns results
//! or a failure. Its implementations are the crate's other modules.

use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::time::Duration;

/// One run of one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    /// A name for the run, for logs (e.g. `default/diag-1/node-3`).
    pub name: String,
    /// The full input: parameters overlaid by earlier results, plus built-ins.
    pub input: BTreeMap<String, String>,
    /// Only the results of earlier operations.
    pub results: BTreeMap<String, String>,
    /// The node the run is about.
    pub node: Option<String>,
    /// The namespace the run belongs to.
    pub namespace: Option<String>,
    /// `Kind/name` of the object the run is for.
    pub owner: Option<(String, String, String)>,
    /// When true the operation must not change anything.
    pub dry_run: bool,
    /// Wall-clock budget.
    pub timeout: Duration,
}

/// What a successful run returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOutput {
    /// Results merged into the Diagnosis.
    pub results: BTreeMap<String, String>,
    /// Free-form output text (stdout of a script, `output` of a wasm operation).
    pub output: String,
}

impl RunOutput {
    /// Bytes of results and output, as recorded per node.
    pub fn size(&self) -> u64 {
        let results: usize = self.results.iter().map(|(k, v)| k.len() + v.len()).sum();
        (results + self.output.len()) as u64
    }
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RunError {
    /// What went wrong, for the node record.
    pub message: String,
    /// Results the failed run still reports (a script's `operation.<key>.error` and
    /// `operation.<key>.output`), kept so users can see what happened.
    pub results: BTreeMap<String, String>,
}

impl RunError {
    /// A failure with a message and no results.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            results: BTreeMap::new(),
        }
    }
}

/// What a step did, or would do, on a dry run.
#[derive(Debug, Clone, PartialEq)]
pub struct DryRun {
    /// One line saying what a real run would do (the Job it would create, the request
    /// it would send, the patches it would submit).
    pub action: String,
    /// The object or request, as JSON, when there is one.
    pub detail: Option<serde_json::Value>,
    /// The step's results: sandboxed steps (wasm, script) still run and return theirs;
    /// the others return none.
    pub output: RunOutput,
}

/// Something that runs an operation.
pub trait Runner: Send + Sync {
    /// Runs once. Must return by `request.timeout` (plus a small grace) whatever the
    /// operation does.
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>>;

    /// Runs `request` (whose `dry_run` is set) with no side effect outside the
    /// sandbox, and says what a real run would do. The default runs the step as it
    /// is, which only runners without side effects of their own may keep: every
    /// runner that reaches beyond its sandbox overrides it.
    fn dry_run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<DryRun, RunError>> {
        Box::pin(async move {
            let output = self.run(request).await?;
            Ok(DryRun {
                action: "ran (the step has no side effects)".to_owned(),
                detail: None,
                output,
            })
        })
    }
}
