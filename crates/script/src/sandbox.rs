//! The engine side of the script sandbox: one [`ScriptSandbox`] per process runs
//! programs in private run directories, contained by Linux.
//!
//! A run is a chain of processes in a new process group: util-linux `unshare` creates
//! the namespaces and forks the [launcher](super::launcher) as
//! pid 1 of the new pid namespace; the launcher sets rlimits, mounts the scratch tmpfs,
//! applies Landlock and starts the program. Chains are started ahead of their runs by
//! the pool, so a run only sends its spec over the
//! control channel, with descriptors of the run's own read-only
//! paths. The engine bounds the run's stdout and stderr, and at the deadline (or when
//! output overflows) kills the process group, which takes the pid namespace and every
//! process in it down with it.
//!
//! When the engine runs as root, runs use an unprivileged host uid (65534 by default),
//! because the kernel does not apply `RLIMIT_NPROC` to uid 0 and root could read every
//! root-only file the Landlock rules leave visible.

use super::cleanup::Cleaner;
use super::error::SandboxError;
pub use super::launcher_program::Launcher;
use super::namespaces::NamespaceSupport;
use super::output;
use super::pool::{Finished, LauncherPool, Recipe, Shape};
use super::private_copy::{PrivateCopy, needs_copy};
use super::protections::{ProtectionState, Protections};
use super::run_dir::RunDir;
use super::spec::{LaunchBase, LaunchReport, LaunchSpec, Limits};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The PATH programs get: the usual system directories, nothing from the engine.
pub(crate) const SANDBOX_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The host uid and gid runs use when the engine is root: `nobody`.
pub(crate) const DEFAULT_SANDBOX_ID: u32 = 65534;

/// Process-wide settings of the script sandbox.
#[derive(Debug, Clone)]
pub struct ScriptSandboxConfig {
    /// What becomes the launcher.
    pub(crate) launcher: Launcher,
    /// Where run directories are created (made 0711 so a run's uid can reach its own).
    pub runs_dir: PathBuf,
    /// The host uid and gid of runs; `None` keeps the engine's. Defaults to
    /// [`DEFAULT_SANDBOX_ID`] when the engine is root.
    pub(crate) run_as: Option<(u32, u32)>,
    /// Refuse to run when any protection is unavailable.
    pub strict: bool,
    /// Default limits of a run.
    pub limits: Limits,
    /// Paths every run may read and execute: what a shell and its tools need.
    pub read_only: Vec<PathBuf>,
    /// `/etc` entries no run may read (`shadow`, `ssl/private`, ...).
    pub(crate) etc_hidden: Vec<String>,
    /// Device files every run may read and write.
    pub(crate) devices: Vec<PathBuf>,
    /// util-linux `unshare`; `None` runs without namespaces (reported as unavailable).
    pub unshare: Option<PathBuf>,
    /// Launchers kept waiting, already inside their namespaces, per kind of run (with
    /// or without network); each serves one run. 0 starts every launcher when its run
    /// comes, which adds the namespaces' and the launcher's start to every run.
    pub pool_size: usize,
}

impl ScriptSandboxConfig {
    /// Defaults for `launcher`: runs under the system temp directory, system paths
    /// read-only, secrets in `/etc` hidden.
    pub fn new(launcher: Launcher) -> Self {
        let root = rustix::process::geteuid().is_root();
        Self {
            launcher,
            runs_dir: std::env::temp_dir().join("operon-script-runs"),
            run_as: root.then_some((DEFAULT_SANDBOX_ID, DEFAULT_SANDBOX_ID)),
            strict: false,
            limits: Limits::default(),
            read_only: [
                "/bin", "/sbin", "/usr", "/lib", "/lib32", "/lib64", "/libx32",
            ]
            .into_iter()
            .map(PathBuf::from)
            .collect(),
            etc_hidden: [
                "shadow",
                "shadow-",
                "gshadow",
                "gshadow-",
                "sudoers",
                "sudoers.d",
                "ssh",
                "ssl/private",
                "security/opasswd",
                "kubernetes",
                "docker",
                "credstore",
                "credstore.encrypted",
            ]
            .into_iter()
            .map(str::to_owned)
            .collect(),
            devices: [
                "/dev/null",
                "/dev/zero",
                "/dev/full",
                "/dev/random",
                "/dev/urandom",
            ]
            .into_iter()
            .map(PathBuf::from)
            .collect(),
            unshare: Some(PathBuf::from("/usr/bin/unshare")),
            pool_size: 2,
        }
    }
}

/// How the run's output is captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputMode {
    /// stdout and stderr apart, each bounded by the limit.
    #[default]
    Separate,
    /// One pipe for both, interleaved as a terminal shows them (KubeDiag's output);
    /// everything lands in `stdout`.
    Combined,
}

/// One program to run.
#[derive(Debug, Clone)]
pub struct SandboxRequest {
    /// A name for logs.
    pub(crate) name: String,
    /// The program: a path inside the run directory or under a read-only path.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables besides PATH, HOME, TMPDIR and LANG (which they may override): the
    /// contract's variables and the declared allow-list, nothing else.
    pub env: Vec<(String, String)>,
    /// Working directory; `None` is the run's scratch directory.
    pub cwd: Option<PathBuf>,
    /// Extra paths the run may read and execute (a hooks directory).
    pub read_only: Vec<PathBuf>,
    /// Whether the run may use the network.
    pub network: bool,
    /// Wall-clock budget, setup included.
    pub timeout: Duration,
    /// How output is captured.
    pub output: OutputMode,
    /// Bytes of output kept per stream; more kills the run.
    pub output_limit: usize,
    /// Limits; `None` uses the sandbox's defaults.
    pub limits: Option<Limits>,
    /// Per-object strict mode; `None` uses the sandbox's setting.
    pub strict: Option<bool>,
}

impl SandboxRequest {
    /// A request for `program` with defaults: no network, 60 s, 1 MiB per stream.
    pub fn new(name: impl Into<String>, program: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            read_only: Vec::new(),
            network: false,
            timeout: Duration::from_secs(60),
            output: OutputMode::Separate,
            output_limit: 1 << 20,
            limits: None,
            strict: None,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// The program exited with this code (128 + n when killed by signal n).
    Exited(i32),
    /// The deadline passed; everything was killed.
    TimedOut,
    /// Output went past the limit; everything was killed.
    OutputExceeded,
}

impl RunStatus {
    /// Exit code 0.
    pub fn success(self) -> bool {
        self == Self::Exited(0)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exited(code) if *code > 128 => {
                write!(f, "killed by signal {} (exit code {code})", code - 128)
            }
            Self::Exited(code) => write!(f, "exit code {code}"),
            Self::TimedOut => f.write_str("timed out"),
            Self::OutputExceeded => f.write_str("output too large"),
        }
    }
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct SandboxOutcome {
    /// How it ended.
    pub status: RunStatus,
    /// Captured stdout (everything, in [`OutputMode::Combined`]).
    pub stdout: Vec<u8>,
    /// Captured stderr.
    pub stderr: Vec<u8>,
    /// Which protections the run had.
    pub protections: Protections,
}

/// The script sandbox. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ScriptSandbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: ScriptSandboxConfig,
    /// Launchers, waiting or started per run; holds which namespaces this kernel grants.
    pool: Arc<LauncherPool>,
    /// Whether the runs' host uid is 0.
    host_root: bool,
    /// Removes finished runs' directories.
    cleaner: Arc<Cleaner>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.cleaner.close();
    }
}

/// The script sandbox of a process that may never run a script: started (a few
/// milliseconds of namespace probing) when the first script needs it, then shared.
/// Its launcher is this very binary (see [`ScriptSandbox::with_this_binary`]).
#[derive(Debug, Default)]
pub struct LazyScriptSandbox {
    /// Refuse to run when a protection is missing.
    strict: bool,
    started: std::sync::Mutex<Option<ScriptSandbox>>,
}

impl LazyScriptSandbox {
    /// A sandbox to start on first use, in strict mode or not.
    pub fn new(strict: bool) -> Self {
        Self {
            strict,
            started: std::sync::Mutex::default(),
        }
    }

    /// The sandbox, started now if this is the first call.
    pub fn get(&self) -> Result<ScriptSandbox, SandboxError> {
        // Only ever set whole, so a poisoned lock still guards a consistent value.
        let mut slot = self.started.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sandbox) = slot.as_ref() {
            return Ok(sandbox.clone());
        }
        let sandbox = ScriptSandbox::with_this_binary(self.strict)?;
        Ok(slot.insert(sandbox).clone())
    }
}

impl ScriptSandbox {
    /// A sandbox with the default settings whose launcher is the launcher's own binary
    /// beside this one, or else this very binary, which must then call
    /// [`super::launcher::run_if_invoked`] first thing in `main` (see
    /// [`Launcher::for_this_binary`]).
    pub fn with_this_binary(strict: bool) -> Result<Self, SandboxError> {
        let launcher = Launcher::for_this_binary().map_err(SandboxError::NoLauncher)?;
        let mut config = ScriptSandboxConfig::new(launcher);
        config.strict = strict;
        Self::new(config)
    }

    /// Prepares the runs directory and probes which namespaces this kernel grants
    /// (a few milliseconds, once).
    pub fn new(config: ScriptSandboxConfig) -> Result<Self, SandboxError> {
        use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
        let err = |source| SandboxError::RunDir {
            path: config.runs_dir.clone(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o711)
            .create(&config.runs_dir)
            .map_err(err)?;
        // Traversable, not listable: a run's uid must reach its own directory only.
        std::fs::set_permissions(&config.runs_dir, std::fs::Permissions::from_mode(0o711))
            .map_err(err)?;
        let namespaces = NamespaceSupport::probe(config.unshare.as_deref(), config.run_as);
        let pipe_owner = config
            .run_as
            .filter(|(uid, _)| *uid != rustix::process::geteuid().as_raw());
        let host_root = match config.run_as {
            Some((uid, _)) => uid == 0,
            None => rustix::process::geteuid().is_root(),
        };
        let base = LaunchBase {
            fingerprint: super::fingerprint::FINGERPRINT,
            read_only: config.read_only.clone(),
            etc_hidden: config.etc_hidden.clone(),
            devices: config.devices.clone(),
            network: false,
            mount_namespace: namespaces.mount == ProtectionState::Applied,
            private_proc: namespaces.proc.clone(),
            host_root,
            scratch_bytes: config.limits.disk_bytes,
        };
        for (name, state) in [
            ("user_namespace", &namespaces.user),
            ("mount_namespace", &namespaces.mount),
            ("pid_namespace", &namespaces.pid),
            ("network_namespace", &namespaces.network),
        ] {
            if let ProtectionState::Unavailable(reason) = state {
                tracing::warn!(
                    protection = name,
                    reason,
                    "script sandbox: namespace unavailable"
                );
            }
        }
        Ok(Self {
            inner: Arc::new(Inner {
                pool: LauncherPool::new(
                    Recipe {
                        launcher: config.launcher.clone(),
                        namespaces,
                        run_as: config.run_as,
                        pipe_owner,
                        base,
                    },
                    config.pool_size,
                ),
                config,
                host_root,
                cleaner: Cleaner::start(),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ScriptSandboxConfig {
        &self.inner.config
    }

    /// A fresh private run directory with an empty scratch directory.
    pub fn prepare(&self) -> Result<RunDir, SandboxError> {
        let config = &self.inner.config;
        let owner = config
            .run_as
            .filter(|(uid, _)| *uid != rustix::process::geteuid().as_raw());
        RunDir::create(&config.runs_dir, owner, &self.inner.cleaner)
    }

    /// The protections a run with `network` gets from the engine's side of the chain:
    /// namespaces, uid and environment; the launcher reports the rest.
    fn namespace_protections(&self, network: bool) -> Protections {
        let ns = &self.inner.pool.recipe().namespaces;
        Protections {
            user_namespace: ns.user.clone(),
            mount_namespace: ns.mount.clone(),
            pid_namespace: ns.pid.clone(),
            network_namespace: if network {
                ProtectionState::NotRequested
            } else {
                ns.network.clone()
            },
            ipc_namespace: ns.ipc.clone(),
            uts_namespace: ns.uts.clone(),
            unprivileged_uid: if self.inner.host_root {
                ProtectionState::unavailable(
                    "runs use host uid 0; set a sandbox uid or run the engine as non-root",
                )
            } else {
                ProtectionState::Applied
            },
            cleared_environment: ProtectionState::Applied,
            ..Protections::default()
        }
    }

    /// Runs `request` in `run`. Fails only when the run could not be set up; how the
    /// program ended is in [`SandboxOutcome::status`].
    pub async fn run(
        &self,
        run: &RunDir,
        request: &SandboxRequest,
    ) -> Result<SandboxOutcome, SandboxError> {
        let config = &self.inner.config;
        let strict = request.strict.unwrap_or(config.strict);
        let mut protections = self.namespace_protections(request.network);
        if strict && let Some((protection, reason)) = ns_missing(&protections, &strict_exceptions())
        {
            return Err(SandboxError::Unprotected { protection, reason });
        }

        let (handed_paths, handed) = hand_over(&request.read_only)?;
        let mut spec = self.spec(run, request, handed_paths);
        spec.private_copies = self.private_copies(run, &spec)?;
        let spec_json = serde_json::to_vec(&spec)?;

        let shape = Shape {
            network: request.network,
        };
        let mut chain = self.inner.pool.take(shape)?;
        let overflow = Arc::new(tokio::sync::Notify::new());
        let (report_tx, report_rx) = tokio::sync::oneshot::channel();
        let limit = request.output_limit;
        let pipe = |fd: Option<std::os::fd::OwnedFd>| {
            let fd = fd.ok_or_else(|| SandboxError::Setup("no output pipes".to_owned()))?;
            tokio::net::unix::pipe::Receiver::from_owned_fd(fd).map_err(SandboxError::ReadOutput)
        };
        let (stdout, stderr) = chain.take_output();
        let (finish, finished) = tokio::sync::watch::channel(false);
        let stdout = output::Source::new(pipe(stdout)?, finished.clone());
        let stderr = output::Source::new(pipe(stderr)?, finished);
        let stdout_task = tokio::spawn(output::read_marked(
            stdout,
            limit,
            report_tx,
            overflow.clone(),
        ));
        let stderr_task = tokio::spawn(output::read_bounded(stderr, limit, overflow.clone()));

        {
            use std::os::fd::AsFd;
            let fds: Vec<_> = handed.iter().map(AsFd::as_fd).collect();
            // A launcher that died early closed its end; its report tells why.
            let _ = chain.send(&spec_json, &fds);
        }
        drop(handed);

        let deadline = tokio::time::sleep(request.timeout);
        tokio::pin!(deadline);
        let (ended, exit) = tokio::select! {
            finished = chain.finished() => (Ended::Exited, Some(finished)),
            () = &mut deadline => (Ended::TimedOut, None),
            () = overflow.notified() => (Ended::Overflow, None),
        };
        let reported = matches!(exit, Some(Ok(Finished::Reported(_))));
        if reported {
            // Nothing of the run is left but the launcher: the output pipes hold all
            // there is.
            let _ = finish.send(true);
        } else {
            // Whatever happened, nothing of the run may survive it: the group holds
            // unshare and, without a pid namespace, every process that did not leave it.
            chain.kill();
            if exit.is_none() {
                let _ = chain.wait().await;
            }
        }
        self.inner.pool.replenish(shape);

        let (stdout, stdout_overflow) = output::drain(stdout_task).await;
        let (stderr, stderr_overflow) = output::drain(stderr_task).await;
        if reported {
            // Killed only once the output is read: `unshare`, seeing its launcher die
            // of SIGKILL, complains on the run's stderr that it cannot die of it too
            // ("sigprocmask unblock failed"), which is not the program's output. The
            // namespaces' teardown need not hold up the run.
            chain.reap_in_background();
        }
        let report = report_rx.await.ok();

        let status = match (ended, exit) {
            (Ended::TimedOut, _) => RunStatus::TimedOut,
            (Ended::Overflow, _) => RunStatus::OutputExceeded,
            _ if stdout_overflow || stderr_overflow => RunStatus::OutputExceeded,
            (Ended::Exited, Some(Ok(finished))) => RunStatus::Exited(finished.code()),
            (Ended::Exited, _) => {
                return Err(SandboxError::Setup("lost track of the run".to_owned()));
            }
        };

        let Some(report) = report else {
            if matches!(status, RunStatus::Exited(_)) {
                return Err(SandboxError::Setup(format!(
                    "the launcher gave no report ({status}): {}",
                    String::from_utf8_lossy(&stderr).trim()
                )));
            }
            // Killed before it could answer (a deadline shorter than the setup).
            protections.record(&request.name);
            return Ok(SandboxOutcome {
                status,
                stdout,
                stderr,
                protections,
            });
        };
        merge(&mut protections, &report);
        protections.record(&request.name);
        if let Some(failure) = report.error {
            return Err(match failure.protection {
                Some(protection) => SandboxError::Unprotected {
                    protection,
                    reason: failure.message,
                },
                None => SandboxError::Setup(failure.message),
            });
        }
        Ok(SandboxOutcome {
            status,
            stdout,
            stderr,
            protections,
        })
    }

    /// Copies of the run's read-only paths that its uid may not read, when that uid is
    /// not the engine's (see `private_copy`).
    fn private_copies(
        &self,
        run: &RunDir,
        spec: &LaunchSpec,
    ) -> Result<Vec<PrivateCopy>, SandboxError> {
        let euid = rustix::process::geteuid().as_raw();
        let Some((uid, gid)) = self.inner.config.run_as.filter(|(uid, _)| *uid != euid) else {
            return Ok(Vec::new());
        };
        let mut copies = Vec::new();
        for path in &spec.handed {
            if needs_copy(path, &spec.program, &spec.cwd, uid, gid) {
                let name = format!("private-copy-{}", copies.len());
                let copy = run.copy_in(&name, path)?;
                copies.push(PrivateCopy {
                    path: path.clone(),
                    copy,
                });
            }
        }
        Ok(copies)
    }

    fn spec(&self, run: &RunDir, request: &SandboxRequest, handed: Vec<PathBuf>) -> LaunchSpec {
        let config = &self.inner.config;
        let work = run.work_dir();
        let mut limits = request
            .limits
            .clone()
            .unwrap_or_else(|| config.limits.clone());
        if limits.cpu_seconds.is_none() {
            limits.cpu_seconds = Some(request.timeout.as_secs() + 1);
        }
        let mut env: Vec<(String, String)> = vec![
            ("PATH".to_owned(), SANDBOX_PATH.to_owned()),
            ("HOME".to_owned(), work.display().to_string()),
            ("TMPDIR".to_owned(), work.display().to_string()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ];
        for (key, value) in &request.env {
            env.retain(|(k, _)| k != key);
            env.push((key.clone(), value.clone()));
        }
        LaunchSpec {
            program: request.program.clone(),
            args: request.args.clone(),
            env,
            cwd: request.cwd.clone().unwrap_or_else(|| work.clone()),
            run_dir: run.path().to_owned(),
            work_dir: work,
            handed,
            private_copies: Vec::new(),
            limits,
            combined_output: request.output == OutputMode::Combined,
            strict: request.strict.unwrap_or(config.strict),
            strict_except: strict_exceptions(),
            backstop_ms: u64::try_from(request.timeout.as_millis())
                .unwrap_or(u64::MAX)
                .saturating_add(2_000),
        }
    }
}

/// Why the engine stopped waiting for a run.
#[derive(Debug, Clone, Copy)]
enum Ended {
    Exited,
    TimedOut,
    Overflow,
}

/// Opens the run's own read-only paths for the launcher, which may not be able to reach
/// them: a hooks directory below a directory the run's uid cannot enter is still the
/// hooks directory, and the descriptor reaches it without opening anything above it.
/// Paths missing on this system are not granted, as in the launcher.
fn hand_over(paths: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<std::os::fd::OwnedFd>), SandboxError> {
    use rustix::fs::{Mode, OFlags};
    let mut handed = (Vec::new(), Vec::new());
    for path in paths {
        match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => {
                handed.0.push(path.clone());
                handed.1.push(fd);
            }
            Err(rustix::io::Errno::NOENT) => {}
            Err(e) => {
                return Err(SandboxError::RunDir {
                    path: path.clone(),
                    source: e.into(),
                });
            }
        }
    }
    Ok(handed)
}

fn ns_missing(p: &Protections, except: &[String]) -> Option<(String, String)> {
    [
        ("user_namespace", &p.user_namespace),
        ("mount_namespace", &p.mount_namespace),
        ("pid_namespace", &p.pid_namespace),
        ("network_namespace", &p.network_namespace),
        ("ipc_namespace", &p.ipc_namespace),
        ("uts_namespace", &p.uts_namespace),
        ("unprivileged_uid", &p.unprivileged_uid),
    ]
    .into_iter()
    .filter(|(name, _)| !except.iter().any(|e| e == name))
    .find_map(|(name, state)| match state {
        ProtectionState::Unavailable(reason) => Some((name.to_owned(), reason.clone())),
        _ => None,
    })
}

/// The protections strict mode does without in this process (`--strict-except`).
static STRICT_EXCEPT: std::sync::RwLock<Vec<String>> = std::sync::RwLock::new(Vec::new());

/// A name given to [`set_strict_exceptions`] that is no protection's.
#[derive(Debug, thiserror::Error)]
#[error("{name:?} is not a script sandbox protection (one of: {})", Protections::names().join(", "))]
pub struct UnknownProtection {
    /// The name given.
    pub(crate) name: String,
}

/// Sets the protections strict mode does without in every script sandbox of this
/// process, by their names in logs and metrics (e.g. `private_proc` in a pod, where the
/// container runtime's masked `/proc` makes a new one impossible). Strict mode still
/// refuses to run without any other; the runs still report these as unavailable.
pub fn set_strict_exceptions(names: &[String]) -> Result<(), UnknownProtection> {
    let known = Protections::names();
    if let Some(name) = names.iter().find(|n| !known.contains(&n.as_str())) {
        return Err(UnknownProtection { name: name.clone() });
    }
    *STRICT_EXCEPT.write().unwrap_or_else(|e| e.into_inner()) = names.to_vec();
    Ok(())
}

pub(crate) fn strict_exceptions() -> Vec<String> {
    STRICT_EXCEPT
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

fn merge(p: &mut Protections, report: &LaunchReport) {
    if p.pid_namespace == ProtectionState::Applied && !report.pid_namespace {
        p.pid_namespace = ProtectionState::unavailable("the launcher is not pid 1");
    }
    p.private_proc = report.private_proc.clone();
    p.landlock_filesystem = report.landlock_filesystem.clone();
    p.landlock_network = report.landlock_network.clone();
    p.landlock_scopes = report.landlock_scopes.clone();
    p.cpu_limit = report.cpu_limit.clone();
    p.memory_limit = report.memory_limit.clone();
    p.process_limit = report.process_limit.clone();
    p.file_size_limit = report.file_size_limit.clone();
    p.open_files_limit = report.open_files_limit.clone();
    p.disk_budget = report.disk_budget.clone();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_display_names_signals() {
        assert_eq!(
            RunStatus::Exited(137).to_string(),
            "killed by signal 9 (exit code 137)"
        );
        assert_eq!(RunStatus::Exited(2).to_string(), "exit code 2");
    }
}
