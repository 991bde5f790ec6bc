//! Where things run on two nodes: agents, replicas, a Diagnosis over both nodes,
//! Job steps by their node selection, and both rollouts under load.

use super::*;

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
pub(super) async fn placement(node: &Node, second: &Second, dir: &Path, namespace: &str) {
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

/// The agents' DaemonSet and the controller's Deployment rolled out across both nodes
/// while a Diagnosis runs on each node and Pods and admission requests stream in:
/// every Pod labelled, every admission request answered, no finished step run again.
pub(super) async fn rollouts(
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
        first_step(config, namespace, child).await;
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
