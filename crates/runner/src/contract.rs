//! The one interface every operation's processor implements: a [`Runner`] takes a
//! [`RunRequest`] (the input map, the runner context, a timeout) and returns results
//! or a failure. Its implementations are the crate's other modules.

use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Arc;
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
#[derive(Debug, Clone)]
pub struct RunError {
    /// What went wrong, for the node record.
    pub message: String,
    /// Results the failed run still reports (a script's `operation.<key>.error` and
    /// `operation.<key>.output`), kept so users can see what happened.
    pub results: BTreeMap<String, String>,
    /// The error that made the run fail, when one did (the client's, the sandbox's...),
    /// for callers that match on it; its text is already in `message`.
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

// Written by hand so that `source()` is the kept error itself, which a caller can
// downcast, not the `Arc` around it.
impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Two failures are the same when they say and report the same: the source is how the
/// message came about.
impl PartialEq for RunError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message && self.results == other.results
    }
}

impl Eq for RunError {}

impl RunError {
    /// A failure with a message and no results.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            results: BTreeMap::new(),
            source: None,
        }
    }

    /// A failure that `source` caused, said in `message` (which holds its text).
    pub fn caused_by(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            source: Some(Arc::new(source)),
            ..Self::new(message)
        }
    }

    /// A failure that is `source`, in its own words.
    pub fn from_source(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::caused_by(source.to_string(), source)
    }

    /// The same failure with the results the failed run reports.
    pub fn with_results(self, results: BTreeMap<String, String>) -> Self {
        Self { results, ..self }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_failure_keeps_the_error_that_caused_it() {
        let parse = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let text = parse.to_string();
        let caused = RunError::caused_by(format!("the body is not JSON: {parse}"), parse);
        assert_eq!(caused.message, format!("the body is not JSON: {text}"));
        let source = caused.source().expect("a source");
        assert!(source.is::<serde_json::Error>(), "{source:?}");

        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let own = RunError::from_source(io);
        assert_eq!(own.message, "no such file");
        let source = own.source().expect("a source");
        assert_eq!(
            source
                .downcast_ref::<std::io::Error>()
                .map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
        assert!(RunError::new("refused").source().is_none());
    }

    #[test]
    fn failures_are_equal_when_they_say_and_report_the_same() {
        let io = std::io::Error::other("gone");
        let results = BTreeMap::from([("operation.a.error".to_owned(), "x".to_owned())]);
        let with_source = RunError::from_source(io).with_results(results.clone());
        assert_eq!(with_source, RunError::new("gone").with_results(results));
        assert_ne!(with_source, RunError::new("gone"));
    }
}
