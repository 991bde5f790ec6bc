//! Diagnoses per second through the Diagnosis controller, with a three-node wasm
//! OperationSet, against a real API server; and the API writes each Diagnosis costs.
//!
//! The controller is the one `operon serve` runs (kube-runtime, in this process); the
//! API server is the one `OPERON_E2E_KUBECONFIG` names (the bench says so and measures
//! only the baseline without it). The baseline, measured in the same run, is the same
//! pipeline with no API server at all (`pipeline::execute`, nothing persisted): what the
//! status writes, reads and Events cost is the difference.
//!
//! Run with `OPERON_E2E_KUBECONFIG=… cargo bench -p operon-engine --bench diagnosis_controller`
//! (`OPERON_BENCH_DIAGNOSES`, default 200, sets how many).

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use operon::api::{Diagnosis, DiagnosisPhase, DiagnosisSpec, Operation, OperationSet};
use operon::cluster::kube::{KubeCluster, KubeOptions};
use operon::controllers::diagnosis::{self, Role, Settings};
use operon::pipeline::{self, Quiet};
use operon::runner::processors::{ProcessorSettings, Processors};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

operon::binary_allocator!();

fn main() {
    operon::script::launcher::run_if_invoked();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(bench());
}

fn count() -> usize {
    std::env::var("OPERON_BENCH_DIAGNOSES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200)
}

fn processors() -> Arc<Processors> {
    Arc::new(Processors::new(ProcessorSettings {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..ProcessorSettings::default()
    }))
}

/// Three wasm Operations (`fixture-echo`) and a chain start → 1 → 2 → 3 over them.
fn objects(run: &str) -> (Vec<Operation>, OperationSet) {
    let names: Vec<String> = (1..=3).map(|i| format!("bench-echo-{i}-{run}")).collect();
    let operations = names
        .iter()
        .map(|name| {
            serde_json::from_value(json!({
                "apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
                "metadata": {"name": name},
                "spec": {"processor": {"timeoutSeconds": 10,
                         "wasm": {"module": operon_tests::ECHO}}},
            }))
            .unwrap()
        })
        .collect();
    let set = serde_json::from_value(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "OperationSet",
        "metadata": {"name": format!("bench-chain-{run}")},
        "spec": {"adjacencyList": [
            {"id": 0, "to": [1]},
            {"id": 1, "operation": names[0], "to": [2]},
            {"id": 2, "operation": names[1], "to": [3]},
            {"id": 3, "operation": names[2]},
        ]},
    }))
    .unwrap();
    (operations, set)
}

fn diagnosis(name: &str, namespace: &str, set: &str) -> Diagnosis {
    let mut d = Diagnosis::new(
        name,
        DiagnosisSpec {
            operation_set: set.to_owned(),
            node_name: None,
            pod_reference: None,
            parameters: BTreeMap::new(),
            service_account_name: None,
            dry_run: false,
            ..Default::default()
        },
    );
    d.metadata.namespace = Some(namespace.to_owned());
    d
}

/// The same Diagnoses with nothing persisted, one after another.
async fn baseline(n: usize) -> Duration {
    let (operations, set) = objects("baseline");
    let operations: BTreeMap<String, Operation> = operations
        .into_iter()
        .map(|op| (op.metadata.name.clone().unwrap(), op))
        .collect();
    let plan = pipeline::plan(&set, &operations, &processors()).expect("the set plans");
    let started = Instant::now();
    for i in 0..n {
        let mut d = diagnosis(&format!("d-{i}"), "bench", "bench-chain-baseline");
        let phase = pipeline::execute(&mut d, &plan.graph, &plan.steps, &mut Quiet)
            .await
            .unwrap();
        assert_eq!(phase, DiagnosisPhase::Succeeded);
    }
    started.elapsed()
}

async fn bench() {
    let n = count();
    let base = baseline(n).await;
    let base_rate = n as f64 / base.as_secs_f64();
    println!(
        "baseline (pipeline only, nothing persisted): {n} Diagnoses in {:.2} s, {base_rate:.1}/s",
        base.as_secs_f64()
    );
    let Some(path) = std::env::var_os("OPERON_E2E_KUBECONFIG").filter(|p| !p.is_empty()) else {
        println!("controller: skipped (OPERON_E2E_KUBECONFIG names no API server)");
        return;
    };
    let cluster = KubeCluster::connect(&KubeOptions {
        kubeconfig: Some(path.into()),
        qps: 0.0,
        ..KubeOptions::default()
    })
    .await
    .expect("the kubeconfig works");
    let client = cluster.client().clone();
    let run = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    );
    let namespace = format!("operon-bench-{run}");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let (operations, set) = objects(&run);
    let apply = PatchParams::apply("operon-bench").force();
    let ops: Api<Operation> = Api::all(client.clone());
    for op in &operations {
        let name = op.metadata.name.clone().unwrap();
        ops.patch(&name, &apply, &Patch::Apply(op)).await.unwrap();
    }
    let sets: Api<OperationSet> = Api::all(client.clone());
    let set_name = set.metadata.name.clone().unwrap();
    sets.patch(&set_name, &apply, &Patch::Apply(&set))
        .await
        .unwrap();

    // Created first, then the controller starts: its throughput is measured, not the
    // creation's.
    let diagnoses: Api<Diagnosis> = Api::namespaced(client.clone(), &namespace);
    for i in 0..n {
        diagnoses
            .create(
                &PostParams::default(),
                &diagnosis(&format!("d-{i}"), &namespace, &set_name),
            )
            .await
            .unwrap();
    }
    let ctx = Arc::new(diagnosis::Context::new(
        client.clone(),
        processors(),
        Settings::new(Role::Controller, &namespace),
    ));
    let started = Instant::now();
    let controller = tokio::spawn(diagnosis::run_controller(
        ctx.clone(),
        std::future::pending(),
    ));
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let list = diagnoses.list(&ListParams::default()).await.unwrap();
        let done = list
            .items
            .iter()
            .filter(|d| d.status.as_ref().and_then(|s| s.phase) == Some(DiagnosisPhase::Succeeded))
            .count();
        if done == n {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "{done} of {n} Diagnoses succeeded in 10 minutes"
        );
    }
    let took = started.elapsed();
    controller.abort();
    // Events are published in the background: give the last ones a moment.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events: Api<Event> = Api::namespaced(client.clone(), &namespace);
    let events = events.list(&ListParams::default()).await.unwrap().items;
    let event_writes: i64 = events
        .iter()
        .map(|e| 1 + e.series.as_ref().map_or(0, |s| i64::from(s.count) - 1))
        .sum();
    let rate = n as f64 / took.as_secs_f64();
    println!(
        "controller (3 wasm nodes, status writes and Events): {n} Diagnoses in {:.2} s, {rate:.1}/s ({:.1}x the baseline's time per Diagnosis)",
        took.as_secs_f64(),
        base_rate / rate
    );
    println!(
        "status writes per Diagnosis: {:.2} (goal: at most one per node plus one: 4); Events per Diagnosis: {:.2}",
        ctx.status_writes() as f64 / n as f64,
        event_writes as f64 / n as f64
    );
    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;
    for op in &operations {
        let _ = ops
            .delete(
                op.metadata.name.as_deref().unwrap(),
                &DeleteParams::default(),
            )
            .await;
    }
    let _ = sets.delete(&set_name, &DeleteParams::default()).await;
}
