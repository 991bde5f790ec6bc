//! Events per second through the whole hook loop: the local cluster emits a watch
//! event → the engine filters it and queues a task → the hook runs → its patch is
//! applied to the cluster (which emits the next event) and its metric is recorded.
//!
//! The measured hook is `fixture-annotator` (wasm): for every pod event it reads the
//! object and submits one merge patch (an annotation) and one counter increment; its jq
//! filter is `.metadata.labels`, so the Modified event its own patch causes is dropped:
//! one run per event. `pod-labeler` is measured too: its patch adds a label, which
//! changes its filter result, so each pod makes two runs. Events are fed one at a time
//! and drained before the next one, so no two events are merged into one run.
//!
//! The burst row feeds the annotator's events faster than it runs: [`BURST`] new pods
//! at once, then waits until all are handled. The queue that fell behind hands the hook
//! several binding contexts in one run, as shell-operator combines them; the row
//! reports the average contexts per run and checks that the hook saw every event (one
//! context and one patch per pod, every pod annotated).
//!
//! The annotator scenario also runs, in the same process, with a bash + jq twin executed
//! the shell-operator way: binding contexts written to a temp file, `bash` forked with
//! the file paths in its environment, the patch and metrics files read back. No
//! sandbox, as in shell-operator.
//!
//! The baseline, measured in the same run, is a bare call of the annotator with one
//! event's context (`Sandbox::handle_hook`): what the loop costs beyond it is the
//! engine's and the local cluster's. The annotator's loop and the baseline run in five
//! alternating rounds; the ratio reported is the median of the rounds' ratios.
//!
//! Traces: each round also runs the annotator's loop under the subscriber `operon serve`
//! installs (info logs) with trace export off, as it is by default, and with the spans
//! made but none sampled (`--otlp-sampling-ratio 0`, so nothing leaves the process);
//! the ratios to the round's loop with no subscriber are reported, medians of the rounds.
//!
//! Run with `cargo bench -p operon-tests --bench hook_events`.

use futures::future::BoxFuture;
use operon::cluster::local::LocalCluster;
use operon::hooks::HookError;
use operon::hooks::HookRun;
use operon::hooks::config;
use operon::hooks::engine::{Engine, LoadedHook};
use operon::hooks::{Hook, WasmHook};
use operon::metrics::Metrics;
use operon::model::{HookConfig, HookInput, HookOutput, WatchEvent};
use operon::sandbox::{CallLimits, Sandbox, SandboxConfig};
use operon::shell_operator;
use operon::telemetry::{LogFormat, OtlpSettings, Protocol, Telemetry};
use operon_tests::bench::median;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

// The loop's time is much of it allocating and freeing JSON trees.
operon::binary_allocator!();

fn pod(i: usize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": format!("pod-{i}"), "namespace": "bench", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    })
}

/// Feeds `events` new pods one at a time; returns (elapsed, runs, patches applied).
/// Every pod must end up with the field at `applied` (a JSON pointer) set by a patch.
async fn scenario(hook: Arc<dyn Hook>, events: usize, applied: &str) -> (Duration, usize, usize) {
    let (elapsed, runs, patches, _) = feed(hook, events, 1, applied).await;
    (elapsed, runs, patches)
}

/// Feeds `events` new pods `burst` at a time, waiting after each burst until the
/// engine handled it; returns (elapsed, runs, patches, binding contexts the hook saw).
/// Each run must see one context per event, and make one patch.
async fn bursts(
    hook: Arc<dyn Hook>,
    events: usize,
    burst: usize,
    applied: &str,
) -> (Duration, usize, usize, usize) {
    let fed = feed(hook, events, burst, applied).await;
    let (_, _, patches, contexts) = fed;
    assert_eq!(contexts, events, "the hook saw every event");
    assert_eq!(patches, events, "one patch per event");
    fed
}

/// Feeds `events` new pods `burst` at a time, waiting after each burst until the
/// engine handled it; returns (elapsed, runs, patches applied, binding contexts the
/// hook saw). Every pod must end up with the field at `applied` (a JSON pointer) set
/// by a patch.
async fn feed(
    hook: Arc<dyn Hook>,
    events: usize,
    burst: usize,
    applied: &str,
) -> (Duration, usize, usize, usize) {
    let cluster = Arc::new(LocalCluster::new());
    let raw = hook.configure().await.expect("configure");
    let config = config::validate(hook.name(), &raw, &config::any_kind).expect("valid config");
    let metrics = Arc::new(Metrics::new().unwrap());
    let engine = Engine::new(vec![LoadedHook { hook, config }], cluster.clone(), metrics);
    engine.start().await.unwrap();
    engine.drain(|_| {}).await;
    let (mut runs, mut patches, mut contexts) = (0, 0, 0);
    // Built before the clock starts, as the baseline's input is: making the JSON of a
    // new Pod is the test's work, not the loop's.
    let mut chunks: Vec<Vec<serde_json::Value>> = Vec::new();
    for i in (0..events).step_by(burst) {
        chunks.push((i..(i + burst).min(events)).map(pod).collect());
    }
    let started = Instant::now();
    for chunk in chunks {
        for pod in chunk {
            cluster.apply_watch_event(WatchEvent::Added, pod).unwrap();
        }
        engine
            .drain(|r| {
                assert!(!r.failed, "{:?} {:?}", r.run.outcome, r.apply_error);
                runs += 1;
                patches += r.run.patches.len();
                contexts += r.contexts.len();
            })
            .await;
    }
    let elapsed = started.elapsed();
    let patched = cluster
        .objects()
        .iter()
        .filter(|o| o.pointer(applied).is_some())
        .count();
    assert_eq!(patched, events, "every pod patched");
    (elapsed, runs, patches, contexts)
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
    let wasm = |name: &str, path: &str| -> Arc<dyn Hook> {
        let module = sandbox.load_hook_file(path.as_ref()).unwrap();
        Arc::new(WasmHook::new(
            name.to_owned(),
            sandbox.clone(),
            module,
            CallLimits::default(),
        ))
    };
    const ANNOTATION: &str = "/metadata/annotations/operon.dev~1seen-version";
    const LABEL: &str = "/metadata/labels/operon.dev~1seen";
    let annotator = wasm("annotator", operon_tests::ANNOTATOR);
    let labeler = wasm("pod-labeler", operon_tests::POD_LABELER);
    // Warm up (page in the pool slots, the jq cache...).
    runtime.block_on(scenario(annotator.clone(), 500, ANNOTATION));
    // Rounds of the loop and its baseline, one after the other, so that a busy moment
    // of a shared machine weighs on both sides of one round; the medians are reported.
    let mut rates = Vec::new();
    let mut bares = Vec::new();
    let mut ratios = Vec::new();
    let mut off_ratios = Vec::new();
    let mut unsampled_ratios = Vec::new();
    let mut burst_rates = Vec::new();
    let mut burst_ratios = Vec::new();
    let mut burst_contexts = Vec::new();
    for round in 1..=ROUNDS {
        // Made first: a new dispatcher recomputes the callsites' interest and the
        // global level without the one of the last round's traced run, dropped by now.
        let (off, _) = subscriber(None);
        let rate = report(
            &format!("wasm hook (annotator, 1 run/event), round {round}"),
            20_000,
            runtime.block_on(scenario(annotator.clone(), 20_000, ANNOTATION)),
        );
        let off_rate = tracing::dispatcher::with_default(&off, || {
            report(
                "  same, log subscriber, traces off",
                20_000,
                runtime.block_on(scenario(annotator.clone(), 20_000, ANNOTATION)),
            )
        });
        off_ratios.push(rate / off_rate);
        let unsampled = OtlpSettings {
            endpoint: "http://127.0.0.1:9".to_owned(),
            protocol: Protocol::Grpc,
            sampling_ratio: 0.0,
        };
        let (traced, telemetry) = subscriber(Some(&unsampled));
        let traced_rate = tracing::dispatcher::with_default(&traced, || {
            report(
                "  same, spans made, none sampled",
                20_000,
                runtime.block_on(scenario(annotator.clone(), 20_000, ANNOTATION)),
            )
        });
        telemetry.shutdown();
        drop(traced);
        unsampled_ratios.push(rate / traced_rate);
        let bare = runtime.block_on(bare_call(&sandbox, ANNOTATOR_CALLS));
        println!(
            "{:<34} {ANNOTATOR_CALLS:>7} calls {:>40.1} µs/call",
            "bare call of the annotator (same input)",
            bare * 1e6
        );
        let (elapsed, runs, patches, contexts) =
            runtime.block_on(bursts(annotator.clone(), 20_000, BURST, ANNOTATION));
        let burst_rate = report(
            &format!("  same, {BURST} events at a time"),
            20_000,
            (elapsed, runs, patches),
        );
        let per_run = contexts as f64 / runs as f64;
        println!("{:<34} {per_run:>7.1} contexts/run", "");
        rates.push(rate);
        bares.push(bare);
        ratios.push(1.0 / rate / bare);
        burst_rates.push(burst_rate);
        burst_ratios.push(1.0 / burst_rate / bare);
        burst_contexts.push(per_run);
    }
    report(
        "wasm hook (pod-labeler, 2 runs/event)",
        20_000,
        runtime.block_on(scenario(labeler, 20_000, LABEL)),
    );
    let wasm_rate = median(&mut rates);
    println!(
        "medians of {ROUNDS} rounds: {:.1} µs/event, bare call {:.1} µs",
        1e6 / wasm_rate,
        median(&mut bares) * 1e6
    );
    println!(
        "hook loop / bare call = {:.2}x (target: within 2x); {wasm_rate:.0} events/s (target: at least 50,000)",
        median(&mut ratios)
    );
    let burst_rate = median(&mut burst_rates);
    println!(
        "{BURST} events at a time: {:.1} µs/event, {burst_rate:.0} events/s, {:.1} contexts/run; per event / bare call = {:.2}x; {:.2}x the events/s of one at a time",
        1e6 / burst_rate,
        median(&mut burst_contexts),
        median(&mut burst_ratios),
        burst_rate / wasm_rate
    );
    println!(
        "traces off (log subscriber, no --otlp-endpoint) / no subscriber = {:.3}x (target: 1.00, nothing measurable); spans made, none sampled / no subscriber = {:.3}x",
        median(&mut off_ratios),
        median(&mut unsampled_ratios)
    );
    if let Some(bash) = bash_hook() {
        let bash_rate = report(
            "bash + jq hook (shell-operator way)",
            200,
            runtime.block_on(scenario(bash, 200, ANNOTATION)),
        );
        println!(
            "wasm / bash = {:.0}x (target: at least 100x)",
            wasm_rate / bash_rate
        );
    }
}

/// The subscriber `operon serve` installs (info logs, to nowhere here), exporting
/// traces with `otlp`.
fn subscriber(otlp: Option<&OtlpSettings>) -> (tracing::Dispatch, Telemetry) {
    operon::telemetry::subscriber(
        tracing_subscriber::EnvFilter::new("info"),
        LogFormat::Text,
        std::io::sink,
        otlp,
    )
    .expect("a subscriber")
}

/// Rounds of the annotator's loop and its baseline.
const ROUNDS: usize = 5;

/// How many events the burst row feeds at once: under the annotator's 10,000 metric
/// operations per run, so no combined run hits a per-run limit.
const BURST: usize = 1_000;

/// How many calls the bare-call baseline makes.
const ANNOTATOR_CALLS: usize = 20_000;

/// The baseline, measured in the same run: the annotator called directly through the
/// sandbox with the context of one pod's Added event (no cluster, queue, snapshot or
/// patch applied); mean seconds per call.
async fn bare_call(sandbox: &Sandbox, calls: usize) -> f64 {
    use operon::hooks::context;
    use operon::model::{RunnerContext, WatchEvent as Kind};
    let module = sandbox
        .load_hook_file(operon_tests::ANNOTATOR.as_ref())
        .unwrap();
    let object = pod(0);
    let labels = [object["metadata"]["labels"].clone()];
    let input = HookInput {
        context: RunnerContext::new("annotator", Duration::from_secs(10)),
        binding_contexts: vec![context::event(
            "pods",
            Kind::Added,
            context::object_and_filter(&object, Some(&labels), true),
            Vec::new(),
        )],
    };
    let limits = CallLimits::default();
    let started = Instant::now();
    for _ in 0..calls {
        let report = sandbox.handle_hook(&module, &input, &limits).await;
        assert!(report.outcome.is_ok(), "{:?}", report.outcome);
        assert_eq!(report.patches.len(), 1);
    }
    started.elapsed().as_secs_f64() / calls as f64
}

/// The bash + jq twin of pod-labeler, run the shell-operator way.
fn bash_hook() -> Option<Arc<dyn Hook>> {
    let has = |p: &str| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if std::env::var_os("OPERON_BENCH_SKIP_BASH").is_some() {
        return None;
    }
    if !has("bash") || !has("jq") {
        println!("bash + jq hook: skipped (bash or jq missing)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("annotator.sh");
    std::fs::write(&script, ANNOTATOR_SH).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    Some(Arc::new(ShellOperatorHook { script, _dir: dir }))
}

/// The bash + jq twin of the annotator.
const ANNOTATOR_SH: &str = r#"#!/usr/bin/env bash
if [[ "${1:-}" == "--config" ]]; then
  echo '{"configVersion":"v1","kubernetes":[{"name":"pods","kind":"Pod","jqFilter":".metadata.labels","executeHookOnSynchronization":false}]}'
  exit 0
fi
jq -c '.[] | .object.metadata | {operation: "MergePatch", kind: "Pod", namespace, name,
  mergePatch: {metadata: {annotations: {"operon.dev/seen-version": .resourceVersion}}}}' \
  "$BINDING_CONTEXT_PATH" >> "$KUBERNETES_PATCH_PATH"
jq -c '.[] | {name: "pods_annotated_total", action: "add", value: 1}' \
  "$BINDING_CONTEXT_PATH" >> "$METRICS_PATH"
"#;

/// A hook run as shell-operator runs one: fork/exec with temp files.
struct ShellOperatorHook {
    script: PathBuf,
    /// Keeps the script's directory alive.
    _dir: tempfile::TempDir,
}

impl Hook for ShellOperatorHook {
    fn name(&self) -> &str {
        "annotator.sh"
    }

    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async move {
            let out = Command::new(&self.script)
                .arg("--config")
                .output()
                .map_err(|e| HookError::Run(e.to_string()))?;
            let text = String::from_utf8_lossy(&out.stdout);
            shell_operator::config::parse(self.name(), &text)
                .map_err(|p| HookError::Run(format!("{p:?}")))
        })
    }

    fn handle(&self, input: HookInput, _timeout: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        Box::pin(async move {
            let started = Instant::now();
            let dir = tempfile::tempdir().unwrap();
            let path = |name: &str| dir.path().join(name);
            std::fs::write(
                path("context.json"),
                shell_operator::context::to_json(&input.binding_contexts).to_string(),
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
            let run = HookRun {
                outcome,
                patches: shell_operator::patches::parse(&read("patch")).unwrap(),
                metrics: shell_operator::metrics::parse(&read("metrics")).unwrap(),
                logs: vec![],
                stdout: String::new(),
                stderr: String::new(),
                elapsed: started.elapsed(),
            };
            (run, input)
        })
    }
}
