//! The script sandbox: shell scripts and shell-operator hook directories, run unchanged
//! and contained by Linux.
//!
//! - [`sandbox`] runs a program in a private run directory inside new user, mount, pid,
//!   network, IPC and UTS namespaces, under Landlock rules and rlimits, with a cleared
//!   environment, bounded output and a deadline that kills every process of the run.
//!   [`Protections`] says what each run actually got; strict mode refuses to run without
//!   all of it.
//! - `pool` keeps launchers waiting inside fresh namespaces, one per run, so a run
//!   only sends its spec over the `channel` (a socket that also hands over descriptors).
//! - [`launcher`] is the in-sandbox half: the process that applies the protections and
//!   starts the program. It is its own small binary where one is installed beside the
//!   engine (`operon-sandbox-exec`, see [`Launcher::for_this_binary`]); otherwise binaries
//!   call [`launcher::run_if_invoked`] first thing in `main` and launch themselves.
//! - [`store`] keeps KubeDiag `scriptRunner` scripts under the agent's data root.
//! - [`seccomp`] is the `Localhost` seccomp profile Operon's pods run under, which
//!   lets the sandbox create its namespaces inside a container.
//!
//! The two users of the sandbox live above it, beside their contracts: the engine's
//! `runner::script` runs KubeDiag scripts as operations and `hooks::runner::script`
//! runs shell-operator hooks. This crate must not know about graphs, queues, hooks'
//! formats or the cluster: it depends on nothing of Operon but its data model.

#![warn(unreachable_pub)]

mod channel;
mod cleanup;
pub mod error;
mod fingerprint;
pub mod launcher;
mod launcher_program;
mod namespaces;
mod output;
mod pool;
mod private_copy;
mod proc_view;
pub mod protections;
mod rules;
mod run_dir;
pub mod sandbox;
pub mod seccomp;
mod spec;
pub mod store;

pub use error::{SandboxError, StoreError};
pub use protections::{ProtectionState, Protections, register_metrics};
pub use run_dir::RunDir;
pub use sandbox::{
    Launcher, LazyScriptSandbox, OutputMode, RunStatus, SandboxOutcome, SandboxRequest,
    ScriptSandbox, ScriptSandboxConfig,
};
pub use spec::Limits;
pub use store::{Ensured, ScriptStore, SyncReport};
