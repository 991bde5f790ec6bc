//! Operon's library as one crate: the `operon` binary's view of the workspace, and the
//! paths the integration tests, benchmarks and fuzz targets use.
//!
//! Each module here is another crate of the workspace (or a module of one), re-exported
//! under the name it has always had. The crates, from the bottom up; each uses only the
//! ones above it in this list (see ARCHITECTURE.md):
//!
//! - `operon-data`: [`model`] (what crosses module boundaries), [`api`] (the custom
//!   resources and their own checks), [`schedule`] (cron schedules and their slots),
//!   [`yaml_scan`] (a first pass over YAML text). No I/O.
//! - `operon-jq`: [`jq`], jq filters (jaq) with jq's path semantics, cached and bounded.
//! - `operon-sandbox`: [`sandbox`], the wasm sandbox; the only crate that knows the
//!   WIT-generated types.
//! - `operon-script`: [`script`], the Linux sandbox for shell scripts and its script store.
//! - `operon-cluster`: [`cluster`], the `Cluster` contract, the in-memory cluster and the
//!   kube-rs one.
//! - `operon-store`: [`store`], the module store (found by path, name or digest; the
//!   content-addressed store and its replication; OCI artifacts and their signatures).
//! - `operon-runner`: [`runner`] (the processor contract and its runners), [`node_ops`]
//!   (a node's built-in operations), [`output_log`].
//! - `operon-pipeline`: [`graph`], [`pipeline`] (planning and running a Diagnosis),
//!   [`triggers`].
//! - `operon-hooks`: [`hooks`] (the hook engine), [`shell_operator`] (its formats),
//!   [`metrics`].
//! - `operon-addons`: [`addons`], addon-operator's modules on the hook engine.
//! - `operon-manifest`: [`manifest`] (objects read from YAML files and checked together,
//!   for commands with no cluster) and [`kubediag`] (KubeDiag objects rewritten into
//!   Operon's group).
//! - `operon-controller`: [`serve`], [`controllers`], [`agent`], [`telemetry`] (logs,
//!   and traces over OTLP).
//! - `operon-scenario`: [`scenario`], `operon test`'s test files, run against the
//!   in-memory cluster and checked.
//!
//! The binary's own code (parsing a command line, calling these, printing) is in
//! `src/cli`, beside `main.rs`.

/// The allocator the `operon` binary runs with, and the benchmarks that measure its work:
/// mimalloc with the `mimalloc` feature (the default), else the C library's.
///
/// Each watch event allocates and frees JSON trees of many small nodes. Under bursts,
/// glibc's malloc spends much of the hook loop's time outside the guest call
/// consolidating and unlinking the freed chunks, where mimalloc's per-size free pages
/// do not, and the kube layer's cost over a parse is mostly freeing. At rest mimalloc
/// holds a few MiB more (6 to 9 MiB for a controller idle or watching a thousand Pods),
/// which the launcher's own binary more than gave back. It is built without asking for
/// transparent huge pages, which kept freed memory resident. See the book's performance
/// pages.
#[cfg(feature = "mimalloc")]
pub use mimalloc::MiMalloc as Allocator;
/// The allocator the `operon` binary runs with, and the benchmarks that measure its work:
/// mimalloc with the `mimalloc` feature (the default), else the C library's.
#[cfg(not(feature = "mimalloc"))]
pub use std::alloc::System as Allocator;

/// Makes [`Allocator`] the global allocator of the binary that calls it: the `operon`
/// binary, and the benches that run the engine in their own process, so that their
/// figures are the binary's.
#[macro_export]
macro_rules! binary_allocator {
    () => {
        #[global_allocator]
        static ALLOCATOR: $crate::Allocator = $crate::Allocator;
    };
}

pub use operon_addons as addons;
pub use operon_cluster as cluster;
pub use operon_controller::{agent, controllers, serve, telemetry};
pub use operon_data::{api, error_text, model, schedule, yaml_scan};
pub use operon_hooks::{self as hooks, metrics, shell_operator};
pub use operon_jq as jq;
pub use operon_manifest::{self as manifest, kubediag};
pub use operon_pipeline::{self as pipeline, graph, triggers};
pub use operon_runner::{self as runner, node_ops, output_log};
pub use operon_sandbox as sandbox;
pub use operon_scenario as scenario;
pub use operon_script as script;
pub use operon_store as store;
