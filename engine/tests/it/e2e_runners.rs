//! End to end against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): a Diagnosis mixing a
//! wasm, a script and a `job` step run by `operon serve`, with the controller killed
//! while the Job runs (the next one re-attaches); the same Diagnosis as a dry run,
//! which creates nothing; the Argo runner against a Workflow CRD shaped like Argo's;
//! and the controller-side cost of a Job step.
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

use crate::e2e_support::*;

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

fn echo_module() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(operon_tests::ECHO, dir.path().join("echo.wasm")).unwrap();
    (dir, "echo".to_owned())
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn wasm_script_and_job_steps_run_to_succeeded_across_a_controller_restart() {
    let path = kubeconfig();
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
    complete_pod(
        &pods,
        &pod,
        "registry.local/report:1",
        r#"{"verdict":"clean","blocks":"12"}"#,
    )
    .await;

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
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn the_argo_runner_submits_watches_and_maps_outputs_against_the_crd() {
    let path = kubeconfig();
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
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn job_step_overhead() {
    let path = kubeconfig();
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
        complete_pod(&pods, &pod, "registry.local/report:1", r#"{"n":"1"}"#).await;
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
