//! The phases of addon-operator's ModuleRun around `beforeHelm`, against the local
//! cluster: the Synchronization of a module's kubernetes bindings runs (its values
//! patches applied) before the first `beforeHelm`, and the global hooks' before the
//! first `beforeAll`; `executeHookOnSynchronization: false` is not run but does not
//! hold the module; a module's `crds/` are applied (ModuleEnsureCRDs) before its first
//! ModuleRun; values marked `x-required-for-helm` are required only for rendering, and
//! their absence fails the ModuleRun with the module and the path named.

use crate::addons_support::{finished, finishing, operator, ran, write};
use operon::cluster::local::LocalCluster;
use operon::cluster::{Cluster, Resource};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

async fn get(
    cluster: &LocalCluster,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Option<Value> {
    let resource: Resource = cluster.resolve(None, kind).unwrap();
    Cluster::get(cluster, &resource, namespace, name)
        .await
        .unwrap()
}

/// A module whose hook counts ConfigMaps labelled `counted` at Synchronization (a
/// memory value), and whose manifests-free beforeHelm hook copies what it sees into
/// a ConfigMap through a kubernetes patch; a global hook does the same for beforeAll.
fn synchronization_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "modules/values.yaml", "counterEnabled: true\n", false);
    write(
        d,
        "modules/001-counter/hooks/count.sh",
        r#"#!/bin/bash
if [ "$1" = --config ]; then
  echo '{"configVersion":"v1","kubernetes":[
    {"name":"counted","kind":"ConfigMap","labelSelector":{"matchLabels":{"counted":"yes"}}},
    {"name":"quiet","kind":"ConfigMap","executeHookOnSynchronization":false,
     "labelSelector":{"matchLabels":{"quiet":"yes"}}}]}'
  exit 0
fi
jq '[.[] | select(.type == "Synchronization") | select(.binding == "counted")
     | {op: "add", path: "/counter/atSync", value: (.objects | length)}]' \
  "$BINDING_CONTEXT_PATH" > "$VALUES_JSON_PATCH_PATH"
if jq -e '.[] | select(.binding == "quiet")' "$BINDING_CONTEXT_PATH" > /dev/null; then
  echo "quiet ran" >&2; exit 1
fi
"#,
        true,
    );
    write(
        d,
        "modules/001-counter/hooks/before.sh",
        r#"#!/bin/bash
if [ "$1" = --config ]; then echo '{"configVersion":"v1","beforeHelm":1}'; exit 0; fi
jq -c '{operation: "CreateOrUpdate", object: {apiVersion: "v1", kind: "ConfigMap",
  metadata: {name: "seen-before-helm", namespace: "operon-demo"},
  data: {atSync: (.counter.atSync // "none" | tostring)}}}' "$VALUES_PATH" > "$KUBERNETES_PATCH_PATH"
"#,
        true,
    );
    write(
        d,
        "global-hooks/hooks/nodes.sh",
        r#"#!/bin/bash
if [ "$1" = --config ]; then
  echo '{"configVersion":"v1","beforeAll":1,"kubernetes":[{"name":"nodes","kind":"Node"}]}'
  exit 0
fi
b=$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")
if [ "$b" = beforeAll ]; then
  jq -c '{operation: "CreateOrUpdate", object: {apiVersion: "v1", kind: "ConfigMap",
    metadata: {name: "seen-before-all", namespace: "operon-demo"},
    data: {nodes: (.global.nodes // "none" | tostring)}}}' "$VALUES_PATH" > "$KUBERNETES_PATCH_PATH"
else
  jq '[.[] | select(.type == "Synchronization")
       | {op: "add", path: "/global/nodes", value: (.objects | length)}]' \
    "$BINDING_CONTEXT_PATH" > "$VALUES_JSON_PATCH_PATH"
fi
"#,
        true,
    );
    dir
}

#[tokio::test]
async fn synchronization_runs_before_the_first_before_helm_and_before_all() {
    let tree = synchronization_tree();
    let cluster = Arc::new(LocalCluster::new());
    for (name, labels) in [
        ("a", "counted: \"yes\""),
        ("b", "counted: \"yes\""),
        ("c", "quiet: \"yes\""),
    ] {
        let object: Value = yaml_serde::from_str(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: operon-demo\n  labels: {{{labels}}}\n"
        ))
        .unwrap();
        cluster
            .apply_watch_event(operon::model::WatchEvent::Added, object)
            .unwrap();
    }
    let node: Value =
        yaml_serde::from_str("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n").unwrap();
    cluster
        .apply_watch_event(operon::model::WatchEvent::Added, node)
        .unwrap();
    let (mut op, events) = operator(&cluster, tree.path()).await;
    op.run_until(finishing(&events, Duration::from_secs(20), |done| {
        ran(done, "ModuleRun:counter")
    }))
    .await
    .unwrap();
    let done = finished(&events);
    assert!(done.iter().all(|(_, r)| r.is_ok()), "{done:?}");
    let seen = get(
        &cluster,
        "ConfigMap",
        Some("operon-demo"),
        "seen-before-helm",
    )
    .await
    .unwrap();
    assert_eq!(
        seen["data"]["atSync"], "2",
        "beforeHelm saw the Synchronization's patch"
    );
    let seen = get(
        &cluster,
        "ConfigMap",
        Some("operon-demo"),
        "seen-before-all",
    )
    .await
    .unwrap();
    assert_eq!(
        seen["data"]["nodes"], "1",
        "beforeAll saw the global Synchronization"
    );
    assert_eq!(op.module_values("counter").unwrap().values["atSync"], 2);
    // The values did not change after the render: one ModuleRun only.
    let runs: Vec<&String> = done
        .iter()
        .map(|(t, _)| t)
        .filter(|t| t.starts_with("ModuleRun"))
        .collect();
    assert_eq!(runs, ["ModuleRun:counter"]);
}

#[tokio::test]
async fn crds_are_applied_before_the_first_module_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "modules/values.yaml", "widgetsEnabled: true\n", false);
    write(
        d,
        "modules/001-widgets/crds/widgets.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n\
         spec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: widgets, singular: widget, kind: Widget}\n\
         \x20 versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n",
        false,
    );
    write(
        d,
        "modules/001-widgets/crds/doc-widgets.yaml",
        "not: applied\n",
        false,
    );
    write(
        d,
        "modules/001-widgets/manifests/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: widgets\n",
        false,
    );
    let cluster = Arc::new(LocalCluster::new());
    let (mut op, events) = operator(&cluster, d).await;
    let failed = op.drain().await;
    assert!(failed.is_empty(), "{failed:?}");
    let names: Vec<String> = finished(&events).into_iter().map(|(t, _)| t).collect();
    assert_eq!(
        names,
        [
            "DiscoverModules",
            "ModuleEnsureCRDs:widgets",
            "ModuleRun:widgets"
        ]
    );
    assert!(
        get(
            &cluster,
            "CustomResourceDefinition",
            None,
            "widgets.example.com"
        )
        .await
        .is_some()
    );

    // A ConfigMap change runs the module again; its CRDs are not applied again.
    events.lock().unwrap().clear();
    let cm: Value = yaml_serde::from_str(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: addon-operator, namespace: operon-demo}\ndata:\n  global: 'a: 1'\n",
    )
    .unwrap();
    op.config_changed(Some(&cm));
    assert!(op.drain().await.is_empty());
    let names: Vec<String> = finished(&events).into_iter().map(|(t, _)| t).collect();
    assert_eq!(names, ["DiscoverModules", "ModuleRun:widgets"]);
}

#[tokio::test]
async fn values_required_for_helm_fail_the_run_not_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "modules/values.yaml", "ingressEnabled: true\n", false);
    write(
        d,
        "modules/001-ingress/openapi/config-values.yaml",
        "type: object\nx-required-for-helm: [host]\nproperties:\n  host: {type: string}\n",
        false,
    );
    write(
        d,
        "modules/001-ingress/manifests/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ingress\n",
        false,
    );
    let cluster = Arc::new(LocalCluster::new());
    let (mut op, events) = operator(&cluster, d).await;
    let failed = op.drain().await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0.to_string(), "ModuleRun:ingress");
    assert!(
        failed[0]
            .1
            .contains("module ingress values for rendering (x-required-for-helm)")
            && failed[0].1.contains("\"host\" is a required property"),
        "{}",
        failed[0].1
    );
    assert!(
        get(&cluster, "ConfigMap", Some("operon-demo"), "ingress")
            .await
            .is_none()
    );

    // The same values are fine as config: the ConfigMap that gives the host is taken,
    // and the module runs.
    events.lock().unwrap().clear();
    let cm: Value = yaml_serde::from_str(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: addon-operator, namespace: operon-demo}\ndata:\n  ingress: 'host: example.com'\n",
    )
    .unwrap();
    op.config_changed(Some(&cm));
    assert!(op.drain().await.is_empty());
    assert!(
        get(&cluster, "ConfigMap", Some("operon-demo"), "ingress")
            .await
            .is_some()
    );
}
