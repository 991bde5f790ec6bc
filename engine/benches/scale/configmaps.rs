//! The sync row: many small objects listed and synchronized at start.
//!
//! `OPERON_SCALE_CONFIGMAPS=50000` creates that many small ConfigMaps (one key each) in
//! `OPERON_SCALE_NAMESPACES` namespaces (100), then starts `operon serve` with two shell
//! hooks binding them, both synchronizing on `main` as shell-operator does: one keeping
//! whole objects (the default) and one keeping only a jqFilter's result
//! (`keepFullObjectsInMemory: false`). Each hook's Synchronization run counts the objects
//! it was given and sets a metric to it, so the run checks that every object reached
//! both hooks. It reports the time from start to `/readyz` (goal: within 30 s), the
//! resident size then and its peak (goal: under 150 MB), and the snapshots' size.

use crate::serve::{Serve, family_sum};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The metric each hook's Synchronization run sets to the number of objects it got.
const SYNCED: &str = "scale_synced_objects";

pub async fn run(kubeconfig: &Path, count: usize, namespaces: usize) {
    let client = crate::client(kubeconfig).await;
    let run_id = std::process::id();
    let namespaces: Vec<String> = (0..namespaces.max(1))
        .map(|i| format!("operon-scale-cm-{run_id}-{i:03}"))
        .collect();
    // The run's own label: an earlier run's ConfigMaps may still be being deleted.
    let label = format!("scale-configmaps-{run_id}");
    crate::create_namespaces(&client, &namespaces).await;
    let started = Instant::now();
    create(&client, &namespaces, count, &label).await;
    println!(
        "{count} ConfigMaps in {} namespaces created in {:.1} s",
        namespaces.len(),
        started.elapsed().as_secs_f64()
    );

    let dir = tempfile::tempdir().expect("a temp dir");
    let hooks = write_hooks(dir.path(), &label);
    let log = dir.path().join("serve.log");
    let mut serve = Serve::start(kubeconfig, &hooks, dir.path(), 50);
    let synced = serve.wait_ready(&log).await;
    let peak_at_sync = serve.peak_rss_mib();
    tokio::time::sleep(Duration::from_secs(5)).await;
    println!(
        "operon serve: start to every Synchronization done (/readyz) {:.2} s (goal < 30 s)",
        synced.as_secs_f64()
    );
    println!(
        "  resident 5 s later {:.1} MiB, peak {:.1} MiB (the list and the Synchronization runs; goal < 150 MB), of which the bindings' snapshots {:.1} MiB",
        serve.rss_mib(),
        peak_at_sync.max(serve.peak_rss_mib()),
        serve.snapshot_mib()
    );
    let hook_metrics = serve.get("/metrics/hooks");
    let mut short = Vec::new();
    for hook in ["full.sh", "filtered.sh"] {
        let seen = family_sum(&hook_metrics, SYNCED, &format!("{hook}\""));
        println!("  {hook:<12} Synchronization run given {seen:.0} of {count} objects");
        if seen as usize != count {
            short.push(hook);
        }
    }
    drop(serve);
    if !short.is_empty() {
        // The temp dir goes with the panic: its log is kept where it can be read.
        let kept = std::env::temp_dir().join(format!("operon-scale-configmaps-{run_id}.log"));
        let _ = std::fs::copy(&log, &kept);
        panic!(
            "{short:?} not given every ConfigMap; the log of operon serve: {}",
            kept.display()
        );
    }

    let started = Instant::now();
    for ns in &namespaces {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let _ = api
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&format!("app={label}")),
            )
            .await;
    }
    crate::delete_namespaces(&client, &namespaces).await;
    println!("deleted in {:.1} s", started.elapsed().as_secs_f64());
}

async fn create(client: &kube::Client, namespaces: &[String], count: usize, label: &str) {
    futures::stream::iter(0..count)
        .map(|i| {
            let ns = &namespaces[i % namespaces.len()];
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
            async move {
                let object: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("cm-{i:05}"), "labels": {"app": label}},
                    "data": {"index": i.to_string()},
                }))
                .expect("a ConfigMap");
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                    Err(e) => Err(format!("creating {ns}/cm-{i:05}: {e}")),
                }
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .expect("every ConfigMap created");
}

/// Two hooks binding the run's ConfigMaps: `full.sh` keeps whole objects,
/// `filtered.sh` only its jqFilter's result. Neither runs on events: the row measures
/// the start.
fn write_hooks(dir: &Path, label: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let hooks = dir.join("hooks");
    std::fs::create_dir(&hooks).expect("the hooks directory");
    let selector = format!(r#""labelSelector":{{"matchLabels":{{"app":"{label}"}}}}"#);
    let count = format!(
        r#"jq -c '.[] | select(.type == "Synchronization") | {{name: "{SYNCED}", action: "set", value: (.objects | length)}}' "$BINDING_CONTEXT_PATH" >> "$METRICS_PATH""#
    );
    let scripts = [
        (
            "full.sh",
            format!(
                r#"{{"configVersion":"v1","kubernetes":[{{"name":"configmaps","kind":"ConfigMap",{selector},"executeHookOnEvent":[]}}]}}"#
            ),
        ),
        (
            "filtered.sh",
            format!(
                r#"{{"configVersion":"v1","kubernetes":[{{"name":"configmaps","kind":"ConfigMap",{selector},"jqFilter":".data.index","keepFullObjectsInMemory":false,"executeHookOnEvent":[]}}]}}"#
            ),
        ),
    ];
    for (name, config) in scripts {
        let text = format!(
            "#!/usr/bin/env bash\nif [[ \"${{1:-}}\" == \"--config\" ]]; then\n  echo '{config}'\n  exit 0\nfi\n{count}\n"
        );
        let path = hooks.join(name);
        std::fs::write(&path, text).expect("a hook");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    hooks
}
