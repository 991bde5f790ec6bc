//! Scale run against a real API server (not in CI): many Pods, `operon serve` with three
//! hooks, then churn. Needs `OPERON_SCALE_KUBECONFIG` (the API server harness: Pods
//! need no kubelet, they stay Pending); prints "skipped" without it.
//!
//! `OPERON_SCALE_KUBECONFIG=... cargo bench -p operon-engine --bench scale`
//!
//! It creates `OPERON_SCALE_PODS` Pods (10,000) in `OPERON_SCALE_NAMESPACES` namespaces
//! (100), starts the release `operon` with a hooks directory holding the annotator as
//! wasm (one merge patch per Pod label change, recording the resourceVersion it saw;
//! queue `main`), its bash + jq twin (the same patch under another annotation; queue
//! `shell`, so that the wasm hook does not wait behind it), and a jqFilter-only snapshot
//! hook (`keepFullObjectsInMemory: false`, run each minute by a schedule with the
//! snapshot; queue `snapshots`), and reports:
//! - the time from start to `/readyz` (every binding's Synchronization done), and the
//!   resident memory then;
//! - under `OPERON_SCALE_RATE` label updates per second (100) for
//!   `OPERON_SCALE_SECONDS` (600): the resident memory each minute, and the latency from
//!   an update's answer to the annotation of each hook carrying its resourceVersion
//!   (p50, p99), from a watch of the Pods;
//! - beside them, the floor (an update's own event in the same watch) and where the
//!   hooks' time went: the API server's PATCH latency, Operon's client's (sent to
//!   answered), each hook's watch events from decoded to queued, and each hook's run
//!   time and wait in its queue, from both sides' histograms;
//! - afterwards, every Pod whose last update either hook never recorded (lost events);
//! - the API server's request counts (its `/metrics`) per label update, by verb.
//!
//! `OPERON_SCALE_WRAPPER` starts `operon serve` under a profiler (`heaptrack -o FILE`,
//! which sees only malloc: a build with `--no-default-features`, not the default one
//! on mimalloc);
//! `OPERON_SCALE_BINARY` runs another build of it (the image's, `target/image/operon`).
//! `OPERON_SCALE_SHELL=0` leaves the bash + jq twin out, to see what the wasm hook's
//! latency is when the CPUs do not also run a hundred bash and jq processes a second.
//!
//! The engine's client limits are `--kube-client-qps` / `--kube-client-burst` from
//! `OPERON_SCALE_QPS` (default: three requests per update per second, the two hooks'
//! patches and headroom) and twice that.
//!
//! `OPERON_SCALE_CONFIGMAPS=50000` runs the other row instead: that many small
//! ConfigMaps listed and synchronized (see `configmaps.rs`).

mod configmaps;
mod serve;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;
use serve::{Serve, family_sum, histogram_delta, label_value, quantiles, sample_value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WASM_KEY: &str = "operon.dev/seen-version";
const SHELL_KEY: &str = "operon.dev/seen-version-sh";
/// Where the latency of an update seen by the bench's own watch is kept.
const ECHO: &str = "the update itself";
const GEN_LABEL: &str = "scale.operon.dev/gen";
const PREFIX: &str = "operon-scale";

pub(crate) fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let Some(kubeconfig) = std::env::var_os("OPERON_SCALE_KUBECONFIG").map(PathBuf::from) else {
        println!("scale: skipped (set OPERON_SCALE_KUBECONFIG to an API server's kubeconfig)");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match env_or("OPERON_SCALE_CONFIGMAPS", 0_usize) {
        0 => runtime.block_on(run(&kubeconfig)),
        count => runtime.block_on(configmaps::run(
            &kubeconfig,
            count,
            env_or("OPERON_SCALE_NAMESPACES", 100),
        )),
    }
}

struct Settings {
    pods: usize,
    namespaces: usize,
    rate: u32,
    seconds: u64,
    qps: u32,
    /// Whether the bash + jq twin runs beside the wasm hook.
    shell: bool,
}

pub(crate) async fn client(kubeconfig: &Path) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).expect("the kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a client configuration");
    kube::Client::try_from(config).expect("a client")
}

async fn run(kubeconfig: &Path) {
    let rate: u32 = env_or("OPERON_SCALE_RATE", 100);
    let settings = Settings {
        pods: env_or("OPERON_SCALE_PODS", 10_000),
        namespaces: env_or("OPERON_SCALE_NAMESPACES", 100),
        rate,
        seconds: env_or("OPERON_SCALE_SECONDS", 600),
        qps: env_or("OPERON_SCALE_QPS", rate * 3),
        shell: env_or("OPERON_SCALE_SHELL", 1) != 0,
    };
    let client = client(kubeconfig).await;
    // Fresh namespaces each run: an earlier run's may still be terminating.
    let run_id = std::process::id();
    let namespaces: Vec<String> = (0..settings.namespaces)
        .map(|i| format!("{PREFIX}-{run_id}-{i:03}"))
        .collect();
    let started = Instant::now();
    let pods = create_pods(&client, &namespaces, settings.pods).await;
    println!(
        "{} Pods in {} namespaces created in {:.1} s",
        pods.len(),
        namespaces.len(),
        started.elapsed().as_secs_f64()
    );

    let dir = tempfile::tempdir().expect("a temp dir");
    let hooks = write_hooks(dir.path(), settings.shell);
    let mut serve = Serve::start(kubeconfig, &hooks, dir.path(), settings.qps);
    let synced = serve.wait_ready(&dir.path().join("serve.log")).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss_synced = serve.rss_mib();
    println!(
        "operon serve: start to every Synchronization done (/readyz) {:.2} s (goal < 30 s); resident {:.1} MiB 5 s later (goal < 150 MB)",
        synced.as_secs_f64(),
        rss_synced
    );
    println!(
        "  peak resident so far (the first list included): {:.1} MiB",
        serve.peak_rss_mib()
    );

    let snapshots_synced = serve.snapshot_mib();
    println!(
        "  of which the bindings' snapshots (operon_kube_snapshot_bytes): {snapshots_synced:.1} MiB"
    );
    let (api_before, serve_before) = (apiserver_metrics(&client).await, serve.get("/metrics"));
    let requests_before = requests_by_verb(&api_before);
    let outcome = churn(&client, &pods, &settings, &serve).await;
    let (api_after, serve_after) = (apiserver_metrics(&client).await, serve.get("/metrics"));
    let requests_after = requests_by_verb(&api_after);
    let rss_end = serve.rss_mib();
    println!(
        "resident after {} s of churn: {:.1} MiB ({:+.1}% from after sync; goal: within 10%)",
        settings.seconds,
        rss_end,
        (rss_end / rss_synced - 1.0) * 100.0
    );
    // The hooks' annotations and the API server's managedFields entries make every
    // updated Pod larger: the snapshots that keep whole objects grow with them.
    let snapshots_end = serve.snapshot_mib();
    println!(
        "  the snapshots then: {snapshots_end:.1} MiB ({:+.1} MiB since sync); the rest of the resident size {:+.1} MiB",
        snapshots_end - snapshots_synced,
        (rss_end - snapshots_end) - (rss_synced - snapshots_synced)
    );
    let hooks = [
        ("no hook", ECHO, "the update's own event"),
        ("wasm annotator", WASM_KEY, "its annotation"),
        ("bash + jq twin", SHELL_KEY, "its annotation"),
    ];
    for (hook, key, what) in &hooks[..if settings.shell { 3 } else { 2 }] {
        let mut latencies = outcome.latencies(key);
        latencies.sort();
        println!(
            "{hook:<15} update to {what} in a watch: {} seen, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (goal for wasm: p99 < 50 ms)",
            latencies.len(),
            ms(percentile(&latencies, 0.50)),
            ms(percentile(&latencies, 0.99)),
            ms(latencies.last().copied().unwrap_or_default()),
        );
        println!(
            "  over 100 ms, per 10 s of churn: {}",
            outcome.slow_windows(key, Duration::from_millis(100))
        );
    }
    // Where the time between an update and its annotation goes, from both sides'
    // histograms over the churn (bucket bounds, so "at most").
    let patches = ["verb=\"PATCH\"", "resource=\"pods\""];
    let api_patch = histogram_delta(
        &api_before,
        &api_after,
        "apiserver_request_duration_seconds",
        &patches,
    );
    println!(
        "  API server, PATCH of pods (every one: the load's and the hooks'), server side: {}",
        quantiles(&api_patch)
    );
    let client_patch = histogram_delta(
        &serve_before,
        &serve_after,
        "operon_kubernetes_client_request_latency_seconds",
        &["verb=\"PATCH\""],
    );
    let patch_total = |text: &str, part: &str| {
        family_sum(
            text,
            &format!("operon_kubernetes_client_request_latency_seconds_{part}"),
            "verb=\"PATCH\"",
        )
    };
    let mean_patch = (patch_total(&serve_after, "sum") - patch_total(&serve_before, "sum"))
        / (patch_total(&serve_after, "count") - patch_total(&serve_before, "count")).max(1.0);
    // A queue runs one task at a time and applies a run's patches in order before the
    // next: one patch per label update keeps the wasm hook's queue busy this much.
    println!(
        "  Operon's client, its PATCHes sent to answered (both hooks'): {}, mean {:.1} ms: \
         at {} label updates/s, the wasm hook's queue spends {:.0}% of its time waiting for them",
        quantiles(&client_patch),
        mean_patch * 1e3,
        settings.rate,
        f64::from(settings.rate) * mean_patch * 100.0
    );
    for (hook, file) in &[
        ("wasm annotator", "annotator.wasm"),
        ("bash + jq twin", "annotator.sh"),
    ][..if settings.shell { 2 } else { 1 }]
    {
        // A hook is named by its path, which ends with its file name.
        let label = format!("{file}\"");
        let runs = histogram_delta(
            &serve_before,
            &serve_after,
            "operon_hook_run_seconds",
            &[&label],
        );
        let waited = family_sum(
            &serve_after,
            "operon_task_wait_in_queue_seconds_total",
            &label,
        ) - family_sum(
            &serve_before,
            "operon_task_wait_in_queue_seconds_total",
            &label,
        );
        let count = runs.last().map_or(0.0, |(_, n)| *n);
        println!(
            "  {hook:<15} runs: {count:.0}, run time {}, mean wait in its queue {:.1} ms",
            quantiles(&runs),
            waited / count.max(1.0) * 1e3
        );
        let events = histogram_delta(
            &serve_before,
            &serve_after,
            "operon_kube_event_duration_seconds",
            &[&label],
        );
        println!(
            "  {hook:<15} watch events, decoded to queued: {}",
            quantiles(&events)
        );
    }
    // Every Pod's last update must be handled by both hooks.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let (missed_wasm, missed_shell) = lost(&client, &namespaces, &outcome).await;
    let missed_shell = if settings.shell {
        missed_shell.to_string()
    } else {
        "not run".to_owned()
    };
    println!(
        "Pods whose last update was not recorded 30 s after the churn: wasm {missed_wasm}, shell {missed_shell} (of {} updated)",
        outcome.last.lock().unwrap().len()
    );
    let updates = outcome.updates as f64;
    let mut verbs: Vec<(String, f64)> = requests_after
        .iter()
        .map(|(verb, after)| {
            let before = requests_before.get(verb).copied().unwrap_or_default();
            (verb.clone(), (after - before) / updates)
        })
        .filter(|(_, per)| *per > 0.0)
        .collect();
    verbs.sort_by(|a, b| a.0.cmp(&b.0));
    println!(
        "API server requests per label update ({} updates, the bench's own PATCH included): {}",
        outcome.updates,
        verbs
            .iter()
            .map(|(verb, per)| format!("{verb} {per:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    drop(serve);
    delete_namespaces(&client, &namespaces).await;
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

async fn create_pods(
    client: &kube::Client,
    namespaces: &[String],
    count: usize,
) -> Vec<(String, String)> {
    create_namespaces(client, namespaces).await;
    let pods: Vec<(String, String)> = (0..count)
        .map(|i| {
            (
                namespaces[i % namespaces.len()].clone(),
                format!("pod-{i:05}"),
            )
        })
        .collect();
    futures::stream::iter(pods.clone())
        .map(|(ns, name)| {
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": {"app": "scale", GEN_LABEL: "0"}},
                    "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
                }))
                .expect("a pod");
                // A new namespace's `default` ServiceAccount comes a moment later.
                let mut attempts = 0;
                loop {
                    attempts += 1;
                    match api.create(&PostParams::default(), &pod).await {
                        Ok(_) => return Ok(()),
                        Err(kube::Error::Api(e)) if e.code == 409 => return Ok(()),
                        Err(kube::Error::Api(e))
                            if e.code == 403
                                && e.message.contains("serviceaccount")
                                && attempts < 100 =>
                        {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Err(e) => return Err(format!("creating {ns}/{name}: {e}")),
                    }
                }
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .expect("every Pod created");
    pods
}

pub(crate) async fn create_namespaces(client: &kube::Client, namespaces: &[String]) {
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for ns in namespaces {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).expect("a namespace");
        match ns_api.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("creating namespace {ns}: {e}"),
        }
    }
}

/// Deletes the run's namespaces and waits until they are gone, so that the next run
/// does not meet the deletion of this one's Pods.
pub(crate) async fn delete_namespaces(client: &kube::Client, namespaces: &[String]) {
    let api: Api<Namespace> = Api::all(client.clone());
    for ns in namespaces {
        let _ = api.delete(ns, &Default::default()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    for ns in namespaces {
        while Instant::now() < deadline && matches!(api.get_opt(ns).await, Ok(Some(_))) {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// The hooks directory: the wasm annotator, the snapshot hook, and the bash + jq twin
/// when `shell`.
fn write_hooks(dir: &Path, shell: bool) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let hooks = dir.join("hooks");
    std::fs::create_dir(&hooks).expect("the hooks directory");
    std::fs::copy(operon_tests::ANNOTATOR, hooks.join("annotator.wasm")).expect("the annotator");
    let scripts = [
        (
            "annotator.sh",
            format!(
                r#"#!/usr/bin/env bash
if [[ "${{1:-}}" == "--config" ]]; then
  echo '{{"configVersion":"v1","kubernetes":[{{"name":"pods","kind":"Pod","jqFilter":".metadata.labels","executeHookOnSynchronization":false,"queue":"shell"}}]}}'
  exit 0
fi
jq -c '.[] | select(.type == "Event") | .object.metadata | {{operation: "MergePatch", kind: "Pod", namespace, name,
  mergePatch: {{metadata: {{annotations: {{"{SHELL_KEY}": .resourceVersion}}}}}}}}' \
  "$BINDING_CONTEXT_PATH" >> "$KUBERNETES_PATCH_PATH"
"#
            ),
        ),
        (
            "snapshot.sh",
            r#"#!/usr/bin/env bash
if [[ "${1:-}" == "--config" ]]; then
  echo '{"configVersion":"v1","kubernetes":[{"name":"pods","kind":"Pod","jqFilter":".metadata.labels.app","keepFullObjectsInMemory":false,"executeHookOnEvent":[],"executeHookOnSynchronization":false}],"schedule":[{"name":"count","crontab":"* * * * *","includeSnapshotsFrom":["pods"],"queue":"snapshots"}]}'
  exit 0
fi
jq '.[0].snapshots.pods | length' "$BINDING_CONTEXT_PATH" >&2
"#
            .to_owned(),
        ),
    ];
    for (name, text) in scripts {
        if name == "annotator.sh" && !shell {
            continue;
        }
        let path = hooks.join(name);
        std::fs::write(&path, text).expect("a hook");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    hooks
}

type Key = (String, String);

/// A latency, with when it was seen.
type Seen = (Instant, Duration);

/// What the churn saw.
struct Churn {
    updates: u64,
    /// Each update's resourceVersion → when its answer came.
    sent: Arc<Mutex<HashMap<String, Instant>>>,
    /// Per annotation key, the latencies seen, with when they were.
    seen: Arc<Mutex<HashMap<&'static str, Vec<Seen>>>>,
    /// Each Pod's last update's resourceVersion.
    last: Arc<Mutex<HashMap<Key, String>>>,
    /// When the churn began.
    started: Option<Instant>,
}

impl Churn {
    fn latencies(&self, key: &str) -> Vec<Duration> {
        self.timed(key).into_iter().map(|(_, d)| d).collect()
    }

    fn timed(&self, key: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .get(key)
            .cloned()
            .unwrap_or_default()
    }

    /// How the latencies over `slow` spread over the churn, in 10-second windows from
    /// its start: a few windows holding them all point at stalls, an even spread at
    /// queueing.
    fn slow_windows(&self, key: &str, slow: Duration) -> String {
        let Some(start) = self.started else {
            return String::new();
        };
        let mut windows: Vec<usize> = Vec::new();
        for (at, latency) in self.timed(key) {
            if latency <= slow {
                continue;
            }
            let window = (at.saturating_duration_since(start).as_secs() / 10) as usize;
            if windows.len() <= window {
                windows.resize(window + 1, 0);
            }
            windows[window] += 1;
        }
        windows
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

async fn churn(
    client: &kube::Client,
    pods: &[(String, String)],
    settings: &Settings,
    serve: &Serve,
) -> Churn {
    let outcome = Churn {
        updates: 0,
        sent: Arc::default(),
        seen: Arc::default(),
        last: Arc::default(),
        started: None,
    };
    // The watch that sees the hooks' annotations land.
    let watched: Api<Pod> = Api::all(client.clone());
    let (sent, seen) = (outcome.sent.clone(), outcome.seen.clone());
    let watch = tokio::spawn(async move {
        let config = watcher::Config::default().labels("app=scale");
        let mut recorded: HashMap<(&'static str, String), ()> = HashMap::new();
        let events = watcher(watched, config).applied_objects().default_backoff();
        futures::pin_mut!(events);
        while let Some(Ok(pod)) = events.next().await {
            let now = Instant::now();
            // The update itself, seen by this watch: the floor under the hooks'
            // latencies (the API server, its watch and this process; no hook). Counted
            // only when its answer came before its event.
            if let Some(version) = pod.metadata.resource_version.as_ref()
                && let Some(at) = sent.lock().unwrap().get(version)
            {
                let latency = now.duration_since(*at);
                seen.lock()
                    .unwrap()
                    .entry(ECHO)
                    .or_default()
                    .push((now, latency));
            }
            let annotations = pod.metadata.annotations.unwrap_or_default();
            for key in [WASM_KEY, SHELL_KEY] {
                let Some(version) = annotations.get(key) else {
                    continue;
                };
                if recorded.insert((key, version.clone()), ()).is_some() {
                    continue;
                }
                if let Some(at) = sent.lock().unwrap().get(version) {
                    seen.lock()
                        .unwrap()
                        .entry(key)
                        .or_default()
                        .push((now, now.duration_since(*at)));
                }
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;

    let interval = Duration::from_secs_f64(1.0 / f64::from(settings.rate));
    let total = settings.rate as u64 * settings.seconds;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut next_minute = 60;
    for i in 0..total {
        tokio::time::sleep_until((started + interval * i as u32).into()).await;
        let (ns, name) = pods[(i as usize * 7919) % pods.len()].clone();
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let (sent, last) = (outcome.sent.clone(), outcome.last.clone());
        tasks.spawn(async move {
            let patch = json!({"metadata": {"labels": {GEN_LABEL: (i + 1).to_string()}}});
            let pod = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("a label update");
            let version = pod.metadata.resource_version.unwrap_or_default();
            sent.lock().unwrap().insert(version.clone(), Instant::now());
            let mut last = last.lock().unwrap();
            let entry = last.entry((ns, name)).or_default();
            // Updates of one Pod may answer out of order: the highest version is last.
            if version.parse::<u64>().unwrap_or(0) > entry.parse::<u64>().unwrap_or(0) {
                *entry = version;
            }
        });
        while tasks.try_join_next().is_some() {}
        if started.elapsed().as_secs() >= next_minute {
            println!(
                "  minute {:>2}: resident {:.1} MiB (snapshots {:.1} MiB), {} updates sent",
                next_minute / 60,
                serve.rss_mib(),
                serve.snapshot_mib(),
                i + 1
            );
            next_minute += 60;
        }
    }
    while tasks.join_next().await.is_some() {}
    println!(
        "churn: {total} label updates in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Late annotations still count.
    tokio::time::sleep(Duration::from_secs(10)).await;
    watch.abort();
    Churn {
        updates: total,
        started: Some(started),
        ..outcome
    }
}

/// How many Pods' last update each hook never recorded.
async fn lost(client: &kube::Client, namespaces: &[String], churn: &Churn) -> (usize, usize) {
    let last = churn.last.lock().unwrap().clone();
    let mut current: HashMap<Key, Pod> = HashMap::new();
    for ns in namespaces {
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        for pod in api
            .list(&ListParams::default())
            .await
            .expect("a list")
            .items
        {
            let name = pod.metadata.name.clone().unwrap_or_default();
            current.insert((ns.clone(), name), pod);
        }
    }
    let missed = |key: &str| {
        last.iter()
            .filter(|(pod, version)| {
                let recorded = current
                    .get(*pod)
                    .and_then(|p| p.metadata.annotations.as_ref())
                    .and_then(|a| a.get(key))
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
                recorded < version.parse::<u64>().unwrap_or(0)
            })
            .count()
    };
    (missed(WASM_KEY), missed(SHELL_KEY))
}

/// The API server's metrics, as text.
async fn apiserver_metrics(client: &kube::Client) -> String {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    client.request_text(request).await.unwrap_or_default()
}

/// `apiserver_request_total` for Pods, summed by verb.
fn requests_by_verb(text: &str) -> HashMap<String, f64> {
    let mut by_verb: HashMap<String, f64> = HashMap::new();
    for line in text.lines() {
        if !line.starts_with("apiserver_request_total{") || !line.contains("resource=\"pods\"") {
            continue;
        }
        let verb = label_value(line, "verb").unwrap_or("?");
        *by_verb.entry(verb.to_owned()).or_default() += sample_value(line);
    }
    by_verb
}
