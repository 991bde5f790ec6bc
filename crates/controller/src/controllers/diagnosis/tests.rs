//! The Diagnosis controller's writes against a mock API server: exact requests, the
//! resourceVersion chain, one write per node plus one to finish, conflicts, and the
//! results ConfigMap.

use super::status::{self, Limits, StatusError, StatusWriter};
use super::*;
use futures::future::BoxFuture;
use operon_cluster::kube::mock::{self, MockApi};
use operon_pipeline::Step;
use operon_pipeline::graph::{self, Graph};
use operon_runner::{RunError, RunOutput, RunRequest, Runner};
use serde_json::{Value, json};

/// Returns `{"<operation>": "<size> bytes"}` or fails the operations it is told to.
struct Fake {
    fail: Vec<&'static str>,
    size: usize,
}

impl Runner for Fake {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move {
            let op = request.name.rsplit('/').next().unwrap_or("").to_owned();
            if self.fail.iter().any(|f| op.ends_with(f)) {
                return Err(RunError::new(format!("{op} failed")));
            }
            Ok(RunOutput {
                results: [(format!("result.{op}"), "x".repeat(self.size))].into(),
                output: String::new(),
            })
        })
    }
}

pub(super) fn diagnosis(status: Option<Value>) -> Diagnosis {
    let mut value = json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
        "metadata": {"name": "d1", "namespace": "ops", "uid": "u-1", "resourceVersion": "10",
                     "creationTimestamp": "2026-11-23T10:00:00Z"},
        "spec": {"operationSet": "three"},
    });
    if let Some(status) = status {
        value["status"] = status;
    }
    serde_json::from_value(value).unwrap()
}

/// start → 1 → 2 → 3.
fn chain() -> Graph {
    let set: OperationSet = serde_json::from_value(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "OperationSet",
        "metadata": {"name": "three"},
        "spec": {"adjacencyList": [
            {"id": 0, "to": [1]},
            {"id": 1, "operation": "a", "to": [2]},
            {"id": 2, "operation": "b", "to": [3]},
            {"id": 3, "operation": "c"},
        ]},
    }))
    .unwrap();
    graph::validate(&set, |_| true).unwrap()
}

fn steps(runner: Fake) -> BTreeMap<String, Step> {
    let runner: Arc<dyn Runner> = Arc::new(runner);
    ["a", "b", "c"]
        .into_iter()
        .map(|op| {
            (
                op.to_owned(),
                Step {
                    runner: runner.clone(),
                    timeout: Duration::from_secs(5),
                    storage: None,
                },
            )
        })
        .collect()
}

const STATUS_URI: &str =
    "/apis/operon.dev/v1alpha1/namespaces/ops/diagnoses/d1/status?&fieldManager=operon";

/// Answers a status PUT as the API server does: the body back with the next
/// resourceVersion. Returns the body.
pub(super) async fn answer_put(api: &mut MockApi, version: u32) -> Value {
    let call = api.next().await;
    assert_eq!(call.method, "PUT");
    assert_eq!(call.uri, STATUS_URI);
    let body = call.json();
    let mut stored = body.clone();
    stored["metadata"]["resourceVersion"] = json!(version.to_string());
    stored["metadata"]["uid"] = json!("u-1");
    call.answer(200, stored);
    body
}

#[tokio::test]
async fn a_three_node_run_writes_the_status_once_per_node_plus_once_to_finish() {
    let (client, mut api) = mock::pair();
    let mut d = diagnosis(None);
    let running = tokio::spawn(async move {
        let mut writer = StatusWriter::new(client, &d, Limits::default());
        let phase = operon_pipeline::execute(
            &mut d,
            &chain(),
            &steps(Fake {
                fail: vec![],
                size: 3,
            }),
            &mut writer,
        )
        .await
        .unwrap();
        (phase, writer.writes())
    });
    let mut bodies = Vec::new();
    for version in 11..=14 {
        bodies.push(answer_put(&mut api, version).await);
    }
    let (phase, writes) = running.await.unwrap();
    assert_eq!(phase, DiagnosisPhase::Succeeded);
    assert_eq!(writes, 4);
    // Each write carries the resourceVersion the previous one returned.
    let versions: Vec<&str> = bodies
        .iter()
        .map(|b| b["metadata"]["resourceVersion"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["10", "11", "12", "13"]);
    // Before each node: the node about to run, the records of those before it.
    for (i, body) in bodies[..3].iter().enumerate() {
        let status = &body["status"];
        assert_eq!(status["phase"], "Running");
        assert_eq!(status["currentNode"]["id"], i as i64 + 1);
        assert_eq!(status["nodes"].as_array().map_or(0, Vec::len), i);
    }
    let last = &bodies[3]["status"];
    assert_eq!(last["phase"], "Succeeded");
    assert!(last.get("currentNode").is_none());
    assert_eq!(last["nodes"].as_array().unwrap().len(), 3);
    assert_eq!(last["operationResults"]["result.node-3"], "xxx");
    assert_eq!(bodies[3]["kind"], "Diagnosis");
    assert_eq!(bodies[3]["spec"]["operationSet"], "three");
    api.quiet().await;
}

#[tokio::test]
async fn a_resumed_run_does_not_rerun_recorded_nodes() {
    // Killed while node 2 ran: node 1's record was stored with node 2 as current.
    let stored = json!({
        "phase": "Running", "startTime": "2026-11-23T10:00:01Z",
        "currentNode": {"id": 2, "operation": "b"},
        "operationResults": {"result.node-1": "xxx"},
        "nodes": [{"id": 1, "operation": "a", "phase": "Succeeded", "durationMillis": 3,
                   "outputSize": 3, "resultKeys": ["result.node-1"]}],
        "checkpoint": {"path": [1], "completedNodes": 1},
    });
    let (client, mut api) = mock::pair();
    let mut d = diagnosis(Some(stored));
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    struct Recording(Arc<std::sync::Mutex<Vec<String>>>);
    impl Runner for Recording {
        fn run<'a>(&'a self, r: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
            self.0.lock().unwrap().push(r.name.clone());
            Box::pin(async { Ok(RunOutput::default()) })
        }
    }
    let runner: Arc<dyn Runner> = Arc::new(Recording(calls.clone()));
    let steps: BTreeMap<String, Step> = ["a", "b", "c"]
        .into_iter()
        .map(|op| {
            let step = Step {
                runner: runner.clone(),
                timeout: Duration::from_secs(5),
                storage: None,
            };
            (op.to_owned(), step)
        })
        .collect();
    let running = tokio::spawn(async move {
        let mut writer = StatusWriter::new(client, &d, Limits::default());
        operon_pipeline::execute(&mut d, &chain(), &steps, &mut writer)
            .await
            .unwrap()
    });
    // Nodes 2 and 3, then the end; node 2's write says nothing new and is skipped.
    answer_put(&mut api, 11).await;
    answer_put(&mut api, 12).await;
    assert_eq!(running.await.unwrap(), DiagnosisPhase::Succeeded);
    assert_eq!(
        *calls.lock().unwrap(),
        ["ops/d1/node-2", "ops/d1/node-3"],
        "node 1 did not run again"
    );
    api.quiet().await;
}

#[tokio::test]
async fn a_conflict_over_metadata_is_retried_and_one_over_the_status_stops_the_run() {
    let (client, mut api) = mock::pair();
    let d = diagnosis(None);
    let mut changed = d.clone();
    changed.status.get_or_insert_with(Default::default).phase = Some(DiagnosisPhase::Running);
    let writing = tokio::spawn(async move {
        let mut writer = StatusWriter::new(client, &d, Limits::default());
        let first = writer.write(&changed).await;
        let mut again = changed.clone();
        again.status.as_mut().unwrap().start_time = Some(Time(now()));
        let second = writer.write(&again).await;
        (first, second)
    });
    // Someone labelled the Diagnosis: 409, a fresh read shows the same status.
    let put = api.next().await;
    assert_eq!(put.json()["metadata"]["resourceVersion"], "10");
    put.fail(409, "Conflict", "the object has been modified");
    let get = api.next().await;
    assert_eq!(get.method, "GET");
    assert_eq!(
        get.uri,
        "/apis/operon.dev/v1alpha1/namespaces/ops/diagnoses/d1"
    );
    let mut labelled = serde_json::to_value(diagnosis(None)).unwrap();
    labelled["metadata"]["resourceVersion"] = json!("15");
    labelled["metadata"]["labels"] = json!({"team": "a"});
    get.answer(200, labelled);
    let retried = answer_put(&mut api, 16).await;
    assert_eq!(retried["metadata"]["resourceVersion"], "15");
    // Then another writer changes the status itself: the run stops.
    let put = api.next().await;
    assert_eq!(put.json()["metadata"]["resourceVersion"], "16");
    put.fail(409, "Conflict", "the object has been modified");
    let get = api.next().await;
    let mut other = serde_json::to_value(diagnosis(None)).unwrap();
    other["metadata"]["resourceVersion"] = json!("17");
    other["status"] = json!({"phase": "Failed"});
    get.answer(200, other);
    let (first, second) = writing.await.unwrap();
    first.unwrap();
    assert!(
        matches!(second, Err(StatusError::Conflict { .. })),
        "{second:?}"
    );
    api.quiet().await;
}

#[test]
fn large_results_leave_the_status_for_the_config_map() {
    let limits = Limits {
        per_value: 10,
        per_diagnosis: 25,
    };
    let mut status = DiagnosisStatus::default();
    for (k, v) in [("big", 11), ("a", 9), ("b", 8), ("c", 7), ("d", 1)] {
        status.operation_results.insert(k.to_owned(), "x".repeat(v));
    }
    let (stored, offloaded) = status::split(&status, limits, "d1-results");
    // `big` is over the value limit; then a (9) goes, leaving b+c+d = 19 bytes.
    assert_eq!(offloaded.keys().collect::<Vec<_>>(), ["a", "big"]);
    assert_eq!(
        stored.operation_results.keys().collect::<Vec<_>>(),
        ["b", "c", "d"]
    );
    assert_eq!(stored.results_in_config_map, ["a", "big"]);
    assert_eq!(stored.results_config_map.as_deref(), Some("d1-results"));
    let small = status::split(&DiagnosisStatus::default(), limits, "d1-results").0;
    assert_eq!(small.results_config_map, None);
}

#[tokio::test]
async fn large_results_are_applied_to_an_owned_config_map_before_the_status() {
    let (client, mut api) = mock::pair();
    let d = diagnosis(None);
    let mut with_results = d.clone();
    let status = with_results.status.get_or_insert_with(Default::default);
    status
        .operation_results
        .insert("log".to_owned(), "l".repeat(70 * 1024));
    status
        .operation_results
        .insert("verdict".to_owned(), "ok".to_owned());
    let writing = tokio::spawn(async move {
        StatusWriter::new(client, &d, Limits::default())
            .write(&with_results)
            .await
    });
    let apply = api.next().await;
    assert_eq!(apply.method, "PATCH");
    assert_eq!(
        apply.uri,
        "/api/v1/namespaces/ops/configmaps/d1-results?&force=true&fieldManager=operon"
    );
    assert_eq!(
        apply.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    let body = apply.json();
    assert_eq!(body["data"]["log"].as_str().unwrap().len(), 70 * 1024);
    assert!(body["data"].get("verdict").is_none());
    let owner = &body["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Diagnosis");
    assert_eq!(owner["uid"], "u-1");
    assert_eq!(owner["controller"], true);
    apply.answer(200, body.clone());
    let put = answer_put(&mut api, 11).await;
    assert_eq!(put["status"]["resultsConfigMap"], "d1-results");
    assert_eq!(put["status"]["resultsInConfigMap"], json!(["log"]));
    assert_eq!(put["status"]["operationResults"], json!({"verdict": "ok"}));
    writing.await.unwrap().unwrap();
}

#[tokio::test]
async fn results_over_what_a_config_map_holds_are_refused() {
    let (client, _api) = mock::pair();
    let d = diagnosis(None);
    let mut huge = d.clone();
    huge.status
        .get_or_insert_with(Default::default)
        .operation_results
        .insert("dump".to_owned(), "x".repeat(status::CONFIG_MAP_MAX + 1));
    let err = StatusWriter::new(client, &d, Limits::default())
        .write(&huge)
        .await
        .unwrap_err();
    assert!(matches!(err, StatusError::ResultsTooLarge { .. }), "{err}");
    assert!(err.to_string().contains("Diagnosis/ops/d1"), "{err}");
}

#[tokio::test]
async fn after_results_too_large_the_same_writer_records_the_failure_without_a_config_map() {
    let (client, mut api) = mock::pair();
    let d = diagnosis(None);
    let mut huge = d.clone();
    huge.status
        .get_or_insert_with(Default::default)
        .operation_results
        .insert("dump".to_owned(), "x".repeat(status::CONFIG_MAP_MAX + 1));
    let mut failed = d.clone();
    let status = failed.status.get_or_insert_with(Default::default);
    fail(
        status,
        operon_pipeline::COMPLETE,
        "ResultsTooLarge",
        "too large".to_owned(),
    );
    let writing = tokio::spawn(async move {
        let mut writer = StatusWriter::new(client, &d, Limits::default());
        assert!(writer.write(&huge).await.is_err());
        writer.write(&failed).await
    });
    let put = answer_put(&mut api, 11).await;
    assert_eq!(put["metadata"]["resourceVersion"], "10");
    assert_eq!(put["status"]["phase"], "Failed");
    assert!(put["status"].get("resultsConfigMap").is_none());
    writing.await.unwrap().unwrap();
    api.quiet().await;
}

#[test]
fn a_set_change_wakes_only_the_unfinished_diagnoses_that_name_it() {
    let waiting = Arc::new(diagnosis(None));
    let done = Arc::new(diagnosis(Some(json!({"phase": "Succeeded"}))));
    assert_eq!(waiting_for(&[waiting.clone(), done], "three").len(), 1);
    assert!(waiting_for(&[waiting], "other").is_empty());
}

/// A Node whose Ready condition is `True`.
pub(super) fn ready_node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
           "status": {"conditions": [{"type": "Ready", "status": "True",
                                      "lastTransitionTime": "2026-11-23T09:00:00Z"}]}})
}

pub(super) fn context(client: kube::Client) -> Arc<Context> {
    let processors = Arc::new(Processors::new(Default::default()));
    Arc::new(Context::new(
        client,
        processors,
        Settings::new(Role::Controller, "operon"),
    ))
}

#[tokio::test]
async fn a_diagnosis_about_a_pod_is_placed_on_its_node_and_waits_for_an_agent() {
    let (client, mut api) = mock::pair();
    let mut d = diagnosis(None);
    // Created just now: within the wait limit (an older one would fail for NoAgent).
    d.metadata.creation_timestamp = Some(Time(now()));
    d.spec.pod_reference = Some(operon_data::api::PodReference {
        namespace: "apps".to_owned(),
        name: "web-0".to_owned(),
        container: None,
    });
    let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(client)));

    let get = api.next().await;
    assert_eq!(
        get.uri,
        "/apis/operon.dev/v1alpha1/namespaces/ops/diagnoses/d1"
    );
    get.answer(200, serde_json::to_value(&d).unwrap());
    let pod = api.next().await;
    assert_eq!(pod.uri, "/api/v1/namespaces/apps/pods/web-0");
    pod.answer(
        200,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"},
               "spec": {"nodeName": "worker-3", "containers": []}}),
    );
    let lease = api.next().await;
    assert_eq!(
        lease.uri,
        "/apis/coordination.k8s.io/v1/namespaces/operon/leases/operon-agent-worker-3"
    );
    lease.fail(
        404,
        "NotFound",
        "leases \"operon-agent-worker-3\" not found",
    );
    // No agent: is its node down? It is Ready.
    let node = api.next().await;
    assert_eq!(node.uri, "/api/v1/nodes/worker-3");
    node.answer(200, ready_node("worker-3"));
    let put = answer_put(&mut api, 11).await;
    let status = &put["status"];
    assert_eq!(status["nodeName"], "worker-3");
    assert_eq!(status["phase"], "Pending");
    let scheduled = &status["conditions"][0];
    assert_eq!(scheduled["type"], SCHEDULED);
    assert_eq!(scheduled["status"], "False");
    assert_eq!(scheduled["reason"], "NoAgent");
    assert!(
        scheduled["message"]
            .as_str()
            .unwrap()
            .contains("operon/operon-agent-worker-3"),
        "{scheduled}"
    );
    let action = reconciling.await.unwrap().unwrap();
    assert_eq!(action, Action::requeue(WAIT_POLL));
    api.quiet().await;
}

#[tokio::test]
async fn a_diagnosis_naming_a_missing_node_fails_at_once() {
    let (client, mut api) = mock::pair();
    let mut d = diagnosis(None);
    d.spec.node_name = Some("gone".to_owned());
    let failed_before = super::metrics::count("controller", "Failed");
    let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(client)));
    api.next()
        .await
        .answer(200, serde_json::to_value(&d).unwrap());
    let node = api.next().await;
    assert_eq!(node.uri, "/api/v1/nodes/gone");
    node.fail(404, "NotFound", "nodes \"gone\" not found");
    let put = answer_put(&mut api, 11).await;
    assert_eq!(put["status"]["phase"], "Failed");
    let complete = put["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == operon_pipeline::COMPLETE)
        .unwrap()
        .clone();
    assert_eq!(complete["reason"], "NodeNotFound");
    assert!(
        complete["message"]
            .as_str()
            .unwrap()
            .contains("spec.nodeName")
    );
    assert_eq!(reconciling.await.unwrap().unwrap(), Action::await_change());
    // Counted once written (other tests may count theirs meanwhile).
    assert!(super::metrics::count("controller", "Failed") > failed_before);
}

#[tokio::test]
async fn an_agent_skips_diagnoses_placed_on_other_nodes_without_a_request() {
    let (client, mut api) = mock::pair();
    let processors = Arc::new(Processors::new(Default::default()));
    let role = Role::Agent {
        node: "worker-1".to_owned(),
    };
    let ctx = Arc::new(Context::new(
        client,
        processors,
        Settings::new(role, "operon"),
    ));
    let elsewhere = diagnosis(Some(json!({"phase": "Pending", "nodeName": "worker-2"})));
    let unplaced = diagnosis(None);
    for d in [elsewhere, unplaced] {
        let action = reconcile(Arc::new(d), ctx.clone()).await.unwrap();
        assert_eq!(action, Action::await_change());
    }
    api.quiet().await;
}

/// `d1` about the nodes `selector` names or matches.
fn parent(selector: Value, status: Option<Value>) -> Diagnosis {
    let mut d = diagnosis(status);
    d.spec.target_selector = Some(serde_json::from_value(selector).unwrap());
    d
}

/// A child of `d1` on `node` as the API server holds it, owned by `owner`.
fn stored_child(node: &str, owner: &str, status: Option<Value>) -> Value {
    let mut child = json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
        "metadata": {"name": format!("d1-{node}"), "namespace": "ops", "uid": format!("u-{node}"),
                     "labels": {"operon.dev/parent-diagnosis": "d1"},
                     "ownerReferences": [{"apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                                          "name": "d1", "uid": owner, "controller": true}]},
        "spec": {"operationSet": "three", "nodeName": node},
    });
    if let Some(status) = status {
        child["status"] = status;
    }
    child
}

fn node_metadata(name: &str) -> Value {
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
           "metadata": {"name": name}})
}

const CHILDREN_URI: &str = "/apis/operon.dev/v1alpha1/namespaces/ops/diagnoses?&labelSelector=operon.dev%2Fparent-diagnosis%3Dd1";

#[tokio::test]
async fn a_target_selector_records_its_nodes_once_then_creates_one_child_per_node() {
    let (client, mut api) = mock::pair();
    let d = parent(
        json!({"nodeNames": ["w1", "gone", "w1"],
               "nodeSelector": {"matchLabels": {"role": "worker"}}}),
        None,
    );
    let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(client)));
    api.next()
        .await
        .answer(200, serde_json::to_value(&d).unwrap());
    // Each name once, in order; then the selector, in one list.
    let gone = api.next().await;
    assert_eq!(
        (gone.method.as_str(), gone.uri.as_str()),
        ("GET", "/api/v1/nodes/gone")
    );
    gone.fail(404, "NotFound", "nodes \"gone\" not found");
    let w1 = api.next().await;
    assert_eq!(w1.uri, "/api/v1/nodes/w1");
    w1.answer(200, node_metadata("w1"));
    let list = api.next().await;
    assert_eq!(
        (list.method.as_str(), list.uri.as_str()),
        ("GET", "/api/v1/nodes?&labelSelector=role%3Dworker")
    );
    list.answer(
        200,
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
               "metadata": {"resourceVersion": "5"},
               "items": [node_metadata("w1"), node_metadata("w2")]}),
    );
    // The targets are recorded before any child exists.
    let put = answer_put(&mut api, 11).await;
    let status = &put["status"];
    assert_eq!(status["phase"], "Running");
    assert!(
        status.get("nodeName").is_none(),
        "no agent may take a parent"
    );
    assert_eq!(
        status["targets"],
        json!([
            {"nodeName": "gone", "phase": "Failed",
             "message": "spec.targetSelector.nodeNames: there is no Node \"gone\""},
            {"nodeName": "w1", "diagnosis": "d1-w1", "phase": "Pending"},
            {"nodeName": "w2", "diagnosis": "d1-w2", "phase": "Pending"},
        ])
    );
    assert_eq!(status["conditions"][0]["type"], SCHEDULED);
    assert_eq!(status["conditions"][0]["reason"], "TargetsResolved");
    let children = api.next().await;
    assert_eq!(
        (children.method.as_str(), children.uri.as_str()),
        ("GET", CHILDREN_URI)
    );
    children.answer(
        200,
        json!({"apiVersion": "operon.dev/v1alpha1", "kind": "DiagnosisList",
               "metadata": {"resourceVersion": "11"}, "items": []}),
    );
    let create = api.next().await;
    assert_eq!(create.method, "POST");
    assert_eq!(
        create.uri,
        "/apis/operon.dev/v1alpha1/namespaces/ops/diagnoses?&fieldManager=operon"
    );
    let body = create.json();
    assert_eq!(
        body,
        json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
            "metadata": {"name": "d1-w1", "namespace": "ops",
                         "labels": {"operon.dev/parent-diagnosis": "d1"},
                         "ownerReferences": [{"apiVersion": "operon.dev/v1alpha1",
                             "kind": "Diagnosis", "name": "d1", "uid": "u-1",
                             "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"operationSet": "three", "nodeName": "w1"},
        })
    );
    create.answer(201, stored_child("w1", "u-1", None));
    // Created by this parent before a restart: found, not created twice.
    let again = api.next().await;
    assert_eq!(again.json()["metadata"]["name"], "d1-w2");
    again.fail(409, "AlreadyExists", "diagnoses \"d1-w2\" already exists");
    let get = api.next().await;
    assert_eq!(
        (get.method.as_str(), get.uri.as_str()),
        (
            "GET",
            "/apis/operon.dev/v1alpha1/namespaces/ops/diagnoses/d1-w2"
        )
    );
    get.answer(
        200,
        stored_child("w2", "u-1", Some(json!({"phase": "Running"}))),
    );
    let put = answer_put(&mut api, 12).await;
    assert_eq!(put["metadata"]["resourceVersion"], "11");
    assert_eq!(put["status"]["targets"][2]["phase"], "Running");
    assert_eq!(put["status"]["phase"], "Running");
    let action = reconciling.await.unwrap().unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(60)));
    api.quiet().await;
}

#[tokio::test]
async fn a_parent_gathers_its_children_and_fails_naming_the_nodes_that_failed() {
    let (client, mut api) = mock::pair();
    let recorded = json!({
        "phase": "Running", "startTime": "2026-11-23T10:00:01Z",
        "targets": [{"nodeName": "w1", "diagnosis": "d1-w1", "phase": "Pending"},
                    {"nodeName": "w2", "diagnosis": "d1-w2", "phase": "Pending"}],
    });
    let d = parent(json!({"nodeSelector": {}}), Some(recorded));
    let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(client)));
    api.next()
        .await
        .answer(200, serde_json::to_value(&d).unwrap());
    let children = api.next().await;
    assert_eq!(children.uri, CHILDREN_URI);
    let complete = |reason: &str, message: &str| {
        json!([{"type": "Complete", "status": "True", "reason": reason, "message": message,
                "lastTransitionTime": "2026-11-23T10:05:00Z"}])
    };
    children.answer(
        200,
        json!({"apiVersion": "operon.dev/v1alpha1", "kind": "DiagnosisList",
               "metadata": {"resourceVersion": "20"}, "items": [
            stored_child("w1", "u-1", Some(json!({"phase": "Succeeded",
                "operationResults": {"disk": "ok"}, "conditions": complete("Succeeded", "path 1")}))),
            stored_child("w2", "u-1", Some(json!({"phase": "Failed",
                "conditions": complete("NodeNotReady", "node w2 is gone")}))),
            // Same label, another owner (a parent deleted and created again): not its child.
            stored_child("w3", "u-old", Some(json!({"phase": "Failed"}))),
        ]}),
    );
    let put = answer_put(&mut api, 21).await;
    let status = &put["status"];
    assert_eq!(status["phase"], "Failed");
    assert_eq!(
        status["targets"],
        json!([
            {"nodeName": "w1", "diagnosis": "d1-w1", "phase": "Succeeded", "message": "path 1",
             "operationResults": {"disk": "ok"}},
            {"nodeName": "w2", "diagnosis": "d1-w2", "phase": "Failed",
             "message": "node w2 is gone"},
        ])
    );
    let complete = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == operon_pipeline::COMPLETE)
        .unwrap();
    assert_eq!(complete["reason"], "Failed");
    assert_eq!(complete["message"], "failed on 1 of 2 nodes: w2");
    assert!(status.get("completionTime").is_some());
    assert_eq!(reconciling.await.unwrap().unwrap(), Action::await_change());
    api.quiet().await;
}

#[tokio::test]
async fn a_selector_that_matches_no_node_waits_then_fails() {
    for (created, phase, action) in [
        (Time(now()), "Pending", Action::requeue(WAIT_POLL)),
        (
            Time("2026-11-23T10:00:00Z".parse().unwrap()),
            "Failed",
            Action::await_change(),
        ),
    ] {
        let (client, mut api) = mock::pair();
        let mut d = parent(
            json!({"nodeSelector": {"matchExpressions": [
                {"key": "gpu", "operator": "Exists"}]}}),
            None,
        );
        d.metadata.creation_timestamp = Some(created);
        let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(client)));
        api.next()
            .await
            .answer(200, serde_json::to_value(&d).unwrap());
        let list = api.next().await;
        assert_eq!(list.uri, "/api/v1/nodes?&labelSelector=gpu");
        list.answer(
            200,
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                   "metadata": {}, "items": []}),
        );
        let put = answer_put(&mut api, 11).await;
        let status = &put["status"];
        assert_eq!(status["phase"], phase);
        assert!(status.get("targets").is_none());
        let scheduled = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == SCHEDULED)
            .unwrap();
        assert_eq!(scheduled["reason"], "NoMatchingNode");
        assert_eq!(reconciling.await.unwrap().unwrap(), action);
        api.quiet().await;
    }
}

#[tokio::test]
async fn an_agent_never_runs_a_parent() {
    let (client, mut api) = mock::pair();
    let role = Role::Agent {
        node: "w1".to_owned(),
    };
    let processors = Arc::new(Processors::new(Default::default()));
    let ctx = Arc::new(Context::new(
        client,
        processors,
        Settings::new(role, "operon"),
    ));
    let running = json!({"phase": "Running",
        "targets": [{"nodeName": "w1", "diagnosis": "d1-w1", "phase": "Running"}]});
    let d = parent(json!({"nodeNames": ["w1"]}), Some(running));
    let action = reconcile(Arc::new(d), ctx).await.unwrap();
    assert_eq!(action, Action::await_change());
    api.quiet().await;
}

#[test]
fn admission_refuses_a_target_selector_beside_a_node_or_naming_pods() {
    let problems = operon_manifest::validate_object(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
        "metadata": {"name": "d1", "namespace": "ops"},
        "spec": {"operationSet": "three", "nodeName": "w1",
                 "targetSelector": {"podSelector": {"matchLabels": {"app": "web"}}}},
    }));
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        ["spec.targetSelector", "spec.targetSelector.podSelector"]
    );
    assert!(
        problems[1]
            .reason
            .contains("not supported yet, use nodeNames or nodeSelector")
    );
}
