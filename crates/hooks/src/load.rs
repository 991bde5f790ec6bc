//! Loading hooks from files: a wasm component of the `hook` world, or an executable
//! run the shell-operator way in the script sandbox; asking each for its configuration
//! and checking it against the cluster's kinds. `operon hook test`, `operon hook run`
//! and the in-cluster engine load hooks the same way.

use super::config::{self, ConfigProblem, ValidConfig};
use super::engine::LoadedHook;
use super::runner::{
    ClusterAccess, DiscoveryError, Hook, HookError, ScriptHook, WasmHook, discover,
};
use futures::StreamExt as _;
use operon_cluster::{Cluster, ClusterError};
use operon_data::model::HookConfig;
use operon_sandbox::{CallLimits, LoadError, Sandbox, WASM_MAGIC};
use operon_script::{LazyScriptSandbox, SandboxError};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::future::Future;
use std::num::NonZeroUsize;
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
    /// How many hooks are asked for their configuration at once (see [`in_order`]).
    discovery: NonZeroUsize,
}

/// How many hooks are asked for their configuration at once by default: twice the
/// CPUs, since a script hook's `--config` run spends part of its time starting
/// processes and waiting for them, and at least two.
fn default_discovery() -> NonZeroUsize {
    let cpus = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    NonZeroUsize::new((cpus * 2).clamp(2, 16)).unwrap_or(NonZeroUsize::MIN)
}

/// Runs `jobs` at most `limit` at a time and hands each result to `each` in the order
/// of `jobs`, whatever order they finish in; stops at the first error in that order
/// (the jobs after it still running are dropped, which cancels them) and returns it.
/// What [`HookLoader`]'s users run the hooks' configurations with: the hooks and the
/// first error are the same as one run after the other would give, as shell-operator's
/// `HookManager.Init` loads hooks by path and stops at the first that fails.
pub async fn in_order<T, E>(
    jobs: impl IntoIterator<Item = impl Future<Output = Result<T, E>>>,
    limit: NonZeroUsize,
    mut each: impl FnMut(T),
) -> Result<(), E> {
    let mut results = futures::stream::iter(jobs).buffered(limit.get());
    while let Some(result) = results.next().await {
        each(result?);
    }
    Ok(())
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
            discovery: default_discovery(),
        }
    }

    /// How many hooks are asked for their configuration at once.
    pub fn discovery(&self) -> NonZeroUsize {
        self.discovery
    }

    /// Asks at most `limit` hooks for their configuration at once: one gives the
    /// sequential start a benchmark compares with.
    pub fn with_discovery(mut self, limit: NonZeroUsize) -> Self {
        self.discovery = limit;
        self
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
    use crate::HookRun;
    use futures::future::BoxFuture;
    use operon_cluster::local::LocalCluster;
    use operon_data::model::{HookInput, KubernetesBindingConfig};
    use std::sync::atomic::{AtomicUsize, Ordering};
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

    /// The hooks whose configuration was given, in the order given.
    type Given = Arc<std::sync::Mutex<Vec<&'static str>>>;

    /// A hook declaring one kubernetes binding of `kind`, whose configuration is given
    /// only once the hook `after` gave its own; each one given opens its `given` gate
    /// and is noted in `order`.
    struct Gated {
        name: &'static str,
        kind: &'static str,
        after: Option<Arc<tokio::sync::Semaphore>>,
        given: Arc<tokio::sync::Semaphore>,
        order: Given,
    }

    impl Hook for Gated {
        fn name(&self) -> &str {
            self.name
        }

        fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
            Box::pin(async move {
                if let Some(after) = &self.after {
                    let _ = after.acquire().await.expect("the gate stays open");
                }
                self.order.lock().unwrap().push(self.name);
                self.given
                    .add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
                Declares(vec![self.kind]).configure().await
            })
        }

        fn handle(&self, _: HookInput, _: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
            unreachable!("configuration tests never run the hook")
        }
    }

    /// Hooks named `names` with kinds `kinds`, hook `i` configured only after hook
    /// `after[i]`; and the order their configurations were given in.
    fn gated(
        names: &[&'static str],
        kinds: &[&'static str],
        after: &[Option<usize>],
    ) -> (Vec<Arc<dyn Hook>>, Given) {
        let order = Given::default();
        let gates: Vec<_> = (0..names.len())
            .map(|_| Arc::new(tokio::sync::Semaphore::new(0)))
            .collect();
        let hooks = (0..names.len())
            .map(|i| {
                Arc::new(Gated {
                    name: names[i],
                    kind: kinds[i],
                    after: after[i].map(|a| gates[a].clone()),
                    given: gates[i].clone(),
                    order: order.clone(),
                }) as Arc<dyn Hook>
            })
            .collect();
        (hooks, order)
    }

    /// Configures `hooks` as `operon serve` does, at most `limit` at once; what `each`
    /// was given and the outcome. Fails the test if the configurations wait on each
    /// other forever, which only happens when they are not asked at the same time (on
    /// the paused clock: no real wait).
    async fn configure_in_order(
        hooks: Vec<Arc<dyn Hook>>,
        limit: usize,
    ) -> (Vec<String>, Result<(), HookLoadError>) {
        let cluster = LocalCluster::new();
        let mut taken = Vec::new();
        let jobs = hooks.into_iter().map(|hook| configure(hook, &cluster));
        let limit = NonZeroUsize::new(limit).unwrap();
        let outcome = tokio::time::timeout(
            Duration::from_secs(60),
            in_order(jobs, limit, |(loaded, _)| {
                taken.push(loaded.hook.name().to_owned())
            }),
        )
        .await
        .expect("the configurations were asked one after another, not at the same time");
        (taken, outcome)
    }

    #[tokio::test(start_paused = true)]
    async fn configurations_asked_at_once_are_taken_in_path_order() {
        // Each hook answers only after the one after it: the last answers first.
        let (hooks, order) = gated(
            &["a", "b", "c", "d"],
            &["Pod"; 4],
            &[Some(1), Some(2), Some(3), None],
        );
        let (taken, outcome) = configure_in_order(hooks, 4).await;
        outcome.expect("every configuration is valid");
        assert_eq!(*order.lock().unwrap(), ["d", "c", "b", "a"]);
        assert_eq!(taken, ["a", "b", "c", "d"]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_invalid_configuration_in_path_order_is_the_error() {
        // `c` is invalid and answers first; `b`, invalid too, answers after it: the
        // error is `b`'s, as one configuration after the other would have found.
        let (hooks, order) = gated(
            &["a", "b", "c"],
            &["Pod", "Gadget", "Widget"],
            &[Some(2), Some(2), None],
        );
        let (taken, outcome) = configure_in_order(hooks, 3).await;
        assert_eq!(order.lock().unwrap()[0], "c");
        let error = outcome.expect_err("an invalid configuration must fail");
        assert_eq!(
            error.to_string(),
            "hook b has an invalid configuration (1 problems)"
        );
        let HookLoadError::Invalid { problems, .. } = error else {
            panic!("the configuration must be invalid: {error:?}");
        };
        assert!(
            problems[0].to_string().contains("Gadget"),
            "{}",
            problems[0]
        );
        assert_eq!(
            taken,
            ["a"],
            "hooks before the failing one are taken, none after"
        );
    }

    #[tokio::test]
    async fn no_more_configurations_than_the_limit_are_asked_at_once() {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let jobs = (0..6).map(|i| {
            let (running, most) = (running.clone(), most.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // Gives every other job in flight its turn before this one ends.
                for _ in 0..20 {
                    tokio::task::yield_now().await;
                }
                running.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, HookLoadError>(i)
            }
        });
        let mut taken = Vec::new();
        in_order(jobs, NonZeroUsize::new(2).unwrap(), |i| taken.push(i))
            .await
            .unwrap();
        assert_eq!(taken, [0, 1, 2, 3, 4, 5]);
        assert_eq!(most.load(Ordering::SeqCst), 2);
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
