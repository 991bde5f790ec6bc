//! Which namespaces a run gets, and the command that creates them.
//!
//! util-linux `unshare` creates the user (root mapped to the run's uid), mount, pid, IPC,
//! UTS and, unless the run asks for network, network namespaces and mounts a private
//! `/proc`; it forks the [launcher](super::launcher) as pid 1 of the new pid namespace
//! and kills it if it dies itself. [`NamespaceSupport::probe`] finds once per sandbox
//! which of them this kernel grants, so every run asks only for what works and reports
//! the rest as unavailable.
//!
//! The private `/proc` is probed apart from the pid namespace: in a container the
//! runtime masks parts of `/proc` (`/proc/kcore`, `/proc/keys`, a read-only
//! `/proc/sys`), and the kernel refuses a new proc mount in a user namespace while the
//! only one visible is masked, though it grants the pid namespace itself.

use super::protections::ProtectionState;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Which namespaces `unshare` can create here, found once per sandbox.
#[derive(Debug, Clone)]
pub(super) struct NamespaceSupport {
    /// The `unshare` program, when it can create at least a user namespace.
    unshare: Option<PathBuf>,
    /// The user namespace, without which there is none of the others.
    pub(crate) user: ProtectionState,
    /// The mount namespace.
    pub(crate) mount: ProtectionState,
    /// The pid namespace.
    pub(crate) pid: ProtectionState,
    /// A new `/proc` of that pid namespace.
    pub(crate) proc: ProtectionState,
    /// The network namespace.
    pub(crate) network: ProtectionState,
    /// The IPC namespace.
    pub(crate) ipc: ProtectionState,
    /// The UTS namespace.
    pub(crate) uts: ProtectionState,
}

impl NamespaceSupport {
    /// Tries `unshare` with every namespace, then one by one if that fails.
    pub(super) fn probe(unshare: Option<&Path>, run_as: Option<(u32, u32)>) -> Self {
        let none = |reason: String| Self {
            unshare: None,
            user: ProtectionState::unavailable(reason.clone()),
            mount: ProtectionState::unavailable(reason.clone()),
            pid: ProtectionState::unavailable(reason.clone()),
            proc: ProtectionState::unavailable(reason.clone()),
            network: ProtectionState::unavailable(reason.clone()),
            ipc: ProtectionState::unavailable(reason.clone()),
            uts: ProtectionState::unavailable(reason),
        };
        let Some(unshare) = unshare else {
            return none("no unshare program configured".to_owned());
        };
        let attempt = |flags: &[&str]| -> Result<(), String> {
            let mut cmd = std::process::Command::new(unshare);
            cmd.args(USER_FLAGS)
                .args(flags)
                .arg("--")
                .arg("/bin/true")
                .env_clear()
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            if let Some((uid, gid)) = run_as {
                use std::os::unix::process::CommandExt as _;
                cmd.uid(uid).gid(gid);
            }
            match cmd.output() {
                Ok(out) if out.status.success() => Ok(()),
                Ok(out) => Err(format!(
                    "{} {}: {}",
                    unshare.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
                Err(e) => Err(format!("cannot run {}: {e}", unshare.display())),
            }
        };
        let state = |r: Result<(), String>| match r {
            Ok(()) => ProtectionState::Applied,
            Err(reason) => ProtectionState::Unavailable(reason),
        };
        let all: Vec<&str> = [
            MOUNT_FLAGS,
            PID_FLAGS,
            PROC_FLAGS,
            IPC_FLAGS,
            UTS_FLAGS,
            NET_FLAGS,
        ]
        .concat();
        let all_but_proc: Vec<&str> =
            [MOUNT_FLAGS, PID_FLAGS, IPC_FLAGS, UTS_FLAGS, NET_FLAGS].concat();
        let everything = attempt(&all);
        let proc_refused = |reason: String| {
            ProtectionState::unavailable(format!(
                "a new /proc cannot be mounted ({reason}); in a container the runtime masks \
                 parts of /proc, and the kernel refuses a new proc mount in a user namespace \
                 while the /proc it sees is masked"
            ))
        };
        match everything {
            Ok(()) => {
                return Self {
                    unshare: Some(unshare.to_owned()),
                    user: ProtectionState::Applied,
                    mount: ProtectionState::Applied,
                    pid: ProtectionState::Applied,
                    proc: ProtectionState::Applied,
                    network: ProtectionState::Applied,
                    ipc: ProtectionState::Applied,
                    uts: ProtectionState::Applied,
                };
            }
            Err(reason) if attempt(&all_but_proc).is_ok() => {
                return Self {
                    unshare: Some(unshare.to_owned()),
                    user: ProtectionState::Applied,
                    mount: ProtectionState::Applied,
                    pid: ProtectionState::Applied,
                    proc: proc_refused(reason),
                    network: ProtectionState::Applied,
                    ipc: ProtectionState::Applied,
                    uts: ProtectionState::Applied,
                };
            }
            Err(_) => {}
        }
        if let Err(reason) = attempt(&[]) {
            return none(format!("no user namespace: {reason}"));
        }
        let mount = state(attempt(MOUNT_FLAGS));
        let pid = state(attempt(&[MOUNT_FLAGS, PID_FLAGS].concat()));
        let proc = if mount != ProtectionState::Applied {
            ProtectionState::unavailable("a private /proc needs a mount namespace")
        } else if pid != ProtectionState::Applied {
            ProtectionState::unavailable("a private /proc needs a pid namespace")
        } else {
            match attempt(&[MOUNT_FLAGS, PID_FLAGS, PROC_FLAGS].concat()) {
                Ok(()) => ProtectionState::Applied,
                Err(reason) => proc_refused(reason),
            }
        };
        Self {
            unshare: Some(unshare.to_owned()),
            user: ProtectionState::Applied,
            pid,
            proc,
            mount,
            network: state(attempt(NET_FLAGS)),
            ipc: state(attempt(IPC_FLAGS)),
            uts: state(attempt(UTS_FLAGS)),
        }
    }
}

const USER_FLAGS: &[&str] = &["--user", "--map-root-user"];
const MOUNT_FLAGS: &[&str] = &["--mount", "--propagation", "private"];
const PID_FLAGS: &[&str] = &["--pid", "--fork", "--kill-child"];
const PROC_FLAGS: &[&str] = &["--mount-proc"];
const IPC_FLAGS: &[&str] = &["--ipc"];
const UTS_FLAGS: &[&str] = &["--uts"];
const NET_FLAGS: &[&str] = &["--net"];

impl NamespaceSupport {
    /// The `unshare` command that starts `program` in every namespace this kernel
    /// grants, without the network namespace when `network`; `None` when namespaces are
    /// unavailable or not configured.
    /// Whether [`Self::command`]'s `unshare` forks the program (as pid 1 of a new pid
    /// namespace) rather than becoming it.
    pub(super) fn forks(&self) -> bool {
        self.unshare.is_some() && self.pid == ProtectionState::Applied
    }

    pub(super) fn command(&self, network: bool, program: &Path) -> Option<Command> {
        let unshare = self.unshare.as_ref()?;
        let mut cmd = Command::new(unshare);
        cmd.args(USER_FLAGS);
        let applied = |state: &ProtectionState| *state == ProtectionState::Applied;
        if applied(&self.mount) {
            cmd.args(MOUNT_FLAGS);
        }
        if applied(&self.pid) {
            cmd.args(PID_FLAGS);
        }
        if applied(&self.proc) {
            cmd.args(PROC_FLAGS);
        }
        if applied(&self.ipc) {
            cmd.args(IPC_FLAGS);
        }
        if applied(&self.uts) {
            cmd.args(UTS_FLAGS);
        }
        if !network && applied(&self.network) {
            cmd.args(NET_FLAGS);
        }
        cmd.arg("--").arg(program);
        Some(cmd)
    }
}
