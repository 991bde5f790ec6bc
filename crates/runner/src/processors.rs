//! Builds the runner an Operation's processor asks for: the one place that maps
//! `spec.processor` (wasm, scriptRunner, httpServer, job, argoWorkflow) to a [`Runner`].
//!
//! `operon run` and the in-cluster controllers build their runners here, so an
//! Operation runs the same way wherever it runs. The wasm and script sandboxes are
//! created on first use and shared by every runner built here.

use super::Runner;
use super::argo::ArgoRunner;
use super::builtin::{BuiltIns, built_in_path};
use super::context::Platform;
use super::http::{HttpRunner, HttpServerError};
use super::job::JobRunner;
use super::node_paths::NodeRoot;
use super::offload::{OffloadError, OffloadTarget};
use super::script::{SandboxedScriptRunner, ScriptSource};
use super::wasm::WasmRunner;
use operon_data::api::Operation;
use operon_sandbox::{self as sandbox, CallLimits, EngineError, LoadError, Sandbox, SandboxConfig};
use operon_script::{LazyScriptSandbox, SandboxError, ScriptSandbox, ScriptStore};
use operon_store::{ModuleError, ModuleLocator};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Why an Operation's processor cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ProcessorError {
    /// The Operation names no processor.
    #[error("no processor")]
    NoProcessor,
    /// The wasm module cannot be found.
    #[error(transparent)]
    Module(#[from] ModuleError),
    /// The wasm engine cannot be started.
    #[error("cannot start the wasm sandbox: {0}")]
    WasmEngine(#[from] EngineError),
    /// The wasm module does not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The script sandbox cannot be started.
    #[error(transparent)]
    ScriptSandbox(#[from] SandboxError),
    /// A wasm step cannot be offloaded to a Job.
    #[error(transparent)]
    Offload(#[from] OffloadError),
    /// The `httpServer` fields do not make a URL.
    #[error(transparent)]
    Http(#[from] HttpServerError),
    /// An `httpServer` step names a built-in processor where none are offered.
    #[error(
        "httpServer path {path} with no address is a built-in of the node agent; run the Diagnosis on a node (spec.nodeName or spec.podReference, without spec.runOn: Controller) so that the node's `operon agent` runs this step"
    )]
    BuiltInOffNode {
        /// The path.
        path: String,
    },
    /// An `httpServer` step names a built-in processor that does not exist.
    #[error("httpServer path {path} with no address names no built-in processor; built-ins: {}", known.join(", "))]
    UnknownBuiltIn {
        /// The path.
        path: String,
        /// The paths served.
        known: Vec<&'static str>,
    },
}

/// Process-wide settings of the runners built here.
#[derive(Debug, Clone)]
pub struct ProcessorSettings {
    /// Where compiled wasm modules are cached; `None` caches nothing on disk.
    pub cache_dir: Option<PathBuf>,
    /// How many wasm calls may run at once (sizes the instance pool).
    pub max_concurrent_wasm_calls: u32,
    /// Limits of each wasm call besides its timeout, which comes from the Operation.
    pub wasm_limits: CallLimits,
    /// Refuse to run a script when a sandbox protection is missing (an Operation's
    /// `scriptRunner.strict` overrides it).
    pub strict: bool,
    /// Where named and digest-addressed modules are found.
    pub modules: ModuleLocator,
    /// Script steps run from this store (kept in step with the Operations by the
    /// agent) instead of from the Operation's text.
    pub script_store: Option<Arc<ScriptStore>>,
    /// The built-in processors of this process (the node agent's), which address-less
    /// `httpServer` steps under `/processor/` run.
    pub built_ins: Option<Arc<dyn BuiltIns>>,
    /// The Kubernetes API `job` and `argoWorkflow` steps use; without it they can only
    /// dry-run.
    pub kube: Option<KubeClient>,
    /// The platform part of the runner context.
    pub platform: Platform,
    /// Where the node's files are, for the paths Operations declare read-only: `/`
    /// but on an agent that mounts the node's filesystem elsewhere (`--node-root`).
    pub node_root: NodeRoot,
}

/// A `kube::Client` with a `Debug` that prints no connection details.
#[derive(Clone)]
pub struct KubeClient(pub kube::Client);

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KubeClient")
    }
}

impl Default for ProcessorSettings {
    fn default() -> Self {
        Self {
            cache_dir: sandbox::default_cache_dir(),
            max_concurrent_wasm_calls: 4,
            wasm_limits: CallLimits::default(),
            strict: false,
            modules: ModuleLocator::default(),
            script_store: None,
            built_ins: None,
            kube: None,
            platform: Platform::from_env(),
            node_root: NodeRoot::default(),
        }
    }
}

/// Builds runners for Operations, sharing one wasm and one script sandbox.
#[derive(Debug)]
pub struct Processors {
    settings: ProcessorSettings,
    wasm: Mutex<Option<Sandbox>>,
    scripts: LazyScriptSandbox,
    /// Where `wasm.runOn: Job` steps go; known only once `operon serve` has set up its
    /// module API, after the runners' factory exists.
    offload: RwLock<Option<OffloadTarget>>,
}

impl Processors {
    /// A factory with `settings`; no sandbox is started until a runner needs it.
    pub fn new(settings: ProcessorSettings) -> Self {
        Self {
            scripts: LazyScriptSandbox::new(settings.strict),
            settings,
            wasm: Mutex::new(None),
            offload: RwLock::new(None),
        }
    }

    /// Lets `wasm.runOn: Job` steps run: as Jobs of `target`'s image fetching their
    /// modules from its module API.
    pub fn set_offload(&self, target: OffloadTarget) {
        tracing::info!(image = %target.image, module_api = %target.module_url,
            "wasm steps with runOn: Job run as Jobs");
        *self.offload.write().unwrap_or_else(|e| e.into_inner()) = Some(target);
    }

    /// Where `wasm.runOn: Job` steps go, once set.
    pub fn offload_target(&self) -> Option<OffloadTarget> {
        self.offload
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Where modules are found (and `oci://` ones pulled to).
    pub fn modules(&self) -> &ModuleLocator {
        &self.settings.modules
    }

    /// The platform runs report in their runner context.
    pub fn platform(&self) -> &Platform {
        &self.settings.platform
    }

    /// The runner of `operation`, whose relative module paths are resolved against
    /// `base_dir` (the directory of the manifest it was read from).
    pub fn runner(
        &self,
        operation: &Operation,
        base_dir: &Path,
    ) -> Result<Arc<dyn Runner>, ProcessorError> {
        let processor = &operation.spec.processor;
        if let Some(wasm) = &processor.wasm {
            let path = self.settings.modules.locate(&wasm.module, base_dir)?;
            let sandbox = self.wasm_sandbox()?;
            // Loaded even when offloaded: a module that is no operation is refused
            // here, by name, not in a pod minutes later.
            let module = sandbox.load_operation_file(&path)?;
            if wasm.offloaded() {
                let target = self.offload.read().unwrap_or_else(|e| e.into_inner());
                let target = target.as_ref().ok_or(OffloadError::NoTarget)?;
                return Ok(Arc::new(target.runner(
                    self.kube_client(),
                    operation.metadata.name.as_deref().unwrap_or_default(),
                    wasm,
                    module.digest(),
                    self.settings.platform.clone(),
                )?));
            }
            Ok(Arc::new(
                WasmRunner::new(
                    sandbox,
                    module,
                    wasm.config.clone(),
                    self.settings.wasm_limits.clone(),
                )
                .with_read_only(
                    wasm.read_only_paths.iter().map(PathBuf::from).collect(),
                    self.settings.node_root.clone(),
                )
                .with_platform(self.settings.platform.clone())
                .with_operation(operation.metadata.name.as_deref().unwrap_or_default()),
            ))
        } else if let Some(script) = &processor.script_runner {
            let source = match &self.settings.script_store {
                Some(store) => ScriptSource::Stored {
                    store: store.clone(),
                    name: operation.metadata.name.clone().unwrap_or_default(),
                },
                None => ScriptSource::Inline(script.script.clone()),
            };
            let runner = SandboxedScriptRunner::new(
                self.script_sandbox()?,
                source,
                script.arg_keys.clone(),
                script.operation_result_key.clone(),
            )
            .with_env(
                script
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone()))
                    .collect(),
            )
            .with_network(script.network)
            .with_platform(self.settings.platform.clone())
            .with_read_only(script.read_only_paths.iter().map(PathBuf::from).collect())
            .with_node_root(self.settings.node_root.clone())
            .with_operation(operation.metadata.name.as_deref().unwrap_or_default());
            Ok(Arc::new(match script.strict {
                Some(strict) => runner.with_strict(strict),
                None => runner,
            }))
        } else if let Some(http) = &processor.http_server {
            if let Some(path) = built_in_path(http) {
                let built_ins = self.settings.built_ins.as_ref().ok_or_else(|| {
                    ProcessorError::BuiltInOffNode {
                        path: path.to_owned(),
                    }
                })?;
                return built_ins.runner(path, self).unwrap_or_else(|| {
                    Err(ProcessorError::UnknownBuiltIn {
                        path: path.to_owned(),
                        known: built_ins.paths(),
                    })
                });
            }
            Ok(Arc::new(HttpRunner::new(http)?))
        } else if let Some(job) = &processor.job {
            Ok(Arc::new(JobRunner::new(
                self.kube_client(),
                operation.metadata.name.clone().unwrap_or_default(),
                job.clone(),
                self.settings.platform.clone(),
            )))
        } else if let Some(argo) = &processor.argo_workflow {
            Ok(Arc::new(ArgoRunner::new(
                self.kube_client(),
                operation.metadata.name.clone().unwrap_or_default(),
                argo.clone(),
                self.settings.platform.clone(),
            )))
        } else {
            Err(ProcessorError::NoProcessor)
        }
    }

    fn kube_client(&self) -> Option<kube::Client> {
        self.settings.kube.as_ref().map(|k| k.0.clone())
    }

    /// The store script steps run from, when there is one.
    pub fn script_store(&self) -> Option<&Arc<ScriptStore>> {
        self.settings.script_store.as_ref()
    }

    /// The wasm sandbox every wasm runner built here shares, started on first use.
    pub fn wasm_sandbox(&self) -> Result<Sandbox, ProcessorError> {
        let mut slot = self.wasm.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sandbox) = slot.as_ref() {
            return Ok(sandbox.clone());
        }
        let sandbox = Sandbox::new(SandboxConfig {
            cache_dir: self.settings.cache_dir.clone(),
            max_concurrent_calls: self.settings.max_concurrent_wasm_calls,
            ..SandboxConfig::default()
        })?;
        Ok(slot.insert(sandbox).clone())
    }

    /// The script sandbox every script runner built here shares, started on first use
    /// with this binary as its launcher.
    pub(crate) fn script_sandbox(&self) -> Result<ScriptSandbox, ProcessorError> {
        Ok(self.scripts.get()?)
    }
}

/// The timeout of one run of `operation` (`timeoutSeconds`, at least one second).
pub fn timeout(operation: &Operation) -> Duration {
    Duration::from_secs(operation.spec.processor.timeout_seconds.max(1) as u64)
}

/// Makes `store` hold exactly the scripts of `operations` (their `scriptRunner.script`,
/// under the Operation's name).
pub fn sync_scripts<'a>(
    store: &ScriptStore,
    operations: impl IntoIterator<Item = &'a Operation>,
) -> Result<operon_script::SyncReport, operon_script::StoreError> {
    let scripts: Vec<(&str, &str)> = operations
        .into_iter()
        .filter_map(|op| {
            let name = op.metadata.name.as_deref()?;
            let script = op.spec.processor.script_runner.as_ref()?;
            Some((name, script.script.as_str()))
        })
        .collect();
    let report = store.sync(scripts)?;
    if report != operon_script::SyncReport::default() {
        tracing::info!(created = ?report.created, replaced = ?report.replaced,
            removed = ?report.removed, store = %store.path().display(), "script store synchronised");
    }
    Ok(report)
}
