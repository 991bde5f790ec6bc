//! The per-call host state and the one place where every host interface is linked.
//!
//! Each WIT host interface (`log`, `kubernetes`, `metrics`, `values`) is its own module with its
//! own state; adding an interface adds a module and a line in [`link`], nothing else.
//! Every published version of the WIT package is linked at once (see [`link`]).
//! WASI is linked with a context that grants nothing but the read-only directories a
//! call's limits name: no other files, no environment, no sockets, stdin closed, stdout
//! and stderr captured into bounded buffers.

pub(crate) mod kubernetes;
pub(crate) mod log;
pub(crate) mod metrics;
pub(crate) mod values;

use super::limits::{CallLimits, MemoryLimiter};
use super::output::BoundedOutput;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};

/// A host-side budget a guest exhausted through an import; returned as a trap so the
/// guest stops at once.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostLimitExceeded {
    /// The run logged more bytes than allowed.
    #[error("log output exceeded {limit} bytes")]
    Logs {
        /// The byte budget.
        limit: usize,
    },
    /// The run submitted more patch operations than allowed.
    #[error("more than {limit} patch operations submitted")]
    PatchOperations {
        /// The operation budget.
        limit: usize,
    },
    /// The run's patch operations carried more bytes than allowed.
    #[error("patch operations exceeded {limit} bytes")]
    PatchBytes {
        /// The byte budget.
        limit: usize,
    },
    /// The run submitted more metric operations than allowed.
    #[error("more than {limit} metric operations submitted")]
    MetricOperations {
        /// The operation budget.
        limit: usize,
    },
}

/// Everything one call's `Store` owns.
pub(crate) struct CallState {
    /// WASI context with no ambient authority.
    wasi: WasiCtx,
    /// WASI resources (streams, pollables) of this call.
    table: ResourceTable,
    /// Enforces the call's memory limit and remembers whether it was hit.
    pub(crate) limiter: MemoryLimiter,
    /// Captured stdout.
    pub(crate) stdout: BoundedOutput,
    /// Captured stderr.
    pub(crate) stderr: BoundedOutput,
    /// The `log` interface.
    pub(crate) log: log::LogState,
    /// The `kubernetes` interface.
    pub(crate) kubernetes: kubernetes::KubernetesState,
    /// The `metrics` interface.
    pub(crate) metrics: metrics::MetricsState,
    /// The `values` interface (addon module hooks).
    pub(crate) values: values::ValuesState,
}

impl CallState {
    /// A fresh state for one call named `run` under `limits`, with the addon module
    /// `values` a module or global hook sees (none for any other call).
    pub(crate) fn new(
        limits: &CallLimits,
        run: String,
        values: Option<values::HookValues>,
    ) -> Self {
        let stdout = BoundedOutput::new(limits.stdout_bytes);
        let stderr = BoundedOutput::new(limits.stderr_bytes);
        // The builder's defaults already deny what matters: no preopens, no env, no
        // args, stdin closed, every socket address refused, no name lookup. The only
        // files are the directories the Operation grants, read-only.
        let mut builder = WasiCtx::builder();
        builder.stdout(stdout.clone()).stderr(stderr.clone());
        for dir in &limits.read_only_dirs {
            if let Err(e) = builder.preopened_dir(&dir.host, &dir.guest, FsPerms::ReadOnly) {
                // The runner checked the directory just before the call; one that went
                // away since is simply absent for the guest, which reports it.
                tracing::warn!(run = %run, dir = %dir.host.display(), error = %e,
                    "cannot grant a read-only directory to the guest");
            }
        }
        let wasi = builder.build();
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(limits.memory_bytes),
            stdout,
            stderr,
            log: log::LogState::new(limits.log_bytes, run),
            kubernetes: kubernetes::KubernetesState::new(
                limits.patch_operations,
                limits.patch_bytes,
            ),
            metrics: metrics::MetricsState::new(limits.metric_operations),
            values: values::ValuesState::new(values, limits.patch_operations, limits.patch_bytes),
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Adds WASI and every Operon host interface, in every linked version of
/// `operon:engine`, to `linker`.
///
/// Each version's interfaces are imported under their own versioned names
/// (`operon:engine/log@0.1.0`, `operon:engine/log@0.2.0`, ...), so one linker serves
/// guests of every version, and they share one state per interface: a call's records,
/// patches and metrics land in the same buffers whichever version the guest speaks.
pub(crate) fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use super::bindings::operation::operon::engine as v0_3;
    use super::bindings::v0_1::operation::operon::engine as v0_1;
    use super::bindings::v0_2::operation::operon::engine as v0_2;
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    v0_3::log::add_to_linker::<_, HasSelf<log::LogState>>(linker, |s| &mut s.log)?;
    v0_3::kubernetes::add_to_linker::<_, HasSelf<kubernetes::KubernetesState>>(linker, |s| {
        &mut s.kubernetes
    })?;
    v0_3::metrics::add_to_linker::<_, HasSelf<metrics::MetricsState>>(linker, |s| &mut s.metrics)?;
    super::bindings::values::add_to_linker::<_, HasSelf<values::ValuesState>>(linker, |s| {
        &mut s.values
    })?;
    v0_2::log::add_to_linker::<_, HasSelf<log::LogState>>(linker, |s| &mut s.log)?;
    v0_2::kubernetes::add_to_linker::<_, HasSelf<kubernetes::KubernetesState>>(linker, |s| {
        &mut s.kubernetes
    })?;
    v0_2::metrics::add_to_linker::<_, HasSelf<metrics::MetricsState>>(linker, |s| &mut s.metrics)?;
    v0_1::log::add_to_linker::<_, HasSelf<log::LogState>>(linker, |s| &mut s.log)?;
    v0_1::kubernetes::add_to_linker::<_, HasSelf<kubernetes::KubernetesState>>(linker, |s| {
        &mut s.kubernetes
    })?;
    v0_1::metrics::add_to_linker::<_, HasSelf<metrics::MetricsState>>(linker, |s| &mut s.metrics)?;
    Ok(())
}
