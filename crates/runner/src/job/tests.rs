//! The Job runner against a mock API server: the exact ConfigMap and Job created, the
//! result read back, failures, re-attaching after a restart, and the dry run.

use super::*;
use crate::offload::OffloadTarget;
use operon_cluster::kube::mock::{self, Call, MockApi};
use operon_data::api::{EnvVar, JobResources};
use serde_json::{Value, json};
use std::sync::Arc;

fn request() -> RunRequest {
    RunRequest {
        name: "ops/disk/node-3".to_owned(),
        input: [
            ("node".to_owned(), "n1".to_owned()),
            ("operation.df.output".to_owned(), "87%".to_owned()),
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
        timeout: Duration::from_secs(300),
    }
}

fn processor() -> JobProcessor {
    JobProcessor {
        image: "registry.local/fsck:1.2".to_owned(),
        command: vec!["/bin/fsck-report".to_owned()],
        args: vec!["--json".to_owned()],
        env: vec![EnvVar {
            name: "MODE".to_owned(),
            value: "fast".to_owned(),
        }],
        resources: Some(JobResources {
            requests: [("cpu".to_owned(), "500m".to_owned())].into(),
            limits: [("memory".to_owned(), "256Mi".to_owned())].into(),
        }),
        node_selector: BTreeMap::new(),
        on_diagnosis_node: true,
        service_account_name: Some("fsck".to_owned()),
        image_pull_policy: None,
        ttl_seconds_after_finished: None,
        result_from: None,
    }
}

fn job_runner(client: Option<kube::Client>, processor: JobProcessor) -> Arc<JobRunner> {
    Arc::new(JobRunner::new(
        client,
        "fsck",
        processor,
        Platform {
            cluster: Some("lab".to_owned()),
        },
    ))
}

fn name() -> String {
    job_name(&request())
}

fn expected_job() -> Value {
    let name = name();
    let labels = json!({"app.kubernetes.io/managed-by": "operon", "operon.dev/run": name,
                        "operon.dev/diagnosis": "disk"});
    let plain = |n: &str, v: &str| json!({"name": n, "value": v});
    let map_ref =
        |n: &str| json!({"name": n, "valueFrom": {"configMapKeyRef": {"name": name, "key": n}}});
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": name, "namespace": "ops", "labels": labels,
            "annotations": {"operon.dev/run-name": "ops/disk/node-3", "operon.dev/operation": "fsck"},
            "ownerReferences": [{"apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                "name": "disk", "uid": "uid-1", "blockOwnerDeletion": false, "controller": false}],
        },
        "spec": {
            "backoffLimit": 0, "activeDeadlineSeconds": 300, "ttlSecondsAfterFinished": 600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": "fsck",
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}},
                    "volumes": [{"name": "operon-input", "configMap": {"name": name}}],
                    "containers": [{
                        "name": "step", "image": "registry.local/fsck:1.2",
                        "command": ["/bin/fsck-report"], "args": ["--json"],
                        "resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "256Mi"}},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "volumeMounts": [{"name": "operon-input", "mountPath": "/var/run/operon", "readOnly": true}],
                        "env": [
                            plain("MODE", "fast"),
                            plain("OPERON_RUN_NAME", "ops/disk/node-3"),
                            plain("OPERON_DRY_RUN", "false"),
                            plain("OPERON_TIMEOUT_SECONDS", "300"),
                            plain("OPERON_NODE", "n1"),
                            plain("OPERON_NAMESPACE", "ops"),
                            plain("OPERON_OWNER_KIND", "Diagnosis"),
                            plain("OPERON_OWNER_NAME", "disk"),
                            plain("OPERON_OWNER_UID", "uid-1"),
                            plain("OPERON_CLUSTER", "lab"),
                            plain("OPERON_INPUT_PATH", "/var/run/operon/input.json"),
                            plain("OPERON_CONTEXT_PATH", "/var/run/operon/context.json"),
                            plain("OPERON_RESULT_PATH", "/dev/termination-log"),
                            plain("RUNNER_ARGS_PATH", "/var/run/operon/input.json"),
                            plain("RUNNER_CONTEXT_PATH", "/var/run/operon/context.json"),
                            map_ref("OPERON_INPUT_NODE"),
                            map_ref("OPERON_INPUT_OPERATION_DF_OUTPUT"),
                        ],
                    }],
                },
            },
        },
    })
}

fn pod(status: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{}-x1", name()), "namespace": "ops",
                     "labels": {"operon.dev/run": name()}},
        "spec": {"nodeName": "n1", "containers": [{"name": "step", "image": "registry.local/fsck:1.2"}]},
        "status": status})
}

fn terminated(phase: &str, code: i32, message: &str) -> Value {
    json!({"phase": phase, "containerStatuses": [{"name": "step", "image": "registry.local/fsck:1.2",
        "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": code, "message": message}}}]})
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "7"}, "items": items})
}

/// What the kubelet serves for the last line of `log`: the container runtime stores a
/// line longer than 16 KiB as parts, and the tail is counted in parts.
fn kubelet_tail(log: &str) -> String {
    const PART: usize = 16 * 1024;
    let line = log.trim_end_matches('\n').rsplit('\n').next().unwrap_or("");
    let last_part = match line.len() % PART {
        0 if !line.is_empty() => line.len() - PART,
        rest => line.len() - rest,
    };
    format!("{}\n", &line[last_part..])
}

/// What the mock saw, as `METHOD path?query`.
type Seen = Vec<String>;

/// Answers the runner's requests after the create step: the two watchers' lists with
/// `job` and `pods` (their watches are held open), log reads with `log`, deletes with
/// success, until `stop` requests of the given kind have been answered.
async fn serve_watches(
    api: &mut MockApi,
    job: Option<Value>,
    pods: Vec<Value>,
    log: &str,
    stop_after_deletes: usize,
) -> (Seen, Vec<Call>) {
    let (mut seen, mut held, mut deletes) = (Vec::new(), Vec::new(), 0);
    while deletes < stop_after_deletes {
        let call = api.next().await;
        seen.push(format!("{} {}", call.method, call.uri));
        if call.uri.contains("watch=true") {
            held.push(call);
        } else if call.method == "DELETE" {
            deletes += 1;
            let body: Value = serde_json::from_slice(&call.body).unwrap_or_default();
            let policy = body["propagationPolicy"].as_str().unwrap_or("-").to_owned();
            seen.last_mut().unwrap().push_str(&format!(" {policy}"));
            call.answer(
                200,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
            );
        } else if call.method == "PATCH" && call.uri.contains("/configmaps/") {
            let owner = &call.json()["metadata"]["ownerReferences"][0];
            seen.last_mut()
                .unwrap()
                .push_str(&format!(" to {} {}", owner["kind"], owner["uid"]));
            call.answer(200, json!({"kind": "ConfigMap", "apiVersion": "v1"}));
        } else if call.uri.contains("/log?") {
            let body = match call.uri.contains("tailLines=1") {
                true => kubelet_tail(log),
                false => log.to_owned(),
            };
            call.answer_raw(200, body.into_bytes());
        } else if call.uri.contains("/jobs?") {
            call.answer(200, list("JobList", job.clone().into_iter().collect()));
        } else if call.uri.contains("/pods?") {
            call.answer(200, list("PodList", pods.clone()));
        } else {
            panic!("unexpected {} {}", call.method, call.uri);
        }
    }
    (seen, held)
}

#[tokio::test]
async fn creates_the_input_and_the_job_and_reads_the_termination_message() {
    let (client, mut api) = mock::pair();
    let runner = job_runner(Some(client), processor());
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(&request()).await }
    });
    let name = name();
    let get = api.next().await;
    assert_eq!(
        (get.method.as_str(), get.uri.as_str()),
        (
            "GET",
            format!("/apis/batch/v1/namespaces/ops/jobs/{name}").as_str()
        )
    );
    get.fail(404, "NotFound", "not found");

    let input = api.next().await;
    assert_eq!(input.method, "POST");
    assert_eq!(
        input.uri,
        "/api/v1/namespaces/ops/configmaps?&fieldManager=operon"
    );
    let body = input.json();
    assert_eq!(body["metadata"]["name"], name.as_str());
    assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "uid-1");
    let data = &body["data"];
    assert_eq!(data["OPERON_INPUT_OPERATION_DF_OUTPUT"], "87%");
    assert_eq!(
        serde_json::from_str::<Value>(data["input.json"].as_str().unwrap()).unwrap(),
        json!({"node": "n1", "operation.df.output": "87%"})
    );
    let context: Value = serde_json::from_str(data["context.json"].as_str().unwrap()).unwrap();
    assert_eq!(context["platform"]["cluster"], "lab");
    assert_eq!(context["timeout"], "5m");
    input.answer(201, body);

    let job = api.next().await;
    assert_eq!(job.method, "POST");
    assert_eq!(
        job.uri,
        "/apis/batch/v1/namespaces/ops/jobs?&fieldManager=operon"
    );
    assert_eq!(job.json(), expected_job());
    let mut created = job.json();
    created["metadata"]["uid"] = json!("job-uid-1");
    job.answer(201, created.clone());

    let done = pod(terminated(
        "Succeeded",
        0,
        r#"{"fsck":"clean","blocks":"12"}"#,
    ));
    let (seen, _held) = serve_watches(&mut api, Some(created), vec![done], "", 1).await;
    let out = task.await.unwrap().unwrap();
    assert_eq!(out.results["fsck"], "clean");
    assert_eq!(out.results["blocks"], "12");
    // The input is handed to the Job before the run is watched, so the Job's TTL
    // removes it should this engine never get to.
    assert_eq!(
        seen[0],
        format!(
            "PATCH /api/v1/namespaces/ops/configmaps/{name}?&fieldManager=operon to \"Job\" \"job-uid-1\""
        )
    );
    // The finished Job stays for its TTL; only the input ConfigMap goes at once.
    let deletes: Vec<&String> = seen.iter().filter(|s| s.starts_with("DELETE")).collect();
    assert_eq!(
        deletes,
        [&format!(
            "DELETE /api/v1/namespaces/ops/configmaps/{name}? -"
        )]
    );
}

#[tokio::test]
async fn a_restarted_controller_re_attaches_instead_of_creating_a_second_job() {
    let (client, mut api) = mock::pair();
    let runner = job_runner(Some(client), processor());
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(&request()).await }
    });
    let existing = expected_job();
    api.next().await.answer(200, existing.clone());
    let mut failed = existing;
    failed["status"] = json!({"conditions": [{"type": "Failed", "status": "True",
        "reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"}]});
    let (seen, _held) = serve_watches(&mut api, Some(failed), vec![], "", 1).await;
    assert!(!seen.iter().any(|s| s.starts_with("POST")), "{seen:?}");
    let err = task.await.unwrap().unwrap_err();
    assert!(
        err.message.ends_with("ran past its deadline (the Operation's timeoutSeconds): DeadlineExceeded: Job was active longer than specified deadline"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_fails_the_step_and_removes_the_job() {
    let (client, mut api) = mock::pair();
    let runner = job_runner(Some(client), processor());
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(&request()).await }
    });
    api.next().await.answer(200, expected_job());
    let stuck = pod(
        json!({"phase": "Pending", "containerStatuses": [{"name": "step",
        "image": "registry.local/fsck:1.2", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"waiting": {"reason": "ImagePullBackOff",
                              "message": "Back-off pulling image \"registry.local/fsck:1.2\""}}}]}),
    );
    let (seen, _held) = serve_watches(&mut api, Some(expected_job()), vec![stuck], "", 2).await;
    let err = task.await.unwrap().unwrap_err();
    assert!(
        err.message
            .contains("cannot be pulled (ImagePullBackOff): Back-off pulling image"),
        "{}",
        err.message
    );
    let name = name();
    let deletes: Vec<&String> = seen.iter().filter(|s| s.starts_with("DELETE")).collect();
    assert_eq!(
        deletes,
        [
            &format!("DELETE /apis/batch/v1/namespaces/ops/jobs/{name}? Background"),
            &format!("DELETE /api/v1/namespaces/ops/configmaps/{name}? -")
        ]
    );
}

#[tokio::test]
async fn results_can_come_from_the_last_log_line_and_bad_results_say_so() {
    let (client, mut api) = mock::pair();
    let mut from_logs = processor();
    from_logs.result_from = Some(JobResultSource::Logs);
    let runner = job_runner(Some(client), from_logs);
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(&request()).await }
    });
    api.next().await.answer(200, expected_job());
    let done = pod(terminated("Succeeded", 0, ""));
    let (seen, _held) = serve_watches(
        &mut api,
        Some(expected_job()),
        vec![done],
        "{\"fsck\":\"dirty\"}\n",
        1,
    )
    .await;
    let out = task.await.unwrap().unwrap();
    assert_eq!(out.results["fsck"], "dirty");
    let log = seen.iter().find(|s| s.contains("/log?")).unwrap();
    assert!(log.contains("container=step"), "{log}");
    assert!(log.contains("limitBytes=1048576"), "{log}");
    assert!(log.contains("tailLines=1"), "{log}");

    // A result line longer than the runtime's 16 KiB parts: the last part alone is
    // no JSON, so the whole log is read and its last line taken.
    let (client, mut api) = mock::pair();
    let mut from_logs = processor();
    from_logs.result_from = Some(JobResultSource::Logs);
    let runner = job_runner(Some(client), from_logs);
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(&request()).await }
    });
    api.next().await.answer(200, expected_job());
    let big = "x".repeat(40_000);
    let log = format!("starting\n{{\"fsck\":\"{big}\"}}\n");
    let done = pod(terminated("Succeeded", 0, ""));
    let (seen, _held) = serve_watches(&mut api, Some(expected_job()), vec![done], &log, 1).await;
    let out = task.await.unwrap().unwrap();
    assert_eq!(out.results["fsck"], big);
    let reads: Vec<&String> = seen.iter().filter(|s| s.contains("/log?")).collect();
    assert_eq!(reads.len(), 2, "{reads:?}");
    assert!(!reads[1].contains("tailLines"), "{}", reads[1]);

    let (client, mut api) = mock::pair();
    let runner = job_runner(Some(client), processor());
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(&request()).await }
    });
    api.next().await.answer(200, expected_job());
    let done = pod(terminated("Succeeded", 0, "all good"));
    serve_watches(&mut api, Some(expected_job()), vec![done], "", 1).await;
    let err = task.await.unwrap().unwrap_err();
    assert!(
        err.message.contains("is not a JSON object of strings"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_job_of_another_run_is_not_adopted() {
    let (client, mut api) = mock::pair();
    let runner = job_runner(Some(client), processor());
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(&request()).await }
    });
    let mut other = expected_job();
    other["metadata"]["annotations"] = json!({});
    api.next().await.answer(200, other);
    let err = task.await.unwrap().unwrap_err();
    assert!(
        err.message
            .contains("belongs to another run (not created by Operon)"),
        "{}",
        err.message
    );
    api.quiet().await;
}

#[tokio::test]
async fn dry_run_renders_and_asks_the_server_to_validate_without_storing() {
    let offline = job_runner(None, processor())
        .dry_run(&request())
        .await
        .unwrap();
    let detail = offline.detail.unwrap();
    assert_eq!(detail["job"], expected_job());
    assert_eq!(
        detail["configMap"]["inputKeys"],
        json!(["node", "operation.df.output"])
    );
    assert!(
        !detail.to_string().contains("87%"),
        "input values stay out of the report"
    );
    assert!(
        offline
            .action
            .contains("running registry.local/fsck:1.2 (deadline 300s)")
    );
    assert!(offline.output.results.is_empty());

    let (client, mut api) = mock::pair();
    let runner = job_runner(Some(client), processor());
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.dry_run(&request()).await }
    });
    for path in [
        "/api/v1/namespaces/ops/configmaps",
        "/apis/batch/v1/namespaces/ops/jobs",
    ] {
        let call = api.next().await;
        assert_eq!(call.method, "POST");
        assert_eq!(call.uri, format!("{path}?&dryRun=All&fieldManager=operon"));
        let body = call.json();
        call.answer(201, body);
    }
    let report = task.await.unwrap().unwrap();
    assert!(
        report
            .action
            .ends_with("accepted by the API server in a server-side dry run")
    );
    api.quiet().await;
}

#[tokio::test]
async fn without_a_cluster_a_real_run_says_how_to_see_the_job() {
    let err = job_runner(None, processor())
        .run(&request())
        .await
        .unwrap_err();
    assert!(err.message.contains("use --dry-run"), "{}", err.message);
    let mut unpinned = request();
    unpinned.node = None;
    let err = job_runner(None, processor())
        .dry_run(&unpinned)
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "job.onDiagnosisNode is set but the Diagnosis names no node"
    );
}

/// An offloaded wasm step (`wasm.runOn: Job`): the target it goes to.
fn offload_target(catalog: Option<Arc<operon_store::ModuleCatalog>>) -> OffloadTarget {
    OffloadTarget {
        image: "ghcr.io/operon-dev/operon:0.1.0".to_owned(),
        module_url: "https://operon-webhooks.operon.svc:443".to_owned(),
        server_name: None,
        ca: tokio::sync::watch::channel(b"-----BEGIN CERTIFICATE-----\n".to_vec()).1,
        catalog,
    }
}

fn offloaded_wasm() -> operon_data::api::WasmProcessor {
    operon_data::api::WasmProcessor {
        module: "disk-scan".to_owned(),
        image_pull_secrets: Vec::new(),
        config: [("depth".to_owned(), "2".to_owned())].into(),
        read_only_paths: Vec::new(),
        run_on: Some(operon_data::api::WasmRunOn::Job),
        job: Some(operon_data::api::WasmJob {
            service_account_name: Some("scanner".to_owned()),
            ttl_seconds_after_finished: Some(60),
            ..operon_data::api::WasmJob::default()
        }),
    }
}

#[tokio::test]
async fn an_offloaded_wasm_step_is_a_job_of_operons_image_running_the_digest() {
    let digest = operon_sandbox::ModuleDigest::of(b"the module");
    let hex = digest.to_string();
    let (client, mut api) = mock::pair();
    let runner = Arc::new(
        offload_target(None)
            .runner(
                Some(client),
                "disk-scan",
                &offloaded_wasm(),
                digest,
                Platform {
                    cluster: Some("lab".to_owned()),
                },
            )
            .unwrap(),
    );
    let mut request = request();
    request.results = [("operation.df.output".to_owned(), "87%".to_owned())].into();
    let task = tokio::spawn({
        let runner = runner.clone();
        let request = request.clone();
        async move { runner.run(&request).await }
    });
    let name = name();
    api.next().await.fail(404, "NotFound", "not found");

    let input = api.next().await;
    let body = input.json();
    let data = &body["data"];
    assert_eq!(data["module-ca.crt"], "-----BEGIN CERTIFICATE-----\n");
    assert_eq!(
        serde_json::from_str::<Value>(data["results.json"].as_str().unwrap()).unwrap(),
        json!({"operation.df.output": "87%"})
    );
    assert_eq!(
        serde_json::from_str::<Value>(data["input.json"].as_str().unwrap()).unwrap(),
        json!({"node": "n1", "operation.df.output": "87%"})
    );
    input.answer(201, body);

    let job = api.next().await;
    let labels = json!({"app.kubernetes.io/managed-by": "operon", "operon.dev/run": name,
                        "operon.dev/diagnosis": "disk"});
    let plain = |n: &str, v: &str| json!({"name": n, "value": v});
    let map_ref =
        |n: &str| json!({"name": n, "valueFrom": {"configMapKeyRef": {"name": name, "key": n}}});
    let expected = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": name, "namespace": "ops", "labels": labels,
            "annotations": {"operon.dev/run-name": "ops/disk/node-3", "operon.dev/operation": "disk-scan"},
            "ownerReferences": [{"apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                "name": "disk", "uid": "uid-1", "blockOwnerDeletion": false, "controller": false}],
        },
        "spec": {
            "backoffLimit": 0, "activeDeadlineSeconds": 300, "ttlSecondsAfterFinished": 60,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": "scanner",
                    "volumes": [{"name": "operon-input", "configMap": {"name": name}}],
                    "containers": [{
                        "name": "step", "image": "ghcr.io/operon-dev/operon:0.1.0",
                        "command": ["operon"],
                        "args": ["op", "run", "--digest", hex,
                            "--module-url", "https://operon-webhooks.operon.svc:443",
                            "--module-ca", "/var/run/operon/module-ca.crt",
                            "--token-file", "/var/run/secrets/kubernetes.io/serviceaccount/token",
                            "--input-file", "/var/run/operon/input.json",
                            "--results-file", "/var/run/operon/results.json",
                            "--context-file", "/var/run/operon/context.json",
                            "--result-file", "/dev/termination-log",
                            "--no-cache", "--param", "depth=2"],
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "volumeMounts": [{"name": "operon-input", "mountPath": "/var/run/operon", "readOnly": true}],
                        "env": [
                            plain("OPERON_RUN_NAME", "ops/disk/node-3"),
                            plain("OPERON_DRY_RUN", "false"),
                            plain("OPERON_TIMEOUT_SECONDS", "300"),
                            plain("OPERON_NODE", "n1"),
                            plain("OPERON_NAMESPACE", "ops"),
                            plain("OPERON_OWNER_KIND", "Diagnosis"),
                            plain("OPERON_OWNER_NAME", "disk"),
                            plain("OPERON_OWNER_UID", "uid-1"),
                            plain("OPERON_CLUSTER", "lab"),
                            plain("OPERON_INPUT_PATH", "/var/run/operon/input.json"),
                            plain("OPERON_CONTEXT_PATH", "/var/run/operon/context.json"),
                            plain("OPERON_RESULT_PATH", "/dev/termination-log"),
                            plain("RUNNER_ARGS_PATH", "/var/run/operon/input.json"),
                            plain("RUNNER_CONTEXT_PATH", "/var/run/operon/context.json"),
                            map_ref("OPERON_INPUT_NODE"),
                            map_ref("OPERON_INPUT_OPERATION_DF_OUTPUT"),
                        ],
                    }],
                },
            },
        },
    });
    assert_eq!(job.json(), expected);
    let created = job.json();
    job.answer(201, created.clone());
    let done = pod(terminated("Succeeded", 0, r#"{"scanned":"41"}"#));
    serve_watches(&mut api, Some(created), vec![done], "", 1).await;
    let out = task.await.unwrap().unwrap();
    assert_eq!(out.results["scanned"], "41");
}

#[tokio::test]
async fn an_offloaded_dry_run_names_the_module_and_the_image() {
    let digest = operon_sandbox::ModuleDigest::of(b"the module");
    let runner = offload_target(None)
        .runner(
            None,
            "disk-scan",
            &offloaded_wasm(),
            digest,
            Platform::default(),
        )
        .unwrap();
    let mut request = request();
    request.dry_run = true;
    let dry = runner.dry_run(&request).await.unwrap();
    assert!(
        dry.action.contains(&format!(
            "running `operon op run` on module {digest} in ghcr.io/operon-dev/operon:0.1.0"
        )),
        "{}",
        dry.action
    );
    let detail = dry.detail.unwrap();
    assert_eq!(
        detail["configMap"]["keys"],
        json!([
            "input.json",
            "context.json",
            "module-ca.crt",
            "results.json"
        ])
    );
    assert_eq!(
        detail["job"]["spec"]["template"]["spec"]["containers"][0]["args"][3],
        digest.to_string()
    );
}

#[test]
fn a_module_the_module_api_does_not_serve_is_refused_when_the_runner_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = operon_store::BlobStore::open(dir.path(), 1 << 20).unwrap();
    let held = blobs.put(b"held").unwrap();
    let catalog = Arc::new(operon_store::ModuleCatalog::new(blobs));
    let target = offload_target(Some(catalog));
    let wasm = offloaded_wasm();
    assert!(
        target
            .runner(None, "disk-scan", &wasm, held, Platform::default())
            .is_ok()
    );
    let missing = operon_sandbox::ModuleDigest::of(b"not uploaded");
    let err = target
        .runner(None, "disk-scan", &wasm, missing, Platform::default())
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("\"disk-scan\"")
            && text.contains(&missing.to_string())
            && text.contains("operon module push"),
        "{text}"
    );
}

#[tokio::test]
async fn a_completion_seen_before_its_pod_is_read_from_the_pods_as_they_are() {
    let (client, mut api) = mock::pair();
    let runner = job_runner(Some(client), processor());
    let task = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(&request()).await }
    });
    let mut complete = expected_job();
    complete["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}]});
    api.next().await.answer(200, complete.clone());
    let done = pod(terminated("Succeeded", 0, r#"{"fsck":"clean"}"#));
    // The pod watch's list predates the pod's success; the list asked afterwards has it.
    let (mut pod_lists, mut held) = (0, Vec::new());
    loop {
        let call = api.next().await;
        if call.uri.contains("watch=true") {
            held.push(call);
        } else if call.uri.contains("/jobs?") {
            call.answer(200, list("JobList", vec![complete.clone()]));
        } else if call.uri.contains("/pods?") {
            pod_lists += 1;
            let items = if pod_lists == 1 {
                vec![]
            } else {
                vec![done.clone()]
            };
            call.answer(200, list("PodList", items));
        } else if call.method == "DELETE" {
            call.answer(200, json!({"kind": "Status", "status": "Success"}));
            break;
        } else {
            panic!("unexpected {} {}", call.method, call.uri);
        }
    }
    let out = task.await.unwrap().unwrap();
    assert_eq!(out.results["fsck"], "clean");
    assert_eq!(pod_lists, 2);
}

#[tokio::test]
async fn an_offloaded_step_waits_for_the_module_apis_ca_and_creates_nothing_meanwhile() {
    let digest = operon_sandbox::ModuleDigest::of(b"the module");
    let (sender, ca) = tokio::sync::watch::channel(Vec::new());
    let target = OffloadTarget {
        ca,
        ..offload_target(None)
    };
    // The mock answers nothing: a runner that tried to create its Job would hang.
    let (client, _api) = mock::pair();
    let Err(refused) = target.runner(
        Some(client.clone()),
        "disk-scan",
        &offloaded_wasm(),
        digest,
        Platform::default(),
    ) else {
        panic!("not refused while the CA is not there");
    };
    assert!(
        refused
            .to_string()
            .contains("the module API's CA is not there yet"),
        "{refused}"
    );
    sender.send_replace(b"-----BEGIN CERTIFICATE-----\n".to_vec());
    assert!(
        target
            .runner(
                Some(client),
                "disk-scan",
                &offloaded_wasm(),
                digest,
                Platform::default()
            )
            .is_ok()
    );
}

#[tokio::test]
async fn inputs_left_by_an_interrupted_run_are_removed_and_those_of_jobs_kept() {
    let (client, mut api) = mock::pair();
    let task = tokio::spawn(async move {
        super::remove_interrupted_inputs(client, "ops", "operon.dev/hook-uid=hook-1", "hook-1")
            .await
    });
    let owned = |name: &str, kind: &str, uid: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name,
            "namespace": "ops", "ownerReferences": [{"apiVersion": "x/v1", "kind": kind,
            "name": "owner", "uid": uid}]}})
    };
    let listing = api.next().await;
    assert_eq!(
        (listing.method.as_str(), listing.uri.as_str()),
        (
            "GET",
            "/api/v1/namespaces/ops/configmaps?&labelSelector=operon.dev%2Fhook-uid%3Dhook-1"
        )
    );
    listing.answer(
        200,
        list(
            "ConfigMapList",
            vec![
                owned("run-a", "Hook", "hook-1"),
                owned("run-b", "Job", "job-b"),
                owned("run-c", "Hook", "hook-1"),
            ],
        ),
    );
    let first = api.next().await;
    assert_eq!(
        (first.method.as_str(), first.uri.as_str()),
        ("DELETE", "/api/v1/namespaces/ops/configmaps/run-a?")
    );
    first.answer(200, json!({"kind": "Status", "status": "Success"}));
    // Gone meanwhile (the engine that created it deleted it after all): not an error.
    let second = api.next().await;
    assert_eq!(second.uri, "/api/v1/namespaces/ops/configmaps/run-c?");
    second.fail(404, "NotFound", "configmaps \"run-c\" not found");
    assert_eq!(task.await.unwrap().unwrap(), 1);
}

// One thread: the runner's task sees the test's subscriber.
#[tokio::test]
async fn a_recorded_trace_reaches_the_jobs_container_as_traceparent() {
    use tracing::Instrument as _;
    let (_recording, span, traceparent) = crate::trace::recorded_span();
    let (client, mut api) = mock::pair();
    let runner = job_runner(Some(client), processor());
    let task = tokio::spawn(async move { runner.dry_run(&request()).await }.instrument(span));
    let call = api.next().await;
    assert!(call.uri.starts_with("/api/v1/namespaces/ops/configmaps"));
    let body = call.json();
    call.answer(201, body);
    let call = api.next().await;
    assert!(call.uri.starts_with("/apis/batch/v1/namespaces/ops/jobs"));
    let job = call.json();
    call.answer(201, job.clone());
    task.await.unwrap().unwrap();
    let env = &job["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!({"name": "TRACEPARENT", "value": traceparent})),
        "{env}"
    );
    api.quiet().await;
}
