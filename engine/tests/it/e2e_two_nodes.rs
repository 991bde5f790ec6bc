//! Operon on two nodes where Pods really run, and one of them dying (only with
//! `OPERON_E2E_NODE_TWO`, the node that may fail, and `OPERON_E2E_NODE_FAULT`, a command
//! run as `COMMAND stop|start|partition|heal NODE`, beside the variables of `e2e_node`;
//! skipped otherwise). Run it where the cluster's Service and Pod addresses are reachable,
//! as `e2e_node`; the other node must not fail (it may carry the control plane).
//!
//! It installs `deploy/` as `e2e_node_faults` does, and `deploy/builtins/` with the
//! dead-node example, then checks and measures:
//! - placement: an agent on each node, the controller's replicas on different nodes, and
//!   a Diagnosis with `targetSelector` over both nodes whose step on each node ran in that
//!   node's agent and no other (the step prints the host name of the Pod it runs in)
//!   and whose pushed module ran on both; a `job` step with `onDiagnosisNode` and an
//!   offloaded wasm step with a `nodeSelector` whose Pods ran where those say;
//! - a Diagnosis placed on the failing node whose node is stopped after its first step:
//!   its `Scheduled` condition names the node and its Ready state, it resumes when the
//!   node starts again and succeeds, and no finished step ran again; one created while
//!   the node is down with `nodeNotReadyTimeoutSeconds` fails after it, saying why;
//! - the dead-node Trigger: the node controller's `NodeNotReady` Event creates a
//!   Diagnosis about the stopped node that runs in the controller and collects the
//!   node's Ready state, its expired Lease, the Event and its Pods;
//! - the agents' DaemonSet and the controller's Deployment rolled out while a Diagnosis
//!   runs on each node under that load: nothing lost, no finished step run again;
//! - the leader on the failing node, under load (Pods for the labelling hooks,
//!   ConfigMaps for the admission hooks): stopped, then partitioned. Each reports the
//!   time to a new leader, how long admission requests were refused and until labels
//!   flowed again; after the partition heals, that the cut-off replica stopped leading
//!   before the other took the Lease (no two leaders).

use crate::e2e_node::{
    Node, finished_diagnosis, force_delete, grant_module_reader, install_for_load, leader_pod,
    node, operon_pod, push_modules,
};
use crate::e2e_node_faults::load::Load;
use crate::e2e_node_faults::{follow_diagnosis, new_leader, nodes_ran_once, three_script_steps};
use crate::e2e_support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The node that fails and how to fail it.
struct Second {
    name: String,
    fault: String,
}

fn second() -> Option<Second> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (Some(name), Some(fault)) = (var("OPERON_E2E_NODE_TWO"), var("OPERON_E2E_NODE_FAULT"))
    else {
        eprintln!(
            "skipped: OPERON_E2E_NODE_TWO and OPERON_E2E_NODE_FAULT are not both set (no second node to fail)"
        );
        return None;
    };
    Some(Second { name, fault })
}

impl Second {
    /// Runs the fault command with `action` on the node.
    fn fault(&self, action: &str) {
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!("{} {action} {}", self.fault, self.name))
            .status()
            .unwrap();
        assert!(status.success(), "{} {action} {}", self.fault, self.name);
    }

    /// Fails the node with `action`; dropping the guard undoes it with `undo` (so a
    /// failed check does not leave the node down).
    fn down(&self, action: &str, undo: &'static str) -> Down<'_> {
        self.fault(action);
        Down {
            second: self,
            undo: Some(undo),
        }
    }
}

struct Down<'a> {
    second: &'a Second,
    undo: Option<&'static str>,
}

impl Down<'_> {
    /// Brings the node back now.
    fn undo(mut self) {
        if let Some(undo) = self.undo.take() {
            self.second.fault(undo);
        }
    }
}

impl Drop for Down<'_> {
    fn drop(&mut self) {
        if let Some(undo) = self.undo.take() {
            let _ = Command::new("sh")
                .arg("-c")
                .arg(format!("{} {undo} {}", self.second.fault, self.second.name))
                .status();
        }
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn apply(config: &Path, dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    kubectl(config, &["apply", "-f", path.to_str().unwrap()]);
}

/// `NODE -> Pod` for the Pods of namespace operon selected by `selector`.
fn pods_by_node(config: &Path, selector: &str) -> BTreeMap<String, Vec<String>> {
    let out = kubectl(
        config,
        &[
            "-n",
            "operon",
            "get",
            "pods",
            "-l",
            selector,
            "-o",
            "jsonpath={range .items[*]}{.spec.nodeName} {.metadata.name} {.status.phase}{\"\\n\"}{end}",
        ],
    );
    let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in out.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if let [node, pod, "Running"] = parts[..] {
            by_node
                .entry(node.to_owned())
                .or_default()
                .push(pod.to_owned());
        }
    }
    by_node
}

/// The node a Pod of namespace operon runs on.
fn node_of(config: &Path, pod: &str) -> String {
    operon_pod(config, pod, "{.spec.nodeName}")
}

fn diagnosis(config: &Path, namespace: &str, name: &str) -> Value {
    let out = kubectl(
        config,
        &["-n", namespace, "get", "diagnosis", name, "-o", "json"],
    );
    serde_json::from_str(&out).unwrap()
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The nodes: the one that does not fail, then the one that does.
fn nodes(config: &Path, second: &Second) -> (String, String) {
    let names = kubectl(
        config,
        &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
    );
    let names: Vec<&str> = names.split_whitespace().collect();
    assert!(
        names.len() >= 2 && names.contains(&second.name.as_str()),
        "two nodes, one of them {}: {names:?}",
        second.name
    );
    let first = names.iter().find(|n| **n != second.name).unwrap();
    ((*first).to_owned(), second.name.clone())
}

/// A step printing the host name of the Pod it runs in (`uname -n`: the agent's Pod),
/// then the pushed echo module (which returns the node it was told of), and the set and
/// the Diagnosis over both nodes.
fn whoami(namespace: &str, nodes: [&str; 2]) -> String {
    format!(
        r#"apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-two-whoami
spec:
  processor:
    timeoutSeconds: 30
    scriptRunner:
      operationResultKey: whoami
      script: |
        #!/bin/sh
        uname -n
---
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-two-echo
spec:
  processor:
    timeoutSeconds: 30
    wasm:
      module: e2e-two-echo
---
apiVersion: operon.dev/v1alpha1
kind: OperationSet
metadata:
  name: e2e-two-whoami
spec:
  adjacencyList:
  - id: 0
    to: [1]
  - id: 1
    operation: e2e-two-whoami
    to: [2]
  - id: 2
    operation: e2e-two-echo
---
apiVersion: operon.dev/v1alpha1
kind: Diagnosis
metadata:
  name: both-nodes
  namespace: {namespace}
spec:
  operationSet: e2e-two-whoami
  targetSelector:
    nodeNames: [{}, {}]
"#,
        nodes[0], nodes[1]
    )
}

/// Agents on both nodes, the replicas spread, and a Diagnosis over both nodes whose
/// step ran in each node's own agent.
async fn placement(node: &Node, second: &Second, dir: &Path, namespace: &str) {
    let config = node.kubeconfig.as_path();
    let (first, failing) = nodes(config, second);
    let agents = pods_by_node(config, "app.kubernetes.io/name=operon-agent");
    for n in [&first, &failing] {
        assert_eq!(
            agents.get(n).map(Vec::len),
            Some(1),
            "one agent on node {n}: {agents:?}"
        );
    }
    let replicas = pods_by_node(config, CONTROLLER);
    assert_eq!(
        replicas.len(),
        2,
        "the two controller replicas on two nodes: {replicas:?}"
    );
    eprintln!("agents: {agents:?}; controller replicas: {replicas:?}");

    // A module pushed to the engine: both agents fetch it and run it.
    let _uploader = push_modules(
        config,
        dir,
        namespace,
        &[("e2e-two-echo", operon_tests::ECHO)],
    );
    let started = Instant::now();
    apply(
        config,
        dir,
        "whoami.yaml",
        &whoami(namespace, [&first, &failing]),
    );
    let parent = finished_diagnosis(config, namespace, "both-nodes", Duration::from_secs(180));
    assert_eq!(parent["phase"], "Succeeded", "{parent:#}");
    for n in [&first, &failing] {
        let target = parent["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["nodeName"] == n.as_str())
            .unwrap_or_else(|| panic!("no target {n}: {parent:#}"));
        let child = target["diagnosis"].as_str().unwrap();
        let status = diagnosis(config, namespace, child)["status"].clone();
        assert_eq!(status["phase"], "Succeeded", "{status:#}");
        assert_eq!(status["nodeName"], n.as_str());
        let ran_in = status["operationResults"]["operation.whoami.output"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_owned();
        assert_eq!(
            ran_in, agents[n][0],
            "the step about node {n} ran in its agent"
        );
        assert_eq!(node_of(config, &ran_in), *n);
        assert_eq!(
            status["operationResults"]["context.node"],
            n.as_str(),
            "the pushed module ran about node {n}: {status:#}"
        );
    }
    eprintln!(
        "a Diagnosis over both nodes succeeded in {:.1} s, each step in its node's agent, \
         the pushed module run by both",
        started.elapsed().as_secs_f64()
    );

    // Job steps land where their node selection says.
    let _reader = grant_module_reader(config, namespace);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watching = job_pod_nodes(config, namespace, "job-placement", stop.clone());
    apply(
        config,
        dir,
        "job-placement.yaml",
        &job_placement(namespace, &node.image, [&first, &failing]),
    );
    let status = finished_diagnosis(config, namespace, "job-placement", Duration::from_secs(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let pods = watching.join().unwrap();
    assert_eq!(status["phase"], "Succeeded", "{status:#}");
    assert_eq!(
        pods.get("node-1"),
        Some(&failing),
        "the job step on the Diagnosis' node: {pods:?}"
    );
    assert_eq!(
        pods.get("node-2"),
        Some(&first),
        "the offloaded step on the node its nodeSelector names: {pods:?}"
    );
    eprintln!(
        "a job step with onDiagnosisNode ran on {failing}, an offloaded wasm step with a \
         nodeSelector on {first}"
    );
}

/// A Diagnosis about the failing node run in the controller with a `job` step pinned
/// to the Diagnosis' node (`onDiagnosisNode`) and the pushed echo module offloaded to a
/// Job whose `nodeSelector` names the other node.
fn job_placement(namespace: &str, image: &str, nodes: [&str; 2]) -> String {
    let [first, failing] = nodes;
    format!(
        r#"apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-two-job-on-node
spec:
  processor:
    timeoutSeconds: 120
    job:
      image: {image}
      imagePullPolicy: IfNotPresent
      onDiagnosisNode: true
      command: [bash, -c, 'sleep 3; printf "{{\"job.host\":\"%s\"}}" "$(uname -n)" > "$OPERON_RESULT_PATH"']
---
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-two-echo-elsewhere
spec:
  processor:
    timeoutSeconds: 120
    wasm:
      module: e2e-two-echo
      runOn: Job
      job:
        nodeSelector:
          kubernetes.io/hostname: {first}
---
apiVersion: operon.dev/v1alpha1
kind: OperationSet
metadata:
  name: e2e-two-jobs
spec:
  adjacencyList:
  - id: 0
    to: [1]
  - id: 1
    operation: e2e-two-job-on-node
    to: [2]
  - id: 2
    operation: e2e-two-echo-elsewhere
---
apiVersion: operon.dev/v1alpha1
kind: Diagnosis
metadata:
  name: job-placement
  namespace: {namespace}
spec:
  operationSet: e2e-two-jobs
  nodeName: {failing}
  runOn: Controller
"#
    )
}

/// The node of every Pod of Diagnosis `name`'s Jobs, by the step (`node-N`) it ran,
/// polled every 200 ms until `stop` (the Jobs are deleted once done).
fn job_pod_nodes(
    config: &Path,
    namespace: &str,
    name: &str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<BTreeMap<String, String>> {
    let (config, namespace, name) = (config.to_owned(), namespace.to_owned(), name.to_owned());
    std::thread::spawn(move || {
        let mut seen = BTreeMap::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let (_, out, _) = try_kubectl(
                &config,
                &[
                    "-n",
                    &namespace,
                    "get",
                    "pods",
                    "-l",
                    &format!("operon.dev/diagnosis={name}"),
                    "-o",
                    "jsonpath={range .items[*]}{.metadata.labels.operon\\.dev/run} {.spec.nodeName}{\"\\n\"}{end}",
                ],
            );
            for line in out.lines() {
                if let Some((run, node)) = line.split_once(' ')
                    && !node.is_empty()
                    && let Some(step) = run.split('-').skip_while(|p| *p != "node").nth(1)
                {
                    seen.insert(format!("node-{step}"), node.to_owned());
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        seen
    })
}

/// Three script steps (3 s, 15 s, 2 s, each writing its end time) and a Diagnosis of
/// them, placed by `place` (its spec's lines after `operationSet`).
fn three_steps(namespace: &str, name: &str, place: &str) -> String {
    let steps = three_script_steps("e2e-two", [3, 15, 2]);
    format!(
        r#"{steps}---
apiVersion: operon.dev/v1alpha1
kind: Diagnosis
metadata:
  name: {name}
  namespace: {namespace}
spec:
  operationSet: e2e-two-three-steps
  {place}
"#
    )
}

/// Diagnosis `name` followed to its end, which must be Succeeded with no finished step
/// run again (its results never change, each node recorded once); its status.
async fn succeeds_once(config: &Path, namespace: &str, name: &str) -> Value {
    let status = follow_diagnosis(
        config,
        namespace,
        name,
        Duration::from_secs(300),
        |_| false,
        || {},
    )
    .await;
    assert_eq!(status["phase"], "Succeeded", "{name}: {status:#}");
    nodes_ran_once(&status);
    status
}

/// Waits until Diagnosis `name`'s `Scheduled` condition has `reason`; returns it.
async fn scheduled(config: &Path, namespace: &str, name: &str, reason: &str) -> Value {
    eventually(
        &format!("Diagnosis {name} Scheduled {reason}"),
        Duration::from_secs(120),
        async || {
            let status = diagnosis(config, namespace, name)["status"].clone();
            condition(&status, "Scheduled")
                .filter(|c| c["reason"] == reason)
                .cloned()
        },
    )
    .await
}

/// The Diagnosis the dead-node Trigger created about `node`, once finished.
async fn dead_node_diagnosis(config: &Path, node: &str) -> Value {
    let name = eventually(
        "a Diagnosis of the dead-node Trigger",
        Duration::from_secs(120),
        async || {
            let out = kubectl(
                config,
                &[
                    "-n",
                    "operon",
                    "get",
                    "diagnoses",
                    "-l",
                    "operon.dev/trigger=dead-node",
                    "-o",
                    "json",
                ],
            );
            let list: Value = serde_json::from_str(&out).unwrap();
            list["items"]
                .as_array()?
                .iter()
                .find(|d| d["spec"]["nodeName"] == node)
                .and_then(|d| d["metadata"]["name"].as_str().map(str::to_owned))
        },
    )
    .await;
    finished_diagnosis(config, "operon", &name, Duration::from_secs(120));
    diagnosis(config, "operon", &name)
}

/// A Diagnosis on the failing node whose node is stopped after its first step, one
/// created while it is down, and the dead-node Trigger's Diagnosis about it.
async fn node_dies_under_a_diagnosis(node: &Node, second: &Second, dir: &Path, namespace: &str) {
    let config = node.kubeconfig.as_path();
    let node_name = second.name.as_str();
    apply(
        config,
        dir,
        "on-the-failing-node.yaml",
        &three_steps(namespace, "node-dies", &format!("nodeName: {node_name}")),
    );
    let step1 = eventually(
        "the first step of Diagnosis node-dies",
        Duration::from_secs(180),
        async || {
            let status = diagnosis(config, namespace, "node-dies")["status"].clone();
            status["operationResults"]["operation.step1.output"]
                .as_str()
                .map(str::to_owned)
        },
    )
    .await;
    let stopped = Instant::now();
    let stopped_at = jiff::Timestamp::now();
    let down = second.down("stop", "start");
    eprintln!("node {node_name} stopped after the first step of Diagnosis node-dies");

    let reason = scheduled(config, namespace, "node-dies", "NodeNotReady").await;
    let message = reason["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.contains(&format!("node {node_name} is not Ready")),
        "{message}"
    );
    let running = diagnosis(config, namespace, "node-dies")["status"].clone();
    assert_eq!(running["phase"], "Running", "{running:#}");
    eprintln!(
        "{:.1} s after the stop, Diagnosis node-dies said: {message}",
        stopped.elapsed().as_secs_f64()
    );

    // Created while the node is down, with a deadline of 20 s: it fails, saying why.
    apply(
        config,
        dir,
        "deadline.yaml",
        &three_steps(
            namespace,
            "node-stays-down",
            &format!("nodeName: {node_name}\n  nodeNotReadyTimeoutSeconds: 20"),
        ),
    );
    let created = Instant::now();
    let failed = finished_diagnosis(
        config,
        namespace,
        "node-stays-down",
        Duration::from_secs(120),
    );
    assert_eq!(failed["phase"], "Failed", "{failed:#}");
    let complete = condition(&failed, "Complete").unwrap();
    assert_eq!(complete["reason"], "NodeNotReady", "{failed:#}");
    eprintln!(
        "Diagnosis node-stays-down, created while the node was down with \
         nodeNotReadyTimeoutSeconds 20, failed {:.1} s later: {}",
        created.elapsed().as_secs_f64(),
        complete["message"]
    );

    // The Trigger on the node controller's NodeNotReady Event.
    let object = dead_node_diagnosis(config, node_name).await;
    let since_stop = |at: &Value| {
        let at: jiff::Timestamp = at.as_str().unwrap().parse().unwrap();
        at.duration_since(stopped_at).as_secs_f64()
    };
    let created = since_stop(&object["metadata"]["creationTimestamp"]);
    let completed = since_stop(&object["status"]["completionTime"]);
    let dead = &object["status"];
    assert_eq!(dead["phase"], "Succeeded", "{dead:#}");
    assert!(
        dead["nodeName"].is_null(),
        "run in the controller: {dead:#}"
    );
    let results = &dead["operationResults"];
    let ready = results["collector.kubernetes.node.ready"]
        .as_str()
        .unwrap_or_default();
    assert_ne!(ready, "True", "{dead:#}");
    let lease: Value =
        serde_json::from_str(results["collector.kubernetes.node.lease"].as_str().unwrap()).unwrap();
    assert_eq!(lease["expired"], true, "{lease}");
    let events = results["collector.kubernetes.node.events"]
        .as_str()
        .unwrap();
    assert!(events.contains("NodeNotReady"), "{events}");
    let pods = results["collector.kubernetes.pod.list"].as_str().unwrap();
    assert!(pods.contains("operon-agent"), "its agent's Pod is listed");
    eprintln!(
        "the dead-node Trigger's Diagnosis about {node_name}, created {created:.0} s after \
         the stop (timestamps in whole seconds), succeeded {completed:.0} s after it: \
         Ready={ready}, the kubelet's Lease renewed {} s before",
        lease["secondsSinceRenewal"]
    );

    // Back: the agent resumes node-dies from its checkpoint.
    let started = Instant::now();
    down.undo();
    let status = succeeds_once(config, namespace, "node-dies").await;
    assert_eq!(
        status["operationResults"]["operation.step1.output"].as_str(),
        Some(step1.as_str()),
        "the first step did not run again"
    );
    let scheduled = condition(&status, "Scheduled").unwrap();
    eprintln!(
        "node {node_name} started: Diagnosis node-dies succeeded {:.1} s later, its first \
         step not run again (Scheduled: {})",
        started.elapsed().as_secs_f64(),
        scheduled["reason"]
    );
}

/// The first RFC 3339 time in a log line (text or JSON).
fn timestamp_in(line: &str) -> Option<jiff::Timestamp> {
    line.split(|c: char| c.is_whitespace() || c == '"')
        .find_map(|word| word.trim_end_matches(',').parse().ok())
}

/// The Lease changing hands: the new holder, when it took the Lease, and how long after
/// the old holder's last renewal.
struct Handover {
    holder: String,
    acquired: jiff::Timestamp,
    gap: Duration,
}

/// Polls the controller's Lease every 200 ms until a replica other than `old` holds it.
async fn handover(config: &Path, old: &str) -> Handover {
    let mut last_renewal = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (ok, out, _) = try_kubectl(
            config,
            &["-n", "operon", "get", "lease", "operon", "-o", "json"],
        );
        if ok {
            let lease: Value = serde_json::from_str(&out).unwrap();
            let spec = &lease["spec"];
            let holder = spec["holderIdentity"].as_str().unwrap_or_default();
            let pod = holder.rsplit_once('_').map_or(holder, |(pod, _)| pod);
            let time =
                |field: &str| -> Option<jiff::Timestamp> { spec[field].as_str()?.parse().ok() };
            if pod == old {
                last_renewal = time("renewTime").or(last_renewal);
            } else if !pod.is_empty() {
                let acquired = time("acquireTime").expect("the Lease's acquireTime");
                let renewed = last_renewal.expect("the old leader's renewal was seen");
                return Handover {
                    holder: pod.to_owned(),
                    acquired,
                    gap: acquired.duration_since(renewed).unsigned_abs(),
                };
            }
        }
        assert!(
            Instant::now() < deadline,
            "no replica but {old} took the Lease"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The controller replicas' Pods.
const CONTROLLER: &str = "app.kubernetes.io/name=operon,app.kubernetes.io/component=controller";

fn rolled_out(config: &Path) {
    kubectl(
        config,
        &[
            "-n",
            "operon",
            "rollout",
            "status",
            "deployment/operon",
            "--timeout=300s",
        ],
    );
}

/// Makes a replica on `node` the leader. Nothing moves a replica back to a node that
/// returned, so a standby elsewhere is deleted first: its replacement is spread onto
/// `node`; then the leader, while it is elsewhere.
async fn leader_on(config: &Path, node: &str) -> String {
    for _ in 0..4 {
        rolled_out(config);
        let replicas = pods_by_node(config, CONTROLLER);
        let leader = leader_pod(config);
        // Both replicas on `node` would both die with it.
        let elsewhere = replicas.keys().any(|n| n != node);
        if !replicas.contains_key(node) || !elsewhere {
            let standby = replicas
                .values()
                .find(|pods| pods.len() > 1)
                .or_else(|| replicas.values().next())
                .into_iter()
                .flatten()
                .find(|p| **p != leader)
                .unwrap_or(&leader)
                .clone();
            force_delete(config, &standby);
            // Wait for the Deployment to see the deletion before waiting for its rollout.
            tokio::time::sleep(Duration::from_secs(2)).await;
            continue;
        }
        if node_of(config, &leader) == node {
            return leader;
        }
        force_delete(config, &leader);
        new_leader(config, &leader).await;
    }
    panic!(
        "no leader on node {node}: replicas {:?}",
        pods_by_node(config, CONTROLLER)
    );
}

/// The leader's node stopped, then partitioned, under load.
async fn leader_node_fails(
    node: &Node,
    second: &Second,
    client: &kube::Client,
    namespace: &str,
    action: &'static str,
    undo: &'static str,
) {
    let config = node.kubeconfig.as_path();
    let leader = leader_on(config, &second.name).await;
    let load = Load::start(client, namespace, action, &node.pod_image);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let fault = Instant::now();
    let down = second.down(action, undo);
    let handover = handover(config, &leader).await;
    let took = fault.elapsed();
    let next = &handover.holder;
    eprintln!(
        "leader {leader}'s node {action}: {next} holds the Lease {:.1} s later, acquired \
         {:.1} s after the cut-off leader's last renewal",
        took.as_secs_f64(),
        handover.gap.as_secs_f64()
    );
    // A leader that cannot renew stops leading at its renew deadline (10 s after its
    // last renewal, operon serve's client-go timing), before the Lease it held can be
    // taken (15 s): no two leaders write at once.
    assert!(
        handover.gap >= Duration::from_secs(10),
        "the Lease was taken {:?} after the cut-off leader's last renewal, before its \
         renew deadline",
        handover.gap
    );
    // Past the Pods' eviction, so that the Service has dropped the dead replica.
    tokio::time::sleep(Duration::from_secs(40).saturating_sub(fault.elapsed())).await;
    let report = load
        .finish(
            &format!("leader's node {action}"),
            fault,
            Duration::from_secs(180),
        )
        .await;
    report.print();
    down.undo();
    if action == "partition" {
        // Its own log, when the kubelet still has it (it deletes the evicted Pod once
        // it hears of it again), says when it stopped leading.
        let (_, before, _) = try_kubectl(config, &["-n", "operon", "logs", "--previous", &leader]);
        let (_, now, _) = try_kubectl(config, &["-n", "operon", "logs", &leader]);
        let line = format!("{before}{now}")
            .lines()
            .find(|l| l.contains("stopped leading"))
            .map(str::to_owned);
        match line.as_deref().and_then(timestamp_in) {
            Some(at) => {
                assert!(
                    at <= handover.acquired,
                    "the cut-off replica stopped leading at {at}, after the other took the \
                     Lease at {}",
                    handover.acquired
                );
                eprintln!(
                    "the cut-off replica stopped leading at {at}, {:.1} s before the other \
                     took the Lease",
                    handover.acquired.duration_since(at).as_secs_f64()
                );
            }
            None => eprintln!("the cut-off replica's log was gone after the partition healed"),
        }
    }
    rolled_out(config);
}

/// The agents' DaemonSet and the controller's Deployment rolled out across both nodes
/// while a Diagnosis runs on each node and Pods and admission requests stream in:
/// every Pod labelled, every admission request answered, no finished step run again.
async fn rollouts(
    node: &Node,
    second: &Second,
    client: &kube::Client,
    dir: &Path,
    namespace: &str,
) {
    let config = node.kubeconfig.as_path();
    let (first, failing) = nodes(config, second);
    let load = Load::start(client, namespace, "rollout", &node.pod_image);
    apply(
        config,
        dir,
        "during-rollout.yaml",
        &three_steps(
            namespace,
            "during-rollout",
            &format!("targetSelector:\n    nodeNames: [{first}, {failing}]"),
        ),
    );
    let children = [
        format!("during-rollout-{first}"),
        format!("during-rollout-{failing}"),
    ];
    for child in &children {
        eventually(
            &format!("the first step of {child}"),
            Duration::from_secs(180),
            async || {
                let (ok, out, _) = try_kubectl(
                    config,
                    &["-n", namespace, "get", "diagnosis", child, "-o", "json"],
                );
                let status = serde_json::from_str::<Value>(&out).ok().filter(|_| ok)?;
                status["status"]["operationResults"]
                    .get("operation.step1.output")
                    .map(|_| ())
            },
        )
        .await;
    }
    let fault = Instant::now();
    for workload in ["daemonset/operon-agent", "deployment/operon"] {
        kubectl(config, &["-n", "operon", "rollout", "restart", workload]);
    }
    let mut took = Vec::new();
    for child in &children {
        succeeds_once(config, namespace, child).await;
        took.push(format!("{child} {:.1} s", fault.elapsed().as_secs_f64()));
    }
    for workload in ["daemonset/operon-agent", "deployment/operon"] {
        kubectl(
            config,
            &[
                "-n",
                "operon",
                "rollout",
                "status",
                workload,
                "--timeout=300s",
            ],
        );
    }
    let rolled = fault.elapsed();
    let report = load
        .finish(
            "rollouts of the agents and the controller",
            fault,
            Duration::from_secs(180),
        )
        .await;
    report.print();
    eprintln!(
        "both rollouts done {:.1} s after they began; the Diagnoses on both nodes succeeded \
         with no finished step run again ({})",
        rolled.as_secs_f64(),
        took.join(", ")
    );
}

#[tokio::test]
async fn operon_on_two_nodes_and_a_node_that_dies() {
    let Some(node) = node() else { return };
    let Some(second) = second() else { return };
    let config = node.kubeconfig.as_path();
    let (dir, client, scratch) = install_for_load(&node, "e2e-two", None).await;
    let namespace = scratch.name.as_str();
    kubectl(
        config,
        &[
            "apply",
            "-k",
            repo().join("deploy/builtins").to_str().unwrap(),
        ],
    );
    let example = repo().join("operations/examples/dead-node");
    for file in ["pipeline.yaml", "trigger.yaml"] {
        kubectl(
            config,
            &["apply", "-f", example.join(file).to_str().unwrap()],
        );
    }
    // OPERON_E2E_NODE_TWO_ONLY=placement,diagnosis (say) runs only some of placement,
    // diagnosis, rollout, stop, partition (in that order).
    let only = std::env::var("OPERON_E2E_NODE_TWO_ONLY").unwrap_or_default();
    let runs = |part: &str| only.is_empty() || only.split(',').any(|p| p.trim() == part);
    if runs("placement") {
        placement(&node, &second, dir.path(), namespace).await;
    }
    if runs("diagnosis") {
        node_dies_under_a_diagnosis(&node, &second, dir.path(), namespace).await;
    }
    if runs("rollout") {
        rollouts(&node, &second, &client, dir.path(), namespace).await;
    }
    if runs("stop") {
        leader_node_fails(&node, &second, &client, namespace, "stop", "start").await;
    }
    if runs("partition") {
        leader_node_fails(&node, &second, &client, namespace, "partition", "heal").await;
    }
}
