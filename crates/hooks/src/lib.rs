//! Operon's hook engine and shell-operator's formats.
//!
//! - [`hooks`]: the hook contract, its runners (wasm, script, Job), loading hooks from
//!   files, validating their configuration, and the engine: watches through the
//!   cluster layer, binding contexts, queues, patches applied in order, webhook reviews
//!   and conversion chains.
//! - [`shell_operator`]: everything shell-operator writes or reads (`--config`, binding
//!   context files, patch, metric and response files), each format read and written by
//!   the same module.
//! - [`metrics`]: the Prometheus metrics hooks set and the engine's own.
//!
//! This crate must not know about Diagnoses, the controllers or the processes that run
//! it (`operon serve`, `operon hook run`): they drive the engine through its API.

#![warn(unreachable_pub)]

pub mod hooks;
pub mod metrics;
pub mod shell_operator;
