//! Operon's engine library: everything the `operon` binary does, as reusable parts.
//!
//! - [`api`] holds the custom resources (Operation, OperationSet, Trigger, Diagnosis).
//! - [`graph`] checks an OperationSet's DAG and walks its paths lazily.
//! - [`pipeline`] runs a Diagnosis over the graph, each node through a [`runner`].
//! - [`runner`] is the one interface of every processor: wasm, script, http.
//! - [`sandbox`] runs WebAssembly components (operations and hooks) with hard limits on
//!   time, memory and output, through the typed contract in `wit/`.
//! - [`triggers`] turns alerts, events and schedules into Diagnoses.
//! - [`manifest`] reads objects from YAML files for the commands that need no cluster.

pub mod api;
pub mod cluster;
pub mod graph;
pub mod hooks;
pub mod jq;
pub mod manifest;
pub mod metrics;
pub mod model;
pub mod pipeline;
pub mod runner;
pub mod sandbox;
pub mod script;
pub mod shell_operator;
pub mod store;
pub mod triggers;
