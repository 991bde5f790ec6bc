//! What the engine tells the launcher, and what the launcher answers.
//!
//! The engine sends one [`LaunchSpec`] as JSON over the launcher's
//! [control channel](super::channel), with a descriptor for each of
//! [`LaunchSpec::handed`]; the launcher
//! answers with one line on stdout, [`READY_MARKER`] followed by a [`LaunchReport`] as
//! JSON, before the script's own output starts. Anything before the marker (a test
//! harness' banner, say) is discarded by the engine.

use super::protections::ProtectionState;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Starts the launcher's answer line on stdout. The record separator keeps it from
/// colliding with anything a program would plausibly print first.
pub(crate) const READY_MARKER: &str = "\u{1e}operon-sandbox-ready ";

/// Resource limits of one run. `None` leaves a limit as inherited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// `RLIMIT_CPU` in seconds, per process; `None` derives it from the timeout.
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_AS` in bytes, per process.
    pub address_space_bytes: Option<u64>,
    /// `RLIMIT_NPROC`: processes (threads included) of the run's user namespace.
    pub processes: Option<u64>,
    /// `RLIMIT_FSIZE` in bytes: the largest file the run may write.
    pub file_size_bytes: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub open_files: Option<u64>,
    /// Size of the tmpfs that is the run's scratch directory (HOME, TMPDIR, cwd).
    pub disk_bytes: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_seconds: None,
            // Go programs such as kubectl reserve a lot of address space up front.
            address_space_bytes: Some(4 << 30),
            processes: Some(128),
            file_size_bytes: Some(64 << 20),
            open_files: Some(1024),
            disk_bytes: Some(64 << 20),
        }
    }
}

/// What every run of one sandbox and one kind of run (with or without network) shares:
/// given to a launcher when it starts, as JSON in its environment, so that it opens the
/// system paths and builds their Landlock rules while it waits for its run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LaunchBase {
    /// The engine's [build fingerprint](super::fingerprint): a launcher built from other
    /// sources refuses to run rather than misread the rest.
    pub(crate) fingerprint: u64,
    /// Paths that may be read and executed.
    pub(crate) read_only: Vec<PathBuf>,
    /// `/etc` entries never to expose, relative to `/etc`.
    pub(crate) etc_hidden: Vec<String>,
    /// Device files that may be read and written (`/dev/null`, ...).
    pub(crate) devices: Vec<PathBuf>,
    /// Whether the run may use the network.
    pub(crate) network: bool,
    /// Whether the engine put the launcher in a new mount namespace.
    pub(crate) mount_namespace: bool,
    /// Whether the engine mounted a private `/proc` for a new pid namespace, or why not.
    pub(crate) private_proc: ProtectionState,
    /// Whether the run's host uid is 0, which the kernel exempts from `RLIMIT_NPROC`.
    pub(crate) host_root: bool,
    /// The default size of the scratch tmpfs, which a waiting launcher mounts ahead of
    /// its run (a run asking for another size gets its own).
    pub(crate) scratch_bytes: Option<u64>,
}

/// Everything else the launcher needs to set up one run and start its program.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LaunchSpec {
    /// The program to execute (its shebang is honoured by the kernel).
    pub(crate) program: PathBuf,
    /// Its arguments.
    pub(crate) args: Vec<String>,
    /// The complete environment of the program.
    pub(crate) env: Vec<(String, String)>,
    /// The program's working directory.
    pub(crate) cwd: PathBuf,
    /// The run directory: its existing files may be read and written, nothing created.
    pub(crate) run_dir: PathBuf,
    /// The scratch directory inside the run directory: fully writable.
    pub(crate) work_dir: PathBuf,
    /// The run's own paths that may be read and executed, in the order of the
    /// descriptors sent with the spec: the launcher may be unable to reach them by path.
    pub(crate) handed: Vec<PathBuf>,
    /// Copies of read-only paths the run's uid may not read, to mount over them.
    #[serde(default)]
    pub(crate) private_copies: Vec<super::private_copy::PrivateCopy>,
    /// The limits to set.
    pub(crate) limits: Limits,
    /// Whether the program's stderr goes to stdout, interleaved as on a terminal.
    pub(crate) combined_output: bool,
    /// Refuse to start the program when a protection is missing.
    pub(crate) strict: bool,
    /// Protections strict mode does without (`--strict-except`).
    #[serde(default)]
    pub(crate) strict_except: Vec<String>,
    /// A wall-clock backstop in milliseconds, in case the engine dies mid-run.
    pub(crate) backstop_ms: u64,
}

/// The launcher's answer: what it applied, or why it stopped.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LaunchReport {
    /// The launcher runs as pid 1 of a new pid namespace.
    pub(crate) pid_namespace: bool,
    /// State of the private `/proc`.
    pub(crate) private_proc: ProtectionState,
    /// States of the Landlock parts.
    pub(crate) landlock_filesystem: ProtectionState,
    /// Landlock TCP rules.
    pub(crate) landlock_network: ProtectionState,
    /// Landlock scopes.
    pub(crate) landlock_scopes: ProtectionState,
    /// `RLIMIT_CPU`.
    pub(crate) cpu_limit: ProtectionState,
    /// `RLIMIT_AS`.
    pub(crate) memory_limit: ProtectionState,
    /// `RLIMIT_NPROC`.
    pub(crate) process_limit: ProtectionState,
    /// `RLIMIT_FSIZE`.
    pub(crate) file_size_limit: ProtectionState,
    /// `RLIMIT_NOFILE`.
    pub(crate) open_files_limit: ProtectionState,
    /// The scratch tmpfs.
    pub(crate) disk_budget: ProtectionState,
    /// Set when the launcher refused or failed to start the program.
    pub(crate) error: Option<LaunchFailure>,
}

/// Why the launcher did not start the program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LaunchFailure {
    /// The missing protection, in strict mode.
    pub(crate) protection: Option<String>,
    /// What went wrong.
    pub(crate) message: String,
}
