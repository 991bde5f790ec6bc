//! Hostile scripts in the script sandbox, on this machine's kernel: each must be
//! contained and must leave no process behind.
//!
//! This test binary is its own launcher: the sandbox re-runs it with the launcher
//! environment set, filtered to the root's `sandbox_launcher_entry`, which then becomes the
//! in-sandbox half and never returns. Every script runs with a unique marker in its
//! environment; after the run no process on the host may still carry it.

use operon::script::{
    Launcher, Limits, OutputMode, ProtectionState, RunDir, RunStatus, SandboxError, SandboxOutcome,
    SandboxRequest, ScriptSandbox, ScriptSandboxConfig,
};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn sandbox() -> ScriptSandbox {
    sandbox_with(crate::launcher())
}

/// A strict sandbox whose runs start from `launcher`.
fn sandbox_with(launcher: Launcher) -> ScriptSandbox {
    let mut config = ScriptSandboxConfig::new(launcher);
    config.strict = true;
    ScriptSandbox::new(config).unwrap()
}

/// A marker unique to one run, put in its environment.
fn marker() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Host processes whose environment carries `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let needle = format!("OPERON_TEST_MARKER={marker}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(environ) = std::fs::read(entry.path().join("environ"))
            && environ
                .split(|b| *b == 0)
                .any(|var| var == needle.as_bytes())
        {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push(format!("{name}: {}", String::from_utf8_lossy(&cmdline)));
        }
    }
    found
}

/// Runs without a user namespace share the host uid's process count with the fork
/// bomb's processes (RLIMIT_NPROC is charged up the namespace tree), so the tests that
/// drive the count to its limit never run alongside one that needs to fork freely.
static PROCESS_LIMIT_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn assert_nothing_left(marker: &str) {
    // The kernel tears a pid namespace down before its init is reaped, so nothing
    // should be left the moment the run returns; a short grace covers /proc lag.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left = processes_with(marker);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "processes left behind: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Run {
    outcome: SandboxOutcome,
    _dir: RunDir,
    marker: String,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.outcome.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.outcome.stderr).into_owned()
    }
}

async fn run_script(
    sandbox: &ScriptSandbox,
    script: &str,
    timeout: Duration,
    adjust: impl FnOnce(&mut SandboxRequest),
) -> Result<Run, SandboxError> {
    let dir = sandbox.prepare()?;
    let program = dir.create_file(
        "script",
        format!("#!/bin/bash\n{script}\n").as_bytes(),
        true,
    )?;
    let marker = marker();
    let mut request = SandboxRequest::new("hostile", program);
    request.timeout = timeout;
    request.env = vec![("OPERON_TEST_MARKER".to_owned(), marker.clone())];
    adjust(&mut request);
    let outcome = sandbox.run(&dir, &request).await?;
    Ok(Run {
        outcome,
        _dir: dir,
        marker,
    })
}

#[tokio::test]
async fn a_trivial_script_runs_with_every_protection() {
    let sandbox = sandbox();
    let run = run_script(
        &sandbox,
        "echo hello; id -u; echo err >&2",
        Duration::from_secs(10),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(run.outcome.status, RunStatus::Exited(0), "{}", run.stderr());
    assert_eq!(run.stdout(), "hello\n0\n");
    assert_eq!(run.stderr(), "err\n");
    for (name, state) in run.outcome.protections.iter() {
        assert_eq!(state, &ProtectionState::Applied, "{name}");
    }
    assert_nothing_left(&run.marker);
}

/// A finished run's stderr is the program's alone: the chain is killed once the output
/// is read, so `unshare`'s complaint about its launcher's SIGKILL ("sigprocmask unblock
/// failed") never reaches it. Before, it did now and then, depending on which ran
/// first; many short runs give the race its chances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_runs_stderr_holds_only_the_programs_output() {
    let sandbox = sandbox();
    for _ in 0..100 {
        let run = run_script(&sandbox, "echo err >&2", Duration::from_secs(10), |_| {})
            .await
            .unwrap();
        assert_eq!(run.outcome.status, RunStatus::Exited(0), "{}", run.stderr());
        assert_eq!(run.stderr(), "err\n");
    }
}

/// A program still open for writing somewhere when its run starts (a process the
/// engine forked at that moment holds a copy of the descriptor it was written with) is
/// run once that passes, not refused with "Text file busy".
#[tokio::test]
async fn a_program_briefly_open_for_writing_still_runs() {
    let sandbox = sandbox();
    let dir = sandbox.prepare().unwrap();
    let program = dir
        .create_file("script", b"#!/bin/bash\necho ran\n", true)
        .unwrap();
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&program)
        .unwrap();
    let closing = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        drop(writer);
    });
    let request = SandboxRequest::new("busy", program);
    let outcome = sandbox.run(&dir, &request).await.unwrap();
    closing.join().unwrap();
    assert_eq!(
        outcome.status,
        RunStatus::Exited(0),
        "{}",
        String::from_utf8_lossy(&outcome.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&outcome.stdout), "ran\n");
}

/// Set in the copy of this binary that `runs_leave_no_zombie_to_a_pid_1_engine` starts.
const ZOMBIE_PROBE: &str = "OPERON_TEST_ZOMBIE_PROBE";

/// Runs finished and killed leave no zombie to the engine: in a container the engine is
/// pid 1, every orphan of the pod comes to it, and it reaps only what it started. The
/// check runs in a copy of this binary made a child subreaper (as pid 1 is), running only
/// this test, so no other test's processes come to it.
#[tokio::test]
async fn runs_leave_no_zombie_to_a_pid_1_engine() {
    if std::env::var_os(ZOMBIE_PROBE).is_some() {
        return zombie_probe().await;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "script_sandbox::runs_leave_no_zombie_to_a_pid_1_engine",
            "--exact",
            "--nocapture",
        ])
        .env(ZOMBIE_PROBE, "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

async fn zombie_probe() {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    let sandbox = sandbox();
    for _ in 0..5 {
        let run = run_script(&sandbox, "echo done", Duration::from_secs(10), |_| {})
            .await
            .unwrap();
        assert_eq!(run.outcome.status, RunStatus::Exited(0), "{}", run.stderr());
    }
    // And runs killed at their time limit.
    for _ in 0..3 {
        let run = run_script(&sandbox, "sleep 30", Duration::from_millis(300), |_| {})
            .await
            .unwrap();
        assert_eq!(run.outcome.status, RunStatus::TimedOut, "{}", run.stderr());
    }
    drop(sandbox);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let zombies = zombie_children();
        if zombies.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "zombies left to the subreaper: {zombies:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// This process's children that exited and were not reaped, by name.
fn zombie_children() -> Vec<String> {
    let me = std::process::id().to_string();
    let mut zombies = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `PID (COMM) STATE PPID ...`; the name may hold spaces and parentheses.
        let Some((name, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let mut fields = rest.split(' ');
        if fields.next() == Some("Z") && fields.next() == Some(me.as_str()) {
            zombies.push(name.to_owned() + ")");
        }
    }
    zombies
}

#[tokio::test]
async fn the_environment_holds_only_the_contract_and_the_allow_list() {
    let sandbox = sandbox();
    // The test process carries cargo's variables (CARGO_*, RUST_*); none may leak.
    let run = run_script(
        &sandbox,
        "env | cut -d= -f1 | sort | tr '\\n' ' '",
        Duration::from_secs(10),
        |r| {
            r.env.push(("ALLOWED".to_owned(), "yes".to_owned()));
        },
    )
    .await
    .unwrap();
    let names: Vec<&str> = run
        .outcome
        .stdout
        .split(|b| *b == b' ')
        .filter(|n| !n.is_empty())
        .map(|n| std::str::from_utf8(n).unwrap())
        .collect();
    for name in &names {
        assert!(
            [
                "ALLOWED",
                "HOME",
                "LANG",
                "OPERON_TEST_MARKER",
                "PATH",
                "PWD",
                "SHLVL",
                "TMPDIR",
                "_",
                "OLDPWD"
            ]
            .contains(name),
            "{name} leaked into the run: {names:?}"
        );
    }
    assert!(names.contains(&"ALLOWED"));
}

/// The launcher's own binary, which `operon` uses when it is installed beside it,
/// applies every protection and is the run's pid 1.
#[tokio::test]
async fn the_launchers_own_binary_applies_every_protection() {
    let sandbox = sandbox_with(Launcher {
        program: env!("CARGO_BIN_EXE_operon-sandbox-exec").into(),
        args: Vec::new(),
    });
    let run = run_script(
        &sandbox,
        "cat /proc/1/comm; id -u",
        Duration::from_secs(10),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(run.outcome.status, RunStatus::Exited(0), "{}", run.stderr());
    assert_eq!(run.stdout(), "operon-sandbox-\n0\n");
    for (name, state) in run.outcome.protections.iter() {
        assert_eq!(state, &ProtectionState::Applied, "{name}");
    }
    assert_nothing_left(&run.marker);
}

#[tokio::test]
async fn the_run_sees_only_its_own_processes() {
    let sandbox = sandbox();
    let run = run_script(&sandbox, "echo $$; ls /proc | grep -c '^[0-9]'; kill -0 1 && echo init-visible; kill -9 $PPID_HOST 2>&1 || echo cannot-kill", Duration::from_secs(10), |r| {
        r.env.push(("PPID_HOST".to_owned(), std::process::id().to_string()));
    })
    .await
    .unwrap();
    let out = run.stdout();
    let lines: Vec<&str> = out.lines().collect();
    let pid: u32 = lines[0].parse().unwrap();
    assert!(
        pid < 10,
        "the script's pid is in the run's own pid namespace: {out}"
    );
    let visible: usize = lines[1].parse().unwrap();
    assert!(visible <= 4, "only the run's processes are in /proc: {out}");
    assert!(out.contains("cannot-kill"), "{out}");
    assert_nothing_left(&run.marker);
}

#[tokio::test]
async fn a_fork_bomb_is_contained() {
    let _serial = PROCESS_LIMIT_TESTS.lock().await;
    let sandbox = sandbox();
    let started = Instant::now();
    let run = run_script(
        &sandbox,
        "bomb() { bomb | bomb; }; bomb",
        Duration::from_secs(3),
        |r| {
            r.limits = Some(Limits {
                processes: Some(32),
                ..Limits::default()
            });
        },
    )
    .await
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    // Every level waits for its pipeline, so the bomb keeps trying until it is killed,
    // its forks failing at the process limit meanwhile.
    assert!(
        matches!(
            run.outcome.status,
            RunStatus::TimedOut | RunStatus::OutputExceeded
        ),
        "{:?}",
        run.outcome.status
    );
    assert!(
        run.stderr().contains("Resource temporarily unavailable"),
        "{}",
        run.stderr()
    );
    assert_nothing_left(&run.marker);
}

#[tokio::test]
async fn a_secret_outside_the_allowed_paths_cannot_be_read() {
    use std::os::unix::fs::PermissionsExt as _;
    let secret_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(secret_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = secret_dir.path().join("token");
    // World-readable, so only the sandbox stands between the script and the secret.
    std::fs::write(&secret, "s3cr3t-value\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let sandbox = sandbox();
    let script = format!(
        "cat {0}; ls {1}; cat /etc/shadow; cat /proc/1/environ; echo done",
        secret.display(),
        secret_dir.path().display()
    );
    let run = run_script(&sandbox, &script, Duration::from_secs(10), |_| {})
        .await
        .unwrap();
    assert!(!run.stdout().contains("s3cr3t"), "{}", run.stdout());
    assert!(!run.stdout().contains("token"), "{}", run.stdout());
    assert!(
        run.stderr().contains("Permission denied"),
        "{}",
        run.stderr()
    );
    assert!(run.stdout().ends_with("done\n"));
    assert_nothing_left(&run.marker);
}

#[tokio::test]
async fn writing_outside_the_run_directory_fails() {
    use std::os::unix::fs::PermissionsExt as _;
    let target = tempfile::tempdir().unwrap();
    std::fs::set_permissions(target.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let sandbox = sandbox();
    let script = format!(
        "echo pwned > {0}/pwned; touch /tmp/operon-pwned-$$; mkdir {0}/d; echo ok > $HOME/fine && cat $HOME/fine",
        target.path().display()
    );
    let run = run_script(&sandbox, &script, Duration::from_secs(10), |_| {})
        .await
        .unwrap();
    assert_eq!(std::fs::read_dir(target.path()).unwrap().count(), 0);
    assert!(
        run.stderr().contains("Permission denied"),
        "{}",
        run.stderr()
    );
    assert_eq!(run.stdout(), "ok\n", "the scratch directory stays writable");
    assert_nothing_left(&run.marker);
}

#[tokio::test]
async fn connecting_to_a_local_port_fails_without_network() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let sandbox = sandbox();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let run = run_script(&sandbox, &script, Duration::from_secs(10), |_| {})
        .await
        .unwrap();
    assert!(!run.stdout().contains("connected"));
    assert_ne!(run.outcome.status, RunStatus::Exited(0));
    let accepted = listener.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the listener saw a connection: {accepted:?}"
    );
    assert_nothing_left(&run.marker);

    // The control: the same script with network granted does connect, so the failure
    // above is the sandbox's doing.
    let run = run_script(&sandbox, &script, Duration::from_secs(10), |r| {
        r.network = true
    })
    .await
    .unwrap();
    assert_eq!(run.stdout(), "connected\n", "{}", run.stderr());
    assert_eq!(
        run.outcome.protections.network_namespace,
        ProtectionState::NotRequested
    );
}

#[tokio::test]
async fn background_children_die_with_the_run() {
    let sandbox = sandbox();
    // Past the deadline: everything is killed at the deadline.
    let started = Instant::now();
    let run = run_script(
        &sandbox,
        "sleep 60 & (setsid sleep 60 &); sleep 60",
        Duration::from_millis(500),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(run.outcome.status, RunStatus::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_nothing_left(&run.marker);

    // A script that exits at once, leaving daemons behind: they die with it.
    let run = run_script(
        &sandbox,
        "nohup sleep 60 >/dev/null 2>&1 & (setsid sleep 60 &); exit 0",
        Duration::from_secs(10),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(run.outcome.status, RunStatus::Exited(0), "{}", run.stderr());
    assert_nothing_left(&run.marker);
}

#[tokio::test]
async fn filling_the_disk_stops_at_the_budget() {
    let sandbox = sandbox();
    let limits = Limits {
        file_size_bytes: Some(8 << 20),
        disk_bytes: Some(16 << 20),
        ..Limits::default()
    };
    // One big file: stopped by RLIMIT_FSIZE.
    let run = run_script(
        &sandbox,
        "head -c 100000000 /dev/zero > big; echo \"rc=$?\"; stat -c %s big",
        Duration::from_secs(20),
        |r| {
            r.limits = Some(limits.clone());
        },
    )
    .await
    .unwrap();
    let out = run.stdout();
    assert!(out.contains("rc=") && !out.contains("rc=0"), "{out}");
    assert!(out.trim_end().ends_with(&(8u64 << 20).to_string()), "{out}");
    assert_nothing_left(&run.marker);

    // Many files under the size limit: stopped by the scratch tmpfs' size.
    let run = run_script(
        &sandbox,
        "for i in $(seq 1 1000); do head -c 4000000 /dev/zero > f$i || { echo \"full at $i\"; exit 3; }; done",
        Duration::from_secs(20),
        |r| r.limits = Some(limits.clone()),
    )
    .await
    .unwrap();
    assert_eq!(run.outcome.status, RunStatus::Exited(3), "{}", run.stderr());
    assert!(run.stdout().starts_with("full at"), "{}", run.stdout());
    assert!(run.stderr().contains("No space left"), "{}", run.stderr());
    // The host side of the scratch directory never saw a byte.
    assert_eq!(std::fs::read_dir(run._dir.work_dir()).unwrap().count(), 0);
    assert_nothing_left(&run.marker);
}

#[tokio::test]
async fn a_hundred_megabytes_on_stdout_are_cut_off() {
    let sandbox = sandbox();
    let started = Instant::now();
    let run = run_script(
        &sandbox,
        "head -c 100000000 /dev/zero; echo finished >&2",
        Duration::from_secs(30),
        |r| {
            r.output_limit = 1 << 20;
        },
    )
    .await
    .unwrap();
    assert_eq!(run.outcome.status, RunStatus::OutputExceeded);
    assert_eq!(run.outcome.stdout.len(), 1 << 20);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_nothing_left(&run.marker);
}

#[tokio::test]
async fn combined_output_interleaves_both_streams() {
    let sandbox = sandbox();
    let run = run_script(
        &sandbox,
        "echo one; echo two >&2; echo three",
        Duration::from_secs(10),
        |r| {
            r.output = OutputMode::Combined;
        },
    )
    .await
    .unwrap();
    assert_eq!(run.stdout(), "one\ntwo\nthree\n");
    assert!(run.outcome.stderr.is_empty());
}

#[tokio::test]
async fn strict_mode_refuses_to_run_without_namespaces() {
    let _serial = PROCESS_LIMIT_TESTS.lock().await;
    let mut config = ScriptSandboxConfig::new(crate::launcher());
    config.unshare = None;
    config.strict = true;
    let sandbox = ScriptSandbox::new(config.clone()).unwrap();
    let err = run_script(&sandbox, "echo ran", Duration::from_secs(10), |_| {})
        .await
        .err()
        .expect("strict mode must refuse");
    assert!(
        matches!(&err, SandboxError::Unprotected { protection, .. } if protection == "user_namespace"),
        "{err}"
    );

    // Without strict mode the run happens, says what it lacked, and still leaves no
    // process behind (the process group is killed).
    config.strict = false;
    let sandbox = ScriptSandbox::new(config).unwrap();
    let run = run_script(
        &sandbox,
        "sleep 60 & echo ran",
        Duration::from_secs(10),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(run.stdout(), "ran\n");
    let p = &run.outcome.protections;
    assert!(p.pid_namespace.is_missing());
    assert_eq!(p.landlock_filesystem, ProtectionState::Applied);
    assert!(p.disk_budget.is_missing());
    assert_nothing_left(&run.marker);
}

#[test]
fn the_runs_directory_is_traversable_but_not_listable() {
    use std::os::unix::fs::PermissionsExt as _;
    let sandbox = sandbox();
    let mode = std::fs::metadata(&sandbox.config().runs_dir)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o711);
    let run = sandbox.prepare().unwrap();
    let mode = std::fs::metadata(run.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let file = run.create_file("f", b"x", false).unwrap();
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(Path::new(run.path()).starts_with(&sandbox.config().runs_dir));
}

/// A run directory's name is used again once the directory is gone (a fresh name per
/// run leaves a negative dentry per run in the engine's memory cgroup), and a name
/// already taken on the path is skipped and left alone.
#[test]
fn run_directory_names_are_reused_and_taken_ones_skipped() {
    let runs = tempfile::tempdir().unwrap();
    let mut config = ScriptSandboxConfig::new(crate::launcher());
    config.strict = true;
    config.runs_dir = runs.path().join("runs");
    let sandbox = ScriptSandbox::new(config).unwrap();
    let leftover = sandbox.config().runs_dir.join("run-0");
    std::fs::create_dir(&leftover).unwrap();
    std::fs::write(leftover.join("kept"), "x").unwrap();
    let run = sandbox.prepare().unwrap();
    let first = run.path().to_owned();
    assert_ne!(first, leftover);
    run.create_file("old", b"x", false).unwrap();
    drop(run);
    let deadline = Instant::now() + Duration::from_secs(10);
    while first.exists() {
        assert!(Instant::now() < deadline, "{} not removed", first.display());
        std::thread::sleep(Duration::from_millis(5));
    }
    let again = sandbox.prepare().unwrap();
    assert_eq!(again.path(), first);
    let entries: Vec<_> = std::fs::read_dir(again.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        entries,
        [std::ffi::OsString::from("work")],
        "a fresh directory"
    );
    let other = sandbox.prepare().unwrap();
    assert_ne!(other.path(), first);
    assert!(
        leftover.join("kept").exists(),
        "the taken name is left alone"
    );
}

fn run_request(input: &[(&str, &str)], timeout: Duration) -> operon::runner::RunRequest {
    operon::runner::RunRequest {
        name: "kubediag".to_owned(),
        input: input
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        results: Default::default(),
        node: None,
        namespace: None,
        owner: None,
        dry_run: false,
        timeout,
    }
}

#[tokio::test]
async fn kubediag_scripts_run_sandboxed_with_their_semantics() {
    use operon::runner::Runner as _;
    use operon::runner::script::{SandboxedScriptRunner, ScriptSource};
    use operon::script::ScriptStore;
    let sandbox = sandbox();

    // argKeys become positional arguments; stdout and stderr interleave into the output.
    let runner = SandboxedScriptRunner::new(
        sandbox.clone(),
        ScriptSource::Inline("echo \"first=$1 second=$2\"; echo oops >&2".to_owned()),
        vec!["a".to_owned(), "b".to_owned()],
        Some("probe".to_owned()),
    );
    let out = runner
        .run(&run_request(
            &[("a", "x y"), ("b", "z")],
            Duration::from_secs(10),
        ))
        .await
        .unwrap();
    assert_eq!(
        out.results["operation.probe.output"],
        "first=x y second=z\noops\n"
    );

    // A missing argKey is an error, not a shift.
    let err = runner
        .run(&run_request(&[("b", "z")], Duration::from_secs(10)))
        .await
        .unwrap_err();
    assert!(err.message.contains("argKeys[0]"), "{}", err.message);

    // Non-zero exit fails and keeps KubeDiag's keys.
    let runner = SandboxedScriptRunner::new(
        sandbox.clone(),
        ScriptSource::Inline("echo partial; exit 3".to_owned()),
        vec![],
        Some("k".to_owned()),
    );
    let err = runner
        .run(&run_request(&[], Duration::from_secs(10)))
        .await
        .unwrap_err();
    assert!(err.message.contains("exit code 3"), "{}", err.message);
    assert_eq!(err.results["operation.k.output"], "partial\n");
    assert_eq!(err.results["operation.k.error"], "exit code 3");

    // The shebang is honoured; without one the script runs under /bin/sh.
    let runner = SandboxedScriptRunner::new(
        sandbox.clone(),
        ScriptSource::Inline("#!/bin/bash\necho \"${BASH_VERSION:+bash}\"".to_owned()),
        vec![],
        None,
    );
    let out = runner
        .run(&run_request(&[], Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(out.output, "bash\n");

    // A stored script, read at each run; a timeout fails with the timeout key.
    let data = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(ScriptStore::open(&data.path().join("scripts")).unwrap());
    store.put("slow-probe", "sleep 30").unwrap();
    let runner = SandboxedScriptRunner::new(
        sandbox,
        ScriptSource::Stored {
            store: store.clone(),
            name: "slow-probe".to_owned(),
        },
        vec![],
        Some("slow".to_owned()),
    );
    let started = Instant::now();
    let err = runner
        .run(&run_request(&[], Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert!(err.message.contains("timed out"), "{}", err.message);
    assert_eq!(err.results["operation.slow.error"], "timeout");
    assert!(started.elapsed() < Duration::from_secs(3));
    store.put("slow-probe", "echo replaced").unwrap();
    let out = runner
        .run(&run_request(&[], Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(out.output, "replaced\n");
}

#[tokio::test]
async fn ordinary_shell_idioms_still_work() {
    let sandbox = sandbox();
    let script = r#"set -e
cat <(echo substituted)
echo to-stdout > /dev/stdout
echo discarded > /dev/null
tmp=$(mktemp); echo temp > "$tmp"; cat "$tmp"
echo '{"a": [1, 2]}' | jq -c '.a | length'
echo field | awk '{print toupper($1)}' | sed 's/FIELD/sed-ok/'
head -c 4 /dev/urandom | wc -c
date +%Y > /dev/null && echo date-ok
getent passwd root | cut -d: -f1
"#;
    let run = run_script(&sandbox, script, Duration::from_secs(10), |_| {})
        .await
        .unwrap();
    assert_eq!(run.outcome.status, RunStatus::Exited(0), "{}", run.stderr());
    assert_eq!(
        run.stdout(),
        "substituted\nto-stdout\ntemp\n2\nsed-ok\n4\ndate-ok\nroot\n"
    );
    assert_nothing_left(&run.marker);
}

/// A hooks directory inside a 0700 directory, as in `/home/alice/hooks` with
/// `/home/alice` private: the parent is private, the hooks themselves are not.
struct PrivateHooks {
    /// The 0700 directory (a temp dir is 0700 already).
    parent: tempfile::TempDir,
    hooks: std::path::PathBuf,
    hook: std::path::PathBuf,
}

fn private_hooks(hook: &str) -> PrivateHooks {
    use std::os::unix::fs::PermissionsExt as _;
    let parent = tempfile::tempdir().unwrap();
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    // World-readable beside the hooks: only the parent's mode and the sandbox keep it
    // from a run.
    std::fs::write(parent.path().join("secret"), "s3cr3t-value\n").unwrap();
    std::fs::set_permissions(
        parent.path().join("secret"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let hooks = parent.path().join("hooks");
    std::fs::create_dir_all(hooks.join("lib")).unwrap();
    std::fs::set_permissions(&hooks, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(hooks.join("lib/common.sh"), "GREETING=from-lib\n").unwrap();
    let path = hooks.join("hook.sh");
    std::fs::write(&path, hook).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    PrivateHooks {
        parent,
        hooks,
        hook: path,
    }
}

#[tokio::test]
async fn a_hook_inside_a_private_directory_runs() {
    use operon::hooks::runner::{Hook as _, ScriptHook};
    // As root the runs use an unprivileged uid, which cannot enter the 0700 parent; as
    // any other user the run's uid owns it.
    let dir = private_hooks(
        "#!/bin/bash\nsource \"$(dirname \"$0\")/lib/common.sh\"\n\
         if [ \"$1\" = --config ]; then echo 'configVersion: v1'; echo 'onStartup: 10'; exit 0; fi\n\
         echo \"$GREETING\"\n",
    );
    let hook = ScriptHook::new(sandbox(), &dir.hooks, &dir.hook);
    let config = hook.configure().await;
    assert!(config.is_ok(), "{:?}", config.err());

    // Reaching the hook grants nothing else of the private directory.
    let sandbox = sandbox();
    let run = sandbox.prepare().unwrap();
    let marker = marker();
    let mut request = SandboxRequest::new("private", &dir.hook);
    request.cwd = Some(dir.hooks.clone());
    request.read_only = vec![dir.hooks.clone()];
    request.env = vec![("OPERON_TEST_MARKER".to_owned(), marker.clone())];
    request.timeout = Duration::from_secs(10);
    let outcome = sandbox.run(&run, &request).await.unwrap();
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    assert_eq!(
        outcome.status,
        RunStatus::Exited(0),
        "{}",
        String::from_utf8_lossy(&outcome.stderr)
    );
    assert_eq!(stdout, "from-lib\n");
    for (name, state) in outcome.protections.iter() {
        assert_eq!(state, &ProtectionState::Applied, "{name}");
    }
    assert_nothing_left(&marker);

    let snoop = format!(
        "#!/bin/bash\ncat \"$(dirname \"$0\")/../secret\" {0}/secret; ls {0} \"$(dirname \"$0\")/..\"; echo done\n",
        dir.parent.path().display()
    );
    std::fs::write(&dir.hook, snoop).unwrap();
    let run = sandbox.prepare().unwrap();
    let outcome = sandbox.run(&run, &request).await.unwrap();
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    assert_eq!(
        stdout,
        "done\n",
        "{}",
        String::from_utf8_lossy(&outcome.stderr)
    );
}

/// Host processes whose command line carries `marker`.
fn processes_named(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if cmdline
            .split(|b| *b == 0)
            .any(|arg| arg == marker.as_bytes())
        {
            found.push(format!("{name}: {}", String::from_utf8_lossy(&cmdline)));
        }
    }
    found
}

#[tokio::test]
async fn waiting_launchers_end_with_their_sandbox() {
    // A filter no test matches marks this sandbox's launchers apart from the other
    // tests' ones.
    let tag = format!("pool-{}", marker());
    let mut launcher = crate::launcher();
    launcher.args.extend(["--skip".to_owned(), tag.clone()]);
    let mut config = ScriptSandboxConfig::new(launcher);
    config.strict = true;
    config.pool_size = 3;
    let sandbox = ScriptSandbox::new(config).unwrap();
    let run = run_script(&sandbox, "echo once", Duration::from_secs(10), |_| {})
        .await
        .unwrap();
    assert_eq!(run.stdout(), "once\n");

    // The pool refills behind the run: three launchers, each under its `unshare`.
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_named(&tag).len() < 6 {
        assert!(
            Instant::now() < deadline,
            "the pool did not fill: {:?}",
            processes_named(&tag)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        processes_named(&tag).len(),
        6,
        "{:?}",
        processes_named(&tag)
    );

    drop(run);
    drop(sandbox);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left = processes_named(&tag);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "launchers left behind: {left:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_operation_reads_only_the_host_paths_it_declares() {
    use operon::runner::Runner as _;
    use operon::runner::script::{SandboxedScriptRunner, ScriptSource};
    use std::os::unix::fs::PermissionsExt as _;
    let journal = tempfile::tempdir().unwrap();
    std::fs::set_permissions(journal.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(journal.path().join("kubelet.log"), "node ready\n").unwrap();
    let script = format!("cat {}/kubelet.log", journal.path().display());
    let runner = |paths: Vec<std::path::PathBuf>| {
        SandboxedScriptRunner::new(
            sandbox(),
            ScriptSource::Inline(script.clone()),
            vec![],
            None,
        )
        .with_read_only(paths)
    };
    let request = run_request(&[], Duration::from_secs(10));
    let refused = runner(vec![]).run(&request).await.unwrap_err();
    assert!(
        refused.message.contains("Permission denied"),
        "{}",
        refused.message
    );
    let read = runner(vec![journal.path().to_owned()])
        .run(&request)
        .await
        .unwrap();
    assert_eq!(read.output, "node ready\n");
}

/// An agent that mounts the node's `/` elsewhere (`--node-root`): the declared paths
/// are the node's, looked up under the root, links included, and nothing else of the
/// root is readable.
#[tokio::test]
async fn declared_paths_are_looked_up_under_the_node_root() {
    use operon::runner::Runner as _;
    use operon::runner::node_paths::NodeRoot;
    use operon::runner::script::{SandboxedScriptRunner, ScriptSource};
    use std::os::unix::fs::PermissionsExt as _;
    let node = tempfile::tempdir().unwrap();
    std::fs::set_permissions(node.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(node.path().join("run/log")).unwrap();
    std::fs::create_dir_all(node.path().join("var")).unwrap();
    std::fs::create_dir_all(node.path().join("etc")).unwrap();
    std::fs::write(node.path().join("run/log/kubelet.log"), "node ready\n").unwrap();
    std::fs::write(node.path().join("etc/shadow"), "secret\n").unwrap();
    // The node's /var/log is a link to its /run/log, absolute as on a real node.
    std::os::unix::fs::symlink("/run/log", node.path().join("var/log")).unwrap();
    let runner = |script: &str, paths: &[&str]| {
        SandboxedScriptRunner::new(
            sandbox(),
            ScriptSource::Inline(script.to_owned()),
            vec![],
            None,
        )
        .with_read_only(paths.iter().map(std::path::PathBuf::from).collect())
        .with_node_root(NodeRoot::new(Some(node.path().to_owned())))
    };
    let request = run_request(&[], Duration::from_secs(10));
    let read = runner(
        r#"echo "$OPERON_NODE_ROOT"; cat "$OPERON_NODE_ROOT/run/log/kubelet.log""#,
        &["/var/log"],
    )
    .run(&request)
    .await
    .unwrap();
    assert_eq!(
        read.output,
        format!("{}\nnode ready\n", node.path().display())
    );
    let refused = runner(r#"cat "$OPERON_NODE_ROOT/etc/shadow""#, &["/var/log"])
        .run(&request)
        .await
        .unwrap_err();
    assert!(
        refused.message.contains("Permission denied"),
        "{}",
        refused.message
    );
    // A declared path the node does not have grants nothing and fails nothing.
    let missing = runner("echo ok", &["/var/log/journal"])
        .run(&request)
        .await
        .unwrap();
    assert_eq!(missing.output, "ok\n");
    // On a machine the root is `/` and the variable is empty.
    let at_slash = SandboxedScriptRunner::new(
        sandbox(),
        ScriptSource::Inline(r#"echo "[$OPERON_NODE_ROOT]""#.to_owned()),
        vec![],
        None,
    )
    .run(&request)
    .await
    .unwrap();
    assert_eq!(at_slash.output, "[]\n");
}
