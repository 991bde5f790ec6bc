//! Errors of the script sandbox and the script store.

use std::path::PathBuf;

/// Why a sandboxed run could not happen at all. A script that runs and fails is not an
/// error here: it is a [`super::RunStatus`].
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// Strict mode refused to run because a protection is missing.
    #[error("strict mode: refusing to run without protection {protection}: {reason}")]
    Unprotected {
        /// The protection's name, as in [`super::Protections::iter`].
        protection: String,
        /// Why it is missing.
        reason: String,
    },
    /// The run directory or one of its files could not be prepared or read.
    #[error("run directory {path}: {source}")]
    RunDir {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The binary that becomes the launcher cannot be found.
    #[error("cannot find the operon binary: {0}")]
    NoLauncher(#[source] std::io::Error),
    /// The launcher chain could not be started.
    #[error("cannot start the sandbox ({program}): {source}")]
    Spawn {
        /// The program that failed to start (`unshare` or the launcher).
        program: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The launcher started but did not set the run up.
    #[error("the sandbox did not start: {0}")]
    Setup(String),
    /// The run's output pipe could not be given to its uid.
    #[error("the sandbox did not start: cannot give the output pipe to uid {uid}: {source}")]
    OutputPipe {
        /// The run's uid.
        uid: u32,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The run's output pipe could not be read.
    #[error("the sandbox did not start: cannot read the run's output: {0}")]
    ReadOutput(#[source] std::io::Error),
    /// A read-only path the run's uid may not read is too large for the private copy
    /// that would let it run.
    #[error(
        "{path} may not be read by the run's uid and is too large to copy for it (more than {max_bytes} bytes or {max_entries} entries)"
    )]
    CopyTooLarge {
        /// The read-only path.
        path: PathBuf,
        /// The most bytes a copy holds.
        max_bytes: u64,
        /// The most entries a copy holds.
        max_entries: usize,
    },
    /// The launcher spec could not be encoded.
    #[error("cannot encode the launch spec: {0}")]
    Spec(#[from] serde_json::Error),
}

/// Why the script store could not create, replace, read or remove a script.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The name cannot be a file name in the store.
    #[error("invalid script name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// The store's directory could not be opened or created.
    #[error("script store {path}: {source}")]
    Open {
        /// The data root.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file operation inside the store failed.
    #[error("script {name:?}: {source}")]
    Io {
        /// The script's name.
        name: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The script does not exist.
    #[error("no script named {0:?} in the store")]
    NotFound(String),
}
