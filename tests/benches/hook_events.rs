//! Events per second through the whole hook loop: the local cluster emits a watch
//! event → the engine filters it and queues a task → the hook runs → its patch is
//! applied to the cluster (which emits the next event) and its metric is recorded.
//!
//! The hook is `pod-labeler` (wasm): for every pod without the `operon.dev/seen` label
//! it submits one merge patch and adds one to a counter. Each new pod therefore makes
//! two runs: the Added event (patch + metric) and the Modified event its own patch
//! causes (the jq filter `.metadata.labels` changed; nothing to do). Events are fed one
//! at a time and drained before the next one, so no two events are merged into one run.
//!
//! The same scenario runs in the same process with the bash + jq twin of the hook
//! (`operations/fixtures/shell-hooks/pod-labeler.sh`) executed the shell-operator way:
//! binding contexts written to a temp file, `bash` forked with the file paths in its
//! environment, the patch and metrics files read back. No sandbox, as in
//! shell-operator.
//!
//! Run with `cargo bench -p operon-tests --bench hook_events`.

use operon::cluster::local::LocalCluster;
use operon::hooks::HookError;
use operon::hooks::HookRun;
use operon::hooks::config;
use operon::hooks::context;
use operon::hooks::engine::{Engine, LoadedHook};
use operon::hooks::{Hook, WasmHook};
use operon::metrics::Metrics;
use operon::runner::BoxFuture;
use operon::sandbox::{CallLimits, Sandbox, SandboxConfig, WatchEvent};
use operon::sandbox::{HookConfig, HookInput, HookOutput};
use operon::script::files;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn pod(i: usize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": format!("pod-{i}"), "namespace": "bench", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    })
}

/// Feeds `events` new pods one at a time; returns (elapsed, runs, patches applied).
async fn scenario(hook: Arc<dyn Hook>, events: usize) -> (Duration, usize, usize) {
    let cluster = Arc::new(LocalCluster::new());
    let raw = hook.configure().await.expect("configure");
    let config = config::validate(hook.name(), &raw, &config::any_kind).expect("valid config");
    let metrics = Arc::new(Metrics::new().unwrap());
    let engine = Engine::new(vec![LoadedHook { hook, config }], cluster.clone(), metrics);
    engine.start().await.unwrap();
    engine.drain(|_| {}).await;
    let mut runs = 0;
    let mut patches = 0;
    let started = Instant::now();
    for i in 0..events {
        cluster
            .apply_watch_event(WatchEvent::Added, pod(i))
            .unwrap();
        engine
            .drain(|r| {
                assert!(!r.failed, "{:?} {:?}", r.run.outcome, r.apply_error);
                runs += 1;
                patches += r.run.patches.len();
            })
            .await;
    }
    let elapsed = started.elapsed();
    let labelled = cluster
        .objects()
        .iter()
        .filter(|o| o.pointer("/metadata/labels/operon.dev~1seen").is_some())
        .count();
    assert_eq!(labelled, events, "every pod labelled by an applied patch");
    (elapsed, runs, patches)
}

fn report(name: &str, events: usize, (elapsed, runs, patches): (Duration, usize, usize)) -> f64 {
    let rate = events as f64 / elapsed.as_secs_f64();
    println!(
        "{name:<34} {events:>7} events {runs:>7} runs {patches:>7} patches  {:>9.3} s  {rate:>10.0} events/s  {:>8.1} µs/event",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / events as f64
    );
    rate
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let module = sandbox
        .load_hook_file(operon_tests::POD_LABELER.as_ref())
        .unwrap();
    let wasm: Arc<dyn Hook> = Arc::new(WasmHook::new(
        "pod-labeler".to_owned(),
        sandbox,
        module,
        CallLimits::default(),
    ));
    // Warm up (page in the pool slots, the jq cache...).
    runtime.block_on(scenario(wasm.clone(), 200));
    let wasm_rate = report(
        "wasm hook (pod-labeler)",
        20_000,
        runtime.block_on(scenario(wasm, 20_000)),
    );
    println!("target: at least 20,000 events/s for the wasm hook → {wasm_rate:.0}");
    if let Some(bash) = bash_hook() {
        let bash_rate = report(
            "bash + jq hook (shell-operator way)",
            200,
            runtime.block_on(scenario(bash, 200)),
        );
        println!(
            "wasm / bash = {:.0}x (target: at least 100x)",
            wasm_rate / bash_rate
        );
    }
}

/// The bash + jq twin of pod-labeler, run the shell-operator way.
fn bash_hook() -> Option<Arc<dyn Hook>> {
    let has = |p: &str| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !has("bash") || !has("jq") {
        println!("bash + jq hook: skipped (bash or jq missing)");
        return None;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../operations/fixtures/shell-hooks/pod-labeler.sh");
    Some(Arc::new(ShellOperatorHook { script }))
}

/// A hook run as shell-operator runs one: fork/exec with temp files.
struct ShellOperatorHook {
    script: PathBuf,
}

impl Hook for ShellOperatorHook {
    fn name(&self) -> &str {
        "pod-labeler.sh"
    }

    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async move {
            let out = Command::new(&self.script)
                .arg("--config")
                .output()
                .map_err(|e| HookError::Run(e.to_string()))?;
            let text = String::from_utf8_lossy(&out.stdout);
            config::parse_shell_operator(self.name(), &text)
                .map_err(|p| HookError::Run(format!("{p:?}")))
        })
    }

    fn handle<'a>(&'a self, input: &'a HookInput, _timeout: Duration) -> BoxFuture<'a, HookRun> {
        Box::pin(async move {
            let started = Instant::now();
            let dir = tempfile::tempdir().unwrap();
            let path = |name: &str| dir.path().join(name);
            std::fs::write(
                path("context.json"),
                context::to_json(&input.binding_contexts).to_string(),
            )
            .unwrap();
            for file in ["patch", "metrics", "validating", "conversion"] {
                std::fs::write(path(file), "").unwrap();
            }
            let status = Command::new(&self.script)
                .env("BINDING_CONTEXT_PATH", path("context.json"))
                .env("KUBERNETES_PATCH_PATH", path("patch"))
                .env("METRICS_PATH", path("metrics"))
                .env("VALIDATING_RESPONSE_PATH", path("validating"))
                .env("CONVERSION_RESPONSE_PATH", path("conversion"))
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap();
            let read = |name: &str| std::fs::read_to_string(path(name)).unwrap_or_default();
            let outcome = if status.success() {
                Ok(HookOutput {
                    validating: None,
                    conversion: None,
                })
            } else {
                Err(HookError::Run(format!("{status}")))
            };
            HookRun {
                outcome,
                patches: files::parse_patches(&read("patch")).unwrap(),
                metrics: files::parse_metrics(&read("metrics")).unwrap(),
                logs: vec![],
                stdout: String::new(),
                stderr: String::new(),
                elapsed: started.elapsed(),
            }
        })
    }
}
