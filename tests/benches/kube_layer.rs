//! What the kube layer costs, against a mock API server (a tower-test service that
//! answers like kube-apiserver): the memory a kubernetes binding holds per watched
//! object with `keepFullObjectsInMemory: false` versus `true` (engine snapshot plus the
//! watch's own bookkeeping, counted by a counting allocator), and the time the layer
//! adds per watch event (HTTP body → parsed object → diffed → event on the binding's
//! stream) compared with only parsing the same event lines into JSON values, measured
//! in the same run.
//!
//! Run with `cargo bench -p operon-tests --bench kube_layer`.

use futures::future::BoxFuture;
use http::{Request, Response};
use kube::client::Body;
use operon::cluster::kube::KubeCluster;
use operon::cluster::{Cluster as _, Resource, Selector};
use operon::hooks::config;
use operon::hooks::engine::{Engine, LoadedHook};
use operon::hooks::{Hook, HookError, HookRun};
use operon::metrics::Metrics;
use operon::model::{HookConfig, HookInput, KubernetesBindingConfig};
use operon_tests::bench::median;
use serde_json::{Value, json};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

/// Counts the bytes live on the heap (as requested; the allocator's own overhead per
/// allocation comes on top), forwarding to the allocator the `operon` binary runs with.
struct Counting;

static INNER: operon::Allocator = operon::Allocator;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// Forwarding to the binary's allocator is the whole point of a counting allocator; the
// bench binary alone uses it.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { INNER.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { INNER.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const OBJECTS: usize = 10_000;
const EVENTS: usize = 20_000;

/// A pod about the size of a real one (1 KB of JSON).
fn pod(i: usize, resource_version: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("web-{i:05}"), "namespace": "bench",
            "uid": format!("6f1c0b52-0000-4000-8000-{i:012}"),
            "resourceVersion": resource_version.to_string(),
            "creationTimestamp": "2026-11-23T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "5d8f9c7b6d", "shard": (i % 16).to_string()},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-20T08:00:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f9c7b6d",
                                 "uid": "0a7b3c2d-1111-4222-8333-444455556666", "controller": true}]
        },
        "spec": {
            "containers": [{"name": "app", "image": "registry.example/web:1.27.3",
                            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                            "env": [{"name": "MODE", "value": "production"}]}],
            "nodeName": format!("node-{:03}", i % 200), "serviceAccountName": "web",
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30
        },
        "status": {"phase": "Running", "podIP": format!("10.1.{}.{}", i / 250, i % 250),
                   "conditions": [{"type": "Ready", "status": "True",
                                   "lastTransitionTime": "2026-11-23T10:00:05Z"}]}
    })
}

fn list_body() -> Vec<u8> {
    let items: Vec<Value> = (0..OBJECTS)
        .map(|i| {
            let mut p = pod(i, 100 + i);
            let m = p.as_object_mut().unwrap();
            m.remove("apiVersion");
            m.remove("kind");
            p
        })
        .collect();
    serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "PodList",
        "metadata": {"resourceVersion": "20000"}, "items": items}))
    .unwrap()
}

fn event_lines() -> Vec<u8> {
    let mut body = Vec::new();
    for n in 0..EVENTS {
        let i = n % OBJECTS;
        let mut p = pod(i, 30_000 + n);
        p["metadata"]["labels"]["shard"] = json!(format!("moved-{n}"));
        body.extend(serde_json::to_vec(&json!({"type": "MODIFIED", "object": p})).unwrap());
        body.push(b'\n');
    }
    body
}

/// A mock API server: the list, then one watch answered with `watch` (if any) once
/// `go` fires; later watches stay open.
fn mock(
    list: Vec<u8>,
    watch: Option<(Vec<u8>, tokio::sync::oneshot::Receiver<()>)>,
) -> KubeCluster {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        let mut list = Some(list);
        let mut watch = watch;
        let mut open = Vec::new();
        while let Some((request, respond)) = handle.next_request().await {
            let uri = request.uri().to_string();
            let body = if uri == "/api/v1" {
                serde_json::to_vec(&json!({"kind": "APIResourceList", "groupVersion": "v1",
                    "resources": [{"name": "pods", "singularName": "", "namespaced": true,
                                   "kind": "Pod", "verbs": ["list", "watch"]}]}))
                .unwrap()
            } else if uri.contains("watch=true") {
                match watch.take() {
                    Some((body, go)) => {
                        let _ = go.await;
                        body
                    }
                    None => {
                        open.push(respond);
                        continue;
                    }
                }
            } else {
                list.take().expect("one list")
            };
            let response = Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap();
            respond.send_response(response);
        }
    });
    KubeCluster::new(kube::Client::new(service, "default"))
}

/// A hook that never runs (the binding only keeps a snapshot).
struct Idle(HookConfig);

impl Hook for Idle {
    fn name(&self) -> &str {
        "idle"
    }
    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async move { Ok(self.0.clone()) })
    }
    fn handle(&self, _input: HookInput, _timeout: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        unreachable!("the binding runs nothing")
    }
}

fn idle_hook(keep_full: bool) -> Arc<dyn Hook> {
    Arc::new(Idle(HookConfig {
        kubernetes: vec![KubernetesBindingConfig {
            name: "pods".into(),
            kind: "Pod".into(),
            api_version: Some("v1".into()),
            jq_filter: Some(".metadata.labels.app".into()),
            keep_full_objects_in_memory: Some(keep_full),
            execute_hook_on_event: Some(vec![]),
            execute_hook_on_synchronization: Some(false),
            ..KubernetesBindingConfig::default()
        }],
        ..HookConfig::default()
    }))
}

/// Live heap bytes held per object by a started binding over `OBJECTS` pods.
async fn held_per_object(keep_full: bool) -> f64 {
    let hook = idle_hook(keep_full);
    let raw = hook.configure().await.unwrap();
    let config = config::validate("idle", &raw, &config::any_kind).unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    // What remains once the list was handled and its body freed is what the binding
    // holds (plus the engine's and the client's fixed costs, small next to 10,000
    // objects).
    let before = LIVE.load(Ordering::SeqCst);
    let cluster = Arc::new(mock(list_body(), None));
    let engine = Engine::new(vec![LoadedHook { hook, config }], cluster.clone(), metrics);
    engine.start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after = LIVE.load(Ordering::SeqCst);
    let held = after - before;
    drop(engine);
    held as f64 / OBJECTS as f64
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let sample = serde_json::to_vec(&pod(1, 1)).unwrap().len();
    println!(
        "kube layer, against a mock API server; {OBJECTS} pods of {sample} bytes of JSON each"
    );
    for keep_full in [false, true] {
        let per_object = held_per_object(keep_full).await;
        println!(
            "  keepFullObjectsInMemory: {keep_full:<5}  held: {per_object:>7.0} bytes per object (filter result \"web\": 5 bytes)"
        );
    }

    // Per event: the kube layer (HTTP body → source → diff → Event) versus parsing the
    // same lines into JSON values, in alternating rounds (one round's figures move with
    // whatever else the machine runs); the medians are reported.
    let lines = event_lines();
    let (mut parses, mut decodes, mut layers, mut ratios) = (vec![], vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let mut parsed = 0;
        for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let v: Value = serde_json::from_slice(line).unwrap();
            parsed += usize::from(v["object"].is_object());
        }
        let parse = started.elapsed();
        assert_eq!(parsed, EVENTS);
        // What kube-runtime's watcher decodes each line into, for comparison.
        let started = Instant::now();
        for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let event: kube::core::WatchEvent<Value> = serde_json::from_slice(line).unwrap();
            std::hint::black_box(event);
        }
        let decode = started.elapsed();
        let layer = through_the_layer(lines.clone()).await;
        ratios.push(layer.as_secs_f64() / parse.as_secs_f64());
        parses.push(parse);
        decodes.push(decode);
        layers.push(layer);
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / EVENTS as f64;
    println!(
        "  per watch event (medians of {ROUNDS} rounds of {EVENTS} events): kube layer {:.2} µs, JSON parse alone {:.2} µs; ratio {:.2}x",
        per(median(&mut layers)),
        per(median(&mut parses)),
        median(&mut ratios)
    );
    println!(
        "  for comparison, decoding the lines into kube's WatchEvent<JSON>: {:.2} µs",
        per(median(&mut decodes))
    );
}

const ROUNDS: usize = 5;

/// The time from the watch's body becoming available to the last of its events
/// reaching the binding's stream.
async fn through_the_layer(lines: Vec<u8>) -> Duration {
    let (go, ready) = tokio::sync::oneshot::channel();
    let cluster = mock(list_body(), Some((lines, ready)));
    let pods = Resource {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        plural: "pods".into(),
        namespaced: true,
    };
    let (objects, mut events) = cluster
        .list_and_watch(&pods, &Selector::default())
        .await
        .unwrap();
    assert_eq!(objects.len(), OBJECTS);
    drop(objects);
    let started = Instant::now();
    go.send(()).unwrap();
    for _ in 0..EVENTS {
        events.recv().await.expect("an event");
    }
    started.elapsed()
}
