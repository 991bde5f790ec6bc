//! Operon on two nodes where Pods really run, and one of them dying (only with
//! `OPERON_E2E_NODE_TWO`, the node that may fail, and `OPERON_E2E_NODE_FAULT`, a
//! command run as `COMMAND stop|start|partition|heal NODE`, beside the variables of
//! `e2e_node`; ignored unless run with `--ignored`, and then failing without them). Run
//! it where the cluster's Service and Pod addresses are reachable, as `e2e_node`; the
//! other node must not fail (it may carry the control plane).
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
//! - webhooks that not every replica could answer: an addon-operator module's (the
//!   guard module of operations/fixtures/module-webhooks, run by the leader, its
//!   reviews forwarded by the follower) and a Hook object's (loaded on both), with both
//!   replicas up and while the leader's node is stopped;
//! - the leader on the failing node, under load (Pods for the labelling hooks,
//!   ConfigMaps for the admission hooks): stopped, then partitioned. Each reports the
//!   time to a new leader, how long admission requests were refused and until labels
//!   flowed again, and checks that the Lease changed hands no sooner than the cut-off
//!   leader's renew deadline after its last renewal, when it has stopped leading (no
//!   two leaders; its own log says so too when it survives the heal).

mod leader;
mod node_dies;
mod placement;
mod webhooks;

use crate::e2e_node::{
    Node, finished_diagnosis, force_delete, grant_module_reader, install_for_load_with, leader_pod,
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

/// The second node, from `OPERON_E2E_NODE_TWO` and `OPERON_E2E_NODE_FAULT`; run with
/// `--ignored` without them, the test fails here, naming the variable.
#[track_caller]
fn second() -> Second {
    Second {
        name: required(
            "OPERON_E2E_NODE_TWO",
            "the name of a second node, the one the test fails",
        ),
        fault: required(
            "OPERON_E2E_NODE_FAULT",
            "the command that stops and starts the second node (see the module doc)",
        ),
    }
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

/// The result of the first of [`three_steps`], once Diagnosis `name` (which may not
/// exist yet: a child is created by its parent) has it.
async fn first_step(config: &Path, namespace: &str, name: &str) -> String {
    eventually(
        &format!("the first step of Diagnosis {name}"),
        Duration::from_secs(180),
        async || {
            let (ok, out, _) = try_kubectl(
                config,
                &["-n", namespace, "get", "diagnosis", name, "-o", "json"],
            );
            let object = serde_json::from_str::<Value>(&out).ok().filter(|_| ok)?;
            object["status"]["operationResults"]["operation.step1.output"]
                .as_str()
                .map(str::to_owned)
        },
    )
    .await
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

#[tokio::test]
#[ignore = "needs two nodes: set OPERON_E2E_NODE_KUBECONFIG, OPERON_E2E_NODE_IMAGE, OPERON_E2E_NODE_TWO and OPERON_E2E_NODE_FAULT"]
async fn operon_on_two_nodes_and_a_node_that_dies() {
    let node = node();
    let second = second();
    let config = node.kubeconfig.as_path();
    let (dir, client, scratch) =
        install_for_load_with(&node, "e2e-two", None, webhooks::add_module_guard).await;
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
    // diagnosis, rollout, stop, partition, webhooks (in that order).
    let only = std::env::var("OPERON_E2E_NODE_TWO_ONLY").unwrap_or_default();
    let runs = |part: &str| only.is_empty() || only.split(',').any(|p| p.trim() == part);
    if runs("placement") {
        placement::placement(&node, &second, dir.path(), namespace).await;
    }
    if runs("diagnosis") {
        node_dies::node_dies_under_a_diagnosis(&node, &second, dir.path(), namespace).await;
    }
    if runs("rollout") {
        placement::rollouts(&node, &second, &client, dir.path(), namespace).await;
    }
    if runs("stop") {
        leader::leader_node_fails(&node, &second, &client, namespace, "stop", "start").await;
    }
    if runs("partition") {
        leader::leader_node_fails(&node, &second, &client, namespace, "partition", "heal").await;
    }
    // Last: it stops the leader's node too, and leaves the replicas where that put them.
    if runs("webhooks") {
        webhooks::webhooks_of_hooks_and_modules(&node, &second, dir.path()).await;
    }
}
