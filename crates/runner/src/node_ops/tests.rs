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
        client,
        node: Some("node-a".to_owned()),
        systemd_bus: systemd::DEFAULT_BUS.to_owned(),
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
        assert!(b.path().starts_with(crate::builtin::PREFIX));
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
    let agent = Processors::new(crate::processors::ProcessorSettings {
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

#[tokio::test]
async fn the_controller_reads_the_node_of_the_diagnosis_and_leaves_the_rest_to_agents() {
    let (client, mut api) = mock::pair();
    let controller = Processors::new(crate::processors::ProcessorSettings {
        built_ins: Some(Arc::new(ControllerOps::new(client))),
        ..Default::default()
    });
    let step = |path: &str| -> Operation {
        serde_json::from_value(json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
            "metadata": {"name": "step"},
            "spec": {"processor": {"httpServer": {"path": path}}},
        }))
        .unwrap()
    };
    // The pods of the Diagnosis' node (the request's), read through the API server.
    let pods = controller
        .runner(&step("/processor/podListCollector"), Path::new("."))
        .unwrap();
    let run = tokio::spawn(async move { pods.run(&request(false)).await });
    answer_pod_list(&mut api).await;
    assert!(run.await.unwrap().is_ok());
    // The node's status, from its Node object.
    let status = controller
        .runner(&step("/processor/nodeStatusCollector"), Path::new("."))
        .unwrap();
    let run = tokio::spawn(async move { status.run(&request(false)).await });
    let get = api.next().await;
    assert_eq!(get.uri, "/api/v1/nodes/node-a");
    get.answer(
        200,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
               "status": {"conditions": [{"type": "Ready", "status": "False",
                                          "reason": "KubeletNotReady"}]}}),
    );
    let out = run.await.unwrap().unwrap();
    assert_eq!(out.results[node_state::NODE_READY], "False");
    assert!(
        out.output
            .starts_with("node node-a: Ready=False (KubeletNotReady)"),
        "{}",
        out.output
    );
    // Its kubelet's Lease, and the Events about it.
    let lease = controller
        .runner(&step("/processor/nodeLeaseCollector"), Path::new("."))
        .unwrap();
    let run = tokio::spawn(async move { lease.run(&request(false)).await });
    let get = api.next().await;
    assert_eq!(
        get.uri,
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-a"
    );
    get.fail(404, "NotFound", "leases \"node-a\" not found");
    let out = run.await.unwrap().unwrap();
    assert_eq!(out.output, "node node-a has no Lease in kube-node-lease");
    let events = controller
        .runner(&step("/processor/nodeEventCollector"), Path::new("."))
        .unwrap();
    let run = tokio::spawn(async move { events.run(&request(false)).await });
    let list = api.next().await;
    assert_eq!(
        list.uri,
        "/api/v1/events?&fieldSelector=involvedObject.kind%3DNode%2CinvolvedObject.name%3Dnode-a"
    );
    list.answer(
        200,
        json!({"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": []}),
    );
    assert_eq!(
        run.await.unwrap().unwrap().output,
        "no Events about node node-a"
    );
    // A Diagnosis that names no node has nothing to read.
    let status = controller
        .runner(&step("/processor/nodeStatusCollector"), Path::new("."))
        .unwrap();
    let mut nowhere = request(false);
    nowhere.node = None;
    let err = status.run(&nowhere).await.unwrap_err().to_string();
    assert!(
        err.contains("this Diagnosis names none (spec.nodeName)"),
        "{err}"
    );
    // What needs the node itself, or changes it, is its agent's.
    for path in ["/processor/processCollector", "/processor/nodeCordon"] {
        let err = controller
            .runner(&step(path), Path::new("."))
            .err()
            .expect("agent only")
            .to_string();
        assert!(
            err.contains("is a built-in of the node agent"),
            "{path}: {err}"
        );
    }
    api.quiet().await;
}

#[tokio::test]
async fn the_agent_leaves_the_node_state_collectors_to_the_controller() {
    let (client, _api) = mock::pair();
    let agent = NodeOps::new(client, "node-a");
    assert!(!agent.paths().contains(&"/processor/nodeStatusCollector"));
    assert!(agent.paths().contains(&"/processor/podListCollector"));
}

/// `deploy/builtins/operations.yaml`: one Operation per built-in, named as KubeDiag
/// names it (the path's last part in kebab case), saying where it runs.
#[test]
fn every_built_in_ships_as_an_operation_under_its_kubediag_name() {
    let text = include_str!("../../../../deploy/builtins/operations.yaml");
    let mut shipped = BTreeMap::new();
    for document in text.split("\n---\n").skip(1) {
        let field = |key: &str| {
            document
                .lines()
                .find_map(|l| l.trim().strip_prefix(key))
                .map(str::trim)
                .unwrap_or_else(|| panic!("no {key} in {document}"))
        };
        let comment: String = document
            .lines()
            .map_while(|l| l.strip_prefix("# "))
            .collect::<Vec<_>>()
            .join(" ");
        shipped.insert(field("path:"), (field("name:"), comment));
    }
    assert_eq!(shipped.len(), BuiltIn::ALL.len(), "{shipped:?}");
    for built_in in BuiltIn::ALL {
        let path = built_in.path();
        let (name, comment) = shipped
            .get(path)
            .unwrap_or_else(|| panic!("no Operation for {path}"));
        let tail = path.trim_start_matches("/processor/");
        let kebab: String = tail
            .chars()
            .flat_map(|c| {
                let lower = c.to_ascii_lowercase();
                if c.is_ascii_uppercase() {
                    vec!['-', lower]
                } else {
                    vec![lower]
                }
            })
            .collect();
        assert_eq!(*name, kebab, "{path}");
        let place = match (built_in.on_agent(), built_in.in_controller()) {
            (true, true) => "Agent and controller.",
            (true, false) => "Agent only.",
            (false, true) => "Controller only.",
            (false, false) => unreachable!("{path} runs nowhere"),
        };
        assert!(
            comment.ends_with(place),
            "{path}: {comment:?} should say {place:?}"
        );
    }
}
