//! End to end against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): the pod labeler
//! pushed with `operon module push` to `operon serve`, a Hook naming it applied and
//! running on a Pod's creation, the same Hook changed to lose its patch permission
//! failing its run with the permission named in its status, and the Hook deleted
//! leaving new Pods alone.

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use std::time::{Duration, Instant};

use crate::e2e_support::*;

fn pod(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
    }))
    .unwrap()
}

fn hook(name: &str, namespace: &str, module: &str, patch: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Hook",
        "metadata": {"name": name},
        "spec": {
            "module": module,
            "overrides": {"kubernetes": [{"name": "pods", "namespaces": [namespace]}]},
            "permissions": {"watch": [{"apiVersion": "v1", "kind": "Pod"}], "patch": patch},
        },
    }))
    .unwrap()
}

fn seen(pod: &DynamicObject) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get("operon.dev/seen")
        .map(String::as_str)
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn a_pushed_hook_runs_within_its_permissions_and_stops_when_deleted() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-hooks").await;
    let ns = scratch.name.as_str();
    let run = format!("{:08x}", getrandom_u32());
    let (module, role) = (
        format!("e2e-labeler-{run}"),
        format!("e2e-hook-author-{run}"),
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
    let token = module_account(&path, ns, "author", &role, "create,get,list,delete");

    let dir = tempfile::tempdir().unwrap();
    let hooks_dir = dir.path().join("hooks");
    std::fs::create_dir(&hooks_dir).unwrap();
    let certs = certificates(dir.path());
    let ca = certs.0.clone();
    let port = free_port();
    let store = dir.path().join("store");
    let mut args = module_api_args(ns, &format!("e2e-hooks-{run}"), port, &certs, &store, None);
    args.push("--leader-elect".to_owned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let serving = serve(&path, &hooks_dir, &refs, "hooks");
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

    // Push the example hook.
    let url = format!("https://127.0.0.1:{port}");
    let out = push_module(operon_tests::POD_LABELER, &module, &url, &token, &ca);
    assert!(out.contains("hook world"), "{out}");
    let digest =
        operon::sandbox::ModuleDigest::of(&std::fs::read(operon_tests::POD_LABELER).unwrap());

    // A Hook naming it, allowed to label the Pods of its namespace: it runs on a new Pod.
    let pods: Api<DynamicObject> = Api::namespaced_with(
        cluster.client().clone(),
        ns,
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
    );
    let hooks: Api<DynamicObject> =
        Api::namespaced_with(cluster.client().clone(), ns, &operon_resource("Hook"));
    let post = PostParams::default();
    let applied = Instant::now();
    let merge = json!([{"apiVersion": "v1", "kind": "Pod", "operations": ["MergePatch"]}]);
    hooks
        .create(&post, &hook("labeler", ns, &module, merge))
        .await
        .unwrap();
    let status = eventually("the Hook is Ready", Duration::from_secs(60), async || {
        let status = hooks.get("labeler").await.ok()?.data.get("status")?.clone();
        let ready = status["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        ready.then_some(status)
    })
    .await;
    eprintln!("Hook applied to Ready in {:?}", applied.elapsed());
    assert_eq!(status["digest"], digest.to_string(), "{status}");
    assert_eq!(status["bindings"][1]["watches"], "v1/Pod", "{status}");
    pods.create(&post, &pod("web-1")).await.unwrap();
    let created = Instant::now();
    eventually("web-1 labelled", Duration::from_secs(60), async || {
        let pod = pods.get("web-1").await.ok()?;
        (seen(&pod) == Some("true")).then_some(())
    })
    .await;
    eprintln!(
        "Pod created to labelled by the Hook in {:?}",
        created.elapsed()
    );
    let table = kubectl(&path, &["-n", ns, "get", "hooks"]);
    assert!(
        table.contains("labeler") && table.contains("True") && table.contains(&module),
        "{table}"
    );

    // Its patch permission taken away (ConfigMaps only): its run fails, naming it.
    let no_pods = json!({"spec": {"permissions": {"patch": [
        {"apiVersion": "v1", "kind": "ConfigMap", "operations": ["MergePatch"]}]}}});
    hooks
        .patch("labeler", &PatchParams::default(), &Patch::Merge(&no_pods))
        .await
        .unwrap();
    pods.create(&post, &pod("web-2")).await.unwrap();
    let status = eventually("the run refused", Duration::from_secs(60), async || {
        let status = hooks.get("labeler").await.ok()?.data.get("status")?.clone();
        let error = status["lastError"].as_str()?;
        error.contains("web-2").then_some(status)
    })
    .await;
    let error = status["lastError"].as_str().unwrap();
    assert!(
        error.contains(&format!(
            "not permitted: Hook {ns}/labeler may not MergePatch Pod {ns}/web-2: spec.permissions.patch does not grant MergePatch on v1/Pod in namespace {ns}"
        )),
        "{error}"
    );
    assert_eq!(status["lastRun"]["outcome"], "Failed", "{status}");
    let ready = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["reason"], "RunFailed", "{status}");
    assert_eq!(seen(&pods.get("web-2").await.unwrap()), None);

    // Deleted: new Pods are left alone.
    hooks
        .delete("labeler", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Hook is gone", Duration::from_secs(30), async || {
        hooks.get_opt("labeler").await.ok()?.is_none().then_some(())
    })
    .await;
    pods.create(&post, &pod("web-3")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(seen(&pods.get("web-3").await.unwrap()), None);
    drop(serving);
}
