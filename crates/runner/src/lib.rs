//! Operon's processors: what runs one step of a Diagnosis, or one offloaded hook.
//!
//! Every processor is a [`Runner`]: it takes a [`RunRequest`] (the input map, the
//! runner context, a timeout) and returns results or a failure. The implementations
//! live beside the contract: [`wasm`] runs a component in the wasm sandbox, [`script`]
//! runs a KubeDiag script in the script sandbox, `http` POSTs to an endpoint, [`job`]
//! runs a Kubernetes Job (and, through [`offload`], a wasm step in Operon's own image),
//! [`argo`] an Argo Workflow, and [`builtin`] the operations a node offers at
//! [`node_paths`]; [`context`] hands each of them the runner context. A new kind of
//! processor is one new module implementing [`Runner`] and one arm in [`processors`],
//! which builds the runner an Operation asks for; the pipeline does not change.
//!
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

pub mod argo;
pub mod builtin;
pub mod context;
mod contract;
pub(crate) mod http;
pub mod job;
pub mod node_ops;
pub mod node_paths;
pub mod offload;
pub mod output_log;
pub mod processors;
pub mod script;
pub mod trace;
pub mod wasm;

pub use contract::{DryRun, RunError, RunOutput, RunRequest, Runner};
