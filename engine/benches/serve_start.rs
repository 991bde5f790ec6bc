//! `operon serve` from start to Ready with 20 hooks: 10 copies of the pod labeler as a
//! wasm component and 10 of its shell twin, over the local cluster (two Pods), so that
//! what is timed is Operon's own start: discovering the hooks, compiling or loading the
//! modules (the compiled-module cache warm after the first round), asking each shell
//! hook for its configuration in the script sandbox, listing and watching each binding,
//! and the Synchronization runs readiness waits for. The 20 hooks start with their
//! configurations asked one after another, as before they were asked at once (the
//! baseline), and as `operon serve` starts them, in turn, so both see the same load of
//! the machine; then their configurations alone, asked 1 to 8 at once. Beside them the
//! same start with one wasm hook: the fixed cost of a start. And the floor under the
//! 20-hook start: the ten shell hooks' Synchronization runs alone, as plain `bash` with
//! the context Operon would give them (no engine, no sandbox), one after another, with
//! the CPU time they take: the start cannot be shorter than that CPU time over the
//! machine's CPUs, however the runs were ordered.
//!
//! `cargo bench -p operon-engine --bench serve_start`. This binary is its own script
//! sandbox launcher, as the `operon` binary is. Prints the median and p90 of each, and
//! how much faster the start is than its baseline.

use operon::cluster::local::LocalCluster;
use operon::hooks::load::{self, HookLoader};
use operon::sandbox::{CallLimits, Sandbox, SandboxConfig};
use operon::serve::{Coordination, ServeOptions};
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

operon::binary_allocator!();

const ROUNDS: usize = 7;

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

async fn ready(address: SocketAddr) -> bool {
    let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
        return false;
    };
    if stream
        .write_all(b"GET /readyz HTTP/1.0\r\nHost: operon\r\n\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200")
}

/// A hooks directory with `wasm` wasm hooks and `shell` shell hooks, the local cluster
/// with two Pods, and a loader asking at most `discovery` hooks for their configuration
/// at once (`None`: as many as `operon serve` does).
struct Setup {
    dir: tempfile::TempDir,
    hooks: std::path::PathBuf,
    cluster: Arc<LocalCluster>,
    loader: HookLoader,
}

impl Setup {
    fn new(wasm: usize, shell: usize, discovery: Option<NonZeroUsize>) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let hooks = dir.path().join("hooks");
        std::fs::create_dir(&hooks).expect("the hooks directory");
        for i in 0..wasm {
            std::fs::copy(
                operon_tests::POD_LABELER,
                hooks.join(format!("labeler-{i:02}.wasm")),
            )
            .expect("a wasm hook");
        }
        for i in 0..shell {
            let path = hooks.join(format!("labeler-{i:02}.sh"));
            std::fs::copy(
                repo("operations/fixtures/shell-hooks/pod-labeler.sh"),
                &path,
            )
            .expect("a shell hook");
        }
        let cluster = Arc::new(LocalCluster::new());
        cluster
            .load_file(repo("operations/examples/hooks/pods.yaml"))
            .expect("the pods");
        let sandbox = Sandbox::new(SandboxConfig {
            cache_dir: Some(operon_tests::test_cache_dir()),
            ..SandboxConfig::default()
        })
        .expect("a sandbox");
        let mut loader = HookLoader::new(sandbox, CallLimits::default(), false);
        if let Some(limit) = discovery {
            loader = loader.with_discovery(limit);
        }
        Self {
            dir,
            hooks,
            cluster,
            loader,
        }
    }
}

/// Discovering and configuring the hooks alone, as `operon serve` does first.
async fn configure(wasm: usize, shell: usize, discovery: Option<NonZeroUsize>) -> Duration {
    let Setup {
        hooks,
        cluster,
        loader,
        dir: _dir,
    } = Setup::new(wasm, shell, discovery);
    let started = Instant::now();
    let jobs = (loader.hooks_in(&hooks).expect("the hooks").into_iter())
        .map(|hook| load::configure(hook, cluster.as_ref()));
    load::in_order(jobs, loader.discovery(), |_| {})
        .await
        .expect("valid configurations");
    started.elapsed()
}

/// One start of `operon serve` to Ready (see [`Setup`]).
async fn start(wasm: usize, shell: usize, discovery: Option<NonZeroUsize>) -> Duration {
    let Setup {
        dir,
        hooks,
        cluster,
        loader,
    } = Setup::new(wasm, shell, discovery);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = listener.local_addr().expect("an address");
    drop(listener);
    let options = ServeOptions {
        hooks_dir: hooks,
        debug_socket: None,
        grace: Duration::from_secs(5),
        ..ServeOptions::new(dir.path().to_owned(), address)
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let started = Instant::now();
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        operon::serve::run(options, &loader, cluster, Coordination::default(), shutdown).await
    });
    let deadline = started + Duration::from_secs(120);
    while !ready(address).await {
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = started.elapsed();
    let _ = stop.send(());
    server
        .await
        .expect("serve ends")
        .expect("serve ends cleanly");
    elapsed
}

/// The ten shell hooks' Synchronization runs as plain `bash`, one after another, with
/// the context of the local cluster's two Pods: the work `operon serve` cannot avoid.
/// Returns the wall time and the CPU time the runs took (user and system, children).
fn shell_floor(shell: usize) -> (Duration, Duration) {
    let Setup {
        dir,
        hooks,
        cluster,
        ..
    } = Setup::new(0, shell, None);
    let objects: Vec<serde_json::Value> = (cluster.objects().into_iter())
        .filter(|o| o["kind"] == "Pod")
        .map(|o| serde_json::json!({"filterResult": o["metadata"]["labels"], "object": o}))
        .collect();
    let context = dir.path().join("context.json");
    let text =
        serde_json::json!([{"binding": "pods", "type": "Synchronization", "objects": objects}]);
    std::fs::write(&context, text.to_string()).expect("the context");
    let mut scripts: Vec<_> = std::fs::read_dir(&hooks)
        .expect("the hooks")
        .map(|e| e.expect("an entry").path())
        .collect();
    scripts.sort();
    let cpu_before = children_cpu();
    let started = Instant::now();
    for script in scripts {
        let status = std::process::Command::new("bash")
            .arg(&script)
            .env("BINDING_CONTEXT_PATH", &context)
            .env("KUBERNETES_PATCH_PATH", dir.path().join("patches"))
            .env("METRICS_PATH", dir.path().join("metrics"))
            .stdout(std::process::Stdio::null())
            .status()
            .expect("bash runs");
        assert!(status.success(), "{} failed", script.display());
    }
    (started.elapsed(), children_cpu() - cpu_before)
}

/// The user and system time of this process's waited-for children, from
/// `/proc/self/stat` (in clock ticks of 10 ms).
fn children_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command's closing parenthesis; cutime and cstime are the
    // 16th and 17th of the line, the 14th and 15th after it.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("a command") + 2..]
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[13].parse::<u64>().unwrap_or(0) + fields[14].parse::<u64>().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    operon::script::launcher::run_if_invoked();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let one_at_a_time = Some(NonZeroUsize::MIN);
    runtime.block_on(async {
        start(1, 0, None).await; // warm-up: compiles the module into the cache
        report(
            "operon serve start to Ready, 1 wasm hook (the fixed cost of a start)",
            async || start(1, 0, None).await,
        )
        .await;
        // The baseline and the start as it is, one of each in turn, so that both see the
        // same load of the machine.
        start(10, 10, None).await;
        let mut starts = [Vec::new(), Vec::new()];
        for _ in 0..ROUNDS {
            starts[0].push(start(10, 10, one_at_a_time).await);
            starts[1].push(start(10, 10, None).await);
        }
        let [before, now] = starts.map(|mut samples| {
            samples.sort();
            samples
        });
        let name = "operon serve start to Ready, 20 hooks: 10 wasm, 10 shell";
        print(&format!("{name}, configurations one at a time"), &before);
        print(name, &now);
        println!(
            "configurations asked at once: {:.2}x as fast as one at a time",
            before[ROUNDS / 2].as_secs_f64() / now[ROUNDS / 2].as_secs_f64()
        );
        // The floor: what the ten shell hooks' own Synchronization work costs.
        let (mut walls, mut cpus): (Vec<_>, Vec<_>) = (0..ROUNDS).map(|_| shell_floor(10)).unzip();
        walls.sort();
        cpus.sort();
        print(
            "the 10 shell hooks' Synchronization runs alone, plain bash, in turn",
            &walls,
        );
        print("  their CPU time (user and system)", &cpus);
        let cpus_here = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        println!(
            "20-hook start / the shell hooks' runs alone: {:.2}x; their CPU time over {cpus_here} CPUs, the least any order of them could take: {:.1} ms",
            now[ROUNDS / 2].as_secs_f64() / walls[ROUNDS / 2].as_secs_f64(),
            ms(cpus[ROUNDS / 2]) / cpus_here as f64
        );
        // Where the time of the 20 hooks goes: their configurations alone, asked one
        // at a time, a few at once, and as `operon serve` asks them.
        for limit in [1, 2, 4, 8] {
            let at_once = NonZeroUsize::new(limit);
            report(
                &format!("configurations of the 20 hooks, {limit} at once"),
                async || configure(10, 10, at_once).await,
            )
            .await;
        }
        report(
            "configurations of the 20 hooks, as serve asks them",
            async || configure(10, 10, None).await,
        )
        .await;
    });
}

/// Prints the median and p90 of `ROUNDS` samples of `sample`; returns the median.
async fn report(name: &str, mut sample: impl AsyncFnMut() -> Duration) -> Duration {
    let mut samples = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        samples.push(sample().await);
    }
    samples.sort();
    print(name, &samples);
    samples[ROUNDS / 2]
}

/// Prints the median and p90 of `sorted`.
fn print(name: &str, sorted: &[Duration]) {
    println!(
        "{name:<70} median {:>7.1} ms  p90 {:>7.1} ms",
        ms(sorted[ROUNDS / 2]),
        ms(sorted[ROUNDS * 9 / 10])
    );
}
