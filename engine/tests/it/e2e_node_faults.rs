//! Faults on a node where Pods really run, under load (only with
//! `OPERON_E2E_NODE_FAULTS=1` beside the variables of `e2e_node`; skipped otherwise). Run
//! it where the cluster's Service and Pod addresses are reachable, as `e2e_node`.
//!
//! It installs `deploy/` as `e2e_node` does (the pod labeler as a wasm hook and as its
//! shell twin, a validating and a mutating shell hook on ConfigMaps), with the
//! controller's client allowed 50 requests per second, then, while ConfigMaps are created
//! for the admission hooks (four per second) and Pods for the labelling hooks (two per
//! second), it
//! - deletes the leader Pod with `--force --grace-period=0` while a Diagnosis runs a `job`
//!   step in the controller;
//! - deletes the agent Pod the same way during a three-step Diagnosis placed on the node;
//! - kills the API server, then etcd, with SIGKILL, and starts them again (only with
//!   `OPERON_E2E_NODE_PIDS`, a directory holding `kube-apiserver.pid` and `etcd.pid`, and
//!   `OPERON_E2E_NODE_RESTART`, a command that starts what was killed);
//! - drops the traffic between the leader Pod and the API server for 30 s (iptables, in
//!   the network namespace the test runs in: only where that is the node's).
//!
//! After each: every Pod created carries both labels, no Diagnosis step that finished ran
//! again (its result, a timestamp, never changes), no Job was created twice, and the
//! Diagnosis succeeded. Each fault reports how long admission requests were refused
//! (the hooks' failurePolicy is Fail) and how long until Pods were labelled again.

use crate::e2e_node::{
    Node, SHELL_LABEL, WASM_LABEL, finished_diagnosis, install_for_load, leader_pod, node,
    operon_pod, percentile,
};
use crate::e2e_support::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Admission requests (ConfigMap creations) per second; Pods are created at half this
/// rate. Each Pod costs two patches, one per labelling hook: with the default client
/// limit of 5 requests per second (`--kube-client-qps`, shell-operator's default) a
/// backlog drains at 1 Pod per second, so the install allows 50.
const RATE: f64 = 4.0;
/// The label the load's Pods carry.
const LOAD_LABEL: &str = "e2e.operon.dev/load";

/// What one admission request came to.
#[derive(Debug, Clone, PartialEq)]
enum Admission {
    /// Admitted, with the mutating hook's label: the hooks were called.
    Checked,
    /// Admitted without it: the request passed unchecked.
    Unchecked,
    /// Refused because a webhook could not be called.
    Refused(String),
    /// The API server itself did not answer.
    ApiAway(String),
}

/// What the load did while a fault ran.
#[derive(Default)]
struct Record {
    /// Each Pod created, with when its creation returned.
    pods: BTreeMap<String, Instant>,
    /// Each admission request, with when it was sent.
    admissions: Vec<(Instant, Admission)>,
    /// Pod creations the API server did not answer.
    pods_not_created: usize,
}

/// ConfigMaps created at [`RATE`] and Pods at half of it in `namespace` until stopped, and each load
/// Pod's time of carrying both labels, polled every 300 ms.
struct Load {
    stop: Arc<AtomicBool>,
    creating: tokio::task::JoinHandle<Record>,
    labelled: Arc<Mutex<BTreeMap<String, Instant>>>,
    polling: tokio::task::JoinHandle<()>,
}

impl Load {
    fn start(client: &kube::Client, namespace: &str, prefix: &str, pod_image: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let creating = {
            let (stop, pods, prefix, image) = (
                stop.clone(),
                pods.clone(),
                prefix.to_owned(),
                pod_image.to_owned(),
            );
            tokio::spawn(async move {
                let mut record = Record::default();
                let period = Duration::from_secs_f64(1.0 / RATE);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let tick = tokio::time::Instant::now();
                    n += 1;
                    let name = format!("{prefix}-{n}");
                    if n % 2 == 1 {
                        // Never scheduled (no node has the label): the hooks see it all
                        // the same, and the node is not loaded with containers.
                        let pod: Pod = serde_json::from_value(json!({
                            "metadata": {"name": name, "labels": {LOAD_LABEL: "true"}},
                            "spec": {"nodeSelector": {"e2e.operon.dev/nowhere": "true"},
                                     "containers": [{"name": "c", "image": image}]},
                        }))
                        .unwrap();
                        match pods.create(&PostParams::default(), &pod).await {
                            Ok(_) => {
                                record.pods.insert(name.clone(), Instant::now());
                            }
                            Err(_) => record.pods_not_created += 1,
                        }
                    }
                    let map: ConfigMap = serde_json::from_value(json!({
                        "metadata": {"name": name, "labels": {"app": "e2e-faults"}},
                    }))
                    .unwrap();
                    let sent = Instant::now();
                    let outcome = match maps.create(&PostParams::default(), &map).await {
                        Ok(created) => {
                            let labels = created.metadata.labels.unwrap_or_default();
                            if labels.contains_key("e2e.operon.dev/mutated") {
                                Admission::Checked
                            } else {
                                Admission::Unchecked
                            }
                        }
                        Err(kube::Error::Api(status))
                            if status.message.contains("failed calling webhook") =>
                        {
                            Admission::Refused(status.message)
                        }
                        Err(e) => Admission::ApiAway(e.to_string()),
                    };
                    record.admissions.push((sent, outcome));
                    tokio::time::sleep_until(tick + period).await;
                }
                record
            })
        };
        let labelled = Arc::new(Mutex::new(BTreeMap::new()));
        // Until aborted by `finish`.
        let polling = {
            let labelled = labelled.clone();
            tokio::spawn(async move {
                let selector = ListParams::default().labels(&format!("{LOAD_LABEL}=true"));
                loop {
                    if let Ok(list) = pods.list(&selector).await {
                        let now = Instant::now();
                        let mut labelled = labelled.lock().unwrap();
                        for pod in list.items {
                            let labels = pod.metadata.labels.unwrap_or_default();
                            let both = [WASM_LABEL, SHELL_LABEL]
                                .iter()
                                .all(|l| labels.get(*l).map(String::as_str) == Some("true"));
                            if both {
                                labelled
                                    .entry(pod.metadata.name.unwrap_or_default())
                                    .or_insert(now);
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            })
        };
        Self {
            stop,
            creating,
            labelled,
            polling,
        }
    }

    /// Stops creating, waits (at most `limit`) until every Pod created carries both
    /// labels, and reports the fault that began at `fault`.
    async fn finish(self, what: &str, fault: Instant, limit: Duration) -> Report {
        self.stop.store(true, Ordering::Relaxed);
        let record = self.creating.await.unwrap();
        let deadline = Instant::now() + limit;
        loop {
            let missing: Vec<String> = {
                let labelled = self.labelled.lock().unwrap();
                record
                    .pods
                    .keys()
                    .filter(|p| !labelled.contains_key(*p))
                    .cloned()
                    .collect()
            };
            if missing.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {} of {} Pods were not labelled by both hooks within {limit:?}: {:?}",
                missing.len(),
                record.pods.len(),
                &missing[..missing.len().min(10)]
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        self.polling.abort();
        let labelled = self.labelled.lock().unwrap().clone();
        Report::new(what, fault, &record, &labelled)
    }
}

/// What one fault came to.
struct Report {
    what: String,
    pods: usize,
    pods_not_created: usize,
    /// From the fault to the first label on a Pod created after it.
    flowing_again: Option<Duration>,
    /// Creation to both labels, sorted.
    latencies: Vec<Duration>,
    checked: usize,
    unchecked: usize,
    refused: usize,
    api_away: usize,
    /// From the fault to the first and the last refused request.
    refused_window: Option<(Duration, Duration)>,
    unchecked_window: Option<(Duration, Duration)>,
}

impl Report {
    fn new(
        what: &str,
        fault: Instant,
        record: &Record,
        labelled: &BTreeMap<String, Instant>,
    ) -> Self {
        let mut latencies: Vec<Duration> = record
            .pods
            .iter()
            .filter_map(|(name, created)| {
                Some(labelled.get(name)?.saturating_duration_since(*created))
            })
            .collect();
        latencies.sort();
        let flowing_again = record
            .pods
            .iter()
            .filter(|(_, created)| **created > fault)
            .filter_map(|(name, _)| labelled.get(name))
            .min()
            .map(|at| at.saturating_duration_since(fault));
        let window = |kind: fn(&Admission) -> bool| {
            let times: Vec<Duration> = record
                .admissions
                .iter()
                .filter(|(_, a)| kind(a))
                .map(|(at, _)| at.saturating_duration_since(fault))
                .collect();
            Some((*times.first()?, *times.last()?))
        };
        let count = |kind: fn(&Admission) -> bool| {
            record.admissions.iter().filter(|(_, a)| kind(a)).count()
        };
        Self {
            what: what.to_owned(),
            pods: record.pods.len(),
            pods_not_created: record.pods_not_created,
            flowing_again,
            latencies,
            checked: count(|a| *a == Admission::Checked),
            unchecked: count(|a| *a == Admission::Unchecked),
            refused: count(|a| matches!(a, Admission::Refused(_))),
            api_away: count(|a| matches!(a, Admission::ApiAway(_))),
            refused_window: window(|a| matches!(a, Admission::Refused(_))),
            unchecked_window: window(|a| *a == Admission::Unchecked),
        }
    }

    fn print(&self) {
        let span = |w: Option<(Duration, Duration)>| match w {
            Some((from, to)) => format!(
                "{:.1} s to {:.1} s after the fault",
                from.as_secs_f64(),
                to.as_secs_f64()
            ),
            None => "none".to_owned(),
        };
        eprintln!(
            "{}: {} Pods created ({} creations unanswered), all labelled by both hooks; \
             labels flowing again {} after the fault; creation to both labels p50 {:?}, p99 {:?}, max {:?}; \
             admission: {} checked, {} unchecked ({}), {} refused ({}), {} with the API server away",
            self.what,
            self.pods,
            self.pods_not_created,
            self.flowing_again
                .map_or("(no Pod created after it)".to_owned(), |d| format!(
                    "{:.1} s",
                    d.as_secs_f64()
                )),
            percentile(&self.latencies, 0.5),
            percentile(&self.latencies, 0.99),
            self.latencies.last().copied().unwrap_or_default(),
            self.checked,
            self.unchecked,
            span(self.unchecked_window),
            self.refused,
            span(self.refused_window),
            self.api_away,
        );
    }
}

/// A Diagnosis' status, polled every 300 ms until it Succeeded or Failed: every
/// `operationResults` value must keep the value it was first seen with (a step that
/// finished and ran again would write a new timestamp). `during` runs once `trigger`
/// holds for the status.
async fn follow_diagnosis(
    config: &Path,
    namespace: &str,
    name: &str,
    limit: Duration,
    trigger: impl Fn(&Value) -> bool,
    during: impl FnOnce(),
) -> Value {
    let mut during = Some(during);
    let mut first: BTreeMap<String, String> = BTreeMap::new();
    let deadline = Instant::now() + limit;
    loop {
        let (ok, out, _) = try_kubectl(
            config,
            &["-n", namespace, "get", "diagnosis", name, "-o", "json"],
        );
        if ok {
            let object: Value = serde_json::from_str(&out).unwrap();
            let status = &object["status"];
            for (key, value) in status["operationResults"].as_object().into_iter().flatten() {
                let value = value.as_str().unwrap_or_default().to_owned();
                let seen = first.entry(key.clone()).or_insert_with(|| value.clone());
                assert_eq!(
                    *seen, value,
                    "result {key} of Diagnosis {namespace}/{name} changed: its step ran again"
                );
            }
            if trigger(status)
                && let Some(during) = during.take()
            {
                during();
            }
            if matches!(status["phase"].as_str(), Some("Succeeded" | "Failed")) {
                return status.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "Diagnosis {namespace}/{name} did not end within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Each node of `status.nodes` once: none ran to its end twice.
fn nodes_ran_once(status: &Value) {
    let mut seen = BTreeMap::new();
    for record in status["nodes"].as_array().into_iter().flatten() {
        let id = record["id"].to_string();
        *seen.entry(id).or_insert(0) += 1;
    }
    assert!(
        seen.values().all(|n| *n == 1),
        "a node of the Diagnosis has two records: {seen:?}\n{status:#}"
    );
}

fn apply(config: &Path, dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    kubectl(config, &["apply", "-f", path.to_str().unwrap()]);
}

/// Waits until a replica holds the Lease that is not `old`; returns it.
async fn new_leader(config: &Path, old: &str) -> String {
    eventually("another leader", Duration::from_secs(120), async || {
        let holder = leader_pod(config);
        (!holder.is_empty() && holder != old).then_some(holder)
    })
    .await
}

/// Waits until the API server answers /readyz.
async fn api_ready(config: &Path, limit: Duration) -> Duration {
    let started = Instant::now();
    eventually("the API server's /readyz", limit, async || {
        try_kubectl(config, &["get", "--raw", "/readyz"])
            .0
            .then_some(())
    })
    .await;
    started.elapsed()
}

/// The control plane's process files and the command that starts what died.
fn control_plane() -> Option<(PathBuf, String)> {
    let pids = std::env::var_os("OPERON_E2E_NODE_PIDS").filter(|v| !v.is_empty())?;
    let restart = std::env::var("OPERON_E2E_NODE_RESTART")
        .ok()
        .filter(|v| !v.is_empty())?;
    Some((PathBuf::from(pids), restart))
}

/// Kills the process of `pid_file` with SIGKILL, waits `down`, and runs `restart`.
fn kill_and_restart(pid_file: &Path, down: Duration, restart: &str) {
    let pid =
        std::fs::read_to_string(pid_file).unwrap_or_else(|e| panic!("{}: {e}", pid_file.display()));
    let status = Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {} failed", pid.trim());
    std::thread::sleep(down);
    let status = Command::new("sh").args(["-c", restart]).status().unwrap();
    assert!(status.success(), "{restart} failed: {status}");
}

/// `iptables` rules that drop the traffic between `ip` and the API server's port while
/// they exist.
struct Partition {
    rules: Vec<Vec<String>>,
}

impl Partition {
    fn new(ip: &str) -> Self {
        let rules: Vec<Vec<String>> = [
            [
                "INPUT", "-s", ip, "-p", "tcp", "--dport", "6443", "-j", "DROP",
            ],
            [
                "OUTPUT", "-d", ip, "-p", "tcp", "--sport", "6443", "-j", "DROP",
            ],
        ]
        .iter()
        .map(|r| r.iter().map(|s| s.to_string()).collect())
        .collect();
        for rule in &rules {
            let status = Command::new("iptables")
                .args(["-w", "-I"])
                .args(rule)
                .status()
                .unwrap();
            assert!(status.success(), "iptables -I {rule:?} failed");
        }
        Self { rules }
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        for rule in &self.rules {
            let _ = Command::new("iptables")
                .args(["-w", "-D"])
                .args(rule)
                .status();
        }
    }
}

const JOB_DIAGNOSIS: &str = r#"apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-faults-slow-job
spec:
  processor:
    timeoutSeconds: 300
    job:
      image: IMAGE
      imagePullPolicy: IfNotPresent
      command: [bash, -c, 'sleep 12; printf "{\"job.ran\":\"%s\"}" "$(date +%s%N)" > "$OPERON_RESULT_PATH"']
---
apiVersion: operon.dev/v1alpha1
kind: OperationSet
metadata:
  name: e2e-faults-job
spec:
  adjacencyList:
  - id: 0
    to: [1]
  - id: 1
    operation: e2e-faults-slow-job
---
apiVersion: operon.dev/v1alpha1
kind: Diagnosis
metadata:
  name: during-leader-loss
  namespace: NAMESPACE
spec:
  operationSet: e2e-faults-job
"#;

const AGENT_DIAGNOSIS: &str = r#"apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-faults-step-1
spec:
  processor:
    timeoutSeconds: 60
    scriptRunner:
      operationResultKey: step1
      script: |
        #!/bin/sh
        sleep 4; date +%s%N
---
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-faults-step-2
spec:
  processor:
    timeoutSeconds: 60
    scriptRunner:
      operationResultKey: step2
      script: |
        #!/bin/sh
        sleep 8; date +%s%N
---
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-faults-step-3
spec:
  processor:
    timeoutSeconds: 60
    scriptRunner:
      operationResultKey: step3
      script: |
        #!/bin/sh
        sleep 2; date +%s%N
---
apiVersion: operon.dev/v1alpha1
kind: OperationSet
metadata:
  name: e2e-faults-three-steps
spec:
  adjacencyList:
  - id: 0
    to: [1]
  - id: 1
    operation: e2e-faults-step-1
    to: [2]
  - id: 2
    operation: e2e-faults-step-2
    to: [3]
  - id: 3
    operation: e2e-faults-step-3
---
apiVersion: operon.dev/v1alpha1
kind: Diagnosis
metadata:
  name: during-agent-loss
  namespace: NAMESPACE
spec:
  operationSet: e2e-faults-three-steps
  nodeName: NODE
"#;

/// The leader deleted while Pods and admission requests stream in and a Diagnosis runs
/// a `job` step in the controller.
async fn leader_lost(node: &Node, client: &kube::Client, dir: &Path, namespace: &str) {
    let config = node.kubeconfig.as_path();
    let load = Load::start(client, namespace, "leader", &node.pod_image);
    tokio::time::sleep(Duration::from_secs(5)).await;
    apply(
        config,
        dir,
        "job-diagnosis.yaml",
        &JOB_DIAGNOSIS
            .replace("IMAGE", &node.image)
            .replace("NAMESPACE", namespace),
    );
    let selector = "operon.dev/diagnosis=during-leader-loss";
    eventually("the Diagnosis' Job", Duration::from_secs(120), async || {
        let names = kubectl(
            config,
            &["-n", namespace, "get", "jobs", "-l", selector, "-o", "name"],
        );
        (!names.trim().is_empty()).then_some(())
    })
    .await;
    let leader = leader_pod(config);
    let fault = Instant::now();
    kubectl(
        config,
        &[
            "-n",
            "operon",
            "delete",
            "pod",
            &leader,
            "--force",
            "--grace-period=0",
        ],
    );
    let next = new_leader(config, &leader).await;
    eprintln!(
        "leader {leader} deleted; {next} holds the Lease {:.1} s later",
        fault.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(20)).await;
    let report = load
        .finish("leader deleted", fault, Duration::from_secs(180))
        .await;
    report.print();
    let status = finished_diagnosis(
        config,
        namespace,
        "during-leader-loss",
        Duration::from_secs(300),
    );
    assert_eq!(status["phase"], "Succeeded", "{status:#}");
    nodes_ran_once(&status);
    let jobs: Value = serde_json::from_str(&kubectl(
        config,
        &["-n", namespace, "get", "jobs", "-l", selector, "-o", "json"],
    ))
    .unwrap();
    let jobs = jobs["items"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "one Job for the one job step: {jobs:#?}");
    assert_eq!(jobs[0]["status"]["succeeded"], 1, "{:#}", jobs[0]);
    let job_name = jobs[0]["metadata"]["name"].as_str().unwrap();
    let job_pods = kubectl(
        config,
        &[
            "-n",
            namespace,
            "get",
            "pods",
            "-l",
            &format!("job-name={job_name}"),
            "-o",
            "name",
        ],
    );
    assert_eq!(
        job_pods.lines().count(),
        1,
        "the Job's step ran in one Pod: {job_pods}"
    );
    eprintln!("the Diagnosis' job step ran once, in one Job, across the leader's loss");
}

/// The agent deleted between the steps of a three-step Diagnosis placed on the node.
async fn agent_lost(node: &Node, dir: &Path, namespace: &str) {
    let config = node.kubeconfig.as_path();
    let node_name = kubectl(
        config,
        &["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"],
    );
    apply(
        config,
        dir,
        "agent-diagnosis.yaml",
        &AGENT_DIAGNOSIS
            .replace("NAMESPACE", namespace)
            .replace("NODE", &node_name),
    );
    let started = Instant::now();
    let deleted = std::cell::Cell::new(None);
    let status = follow_diagnosis(
        config,
        namespace,
        "during-agent-loss",
        Duration::from_secs(300),
        // Step 1 done, step 2 running.
        |status| {
            status["operationResults"]
                .get("operation.step1.output")
                .is_some()
        },
        || {
            let agent = kubectl(
                config,
                &[
                    "-n",
                    "operon",
                    "get",
                    "pods",
                    "-l",
                    "app.kubernetes.io/name=operon-agent",
                    "-o",
                    "jsonpath={.items[0].metadata.name}",
                ],
            );
            kubectl(
                config,
                &[
                    "-n",
                    "operon",
                    "delete",
                    "pod",
                    &agent,
                    "--force",
                    "--grace-period=0",
                ],
            );
            deleted.set(Some(Instant::now()));
            eprintln!(
                "agent {agent} deleted {:.1} s into the Diagnosis, after its first step",
                started.elapsed().as_secs_f64()
            );
        },
    )
    .await;
    let deleted = deleted.get().unwrap_or_else(|| {
        panic!("the Diagnosis ended before its first step was seen done: {status:#}")
    });
    assert_eq!(status["phase"], "Succeeded", "{status:#}");
    nodes_ran_once(&status);
    for key in [
        "operation.step1.output",
        "operation.step2.output",
        "operation.step3.output",
    ] {
        assert!(
            status["operationResults"].get(key).is_some(),
            "{key} missing: {status:#}"
        );
    }
    eprintln!(
        "agent deleted: the Diagnosis succeeded {:.1} s after the deletion, no finished step ran again ({} node records)",
        deleted.elapsed().as_secs_f64(),
        status["nodes"].as_array().map_or(0, Vec::len)
    );
}

/// A control plane process killed under load and started again.
async fn control_plane_killed(
    node: &Node,
    client: &kube::Client,
    namespace: &str,
    process: &str,
    pids: &Path,
    restart: &str,
) {
    let config = node.kubeconfig.as_path();
    let leader = leader_pod(config);
    let load = Load::start(client, namespace, process, &node.pod_image);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let fault = Instant::now();
    let pid_file = pids.join(format!("{process}.pid"));
    let restart = restart.to_owned();
    tokio::task::spawn_blocking(move || {
        kill_and_restart(&pid_file, Duration::from_secs(10), &restart)
    })
    .await
    .unwrap();
    api_ready(config, Duration::from_secs(180)).await;
    eprintln!(
        "{process} killed, down 10 s, started again; the API server ready {:.1} s after the fault",
        fault.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(20)).await;
    let report = load
        .finish(
            &format!("{process} killed"),
            fault,
            Duration::from_secs(240),
        )
        .await;
    report.print();
    let now = leader_pod(config);
    eprintln!("the Lease was held by {leader} before and by {now} after");
}

/// The leader's traffic to and from the API server dropped for 30 s.
async fn leader_cut_off(node: &Node, client: &kube::Client, namespace: &str) {
    let config = node.kubeconfig.as_path();
    let leader = leader_pod(config);
    let ip = operon_pod(config, &leader, "{.status.podIP}");
    let load = Load::start(client, namespace, "partition", &node.pod_image);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let fault = Instant::now();
    let partition = Partition::new(&ip);
    tokio::time::sleep(Duration::from_secs(30)).await;
    drop(partition);
    let healed = fault.elapsed();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let report = load
        .finish(
            "leader cut off from the API server for 30 s",
            fault,
            Duration::from_secs(240),
        )
        .await;
    report.print();
    let now = leader_pod(config);
    eprintln!(
        "the leader {leader} ({ip}) was cut off for {:.1} s; {now} holds the Lease now",
        healed.as_secs_f64()
    );
}

#[tokio::test]
async fn operon_survives_faults_on_a_real_node() {
    let Some(node) = node() else { return };
    if std::env::var("OPERON_E2E_NODE_FAULTS").ok().as_deref() != Some("1") {
        eprintln!("skipped: OPERON_E2E_NODE_FAULTS is not 1 (the fault suite is opt-in)");
        return;
    }
    // Recovery is measured, not how fast a backlog drains through the default 5
    // requests per second.
    let (dir, client, scratch) = install_for_load(&node, "e2e-faults", None).await;
    let namespace = scratch.name.as_str();
    // The admission hooks answer before the faults begin.
    eventually(
        "the mutating webhook",
        Duration::from_secs(120),
        async || {
            let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            let map: ConfigMap = serde_json::from_value(json!({
                "metadata": {"generateName": "probe-"}}))
            .unwrap();
            let created = maps.create(&PostParams::default(), &map).await.ok()?;
            created
                .metadata
                .labels
                .unwrap_or_default()
                .contains_key("e2e.operon.dev/mutated")
                .then_some(())
        },
    )
    .await;

    // OPERON_E2E_NODE_FAULTS_ONLY=agent,partition (say) runs only those.
    let only = std::env::var("OPERON_E2E_NODE_FAULTS_ONLY").unwrap_or_default();
    let runs = |fault: &str| only.is_empty() || only.split(',').any(|f| f.trim() == fault);
    if runs("leader") {
        leader_lost(&node, &client, dir.path(), namespace).await;
    }
    if runs("agent") {
        agent_lost(&node, dir.path(), namespace).await;
    }
    if runs("apiserver") || runs("etcd") {
        match control_plane() {
            Some((pids, restart)) => {
                for (fault, process) in [("apiserver", "kube-apiserver"), ("etcd", "etcd")] {
                    if runs(fault) {
                        control_plane_killed(&node, &client, namespace, process, &pids, &restart)
                            .await;
                    }
                }
            }
            None => eprintln!(
                "not killing the API server and etcd: OPERON_E2E_NODE_PIDS and OPERON_E2E_NODE_RESTART are not both set"
            ),
        }
    }
    if runs("partition") {
        leader_cut_off(&node, &client, namespace).await;
    }
}
