//! A Hook object with `runOn: Job` when the leader is deleted during one of its runs:
//! the new leader runs the Hook again (its runs are Jobs that succeed), every Job ends,
//! no run's input ConfigMap outlives its Job, and the Module's `status.sources` forgets
//! the deleted replica.

use crate::e2e_node::{
    Node, force_delete, grant_module_reader, labeler_hook_selector, labeler_hook_yaml, leader_pod,
    push_modules,
};
use crate::e2e_support::*;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Seconds a finished Job of the Hook stays: short, so that the check of the inputs'
/// removal does not wait long.
const JOB_TTL: u64 = 30;

/// Pods created in `namespace` every 3 s until stopped (never scheduled: the hooks see
/// them all the same); how many were created.
fn create_pods(
    client: &kube::Client,
    namespace: &str,
    image: &str,
) -> (Arc<AtomicBool>, tokio::task::JoinHandle<usize>) {
    let stop = Arc::new(AtomicBool::new(false));
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let (flag, image) = (stop.clone(), image.to_owned());
    let creating = tokio::spawn(async move {
        let mut created = 0;
        while !flag.load(Ordering::Relaxed) {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("hooked-{created}")},
                "spec": {"nodeSelector": {"e2e.operon.dev/nowhere": "true"},
                         "containers": [{"name": "c", "image": image}]},
            }))
            .unwrap();
            if pods.create(&PostParams::default(), &pod).await.is_ok() {
                created += 1;
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        created
    });
    (stop, creating)
}

/// The Hook's Jobs, oldest first.
async fn hook_jobs(jobs: &Api<Job>, selector: &str) -> Vec<Job> {
    let mut listed = jobs
        .list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items;
    listed.sort_by_key(|j| j.metadata.creation_timestamp.clone());
    listed
}

fn active(job: &Job) -> bool {
    job.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
}

fn failed(job: &Job) -> bool {
    job.status.as_ref().and_then(|s| s.failed).unwrap_or(0) > 0
}

fn succeeded(job: &Job) -> bool {
    job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) > 0
}

/// The replicas the Module `name` lists in `status.sources`.
fn module_sources(config: &Path, name: &str) -> Vec<String> {
    let out = kubectl(config, &["get", "module", name, "-o", "json"]);
    let module: Value = serde_json::from_str(&out).unwrap();
    module["status"]["sources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["replica"].as_str().map(str::to_owned))
        .collect()
}

/// The scenario of this module, in the install `e2e_node_faults` made, with its Hook and
/// the Module's reader in `namespace`.
pub(super) async fn leader_lost_during_a_hook_job(
    node: &Node,
    client: &kube::Client,
    dir: &Path,
    namespace: &str,
) {
    let config = node.kubeconfig.as_path();
    let _uploader = push_modules(
        config,
        dir,
        namespace,
        &[("pod-labeler", operon_tests::POD_LABELER)],
    );
    // The Jobs' pods fetch the module as the namespace's default ServiceAccount.
    let _reader = grant_module_reader(config, namespace);
    // Each replica lists itself once it holds the bytes.
    eventually(
        "both replicas in the Module's sources",
        Duration::from_secs(60),
        async || (module_sources(config, "pod-labeler").len() >= 2).then_some(()),
    )
    .await;
    let cluster = connect(config).await;
    let target = Scratch::new(&cluster, config, "e2e-faults-hooked").await;
    let hook = dir.join("hook-job.yaml");
    std::fs::write(&hook, labeler_hook_yaml(namespace, &target.name, JOB_TTL)).unwrap();
    kubectl(config, &["apply", "-f", hook.to_str().unwrap()]);
    let selector = labeler_hook_selector(config, namespace);
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let (stop, creating) = create_pods(client, &target.name, &node.pod_image);

    // The leader deleted while one of the Hook's Jobs runs.
    let running = eventually(
        "a Job of the Hook running after one succeeded",
        Duration::from_secs(180),
        async || {
            let listed = hook_jobs(&jobs, &selector).await;
            let failed: Vec<_> = listed.iter().filter(|j| failed(j)).collect();
            assert!(failed.is_empty(), "a Job of the Hook failed: {failed:#?}");
            // Past the first runs, whose Jobs wait for the module's first fetch.
            let warm = listed.iter().any(succeeded);
            (warm && listed.iter().any(active)).then_some(listed.len())
        },
    )
    .await;
    let leader = leader_pod(config);
    let fault = Instant::now();
    let fault_time = jiff::Timestamp::now();
    force_delete(config, &leader);
    eprintln!("leader {leader} deleted while a Job of the Hook ran ({running} Jobs so far)");

    // Runs again: a Job created after the fault succeeds.
    let recovered = eventually(
        "a Job of the Hook created after the fault to succeed",
        Duration::from_secs(240),
        async || {
            hook_jobs(&jobs, &selector)
                .await
                .iter()
                .any(|j| created_after(j, fault_time) && succeeded(j))
                .then(|| fault.elapsed())
        },
    )
    .await;
    let next = leader_pod(config);
    eprintln!(
        "{next} leads; the Hook's first Job after the fault succeeded {:.1} s after it",
        recovered.as_secs_f64()
    );
    let pruned = eventually(
        "the deleted replica gone from the Module's sources",
        Duration::from_secs(120),
        async || {
            (!module_sources(config, "pod-labeler").contains(&leader)).then(|| fault.elapsed())
        },
    )
    .await;
    eprintln!(
        "the Module's status.sources dropped {leader} {:.1} s after the fault",
        pruned.as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(15)).await;
    stop.store(true, Ordering::Relaxed);
    let created = creating.await.unwrap();

    // Every Job ends and succeeds, the one cut off included (its pod finishes; nobody
    // reads its report: the new leader ran the Hook again).
    let ended = eventually(
        "every Job of the Hook ended",
        Duration::from_secs(240),
        async || {
            let listed = hook_jobs(&jobs, &selector).await;
            listed.iter().all(|j| !active(j)).then_some(listed)
        },
    )
    .await;
    let failed: Vec<_> = ended
        .iter()
        .filter(|j| !succeeded(j))
        .map(|j| j.metadata.name.clone().unwrap_or_default())
        .collect();
    assert!(failed.is_empty(), "Jobs of the Hook failed: {failed:?}");
    // No run's input outlives its Job: the engine deletes it when the run ends, the
    // Job's TTL (or the next engine) when the engine could not.
    let inputs_gone = eventually(
        "no input ConfigMap of the Hook's runs left",
        Duration::from_secs(JOB_TTL + 120),
        async || {
            let left = maps
                .list(&ListParams::default().labels(&selector))
                .await
                .unwrap()
                .items;
            left.is_empty().then(|| fault.elapsed())
        },
    )
    .await;
    eprintln!(
        "{created} Pods created in {}; {} Jobs of the Hook, all succeeded; no input ConfigMap left {:.1} s after the fault",
        target.name,
        ended.len(),
        inputs_gone.as_secs_f64()
    );
    kubectl(
        config,
        &["-n", namespace, "delete", "hook", "labeler", "--wait=false"],
    );
}

/// Whether `job` was created in a second after `time`'s (creation times are whole
/// seconds).
fn created_after(job: &Job, time: jiff::Timestamp) -> bool {
    job.metadata
        .creation_timestamp
        .as_ref()
        .is_some_and(|t| t.0.as_second() > time.as_second())
}
