//! Loading hooks from files: a wasm component of the `hook` world, or an executable
//! run the shell-operator way in the script sandbox; asking each for its configuration
//! and checking it against the cluster's kinds. `operon hook test`, `operon hook run`
//! and the in-cluster engine load hooks the same way.

use super::config::{self, ConfigProblem, ValidConfig};
use super::engine::LoadedHook;
use super::runner::{
    ClusterAccess, DiscoveryError, Hook, HookError, ScriptHook, WasmHook, discover,
};
use operon_cluster::{Cluster, ClusterError};
use operon_data::model::HookConfig;
use operon_sandbox::{CallLimits, LoadError, Sandbox, WASM_MAGIC};
use operon_script::{LazyScriptSandbox, SandboxError};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a hook could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum HookLoadError {
    /// A path could not be read or resolved.
    #[error("cannot read {}: {source}", path.display())]
    Path {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A wasm hook does not load.
    #[error("cannot load {}: {source}", path.display())]
    Wasm {
        /// The component.
        path: PathBuf,
        /// Why it does not load.
        #[source]
        source: LoadError,
    },
    /// The script sandbox a shell hook needs cannot be started.
    #[error(transparent)]
    ScriptSandbox(#[from] SandboxError),
    /// The hooks directory cannot be read.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The hooks directory holds no hook.
    #[error("no hooks (*.wasm components or executables) in {}", dir.display())]
    NoHooks {
        /// The directory.
        dir: PathBuf,
    },
    /// The hook did not give its configuration.
    #[error(transparent)]
    Configure(#[from] HookError),
    /// The hook's configuration is invalid; every problem is listed.
    #[error("hook {hook} has an invalid configuration ({} problems)", problems.len())]
    Invalid {
        /// The hook's name.
        hook: String,
        /// Every problem found.
        problems: Vec<ConfigProblem>,
    },
}

/// Whether `path` is a wasm component or module (else it is taken for a script hook).
pub fn is_wasm(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| magic == WASM_MAGIC)
}

/// The hooks of a directory, sorted: its `*.wasm` components, and every executable
/// shell-operator would run (see [`discover`]).
pub fn hook_files(dir: &Path) -> Result<Vec<PathBuf>, HookLoadError> {
    let entries = std::fs::read_dir(dir).map_err(|source| HookLoadError::Path {
        path: dir.to_owned(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    files.extend(discover(dir)?.into_iter().filter(|p| !is_wasm(p)));
    files.sort();
    files.dedup();
    if files.is_empty() {
        return Err(HookLoadError::NoHooks {
            dir: dir.to_owned(),
        });
    }
    Ok(files)
}

/// Makes hooks from files, sharing one wasm sandbox and one script sandbox (started
/// when the first script hook needs it).
#[derive(Debug)]
pub struct HookLoader {
    wasm: Sandbox,
    /// Limits of each wasm run besides its timeout, which comes from the hook's settings.
    limits: CallLimits,
    /// Started when the first script hook is loaded; strict mode refuses to run a
    /// script hook when a sandbox protection is missing.
    scripts: LazyScriptSandbox,
    /// The script hooks that may reach the cluster themselves (kubectl), if any.
    cluster_access: Option<ClusterAccess>,
}

impl HookLoader {
    /// The limits wasm hooks run with.
    pub fn limits(&self) -> &CallLimits {
        &self.limits
    }

    /// A loader running wasm hooks in `wasm` with `limits`.
    pub fn new(wasm: Sandbox, limits: CallLimits, strict: bool) -> Self {
        Self {
            wasm,
            limits,
            scripts: LazyScriptSandbox::new(strict),
            cluster_access: None,
        }
    }

    /// Gives the script hooks `access` selects the network and the ServiceAccount
    /// credentials (off by default).
    pub fn with_cluster_access(mut self, access: ClusterAccess) -> Self {
        self.cluster_access = Some(access);
        self
    }

    /// The hook at `path`, named by its path relative to `hooks_dir`.
    pub fn hook(&self, path: &Path, hooks_dir: &Path) -> Result<Arc<dyn Hook>, HookLoadError> {
        let name = path
            .strip_prefix(hooks_dir)
            .unwrap_or(path)
            .display()
            .to_string();
        if is_wasm(path) {
            let module = self
                .wasm
                .load_hook_file(path)
                .map_err(|source| HookLoadError::Wasm {
                    path: path.to_owned(),
                    source,
                })?;
            return Ok(Arc::new(WasmHook::new(
                name,
                self.wasm.clone(),
                module,
                self.limits.clone(),
            )));
        }
        // The hook runs in its own directory inside the sandbox: give it absolute paths,
        // without resolving symlinks, so that a hook mounted from a ConfigMap
        // (`x.sh -> ..data/x.sh`) keeps the name it has in the directory.
        let absolute = |p: &Path| {
            std::path::absolute(p).map_err(|source| HookLoadError::Path {
                path: p.to_owned(),
                source,
            })
        };
        let mut hook =
            ScriptHook::new(self.scripts.get()?, &absolute(hooks_dir)?, &absolute(path)?);
        if let Some(access) = self.cluster_access.as_ref().filter(|a| a.grants(&name)) {
            let mut settings = hook.settings().clone();
            settings.grant_cluster_access(access);
            hook = hook.with_settings(settings);
            if !access.is_local() {
                tracing::warn!(
                hook = %name,
                "cluster access: the hook runs with the network and the engine's \
                 ServiceAccount credentials (read-only), so it can do what that account may"
                );
            }
        }
        Ok(Arc::new(hook))
    }

    /// The wasm hook at `path`, named `name`: a module of the cluster's module store,
    /// which has no hooks directory to be named after and is never a script.
    pub fn wasm_hook(&self, name: String, path: &Path) -> Result<Arc<dyn Hook>, HookLoadError> {
        let module = self
            .wasm
            .load_hook_file(path)
            .map_err(|source| HookLoadError::Wasm {
                path: path.to_owned(),
                source,
            })?;
        Ok(Arc::new(WasmHook::new(
            name,
            self.wasm.clone(),
            module,
            self.limits.clone(),
        )))
    }

    /// Every hook of `dir` (see [`hook_files`]).
    pub fn hooks_in(&self, dir: &Path) -> Result<Vec<Arc<dyn Hook>>, HookLoadError> {
        let hooks = hook_files(dir)?
            .iter()
            .map(|file| self.hook(file, dir))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(access) = &self.cluster_access {
            let names: Vec<&str> = hooks.iter().map(|h| h.name()).collect();
            for unknown in access.unknown(&names) {
                tracing::warn!(
                    hook = %unknown,
                    dir = %dir.display(),
                    "cluster access names a hook that is not in the hooks directory"
                );
            }
        }
        Ok(hooks)
    }
}

/// Asks `hook` for its configuration and checks it, the kinds its kubernetes bindings
/// name resolved by `cluster`. Returns the hook ready for the engine and the
/// configuration as declared.
pub async fn configure(
    hook: Arc<dyn Hook>,
    cluster: &dyn Cluster,
) -> Result<(LoadedHook, HookConfig), HookLoadError> {
    let name = hook.name().to_owned();
    let declared = hook.configure().await?;
    // Resolved up front, each distinct kind once: the checks themselves are synchronous.
    let mut resolved: HashMap<(Option<&str>, &str), Result<(), ClusterError>> = HashMap::new();
    for binding in &declared.kubernetes {
        let key = (binding.api_version.as_deref(), binding.kind.as_str());
        if let Entry::Vacant(slot) = resolved.entry(key) {
            slot.insert(cluster.resolve(key.0, key.1).await.map(|_| ()));
        }
    }
    let kinds = |api_version: Option<&str>, kind: &str| -> Result<(), ClusterError> {
        match resolved.get(&(api_version, kind)) {
            Some(result) => result.clone(),
            None => Err(ClusterError::UnknownKind {
                kind: kind.to_owned(),
                api_version: api_version.map(str::to_owned),
            }),
        }
    };
    let config: ValidConfig =
        config::validate(&name, &declared, &kinds).map_err(|problems| HookLoadError::Invalid {
            hook: name,
            problems,
        })?;
    Ok((LoadedHook { hook, config }, declared))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::HookRun;
    use futures::future::BoxFuture;
    use operon_cluster::local::LocalCluster;
    use operon_data::model::{HookInput, KubernetesBindingConfig};
    use std::time::Duration;

    /// A hook that declares one kubernetes binding per kind and never runs.
    struct Declares(Vec<&'static str>);

    impl Hook for Declares {
        fn name(&self) -> &str {
            "declares"
        }

        fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
            let kubernetes = self
                .0
                .iter()
                .map(|kind| KubernetesBindingConfig {
                    name: format!("{kind}-binding"),
                    kind: (*kind).to_owned(),
                    ..KubernetesBindingConfig::default()
                })
                .collect();
            Box::pin(async move {
                Ok(HookConfig {
                    kubernetes,
                    ..HookConfig::default()
                })
            })
        }

        fn handle(&self, _: HookInput, _: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
            unreachable!("configuration tests never run the hook")
        }
    }

    #[tokio::test]
    async fn kinds_are_resolved_by_the_cluster() {
        let cluster = LocalCluster::new();
        let (loaded, declared) = configure(Arc::new(Declares(vec!["po", "Pod"])), &cluster)
            .await
            .expect("pods are known");
        assert_eq!(loaded.config.kubernetes.len(), 2);
        assert_eq!(declared.kubernetes[0].kind, "po");

        let result = configure(Arc::new(Declares(vec!["Pod", "Gadget"])), &cluster).await;
        let Err(HookLoadError::Invalid { problems, .. }) = result else {
            panic!("an unknown kind must make the configuration invalid");
        };
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].to_string().contains("Gadget"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn a_hook_mounted_from_a_config_map_keeps_its_name() {
        use std::os::unix::fs::PermissionsExt as _;
        // A ConfigMap volume: the files live in a timestamped hidden directory, reached
        // through `..data` and one symlink per key.
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("..2026_11_23_10_00_00.123");
        std::fs::create_dir(&data).unwrap();
        let script = data.join("labeler.sh");
        std::fs::write(&script, "#!/bin/sh\necho '{}'\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("..2026_11_23_10_00_00.123", dir.path().join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/labeler.sh", dir.path().join("labeler.sh")).unwrap();
        let sandbox =
            operon_sandbox::Sandbox::new(operon_sandbox::SandboxConfig::default()).unwrap();
        let loader = HookLoader::new(sandbox, CallLimits::default(), false);
        let hooks = loader.hooks_in(dir.path()).unwrap();
        let names: Vec<&str> = hooks.iter().map(|h| h.name()).collect();
        assert_eq!(names, ["labeler.sh"]);
    }
}
