//! Operon's own data model: the values that cross module boundaries.
//!
//! Binding contexts and snapshots, patch and metric operations, hook configurations,
//! runner contexts, operation and hook inputs and outputs, validating and conversion
//! responses, log records. The cluster layer, the hook engine, metrics, the
//! shell-operator format, the script sandbox and the CLI all speak these types; only
//! `sandbox::convert` knows the WIT-generated types and translates between the two, so
//! a new version of the WIT package changes that one place.
//!
//! Kubernetes objects, patches and filter results are carried as JSON text (`String`):
//! that is how guests receive them, how snapshots are stored compactly, and what a
//! script hook's files hold. This module does no I/O and has no behaviour beyond small
//! helpers on the types themselves.

pub mod config;
mod context;
mod io;
mod metric;
mod patch;
mod selector;

pub use config::{
    AdmissionBindingConfig, ConfigVersion, ConversionBindingConfig, ConversionRule, Enforcement,
    HookConfig, HookSettings, KubernetesBindingConfig, MatchCondition, ScheduleBindingConfig,
    WebhookRule,
};
pub use context::{BindingContext, BindingType, ObjectAndFilter, Snapshot};
pub use io::{
    ConversionResponse, HookInput, HookOutput, LogLevel, LogRecord, OperationInput,
    OperationOutput, OwnerReference, RunnerContext, ValidatingResponse,
};
pub use metric::{MetricOperation, Observation, Sample};
pub use patch::{CreateSpec, JqPatchSpec, ObjectRef, PatchOperation, PatchSpec};
pub use selector::{
    FieldOperator, FieldRequirement, LabelOperator, LabelRequirement, LabelSelector,
    NamespaceSelector, WatchEvent,
};

/// The group and version of an `apiVersion` (`v1` → ("", "v1"), `apps/v1` → ("apps",
/// "v1")), or why it is malformed.
pub fn split_api_version(api_version: &str) -> Result<(String, String), String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    if version.is_empty()
        || version.contains('/')
        || (api_version.contains('/') && group.is_empty())
    {
        return Err(format!(
            "apiVersion {api_version:?} is not of the form `version` or `group/version`"
        ));
    }
    Ok((group.to_owned(), version.to_owned()))
}
