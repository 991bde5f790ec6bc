//! The pod labeler hook in Rust, Python and TypeScript inside Operon's sandbox, against
//! the shell-operator model (a process per run: `bash` + `jq`, and `python3`), in one run.
//!
//! For each component: its size, the time to compile it and to load it from the engine's
//! compiled-module cache, and the cost of one event (a fresh store, instantiation from
//! the pre-initialised snapshot, `handle` on one Added pod that gets a patch and a metric,
//! drop), and the memory one live instance holds (linear memory and tables after an
//! event). For the shell-operator model: the cost of one event run the way
//! shell-operator runs hooks (binding contexts written to a file, the hook forked with the
//! file paths in its environment, the patch and metrics files read back), and the peak
//! resident memory of that process. It prints each cost as a
//! ratio of the Rust guest's and the Python hook in Operon against the Python hook run
//! per process (the goal: at least 20x).
//!
//! Run with `cargo bench -p operon-tests --bench sdk_languages`; the Python and
//! TypeScript guests are skipped when their tools are missing (see `.ci/setup`).

use operon::model::{
    BindingContext, BindingType, HookInput, ObjectAndFilter, RunnerContext, WatchEvent,
};
use operon::sandbox::{CallLimits, HookModule, Sandbox, SandboxConfig};
use operon_tests::sdk_guests::{python_pod_labeler, repo, typescript_pod_labeler};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

operon::binary_allocator!();

/// Events per measurement; enough for a stable mean, few enough for the slow models.
const EVENTS: u32 = 200;
/// Runs per measurement of the process-per-run models.
const PROCESS_RUNS: u32 = 50;

fn pod() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "bench", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    })
}

fn event_input() -> HookInput {
    let object = ObjectAndFilter {
        object: Some(pod().to_string().into()),
        filter_result: Some(pod()["metadata"]["labels"].to_string().into()),
    };
    HookInput {
        context: RunnerContext::new("bench", Duration::from_secs(10)),
        binding_contexts: vec![BindingContext {
            binding: "pods".to_owned(),
            type_: BindingType::Event,
            group: None,
            watch_event: Some(WatchEvent::Added),
            object: Some(object),
            objects: Vec::new(),
            snapshots: Vec::new(),
            review: None,
        }],
    }
}

fn sandbox(cache: &Path) -> Sandbox {
    Sandbox::new(SandboxConfig {
        cache_dir: Some(cache.to_owned()),
        ..SandboxConfig::default()
    })
    .expect("sandbox")
}

fn limits() -> CallLimits {
    CallLimits {
        timeout: Duration::from_secs(10),
        ..CallLimits::default()
    }
}

/// What one component costs: (size, compile, cache load, per event).
struct Measured {
    size: u64,
    compile: Duration,
    cache_load: Duration,
    per_event: Duration,
    /// Linear memory and tables one live instance holds after an event.
    memory: u64,
}

fn measure(runtime: &tokio::runtime::Runtime, path: &Path) -> Measured {
    let cache = tempfile::tempdir().unwrap();
    let started = Instant::now();
    sandbox(cache.path()).load_hook_file(path).expect("loads");
    let compile = started.elapsed();
    let warm = sandbox(cache.path());
    let started = Instant::now();
    let module: HookModule = warm.load_hook_file(path).expect("loads from the cache");
    let cache_load = started.elapsed();

    let limits = limits();
    let call = || {
        let report = runtime.block_on(warm.handle_hook(&module, &event_input(), &limits));
        report.outcome.expect("handle succeeds");
        assert_eq!(report.patches.len(), 1, "one patch per event");
        report.memory_bytes
    };
    let memory = call();
    let started = Instant::now();
    for _ in 0..EVENTS {
        call();
    }
    Measured {
        size: std::fs::metadata(path).unwrap().len(),
        compile,
        cache_load,
        per_event: started.elapsed() / EVENTS,
        memory,
    }
}

/// One event through a hook run the shell-operator way: `program` with `args`, contexts
/// in a file, outputs read back.
fn per_process_run(program: &str, args: &[&str]) -> Option<(Duration, u64)> {
    if Command::new(program).arg("--version").output().is_err() {
        eprintln!("skipping {program}: not installed");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let contexts = serde_json::json!([{
        "binding": "pods", "type": "Event", "watchEvent": "Added",
        "object": pod(), "filterResult": pod()["metadata"]["labels"],
    }]);
    let context_path = dir.path().join("context.json");
    std::fs::write(&context_path, contexts.to_string()).unwrap();
    let run = || {
        let patches = dir.path().join("patches");
        let metrics = dir.path().join("metrics");
        std::fs::write(&patches, "").unwrap();
        std::fs::write(&metrics, "").unwrap();
        let out = Command::new(program)
            .args(args)
            .env("BINDING_CONTEXT_PATH", &context_path)
            .env("KUBERNETES_PATCH_PATH", &patches)
            .env("METRICS_PATH", &metrics)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let written = std::fs::read_to_string(&patches).unwrap();
        assert_eq!(written.lines().count(), 1, "one patch per event");
    };
    run();
    let started = Instant::now();
    for _ in 0..PROCESS_RUNS {
        run();
    }
    let per_run = started.elapsed() / PROCESS_RUNS;
    let memory = process_memory(program, args, &context_path, dir.path()).unwrap_or(0);
    Some((per_run, memory))
}

/// The peak resident memory of one run of `program` with `args` as shell-operator
/// starts it (contexts in a file), as GNU time reports it; `None` without it. (A
/// wrapper in Python would count the interpreter it forks from: Linux keeps the peak of
/// the memory a process had before its exec.)
fn process_memory(program: &str, args: &[&str], context: &Path, dir: &Path) -> Option<u64> {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M", program])
        .args(args)
        .env("BINDING_CONTEXT_PATH", context)
        .env("KUBERNETES_PATCH_PATH", dir.join("patches"))
        .env("METRICS_PATH", dir.join("metrics"))
        .output()
        .ok()
        .filter(|out| out.status.success())?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kib: u64 = stderr.lines().last()?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// The real `python3` binary: version managers put a shell script named `python3` first
/// on the PATH (pyenv's shim costs ~30 ms a run), which shell-operator's image would not.
fn python_interpreter() -> String {
    Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "python3".to_owned())
}

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1e3)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let guests = [
        ("Rust", Some(Path::new(operon_tests::POD_LABELER))),
        ("Python", python_pod_labeler()),
        ("TypeScript", typescript_pod_labeler()),
    ];
    println!("pod labeler, one Added pod per event, {EVENTS} events per component");
    println!(
        "{:<34} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "hook", "size", "compile", "cache load", "per event", "memory"
    );
    let mut per_event = Vec::new();
    for (language, path) in guests {
        let Some(path) = path else { continue };
        let measured = measure(&runtime, path);
        println!(
            "{:<34} {:>7.1} MB {:>12} {:>12} {:>12} {:>9.1} MB",
            format!("{language} component in Operon"),
            measured.size as f64 / 1e6,
            ms(measured.compile),
            ms(measured.cache_load),
            ms(measured.per_event),
            measured.memory as f64 / 1e6,
        );
        per_event.push((format!("{language} in Operon"), measured.per_event));
    }
    let bash = repo().join("operations/fixtures/shell-hooks/pod-labeler.sh");
    let python = repo().join("operations/pod-labeler-py/shell_operator_hook.py");
    for (name, program, script) in [
        ("bash + jq, process per run", "bash".to_owned(), bash),
        ("python3, process per run", python_interpreter(), python),
    ] {
        if let Some((cost, memory)) = per_process_run(&program, &[script.to_str().unwrap()]) {
            println!(
                "{name:<34} {:>10} {:>12} {:>12} {:>12} {:>9.1} MB",
                "",
                "",
                "",
                ms(cost),
                memory as f64 / 1e6
            );
            per_event.push((name.to_owned(), cost));
        }
    }
    let find = |name: &str| per_event.iter().find(|(n, _)| n == name).map(|(_, d)| *d);
    if let Some(rust) = find("Rust in Operon") {
        println!("\nper event, relative to the Rust guest in Operon:");
        for (name, cost) in &per_event {
            println!(
                "  {name:<32} {:>8.1}x",
                cost.as_secs_f64() / rust.as_secs_f64()
            );
        }
    }
    if let (Some(in_operon), Some(per_process)) =
        (find("Python in Operon"), find("python3, process per run"))
    {
        let speedup = per_process.as_secs_f64() / in_operon.as_secs_f64();
        println!(
            "\nPython hook: {speedup:.1}x faster per event in Operon than as a process per run \
             (goal: at least 20x)"
        );
    }
}
