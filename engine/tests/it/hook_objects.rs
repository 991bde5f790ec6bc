//! Hook objects' permissions, on the in-memory cluster with the pod labeler (watches
//! Pods, merge-patches their labels): a binding outside `spec.permissions.watch` keeps
//! the hook from loading, naming the binding and what is missing; overrides bring it
//! within them; a patch outside `spec.permissions.patch` fails the run with a message
//! naming the permission and changes nothing; a permitted patch is applied.

use operon::api::Hook;
use operon::cluster::Cluster;
use operon::cluster::local::LocalCluster;
use operon::hooks::engine::{Engine, RunRecord};
use operon::hooks::load::HookLoader;
use operon::metrics::Metrics;
use operon::sandbox::{CallLimits, Sandbox, SandboxConfig};
use operon::serve::hook_objects::prepare::{self, Prepared};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: demo, labels: {app: web}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-2, namespace: other, labels: {app: web}}
"#;

fn loader() -> HookLoader {
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap();
    HookLoader::new(sandbox, CallLimits::default(), false)
}

fn hook(spec: Value) -> Hook {
    serde_json::from_value(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Hook",
        "metadata": {"name": "labeler", "namespace": "demo", "generation": 1},
        "spec": spec,
    }))
    .unwrap()
}

fn cluster() -> Arc<LocalCluster> {
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_yaml(PODS, "pods").unwrap();
    cluster
}

async fn prepare(spec: Value, cluster: &Arc<LocalCluster>) -> Result<Prepared, prepare::Refusal> {
    prepare::prepare(
        &hook(spec),
        Path::new(operon_tests::POD_LABELER),
        &loader(),
        cluster.clone(),
        None,
    )
    .await
}

/// Runs the Synchronization of the hook and what it causes (the labels it sets change
/// the pods it watches); returns the Synchronization run.
async fn synchronize(prepared: Prepared) -> RunRecord {
    let engine = Engine::new(
        vec![prepared.loaded],
        prepared.cluster,
        Arc::new(Metrics::new().unwrap()),
    );
    engine.start().await.unwrap();
    let mut records = Vec::new();
    engine.drain(|r| records.push(r.clone())).await;
    let first = records.remove(0);
    assert!(!first.synchronizes.is_empty(), "the first run synchronizes");
    first
}

fn label(cluster: &LocalCluster, name: &str) -> Value {
    cluster
        .objects()
        .into_iter()
        .find(|o| o["metadata"]["name"] == name)
        .unwrap()["metadata"]["labels"]["operon.dev/seen"]
        .clone()
}

#[tokio::test]
async fn a_binding_outside_the_watch_permissions_is_refused() {
    let cluster = cluster();
    // The labeler watches Pods of every namespace; the Hook may watch its own only.
    let spec = json!({"module": "pod-labeler",
                      "permissions": {"watch": [{"apiVersion": "v1", "kind": "Pod"}]}});
    let refusal = prepare(spec, &cluster).await.err().unwrap();
    assert_eq!(refusal.reason, "BindingNotPermitted");
    assert!(
        refusal.message.starts_with("binding \"pods\" watches v1/Pod in every namespace, but spec.permissions.watch grants v1/Pod in namespace demo only"),
        "{}",
        refusal.message
    );
    // No entry for the kind at all.
    let spec = json!({"module": "pod-labeler",
                      "permissions": {"watch": [{"apiVersion": "v1", "kind": "ConfigMap", "namespaces": ["*"]}]}});
    let refusal = prepare(spec, &cluster).await.err().unwrap();
    assert_eq!(
        refusal.message,
        "binding \"pods\" watches v1/Pod, but spec.permissions.watch has no entry for v1/Pod"
    );
    // An override naming a binding the hook does not have.
    let spec = json!({"module": "pod-labeler",
                      "overrides": {"kubernetes": [{"name": "pod", "namespaces": ["demo"]}]},
                      "permissions": {"watch": [{"apiVersion": "v1", "kind": "Pod"}]}});
    let refusal = prepare(spec, &cluster).await.err().unwrap();
    assert_eq!(refusal.reason, "InvalidOverride");
    assert!(
        refusal.message.contains(
            "spec.overrides.kubernetes[0].name: the hook has no kubernetes binding \"pod\" (it has: pods)"
        ),
        "{}",
        refusal.message
    );
}

#[tokio::test]
async fn a_patch_outside_the_permissions_fails_the_run_naming_the_permission() {
    let cluster = cluster();
    let spec = json!({"module": "pod-labeler",
    "overrides": {"kubernetes": [{"name": "pods", "namespaces": ["demo"]}]},
    "permissions": {
        "watch": [{"apiVersion": "v1", "kind": "Pod"}],
        "patch": [{"apiVersion": "v1", "kind": "ConfigMap", "operations": ["MergePatch"]}],
    }});
    let prepared = prepare(spec, &cluster).await.unwrap();
    let pods = &prepared.bindings[1];
    assert_eq!(pods.name, "pods");
    assert_eq!(pods.watches.as_deref(), Some("v1/Pod"));
    assert_eq!(pods.namespaces, ["demo"]);
    let record = synchronize(prepared).await;
    assert!(record.failed);
    let error = record.apply_error.unwrap().to_string();
    assert_eq!(
        error,
        "patch operation 1 of 1: not permitted: Hook demo/labeler may not MergePatch Pod demo/web-1: spec.permissions.patch does not grant MergePatch on v1/Pod in namespace demo"
    );
    assert_eq!(label(&cluster, "web-1"), Value::Null, "nothing was applied");
}

#[tokio::test]
async fn a_permitted_patch_is_applied() {
    let cluster = cluster();
    let spec = json!({"module": "pod-labeler",
    "overrides": {"kubernetes": [{"name": "pods", "namespaces": ["demo"]}],
                  "queue": "labels", "timeout": "5s"},
    "permissions": {
        "watch": [{"apiVersion": "v1", "kind": "Pod"}],
        "patch": [{"apiVersion": "v1", "kind": "pods", "operations": ["MergePatch"]}],
    }});
    let prepared = prepare(spec, &cluster).await.unwrap();
    assert_eq!(prepared.bindings[1].queue.as_deref(), Some("labels"));
    assert_eq!(
        prepared.loaded.config.settings.timeout,
        std::time::Duration::from_secs(5)
    );
    assert_eq!(prepared.loaded.config.kubernetes[0].queue, "labels");
    let record = synchronize(prepared).await;
    assert!(!record.failed, "{:?}", record.apply_error);
    // Synchronization runs on `main`, as in shell-operator; events on the binding's queue.
    assert_eq!(record.queue, "main");
    assert_eq!(label(&cluster, "web-1"), "true");
    // The pod of the namespace the binding does not watch is not touched.
    assert_eq!(label(&cluster, "web-2"), Value::Null);
}

#[tokio::test]
async fn every_namespace_is_granted_with_a_star() {
    let cluster = cluster();
    let spec = json!({"module": "pod-labeler",
    "permissions": {
        "watch": [{"apiVersion": "v1", "kind": "Pod", "namespaces": ["*"]}],
        "patch": [{"apiVersion": "v1", "kind": "Pod", "namespaces": ["demo"],
                   "operations": ["MergePatch"]}],
    }});
    let record = synchronize(prepare(spec, &cluster).await.unwrap()).await;
    // The first patch (demo/web-1) is applied, the second (other/web-2) refused.
    let error = record.apply_error.unwrap().to_string();
    assert!(
        error.starts_with("patch operation 2 of 2: not permitted: Hook demo/labeler may not MergePatch Pod other/web-2"),
        "{error}"
    );
    assert_eq!(label(&cluster, "web-1"), "true");
    assert_eq!(label(&cluster, "web-2"), Value::Null);
}

#[tokio::test]
async fn a_module_of_another_world_is_refused() {
    let cluster = cluster();
    let refusal = prepare::prepare(
        &hook(json!({"module": "trivial"})),
        Path::new(operon_tests::TRIVIAL),
        &loader(),
        cluster.clone() as Arc<dyn Cluster>,
        None,
    )
    .await
    .err()
    .unwrap();
    assert_eq!(refusal.reason, "NotAHook");
    assert!(
        refusal.message.starts_with("spec.module trivial: "),
        "{}",
        refusal.message
    );
}

#[tokio::test]
async fn webhook_bindings_of_hook_objects_intercept_only_what_they_may_read() {
    let cluster = cluster();
    let prepare_admission = |spec: Value, module: &'static str| {
        let cluster = cluster.clone();
        async move {
            prepare::prepare(
                &hook(spec),
                Path::new(module),
                &loader(),
                cluster as Arc<dyn Cluster>,
                None,
            )
            .await
        }
    };
    // No watch permission for Pods: its pod webhook would see what it may not read.
    let refusal = prepare_admission(json!({"module": "admission"}), operon_tests::ADMISSION)
        .await
        .err()
        .unwrap();
    assert_eq!(refusal.reason, "WebhookNotPermitted");
    assert_eq!(
        refusal.message,
        "binding \"images.operon.dev\" intercepts pods, but spec.permissions.watch has no entry for its kind (a webhook sees the objects it intercepts: grant their watch)"
    );
    // Pods of its own namespace: its webhook is kept to it, as its status says.
    let spec = json!({"module": "admission",
                      "permissions": {"watch": [{"apiVersion": "v1", "kind": "Pod"}]}});
    let prepared = prepare_admission(spec, operon_tests::ADMISSION)
        .await
        .ok()
        .unwrap();
    let binding = &prepared.bindings[0];
    assert_eq!(
        (binding.name.as_str(), binding.type_.as_str()),
        ("images.operon.dev", "validating")
    );
    assert_eq!(binding.namespaces, ["demo"]);
    // A conversion converts every object of its CRD: granted in one namespace, refused;
    // in every namespace, loaded.
    cluster
        .load_yaml(
            "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: c, namespace: demo}\n",
            "crontabs",
        )
        .unwrap();
    let grant = |namespaces: Value| {
        json!({"module": "conversion",
               "permissions": {"watch": [{"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                                          "namespaces": namespaces}]}})
    };
    let refusal = prepare_admission(grant(json!([])), operon_tests::CONVERSION)
        .await
        .err()
        .unwrap();
    assert_eq!(refusal.reason, "WebhookNotPermitted");
    assert!(
        refusal.message.starts_with(
            "binding \"alpha-v1\" converts every object of crontabs.stable.example.com"
        ),
        "{}",
        refusal.message
    );
    let prepared = prepare_admission(grant(json!(["*"])), operon_tests::CONVERSION)
        .await
        .ok()
        .unwrap();
    let binding = prepared.bindings.last().unwrap();
    assert_eq!(
        (binding.name.as_str(), binding.type_.as_str()),
        ("crontabs.stable.example.com", "conversion")
    );
}

#[tokio::test]
async fn an_offloaded_hook_needs_an_engine_that_offloads_and_leaves_out_its_own_runs() {
    let cluster = cluster();
    let mut object = hook(json!({
        "module": "pod-labeler", "runOn": "Job",
        "job": {"serviceAccountName": "hook-runner"},
        "overrides": {"kubernetes": [{"name": "pods", "namespaces": ["demo"]}]},
        "permissions": {"watch": [{"apiVersion": "v1", "kind": "Pod"}]},
    }));
    object.metadata.uid = Some("uid-7".to_owned());
    let path = Path::new(operon_tests::POD_LABELER);
    let refusal = prepare::prepare(&object, path, &loader(), cluster.clone(), None)
        .await
        .err()
        .unwrap();
    assert_eq!(refusal.reason, "CannotOffload");
    assert!(refusal.message.contains("--image"), "{}", refusal.message);

    // Nothing is asked of the API server while preparing: a client to nowhere does.
    let client =
        kube::Client::try_from(kube::Config::new("https://127.0.0.1:9".parse().unwrap())).unwrap();
    let offload = prepare::HookOffload {
        target: operon::runner::offload::OffloadTarget {
            image: "ghcr.io/operon-dev/operon:0.1.0".to_owned(),
            module_url: "https://operon-webhooks.operon.svc:443".to_owned(),
            server_name: None,
            ca: tokio::sync::watch::channel(Vec::new()).1,
            catalog: None,
        },
        client,
        platform: Default::default(),
    };
    let prepared = prepare::prepare(&object, path, &loader(), cluster.clone(), Some(&offload))
        .await
        .unwrap_or_else(|r| panic!("{}: {}", r.reason, r.message));
    let selector = prepared.loaded.config.kubernetes[0]
        .label_selector
        .clone()
        .unwrap();
    let requirement = selector.match_expressions.last().unwrap();
    assert_eq!(requirement.key, "operon.dev/hook-uid");
    assert_eq!(requirement.operator, operon::model::LabelOperator::NotIn);
    assert_eq!(requirement.values, ["uid-7"]);
}
