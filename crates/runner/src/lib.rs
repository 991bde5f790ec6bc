//! Operon's processors: what runs one step of a Diagnosis, or one offloaded hook.
//!
//! - [`runner`]: the processor contract ([`runner::Runner`]) and its runners (wasm,
//!   script, http, Kubernetes Job, Argo Workflow, and the built-ins a node offers),
//!   built from an Operation by [`runner::processors`].
//! - [`node_ops`]: the node agent's built-in operations under KubeDiag's `/processor/`
//!   paths.
//! - [`output_log`]: hook and step output in the engine's log, as shell-operator logs it.
//! - [`trace`]: the spans' target and the `traceparent` a run hands on.
//!
//! The modules its steps run come from the crate below, `operon-store`: found by
//! [`operon_store::ModuleLocator`], and for a step offloaded to a Job checked against
//! the [`operon_store::ModuleCatalog`] the Job fetches from. This crate must not know
//! about graphs, Diagnoses' progress, hook queues or the controllers: the pipeline and
//! the hook engine above it decide what runs and when.

#![warn(unreachable_pub)]

pub mod node_ops;
pub mod output_log;
pub mod runner;
pub mod trace;
