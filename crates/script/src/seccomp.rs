//! The seccomp profile Operon's pods run under, so that the script sandbox can create
//! its namespaces inside a container.
//!
//! A container runtime's `RuntimeDefault` profile refuses `unshare`/`clone` with
//! `CLONE_NEWUSER` (and `mount`, `pivot_root`, `sethostname`) to a process without
//! `CAP_SYS_ADMIN`, so a pod under it gets no user namespace and the sandbox none of the
//! namespaces built on it. `pod_profile` is a `Localhost` profile (the OCI/Docker JSON
//! format the kubelet hands to containerd and CRI-O) that allows what ordinary
//! processes, the engine (wasmtime, tokio, rustls) and the sandbox need, and nothing
//! else: an allow-list, with every other system call failing with `EPERM`.
//!
//! What it adds to a `RuntimeDefault`-like list is namespace creation and the mount
//! calls, which the kernel grants only inside user namespaces the process made itself
//! (the container holds no capability in the node's namespaces). What it leaves out,
//! like `RuntimeDefault`: kernel modules, `kexec`, `bpf`, `perf_event_open`, the keyring,
//! `open_by_handle_at`, `userfaultfd`, `ptrace` and `process_vm_*`, `io_uring`, clock
//! and time setting, swap, `reboot`, `acct`, `quotactl`, `syslog`, `iopl`/`ioperm`,
//! and `personality` beyond the values that keep address randomisation on.
//!
//! [`install`] writes it under a kubelet's seccomp directory (`operon seccomp-profile
//! --install-dir`, run by the DaemonSet that puts it on every node), where pods name it
//! as `localhostProfile: operon/sandbox-v1.json`.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Where the profile lies below a kubelet's seccomp directory, and so the
/// `localhostProfile` pods name. The version changes whenever the list does, so that a
/// pod keeps the profile it was created with while an old and a new engine run side by
/// side during an upgrade.
pub const PROFILE_PATH: &str = "operon/sandbox-v1.json";

/// `errno` of every system call the profile does not allow (EPERM, as RuntimeDefault).
const DENIED_ERRNO: u32 = 1;

/// System calls every process needs: processes and threads, memory, files, time,
/// events, signals, IPC and sockets.
#[rustfmt::skip]
const ORDINARY: &[&str] = &[
    // Processes, threads and their attributes.
    "arch_prctl", "brk", "capget", "capset", "clone", "clone3", "execve", "execveat",
    "exit", "exit_group", "fork", "vfork", "getpid", "getppid", "gettid", "getpgid",
    "getpgrp", "getsid", "setpgid", "setsid", "kill", "tkill", "tgkill", "wait4",
    "waitid", "prctl", "prlimit64", "getrlimit", "setrlimit", "ugetrlimit", "getrusage",
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
    "sched_setparam", "sched_getscheduler", "sched_setscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
    "sched_getattr", "sched_setattr", "set_tid_address", "set_robust_list",
    "get_robust_list", "rseq", "restart_syscall", "getpriority", "setpriority",
    "ioprio_get", "ioprio_set", "pidfd_open", "pidfd_send_signal", "uname", "sysinfo",
    "times", "umask", "getcpu", "membarrier", "set_thread_area", "get_thread_area",
    "set_tls", "cacheflush", "map_shadow_stack",
    // Credentials (within what the process already holds).
    "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
    "setfsuid", "setfsgid", "getuid32", "geteuid32", "getgid32", "getegid32",
    "getresuid32", "getresgid32", "getgroups32", "setuid32", "setgid32", "setreuid32",
    "setregid32", "setresuid32", "setresgid32", "setgroups32", "setfsuid32", "setfsgid32",
    // Signals.
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigqueueinfo",
    "rt_tgsigqueueinfo", "rt_sigsuspend", "rt_sigtimedwait", "sigaltstack", "signalfd",
    "signalfd4", "pause", "alarm", "sigreturn",
    // Memory.
    "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise", "mlock", "mlock2",
    "munlock", "mlockall", "munlockall", "mincore", "msync", "memfd_create", "pkey_alloc",
    "pkey_free", "pkey_mprotect", "remap_file_pages", "get_mempolicy", "set_mempolicy",
    "mseal",
    // Files and directories.
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
    "preadv2", "pwritev2", "open", "openat", "openat2", "close", "close_range", "creat",
    "lseek", "_llseek", "stat", "fstat", "lstat", "newfstatat", "fstatat64", "stat64",
    "fstat64", "lstat64", "statx", "statfs", "fstatfs", "statfs64", "fstatfs64",
    "access", "faccessat", "faccessat2", "chmod", "fchmod", "fchmodat", "fchmodat2",
    "chown", "fchown", "lchown", "fchownat", "chown32", "fchown32", "lchown32",
    "truncate", "ftruncate", "truncate64", "ftruncate64", "fallocate", "fsync",
    "fdatasync", "sync", "syncfs", "sync_file_range", "rename", "renameat", "renameat2",
    "link", "linkat", "symlink", "symlinkat", "unlink", "unlinkat", "mkdir", "mkdirat",
    "rmdir", "mknod", "mknodat", "readlink", "readlinkat", "getdents", "getdents64",
    "getcwd", "chdir", "fchdir", "dup", "dup2", "dup3", "fcntl", "fcntl64", "flock",
    "ioctl", "pipe", "pipe2", "splice", "tee", "vmsplice", "sendfile", "sendfile64",
    "copy_file_range", "utime", "utimes", "utimensat", "futimesat", "getxattr",
    "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr", "setxattr",
    "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    "getxattrat", "setxattrat", "listxattrat", "removexattrat", "inotify_init",
    "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "fadvise64",
    "fadvise64_64", "readahead", "name_to_handle_at", "file_getattr", "file_setattr",
    // Time.
    "clock_gettime", "clock_getres", "clock_nanosleep", "gettimeofday", "nanosleep",
    "time", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
    "timer_settime", "timerfd_create", "timerfd_gettime", "timerfd_settime", "getitimer",
    "setitimer",
    // Waiting for events.
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
    "epoll_pwait2", "poll", "ppoll", "select", "pselect6", "_newselect", "eventfd",
    "eventfd2", "futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
    "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
    // System V and POSIX IPC (private to the IPC namespace inside the sandbox).
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
    "mq_getsetattr", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
    "semtimedop", "semctl", "shmget", "shmat", "shmdt", "shmctl", "ipc",
    // Sockets.
    "socket", "socketpair", "bind", "connect", "listen", "accept", "accept4",
    "getsockname", "getpeername", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
    "recvmmsg", "shutdown", "setsockopt", "getsockopt", "socketcall",
    // Randomness; seccomp and Landlock, which only ever restrict the caller further.
    "getrandom", "seccomp", "landlock_create_ruleset", "landlock_add_rule",
    "landlock_restrict_self",
];

/// What the script sandbox needs beyond `ORDINARY`: new namespaces and what is done
/// inside them (a private `/proc`, the scratch tmpfs, a hostname of its own). Without
/// `CAP_SYS_ADMIN` in the node's user namespace, the kernel lets these act only on
/// namespaces the caller's own user namespace owns.
#[rustfmt::skip]
pub(crate) const NAMESPACES: &[&str] = &[
    "unshare", "setns", "mount", "umount2", "umount", "pivot_root", "chroot", "fsopen",
    "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "sethostname", "setdomainname",
];

/// `personality` values allowed: Linux's default, `UNAME26`, `PER_LINUX32` and their
/// mix, and the query. `ADDR_NO_RANDOMIZE` (which turns address randomisation off) is
/// not among them.
const PERSONALITIES: &[u64] = &[0x0, 0x8, 0x0002_0000, 0x0002_0008, 0xffff_ffff];

/// The profile as JSON.
pub(crate) fn pod_profile() -> Value {
    let mut names: Vec<&str> = ORDINARY.iter().chain(NAMESPACES).copied().collect();
    names.sort_unstable();
    names.dedup();
    let personality: Vec<Value> = PERSONALITIES
        .iter()
        .map(|value| {
            json!({
                "names": ["personality"],
                "action": "SCMP_ACT_ALLOW",
                "args": [{"index": 0, "value": value, "op": "SCMP_CMP_EQ"}],
            })
        })
        .collect();
    let mut syscalls = vec![json!({"names": names, "action": "SCMP_ACT_ALLOW"})];
    syscalls.extend(personality);
    json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": DENIED_ERRNO,
        "archMap": [
            {
                "architecture": "SCMP_ARCH_X86_64",
                "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            },
            {
                "architecture": "SCMP_ARCH_AARCH64",
                "subArchitectures": ["SCMP_ARCH_ARM"],
            },
        ],
        "syscalls": syscalls,
    })
}

/// The profile's text as installed: pretty JSON with a final newline.
pub fn pod_profile_text() -> String {
    let mut text =
        serde_json::to_string_pretty(&pod_profile()).expect("a JSON value always serialises");
    text.push('\n');
    text
}

/// What [`install`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// The file was missing or differed, and now holds the profile.
    Written(PathBuf),
    /// The file already held the profile.
    Unchanged(PathBuf),
}

/// Why the profile could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("cannot install the seccomp profile at {}: {source}", path.display())]
pub struct InstallError {
    /// The file or directory that failed.
    pub(crate) path: PathBuf,
    /// Why.
    #[source]
    pub(crate) source: std::io::Error,
}

/// Writes the profile to `PROFILE_PATH` under `seccomp_dir` (a kubelet's seccomp
/// directory, e.g. `/var/lib/kubelet/seccomp`) unless it is there already. The file is
/// written beside its place and renamed into it, so a container created meanwhile
/// reads either no profile or the whole one.
pub fn install(seccomp_dir: &Path) -> Result<Installed, InstallError> {
    let path = seccomp_dir.join(PROFILE_PATH);
    let text = pod_profile_text();
    if std::fs::read(&path).is_ok_and(|current| current == text.as_bytes()) {
        return Ok(Installed::Unchanged(path));
    }
    let failed = |path: &Path| {
        let path = path.to_owned();
        move |source| InstallError { path, source }
    };
    let dir = path.parent().unwrap_or(seccomp_dir);
    std::fs::create_dir_all(dir).map_err(failed(dir))?;
    let partial = dir.join(format!(".{}.partial", std::process::id()));
    std::fs::write(&partial, text.as_bytes()).map_err(failed(&partial))?;
    if let Err(source) = std::fs::rename(&partial, &path) {
        let _ = std::fs::remove_file(&partial);
        return Err(InstallError { path, source });
    }
    Ok(Installed::Written(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> Vec<String> {
        let profile = pod_profile();
        let first = &profile["syscalls"][0];
        assert_eq!(first["action"], "SCMP_ACT_ALLOW");
        first["names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn everything_else_is_refused_with_eperm() {
        let profile = pod_profile();
        assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(profile["defaultErrnoRet"], 1);
        let archs: Vec<&str> = profile["archMap"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["architecture"].as_str().unwrap())
            .collect();
        assert_eq!(archs, ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"]);
    }

    #[test]
    fn the_sandbox_may_create_namespaces_and_mount_in_them() {
        let allowed = allowed();
        for call in [
            "unshare",
            "clone",
            "clone3",
            "mount",
            "fsopen",
            "fsmount",
            "move_mount",
        ] {
            assert!(allowed.iter().any(|a| a == call), "{call} is not allowed");
        }
        for call in [
            "landlock_restrict_self",
            "setrlimit",
            "prlimit64",
            "memfd_create",
        ] {
            assert!(allowed.iter().any(|a| a == call), "{call} is not allowed");
        }
    }

    #[test]
    fn what_reaches_the_node_kernel_is_left_out() {
        let allowed = allowed();
        for call in [
            "bpf",
            "perf_event_open",
            "init_module",
            "finit_module",
            "delete_module",
            "kexec_load",
            "kexec_file_load",
            "keyctl",
            "add_key",
            "request_key",
            "open_by_handle_at",
            "userfaultfd",
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "io_uring_setup",
            "io_uring_enter",
            "settimeofday",
            "clock_settime",
            "clock_adjtime",
            "adjtimex",
            "swapon",
            "swapoff",
            "reboot",
            "acct",
            "quotactl",
            "syslog",
            "iopl",
            "ioperm",
            "kcmp",
            "personality",
        ] {
            assert!(!allowed.iter().any(|a| a == call), "{call} is allowed");
        }
        let names: Vec<&str> = allowed.iter().map(String::as_str).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted, "sorted, each once");
    }

    #[test]
    fn personality_keeps_address_randomisation() {
        let profile = pod_profile();
        let values: Vec<u64> = profile["syscalls"].as_array().unwrap()[1..]
            .iter()
            .map(|rule| {
                assert_eq!(rule["names"], json!(["personality"]));
                assert_eq!(rule["args"][0]["op"], "SCMP_CMP_EQ");
                rule["args"][0]["value"].as_u64().unwrap()
            })
            .collect();
        assert_eq!(values, PERSONALITIES);
        // ADDR_NO_RANDOMIZE.
        assert!(
            values
                .iter()
                .all(|v| *v == 0xffff_ffff || v & 0x0004_0000 == 0)
        );
    }

    #[test]
    fn install_writes_once_and_repairs_a_changed_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PROFILE_PATH);
        assert_eq!(
            install(dir.path()).unwrap(),
            Installed::Written(path.clone())
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), pod_profile_text());
        assert_eq!(
            install(dir.path()).unwrap(),
            Installed::Unchanged(path.clone())
        );
        std::fs::write(&path, "{}").unwrap();
        assert_eq!(
            install(dir.path()).unwrap(),
            Installed::Written(path.clone())
        );
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from("sandbox-v1.json")]);
    }

    #[test]
    fn an_unwritable_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "").unwrap();
        let err = install(&file).unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "cannot install the seccomp profile at {}",
                file.join("operon").display()
            )),
            "{err}"
        );
    }
}
