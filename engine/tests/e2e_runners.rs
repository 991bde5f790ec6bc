//! End to end against a real Kubernetes API server (only with `OPERON_E2E_KUBECONFIG`,
//! skipped otherwise): a Diagnosis mixing a wasm, a script and a `job` step run by
//! `operon serve`, with the controller killed while the Job runs (the next one
//! re-attaches); the same Diagnosis as a dry run, which creates nothing; a wasm step
//! offloaded to a Job of Operon's image (its container's command run by the test,
//! fetching the pushed module by digest from `operon serve`); the Argo
//! runner against a Workflow CRD shaped like Argo's; and the controller-side cost of a
//! Job step.
//!
//! There is no kubelet: the test plays it, writing the status of the Job's pod.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use operon::api::JobProcessor;
use operon::runner::context::Platform;
use operon::runner::job::JobRunner;
use operon::runner::{RunRequest, Runner};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

mod e2e_support;
use e2e_support::*;

/// Each test's `operon serve` reconciles every Diagnosis of the cluster: two at once
/// would run each other's steps, one of them without the other's flags.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

fn operations(run: &str, module: &str) -> Vec<DynamicObject> {
    let op = |name: String, processor: Value| {
        object(
            json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
            "metadata": {"name": name}, "spec": {"processor": processor}}),
        )
    };
    vec![
        op(
            format!("e2e-echo-{run}"),
            json!({"timeoutSeconds": 30, "wasm": {"module": module}}),
        ),
        op(
            format!("e2e-hello-{run}"),
            json!({"timeoutSeconds": 30, "scriptRunner": {"operationResultKey": "hello",
                "script": "echo \"hello from $OPERON_RUN_NAME dry=$OPERON_DRY_RUN\""}}),
        ),
        op(
            format!("e2e-report-{run}"),
            json!({"timeoutSeconds": 120, "job": {"image": "registry.local/report:1",
                "args": ["--verdict"], "ttlSecondsAfterFinished": 60}}),
        ),
    ]
}

/// Plays the kubelet: the pod ran and its container wrote `message`.
async fn complete_pod(pods: &Api<Pod>, pod: &Pod, message: &str) {
    let name = pod.metadata.name.clone().unwrap();
    let status = json!({"status": {
        "phase": "Succeeded",
        "containerStatuses": [{"name": "step", "image": "registry.local/report:1",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": message,
                "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z"}}}],
    }});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

async fn the_pod(pods: &Api<Pod>, job: &str) -> Pod {
    eventually("the Job's pod", Duration::from_secs(60), async || {
        let list = pods
            .list(&ListParams::default().labels(&format!("operon.dev/run={job}")))
            .await
            .ok()?;
        list.items.into_iter().next()
    })
    .await
}

fn echo_module() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(operon_tests::ECHO, dir.path().join("echo.wasm")).unwrap();
    (dir, "echo".to_owned())
}

#[tokio::test]
async fn wasm_script_and_job_steps_run_to_succeeded_across_a_controller_restart() {
    let Some(path) = kubeconfig() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-runners").await;
    let run = format!("{:08x}", getrandom_u32());
    let (modules, module) = echo_module();
    let ops = operations(&run, &module);
    let names: Vec<String> = ops
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    let set = format!("e2e-mixed-{run}");
    let mut objects: Vec<(&str, String)> = names
        .iter()
        .map(|n| ("operation.operon.dev", n.clone()))
        .collect();
    objects.push(("operationset.operon.dev", set.clone()));
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects,
    };
    apply_operon_crds(&cluster).await;
    let post = PostParams::default();
    for op in &ops {
        operon_api(&cluster, "Operation")
            .create(&post, op)
            .await
            .unwrap();
    }
    operon_api(&cluster, "OperationSet")
        .create(&post, &chain(&set, &names))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let modules_dir = modules.path().to_str().unwrap().to_owned();
    let flags = [
        "--leader-election-namespace",
        scratch.name.as_str(),
        "--modules",
        modules_dir.as_str(),
    ];
    let first = serve(&path, &hooks, &flags, "runners-1");
    let client = cluster.client().clone();
    let diagnoses: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &scratch.name, &operon_resource("Diagnosis"));
    let jobs: Api<Job> = Api::namespaced(client.clone(), &scratch.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &scratch.name);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &scratch.name);

    // The dry run first: every step says what it would do, and nothing is created.
    diagnoses
        .create(
            &post,
            &object(
                json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                "metadata": {"name": "dry"},
                "spec": {"operationSet": set, "dryRun": true, "parameters": {"level": "3"}}}),
            ),
        )
        .await
        .unwrap();
    let dry = eventually(
        "the dry run Succeeded",
        Duration::from_secs(90),
        async || {
            let d = diagnoses.get("dry").await.ok()?;
            let status = d.data.get("status")?.clone();
            (status["phase"] == "Succeeded").then_some(status)
        },
    )
    .await;
    let actions: Vec<&str> = dry["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["dryRun"]["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions.len(), 3, "{dry}");
    assert!(
        actions[0].starts_with("ran in the wasm sandbox with dryRun set"),
        "{}",
        actions[0]
    );
    assert!(
        actions[1].starts_with("ran in the script sandbox"),
        "{}",
        actions[1]
    );
    assert!(
        actions[2].starts_with(&format!("would create Job {}/dry-node-3-", scratch.name))
            && actions[2].ends_with("accepted by the API server in a server-side dry run"),
        "{}",
        actions[2]
    );
    let results = &dry["operationResults"];
    assert_eq!(results["context.dry-run"], "true");
    assert_eq!(
        results["operation.hello.output"],
        format!("hello from {}/dry/node-2 dry=true\n", scratch.name)
    );
    let job_detail: Value =
        serde_json::from_str(dry["nodes"][2]["dryRun"]["detail"].as_str().unwrap()).unwrap();
    assert_eq!(
        job_detail["job"]["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.local/report:1"
    );
    assert!(
        jobs.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        maps.list(&ListParams::default().labels("app.kubernetes.io/managed-by=operon"))
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // The real run: the Job is created with the earlier steps' results as its input.
    diagnoses
        .create(
            &post,
            &object(
                json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                "metadata": {"name": "mixed"},
                "spec": {"operationSet": set, "parameters": {"level": "3"}}}),
            ),
        )
        .await
        .unwrap();
    let job = eventually("the step's Job", Duration::from_secs(90), async || {
        jobs.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .next()
    })
    .await;
    let job_name = job.metadata.name.clone().unwrap();
    assert!(job_name.starts_with("mixed-node-3-"), "{job_name}");
    let container = &job
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0];
    let env: BTreeMap<String, Value> = container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), serde_json::to_value(e).unwrap()))
        .collect();
    assert_eq!(
        env["OPERON_RUN_NAME"]["value"],
        format!("{}/mixed/node-3", scratch.name)
    );
    assert_eq!(env["OPERON_OWNER_KIND"]["value"], "Diagnosis");
    assert_eq!(
        env["OPERON_INPUT_OPERATION_HELLO_OUTPUT"]["valueFrom"]["configMapKeyRef"]["name"],
        job_name.as_str()
    );
    let map = maps.get(&job_name).await.unwrap();
    let input: Value = serde_json::from_str(&map.data.unwrap()["input.json"]).unwrap();
    assert_eq!(input["level"], "3");
    assert_eq!(
        input["operation.hello.output"],
        format!("hello from {}/mixed/node-2 dry=false\n", scratch.name)
    );
    let pod = the_pod(&pods, &job_name).await;

    // The controller dies while the Job runs; the next one waits for the same Job.
    drop(first);
    let _second = serve(&path, &hooks, &flags, "runners-2");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let all = jobs.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(all.len(), 1, "no second Job");
    assert_eq!(all[0].metadata.uid, job.metadata.uid);
    complete_pod(&pods, &pod, r#"{"verdict":"clean","blocks":"12"}"#).await;

    let done = eventually("mixed Succeeded", Duration::from_secs(90), async || {
        let d = diagnoses.get("mixed").await.ok()?;
        let status = d.data.get("status")?.clone();
        (status["phase"] == "Succeeded").then_some(status)
    })
    .await;
    let results = &done["operationResults"];
    assert_eq!(results["verdict"], "clean");
    assert_eq!(results["blocks"], "12");
    assert_eq!(results["level"], "3");
    assert_eq!(results["context.dry-run"], "false");
    let ids: Vec<i64> = done["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3], "each node recorded once: {done}");
    // The input ConfigMap goes once the pod ran; the Job stays for its TTL.
    eventually(
        "the input ConfigMap deleted",
        Duration::from_secs(30),
        async || maps.get_opt(&job_name).await.ok()?.is_none().then_some(()),
    )
    .await;

    // The Job is owned by the Diagnosis: deleting the Diagnosis deletes it (the garbage
    // collector), as it would cancel a Job still running.
    assert!(jobs.get_opt(&job_name).await.unwrap().is_some());
    diagnoses
        .delete("mixed", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    eventually("the Job collected", Duration::from_secs(60), async || {
        jobs.get_opt(&job_name).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// A CRD for Argo's Workflow as Argo's own minimal CRDs declare it: any spec and
/// status, and no status subresource (Argo's controller writes the whole object).
fn argo_workflow_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "workflows.argoproj.io"},
        "spec": {"group": "argoproj.io", "scope": "Namespaced",
            "names": {"kind": "Workflow", "listKind": "WorkflowList", "plural": "workflows",
                      "singular": "workflow", "shortNames": ["wf"]},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "required": ["metadata", "spec"],
                    "properties": {
                        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {"type": "object", "x-kubernetes-map-type": "atomic",
                                 "x-kubernetes-preserve-unknown-fields": true},
                        "status": {"type": "object", "x-kubernetes-map-type": "atomic",
                                   "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    }))
    .unwrap()
}

fn request(namespace: &str, name: &str, timeout: Duration) -> RunRequest {
    RunRequest {
        name: format!("{namespace}/{name}/node-1"),
        input: [("node".to_owned(), "local-node".to_owned())].into(),
        results: BTreeMap::new(),
        node: Some("local-node".to_owned()),
        namespace: Some(namespace.to_owned()),
        owner: None,
        dry_run: false,
        timeout,
    }
}

#[tokio::test]
async fn the_argo_runner_submits_watches_and_maps_outputs_against_the_crd() {
    let Some(path) = kubeconfig() else { return };
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-argo").await;
    let client = cluster.client().clone();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        "workflows.argoproj.io",
        &PatchParams::apply("operon-e2e").force(),
        &Patch::Apply(&argo_workflow_crd()),
    )
    .await
    .unwrap();
    let workflows: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &scratch.name,
        &operon::runner::argo::workflow_resource(),
    );
    eventually("Workflows served", Duration::from_secs(30), async || {
        workflows.list(&ListParams::default()).await.ok().map(drop)
    })
    .await;
    let processor: operon::api::ArgoWorkflowProcessor = serde_json::from_value(json!({
        "workflowTemplateRef": {"name": "fsck"},
        "parameters": [{"name": "target", "fromKey": "node"}],
    }))
    .unwrap();
    let runner = operon::runner::argo::ArgoRunner::new(
        Some(client.clone()),
        "fsck",
        processor,
        Platform::default(),
    );
    let request = request(&scratch.name, "argo", Duration::from_secs(60));
    let dry = runner.dry_run(&request).await.unwrap();
    assert!(
        dry.action
            .ends_with("accepted by the API server in a server-side dry run"),
        "{}",
        dry.action
    );
    assert!(
        workflows
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let task = tokio::spawn(async move { runner.run(&request).await });
    let submitted = eventually("the Workflow", Duration::from_secs(30), async || {
        workflows
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .next()
    })
    .await;
    let name = submitted.metadata.name.clone().unwrap();
    let parameters = &submitted.data["spec"]["arguments"]["parameters"];
    assert_eq!(
        parameters[0],
        json!({"name": "target", "value": "local-node"})
    );
    // Argo's controller would run it and record its outputs: the test does.
    let status = json!({"status": {"phase": "Succeeded",
        "outputs": {"parameters": [{"name": "fsck", "value": "clean"}]}}});
    workflows
        .patch(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let out = task.await.unwrap().unwrap();
    assert_eq!(out.results["fsck"], "clean");
}

/// The controller-side cost of a Job step: from the run's start until its Job exists,
/// and from the pod's completion until the run returns (detection, the result read,
/// the input's deletion). The pod's own run time and the Job controller's creating
/// the pod are not Operon's and are left out.
#[tokio::test]
async fn job_step_overhead() {
    let Some(path) = kubeconfig() else { return };
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-jobcost").await;
    let client = cluster.client().clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &scratch.name);
    let jobs: Api<Job> = Api::namespaced(client.clone(), &scratch.name);
    let processor: JobProcessor =
        serde_json::from_value(json!({"image": "registry.local/report:1"})).unwrap();
    let runner = std::sync::Arc::new(JobRunner::new(
        Some(client.clone()),
        "cost",
        processor,
        Platform::default(),
    ));
    let runs = 10;
    let (mut to_created, mut to_returned) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let request = request(&scratch.name, &format!("cost-{i}"), Duration::from_secs(60));
        let job_name = operon::runner::job::job_name(&request);
        let started = Instant::now();
        let task = tokio::spawn({
            let runner = runner.clone();
            async move { runner.run(&request).await }
        });
        // Polled tightly: `eventually`'s 200 ms steps would swamp the measurement.
        let created = loop {
            if jobs.get_opt(&job_name).await.unwrap().is_some() {
                break Instant::now();
            }
            assert!(started.elapsed() < Duration::from_secs(30), "no Job");
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let pod = the_pod(&pods, &job_name).await;
        complete_pod(&pods, &pod, r#"{"n":"1"}"#).await;
        let completed = Instant::now();
        let out = task.await.unwrap().unwrap();
        let returned = Instant::now();
        assert_eq!(out.results["n"], "1");
        to_created.push(created - started);
        to_returned.push(returned - completed);
    }
    let ms = |d: &[Duration]| {
        let mut v: Vec<f64> = d.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        v.sort_by(f64::total_cmp);
        (v.iter().sum::<f64>() / v.len() as f64, v[v.len() / 2])
    };
    let (create_mean, create_median) = ms(&to_created);
    let (finish_mean, finish_median) = ms(&to_returned);
    eprintln!(
        "job step overhead over {runs} runs: start → Job exists mean {create_mean:.1} ms (median {create_median:.1}); pod Succeeded → run returns mean {finish_mean:.1} ms (median {finish_median:.1}); together mean {:.1} ms",
        create_mean + finish_mean
    );
}

fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let output = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(output.status.success(), "kubectl {args:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// A CA and a serving certificate for 127.0.0.1 in `dir`: (ca, cert, key).
fn certificates(dir: &std::path::Path) -> [std::path::PathBuf; 3] {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let paths = [dir.join("ca.crt"), dir.join("tls.crt"), dir.join("tls.key")];
    std::fs::write(&paths[0], ca.pem()).unwrap();
    std::fs::write(&paths[1], cert.pem()).unwrap();
    std::fs::write(&paths[2], key.serialize_pem()).unwrap();
    paths
}

/// Plays the kubelet for an offloaded step's pod: runs the Job's container command
/// (`operon op run` on the digest) on this machine, with the pod's files (the input
/// ConfigMap's keys, the ServiceAccount token) in `dir`, and returns what it wrote as
/// its termination message.
fn run_container(
    job: &Job,
    data: &BTreeMap<String, String>,
    token: &str,
    dir: &std::path::Path,
) -> String {
    let container = &job
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0];
    assert_eq!(
        container.command.as_deref(),
        Some(&["operon".to_owned()][..])
    );
    for (key, value) in data {
        std::fs::write(dir.join(key), value).unwrap();
    }
    std::fs::write(dir.join("token"), token).unwrap();
    let termination = dir.join("termination-log");
    let local = |arg: &String| -> String {
        if arg == "/dev/termination-log" {
            termination.display().to_string()
        } else if arg == "/var/run/secrets/kubernetes.io/serviceaccount/token" {
            dir.join("token").display().to_string()
        } else if let Some(file) = arg.strip_prefix("/var/run/operon/") {
            dir.join(file).display().to_string()
        } else {
            arg.clone()
        }
    };
    let args: Vec<String> = container.args.iter().flatten().map(local).collect();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(&args)
        .output()
        .unwrap();
    eprintln!(
        "$ operon {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "the container's command failed");
    std::fs::read_to_string(termination).unwrap()
}

#[tokio::test]
async fn an_offloaded_wasm_step_runs_as_a_job_of_operons_image_on_the_pushed_digest() {
    let Some(path) = kubeconfig() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-offload").await;
    let ns = scratch.name.clone();
    let run = format!("{:08x}", getrandom_u32());
    let (module, op, set, role) = (
        format!("e2e-echo-off-{run}"),
        format!("e2e-offloaded-{run}"),
        format!("e2e-offload-set-{run}"),
        format!("e2e-module-reader-{run}"),
    );
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("module.operon.dev", module.clone()),
            ("operation.operon.dev", op.clone()),
            ("operationset.operon.dev", set.clone()),
            ("clusterrole", role.clone()),
            ("clusterrolebinding", role.clone()),
        ],
    };
    apply_operon_crds(&cluster).await;
    // The offloaded step's ServiceAccount may read modules (and, here, push one).
    kubectl(&path, &["-n", &ns, "create", "serviceaccount", "offloader"]);
    kubectl(
        &path,
        &[
            "create",
            "clusterrole",
            &role,
            "--verb=create,get,list",
            "--resource=modules.operon.dev",
        ],
    );
    kubectl(
        &path,
        &[
            "create",
            "clusterrolebinding",
            &role,
            "--clusterrole",
            &role,
            "--serviceaccount",
            &format!("{ns}:offloader"),
        ],
    );
    let token = kubectl(&path, &["-n", &ns, "create", "token", "offloader"])
        .trim()
        .to_owned();

    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let [ca, cert, key] = certificates(dir.path());
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token).unwrap();
    let port = free_port();
    let module_url = format!("https://127.0.0.1:{port}");
    let args: Vec<String> = [
        "--leader-election-namespace",
        &ns,
        "--leader-election-lease-name",
        &format!("e2e-offload-{run}"),
        "--validating-webhook-listen-address",
        "127.0.0.1",
        "--validating-webhook-listen-port",
        &port.to_string(),
        "--module-api-url",
        &module_url,
        "--image",
        "ghcr.io/operon-dev/operon:e2e",
        "--offload-module-url",
        &module_url,
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(
        [
            ("--validating-webhook-server-cert", &cert),
            ("--validating-webhook-server-key", &key),
            ("--module-source-ca", &ca),
            ("--offload-module-ca", &ca),
            ("--module-fetch-token-file", &token_file),
            ("--module-store", &dir.path().join("store")),
        ]
        .into_iter()
        .flat_map(|(flag, path)| [flag.to_owned(), path.display().to_string()]),
    )
    .collect();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = serve(&path, &hooks, &refs, "offload");
    eventually(
        "the module API served",
        Duration::from_secs(60),
        async || std::net::TcpStream::connect(("127.0.0.1", port)).ok(),
    )
    .await;
    let _ = server.port;

    // The module, pushed: the Operation names it, and the Job pins its digest.
    let bytes = std::fs::read(operon_tests::ECHO).unwrap();
    let digest = operon::sandbox::ModuleDigest::of(&bytes);
    let pushed = std::process::Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["module", "push", operon_tests::ECHO, "--name", &module])
        .args([
            "--server",
            &module_url,
            "--token",
            &token,
            "--certificate-authority",
        ])
        .arg(&ca)
        .output()
        .unwrap();
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );

    let post = PostParams::default();
    operon_api(&cluster, "Operation")
        .create(
            &post,
            &object(json!({
                "apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
                "metadata": {"name": op},
                "spec": {"processor": {"timeoutSeconds": 120, "wasm": {
                    "module": module, "config": {"greeting": "hi"},
                    "runOn": "Job", "job": {"serviceAccountName": "offloader",
                        "ttlSecondsAfterFinished": 60}}}},
            })),
        )
        .await
        .unwrap();
    operon_api(&cluster, "OperationSet")
        .create(&post, &chain(&set, &[op.as_str()]))
        .await
        .unwrap();
    let client = cluster.client().clone();
    let diagnoses: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &operon_resource("Diagnosis"));
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    diagnoses
        .create(
            &post,
            &object(
                json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                "metadata": {"name": "offload"},
                "spec": {"operationSet": set, "parameters": {"level": "3"}}}),
            ),
        )
        .await
        .unwrap();
    let job = eventually(
        "the offloaded step's Job",
        Duration::from_secs(90),
        async || {
            jobs.list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .next()
        },
    )
    .await;
    let job_name = job.metadata.name.clone().unwrap();
    let pod_spec = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(pod_spec.service_account_name.as_deref(), Some("offloader"));
    let container = &pod_spec.containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("ghcr.io/operon-dev/operon:e2e")
    );
    let args = container.args.clone().unwrap();
    assert_eq!(args[..4], ["op", "run", "--digest", &digest.to_string()]);
    let data = maps.get(&job_name).await.unwrap().data.unwrap();
    assert_eq!(data["module-ca.crt"], std::fs::read_to_string(&ca).unwrap());

    // No kubelet here: the test runs the container's command itself, which fetches the
    // module by digest from `operon serve` with the ServiceAccount's token, and writes
    // the pod's status with the termination message it wrote.
    let pod = the_pod(&pods, &job_name).await;
    let work = tempfile::tempdir().unwrap();
    let message = tokio::task::spawn_blocking({
        let (job, data, token, work) = (
            job.clone(),
            data.clone(),
            token.clone(),
            work.path().to_owned(),
        );
        move || run_container(&job, &data, &token, &work)
    })
    .await
    .unwrap();
    complete_pod(&pods, &pod, &message).await;

    let done = eventually("offload Succeeded", Duration::from_secs(90), async || {
        let d = diagnoses.get("offload").await.ok()?;
        let status = d.data.get("status")?.clone();
        matches!(status["phase"].as_str(), Some("Succeeded" | "Failed")).then_some(status)
    })
    .await;
    assert_eq!(done["phase"], "Succeeded", "{done}");
    let results = &done["operationResults"];
    // The echo guest's results: its parameters (wasm.config under the input) and the
    // runner context it got in the pod.
    assert_eq!(results["greeting"], "hi", "{done}");
    assert_eq!(results["level"], "3", "{done}");
    assert_eq!(
        results["context.name"],
        format!("{ns}/offload/node-1"),
        "{done}"
    );
    assert_eq!(results["context.owner"], "Diagnosis/offload", "{done}");
    assert_eq!(results["context.namespace"], ns.as_str(), "{done}");
}
