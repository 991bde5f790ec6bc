//! Operon's engine library: everything the `operon` binary does, as reusable parts.
//!
//! - [`api`] holds the custom resources (Operation, OperationSet, Trigger, Diagnosis).
//! - [`sandbox`] runs WebAssembly components (operations and hooks) with hard limits on
//!   time, memory and output, through the typed contract in `wit/`.

pub mod api;
pub mod graph;
pub mod sandbox;
pub mod triggers;
