//! The custom resources of group `operon.dev/v1alpha1`: Operation, OperationSet,
//! Trigger, Diagnosis, Module, Hook and ModuleConfig, with KubeDiag's field names, their
//! defaults and their validation.
//!
//! Types only, no I/O: the graph, the pipeline and the controllers consume them. Every
//! check reports a [`Problem`] naming the object, the field and the reason, and checks
//! report all problems at once rather than the first.

mod cluster_processor;
mod condition;
mod crd;
mod diagnosis;
mod hook;
mod module;
mod module_config;
mod operation;
mod operation_set;
mod trigger;

pub use cluster_processor::{
    ArgoParameter, ArgoWorkflowProcessor, JobProcessor, JobResources, JobResultSource,
    WorkflowTemplateRef,
};
pub use condition::{Condition, ConditionStatus};
pub use crd::{crds, crds_yaml};
pub use diagnosis::{
    Checkpoint, Diagnosis, DiagnosisPhase, DiagnosisRunOn, DiagnosisSpec, DiagnosisStatus,
    DryRunRecord, FailedPath, NodePhase, NodeRecord, PathNode, PodReference, TargetSelector,
    TargetStatus,
};
pub use hook::{
    AdmissionOverride, Hook, HookBindingStatus, HookDivergence, HookFailure, HookOverrides,
    HookPermissions, HookRunOutcome, HookRunStatus, HookShadowStatus, HookSpec, HookStatus,
    KubernetesOverride, PatchOperationName, PatchPermission, ScheduleOverride, WatchPermission,
    spec_problems as hook_spec_problems,
};
pub use module::{Module, ModuleSource, ModuleSpec, ModuleStatus, ModuleWorld};
pub use module_config::{GLOBAL_MODULE_CONFIG, ModuleConfig, ModuleConfigSpec, ModuleConfigStatus};
use operation::oci_reference_problem;
pub use operation::{
    EnvVar, HostPathStorage, HttpServer, Operation, OperationSpec, Processor, ScriptRunner,
    SecretReference, Storage, WasmJob, WasmProcessor, WasmRunOn,
};
pub use operation_set::{Node, OperationSet, OperationSetSpec, OperationSetStatus};
pub use trigger::{
    CronTemplate, EventSourceRegexp, KubernetesEventRegexp, KubernetesEventTemplate,
    PrometheusAlertRegexp, PrometheusAlertTemplate, RateLimit, SourceTemplate, Trigger,
    TriggerSpec, TriggerStatus,
};

/// The API group of every Operon resource.
pub const GROUP: &str = "operon.dev";
/// The API version of this module's resources.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` as written in manifests.
pub const API_VERSION: &str = "operon.dev/v1alpha1";

/// One thing wrong with one object: which object, which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// `Kind/name`, e.g. `OperationSet/node-diagnosis`.
    pub object: String,
    /// The JSON path of the field, e.g. `spec.adjacencyList[3].to[0]`.
    pub field: String,
    /// What is wrong and, where it helps, what to do.
    pub reason: String,
}

impl Problem {
    /// A problem with `field` of `object`.
    pub fn new(
        object: impl Into<String>,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            object: object.into(),
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.object, self.field, self.reason)
    }
}
