//! The local tools end to end, process start included, as a user runs them: `operon run`
//! of the node-diagnosis example (compiled modules cached, and cold: an empty cache),
//! and `operon hook test` of the pod labeler, the shell-operator hook and its wasm twin,
//! over a Synchronization, an event and a schedule. Beside them, in the same run,
//! `operon --version`: the cost of starting the binary at all.
//!
//! `cargo bench -p operon-engine --bench cli_end_to_end`. Prints the median and p90 of
//! each, and each median's ratio to the start-up baseline. No goal yet: these are the
//! numbers a newcomer feels.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const ROUNDS: usize = 15;

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
        .display()
        .to_string()
}

/// Runs `operon ARGS` with `cache` as its module cache; panics if it fails.
fn operon(args: &[String], cache: &Path) -> Duration {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(args)
        .env("OPERON_CACHE_DIR", cache)
        .output()
        .expect("operon runs");
    let elapsed = started.elapsed();
    assert!(
        out.status.success(),
        "operon {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    elapsed
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Measured {
    name: &'static str,
    median: Duration,
    p90: Duration,
}

fn measure(name: &'static str, mut run: impl FnMut() -> Duration) -> Measured {
    run(); // warm the page cache and, where it applies, the module cache
    let mut samples: Vec<Duration> = (0..ROUNDS).map(|_| run()).collect();
    samples.sort();
    Measured {
        name,
        median: samples[ROUNDS / 2],
        p90: samples[ROUNDS * 9 / 10],
    }
}

fn main() {
    let guests: PathBuf = Path::new(operon_tests::DISK_PRESSURE)
        .parent()
        .expect("the guests' directory")
        .to_owned();
    let cache = tempfile::tempdir().expect("a temp dir");
    let example = repo("operations/examples/node-diagnosis");
    let run_args: Vec<String> = [
        "run",
        &example,
        "--modules",
        &guests.display().to_string(),
        "--output",
        "json",
    ]
    .map(str::to_owned)
    .to_vec();
    let hook_args = |hook: &str| -> Vec<String> {
        [
            "hook".to_owned(),
            "test".to_owned(),
            hook.to_owned(),
            "--objects".to_owned(),
            repo("operations/examples/hooks/pods.yaml"),
            "--event".to_owned(),
            format!("added:{}", repo("operations/examples/hooks/new-pod.yaml")),
            "--schedule".to_owned(),
            "resync".to_owned(),
            "-o".to_owned(),
            "json".to_owned(),
        ]
        .to_vec()
    };
    let shell_hook = hook_args(&repo("operations/fixtures/shell-hooks/pod-labeler.sh"));
    let wasm_hook = hook_args(operon_tests::POD_LABELER);
    let version = vec!["--version".to_owned()];

    let results = [
        measure("operon --version (start-up baseline)", || {
            operon(&version, cache.path())
        }),
        measure("operon run node-diagnosis (modules cached)", || {
            operon(&run_args, cache.path())
        }),
        measure("operon run node-diagnosis (empty module cache)", || {
            let cold = tempfile::tempdir().expect("a temp dir");
            operon(&run_args, cold.path())
        }),
        measure("operon hook test pod-labeler.sh (shell)", || {
            operon(&shell_hook, cache.path())
        }),
        measure("operon hook test pod_labeler.wasm (cached)", || {
            operon(&wasm_hook, cache.path())
        }),
    ];
    let baseline = results[0].median;
    println!(
        "{ROUNDS} rounds each after one warm-up; medians and p90, ratio to the start-up baseline's median"
    );
    for m in &results {
        println!(
            "{:<50} median {:>8.1} ms  p90 {:>8.1} ms  {:>6.1}x",
            m.name,
            ms(m.median),
            ms(m.p90),
            m.median.as_secs_f64() / baseline.as_secs_f64()
        );
    }
}
