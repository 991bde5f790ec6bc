//! The hook engine: shell-operator's hook model (bindings, binding contexts, snapshots,
//! queues, patches, metrics) over hooks that are wasm components or script
//! directories.
//!
//! Every hook, whatever runs it, is a [`Hook`] ([`runner`]): it returns its
//! configuration and handles runs with typed binding contexts, returning typed patches
//! and metrics. The engine cannot tell a wasm hook from a shell script. [`load`] makes
//! hooks from files, [`config`] checks what they declare, [`context`] builds their
//! binding contexts, `queue` and [`engine`] run them; [`history`] keeps each hook's
//! last runs and [`log_level`] its own log level, both for the debug socket; [`shadow`]
//! runs a hook beside another on its inputs and compares what they do; [`reload`]
//! notices that a tree of hooks changed while the process runs.

pub mod capture;
pub mod config;
pub mod context;
pub mod conversion;
pub mod engine;
pub mod engines;
pub mod history;
pub mod load;
pub mod log_level;
pub(crate) mod objects;
pub mod permitted;
pub(crate) mod queue;
pub mod reload;
pub mod runner;
pub mod shadow;

pub use runner::{Hook, HookError, HookRun, ScriptHook, ScriptHookSettings, WasmHook, discover};
