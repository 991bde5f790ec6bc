//! The Argo runner against a mock API server: the exact Workflow submitted, phases and
//! outputs mapped to results, re-attaching, and the dry run.

use super::*;
use operon_cluster::kube::mock::{self, Call, MockApi};
use operon_data::api::{ArgoParameter, WorkflowTemplateRef};
use std::sync::Arc;

fn request() -> RunRequest {
    RunRequest {
        name: "ops/disk/node-2".to_owned(),
        input: [
            ("node".to_owned(), "n1".to_owned()),
            ("threshold".to_owned(), "80".to_owned()),
        ]
        .into(),
        results: BTreeMap::new(),
        node: Some("n1".to_owned()),
        namespace: Some("ops".to_owned()),
        owner: Some((
            "Diagnosis".to_owned(),
            "disk".to_owned(),
            "uid-1".to_owned(),
        )),
        dry_run: false,
        timeout: Duration::from_secs(120),
    }
}

fn processor() -> ArgoWorkflowProcessor {
    ArgoWorkflowProcessor {
        workflow_template_ref: Some(WorkflowTemplateRef {
            name: "fsck".to_owned(),
            cluster_scope: false,
        }),
        workflow_spec: None,
        parameters: vec![
            ArgoParameter {
                name: "target".to_owned(),
                value: None,
                from_key: Some("node".to_owned()),
            },
            ArgoParameter {
                name: "mode".to_owned(),
                value: Some("fast".to_owned()),
                from_key: None,
            },
        ],
        service_account_name: Some("fsck-runner".to_owned()),
    }
}

fn runner(client: Option<kube::Client>) -> ArgoRunner {
    ArgoRunner::new(
        client,
        "fsck",
        processor(),
        Platform {
            cluster: Some("lab".to_owned()),
        },
    )
}

fn expected_workflow() -> Value {
    let name = job_name(&request());
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
        "metadata": {
            "name": name, "namespace": "ops",
            "labels": {"app.kubernetes.io/managed-by": "operon", "operon.dev/run": name},
            "annotations": {"operon.dev/run-name": "ops/disk/node-2", "operon.dev/operation": "fsck"},
            "ownerReferences": [{"apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                "name": "disk", "uid": "uid-1", "blockOwnerDeletion": false, "controller": false}],
        },
        "spec": {
            "workflowTemplateRef": {"name": "fsck"},
            "arguments": {"parameters": [
                {"name": "target", "value": "n1"},
                {"name": "mode", "value": "fast"},
                {"name": "operon-run-name", "value": "ops/disk/node-2"},
                {"name": "operon-dry-run", "value": "false"},
                {"name": "operon-timeout-seconds", "value": "120"},
                {"name": "operon-node", "value": "n1"},
                {"name": "operon-namespace", "value": "ops"},
                {"name": "operon-owner-kind", "value": "Diagnosis"},
                {"name": "operon-owner-name", "value": "disk"},
                {"name": "operon-owner-uid", "value": "uid-1"},
                {"name": "operon-cluster", "value": "lab"},
            ]},
            "activeDeadlineSeconds": 120,
            "serviceAccountName": "fsck-runner",
        },
    })
}

fn list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowList",
           "metadata": {"resourceVersion": "10"}, "items": items})
}

/// Answers the watcher: its list with `items`, its watch left open.
async fn answer_watch(api: &mut MockApi, items: Vec<Value>, held: &mut Vec<Call>) {
    loop {
        let call = api.next().await;
        assert_eq!(call.method, "GET", "{}", call.uri);
        assert!(
            call.uri.contains("fieldSelector=metadata.name%3D"),
            "{}",
            call.uri
        );
        if call.uri.contains("watch=true") {
            held.push(call);
        } else {
            call.answer(200, list(items));
            return;
        }
    }
}

#[tokio::test]
async fn submits_the_workflow_and_maps_outputs_to_results() {
    let (client, mut api) = mock::pair();
    let runner = Arc::new(runner(Some(client)));
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(&request()).await }
    });
    let name = job_name(&request());
    let get = api.next().await;
    assert_eq!(get.method, "GET");
    assert_eq!(
        get.uri,
        format!("/apis/argoproj.io/v1alpha1/namespaces/ops/workflows/{name}")
    );
    get.fail(404, "NotFound", "not found");
    let post = api.next().await;
    assert_eq!(post.method, "POST");
    assert_eq!(
        post.uri,
        "/apis/argoproj.io/v1alpha1/namespaces/ops/workflows?&fieldManager=operon"
    );
    assert_eq!(post.json(), expected_workflow());
    let body = post.json();
    post.answer(201, body);
    let mut done = expected_workflow();
    done["status"] = json!({
        "phase": "Succeeded",
        "nodes": {name.clone(): {"outputs": {"parameters": [
            {"name": "verdict", "value": "clean"}, {"name": "blocks", "value": "10"}]}}},
        "outputs": {"parameters": [{"name": "blocks", "value": "12"}]},
    });
    let mut held = Vec::new();
    answer_watch(&mut api, vec![done], &mut held).await;
    let out = task.await.unwrap().unwrap();
    assert_eq!(
        out.results,
        BTreeMap::from([
            ("blocks".to_owned(), "12".to_owned()),
            ("verdict".to_owned(), "clean".to_owned()),
        ])
    );
}

#[tokio::test]
async fn re_attaches_and_reports_a_failed_phase() {
    let (client, mut api) = mock::pair();
    let runner = Arc::new(runner(Some(client)));
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(&request()).await }
    });
    let mut existing = expected_workflow();
    existing["status"] = json!({"phase": "Running"});
    api.next().await.answer(200, existing.clone());
    // No POST: the existing Workflow is this run's.
    let mut held = Vec::new();
    existing["status"] = json!({"phase": "Failed", "message": "child 'fsck' failed"});
    answer_watch(&mut api, vec![existing], &mut held).await;
    let err = task.await.unwrap().unwrap_err();
    assert!(
        err.message
            .ends_with("ended in phase Failed: child 'fsck' failed"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_foreign_workflow_is_not_adopted() {
    let (client, mut api) = mock::pair();
    let runner = Arc::new(runner(Some(client)));
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(&request()).await }
    });
    let mut other = expected_workflow();
    other["metadata"]["annotations"]["operon.dev/run-name"] = json!("ops/other/node-1");
    api.next().await.answer(200, other);
    let err = task.await.unwrap().unwrap_err();
    assert!(
        err.message
            .contains("belongs to another run (ops/other/node-1)"),
        "{}",
        err.message
    );
    api.quiet().await;
}

#[tokio::test]
async fn dry_run_submits_nothing_and_says_when_argo_is_missing() {
    let offline = runner(None).dry_run(&request()).await.unwrap();
    assert!(
        offline.action.starts_with("would submit Workflow ops/"),
        "{}",
        offline.action
    );
    assert!(
        offline
            .action
            .contains("from WorkflowTemplate fsck; rendered locally")
    );
    assert_eq!(offline.detail.unwrap(), expected_workflow());

    let (client, mut api) = mock::pair();
    let runner = Arc::new(runner(Some(client)));
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.dry_run(&request()).await }
    });
    let post = api.next().await;
    assert_eq!(post.method, "POST");
    assert!(post.uri.contains("dryRun=All"), "{}", post.uri);
    post.fail(
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    let err = task.await.unwrap().unwrap_err();
    assert_eq!(
        err.message,
        "Argo Workflows is not installed in the cluster (no workflows.argoproj.io/v1alpha1)"
    );
}

#[test]
fn inline_specs_keep_their_own_arguments_and_missing_keys_are_named() {
    let mut processor = processor();
    processor.workflow_template_ref = None;
    processor.workflow_spec = Some(json!({
        "entrypoint": "main", "templates": [{"name": "main", "container": {"image": "busybox"}}],
        "arguments": {"parameters": [{"name": "mode", "value": "slow"}, {"name": "keep", "value": "1"}]},
    }));
    let runner = ArgoRunner::new(None, "fsck", processor.clone(), Platform::default());
    let workflow = serde_json::to_value(runner.workflow(&request()).unwrap()).unwrap();
    let names: Vec<&str> = workflow["spec"]["arguments"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(&names[..3], ["keep", "target", "mode"]);
    assert_eq!(workflow["spec"]["entrypoint"], "main");
    processor.parameters[0].from_key = Some("absent".to_owned());
    let runner = ArgoRunner::new(None, "fsck", processor, Platform::default());
    assert_eq!(
        runner.workflow(&request()).unwrap_err().to_string(),
        "argoWorkflow.parameters[0] takes input key \"absent\", which is not among the input keys"
    );
}

#[test]
fn phases_map_to_states() {
    let wf = |status: Value| -> DynamicObject {
        serde_json::from_value(
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"name": "w"}, "status": status}),
        )
        .unwrap()
    };
    assert_eq!(
        workflow_state("w", Some(&wf(json!({})))),
        WorkflowState::Running
    );
    assert_eq!(
        workflow_state("w", Some(&wf(json!({"phase": "Pending"})))),
        WorkflowState::Running
    );
    assert_eq!(
        workflow_state("w", Some(&wf(json!({"phase": "Error", "message": "boom"})))),
        WorkflowState::Failed("Workflow w ended in phase Error: boom".to_owned())
    );
    assert!(
        matches!(workflow_state("w", None), WorkflowState::Failed(m) if m.contains("was deleted"))
    );
}

#[test]
fn a_recorded_trace_is_handed_on_as_a_parameter() {
    let untraced = runner(None).workflow(&request()).unwrap();
    assert!(!untraced.data.to_string().contains("traceparent"));
    let (_recording, span, traceparent) = crate::trace::recorded_span();
    let workflow = span.in_scope(|| runner(None).workflow(&request()).unwrap());
    let parameters = &workflow.data["spec"]["arguments"]["parameters"];
    assert!(
        parameters
            .as_array()
            .unwrap()
            .contains(&json!({"name": "operon-traceparent", "value": traceparent})),
        "{parameters}"
    );
}
