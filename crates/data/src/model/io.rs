//! What an operation or a hook receives and returns, and the logs it leaves.

use super::context::BindingContext;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The object on whose behalf a run happens, e.g. the Diagnosis or the Hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerReference {
    /// `apiVersion` of the owner, e.g. `operon.dev/v1alpha1`.
    pub api_version: String,
    /// `kind` of the owner, e.g. `Diagnosis`.
    pub kind: String,
    /// `metadata.name` of the owner.
    pub name: String,
    /// `metadata.uid` of the owner; empty when the owner is not stored in a cluster.
    pub uid: String,
}

/// Where and how a run happens: the fields of Capact's runner context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerContext {
    /// A name for this run, unique enough to correlate logs (e.g. `diagnosis-x/node-3`).
    pub name: String,
    /// When true the run must not change anything; submitted patches are discarded.
    pub dry_run: bool,
    /// The wall-clock budget of this run in milliseconds.
    pub timeout_ms: u64,
    /// The Kubernetes node the run is about or pinned to, when there is one.
    pub node: Option<String>,
    /// The namespace the run belongs to, when there is one.
    pub namespace: Option<String>,
    /// The object that asked for this run, when there is one.
    pub owner: Option<OwnerReference>,
    /// The cluster the run happens in, when the engine names it (`OPERON_CLUSTER_NAME`).
    pub cluster: Option<String>,
}

impl RunnerContext {
    /// The context of run `name` with `timeout` (in whole milliseconds, saturating),
    /// about no node, namespace, owner or named cluster, not a dry run.
    pub fn new(name: impl Into<String>, timeout: std::time::Duration) -> Self {
        Self {
            name: name.into(),
            dry_run: false,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            node: None,
            namespace: None,
            owner: None,
            cluster: None,
        }
    }
}

/// What an operation receives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationInput {
    /// Where and how the operation runs.
    pub context: RunnerContext,
    /// Parameters overlaid by the results of earlier operations, plus the built-ins.
    pub parameters: BTreeMap<String, String>,
    /// Only the results of earlier operations.
    pub results: BTreeMap<String, String>,
    /// Positional arguments resolved from the Operation's `argKeys`.
    pub args: Vec<String>,
}

/// What an operation returns when it succeeds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationOutput {
    /// Results merged into the Diagnosis' `operationResults`; when a guest repeats a
    /// key the last value wins.
    pub results: BTreeMap<String, String>,
    /// Free-form human-readable output.
    pub output: String,
}

/// What a hook receives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookInput {
    /// Where and how the hook runs.
    pub context: RunnerContext,
    /// The contexts of this run; combined runs carry several, oldest first.
    pub binding_contexts: Vec<BindingContext>,
}

/// The answer to an admission review, validating or mutating.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidatingResponse {
    /// Whether the request is admitted.
    pub allowed: bool,
    /// Why it is denied (shown to the user by kubectl).
    pub message: Option<String>,
    /// Warnings shown to the user even when the request is allowed.
    pub warnings: Vec<String>,
    /// For mutating bindings: a JSON Patch (RFC 6902) as JSON text, applied by the API
    /// server to the object under review.
    pub patch: Option<String>,
}

/// The answer to a conversion review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversionResponse {
    /// Set when the conversion failed; the API server reports it to the client.
    pub failed_message: Option<String>,
    /// The converted objects as JSON text, in the order of the request.
    pub converted_objects: Vec<String>,
}

/// What a hook returns when it succeeds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookOutput {
    /// The answer for a `Validating` or `Mutating` binding context.
    pub validating: Option<ValidatingResponse>,
    /// The answer for a `Conversion` binding context.
    pub conversion: Option<ConversionResponse>,
}

/// The severity of a log record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LogLevel {
    /// Very detailed tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal progress.
    Info,
    /// Something unexpected that was handled.
    Warn,
    /// Something failed.
    Error,
}

impl LogLevel {
    /// The level's name in lower case, as log lines and JSON reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trace => "trace",
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Warn => "warn",
            Self::Error => "error",
        }
    }
}

/// One log record emitted by a guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    /// The severity the guest gave.
    pub level: LogLevel,
    /// The message.
    pub message: String,
    /// Structured fields, in the order the guest gave them.
    pub fields: Vec<(String, String)>,
}
