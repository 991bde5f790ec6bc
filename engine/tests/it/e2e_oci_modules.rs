//! End to end against a real Kubernetes API server (ignored unless run with `--ignored`,
//! and then failing without `OPERON_E2E_KUBECONFIG`) and a real registry
//! (`docker-registry` with TLS and htpasswd, failing when it is not installed):
//! `operon serve` pulling the `oci://` modules of an Operation and of a
//! Hook with the credentials of the Secrets they name, pinning their tags (the
//! Diagnosis' `status.pinnedModules`, the Hook's `status.pinnedModule`), and refusing,
//! by name, a registry off its allow-list and a Secret that is not there.

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

use crate::e2e_support::registry::registry;
use crate::e2e_support::*;

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

fn wasm_operation(name: &str, module: &str, secrets: &[&str]) -> DynamicObject {
    let secrets: Vec<Value> = secrets.iter().map(|s| json!({"name": s})).collect();
    object(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
        "metadata": {"name": name},
        "spec": {"processor": {"timeoutSeconds": 30,
                 "wasm": {"module": module, "imagePullSecrets": secrets}}},
    }))
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Creates the Diagnosis `name` with `spec` and waits for it to end; its status.
async fn diagnose(api: &Api<DynamicObject>, name: &str, spec: Value) -> Value {
    api.create(
        &PostParams::default(),
        &object(json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
            "metadata": {"name": name}, "spec": spec,
        })),
    )
    .await
    .unwrap();
    eventually(
        &format!("Diagnosis {name} finished"),
        Duration::from_secs(90),
        async || {
            let status = api.get(name).await.ok()?.data.get("status")?.clone();
            matches!(status["phase"].as_str(), Some("Succeeded" | "Failed")).then_some(status)
        },
    )
    .await
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn operations_and_hooks_run_oci_modules_pulled_with_their_secrets() {
    let path = kubeconfig();
    let registry = registry();
    for (file, tag) in [
        (operon_tests::ECHO, "team/echo:1"),
        (operon_tests::POD_LABELER, "team/labeler:1"),
    ] {
        let pushed = registry.operon(&["module", "push", file, &registry.reference(tag)], false);
        assert!(
            pushed.status.success(),
            "{}",
            String::from_utf8_lossy(&pushed.stderr)
        );
    }
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-oci").await;
    let ns = scratch.name.as_str();
    let run = format!("{:08x}", getrandom_u32());
    let (echo, elsewhere, set, bad_set, node) = (
        format!("e2e-oci-echo-{run}"),
        format!("e2e-oci-elsewhere-{run}"),
        format!("e2e-oci-{run}"),
        format!("e2e-oci-bad-{run}"),
        format!("e2e-oci-node-{run}"),
    );
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("operation.operon.dev", echo.clone()),
            ("operation.operon.dev", elsewhere.clone()),
            ("operationset.operon.dev", set.clone()),
            ("operationset.operon.dev", bad_set.clone()),
            ("node", node.clone()),
        ],
    };
    apply_operon_crds(&cluster).await;

    // The registry's credentials, as `kubectl create secret docker-registry` makes them.
    let docker_json = registry.dir.path().join("docker.json");
    kubectl(
        &path,
        &[
            "-n",
            ns,
            "create",
            "secret",
            "generic",
            "registry-creds",
            "--type=kubernetes.io/dockerconfigjson",
            &format!("--from-file=.dockerconfigjson={}", docker_json.display()),
        ],
    );

    let post = PostParams::default();
    let operations = operon_api(&cluster, "Operation");
    let tag = registry.reference("team/echo:1");
    operations
        .create(&post, &wasm_operation(&echo, &tag, &["registry-creds"]))
        .await
        .unwrap();
    operations
        .create(
            &post,
            &wasm_operation(&elsewhere, "oci://registry.invalid:5000/team/echo:1", &[]),
        )
        .await
        .unwrap();
    let sets = operon_api(&cluster, "OperationSet");
    sets.create(&post, &chain(&set, &[&echo])).await.unwrap();
    sets.create(&post, &chain(&bad_set, &[&elsewhere]))
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let hooks_dir = dir.path().join("hooks");
    std::fs::create_dir(&hooks_dir).unwrap();
    let allowed = format!("127.0.0.1:{}", registry.port);
    let ca = registry.ca();
    let flags = [
        "--leader-elect",
        "--leader-election-namespace",
        ns,
        "--leader-election-lease-name",
        &format!("e2e-oci-{run}"),
        "--allow-registry",
        &allowed,
        "--registry-ca",
        ca.to_str().unwrap(),
    ];
    let serving = serve(&path, &hooks_dir, &flags, "oci");
    eventually("operon serve ready", Duration::from_secs(60), async || {
        http_get(serving.port, "/readyz").filter(|(code, _)| *code == 200)
    })
    .await;

    // A Diagnosis of the tag: pulled with the Secret, pinned in its status, run.
    let diagnoses: Api<DynamicObject> =
        Api::namespaced_with(cluster.client().clone(), ns, &operon_resource("Diagnosis"));
    let started = Instant::now();
    let spec = json!({"operationSet": set, "parameters": {"greeting": "hello"}});
    let status = diagnose(&diagnoses, "pulled", spec).await;
    eprintln!(
        "Diagnosis of an oci:// tag created to finished in {:?}",
        started.elapsed()
    );
    assert_eq!(status["phase"], "Succeeded", "{status:#}");
    assert_eq!(
        status["operationResults"]["greeting"], "hello",
        "{status:#}"
    );
    let pinned = status["pinnedModules"][&echo]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        pinned.starts_with(&registry.reference("team/echo@sha256:")),
        "{status:#}"
    );

    // A registry off the allow-list: failed at once, saying which flag allows it.
    let status = diagnose(&diagnoses, "refused", json!({"operationSet": bad_set})).await;
    assert_eq!(status["phase"], "Failed", "{status:#}");
    let accepted = condition(&status, "Accepted").unwrap();
    assert_eq!(accepted["reason"], "RegistryNotAllowed", "{status:#}");
    let message = accepted["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "Operation {elsewhere}: spec.processor.wasm.module"
        )) && message.contains("--allow-registry"),
        "{message}"
    );

    // The same on a node: the node's agent pulls with the Secret of its namespace.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client().clone());
    nodes
        .create(
            &post,
            &serde_json::from_value(json!({"metadata": {"name": node}})).unwrap(),
        )
        .await
        .unwrap();
    let data_root = dir.path().join("agent");
    std::fs::create_dir(&data_root).unwrap();
    let _agent = agent(
        &path,
        &node,
        ns,
        &data_root,
        &[
            "--allow-registry",
            &allowed,
            "--registry-ca",
            ca.to_str().unwrap(),
        ],
    );
    let started = Instant::now();
    let spec = json!({"operationSet": set, "nodeName": node,
                      "parameters": {"greeting": "from the node"}});
    let status = diagnose(&diagnoses, "on-node", spec).await;
    eprintln!(
        "Diagnosis of an oci:// tag on a node's agent created to finished in {:?}",
        started.elapsed()
    );
    assert_eq!(status["phase"], "Succeeded", "{status:#}");
    assert_eq!(status["nodeName"], node.as_str(), "{status:#}");
    assert_eq!(status["operationResults"]["greeting"], "from the node");
    assert_eq!(
        status["operationResults"]["context.node"],
        node.as_str(),
        "the step ran on the node's agent: {status:#}"
    );
    assert_eq!(status["pinnedModules"][&echo], pinned, "{status:#}");

    // A Hook of the labeller's tag, with the same Secret: loaded, pinned, labelling.
    let hooks: Api<DynamicObject> =
        Api::namespaced_with(cluster.client().clone(), ns, &operon_resource("Hook"));
    let hook = |name: &str, secret: &str| {
        object(json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "Hook",
            "metadata": {"name": name},
            "spec": {
                "module": registry.reference("team/labeler:1"),
                "imagePullSecrets": [{"name": secret}],
                "overrides": {"kubernetes": [{"name": "pods", "namespaces": [ns]}]},
                "permissions": {
                    "watch": [{"apiVersion": "v1", "kind": "Pod"}],
                    "patch": [{"apiVersion": "v1", "kind": "Pod", "operations": ["MergePatch"]}],
                },
            },
        }))
    };
    let applied = Instant::now();
    hooks
        .create(&post, &hook("labeler", "registry-creds"))
        .await
        .unwrap();
    let status = eventually("the Hook is Ready", Duration::from_secs(60), async || {
        let status = hooks.get("labeler").await.ok()?.data.get("status")?.clone();
        (condition(&status, "Ready")?["status"] == "True").then_some(status)
    })
    .await;
    eprintln!(
        "Hook of an oci:// tag applied to Ready in {:?}",
        applied.elapsed()
    );
    let digest =
        operon::sandbox::ModuleDigest::of(&std::fs::read(operon_tests::POD_LABELER).unwrap());
    assert_eq!(status["digest"], digest.to_string(), "{status:#}");
    assert!(
        status["pinnedModule"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&registry.reference("team/labeler@sha256:")),
        "{status:#}"
    );
    let pods: Api<DynamicObject> = Api::namespaced_with(
        cluster.client().clone(),
        ns,
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
    );
    pods.create(
        &post,
        &object(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1"},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
        })),
    )
    .await
    .unwrap();
    eventually("web-1 labelled", Duration::from_secs(60), async || {
        let pod = pods.get("web-1").await.ok()?;
        let labels = pod.metadata.labels?;
        (labels.get("operon.dev/seen").map(String::as_str) == Some("true")).then_some(())
    })
    .await;

    // A Hook naming a Secret that does not exist: not loaded, the Secret named.
    hooks
        .create(&post, &hook("no-secret", "missing-creds"))
        .await
        .unwrap();
    let status = eventually("the Hook refused", Duration::from_secs(60), async || {
        let status = hooks
            .get("no-secret")
            .await
            .ok()?
            .data
            .get("status")?
            .clone();
        (condition(&status, "Loaded")?["status"] == "False").then_some(status)
    })
    .await;
    let loaded = condition(&status, "Loaded").unwrap();
    assert_eq!(loaded["reason"], "PullSecretInvalid", "{status:#}");
    let message = loaded["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "spec.imagePullSecrets[0]: Secret {ns}/missing-creds: not found"
        )),
        "{message}"
    );
}
