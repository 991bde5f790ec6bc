//! `operon serve` running a shell-operator hook that patches, against a real Kubernetes
//! API server (ignored unless run with `--ignored`, and then failing without
//! `OPERON_E2E_KUBECONFIG`), killed with SIGKILL at random points while the objects it
//! watches change, and started again.
//!
//! What is guaranteed is shell-operator's at-least-once delivery: every run's patches
//! are applied after the run succeeds, in order; a run the kill interrupts (before or
//! while its patches are applied) is not resumed, but the restarted engine's
//! Synchronization run sees every object as it is then, so the latest state of every
//! object is handled; changes made while no engine ran are seen as that state, not
//! one by one. A state can be handled more than once: once when it is first seen (its
//! event, or a Synchronization) and once more per restart while it lasts, never more.
//!
//! The hook records each run's handling as a JSON patch adding an annotation of its own
//! (`run-N-RANDOM`, N the object's `data.n`), so the annotations count the patches
//! applied per state. Asserted: after the last restart every object's latest state is
//! handled (no lost state, no stuck queue: within 60 s), and no state was handled more
//! often than the engine started while it lasted, plus one.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::e2e_support::*;

const OBJECTS: usize = 3;
const KILLS: usize = 5;

fn write_hook(dir: &Path, namespace: &str, run: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("record.sh");
    std::fs::write(
        &path,
        format!(
            r#"#!/usr/bin/env bash
set -euo pipefail
if [[ "${{1:-}}" == "--config" ]]; then
  cat <<CONFIG
configVersion: v1
kubernetes:
- name: sources
  apiVersion: v1
  kind: ConfigMap
  namespace: {{nameSelector: {{matchNames: ["{namespace}"]}}}}
  labelSelector: {{matchLabels: {{operon-kill: "{run}"}}}}
  jqFilter: .data
CONFIG
  exit 0
fi
sleep 0.3
jq -c --arg run "$RANDOM$RANDOM" '.[] | (.objects // [{{object: .object}}])[] | .object
  | select(. != null)
  | {{operation: "JSONPatch", kind: "ConfigMap", namespace: .metadata.namespace,
     name: .metadata.name,
     jsonPatch: [{{op: "add", path: ("/metadata/annotations/run-" + .data.n + "-" + $run),
                  value: "1"}}]}}' "$BINDING_CONTEXT_PATH" >> "$KUBERNETES_PATCH_PATH"
"#
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Counts an engine start for each object's current state.
fn start(state: &[u32], starts: &mut [BTreeMap<u32, u32>]) {
    for (i, n) in state.iter().enumerate() {
        *starts[i].entry(*n).or_insert(0) += 1;
    }
}

fn next(state: &mut u32) -> u32 {
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    *state
}

/// Per object, how many times each state `n` was handled.
async fn handled(maps: &Api<ConfigMap>, names: &[String]) -> BTreeMap<String, BTreeMap<u32, u32>> {
    let mut all = BTreeMap::new();
    for name in names {
        let map = maps.get(name).await.unwrap();
        let mut counts = BTreeMap::new();
        for key in map.metadata.annotations.unwrap_or_default().keys() {
            if let Some(n) = key
                .strip_prefix("run-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|n| n.parse().ok())
            {
                *counts.entry(n).or_insert(0) += 1;
            }
        }
        all.insert(name.clone(), counts);
    }
    all
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn a_hook_killed_at_random_points_handles_every_latest_state_at_least_once_and_boundedly() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-kill-hook").await;
    let run = format!("{:08x}", getrandom_u32());
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    write_hook(&hooks, &scratch.name, &run);
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client().clone(), &scratch.name);
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("source-{i}")).collect();
    for name in &names {
        let map: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"operon-kill": run},
                         "annotations": {"operon-kill/placeholder": "x"}},
            "data": {"n": "0"},
        }))
        .unwrap();
        maps.create(&PostParams::default(), &map).await.unwrap();
    }

    let mut seed = getrandom_u32() | 1;
    eprintln!("seed {seed:#x}");
    // Per object: its current state, and per state how many engines started while it
    // lasted.
    let mut state: Vec<u32> = vec![0; OBJECTS];
    let mut starts: Vec<BTreeMap<u32, u32>> = vec![BTreeMap::new(); OBJECTS];
    let mut changed = 0u32;
    for round in 0..KILLS {
        start(&state, &mut starts);
        let serving = serve(&path, &hooks, &[], &format!("hook-{round}"));
        // Once the engine is ready (its Synchronization run done), change one object,
        // then kill somewhere in the next 1.5 s: before, during or after its run.
        eventually("readiness", Duration::from_secs(60), async || {
            matches!(http_get(serving.port, "/readyz"), Some((200, _))).then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(u64::from(next(&mut seed) % 500))).await;
        let i = next(&mut seed) as usize % OBJECTS;
        changed += 1;
        state[i] = changed;
        maps.patch(
            &names[i],
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"n": changed.to_string()}})),
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(u64::from(next(&mut seed) % 1500))).await;
        drop(serving); // SIGKILL, then reaped
    }
    start(&state, &mut starts);
    let _last = serve(&path, &hooks, &[], "hook-last");
    let latest = state.clone();
    eventually(
        "every latest state handled",
        Duration::from_secs(60),
        async || {
            let now = handled(&maps, &names).await;
            names
                .iter()
                .zip(&latest)
                .all(|(name, n)| now[name].get(n).is_some_and(|&c| c >= 1))
                .then_some(())
        },
    )
    .await;
    // Let the last engine's queue drain before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let counts = handled(&maps, &names).await;
    eprintln!("handled per object and state: {counts:?}; engine starts per state: {starts:?}");
    for (i, name) in names.iter().enumerate() {
        for (n, count) in &counts[name] {
            let bound = starts[i].get(n).copied().unwrap_or(0) + 1;
            assert!(
                *count <= bound,
                "{name}: state {n} handled {count} times, more than the {bound} its lifetime allows"
            );
        }
    }
}
