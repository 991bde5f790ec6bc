//! The wasm sandbox: runs operation and hook components with hard limits.
//!
//! One [`Sandbox`] per process owns one wasmtime `Engine` (component model, cranelift,
//! epoch interruption driven by a background ticker, the pooling allocator with an
//! on-demand fallback, a bounded wasm stack, copy-on-write memory images). Modules are
//! identified by their sha256 [`ModuleDigest`]; each digest is compiled once, kept as an
//! `InstancePre`, and its compiled artifact cached on disk. Every call gets a fresh
//! `Store` with a WASI context that grants nothing, bounded stdout/stderr, a memory limit
//! and a deadline, and returns a [`CallReport`] whose failures are typed ([`CallError`]).
//!
//! This crate knows nothing about Kubernetes, Diagnoses or hooks' semantics: it runs
//! a component and reports what it returned and submitted. Its API speaks
//! [`operon_data::model`]; the WIT-generated types ([`bindings`]) stay inside it, translated
//! in one place ([`convert`]).
//!
//! Every published version of the `operon:engine` WIT package is linked ([`WitVersion`]:
//! 0.1.0, 0.2.0 and 0.3.0): a component built against an older version keeps loading
//! and running, its version detected when it is loaded.

#![warn(unreachable_pub)]

// Public only so that the call_path benchmark can call a guest through bare wasmtime
// with the same bindings; nothing outside this crate's `convert` may use them (a test
// of the engine's architecture checks every crate's sources).
#[doc(hidden)]
pub mod bindings;
mod cache;
pub mod convert;
mod enabled;
mod engine;
mod error;
mod exports;
pub(crate) mod host;
mod limits;
mod module;
mod output;

pub use cache::{ArtifactCache, CacheError, ModuleDigest};
pub use enabled::EnabledModule;
pub use engine::{AllocatorChoice, AllocatorKind, EngineError, SandboxConfig};
pub use error::{CallError, LoadError, OutputKind};
pub use host::values::{HookValues, ValuesPatches};
pub use limits::{CallLimits, ReadOnlyDir};
pub use module::{HookModule, OperationModule, WASM_MAGIC, WitVersion, World};

use exports::{HookExports, HookPre, OperationExports, OperationPre, Outcome, Phase};
use host::{CallState, HostLimitExceeded};
use operon_data::model::{
    HookConfig, HookInput, HookOutput, LogRecord, MetricOperation, OperationInput, OperationOutput,
    PatchOperation,
};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::Store;

/// The default on-disk cache of compiled modules, following the XDG base directory
/// convention: `$XDG_CACHE_HOME/operon/modules`, else `~/.cache/operon/modules`.
pub fn default_cache_dir() -> Option<std::path::PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))?;
    Some(base.join("operon").join("modules"))
}

/// Everything a call produced, whether it succeeded or not.
///
/// Patches and metrics are reported even for a failed call so that a user can see
/// what the guest tried to do; callers must apply them only when `outcome` is `Ok`.
#[derive(Debug)]
pub struct CallReport<T> {
    /// What the guest returned, or why the call failed.
    pub outcome: Result<T, CallError>,
    /// Log records, in order.
    pub logs: Vec<LogRecord>,
    /// Patch operations submitted, in order.
    pub patches: Vec<PatchOperation>,
    /// Metric operations submitted, in order.
    pub metrics: Vec<MetricOperation>,
    /// JSON patches of addon module values submitted, in order (hooks given values
    /// only).
    pub values_patches: ValuesPatches,
    /// Captured stdout (lossy UTF-8).
    pub stdout: String,
    /// Captured stderr (lossy UTF-8).
    pub stderr: String,
    /// Wall-clock time of the call, instantiation included.
    pub elapsed: Duration,
    /// Linear memory and tables the instance held when the call ended: what one live
    /// instance of this guest costs.
    pub memory_bytes: u64,
}

/// The process-wide wasm sandbox. Cheap to clone; clones share the engine and modules.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<engine::EngineState>,
    modules: Arc<Mutex<HashMap<ModuleDigest, module::LoadedModule>>>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("allocator", &self.inner.allocator)
            .field("cache", &self.inner.cache)
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// Builds the engine. Fails only when wasmtime cannot be configured at all; a pool
    /// that cannot reserve its address space falls back to on-demand allocation (unless
    /// [`AllocatorChoice::Pooling`] insists), and a cache that cannot be opened is
    /// logged and skipped.
    pub fn new(config: SandboxConfig) -> Result<Self, EngineError> {
        Ok(Self {
            inner: Arc::new(engine::EngineState::new(config)?),
            modules: Arc::default(),
        })
    }

    /// Which instance allocator the engine ended up with.
    pub fn allocator(&self) -> AllocatorKind {
        self.inner.allocator
    }

    /// The wasmtime engine, for tools (benchmarks) that compare against raw wasmtime.
    pub fn wasmtime_engine(&self) -> &wasmtime::Engine {
        &self.inner.engine
    }

    /// Loads an operation component from a file.
    pub fn load_operation_file(&self, path: &Path) -> Result<OperationModule, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.load_operation(&path.display().to_string(), &bytes)
    }

    /// Loads an operation component; `name` is used in error messages only.
    pub fn load_operation(&self, name: &str, bytes: &[u8]) -> Result<OperationModule, LoadError> {
        match self.load(name, bytes, World::Operation)? {
            module::LoadedModule::Operation(m) => Ok(m),
            module::LoadedModule::Hook(_) => unreachable!("load checks the world"),
        }
    }

    /// Loads a hook component from a file.
    pub fn load_hook_file(&self, path: &Path) -> Result<HookModule, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.load_hook(&path.display().to_string(), &bytes)
    }

    /// Loads a hook component; `name` is used in error messages only.
    pub fn load_hook(&self, name: &str, bytes: &[u8]) -> Result<HookModule, LoadError> {
        match self.load(name, bytes, World::Hook)? {
            module::LoadedModule::Hook(m) => Ok(m),
            module::LoadedModule::Operation(_) => unreachable!("load checks the world"),
        }
    }

    fn load(
        &self,
        name: &str,
        bytes: &[u8],
        world: World,
    ) -> Result<module::LoadedModule, LoadError> {
        let digest = ModuleDigest::of(bytes);
        if let Some(loaded) = self.lock_modules().get(&digest)
            && loaded.world() == world
        {
            return Ok(loaded.clone());
        }
        // Compile outside the lock: it takes milliseconds and other calls must not wait.
        let loaded = module::load(&self.inner, name, digest, bytes, world)?;
        self.lock_modules().insert(digest, loaded.clone());
        Ok(loaded)
    }

    fn lock_modules(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<ModuleDigest, module::LoadedModule>> {
        // The map is only ever inserted into whole values, so a poisoned lock still
        // guards a consistent map.
        self.modules.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn new_store(
        &self,
        limits: &CallLimits,
        run: &str,
        values: Option<HookValues>,
    ) -> Store<CallState> {
        let state = CallState::new(limits, run.to_owned(), values);
        let mut store = Store::new(&self.inner.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(self.inner.epoch_ticks(limits.timeout));
        store
    }

    /// Runs `body` (instantiate, then call one export) in a fresh store under `limits`
    /// and reports what the guest returned and submitted. The store belongs to this
    /// function, not to `body`'s future, so a call stopped at its deadline still reports
    /// the logs, patches and output it produced.
    async fn call<T>(
        &self,
        run: &str,
        limits: &CallLimits,
        body: impl AsyncFnOnce(&mut Store<CallState>) -> Outcome<T>,
    ) -> CallReport<T> {
        self.call_with(run, limits, None, body).await
    }

    /// [`Self::call`] with the addon module `values` the guest may read.
    async fn call_with<T>(
        &self,
        run: &str,
        limits: &CallLimits,
        values: Option<HookValues>,
        body: impl AsyncFnOnce(&mut Store<CallState>) -> Outcome<T>,
    ) -> CallReport<T> {
        let started = Instant::now();
        let mut store = self.new_store(limits, run, values);
        let raw = tokio::time::timeout(limits.timeout, body(&mut store)).await;
        self.finish(store, raw, limits, started)
    }

    /// Runs an operation's `run` export once in a fresh store.
    pub async fn run_operation(
        &self,
        module: &OperationModule,
        input: OperationInput,
        limits: &CallLimits,
    ) -> CallReport<OperationOutput> {
        let run = input.context.name.clone();
        let mut report = match &module.pre {
            OperationPre::V0_3(pre) => {
                self.call(&run, limits, async |store| pre.run(store, input).await)
                    .await
            }
            OperationPre::V0_2(pre) => {
                self.call(&run, limits, async |store| pre.run(store, input).await)
                    .await
            }
            OperationPre::V0_1(pre) => {
                self.call(&run, limits, async |store| pre.run(store, input).await)
                    .await
            }
        };
        if let Ok(output) = &report.outcome {
            let size = output.output.len()
                + output
                    .results
                    .iter()
                    .map(|(k, v)| k.len() + v.len())
                    .sum::<usize>();
            if size > limits.result_bytes {
                report.outcome = Err(CallError::OutputTooLarge {
                    what: OutputKind::Result,
                    detail: format!(
                        "{size} bytes returned, at most {} allowed",
                        limits.result_bytes
                    ),
                });
            }
        }
        report
    }

    /// Calls a hook's `configure` export in a fresh store. A hook declaring
    /// addon-operator lifecycle bindings is refused: only addon modules run them
    /// ([`Self::configure_addon_hook`]).
    pub async fn configure_hook(
        &self,
        module: &HookModule,
        run: &str,
        limits: &CallLimits,
    ) -> CallReport<HookConfig> {
        let report = self.configure_addon_hook(module, run, limits).await;
        map_outcome(report, |(config, lifecycle)| match lifecycle.first() {
            None => Ok(config),
            Some((binding, _)) => Err(CallError::Failed(format!(
                "lifecycle binding {binding} is only for the hooks of addon modules"
            ))),
        })
    }

    /// Calls the `configure` export of an addon module's hook (or a global hook) in a
    /// fresh store: its configuration and its lifecycle bindings (`beforeHelm`, ...,
    /// with their orders; none from guests built before `operon:engine@0.3.0`).
    pub async fn configure_addon_hook(
        &self,
        module: &HookModule,
        run: &str,
        limits: &CallLimits,
    ) -> CallReport<(HookConfig, Vec<(String, f64)>)> {
        match &module.pre {
            HookPre::V0_3(pre) => {
                self.call(run, limits, async |store| pre.configure(store).await)
                    .await
            }
            HookPre::V0_2(pre) => {
                self.call(run, limits, async |store| pre.configure(store).await)
                    .await
            }
            HookPre::V0_1(pre) => {
                self.call(run, limits, async |store| pre.configure(store).await)
                    .await
            }
        }
    }

    /// Calls a hook's `handle` export in a fresh store.
    pub async fn handle_hook(
        &self,
        module: &HookModule,
        input: &HookInput,
        limits: &CallLimits,
    ) -> CallReport<HookOutput> {
        self.handle_hook_with_values(module, input, None, limits)
            .await
    }

    /// [`Self::handle_hook`] for the hook of an addon module (or a global hook), which
    /// reads `values` and submits patches to them through the `values` interface
    /// (reported in [`CallReport::values_patches`]). A guest built before
    /// `operon:engine@0.3.0` has no such interface and submits none.
    pub async fn handle_hook_with_values(
        &self,
        module: &HookModule,
        input: &HookInput,
        values: Option<HookValues>,
        limits: &CallLimits,
    ) -> CallReport<HookOutput> {
        match &module.pre {
            HookPre::V0_3(pre) => self.handle_with(pre, input, values, limits).await,
            HookPre::V0_2(pre) => self.handle_with(pre, input, values, limits).await,
            HookPre::V0_1(pre) => self.handle_with(pre, input, values, limits).await,
        }
    }

    /// [`Self::handle_hook_with_values`] in the WIT version of `pre`.
    async fn handle_with<P: HookExports>(
        &self,
        pre: &P,
        input: &HookInput,
        values: Option<HookValues>,
        limits: &CallLimits,
    ) -> CallReport<HookOutput> {
        let run = input.context.name.clone();
        let wit = P::input(input);
        self.call_with(&run, limits, values, async |store| {
            pre.handle(store, &wit).await
        })
        .await
    }

    /// Turns the raw result of a call into a report, classifying failures by the limit
    /// that caused them.
    fn finish<T>(
        &self,
        store: Store<CallState>,
        raw: Result<Outcome<T>, tokio::time::error::Elapsed>,
        limits: &CallLimits,
        started: Instant,
    ) -> CallReport<T> {
        let elapsed = started.elapsed();
        let state = store.into_data();
        let memory_bytes = state.limiter.used();
        let outcome = match raw {
            Err(_elapsed) => Err(CallError::Timeout {
                limit: limits.timeout,
            }),
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(message))) => Err(CallError::Failed(message)),
            Ok(Err(phase)) => Err(self.classify(phase, &state, limits)),
        };
        CallReport {
            outcome,
            stdout: state.stdout.text(),
            stderr: state.stderr.text(),
            logs: state.log.records,
            patches: state.kubernetes.operations,
            metrics: state.metrics.operations,
            values_patches: state.values.patches,
            elapsed,
            memory_bytes,
        }
    }

    fn classify(&self, phase: Phase, state: &CallState, limits: &CallLimits) -> CallError {
        let (err, starting) = match phase {
            Phase::Start(e) => (e, true),
            Phase::Call(e) => (e, false),
        };
        let trap = err.downcast_ref::<wasmtime::Trap>().copied();
        if trap == Some(wasmtime::Trap::Interrupt) {
            return CallError::Timeout {
                limit: limits.timeout,
            };
        }
        if let Some(requested) = state.limiter.refused() {
            return CallError::MemoryLimit {
                limit: limits.memory_bytes,
                requested,
            };
        }
        for out in [
            (&state.stdout, OutputKind::Stdout),
            (&state.stderr, OutputKind::Stderr),
        ] {
            if out.0.overflowed() {
                return CallError::OutputTooLarge {
                    what: out.1,
                    detail: format!("at most {} bytes", out.0.capacity()),
                };
            }
        }
        if let Some(limit) = err.downcast_ref::<HostLimitExceeded>() {
            return CallError::from_host_limit(*limit);
        }
        if trap == Some(wasmtime::Trap::StackOverflow) {
            return CallError::StackOverflow {
                limit: self.inner.max_wasm_stack,
            };
        }
        if starting && trap.is_none() {
            return CallError::Start(format!("{err:#}"));
        }
        CallError::Trap {
            message: format!("{err:?}"),
            panic: panic_message(&state.stderr.text()),
        }
    }
}

/// Recovers a Rust guest's panic message from its stderr
/// (`thread '...' panicked at FILE:LINE:COL:\nMESSAGE\nnote: ...`).
/// `report` with its successful outcome passed through `f`.
fn map_outcome<T, U>(
    report: CallReport<T>,
    f: impl FnOnce(T) -> Result<U, CallError>,
) -> CallReport<U> {
    CallReport {
        outcome: report.outcome.and_then(f),
        logs: report.logs,
        patches: report.patches,
        metrics: report.metrics,
        values_patches: report.values_patches,
        stdout: report.stdout,
        stderr: report.stderr,
        elapsed: report.elapsed,
        memory_bytes: report.memory_bytes,
    }
}

fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.rfind("panicked at ")?;
    let rest = &stderr[start + "panicked at ".len()..];
    let (location, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let message: Vec<&str> = body
        .lines()
        .take_while(|line| !line.starts_with("note: ") && !line.starts_with("stack backtrace"))
        .collect();
    let location = location.trim_end_matches(':');
    let message = message.join("\n");
    Some(if message.is_empty() {
        location.to_owned()
    } else {
        format!("{message} (at {location})")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_message_is_recovered_from_rust_stderr() {
        let stderr = "thread '<unnamed>' panicked at src/lib.rs:12:9:\nboom: it broke\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("boom: it broke (at src/lib.rs:12:9)")
        );
        assert_eq!(panic_message("no panic here"), None);
    }
}
