//! End to end against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): a Hook with `runOn:
//! Job`. `operon serve` loads the pushed pod labeler and turns each of its runs into a
//! Job of Operon's image in the Hook's namespace; with no kubelet here, the test runs
//! each Job's container command itself (`operon hook handle`, fetching the module by
//! digest with the Job's ServiceAccount token) and writes the pod's status with the
//! report it left; the engine applies the report's patch, so a new Pod gets labelled.
//! The Jobs' own pods, which the hook's Pod binding would otherwise see, never reach
//! it.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::e2e_support::*;

const IMAGE: &str = "ghcr.io/operon-dev/operon:e2e";

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
    }))
    .unwrap()
}

fn labelled(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("operon.dev/seen"))
        .is_some_and(|v| v == "true")
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn each_run_of_a_hook_with_run_on_job_is_a_job_whose_report_the_engine_applies() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-hook-job").await;
    let ns = scratch.name.clone();
    let run = format!("{:08x}", getrandom_u32());
    let (module, role) = (
        format!("e2e-labeler-job-{run}"),
        format!("e2e-hook-job-{run}"),
    );
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("module.operon.dev", module.clone()),
            ("clusterrole", role.clone()),
            ("clusterrolebinding", role.clone()),
        ],
    };
    apply_operon_crds(&cluster).await;
    // The Jobs' ServiceAccount fetches the module (and, here, pushes it).
    let token = module_account(&path, &ns, "hook-runner", &role, "create,get,list");

    let dir = tempfile::tempdir().unwrap();
    let hooks_dir = dir.path().join("hooks");
    std::fs::create_dir(&hooks_dir).unwrap();
    let certs = certificates(dir.path());
    let ca = certs.0.clone();
    let port = free_port();
    let module_url = format!("https://127.0.0.1:{port}");
    let store = dir.path().join("store");
    let mut args = module_api_args(
        &ns,
        &format!("e2e-hook-job-{run}"),
        port,
        &certs,
        &store,
        None,
    );
    args.push("--leader-elect".to_owned());
    args.extend(["--image", IMAGE, "--offload-module-url", &module_url].map(str::to_owned));
    args.extend(["--offload-module-ca".to_owned(), ca.display().to_string()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let serving = serve(&path, &hooks_dir, &refs, "hook-job");
    eventually("operon serve ready", Duration::from_secs(60), async || {
        http_get(serving.port, "/readyz").filter(|(code, _)| *code == 200)
    })
    .await;
    eventually(
        "the module API served",
        Duration::from_secs(30),
        async || std::net::TcpStream::connect(("127.0.0.1", port)).ok(),
    )
    .await;

    push_module(operon_tests::POD_LABELER, &module, &module_url, &token, &ca);
    let digest =
        operon::sandbox::ModuleDigest::of(&std::fs::read(operon_tests::POD_LABELER).unwrap());

    let client = cluster.client().clone();
    let hooks: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &operon_resource("Hook"));
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let post = PostParams::default();
    let hook: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Hook",
        "metadata": {"name": "labeler"},
        "spec": {
            "module": module,
            "runOn": "Job",
            "job": {"serviceAccountName": "hook-runner", "ttlSecondsAfterFinished": 60},
            "overrides": {"kubernetes": [{"name": "pods", "namespaces": [ns]}]},
            "permissions": {
                "watch": [{"apiVersion": "v1", "kind": "Pod"}],
                "patch": [{"apiVersion": "v1", "kind": "Pod", "operations": ["MergePatch"]}],
            },
        },
    }))
    .unwrap();
    let created = hooks.create(&post, &hook).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let status = eventually("the Hook is Ready", Duration::from_secs(60), async || {
        let status = hooks.get("labeler").await.ok()?.data.get("status")?.clone();
        let ready = status["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        ready.then_some(status)
    })
    .await;
    assert_eq!(status["digest"], digest.to_string(), "{status}");

    // Plays the kubelet for every Job of the Hook's runs, in order, until web-1 is
    // labelled: each run waits for the one before it (one queue).
    pods.create(&post, &pod("web-1")).await.unwrap();
    let created_at = Instant::now();
    let mut handled = BTreeSet::new();
    // What the test spends playing the kubelet: the rest is the engine's and the API
    // server's (and this loop's polling, every 50 ms).
    let mut kubelet = Duration::ZERO;
    let work = tempfile::tempdir().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < deadline, "web-1 not labelled in time");
        if labelled(&pods.get("web-1").await.unwrap()) {
            break;
        }
        let selector = format!("operon.dev/hook-uid={uid}");
        let list = jobs
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap();
        let Some(job) = list
            .items
            .into_iter()
            .find(|j| !handled.contains(j.metadata.name.as_ref().unwrap()))
        else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let name = job.metadata.name.clone().unwrap();
        let annotations = job.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations["operon.dev/hook"], format!("Hook/{ns}/labeler"));
        let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Hook", uid.as_str())
        );
        let container = &job
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0];
        assert_eq!(container.image.as_deref(), Some(IMAGE));
        let args = container.args.clone().unwrap();
        assert_eq!(
            args[..4],
            ["hook", "handle", "--digest", &digest.to_string()]
        );
        let data = maps.get(&name).await.unwrap().data.unwrap();
        let input: Value = serde_json::from_str(&data["hook-input.json"]).unwrap();
        // No run is about a Job's own pod: the binding leaves them out.
        assert!(
            !input.to_string().contains("operon.dev/hook-uid"),
            "a run saw its own Job's pod: {input}"
        );
        let started = Instant::now();
        let the_pod = the_pod(&pods, &name).await;
        let message = tokio::task::spawn_blocking({
            let (job, data, token, dir) = (
                job.clone(),
                data.clone(),
                token.clone(),
                work.path().to_owned(),
            );
            move || run_offloaded_container(&job, &data, &token, &dir)
        })
        .await
        .unwrap();
        assert!(message.starts_with("{\"format\":1"), "{message}");
        complete_pod(&pods, &the_pod, IMAGE, &message).await;
        kubelet += started.elapsed();
        handled.insert(name);
    }
    let total = created_at.elapsed();
    eprintln!(
        "Pod created to labelled through {} Jobs in {total:?}: {kubelet:?} playing the kubelet (the container's command included), {:?} the rest",
        handled.len(),
        total.saturating_sub(kubelet)
    );
    let status = eventually("the run recorded", Duration::from_secs(30), async || {
        let status = hooks.get("labeler").await.ok()?.data.get("status")?.clone();
        (status["lastRun"]["outcome"] == "Succeeded").then_some(status)
    })
    .await;
    assert!(status.get("lastError").is_none(), "{status}");
}
