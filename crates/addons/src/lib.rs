//! addon-operator's modules on Operon's hook engine: a modules directory of `NNN-name/`
//! modules (hooks, values, schemas, an `enabled` program, a Helm chart or manifests)
//! and global hooks, converged by a FIFO task queue as addon-operator does.
//!
//! [`layout`] reads the directories and the modules [`sources`] pulls from `oci://`
//! references ([`requirements`] their `module.yaml`: what a
//! module needs, which orders modules and may disable one), [`values`] and [`schema`] layer and check values,
//! [`config`] reads the ConfigMap, [`module_config`] checks ModuleConfig objects (with
//! Deckhouse's settings `conversions`), `hooks` runs lifecycle hooks with their values
//! files and `bindings` their kubernetes and schedule bindings on the hook engine (and
//! holds the engines whose admission and conversion bindings `operon serve` serves as
//! the module's webhooks: [`engine_source`]),
//! `enabled` decides which modules run, [`render`] turns a module into objects (a
//! real Helm engine or plain manifests), [`apply`] applies them with server-side apply
//! and keeps a release record per module (`crds` applies its `crds/` first), and
//! [`operator`] is the task queue with its lifecycle ([`status`] shows it from
//! outside). Named `addons` so as not to be confused with wasm modules (the runner
//! crate's `store`). This crate must not know about Diagnoses or the processes that run
//! it: `operon modules run` and `operon serve` drive the [`operator`].

#![warn(unreachable_pub)]

pub mod apply;
pub(crate) mod bindings;
pub mod config;
mod config_sources;
pub(crate) mod conversions;
pub(crate) mod crds;
pub(crate) mod enabled;
pub(crate) mod hooks;
pub mod layout;
pub mod metrics;
pub mod module_config;
pub mod operator;
pub mod reload;
pub mod render;
pub mod requirements;
pub mod schema;
pub mod sources;
pub mod status;
mod sync;
mod tasks;
pub mod values;

pub use bindings::{BindingsError, engine_source, owner_of_source};

use std::path::PathBuf;

/// Why something about modules failed.
#[derive(Debug, thiserror::Error)]
pub enum AddonError {
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file of the layout is malformed.
    #[error("{}: {reason}", path.display())]
    Layout {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A module's `module.yaml` is malformed.
    #[error("module {module}: {}: {}{reason}", path.display(), if field.is_empty() { String::new() } else { format!("{field}: ") })]
    Definition {
        /// The module.
        module: String,
        /// The file.
        path: PathBuf,
        /// The field (`requirements.kubernetes`), empty for the whole file.
        field: String,
        /// Why.
        reason: String,
    },
    /// Modules require each other in a cycle: none could run first.
    #[error("module requirements form a cycle: {}", cycles.iter().map(|c| c.join(", ")).collect::<Vec<_>>().join("; and "))]
    RequirementCycle {
        /// Each cycle's modules, by name.
        cycles: Vec<Vec<String>>,
    },
    /// A module source can never be pulled (not pinned, its registry not allowed, not
    /// a reference).
    #[error("--module-source: {source}")]
    ModuleSource {
        /// Why.
        #[source]
        source: Box<operon_store::oci_modules::OciModuleError>,
    },
    /// A module named on the command line does not exist.
    #[error("no module {0} in the modules directory")]
    UnknownModule(String),
    /// A values schema does not compile.
    #[error("{section}: {which}: {reason}")]
    Schema {
        /// `global` or `module NAME`.
        section: String,
        /// Which schema file.
        which: String,
        /// Why.
        reason: String,
    },
    /// Values do not match their schema.
    #[error("{section} {which} are not valid: {}", problems.join("; "))]
    InvalidValues {
        /// `global` or `module NAME`.
        section: String,
        /// `values` or `config values`.
        which: String,
        /// Every problem, each naming its path.
        problems: Vec<String>,
    },
    /// A values patch cannot be applied.
    #[error("{section}: a values patch does not apply: {reason}")]
    Patch {
        /// `global` or `module NAME`.
        section: String,
        /// Why.
        reason: String,
    },
    /// A hook patched a section other than its own.
    #[error("hook {hook} patched {path}, outside its values section {key}")]
    PatchOutsideSection {
        /// The hook.
        hook: String,
        /// The path it patched.
        path: String,
        /// The section it may patch.
        key: String,
    },
    /// The ModuleConfig objects could not be listed or watched (the kind is served,
    /// so the modules cannot be decided without them).
    #[error("reading the ModuleConfig objects: {0}")]
    ModuleConfigs(operon_cluster::ClusterError),
    /// The ConfigMap holds something that is not values.
    #[error("ConfigMap {configmap}: key {key}: {reason}")]
    ConfigMap {
        /// `namespace/name`.
        configmap: String,
        /// The data key.
        key: String,
        /// Why.
        reason: String,
    },
    /// The ConfigMap cannot be read, watched or written.
    #[error("ConfigMap {configmap}: key {key}: {source}")]
    ConfigMapAccess {
        /// `namespace/name`.
        configmap: String,
        /// The data key written (empty when the whole ConfigMap is read).
        key: String,
        /// Why.
        #[source]
        source: apply::ApplyError,
    },
    /// A hook cannot be used as it is (no such global hook, a lifecycle binding it may
    /// not have), or its Synchronization did not finish in time.
    #[error("{0}")]
    Hook(String),
    /// The task queue's task panicked or was cancelled.
    #[error("the modules' task queue panicked: {0}")]
    TaskQueue(#[source] tokio::task::JoinError),
    /// A hooks directory cannot be read.
    #[error("{0}")]
    HookFiles(#[source] operon_hooks::load::HookLoadError),
    /// The wasm sandbox that wasm hooks run in cannot be started.
    #[error("cannot start the wasm sandbox: {0}")]
    WasmSandbox(#[source] operon_sandbox::EngineError),
    /// A wasm hook does not load.
    #[error("hook {hook}: {source}")]
    HookLoad {
        /// The hook.
        hook: String,
        /// Why.
        #[source]
        source: operon_sandbox::LoadError,
    },
    /// A script hook did not give its configuration.
    #[error("hook {hook}: {source}")]
    HookConfigure {
        /// The hook.
        hook: String,
        /// Why.
        #[source]
        source: operon_hooks::HookError,
    },
    /// A wasm hook's configure call failed.
    #[error("hook {hook}: configure: {source}")]
    WasmHookConfigure {
        /// The hook.
        hook: String,
        /// Why.
        #[source]
        source: operon_sandbox::CallError,
    },
    /// A values patch file a hook wrote cannot be read.
    #[error("hook {hook}: ${variable}: {source}")]
    ValuesPatchFile {
        /// The hook.
        hook: String,
        /// The variable naming the file, e.g. `VALUES_JSON_PATCH_PATH`.
        variable: &'static str,
        /// Why.
        #[source]
        source: values::PatchFileError,
    },
    /// A lifecycle hook's run failed.
    #[error("hook {hook} ({binding}): {source}")]
    HookRun {
        /// The hook.
        hook: String,
        /// The lifecycle binding it ran for.
        binding: &'static str,
        /// Why.
        #[source]
        source: operon_hooks::HookError,
    },
    /// The metrics a lifecycle hook's run emitted were refused.
    #[error("hook {hook}: metrics: {source}")]
    HookMetrics {
        /// The hook.
        hook: String,
        /// Why.
        #[source]
        source: operon_hooks::metrics::MetricError,
    },
    /// A patch operation a lifecycle hook's run submitted failed.
    #[error("hook {hook}: {operation}: {source}")]
    HookPatch {
        /// The hook.
        hook: String,
        /// The operation, e.g. `MergePatch`.
        operation: &'static str,
        /// Why.
        #[source]
        source: apply::ApplyError,
    },
    /// The engine of an owner's kubernetes and schedule bindings cannot start.
    #[error("{owner} bindings: {source}")]
    Bindings {
        /// `global` or the module.
        owner: String,
        /// Why.
        #[source]
        source: bindings::BindingsError,
    },
    /// The hooks' metrics cannot be made.
    #[error("{0}")]
    HookMetricsRegistry(#[source] operon_hooks::metrics::MetricError),
    /// The module metrics cannot be made.
    #[error("{0}")]
    ModuleMetrics(#[source] prometheus::Error),
    /// The module metrics cannot be registered in the registry given.
    #[error("module metrics: {0}")]
    RegisterModuleMetrics(#[source] prometheus::Error),
    /// An `enabled` program failed or answered something else than true or false.
    #[error("module {module}: enabled script: {reason}")]
    Enabled {
        /// The module.
        module: String,
        /// Why.
        reason: String,
        /// The error that made it fail, when one did (the sandbox's, a file's); its
        /// text is in `reason`.
        #[source]
        cause: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A module's chart or manifests could not be rendered.
    #[error("module {module}: render: {reason}")]
    Render {
        /// The module.
        module: String,
        /// Why.
        reason: String,
        /// The error that made it fail, when one did (a file's, helm's start, the
        /// YAML's); its text is in `reason`.
        #[source]
        cause: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Applying, reading or deleting objects failed.
    #[error("module {module}: {}{source}", apply::step_prefix(step))]
    Apply {
        /// The module (empty when the failure is not one module's).
        module: String,
        /// What was being done, e.g. `apply Deployment web/echo` (empty when the
        /// error says it).
        step: String,
        /// Why.
        #[source]
        source: apply::ApplyError,
    },
}
