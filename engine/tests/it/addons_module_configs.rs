//! ModuleConfig objects through the kube cluster layer, with no real cluster: the
//! in-memory cluster served by its local API server (discovery of the operon.dev kind,
//! list and watch, the status subresource, server-side apply of the modules' objects),
//! the operator's full loop (`run_until`, as `operon serve`'s leader runs it) and the
//! ModuleConfigs written by a client as a user would write them. A ModuleConfig enables
//! a module the ConfigMap disables, its settings reach the module's hooks (and changed
//! settings run them again), `enabled: false` deletes what the module applied after its
//! delete hook ran, and each step shows in the object's status.

use crate::addons_support::{Events, settings, write};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use operon::addons::apply::ObjectWriter;
use operon::addons::operator::{Operator, QueueEvent};
use operon::cluster::Cluster;
use operon::cluster::kube::{KubeCluster, KubeOptions};
use operon::cluster::local::LocalCluster;
use operon::cluster::local::server::LocalApi;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// `app`: a ConfigMap and a shell hook that records its config values before Helm
/// and says it ran after the delete.
fn modules(root: &std::path::Path) {
    write(
        root,
        "modules/001-app/manifests/configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
        false,
    );
    write(
        root,
        "modules/001-app/openapi/config-values.yaml",
        "type: object\nproperties:\n  replicas: {type: integer, minimum: 1}\n",
        false,
    );
    write(
        root,
        "modules/001-app/hooks/record.sh",
        r#"#!/usr/bin/env bash
set -euo pipefail
if [[ "${1:-}" == "--config" ]]; then
  echo '{"configVersion":"v1","beforeHelm":10,"afterDeleteHelm":10}'
  exit 0
fi
name=app-seen
[[ "$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")" == afterDeleteHelm ]] && name=app-deleted
jq -c --arg name "$name" '{operation: "CreateOrUpdate", object: {apiVersion: "v1",
    kind: "ConfigMap", metadata: {name: $name, namespace: "operon-demo"},
    data: {replicas: (.app.replicas | tostring)}}}' "$CONFIG_VALUES_PATH" \
  > "$KUBERNETES_PATCH_PATH"
"#,
        true,
    );
}

async fn get(cluster: &LocalCluster, kind: &str, name: &str) -> Option<Value> {
    let resource = cluster.resolve(None, kind).unwrap();
    Cluster::get(cluster, &resource, Some("operon-demo"), name)
        .await
        .unwrap()
}

async fn until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..400 {
        if let Some(found) = check().await {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

fn module_configs(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("operon.dev", "v1alpha1", "ModuleConfig");
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "moduleconfigs");
    Api::all_with(client.clone(), &resource)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_config_enables_reconfigures_and_disables_a_module_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    modules(dir.path());
    let cluster = Arc::new(LocalCluster::new());
    let crd = operon::api::crds()
        .into_iter()
        .find(|crd| crd.spec.names.kind == "ModuleConfig")
        .unwrap();
    cluster
        .load_yaml(&serde_json::to_string(&crd).unwrap(), "CRD")
        .unwrap();
    // The ConfigMap disables the module and gives it one replica.
    cluster
        .load_yaml(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: addon-operator, namespace: operon-demo}\n\
             data: {app: \"replicas: 1\\n\", appEnabled: \"false\"}\n",
            "config",
        )
        .unwrap();
    let api = LocalApi::start(cluster.clone()).await.unwrap();
    let kube = KubeCluster::connect(&KubeOptions {
        kubeconfig: Some(api.kubeconfig()),
        qps: 0.0,
        ..KubeOptions::default()
    })
    .await
    .unwrap();
    let client = kube.client().clone();
    let writer = ObjectWriter::new(Arc::new(kube), Some(client.clone()), "operon-demo");
    let events: Events = Arc::default();
    let sink = events.clone();
    let mut operator = Operator::new(
        settings(dir.path()),
        crate::addons_support::sandbox(),
        writer,
        move |e| sink.lock().unwrap().push(e.clone()),
    )
    .await
    .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        operator
            .run_until(async {
                let _ = stopped.await;
            })
            .await
    });
    let configs = module_configs(&client);
    let status = async |cluster: &LocalCluster| {
        let resource = cluster.resolve(None, "ModuleConfig").unwrap();
        Cluster::get(cluster, &resource, None, "app")
            .await
            .unwrap()
            .and_then(|o| o.get("status").cloned())
    };

    // The user creates it: it wins over the ConfigMap's appEnabled and app keys.
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": "app"},
        "spec": {"enabled": true, "version": 1, "settings": {"replicas": 3}},
    }))
    .unwrap();
    configs
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let seen = until("the hook's record of the settings", async || {
        get(&cluster, "ConfigMap", "app-seen").await
    })
    .await;
    assert_eq!(seen["data"]["replicas"], "3");
    // Applied after the hook ran.
    until("the module's ConfigMap", async || {
        get(&cluster, "ConfigMap", "app").await
    })
    .await;
    let ready = until("a ready status", async || {
        status(&cluster).await.filter(|s| s["ready"] == true)
    })
    .await;
    assert_eq!(ready["enabled"], true);
    assert_eq!(ready["version"], 1);
    assert_eq!(
        ready["message"],
        "Enabled and ready; the ConfigMap's keys app and appEnabled are ignored: this ModuleConfig wins"
    );

    // New settings: the hook sees them.
    let params = PatchParams::default();
    configs
        .patch(
            "app",
            &params,
            &Patch::Merge(json!({"spec": {"settings": {"replicas": 5}}})),
        )
        .await
        .unwrap();
    until("the hook's record of the new settings", async || {
        get(&cluster, "ConfigMap", "app-seen")
            .await
            .filter(|cm| cm["data"]["replicas"] == "5")
    })
    .await;

    // Settings the schema refuses change nothing; the status says why.
    configs
        .patch(
            "app",
            &params,
            &Patch::Merge(json!({"spec": {"settings": {"replicas": "many"}}})),
        )
        .await
        .unwrap();
    let refused = until("the refusal in the status", async || {
        status(&cluster).await.filter(|s| {
            s["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Refused"))
        })
    })
    .await;
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("spec.settings.replicas: \"many\" is not of type \"integer\""),
        "{refused}"
    );
    assert_eq!(
        refused["ready"], true,
        "the module runs on with what it had"
    );

    // Disabled: its delete hook runs, then what it applied goes.
    configs
        .patch(
            "app",
            &params,
            &Patch::Merge(json!({"spec": {"enabled": false, "settings": {"replicas": 5}}})),
        )
        .await
        .unwrap();
    let deleted = until("the delete hook's record", async || {
        get(&cluster, "ConfigMap", "app-deleted").await
    })
    .await;
    assert_eq!(deleted["data"]["replicas"], "5");
    until("the module's ConfigMap deleted", async || {
        get(&cluster, "ConfigMap", "app")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    let disabled = until("a disabled status", async || {
        status(&cluster).await.filter(|s| s["enabled"] == false)
    })
    .await;
    assert_eq!(
        disabled["message"],
        "Disabled by ModuleConfig app; the ConfigMap's keys app and appEnabled are ignored: \
         this ModuleConfig wins"
    );
    let ready = disabled["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["reason"], "Disabled");

    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    let events = events.lock().unwrap();
    let changed: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            QueueEvent::ModuleConfigChanged { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        changed.len() >= 3 && changed.iter().all(|n| *n == "app"),
        "{changed:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, QueueEvent::ModuleConfigRefused { name, .. } if name == "app")),
        "the refusal is reported"
    );
}
