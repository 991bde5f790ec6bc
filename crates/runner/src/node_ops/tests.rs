//! The built-ins against a mock API server: the exact requests, what they return, and
//! that a node is changed only for a ServiceAccount RBAC allows.

use super::*;
use operon_cluster::kube::mock::{self, MockApi};
use serde_json::{Value, json};
use std::time::Duration;

fn request(dry_run: bool) -> RunRequest {
    RunRequest {
        name: "ops/d1/node-1".to_owned(),
        input: BTreeMap::from([
            ("pod.namespace".to_owned(), "web".to_owned()),
            ("pod.name".to_owned(), "api-0".to_owned()),
        ]),
        results: BTreeMap::new(),
        node: Some("node-a".to_owned()),
        namespace: Some("ops".to_owned()),
        owner: Some(("Diagnosis".to_owned(), "d1".to_owned(), "u-1".to_owned())),
        dry_run,
        timeout: Duration::from_secs(10),
    }
}

fn runner(client: Client, built_in: BuiltIn) -> ApiRunner {
    let Action::Api(op) = built_in.action() else {
        panic!("{built_in:?} is not run by the agent itself");
    };
    ApiRunner {
        ops: NodeOps::new(client, "node-a"),
        path: built_in.path(),
        op,
    }
}

fn pod(namespace: &str, name: &str) -> Value {
    json!({
        "metadata": {"namespace": namespace, "name": name,
                     "managedFields": [{"manager": "kubectl"}]},
        "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "nginx"}]},
        "status": {
            "initContainerStatuses": [{"name": "init", "image": "busybox", "imageID": "",
                "ready": true, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0}}}],
            "containerStatuses": [{"name": "app", "image": "nginx", "imageID": "sha",
                "containerID": "containerd://abc", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
        },
    })
}

async fn answer_pod_list(api: &mut MockApi) {
    let call = api.next().await;
    assert_eq!(call.method, "GET");
    assert_eq!(
        call.uri,
        "/api/v1/pods?&fieldSelector=spec.nodeName%3Dnode-a"
    );
    call.answer(
        200,
        json!({"kind": "PodList", "apiVersion": "v1", "metadata": {},
               "items": [pod("web", "b"), pod("kube-system", "a")]}),
    );
}

#[tokio::test]
async fn the_pod_list_is_the_node_s_pods_without_managed_fields() {
    let (client, mut api) = mock::pair();
    let run =
        tokio::spawn(async move { runner(client, BuiltIn::PodList).run(&request(false)).await });
    answer_pod_list(&mut api).await;
    let out = run.await.unwrap().unwrap();
    let pods: Value = serde_json::from_str(&out.results[pods::POD_LIST]).unwrap();
    let names: Vec<&str> = pods
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"], "sorted by namespace and name");
    assert!(pods[0]["metadata"].get("managedFields").is_none());
    assert_eq!(out.output, "2 pods on node node-a");
}

#[tokio::test]
async fn the_container_list_covers_init_and_regular_containers() {
    let (client, mut api) = mock::pair();
    let run = tokio::spawn(async move {
        runner(client, BuiltIn::ContainerList)
            .run(&request(false))
            .await
    });
    answer_pod_list(&mut api).await;
    let out = run.await.unwrap().unwrap();
    let containers: Value = serde_json::from_str(&out.results[pods::CONTAINER_LIST]).unwrap();
    assert_eq!(containers.as_array().unwrap().len(), 4);
    let app = &containers[1];
    assert_eq!(app["pod"], "a");
    assert_eq!(app["type"], "regular");
    assert_eq!(app["restartCount"], 3);
    assert_eq!(app["containerID"], "containerd://abc");
    assert_eq!(app["state"]["waiting"]["reason"], "CrashLoopBackOff");
    assert_eq!(containers[0]["type"], "init");
}

#[tokio::test]
async fn the_pod_detail_needs_the_pod_named() {
    let (client, mut api) = mock::pair();
    let run = tokio::spawn(async move {
        runner(client, BuiltIn::PodDetail)
            .run(&request(false))
            .await
    });
    let call = api.next().await;
    assert_eq!(call.uri, "/api/v1/namespaces/web/pods/api-0");
    call.answer(200, pod("web", "api-0"));
    let out = run.await.unwrap().unwrap();
    let detail: Value = serde_json::from_str(&out.results[pods::POD_DETAIL]).unwrap();
    assert_eq!(detail["metadata"]["name"], "api-0");

    let (client, _api) = mock::pair();
    let mut missing = request(false);
    missing.input.remove("pod.name");
    let err = runner(client, BuiltIn::PodDetail)
        .run(&missing)
        .await
        .unwrap_err();
    assert!(err.message.contains("missing input \"pod.name\""), "{err}");
}

fn diagnosis(account: Option<&str>) -> Value {
    json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
           "metadata": {"name": "d1", "namespace": "ops", "uid": "u-1"},
           "spec": {"operationSet": "set", "nodeName": "node-a",
                    "serviceAccountName": account}})
}

async fn answer_diagnosis(api: &mut MockApi, account: Option<&str>) {
    let call = api.next().await;
    assert_eq!(call.method, "GET");
    assert_eq!(
        call.uri,
        "/apis/operon.dev/v1alpha1/namespaces/ops/diagnoses/d1"
    );
    call.answer(200, diagnosis(account));
}

async fn answer_review(api: &mut MockApi, allowed: bool) {
    let call = api.next().await;
    assert_eq!(call.method, "POST");
    assert_eq!(
        call.uri,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews?"
    );
    let body = call.json();
    assert_eq!(body["spec"]["user"], "system:serviceaccount:ops:repairer");
    assert_eq!(
        body["spec"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:ops",
            "system:authenticated"
        ])
    );
    assert_eq!(
        body["spec"]["resourceAttributes"],
        json!({"group": "", "resource": "nodes", "verb": "patch", "name": "node-a"})
    );
    let mut answer = body.clone();
    answer["status"] = if allowed {
        json!({"allowed": true})
    } else {
        json!({"allowed": false, "reason": "no RBAC policy matched"})
    };
    call.answer(201, answer);
}

#[tokio::test]
async fn cordon_patches_the_node_for_an_allowed_service_account() {
    for dry_run in [false, true] {
        let (client, mut api) = mock::pair();
        let run = tokio::spawn(async move {
            runner(client, BuiltIn::NodeCordon)
                .run(&request(dry_run))
                .await
        });
        answer_diagnosis(&mut api, Some("repairer")).await;
        answer_review(&mut api, true).await;
        let call = api.next().await;
        assert_eq!(call.method, "PATCH");
        let expected = if dry_run {
            "/api/v1/nodes/node-a?&dryRun=All&fieldManager=operon"
        } else {
            "/api/v1/nodes/node-a?&fieldManager=operon"
        };
        assert_eq!(call.uri, expected);
        assert_eq!(
            call.content_type.as_deref(),
            Some("application/merge-patch+json")
        );
        assert_eq!(call.json(), json!({"spec": {"unschedulable": true}}));
        call.answer(
            200,
            json!({"metadata": {"name": "node-a"}, "spec": {"unschedulable": true}}),
        );
        let out = run.await.unwrap().unwrap();
        assert_eq!(
            out.results["recover.kubernetes.node_cordon.result.name"],
            "node-a"
        );
        assert!(
            out.output.contains("ServiceAccount ops/repairer"),
            "{}",
            out.output
        );
        api.quiet().await;
    }
}

#[tokio::test]
async fn uncordon_is_refused_when_rbac_says_no_and_the_node_is_untouched() {
    let (client, mut api) = mock::pair();
    let run = tokio::spawn(async move {
        runner(client, BuiltIn::NodeUncordon)
            .run(&request(false))
            .await
    });
    answer_diagnosis(&mut api, Some("repairer")).await;
    answer_review(&mut api, false).await;
    let err = run.await.unwrap().unwrap_err();
    assert_eq!(
        err.message,
        "nodeUncordon refused: ServiceAccount ops/repairer (spec.serviceAccountName of \
         Diagnosis ops/d1) may not patch nodes/node-a (no RBAC policy matched)"
    );
    api.quiet().await;
}

#[tokio::test]
async fn a_change_without_a_service_account_or_for_a_replaced_diagnosis_is_refused() {
    let (client, mut api) = mock::pair();
    let run = tokio::spawn(async move {
        runner(client, BuiltIn::NodeCordon)
            .run(&request(false))
            .await
    });
    answer_diagnosis(&mut api, None).await;
    let err = run.await.unwrap().unwrap_err();
    assert!(
        err.message
            .contains("must name a ServiceAccount of namespace ops allowed to patch nodes/node-a"),
        "{err}"
    );
    api.quiet().await;

    let (client, mut api) = mock::pair();
    let run = tokio::spawn(async move {
        runner(client, BuiltIn::NodeCordon)
            .run(&request(false))
            .await
    });
    let call = api.next().await;
    let mut other = diagnosis(Some("repairer"));
    other["metadata"]["uid"] = json!("u-2");
    call.answer(200, other);
    let err = run.await.unwrap().unwrap_err();
    assert!(err.message.contains("no longer exists"), "{err}");
    api.quiet().await;

    let (client, _api) = mock::pair();
    let mut hook_run = request(false);
    hook_run.owner = None;
    let err = runner(client, BuiltIn::NodeCordon)
        .run(&hook_run)
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "nodeCordon changes node node-a and runs only for a Diagnosis"
    );
}

#[test]
fn every_built_in_has_a_distinct_kubediag_path() {
    let paths: std::collections::BTreeSet<&str> = BuiltIn::ALL.iter().map(|b| b.path()).collect();
    assert_eq!(paths.len(), BuiltIn::ALL.len());
    for b in BuiltIn::ALL {
        assert_eq!(BuiltIn::from_path(b.path()), Some(b));
        assert!(b.path().starts_with(crate::runner::builtin::PREFIX));
    }
    assert_eq!(BuiltIn::from_path("/processor/nope"), None);
}

#[tokio::test]
async fn a_step_names_a_built_in_only_on_an_agent() {
    let op: Operation = serde_json::from_value(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
        "metadata": {"name": "pods"},
        "spec": {"processor": {"httpServer": {"path": "/processor/podListCollector"}}},
    }))
    .unwrap();
    let off_node = Processors::new(Default::default());
    let err = off_node
        .runner(&op, Path::new("."))
        .err()
        .expect("no built-ins off a node")
        .to_string();
    assert!(err.contains("is a built-in of the node agent"), "{err}");

    let (client, _api) = mock::pair();
    let agent = Processors::new(crate::runner::processors::ProcessorSettings {
        built_ins: Some(Arc::new(NodeOps::new(client, "node-a"))),
        ..Default::default()
    });
    assert!(agent.runner(&op, Path::new(".")).is_ok());
    let mut unknown = op.clone();
    unknown.spec.processor.http_server.as_mut().unwrap().path =
        Some("/processor/dockerInfoCollector".to_owned());
    let err = agent
        .runner(&unknown, Path::new("."))
        .err()
        .expect("no such built-in")
        .to_string();
    assert!(
        err.contains("names no built-in processor; built-ins: /processor/podListCollector"),
        "{err}"
    );
}
