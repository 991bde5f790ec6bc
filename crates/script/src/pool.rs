//! Launchers started ahead of their runs.
//!
//! Creating the namespaces and starting the launcher takes milliseconds (the network
//! namespace alone about 0.7, then two program starts), several times what a small hook
//! itself needs. The [`LauncherPool`] keeps a few launchers already waiting inside fresh
//! namespaces, so a run only sends its spec. Each launcher serves exactly one run and is
//! never reused; a background thread starts its replacement once the run has ended,
//! so that the run does not share the CPU with it. A waiting launcher holds
//! nothing of any run: paths, limits and descriptors all arrive with the spec.
//!
//! Nothing outlives the engine: a launcher reads its spec from a socket whose other end
//! only the engine holds, so it exits when the engine drops that end or dies, and
//! dropping a [`Chain`] kills its whole process group.

use super::channel;
use super::error::SandboxError;
use super::launcher::LAUNCHER_ENV;
use super::namespaces::NamespaceSupport;
use super::sandbox::Launcher;
use super::spec::LaunchBase;
use std::collections::{HashMap, VecDeque};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, Weak};

/// What a launcher's namespaces depend on: the part of a run that must be known before
/// its launcher starts. Everything else travels with the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Shape {
    /// The run may use the network, so it gets no network namespace.
    pub(crate) network: bool,
}

/// How to start a launcher: fixed for the sandbox's life.
#[derive(Debug)]
pub(super) struct Recipe {
    /// What becomes the launcher.
    pub(crate) launcher: Launcher,
    /// Which namespaces this kernel grants.
    pub(crate) namespaces: NamespaceSupport,
    /// The host uid and gid of runs, when they are not the engine's.
    pub(crate) run_as: Option<(u32, u32)>,
    /// Who must own the output pipes: the run reopens them through `/dev/stdout`.
    pub(crate) pipe_owner: Option<(u32, u32)>,
    /// What every run shares; its `network` is set per shape.
    pub(crate) base: LaunchBase,
}

/// One started launcher with the processes that put it in its namespaces, leader of
/// its own process group: `unshare` first, the launcher as pid 1 of the new pid
/// namespace below it.
#[derive(Debug)]
pub(super) struct Chain {
    child: std::process::Child,
    /// Set once the first process was reaped; until then, dropping kills the group.
    reaped: bool,
    /// Whether the first process is `unshare` forking the launcher, not the launcher.
    forks: bool,
    /// The engine's end of the control channel.
    control: OwnedFd,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
}

impl Chain {
    /// Starts a launcher in the namespaces of `shape`; it waits for its spec.
    pub(super) fn start(recipe: &Recipe, shape: Shape) -> Result<Self, SandboxError> {
        let program = &recipe.launcher.program;
        let forks = recipe.namespaces.forks();
        let mut cmd = recipe
            .namespaces
            .command(shape.network, program)
            .unwrap_or_else(|| Command::new(program));
        let first = PathBuf::from(cmd.get_program());
        let spawn_error = |source| SandboxError::Spawn {
            program: first.clone(),
            source,
        };
        let base = serde_json::to_string(&LaunchBase {
            network: shape.network,
            ..recipe.base.clone()
        })?;
        let (control, launcher_end) = channel::pair().map_err(spawn_error)?;
        cmd.args(&recipe.launcher.args)
            .env_clear()
            .env(LAUNCHER_ENV, base)
            .stdin(Stdio::from(launcher_end))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some((uid, gid)) = recipe.run_as {
            cmd.uid(uid).gid(gid);
        }
        let mut child = cmd.spawn().map_err(spawn_error)?;
        // The engine must not keep the launcher's end, or a launcher would never see the
        // end of its spec when the engine goes away.
        drop(cmd);
        let stdout = child.stdout.take().map(OwnedFd::from);
        let stderr = child.stderr.take().map(OwnedFd::from);
        let chain = Self {
            child,
            reaped: false,
            forks,
            control,
            stdout,
            stderr,
        };
        for pipe in [&chain.stdout, &chain.stderr].into_iter().flatten() {
            give_pipe(pipe, recipe.pipe_owner)?;
        }
        Ok(chain)
    }

    /// Whether the chain still waits for a spec (it may have been killed meanwhile).
    fn is_waiting(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The process group, for killing everything of the run at once.
    pub(super) fn group(&self) -> Option<rustix::process::Pid> {
        rustix::process::Pid::from_raw(self.child.id() as i32)
    }

    /// The launcher's stdout and stderr, once.
    pub(super) fn take_output(&mut self) -> (Option<OwnedFd>, Option<OwnedFd>) {
        (self.stdout.take(), self.stderr.take())
    }

    /// Sends the spec and the descriptors handed over with it.
    pub(super) fn send(&self, spec: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
        channel::send(&self.control, spec, fds)
    }

    /// Kills the run: the launcher, and with it everything in its pid namespace, when
    /// `unshare` forked it; the whole process group otherwise.
    ///
    /// `unshare` reaps the launcher only while it lives. Killed together, the launcher
    /// is left to the engine's reaper, which in a container is the engine itself (pid
    /// 1, which reaps nothing it did not start): every run left a zombie there, and
    /// the container's pid limit would end the runs. Killed alone, the launcher takes
    /// its namespace down and `unshare` exits with its status.
    pub(super) fn kill(&self) {
        use rustix::process::{Signal, kill_process, kill_process_group};
        if self.forks
            && let Some(launcher) = self.launcher()
            && kill_process(launcher, Signal::KILL).is_ok()
        {
            return;
        }
        if let Some(group) = self.group() {
            let _ = kill_process_group(group, Signal::KILL);
        }
    }

    /// The launcher `unshare` forked, as the kernel lists its children; `None` before
    /// it forked or after the launcher exited.
    fn launcher(&self) -> Option<rustix::process::Pid> {
        let first = self.child.id();
        let children =
            std::fs::read_to_string(format!("/proc/{first}/task/{first}/children")).ok()?;
        let pid: i32 = children.split_whitespace().next()?.parse().ok()?;
        rustix::process::Pid::from_raw(pid)
    }

    /// Waits for the end of the run: the launcher's status message, sent once nothing
    /// but the launcher is left of the run, or else the chain's exit; cancel-safe.
    pub(super) async fn finished(&mut self) -> std::io::Result<Finished> {
        match channel::receive_status(&self.control).await {
            Some(code) => Ok(Finished::Reported(code)),
            None => self.wait().await.map(Finished::Exited),
        }
    }

    /// Kills the chain and reaps it on a task of the current runtime, or on a thread
    /// when that runtime is gone: reaping waits for the kernel to tear the namespaces
    /// down, which a finished run need not wait for.
    pub(super) fn reap_in_background(mut self) {
        self.kill();
        tokio::spawn(async move {
            let _ = self.wait().await;
        });
    }

    /// Waits for the first process of the chain to exit; cancel-safe.
    pub(super) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        use rustix::process::{PidfdFlags, pidfd_open};
        let pid = self
            .group()
            .ok_or_else(|| std::io::Error::other("the launcher has no pid"))?;
        // A pidfd instead of tokio's child handling: a pooled chain may be started on
        // a background thread and waited for on any runtime.
        let pidfd = pidfd_open(pid, PidfdFlags::empty())?;
        // The deprecation is about types whose raw descriptor may change or close while
        // registered; an owned pidfd, moved in, does neither.
        #[allow(deprecated)]
        let pidfd = tokio::io::unix::AsyncFd::with_interest(pidfd, tokio::io::Interest::READABLE)?;
        loop {
            if let Some(status) = self.child.try_wait()? {
                self.reaped = true;
                return Ok(status);
            }
            pidfd.readable().await?.clear_ready();
        }
    }
}

/// How a run ended, as far as its chain tells.
#[derive(Debug)]
pub(super) enum Finished {
    /// The launcher reported the program's exit code, nothing else of the run being left.
    Reported(i32),
    /// The chain's first process exited without a report.
    Exited(ExitStatus),
}

impl Finished {
    /// The program's exit code, 128 + n when killed by signal n.
    pub(super) fn code(&self) -> i32 {
        use std::os::unix::process::ExitStatusExt as _;
        match self {
            Self::Reported(code) => *code,
            Self::Exited(status) => status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        }
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        self.kill();
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // Reaping waits for the kernel to tear the namespaces down; that is no reason
        // to hold up whoever dropped the chain.
        let pid = self.group();
        let _ = std::thread::Builder::new()
            .name("operon-sandbox-reap".to_owned())
            .spawn(move || rustix::process::waitpid(pid, rustix::process::WaitOptions::empty()));
    }
}

/// Gives an output pipe to the run's uid: scripts reopen their output through
/// `/dev/stdout` (`/proc/self/fd/1`), which checks the pipe's owner like a file's.
fn give_pipe(pipe: &OwnedFd, owner: Option<(u32, u32)>) -> Result<(), SandboxError> {
    let Some((uid, gid)) = owner else {
        return Ok(());
    };
    std::os::unix::fs::fchown(pipe, Some(uid), Some(gid))
        .map_err(|source| SandboxError::OutputPipe { uid, source })
}

/// Launchers waiting for their runs, per [`Shape`].
#[derive(Debug)]
pub(super) struct LauncherPool {
    recipe: Arc<Recipe>,
    /// Launchers kept waiting per shape; 0 starts every launcher when its run comes.
    size: usize,
    slots: Mutex<HashMap<Shape, Slot>>,
}

#[derive(Debug, Default)]
struct Slot {
    ready: VecDeque<Chain>,
    /// A background thread is starting launchers for this shape.
    filling: bool,
}

impl LauncherPool {
    /// A pool keeping `size` launchers per shape, started when a shape is first used.
    pub(super) fn new(recipe: Recipe, size: usize) -> Arc<Self> {
        Arc::new(Self {
            recipe: Arc::new(recipe),
            size,
            slots: Mutex::default(),
        })
    }

    /// How launchers are started.
    pub(super) fn recipe(&self) -> &Recipe {
        &self.recipe
    }

    /// A launcher for one run of `shape`: a waiting one when there is one, else started
    /// now. Either way the pool starts refilling.
    pub(super) fn take(self: &Arc<Self>, shape: Shape) -> Result<Chain, SandboxError> {
        if self.size == 0 {
            return Chain::start(&self.recipe, shape);
        }
        let ready = {
            let mut slots = self.lock();
            let slot = slots.entry(shape).or_default();
            let mut ready = None;
            while let Some(mut chain) = slot.ready.pop_front() {
                if chain.is_waiting() {
                    ready = Some(chain);
                    break;
                }
            }
            ready
        };
        match ready {
            Some(chain) => Ok(chain),
            None => Chain::start(&self.recipe, shape),
        }
    }

    /// Starts launchers in the background until `shape`'s slot is full again. Called
    /// once the run that took a launcher has ended, not when it took it: starting a
    /// launcher (two program starts, namespaces, rules) takes a few milliseconds of
    /// CPU, which on a small machine the run itself would otherwise wait for. A burst
    /// of runs still finds the other waiting launchers.
    pub(super) fn replenish(self: &Arc<Self>, shape: Shape) {
        if self.size == 0 {
            return;
        }
        let refill = {
            let mut slots = self.lock();
            let slot = slots.entry(shape).or_default();
            let refill = !slot.filling && slot.ready.len() < self.size;
            slot.filling |= refill;
            refill
        };
        if refill {
            self.refill(shape);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Shape, Slot>> {
        // Slots are only ever changed whole, so a poisoned lock still guards a
        // consistent map.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn refill(self: &Arc<Self>, shape: Shape) {
        let pool = Arc::downgrade(self);
        let recipe = self.recipe.clone();
        let started = std::thread::Builder::new()
            .name("operon-sandbox-pool".to_owned())
            .spawn(move || fill(&pool, &recipe, shape));
        if let Err(e) = started {
            tracing::warn!("script sandbox: cannot start the launcher pool's thread: {e}");
            self.lock().entry(shape).or_default().filling = false;
        }
    }
}

/// Starts launchers until the pool holds its size for `shape`. Holds no strong
/// reference while starting one, so dropping the sandbox ends the pool at once; a
/// launcher started for a pool that is gone is dropped, which kills it.
fn fill(pool: &Weak<LauncherPool>, recipe: &Recipe, shape: Shape) {
    loop {
        {
            let Some(pool) = pool.upgrade() else {
                return;
            };
            let mut slots = pool.lock();
            let slot = slots.entry(shape).or_default();
            if slot.ready.len() >= pool.size {
                slot.filling = false;
                return;
            }
        }
        let started = Chain::start(recipe, shape);
        let Some(pool) = pool.upgrade() else {
            return;
        };
        let mut slots = pool.lock();
        let slot = slots.entry(shape).or_default();
        match started {
            Ok(chain) => slot.ready.push_back(chain),
            Err(e) => {
                // The next run starts its own launcher and reports the error itself.
                slot.filling = false;
                tracing::warn!("script sandbox: cannot start a pooled launcher: {e}");
                return;
            }
        }
    }
}
