//! A node that dies under a Diagnosis, one created while it is down, and the
//! dead-node Trigger's Diagnosis about it.

use super::*;

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
pub(super) async fn node_dies_under_a_diagnosis(
    node: &Node,
    second: &Second,
    dir: &Path,
    namespace: &str,
) {
    let config = node.kubeconfig.as_path();
    let node_name = second.name.as_str();
    apply(
        config,
        dir,
        "on-the-failing-node.yaml",
        &three_steps(namespace, "node-dies", &format!("nodeName: {node_name}")),
    );
    let step1 = first_step(config, namespace, "node-dies").await;
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
