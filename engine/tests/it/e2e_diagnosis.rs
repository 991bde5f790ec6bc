//! End to end against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): Diagnoses run by the
//! controller of `operon serve` and by `operon agent` on their node; a controller
//! killed mid-run resumes without running a finished node again; results too large for
//! the status land in an owned ConfigMap.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::e2e_support::*;

/// Each test's `operon serve` leads in a namespace of its own and reconciles every
/// Diagnosis of the cluster, looking for agents' Leases in its namespace: run side by
/// side, one test's controller would mark another's Diagnosis as having no agent.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

fn new_diagnosis(name: &str, spec: Value) -> DynamicObject {
    object(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
        "metadata": {"name": name}, "spec": spec,
    }))
}

/// A scratch directory holding an empty hooks directory: `operon serve` with it runs
/// its controllers and no hook.
fn no_hooks() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    (dir, hooks)
}

fn script_operation(name: &str, key: &str, script: &str) -> DynamicObject {
    object(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
        "metadata": {"name": name},
        "spec": {"processor": {"timeoutSeconds": 30,
                 "scriptRunner": {"operationResultKey": key, "script": script}}},
    }))
}

fn diagnoses(cluster: &operon::cluster::kube::KubeCluster, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        cluster.client().clone(),
        namespace,
        &operon_resource("Diagnosis"),
    )
}

async fn status_when(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    limit: Duration,
    check: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, limit, async || {
        let d = api.get(name).await.ok()?;
        let status = d.data.get("status")?.clone();
        check(&status).then_some(status)
    })
    .await
}

fn node_ids(status: &Value) -> Vec<i64> {
    status["nodes"]
        .as_array()
        .map(|nodes| nodes.iter().filter_map(|n| n["id"].as_i64()).collect())
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn a_killed_controller_resumes_a_diagnosis_without_rerunning_finished_nodes() {
    let path = kubeconfig();
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-diagnosis").await;
    let run = format!("{:08x}", getrandom_u32());
    let (a, big, slow, set) = (
        format!("e2e-a-{run}"),
        format!("e2e-big-{run}"),
        format!("e2e-slow-{run}"),
        format!("e2e-chain-{run}"),
    );
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("operation.operon.dev", a.clone()),
            ("operation.operon.dev", big.clone()),
            ("operation.operon.dev", slow.clone()),
            ("operationset.operon.dev", set.clone()),
        ],
    };
    apply_operon_crds(&cluster).await;
    let operations = operon_api(&cluster, "Operation");
    let post = PostParams::default();
    for op in [
        script_operation(&a, "first", "echo first"),
        // 70,000 bytes: over the 64 KiB a status value may hold.
        script_operation(&big, "big", "head -c 70000 /dev/zero | tr '\\0' x"),
        script_operation(&slow, "slow", "sleep 4; echo done"),
    ] {
        operations.create(&post, &op).await.unwrap();
    }
    operon_api(&cluster, "OperationSet")
        .create(&post, &chain(&set, &[&a, &big, &slow]))
        .await
        .unwrap();
    let (_dir, hooks) = no_hooks();
    let flags = ["--leader-election-namespace", scratch.name.as_str()];
    let first = serve(&path, &hooks, &flags, "diagnosis-1");
    let api = diagnoses(&cluster, &scratch.name);
    api.create(
        &post,
        &new_diagnosis("resumed", json!({"operationSet": set})),
    )
    .await
    .unwrap();

    // Kill the controller while node 3 (the slow one) runs.
    let before = status_when(
        &api,
        "resumed",
        "node 3 running",
        Duration::from_secs(90),
        |s| s["currentNode"]["id"] == 3,
    )
    .await;
    assert_eq!(node_ids(&before), [1, 2]);
    assert_eq!(before["phase"], "Running");
    drop(first);
    let _second = serve(&path, &hooks, &flags, "diagnosis-2");
    let done = status_when(&api, "resumed", "Succeeded", Duration::from_secs(90), |s| {
        s["phase"] == "Succeeded"
    })
    .await;
    assert_eq!(
        node_ids(&done),
        [1, 2, 3],
        "each node recorded once: {done}"
    );
    assert_eq!(
        done["nodes"][0], before["nodes"][0],
        "node 1 was not run again"
    );
    assert_eq!(
        done["nodes"][1], before["nodes"][1],
        "node 2 was not run again"
    );
    assert!(done.get("currentNode").is_none());
    assert_eq!(
        done["operationResults"]["operation.first.output"],
        "first\n"
    );
    assert_eq!(done["operationResults"]["operation.slow.output"], "done\n");

    // The large result is in the Diagnosis' ConfigMap, not its status.
    assert_eq!(done["resultsConfigMap"], "resumed-results");
    let offloaded: Vec<&str> = done["resultsInConfigMap"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(offloaded, ["operation.big.output"]);
    assert!(
        done["operationResults"]
            .get("operation.big.output")
            .is_none()
    );
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client().clone(), &scratch.name);
    let map = maps.get("resumed-results").await.unwrap();
    assert_eq!(map.data.unwrap()["operation.big.output"].len(), 70_000);
    let owner = &map.metadata.owner_references.unwrap()[0];
    let diagnosis = api.get("resumed").await.unwrap();
    assert_eq!(Some(&owner.uid), diagnosis.metadata.uid.as_ref());
    let conditions = done["conditions"].as_array().unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "Accepted" && c["status"] == "True"),
        "{conditions:?}"
    );

    // `operon graph` draws the live Diagnosis.
    let drawn = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args([
            "graph",
            "--cluster",
            "--diagnosis",
            "resumed",
            "--format",
            "mermaid",
        ])
        .args(["-n", &scratch.name, "--kubeconfig"])
        .arg(&path)
        .output()
        .unwrap();
    let picture = String::from_utf8_lossy(&drawn.stdout);
    assert!(
        drawn.status.success(),
        "{}",
        String::from_utf8_lossy(&drawn.stderr)
    );
    assert!(picture.contains("class n1,n2,n3 succeeded"), "{picture}");
}

/// A Node and a one-step OperationSet whose script step records its output under
/// `key`; removed when dropped.
struct OneStep {
    node: String,
    op: String,
    set: String,
    _cleanup: ClusterScoped,
}

async fn one_step_on_a_node(
    cluster: &operon::cluster::kube::KubeCluster,
    path: &Path,
    key: &str,
    script: &str,
) -> OneStep {
    let run = format!("{:08x}", getrandom_u32());
    let (node, op, set) = (
        format!("e2e-node-{run}"),
        format!("e2e-{key}-{run}"),
        format!("e2e-one-{run}"),
    );
    let cleanup = ClusterScoped {
        kubeconfig: path.to_owned(),
        objects: vec![
            ("node", node.clone()),
            ("operation.operon.dev", op.clone()),
            ("operationset.operon.dev", set.clone()),
        ],
    };
    apply_operon_crds(cluster).await;
    let post = PostParams::default();
    let nodes: Api<Node> = Api::all(cluster.client().clone());
    nodes
        .create(
            &post,
            &serde_json::from_value(json!({"metadata": {"name": node}})).unwrap(),
        )
        .await
        .unwrap();
    operon_api(cluster, "Operation")
        .create(&post, &script_operation(&op, key, script))
        .await
        .unwrap();
    operon_api(cluster, "OperationSet")
        .create(&post, &chain(&set, &[&op]))
        .await
        .unwrap();
    OneStep {
        node,
        op,
        set,
        _cleanup: cleanup,
    }
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn a_diagnosis_about_a_node_waits_for_its_agent_and_runs_there() {
    let path = kubeconfig();
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-agent").await;
    // Bound whole: its cleanup runs when the test ends.
    let one = one_step_on_a_node(&cluster, &path, "where", "echo here").await;
    let (node, op, set) = (one.node.clone(), one.op.clone(), one.set.clone());
    let post = PostParams::default();
    let (dir, hooks) = no_hooks();
    let flags = ["--leader-election-namespace", scratch.name.as_str()];
    let _server = serve(&path, &hooks, &flags, "agent-controller");
    let api = diagnoses(&cluster, &scratch.name);
    let spec = json!({"operationSet": set, "nodeName": node});
    api.create(&post, &new_diagnosis("on-node", spec))
        .await
        .unwrap();
    let waiting = status_when(&api, "on-node", "NoAgent", Duration::from_secs(60), |s| {
        s["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["reason"] == "NoAgent"))
    })
    .await;
    assert_eq!(waiting["phase"], "Pending");
    assert_eq!(waiting["nodeName"], node.as_str());

    let _agent = agent(&path, &node, &scratch.name, dir.path(), &[]);
    let done = status_when(&api, "on-node", "Succeeded", Duration::from_secs(90), |s| {
        s["phase"] == "Succeeded"
    })
    .await;
    assert_eq!(node_ids(&done), [1]);
    let leases: Api<Lease> = Api::namespaced(cluster.client().clone(), &scratch.name);
    let lease = leases
        .get(&format!("operon-agent-{node}"))
        .await
        .expect("the agent holds its node's Lease");
    assert!(
        lease.spec.unwrap().holder_identity.is_some(),
        "held by the running agent"
    );

    // The step ran from the agent's script store, which follows the Operations.
    let script = dir.path().join("scripts").join(&op);
    assert_eq!(std::fs::read_to_string(&script).unwrap(), "echo here");
    operon_api(&cluster, "Operation")
        .delete(&op, &Default::default())
        .await
        .unwrap();
    eventually("the script removed", Duration::from_secs(30), async || {
        (!script.exists()).then_some(())
    })
    .await;
}

fn built_in_operation(name: &str, path: &str) -> DynamicObject {
    object(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
        "metadata": {"name": name},
        "spec": {"processor": {"timeoutSeconds": 30, "httpServer": {"path": path}}},
    }))
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn the_agent_s_built_ins_list_the_node_s_pods_and_cordon_only_for_an_allowed_account() {
    let path = kubeconfig();
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-builtins").await;
    let ns = scratch.name.as_str();
    let run = format!("{:08x}", getrandom_u32());
    let (node, pods, cordon, set, role) = (
        format!("e2e-node-{run}"),
        format!("e2e-pods-{run}"),
        format!("e2e-cordon-{run}"),
        format!("e2e-repair-{run}"),
        format!("e2e-cordoner-{run}"),
    );
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("node", node.clone()),
            ("operation.operon.dev", pods.clone()),
            ("operation.operon.dev", cordon.clone()),
            ("operationset.operon.dev", set.clone()),
            ("clusterrole", role.clone()),
            ("clusterrolebinding", role.clone()),
        ],
    };
    apply_operon_crds(&cluster).await;
    let post = PostParams::default();
    let client = cluster.client().clone();
    let create = |value: Value| {
        let client = client.clone();
        async move {
            let object: DynamicObject = serde_json::from_value(value.clone()).unwrap();
            let (group, version) = value["apiVersion"]
                .as_str()
                .unwrap()
                .rsplit_once('/')
                .map_or(("", value["apiVersion"].as_str().unwrap()), |(g, v)| (g, v));
            let gvk =
                kube::api::GroupVersionKind::gvk(group, version, value["kind"].as_str().unwrap());
            let (resource, caps) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
            let api: Api<DynamicObject> =
                match (caps.scope, value["metadata"]["namespace"].as_str()) {
                    (kube::discovery::Scope::Namespaced, Some(ns)) => {
                        Api::namespaced_with(client, ns, &resource)
                    }
                    _ => Api::all_with(client, &resource),
                };
            api.create(&PostParams::default(), &object).await.unwrap();
        }
    };
    create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})).await;
    create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "on-the-node", "namespace": ns},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]}}))
    .await;
    // Two accounts: `repairer` may patch this node, `bystander` may not.
    for account in ["repairer", "bystander"] {
        create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": ns}}))
        .await;
    }
    create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"],
                   "resourceNames": [node]}]}),
    )
    .await;
    create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "repairer", "namespace": ns}]}),
    )
    .await;
    operon_api(&cluster, "Operation")
        .create(
            &post,
            &built_in_operation(&pods, "/processor/podListCollector"),
        )
        .await
        .unwrap();
    operon_api(&cluster, "Operation")
        .create(&post, &built_in_operation(&cordon, "/processor/nodeCordon"))
        .await
        .unwrap();
    operon_api(&cluster, "OperationSet")
        .create(&post, &chain(&set, &[&pods, &cordon]))
        .await
        .unwrap();
    let (dir, hooks) = no_hooks();
    let flags = ["--leader-election-namespace", ns];
    let _server = serve(&path, &hooks, &flags, "builtins-controller");
    let _agent = agent(&path, &node, ns, dir.path(), &[]);
    let api = diagnoses(&cluster, ns);
    let nodes: Api<Node> = Api::all(cluster.client().clone());

    let spec = json!({"operationSet": set, "nodeName": node, "serviceAccountName": "bystander"});
    api.create(&post, &new_diagnosis("refused", spec))
        .await
        .unwrap();
    let refused = status_when(&api, "refused", "Failed", Duration::from_secs(90), |s| {
        s["phase"] == "Failed"
    })
    .await;
    let listed: Value = serde_json::from_str(
        refused["operationResults"]["collector.kubernetes.pod.list"]
            .as_str()
            .expect("the pod list ran before the refused cordon"),
    )
    .unwrap();
    assert_eq!(listed[0]["metadata"]["name"], "on-the-node");
    assert!(
        refused.to_string().contains(&format!(
            "nodeCordon refused: ServiceAccount {ns}/bystander (spec.serviceAccountName of Diagnosis {ns}/refused) may not patch nodes/{node}"
        )),
        "{refused}"
    );
    let untouched = nodes.get(&node).await.unwrap();
    assert_ne!(
        untouched.spec.and_then(|s| s.unschedulable),
        Some(true),
        "a refused cordon leaves the node schedulable"
    );

    let spec = json!({"operationSet": set, "nodeName": node, "serviceAccountName": "repairer"});
    api.create(&post, &new_diagnosis("allowed", spec))
        .await
        .unwrap();
    let done = status_when(&api, "allowed", "Succeeded", Duration::from_secs(90), |s| {
        s["phase"] == "Succeeded"
    })
    .await;
    assert_eq!(
        done["operationResults"]["recover.kubernetes.node_cordon.result.name"],
        node.as_str()
    );
    let cordoned = nodes.get(&node).await.unwrap();
    assert_eq!(cordoned.spec.and_then(|s| s.unschedulable), Some(true));
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn a_stopping_agent_lets_the_running_diagnosis_finish() {
    let path = kubeconfig();
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-drain").await;
    let one = one_step_on_a_node(&cluster, &path, "slow", "sleep 6; echo finished").await;
    let (node, set) = (one.node.clone(), one.set.clone());
    let post = PostParams::default();
    let (dir, hooks) = no_hooks();
    let flags = ["--leader-election-namespace", scratch.name.as_str()];
    let _server = serve(&path, &hooks, &flags, "drain-controller");
    let mut agent = agent(&path, &node, &scratch.name, dir.path(), &[]);
    let api = diagnoses(&cluster, &scratch.name);
    let spec = json!({"operationSet": set, "nodeName": node});
    api.create(&post, &new_diagnosis("slow", spec))
        .await
        .unwrap();
    status_when(
        &api,
        "slow",
        "node 1 running",
        Duration::from_secs(60),
        |s| s["currentNode"]["id"] == 1,
    )
    .await;

    // SIGTERM while the step sleeps: the agent waits for it, records it, then exits.
    let stopping = std::time::Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &agent.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || {
        let exit = agent.0.wait().unwrap();
        std::mem::forget(agent);
        exit
    })
    .await
    .unwrap();
    let took = stopping.elapsed();
    assert!(exit.success(), "the agent exits cleanly: {exit:?}");
    assert!(
        took < Duration::from_secs(25),
        "it stops once the run ended, not at the grace period: {took:?}"
    );
    let d = api.get("slow").await.unwrap();
    let status = &d.data["status"];
    let log = std::fs::read_to_string(dir.path().join("agent.log")).unwrap_or_default();
    assert_eq!(status["phase"], "Succeeded", "{status}\nagent log:\n{log}");
    assert_eq!(
        status["operationResults"]["operation.slow.output"],
        "finished\n"
    );
}
