//! `operon serve` against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`), killed with SIGKILL
//! at random points of a Diagnosis and started again, several times, until the
//! Diagnosis finishes.
//!
//! Asserted: a node the Diagnosis' status recorded as finished keeps that record
//! through every later kill and restart (same start and end, same outcome), so it was
//! not run again; in the end every node has exactly one record and the Diagnosis is
//! `Succeeded` on its only path. A node interrupted by a kill (the status'
//! `currentNode`) runs again after the restart: a node runs at least once and, once
//! recorded, never again.

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::e2e_support::*;

/// Steps in the chain; each takes about a second.
const STEPS: usize = 6;
/// How many times the controller is killed before it is left to finish.
const KILLS: usize = 6;

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

fn step(name: &str, i: usize) -> DynamicObject {
    object(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
        "metadata": {"name": name},
        "spec": {"processor": {"timeoutSeconds": 30,
                 "scriptRunner": {"operationResultKey": format!("step{i}"),
                                  "script": format!("sleep 1; echo step {i}")}}},
    }))
}

/// A small xorshift generator seeded from the clock, printed so that a failing run can
/// be told apart.
fn next(state: &mut u32) -> u32 {
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    *state
}

async fn status(api: &Api<DynamicObject>, name: &str) -> Value {
    api.get(name)
        .await
        .ok()
        .and_then(|d| d.data.get("status").cloned())
        .unwrap_or(Value::Null)
}

fn records(status: &Value) -> BTreeMap<i64, Value> {
    status["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .filter_map(|n| Some((n["id"].as_i64()?, n.clone())))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn a_controller_killed_at_random_points_never_runs_a_finished_node_again() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-kill").await;
    let run = format!("{:08x}", getrandom_u32());
    let names: Vec<String> = (1..=STEPS).map(|i| format!("e2e-kill-{run}-{i}")).collect();
    let set = format!("e2e-kill-chain-{run}");
    let mut cleanup: Vec<(&'static str, String)> = names
        .iter()
        .map(|n| ("operation.operon.dev", n.clone()))
        .collect();
    cleanup.push(("operationset.operon.dev", set.clone()));
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: cleanup,
    };
    apply_operon_crds(&cluster).await;
    let post = PostParams::default();
    let operations = operon_api(&cluster, "Operation");
    for (i, name) in names.iter().enumerate() {
        operations.create(&post, &step(name, i + 1)).await.unwrap();
    }
    operon_api(&cluster, "OperationSet")
        .create(&post, &chain(&set, &names))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(
        cluster.client().clone(),
        &scratch.name,
        &operon_resource("Diagnosis"),
    );
    api.create(
        &post,
        &object(
            json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                       "metadata": {"name": "killed"}, "spec": {"operationSet": set}}),
        ),
    )
    .await
    .unwrap();

    let mut seed = getrandom_u32() | 1;
    eprintln!("seed {seed:#x}");
    let flags = ["--leader-election-namespace", scratch.name.as_str()];
    // Every record seen so far, as first seen.
    let mut seen: BTreeMap<i64, Value> = BTreeMap::new();
    let mut kills = Vec::new();
    for round in 0..KILLS {
        let serving = serve(&path, &hooks, &flags, &format!("kill-{round}"));
        // Once this controller has written to the Diagnosis (started a node, recorded
        // one), somewhere in the next second: mid-node, between nodes or while a record
        // is being written.
        let before = status(&api, "killed").await;
        eventually(
            "the controller to make progress",
            Duration::from_secs(90),
            async || (status(&api, "killed").await != before).then_some(()),
        )
        .await;
        let after = Duration::from_millis(u64::from(next(&mut seed) % 1000));
        tokio::time::sleep(after).await;
        drop(serving); // SIGKILL, then reaped
        let now = status(&api, "killed").await;
        kills.push((after, now["currentNode"]["id"].clone(), records(&now).len()));
        for (id, record) in records(&now) {
            match seen.get(&id) {
                Some(first) => assert_eq!(
                    &record, first,
                    "node {id}'s record changed after kill {round} ({kills:?})"
                ),
                None => {
                    seen.insert(id, record);
                }
            }
        }
        if now["phase"] == "Succeeded" {
            break;
        }
    }
    eprintln!("kills (ms after progress, running node, finished nodes): {kills:?}");

    let _last = serve(&path, &hooks, &flags, "kill-last");
    let done = eventually(
        "the Diagnosis to succeed",
        Duration::from_secs(120),
        async || {
            let now = status(&api, "killed").await;
            (now["phase"] == "Succeeded").then_some(now)
        },
    )
    .await;
    let finished = records(&done);
    let ids: Vec<i64> = done["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["id"].as_i64())
        .collect();
    assert_eq!(
        ids,
        (1..=STEPS as i64).collect::<Vec<_>>(),
        "each node recorded once: {done}"
    );
    for (id, first) in &seen {
        assert_eq!(
            &finished[id], first,
            "node {id} was run again after it was recorded ({kills:?})"
        );
    }
    for i in 1..=STEPS {
        assert_eq!(
            done["operationResults"][format!("operation.step{i}.output")],
            format!("step {i}\n")
        );
    }
    assert!(done.get("currentNode").is_none());
}
