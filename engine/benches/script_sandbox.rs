//! Cost of one sandboxed run of a trivial script versus the same script run by plain
//! fork/exec, measured in the same process, interleaved, so machine noise hits both.
//!
//! `cargo bench -p operon-engine --bench script_sandbox`. This binary is its own
//! launcher: the sandbox re-executes it with the launcher environment set, which is what
//! the `operon` binary does in production. Prints the median of each variant, the
//! sandbox's added time, and the ratio. The target is at most 1 ms added.
//!
//! The "no pool" variants start every launcher when its run comes (`pool_size: 0`), as
//! the sandbox did before it kept launchers waiting: the before and after of that
//! change, measured in one run. The "own binary" variants launch from
//! `operon-sandbox-exec`, as `operon` does where it is installed beside it, instead of
//! from this large binary, which stands in for `operon` (their relocations are most of
//! a launcher's start). Every variant is measured twice: back to back, and with 25 ms
//! between runs so that the pool's refills are not measured as part of the next run.

use operon::script::{Launcher, Limits, SandboxRequest, ScriptSandbox, ScriptSandboxConfig};
use std::time::{Duration, Instant};

operon::binary_allocator!();

const SCRIPT: &[u8] = b"#!/bin/sh\necho hello\n";
const WARMUP: usize = 5;
const ROUNDS: usize = 60;

fn main() {
    operon::script::launcher::run_if_invoked();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(bench());
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn bench() {
    let runs = tempfile::tempdir().expect("a temp dir");
    let mut config = ScriptSandboxConfig::new(Launcher::current_exe().expect("the bench binary"));
    config.runs_dir = runs.path().join("runs");
    let pooled = ScriptSandbox::new(config.clone()).expect("the script sandbox");
    config.pool_size = 0;
    let unpooled = ScriptSandbox::new(config.clone()).expect("the script sandbox without a pool");
    let mut own = ScriptSandboxConfig::new(Launcher {
        program: env!("CARGO_BIN_EXE_operon-sandbox-exec").into(),
        args: Vec::new(),
    });
    own.runs_dir = config.runs_dir.clone();
    let pooled_own = ScriptSandbox::new(own.clone()).expect("the launcher's own binary");
    own.pool_size = 0;
    let unpooled_own = ScriptSandbox::new(own).expect("the launcher's own binary, no pool");

    let plain_dir = tempfile::tempdir().expect("a temp dir");
    let plain_script = plain_dir.path().join("script");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::write(&plain_script, SCRIPT).expect("the plain script");
        std::fs::set_permissions(&plain_script, std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
    }

    let plain = || async {
        let started = Instant::now();
        let out = tokio::process::Command::new(&plain_script)
            .env_clear()
            .output()
            .await
            .expect("the plain run");
        assert_eq!(out.stdout, b"hello\n");
        started.elapsed()
    };
    let sandboxed = |sandbox: &ScriptSandbox, limits: Limits, network: bool| {
        let sandbox = sandbox.clone();
        async move {
            let started = Instant::now();
            let run = sandbox.prepare().expect("a run dir");
            let program = run.create_file("script", SCRIPT, true).expect("the script");
            let mut request = SandboxRequest::new("bench", program);
            request.timeout = Duration::from_secs(10);
            request.limits = Some(limits);
            request.network = network;
            let outcome = sandbox
                .run(&run, &request)
                .await
                .expect("the sandboxed run");
            assert_eq!(outcome.stdout, b"hello\n");
            drop(run);
            (started.elapsed(), outcome.protections)
        }
    };
    let no_disk = Limits {
        disk_bytes: None,
        ..Limits::default()
    };

    let mut protections = None;
    // Back to back, a pool's refill of one run competes for the CPU with the next run;
    // with a pause, every run finds its pool full, as runs spaced by events do.
    for (title, pause) in [
        ("back to back", Duration::ZERO),
        ("25 ms apart", Duration::from_millis(25)),
    ] {
        let mut times: [Vec<Duration>; 7] = Default::default();
        for round in 0..WARMUP + ROUNDS {
            tokio::time::sleep(pause).await;
            let p = plain().await;
            tokio::time::sleep(pause).await;
            let (full, report) = sandboxed(&pooled, Limits::default(), false).await;
            tokio::time::sleep(pause).await;
            let (without_tmpfs, _) = sandboxed(&pooled, no_disk.clone(), false).await;
            tokio::time::sleep(pause).await;
            let (with_network, _) = sandboxed(&pooled, no_disk.clone(), true).await;
            tokio::time::sleep(pause).await;
            let (unpooled_full, unpooled_report) =
                sandboxed(&unpooled, Limits::default(), false).await;
            tokio::time::sleep(pause).await;
            let (own_full, own_report) = sandboxed(&pooled_own, Limits::default(), false).await;
            tokio::time::sleep(pause).await;
            let (unpooled_own_full, unpooled_own_report) =
                sandboxed(&unpooled_own, Limits::default(), false).await;
            for other in [&unpooled_report, &own_report, &unpooled_own_report] {
                assert_eq!(&report, other, "every way applies the same protections");
            }
            if round >= WARMUP {
                for (series, t) in times.iter_mut().zip([
                    p,
                    full,
                    without_tmpfs,
                    with_network,
                    unpooled_full,
                    own_full,
                    unpooled_own_full,
                ]) {
                    series.push(t);
                }
            }
            protections = Some(report);
        }
        let [
            plain_t,
            full_t,
            no_tmpfs_t,
            network_t,
            unpooled_t,
            own_t,
            unpooled_own_t,
        ] = times.map(|mut t| median(&mut t));
        println!("script sandbox, {title}: {ROUNDS} rounds, medians");
        println!(
            "  plain fork/exec                       {:8.3} ms",
            ms(plain_t)
        );
        for (name, t) in [
            ("sandboxed (all protections)", full_t),
            ("sandboxed, no scratch tmpfs", no_tmpfs_t),
            ("sandboxed, no tmpfs, network allowed", network_t),
            ("no pool (before), all protections", unpooled_t),
            ("own binary, all protections", own_t),
            ("own binary, no pool", unpooled_own_t),
        ] {
            println!(
                "  {name:<37} {:8.3} ms  (+{:.3} ms, {:.1}x)",
                ms(t),
                ms(t.saturating_sub(plain_t)),
                t.as_secs_f64() / plain_t.as_secs_f64()
            );
        }
        let added = full_t.saturating_sub(plain_t);
        println!(
            "  added by the sandbox: {:.3} ms (target <= 1 ms: {})",
            ms(added),
            if added <= Duration::from_millis(1) {
                "met"
            } else {
                "missed"
            }
        );
    }
    if let Some(p) = protections {
        println!("  protections: {}", p.summary());
    }
}
