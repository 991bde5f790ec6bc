//! A Diagnosis whose node goes down, against a mock API server: the `Scheduled`
//! condition names the node and its Ready state, the Diagnosis fails after its
//! deadline, and the agent's writes keep the controller's condition instead of
//! stopping the run over it.

use super::node_down::NODE_NOT_READY;
use super::placement::NodeHealth;
use super::status::{Limits, StatusWriter};
use super::tests::{answer_put, context, diagnosis, ready_node};
use super::*;
use operon_cluster::kube::mock;
use serde_json::{Value, json};

/// A Node whose kubelet stopped posting its status `minutes` ago.
fn unknown_node(name: &str, since: jiff::Timestamp) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
           "status": {"conditions": [{"type": "Ready", "status": "Unknown",
                                      "reason": "NodeStatusUnknown",
                                      "message": "Kubelet stopped posting node status.",
                                      "lastTransitionTime": since.to_string()}]}})
}

/// Condition `type_` of a status as sent.
fn condition(status: &Value, type_: &str) -> Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
        .unwrap_or(Value::Null)
}

fn scheduled(status: &Value) -> Value {
    condition(status, SCHEDULED)
}

/// `d` with one more result, as its agent's run would have it.
fn with_result(d: &Diagnosis, key: &str, value: &str) -> Diagnosis {
    let mut d = d.clone();
    let status = d.status.get_or_insert_with(Default::default);
    status
        .operation_results
        .insert(key.to_owned(), value.to_owned());
    d
}

/// A Diagnosis placed on `worker-2` whose agent started it.
fn started_on_worker_2(created: jiff::Timestamp) -> Diagnosis {
    let mut d = diagnosis(Some(json!({
        "phase": "Running", "nodeName": "worker-2", "startTime": created.to_string(),
        "conditions": [{"type": "Scheduled", "status": "True", "reason": "AgentRunning",
                        "message": "the agent of node worker-2 runs this Diagnosis",
                        "lastTransitionTime": created.to_string()}],
    })));
    d.spec.node_name = Some("worker-2".to_owned());
    d.metadata.creation_timestamp = Some(Time(created));
    d
}

#[tokio::test]
async fn a_running_diagnosis_whose_node_is_down_says_so_and_waits_for_it() {
    let (client, mut api) = mock::pair();
    let created = now() - jiff::SignedDuration::from_secs(60);
    let down = now() - jiff::SignedDuration::from_secs(30);
    let d = started_on_worker_2(created);
    let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(client)));
    api.next()
        .await
        .answer(200, serde_json::to_value(&d).unwrap());
    // Its agent's Lease went with the node.
    let lease = api.next().await;
    assert_eq!(
        lease.uri,
        "/apis/coordination.k8s.io/v1/namespaces/operon/leases/operon-agent-worker-2"
    );
    lease.fail(
        404,
        "NotFound",
        "leases \"operon-agent-worker-2\" not found",
    );
    let node = api.next().await;
    assert_eq!(node.uri, "/api/v1/nodes/worker-2");
    node.answer(200, unknown_node("worker-2", down));
    let put = answer_put(&mut api, 11).await;
    let status = &put["status"];
    assert_eq!(
        status["phase"], "Running",
        "its record stays as the agent left it"
    );
    let condition = scheduled(status);
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], NODE_NOT_READY);
    let message = condition["message"].as_str().unwrap();
    for part in [
        "node worker-2 is not Ready (Ready=Unknown since",
        "NodeStatusUnknown: Kubelet stopped posting node status.",
        "resumes it from its checkpoint",
        "600s after the node went down",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    // Woken for its deadline (the Node watch wakes it sooner when the node changes).
    assert_eq!(
        reconciling.await.unwrap().unwrap(),
        Action::requeue(AGENT_POLL)
    );
    api.quiet().await;
}

#[tokio::test]
async fn a_diagnosis_fails_when_its_node_stays_down_past_its_deadline() {
    let (client, mut api) = mock::pair();
    let created = now() - jiff::SignedDuration::from_secs(300);
    let down = now() - jiff::SignedDuration::from_secs(200);
    let mut d = started_on_worker_2(created);
    d.spec.node_not_ready_timeout_seconds = Some(120);
    let failed_before = super::metrics::count("controller", "Failed");
    let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(client)));
    api.next()
        .await
        .answer(200, serde_json::to_value(&d).unwrap());
    api.next().await.fail(
        404,
        "NotFound",
        "leases \"operon-agent-worker-2\" not found",
    );
    api.next().await.answer(200, unknown_node("worker-2", down));
    let put = answer_put(&mut api, 11).await;
    let status = &put["status"];
    assert_eq!(status["phase"], "Failed");
    assert!(status["completionTime"].is_string());
    let complete = condition(status, operon_pipeline::COMPLETE);
    assert_eq!(complete["reason"], NODE_NOT_READY);
    let message = complete["message"].as_str().unwrap();
    assert!(
        message.contains("node worker-2 is not Ready")
            && message.contains("120s")
            && message.contains("spec.nodeNotReadyTimeoutSeconds"),
        "{message}"
    );
    assert_eq!(reconciling.await.unwrap().unwrap(), Action::await_change());
    assert!(super::metrics::count("controller", "Failed") > failed_before);
    api.quiet().await;
}

#[tokio::test]
async fn the_deadline_counts_from_the_diagnosis_when_the_node_was_down_before_it() {
    let (client, mut api) = mock::pair();
    // Down for an hour, the Diagnosis created 10 s ago with a 120 s deadline: it waits.
    let created = now() - jiff::SignedDuration::from_secs(10);
    let down = now() - jiff::SignedDuration::from_secs(3600);
    let mut d = diagnosis(None);
    d.spec.node_name = Some("worker-2".to_owned());
    d.spec.node_not_ready_timeout_seconds = Some(120);
    d.metadata.creation_timestamp = Some(Time(created));
    let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(client)));
    api.next()
        .await
        .answer(200, serde_json::to_value(&d).unwrap());
    // Placed: the Node exists.
    api.next().await.answer(200, unknown_node("worker-2", down));
    api.next().await.fail(
        404,
        "NotFound",
        "leases \"operon-agent-worker-2\" not found",
    );
    api.next().await.answer(200, unknown_node("worker-2", down));
    let put = answer_put(&mut api, 11).await;
    let status = &put["status"];
    assert_eq!(status["phase"], "Pending");
    assert_eq!(status["nodeName"], "worker-2");
    let condition = scheduled(status);
    assert_eq!(condition["reason"], NODE_NOT_READY);
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("its agent runs it when the node is Ready again"),
        "{condition}"
    );
    let action = reconciling.await.unwrap().unwrap();
    assert_eq!(action, Action::requeue(AGENT_POLL));
    api.quiet().await;
}

#[tokio::test]
async fn a_node_back_with_its_agent_is_said_to_run_it_again() {
    let (client, mut api) = mock::pair();
    let created = now() - jiff::SignedDuration::from_secs(60);
    let mut d = started_on_worker_2(created);
    let status = d.status.as_mut().unwrap();
    status.conditions[0] = Condition::new(
        SCHEDULED,
        ConditionStatus::False,
        NODE_NOT_READY,
        "node worker-2 is not Ready".to_owned(),
    );
    let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(client)));
    api.next()
        .await
        .answer(200, serde_json::to_value(&d).unwrap());
    // Its agent holds the Lease again: no need to look at the node.
    let lease = api.next().await;
    assert_eq!(
        lease.uri,
        "/apis/coordination.k8s.io/v1/namespaces/operon/leases/operon-agent-worker-2"
    );
    lease.answer(
        200,
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "operon-agent-worker-2"},
               "spec": {"holderIdentity": "agent-x", "leaseDurationSeconds": 15,
                        "renewTime": now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}}),
    );
    let put = answer_put(&mut api, 11).await;
    let condition = scheduled(&put["status"]);
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "AgentRunning");
    assert_eq!(
        reconciling.await.unwrap().unwrap(),
        Action::requeue(AGENT_POLL)
    );
    api.quiet().await;
}

#[tokio::test]
async fn a_diagnosis_run_in_the_controller_about_a_node_never_looks_at_the_node() {
    let (client, mut api) = mock::pair();
    let mut d = diagnosis(None);
    d.spec.node_name = Some("worker-2".to_owned());
    d.spec.run_on = Some(operon_data::api::DiagnosisRunOn::Controller);
    let placing = tokio::spawn(async move { placement::resolve(&client, &d).await });
    assert_eq!(placing.await.unwrap().unwrap(), Ok(None));
    api.quiet().await;
}

#[tokio::test]
async fn the_agent_keeps_the_controllers_condition_over_a_conflict_it_caused() {
    let (client, mut api) = mock::pair();
    let created = now() - jiff::SignedDuration::from_secs(60);
    let d = started_on_worker_2(created);
    let progressed = with_result(&d, "result.a", "x");
    let more = with_result(&progressed, "result.b", "y");
    let writing = tokio::spawn(async move {
        let mut writer = StatusWriter::new(client, &d, Limits::default()).keeping_placement();
        let first = writer.write(&progressed).await;
        let second = writer.write(&more).await;
        (first, second)
    });
    // Meanwhile the controller wrote that the node was down (the agent's step ran on).
    let put = api.next().await;
    put.fail(409, "Conflict", "the object has been modified");
    let get = api.next().await;
    let mut current = serde_json::to_value(started_on_worker_2(created)).unwrap();
    current["metadata"]["resourceVersion"] = json!("12");
    current["status"]["conditions"][0] = json!({
        "type": "Scheduled", "status": "False", "reason": NODE_NOT_READY,
        "message": "node worker-2 is not Ready", "lastTransitionTime": now().to_string()});
    get.answer(200, current);
    let retried = answer_put(&mut api, 13).await;
    assert_eq!(retried["metadata"]["resourceVersion"], "12");
    assert_eq!(retried["status"]["operationResults"]["result.a"], "x");
    assert_eq!(scheduled(&retried["status"])["reason"], NODE_NOT_READY);
    // The next write carries the controller's condition too, not the agent's old copy.
    let next = answer_put(&mut api, 14).await;
    assert_eq!(next["metadata"]["resourceVersion"], "13");
    assert_eq!(scheduled(&next["status"])["reason"], NODE_NOT_READY);
    let (first, second) = writing.await.unwrap();
    first.unwrap();
    second.unwrap();
    api.quiet().await;
}

#[tokio::test]
async fn the_agent_still_stops_when_the_controller_failed_the_diagnosis() {
    let (client, mut api) = mock::pair();
    let created = now() - jiff::SignedDuration::from_secs(60);
    let d = started_on_worker_2(created);
    let progressed = with_result(&d, "result.a", "x");
    let writing = tokio::spawn(async move {
        let mut writer = StatusWriter::new(client, &d, Limits::default()).keeping_placement();
        writer.write(&progressed).await
    });
    api.next()
        .await
        .fail(409, "Conflict", "the object has been modified");
    let mut current = serde_json::to_value(started_on_worker_2(created)).unwrap();
    current["metadata"]["resourceVersion"] = json!("12");
    current["status"]["phase"] = json!("Failed");
    api.next().await.answer(200, current);
    let outcome = writing.await.unwrap();
    assert!(
        matches!(outcome, Err(status::StatusError::Conflict { .. })),
        "{outcome:?}"
    );
    api.quiet().await;
}

#[test]
fn a_node_change_wakes_the_unfinished_diagnoses_placed_on_it() {
    let on_2 = Arc::new(diagnosis(Some(
        json!({"phase": "Running", "nodeName": "worker-2"}),
    )));
    let done = Arc::new(diagnosis(Some(
        json!({"phase": "Failed", "nodeName": "worker-2"}),
    )));
    let on_1 = Arc::new(diagnosis(Some(
        json!({"phase": "Pending", "nodeName": "worker-1"}),
    )));
    assert_eq!(placed_on(&[on_2, done, on_1.clone()], "worker-2").len(), 1);
    assert_eq!(placed_on(&[on_1], "worker-3").len(), 0);
}

#[test]
fn a_nodes_health_is_its_ready_condition() {
    let ready: Node = serde_json::from_value(ready_node("a")).unwrap();
    assert_eq!(placement::health_of(&ready), NodeHealth::Ready);
    let since: jiff::Timestamp = "2026-11-23T10:00:00Z".parse().unwrap();
    let down: Node = serde_json::from_value(unknown_node("a", since)).unwrap();
    let health = placement::health_of(&down);
    assert_eq!(
        health.describe("a"),
        "node a is not Ready (Ready=Unknown since 2026-11-23T10:00:00Z, NodeStatusUnknown: \
         Kubelet stopped posting node status.)"
    );
    let silent: Node = serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap();
    let unreported = placement::health_of(&silent);
    assert!(
        unreported
            .describe("a")
            .contains("has not reported its Ready condition")
    );
    assert!(!unreported.is_down(), "nothing says a silent node is down");
    assert!(health.is_down() && NodeHealth::Gone.is_down());
    assert_eq!(NodeHealth::Gone.describe("a"), "node a no longer exists");
}
