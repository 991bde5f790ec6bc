//! The script sandbox: shell scripts and shell-operator hook directories, run unchanged
//! and contained by Linux.
//!
//! - [`sandbox`] runs a program in a private run directory inside new user, mount, pid,
//!   network, IPC and UTS namespaces, under Landlock rules and rlimits, with a cleared
//!   environment, bounded output and a deadline that kills every process of the run.
//!   [`Protections`] says what each run actually got; strict mode refuses to run without
//!   all of it.
//! - [`launcher`] is the in-sandbox half: the process that applies the protections and
//!   starts the program. Binaries call [`launcher::run_if_invoked`] first thing in `main`.
//! - [`store`] keeps KubeDiag `scriptRunner` scripts under the agent's data root, and
//!   [`runner`] runs them through the pipeline's [`crate::runner::Runner`] contract.
//! - [`hook`] is shell-operator compatibility: hooks-directory discovery and
//!   [`ScriptHook`], a [`crate::hooks::Hook`] whose files ([`files`]) become the same
//!   typed values a wasm hook returns.
//!
//! Nothing here knows about graphs, queues or the cluster.

pub mod error;
pub mod files;
pub mod hook;
pub mod launcher;
pub mod protections;
pub mod runner;
pub mod sandbox;
mod spec;
pub mod store;

pub use error::{DiscoveryError, HookFileError, SandboxError, StoreError};
pub use hook::{ScriptHook, ScriptHookSettings, discover};
pub use protections::{ProtectionState, Protections, register_metrics};
pub use runner::{SandboxedScriptRunner, ScriptSource};
pub use sandbox::{
    Launcher, OutputMode, RunDir, RunStatus, SandboxConfig, SandboxOutcome, SandboxRequest,
    ScriptSandbox,
};
pub use spec::Limits;
pub use store::{ScriptStore, SyncReport};
