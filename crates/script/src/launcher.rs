//! The launcher: the process that turns a fresh set of namespaces into a sandboxed run.
//!
//! The engine starts it (through util-linux `unshare`, which creates the namespaces and
//! mounts a private `/proc`) as pid 1 of the run's pid namespace, often long before its
//! run: it waits on stdin, the control channel, for a `LaunchSpec` and
//! the descriptors of the run's own read-only paths. It sets the rlimits, mounts the
//! size-bounded scratch tmpfs, applies the Landlock rules to itself, reports what it
//! applied on stdout, then starts the program and stays as the namespace's init: it
//! reaps orphans and, when the program exits, kills and reaps every other process of
//! the namespace, sends the program's status to the engine over the control channel
//! and exits with it. Nothing the script starts can outlive it, and the engine need not
//! wait for the kernel to tear the namespaces down. A launcher whose engine goes away
//! before sending a spec sees the end of stdin and exits.
//!
//! Any binary linking the engine becomes a launcher by calling [`run_if_invoked`] first
//! thing in `main`; the engine marks the launcher's environment with `LAUNCHER_ENV`.
//! The launcher's own small binary, [`LAUNCHER_BINARY`], is preferred where it is
//! installed: see [`main_of_own_binary`].
//! The launcher never needs `unsafe`: every step is an ordinary syscall on itself, and the
//! program is started with `std::process::Command`.

use super::channel;
use super::fingerprint::FINGERPRINT;
use super::protections::ProtectionState;
use super::rules::SystemRules;
use super::spec::{LaunchBase, LaunchFailure, LaunchReport, LaunchSpec, Limits, READY_MARKER};
use std::io::Write as _;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Set in the launcher's environment by the engine, and nowhere else; its value is the
/// launcher's `LaunchBase` as JSON.
pub(crate) const LAUNCHER_ENV: &str = "OPERON_SANDBOX_EXEC";

/// The argument the engine passes to the `operon` binary when it is the launcher; it only
/// makes the process recognisable in `ps`, the environment variable decides.
pub(crate) const LAUNCHER_ARG: &str = "__sandbox-exec";

/// Exit code of a launcher that did not start the program.
const SETUP_FAILED: i32 = 125;

/// The largest spec accepted on stdin.
const MAX_SPEC_BYTES: usize = 16 << 20;

/// The name of the launcher's own binary, which the engine uses when it finds it beside
/// its own executable (see [`super::Launcher::for_this_binary`]).
pub const LAUNCHER_BINARY: &str = "operon-sandbox-exec";

/// The argument that makes the launcher's own binary print its build fingerprint.
pub const FINGERPRINT_ARG: &str = "--fingerprint";

/// Becomes the launcher and never returns when the engine started this process as one;
/// returns immediately otherwise. Call it first thing in `main`, before any thread starts.
pub fn run_if_invoked() {
    if std::env::var_os(LAUNCHER_ENV).is_some() {
        main()
    }
}

/// The whole `main` of the launcher's own binary, [`LAUNCHER_BINARY`]: a launcher when
/// the engine started it as one; with [`FINGERPRINT_ARG`], prints its build
/// fingerprint for the engine to compare with its own; otherwise says what it is.
///
/// It exists because a launcher lives as long as its run, and a pool keeps several
/// waiting: exec'd from the engine's own binary, each held about 2 MiB of that binary's
/// relocated data.
pub fn main_of_own_binary() -> ! {
    run_if_invoked();
    let mut args = std::env::args_os().skip(1);
    match (args.next(), args.next()) {
        (Some(arg), None) if arg == FINGERPRINT_ARG => {
            println!("{FINGERPRINT:016x}");
            std::process::exit(0)
        }
        _ => {
            eprintln!(
                "{LAUNCHER_BINARY} is the launcher of Operon's script sandbox: `operon` \
                 starts it for each sandboxed run. It takes no commands; \
                 `{LAUNCHER_BINARY} {FINGERPRINT_ARG}` prints its build fingerprint."
            );
            std::process::exit(2)
        }
    }
}

/// The launcher's entry point: prepares what every run shares, then reads the spec from
/// stdin and runs it.
pub(crate) fn main() -> ! {
    let code = match read_base().and_then(|base| {
        // Built while the launcher waits for its run: most of the run's setup.
        let rules = SystemRules::build(&base);
        let scratch = prepare_scratch(&base);
        let backstop = start_backstop();
        let (spec, handed) = read_spec()?;
        Ok((base, rules, scratch, backstop, spec, handed))
    }) {
        Ok((base, rules, scratch, backstop, spec, handed)) => {
            launch(&base, rules, scratch, backstop, &spec, &handed)
        }
        Err(message) => {
            answer(&LaunchReport {
                error: Some(LaunchFailure {
                    protection: None,
                    message,
                }),
                ..LaunchReport::default()
            });
            SETUP_FAILED
        }
    };
    std::process::exit(code)
}

fn read_base() -> Result<LaunchBase, String> {
    let text = std::env::var(LAUNCHER_ENV)
        .map_err(|e| format!("cannot read the launch base in {LAUNCHER_ENV}: {e}"))?;
    parse_base(&text)
}

fn parse_base(text: &str) -> Result<LaunchBase, String> {
    #[derive(serde::Deserialize)]
    struct Fingerprint {
        fingerprint: Option<u64>,
    }
    // Read alone first: a base from other sources may not parse as this build's.
    let theirs = serde_json::from_str::<Fingerprint>(text)
        .map_err(|e| format!("invalid launch base: {e}"))?
        .fingerprint;
    if theirs != Some(FINGERPRINT) {
        let this = std::env::current_exe()
            .map_or_else(|_| "this launcher".to_owned(), |p| p.display().to_string());
        return Err(format!(
            "{this} was built from other sources than the engine that started it \
             (fingerprint {FINGERPRINT:016x}, the engine's {}): install {LAUNCHER_BINARY} \
             from the engine's own build, or remove it so that the engine launches itself",
            theirs.map_or_else(|| "absent".to_owned(), |f| format!("{f:016x}"))
        ));
    }
    serde_json::from_str(text).map_err(|e| format!("invalid launch base: {e}"))
}

/// The spec and the descriptors of [`LaunchSpec::handed`], in its order.
fn read_spec() -> Result<(LaunchSpec, Vec<OwnedFd>), String> {
    let stdin = std::io::stdin();
    let (bytes, fds) = channel::receive(stdin.as_fd(), MAX_SPEC_BYTES)?;
    let spec: LaunchSpec =
        serde_json::from_slice(&bytes).map_err(|e| format!("invalid launch spec: {e}"))?;
    if fds.len() != spec.handed.len() {
        return Err(format!(
            "the launch spec names {} handed paths but came with {} descriptors",
            spec.handed.len(),
            fds.len()
        ));
    }
    Ok((spec, fds))
}

/// Writes the answer line; a launcher that cannot even do that has nobody to tell.
fn answer(report: &LaunchReport) {
    let json = serde_json::to_string(report).unwrap_or_else(|_| "{}".to_owned());
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{READY_MARKER}{json}");
    let _ = out.flush();
}

/// The thread that ends the launcher, and with it the run's pid namespace, when the
/// time it is sent has passed: started while the launcher waits, so that a run does not
/// wait for a thread to start. It waits for nothing else and runs nothing of the run.
fn start_backstop() -> std::io::Result<std::sync::mpsc::Sender<Duration>> {
    let (deadline, armed) = std::sync::mpsc::channel::<Duration>();
    std::thread::Builder::new().spawn(move || {
        // A launcher ending before its run drops the sender: nothing to guard.
        if let Ok(backstop) = armed.recv() {
            std::thread::sleep(backstop);
            // As pid 1, exiting is what kills the whole namespace.
            std::process::exit(124)
        }
    })?;
    Ok(deadline)
}

fn launch(
    base: &LaunchBase,
    rules: SystemRules,
    scratch: Option<Scratch>,
    backstop: std::io::Result<std::sync::mpsc::Sender<Duration>>,
    spec: &LaunchSpec,
    handed: &[OwnedFd],
) -> i32 {
    if spec.combined_output {
        // Everything from here on, the launcher's own complaints included, lands in
        // the one stream the engine reads.
        let _ = rustix::stdio::dup2_stderr(std::io::stdout().as_fd());
    }
    let mut report = LaunchReport {
        pid_namespace: rustix::process::getpid().as_raw_pid() == 1,
        ..LaunchReport::default()
    };
    report.private_proc = match &base.private_proc {
        ProtectionState::Applied if report.pid_namespace => ProtectionState::Applied,
        ProtectionState::Applied => {
            ProtectionState::unavailable("the launcher is not pid 1 of a new pid namespace")
        }
        other => other.clone(),
    };
    apply_limits(base, spec, &mut report);
    report.disk_budget = mount_scratch(base, scratch, spec);
    let (program, cwd, copies) = mount_private_copies(base, spec);
    // Without a private /proc, Landlock hides the pod's; a snapshot stands in for it,
    // unless the program is reached through /proc/self/fd (see `reachable`), which the
    // snapshot does not hold.
    let snapshot = report.private_proc.is_missing() && base.mount_namespace;
    let proc_view = snapshot.then(|| {
        let through_proc = [&program, &cwd].into_iter().any(|path| {
            rustix::fs::access(path.as_path(), rustix::fs::Access::EXISTS)
                == Err(rustix::io::Errno::ACCESS)
        });
        match through_proc {
            true => Err("the run reaches its program through /proc/self/fd".to_owned()),
            false => super::proc_view::mount_snapshot(),
        }
    });
    if let (ProtectionState::Unavailable(reason), Some(view)) = (&report.private_proc, &proc_view) {
        let instead = match view {
            Ok(()) => "/proc holds a read-only snapshot of the run's mount table and the \
                       machine's memory, CPU and load figures, and lists no process"
                .to_owned(),
            Err(e) => format!("/proc is not readable ({e})"),
        };
        report.private_proc = ProtectionState::unavailable(format!("{reason}; {instead}"));
    }
    let proc_snapshot = matches!(proc_view, Some(Ok(())));
    let handed: Vec<(&Path, BorrowedFd<'_>)> = spec
        .handed
        .iter()
        .map(PathBuf::as_path)
        .zip(handed.iter().map(OwnedFd::as_fd))
        .chain(copies.iter().map(|(path, fd)| (*path, fd.as_fd())))
        .collect();
    rules
        .refreshed(base)
        .restrict(base, spec, &handed, proc_snapshot, &mut report);

    if spec.strict
        && let Some((name, reason)) = first_missing(&report, &spec.strict_except)
    {
        report.error = Some(LaunchFailure {
            message: format!("strict mode: protection {name} is unavailable: {reason}"),
            protection: Some(name.to_owned()),
        });
        answer(&report);
        return SETUP_FAILED;
    }
    answer(&report);

    // The backstop is armed before the program starts; its thread was started while
    // the launcher waited, since threads count against the process limit, which a fork
    // bomb exhausts within microseconds of starting.
    let armed = backstop.and_then(|deadline| {
        deadline
            .send(Duration::from_millis(spec.backstop_ms))
            .map_err(|_| std::io::Error::other("its thread has ended"))
    });
    if let Err(e) = armed {
        let _ = writeln!(
            std::io::stderr(),
            "operon sandbox: cannot start the backstop: {e}"
        );
        return SETUP_FAILED;
    }

    let mut inherited = Vec::new();
    let program = reachable(&program, &handed, &mut inherited);
    let cwd = reachable(&cwd, &handed, &mut inherited);
    for fd in inherited {
        // The program reaches its file through this descriptor, and so must the
        // interpreter its shebang names: both run after exec.
        let _ = rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty());
    }
    let spawn = || {
        Command::new(&program)
            .args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&cwd)
            .stdin(Stdio::null())
            .spawn()
    };
    // The engine wrote the program just before the run. A process the engine forked
    // meanwhile (a launcher for the pool, another hook's run) holds a copy of that write
    // descriptor until it execs, and the kernel refuses to run a file open for writing
    // (ETXTBSY): that lasts a moment, so it is tried again for up to 200 ms.
    let mut child = spawn();
    for _ in 0..100 {
        match &child {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error()) => {
                std::thread::sleep(std::time::Duration::from_millis(2));
                child = spawn();
            }
            _ => break,
        }
    }
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "operon sandbox: cannot start {}: {e}",
                spec.program.display()
            );
            // The shell's codes: 127 not found, 126 found but not executable.
            return if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
        }
    };

    if report.pid_namespace {
        let code = reap_until(child.id());
        end_run();
        report_status(code);
        code
    } else {
        match child.wait() {
            Ok(status) => status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
            Err(_) => SETUP_FAILED,
        }
    }
}

/// Mounts each private copy over the path it copies, read-only where the kernel allows
/// it (Landlock keeps it so anyway: the copy's files climb to the original's rule);
/// returns the program and working directory to use, moved into a copy that could not
/// be mounted (no mount namespace, or a mount point the run's uid cannot reach), and a
/// descriptor of each mounted copy with its path, for its Landlock rule: Landlock's walk
/// up from a file of the copy jumps from the copy's root to the mount point's parent,
/// past the original's rule.
fn mount_private_copies<'s>(
    base: &LaunchBase,
    spec: &'s LaunchSpec,
) -> (PathBuf, PathBuf, Vec<(&'s Path, OwnedFd)>) {
    use rustix::fs::{Mode, OFlags};
    use rustix::mount::{MountFlags, mount_bind, mount_remount};
    let (mut program, mut cwd) = (spec.program.clone(), spec.cwd.clone());
    let mut mounted_copies = Vec::new();
    for copy in &spec.private_copies {
        let mounted = base.mount_namespace && mount_bind(&copy.copy, &copy.path).is_ok();
        if mounted {
            if let Ok(fd) =
                rustix::fs::open(&copy.path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
            {
                mounted_copies.push((copy.path.as_path(), fd));
            }
            // Refused when the file system underneath carries flags this namespace may
            // not drop (noexec, an atime mode); the copy is then writable by its owner
            // where Landlock is missing, and only this run sees it.
            let _ = mount_remount(
                &copy.path,
                MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV,
                "",
            );
            continue;
        }
        if let Some(moved) = copy.relocate(&program) {
            program = moved;
        }
        if let Some(moved) = copy.relocate(&cwd) {
            cwd = moved;
        }
    }
    (program, cwd, mounted_copies)
}

/// `path` itself when the run's uid can reach it, else the same file through the
/// descriptor of a handed path it lies under (`/proc/self/fd/N/...`), which reaches it
/// without entering the directories above: a hook below a directory only its owner may
/// enter. The descriptor is added to `inherited`. Nothing becomes readable that the
/// handed path's Landlock rule does not already grant.
fn reachable<'a>(
    path: &Path,
    handed: &[(&Path, BorrowedFd<'a>)],
    inherited: &mut Vec<BorrowedFd<'a>>,
) -> PathBuf {
    use rustix::fs::{Access, access};
    if access(path, Access::EXISTS) != Err(rustix::io::Errno::ACCESS) {
        return path.to_owned();
    }
    let Some((rest, fd)) = handed
        .iter()
        .find_map(|(root, fd)| Some((path.strip_prefix(root).ok()?, *fd)))
    else {
        return path.to_owned();
    };
    inherited.push(fd);
    let through = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    if rest.as_os_str().is_empty() {
        through
    } else {
        through.join(rest)
    }
}

/// As the namespace's init, reaps every child (orphans are re-parented here) until the
/// program itself exits; returns its status the way a shell would.
fn reap_until(program: u32) -> i32 {
    loop {
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid.as_raw_pid() as u32 == program => {
                return status
                    .exit_status()
                    .or_else(|| status.terminating_signal().map(|s| 128 + s))
                    .unwrap_or(SETUP_FAILED);
            }
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return SETUP_FAILED,
        }
    }
}

/// Kills and reaps every process of the run but this one, once the program exited: the
/// run is over, and its status may only be reported when nothing of it is left.
fn end_run() {
    // kill(-1): every process this one may signal, which for the init of a pid
    // namespace is every other process of the namespace. The kernel makes it atomic
    // against fork, so nothing started meanwhile escapes it.
    if let Some(everyone) = rustix::process::Pid::from_raw(1) {
        let _ = rustix::process::kill_process_group(everyone, rustix::process::Signal::KILL);
    }
    loop {
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(Some(_)) | Err(rustix::io::Errno::INTR) => {}
            // ECHILD: nothing left.
            Ok(None) | Err(_) => return,
        }
    }
}

/// Sends the program's status to the engine over the control channel (stdin), so the
/// run completes now rather than after the kernel tore the namespaces down, which
/// happens when this process exits and takes milliseconds.
fn report_status(code: i32) {
    let _ = channel::send_status(std::io::stdin().as_fd(), code);
}

fn first_missing(report: &LaunchReport, except: &[String]) -> Option<(&'static str, String)> {
    [
        ("private_proc", &report.private_proc),
        ("landlock_filesystem", &report.landlock_filesystem),
        ("landlock_network", &report.landlock_network),
        ("landlock_scopes", &report.landlock_scopes),
        ("cpu_limit", &report.cpu_limit),
        ("memory_limit", &report.memory_limit),
        ("process_limit", &report.process_limit),
        ("file_size_limit", &report.file_size_limit),
        ("open_files_limit", &report.open_files_limit),
        ("disk_budget", &report.disk_budget),
    ]
    .into_iter()
    .filter(|(name, _)| !except.iter().any(|e| e == name))
    .find_map(|(name, state)| match state {
        ProtectionState::Unavailable(reason) => Some((name, reason.clone())),
        ProtectionState::Unknown => Some((name, "not reached".to_owned())),
        _ => None,
    })
}

fn apply_limits(base: &LaunchBase, spec: &LaunchSpec, report: &mut LaunchReport) {
    use rustix::process::Resource;
    let Limits {
        cpu_seconds,
        address_space_bytes,
        processes,
        file_size_bytes,
        open_files,
        disk_bytes: _,
    } = spec.limits;
    // A crashing script must not leave a core dump in the run directory.
    let _ = set_limit(Resource::Core, Some(0));
    report.cpu_limit = set_limit(Resource::Cpu, cpu_seconds);
    report.memory_limit = set_limit(Resource::As, address_space_bytes);
    report.file_size_limit = set_limit(Resource::Fsize, file_size_bytes);
    report.open_files_limit = set_limit(Resource::Nofile, open_files);
    // Set after the user namespace exists, the limit counts only this namespace's
    // processes; the kernel ignores it for host uid 0.
    report.process_limit = match set_limit(Resource::Nproc, processes) {
        ProtectionState::Applied if base.host_root => ProtectionState::unavailable(
            "the run's host uid is 0, which the kernel exempts from RLIMIT_NPROC; \
             run the engine as non-root or set a sandbox uid",
        ),
        other => other,
    };
}

fn set_limit(resource: rustix::process::Resource, value: Option<u64>) -> ProtectionState {
    let Some(value) = value else {
        return ProtectionState::NotRequested;
    };
    let hard = rustix::process::getrlimit(resource).maximum;
    // Raising a hard limit needs privileges the launcher does not have; a lower one is
    // what matters.
    let value = hard.map_or(value, |hard| value.min(hard));
    let limit = rustix::process::Rlimit {
        current: Some(value),
        maximum: Some(value),
    };
    match rustix::process::setrlimit(resource, limit) {
        Ok(()) => ProtectionState::Applied,
        Err(e) => ProtectionState::unavailable(format!("setrlimit({resource:?}): {e}")),
    }
}

/// A scratch tmpfs of the default size, made while the launcher waits for its run and
/// not attached anywhere yet: the run's directory is only known with the spec.
struct Scratch {
    bytes: u64,
    mount: OwnedFd,
}

/// Creates the scratch tmpfs ahead of the run (most of a mount's cost); `None` when
/// there is no default size, no mount namespace, or no new mount API, and the run mounts
/// its own.
fn prepare_scratch(base: &LaunchBase) -> Option<Scratch> {
    use rustix::mount::{
        FsMountFlags, FsOpenFlags, MountAttrFlags, fsconfig_create, fsconfig_set_string, fsmount,
        fsopen,
    };
    let bytes = base.scratch_bytes?;
    if !base.mount_namespace {
        return None;
    }
    let fs = fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC).ok()?;
    fsconfig_set_string(&fs, "source", "operon-run").ok()?;
    fsconfig_set_string(&fs, "size", bytes.to_string().as_str()).ok()?;
    fsconfig_set_string(&fs, "mode", "0700").ok()?;
    fsconfig_create(&fs).ok()?;
    let mount = fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
    )
    .ok()?;
    Some(Scratch { bytes, mount })
}

/// Mounts the scratch directory as a tmpfs of the budgeted size, so that no script can
/// fill the host's disk however many files it writes: the one made in advance when its
/// size is the run's, else a new one.
fn mount_scratch(
    base: &LaunchBase,
    scratch: Option<Scratch>,
    spec: &LaunchSpec,
) -> ProtectionState {
    let Some(bytes) = spec.limits.disk_bytes else {
        return ProtectionState::NotRequested;
    };
    if !base.mount_namespace {
        return ProtectionState::unavailable("no mount namespace for a private tmpfs");
    }
    if let Some(scratch) = scratch.filter(|s| s.bytes == bytes) {
        use rustix::mount::{MoveMountFlags, move_mount};
        let attached = move_mount(
            &scratch.mount,
            "",
            rustix::fs::CWD,
            &spec.work_dir,
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        );
        if attached.is_ok() {
            return ProtectionState::Applied;
        }
    }
    // Mounting directly (rather than running util-linux `mount`) saves a program start
    // on every run.
    let options = match std::ffi::CString::new(format!("size={bytes},mode=0700")) {
        Ok(options) => options,
        Err(e) => return ProtectionState::unavailable(format!("bad tmpfs options: {e}")),
    };
    let flags = rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV;
    match rustix::mount::mount(
        "operon-run",
        &spec.work_dir,
        "tmpfs",
        flags,
        options.as_c_str(),
    ) {
        Ok(()) => ProtectionState::Applied,
        Err(e) => ProtectionState::unavailable(format!(
            "cannot mount a tmpfs on {}: {e}",
            spec.work_dir.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(fingerprint: Option<u64>) -> String {
        let mut json = serde_json::to_value(LaunchBase {
            fingerprint: 0,
            read_only: vec!["/usr".into()],
            etc_hidden: Vec::new(),
            devices: Vec::new(),
            network: false,
            mount_namespace: true,
            private_proc: ProtectionState::Applied,
            host_root: false,
            scratch_bytes: None,
        })
        .unwrap();
        match fingerprint {
            Some(fingerprint) => json["fingerprint"] = fingerprint.into(),
            None => drop(json.as_object_mut().unwrap().remove("fingerprint")),
        }
        json.to_string()
    }

    #[test]
    fn a_base_from_this_build_parses() {
        let parsed = parse_base(&base(Some(FINGERPRINT))).unwrap();
        assert_eq!(parsed.read_only, [PathBuf::from("/usr")]);
    }

    #[test]
    fn a_base_from_another_build_is_refused_with_both_fingerprints() {
        let other = FINGERPRINT.wrapping_add(1);
        let err = parse_base(&base(Some(other))).unwrap_err();
        assert!(err.contains(&format!("{other:016x}")), "{err}");
        assert!(err.contains(&format!("{FINGERPRINT:016x}")), "{err}");
        assert!(err.contains(LAUNCHER_BINARY), "{err}");
        let err = parse_base(&base(None)).unwrap_err();
        assert!(err.contains("the engine's absent"), "{err}");
    }
}
