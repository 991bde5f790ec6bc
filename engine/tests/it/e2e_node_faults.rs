//! Faults on a node where Pods really run, under load (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_NODE_FAULTS=1` beside the variables
//! of `e2e_node`). Run it where the cluster's Service and Pod addresses are reachable,
//! as `e2e_node`.
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
//!   the network namespace the test runs in: only where that is the node's);
//! - deletes the leader during a run of a Hook object with `runOn: Job` ([`hook_job`]).
//!
//! After each: every Pod created carries both labels, no Diagnosis step that finished ran
//! again (its result, a timestamp, never changes), no Job was created twice, and the
//! Diagnosis succeeded. Each fault reports how long admission requests were refused
//! (the hooks' failurePolicy is Fail) and how long until Pods were labelled again.

use crate::e2e_node::{
    Node, agent_pod, finished_diagnosis, force_delete, install_for_load, leader_pod, node,
    operon_pod,
};
use crate::e2e_support::*;
use load::Load;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod hook_job;
pub(crate) mod load;

/// A Diagnosis' status, polled every 300 ms until it Succeeded or Failed: every
/// `operationResults` value must keep the value it was first seen with (a step that
/// finished and ran again would write a new timestamp). `during` runs once `trigger`
/// holds for the status.
pub(crate) async fn follow_diagnosis(
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
pub(crate) fn nodes_ran_once(status: &Value) {
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
pub(crate) async fn new_leader(config: &Path, old: &str) -> String {
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

/// Three script steps in a chain, `{prefix}-step-N` (step N sleeps its `seconds` and
/// writes the time it ended, as its result `operation.stepN.output`), and their
/// OperationSet `{prefix}-three-steps`.
pub(crate) fn three_script_steps(prefix: &str, seconds: [u64; 3]) -> String {
    let mut text = String::new();
    for (step, seconds) in (1..).zip(seconds) {
        text.push_str(&format!(
            r#"apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: {prefix}-step-{step}
spec:
  processor:
    timeoutSeconds: 60
    scriptRunner:
      operationResultKey: step{step}
      script: |
        #!/bin/sh
        sleep {seconds}; date +%s%N
---
"#
        ));
    }
    text.push_str(&format!(
        r#"apiVersion: operon.dev/v1alpha1
kind: OperationSet
metadata:
  name: {prefix}-three-steps
spec:
  adjacencyList:
  - id: 0
    to: [1]
  - id: 1
    operation: {prefix}-step-1
    to: [2]
  - id: 2
    operation: {prefix}-step-2
    to: [3]
  - id: 3
    operation: {prefix}-step-3
"#
    ));
    text
}

/// The three-step Diagnosis placed on the node, the Operations first, the OperationSet
/// and the Diagnosis after them.
fn agent_diagnosis(namespace: &str, node: &str) -> String {
    let steps = three_script_steps("e2e-faults", [4, 8, 2]);
    format!(
        r#"{steps}---
apiVersion: operon.dev/v1alpha1
kind: Diagnosis
metadata:
  name: during-agent-loss
  namespace: {namespace}
spec:
  operationSet: e2e-faults-three-steps
  nodeName: {node}
"#
    )
}

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
    force_delete(config, &leader);
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
        &agent_diagnosis(namespace, &node_name),
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
            let agent = agent_pod(config, ".metadata.name");
            force_delete(config, &agent);
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
#[ignore = "needs a node to break: set OPERON_E2E_NODE_KUBECONFIG, OPERON_E2E_NODE_IMAGE and OPERON_E2E_NODE_FAULTS=1"]
async fn operon_survives_faults_on_a_real_node() {
    let node = node();
    if std::env::var("OPERON_E2E_NODE_FAULTS").ok().as_deref() != Some("1") {
        panic!(
            "OPERON_E2E_NODE_FAULTS is not 1: this opt-in test breaks the node's control \
             plane and Operon's Pods, and runs only with OPERON_E2E_NODE_FAULTS=1 (see the \
             suite's module doc and docs/src/development/testing.md)"
        );
    }
    // Recovery is measured, not how fast a backlog drains through the default 5
    // requests per second.
    let (dir, client, scratch) = install_for_load(&node, "e2e-faults", None).await;
    let namespace = scratch.name.as_str();
    // install_for_load waited until the admission hooks answer.
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
    if runs("hookjob") {
        hook_job::leader_lost_during_a_hook_job(&node, &client, dir.path(), namespace).await;
    }
}
