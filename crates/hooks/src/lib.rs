//! Operon's hook engine and shell-operator's formats.
//!
//! Every hook, whatever runs it, is a [`Hook`] ([`runner`]: wasm components, script
//! directories, Jobs): it returns its configuration and handles runs with typed binding
//! contexts, returning typed patches and metrics. The engine cannot tell a wasm hook
//! from a shell script.
//!
//! - [`load`] makes hooks from files, [`config`] checks what they declare, [`context`]
//!   builds their binding contexts, `queue` and [`engine`] run them: watches through the
//!   cluster layer, queues, patches applied in order, webhook reviews and
//!   [`conversion`] chains.
//! - [`engine_set`] holds every hook engine of a process, for whoever answers about
//!   hooks; [`history`] keeps each hook's last runs and [`log_level`] its own log level,
//!   both for the debug socket; [`shadow`] runs a hook beside another on its inputs and
//!   compares what they do; [`reload`] notices that a tree of hooks changed while the
//!   process runs; [`capture`] records what a hook saw for replay; [`permitted`] checks
//!   a hook's watches against its permissions.
//! - [`shell_operator`]: everything shell-operator writes or reads (`--config`, binding
//!   context files, patch, metric and response files), each format read and written by
//!   the same module.
//! - [`metrics`]: the Prometheus metrics hooks set and the engine's own.
//!
//! This crate must not know about Diagnoses, the controllers or the processes that run
//! it (`operon serve`, `operon hook run`): they drive the engine through its API.

#![warn(unreachable_pub)]

pub mod capture;
pub mod config;
pub mod context;
pub mod conversion;
pub mod engine;
pub mod engine_set;
pub mod history;
pub mod load;
pub mod log_level;
pub mod metrics;
pub(crate) mod objects;
pub mod permitted;
pub(crate) mod queue;
pub mod reload;
pub mod runner;
pub mod shadow;
pub mod shell_operator;

pub use runner::{Hook, HookError, HookRun, ScriptHook, ScriptHookSettings, WasmHook, discover};
