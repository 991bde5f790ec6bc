//! The process-wide wasmtime engine: its configuration, the epoch ticker, the linker
//! and the artifact cache.

use super::cache::ArtifactCache;
use super::host::{self, CallState};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use wasmtime::component::Linker;
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How instances get their memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocatorChoice {
    /// The pooling allocator, falling back to on-demand when its address space cannot
    /// be reserved.
    #[default]
    Auto,
    /// The pooling allocator or nothing.
    Pooling,
    /// On-demand allocation (slower per call, no up-front reservation).
    OnDemand,
}

/// The allocator the engine actually uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllocatorKind {
    /// Pre-reserved slots reused across calls.
    Pooling,
    /// mmap per instance.
    OnDemand,
}

/// Process-wide sandbox settings. Per-call limits are [`super::CallLimits`].
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// How many calls may run at once (pool slots).
    pub max_concurrent_calls: u32,
    /// The largest memory limit any call may be given; sizes each pool slot.
    pub max_memory_bytes: u64,
    /// The maximum wasm stack of a call; deeper recursion traps as a stack overflow.
    pub max_wasm_stack: usize,
    /// How often the epoch advances; deadlines fire at most one tick late.
    pub epoch_tick: Duration,
    /// Where compiled artifacts are cached; `None` compiles every module at load.
    pub cache_dir: Option<PathBuf>,
    /// Which allocator to use.
    pub allocator: AllocatorChoice,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            max_concurrent_calls: 64,
            max_memory_bytes: 256 << 20,
            max_wasm_stack: 1 << 20,
            epoch_tick: Duration::from_millis(5),
            cache_dir: None,
            allocator: AllocatorChoice::Auto,
        }
    }
}

/// Why the engine could not be built. `Clone`, so that a sandbox that failed to start
/// can say why to every caller that wanted it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// wasmtime rejected the configuration.
    #[error("cannot configure the wasm engine: {0}")]
    Config(String),
    /// The pooling allocator was required but could not be set up.
    #[error("the pooling allocator is unavailable ({0}); use the automatic or on-demand allocator")]
    PoolingUnavailable(String),
}

/// Everything shared by all calls.
pub(crate) struct EngineState {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<CallState>,
    pub(crate) cache: Option<ArtifactCache>,
    pub(crate) allocator: AllocatorKind,
    pub(crate) max_wasm_stack: usize,
    epoch_tick: Duration,
    /// Stops the ticker thread when the engine goes away.
    ticker_stop: Arc<AtomicBool>,
}

impl Drop for EngineState {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

fn base_config(config: &SandboxConfig) -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true)
        .epoch_interruption(true)
        .max_wasm_stack(config.max_wasm_stack)
        // Fiber stacks must hold the wasm stack plus the host frames below it.
        .async_stack_size(config.max_wasm_stack + (1 << 20))
        .memory_init_cow(true)
        .cranelift_opt_level(wasmtime::OptLevel::Speed);
    c
}

fn pooling(config: &SandboxConfig) -> PoolingAllocationConfig {
    let slots = config.max_concurrent_calls;
    let mut pool = PoolingAllocationConfig::new();
    // A Rust wasm32-wasip2 component holds a handful of core instances (the program,
    // the WASI adapter glue, shims); leave room for larger toolchains' output.
    pool.total_component_instances(slots)
        .total_core_instances(slots * 16)
        .max_core_instances_per_component(32)
        .total_memories(slots * 2)
        .max_memories_per_component(4)
        .total_tables(slots * 8)
        .max_tables_per_component(16)
        .total_stacks(slots)
        .max_memory_size(usize::try_from(config.max_memory_bytes).unwrap_or(usize::MAX))
        // Resetting a slot by rewriting the pages a call touched is cheaper than
        // unmapping and faulting them in again on the next call.
        .linear_memory_keep_resident(1 << 20)
        .table_keep_resident(64 << 10)
        .pagemap_scan(Enabled::Auto);
    pool
}

impl EngineState {
    pub(crate) fn new(config: SandboxConfig) -> Result<Self, EngineError> {
        let (engine, allocator) = build_engine(&config)?;
        let mut linker = Linker::new(&engine);
        host::link(&mut linker).map_err(|e| EngineError::Config(format!("{e:#}")))?;
        let cache = config.cache_dir.as_deref().and_then(|dir| {
            ArtifactCache::open(dir, &engine)
                .inspect_err(|e| tracing::warn!(error = %e, "compiled-module cache disabled"))
                .ok()
        });
        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.clone(), config.epoch_tick, ticker_stop.clone())
            .map_err(|e| EngineError::Config(format!("cannot start the epoch ticker: {e}")))?;
        Ok(Self {
            engine,
            linker,
            cache,
            allocator,
            max_wasm_stack: config.max_wasm_stack,
            epoch_tick: config.epoch_tick,
            ticker_stop,
        })
    }

    /// The epoch deadline, in ticks, for a call of `timeout`.
    pub(crate) fn epoch_ticks(&self, timeout: Duration) -> u64 {
        let tick = self.epoch_tick.as_nanos().max(1);
        // One extra tick: the current epoch may be about to advance.
        u64::try_from(timeout.as_nanos().div_ceil(tick)).unwrap_or(u64::MAX - 1) + 1
    }
}

fn build_engine(config: &SandboxConfig) -> Result<(Engine, AllocatorKind), EngineError> {
    if config.allocator != AllocatorChoice::OnDemand {
        let mut c = base_config(config);
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(config)));
        match Engine::new(&c) {
            Ok(engine) => return Ok((engine, AllocatorKind::Pooling)),
            Err(e) if config.allocator == AllocatorChoice::Pooling => {
                return Err(EngineError::PoolingUnavailable(format!("{e:#}")));
            }
            Err(e) => tracing::warn!(
                reason = %format!("{e:#}"),
                "pooling allocator unavailable (its address-space reservation failed); \
                 falling back to on-demand allocation"
            ),
        }
    }
    let mut c = base_config(config);
    c.allocation_strategy(InstanceAllocationStrategy::OnDemand);
    let engine = Engine::new(&c).map_err(|e| EngineError::Config(format!("{e:#}")))?;
    Ok((engine, AllocatorKind::OnDemand))
}

fn spawn_ticker(engine: Engine, tick: Duration, stop: Arc<AtomicBool>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("operon-epoch".to_owned())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                engine.increment_epoch();
            }
        })
        .map(drop)
}
