//! What lifecycle hooks and schedule bindings see of the kubernetes bindings, against
//! the local cluster, as addon-operator gives it: `beforeHelm` and `afterAll`
//! contexts carry the snapshots of the hook's own kubernetes bindings (every binding
//! named, `{}` for a hook without one; a disabled module's delete hooks too), and a
//! module's schedule bindings run only once its Synchronization is done
//! (addon-operator's EnableScheduleBindings).

use crate::addons_support::{finished, finishing, operator, ran, write};
use operon::cluster::local::LocalCluster;
use operon::cluster::{Cluster, Resource};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

async fn config_map(cluster: &LocalCluster, name: &str) -> Option<Value> {
    let resource: Resource = cluster.resolve(None, "ConfigMap").unwrap();
    Cluster::get(cluster, &resource, Some("operon-demo"), name)
        .await
        .unwrap()
}

fn add(cluster: &LocalCluster, text: &str) {
    let object: Value = yaml_serde::from_str(text).unwrap();
    cluster
        .apply_watch_event(operon::model::WatchEvent::Added, object)
        .unwrap();
}

/// A hook body that saves its binding contexts, as JSON text, in ConfigMap `name`.
fn save_contexts(name: &str) -> String {
    format!(
        r#"jq -c '{{operation: "CreateOrUpdate", object: {{apiVersion: "v1", kind: "ConfigMap",
  metadata: {{name: "{name}", namespace: "operon-demo"}}, data: {{contexts: tojson}}}}}}' \
  "$BINDING_CONTEXT_PATH" > "$KUBERNETES_PATCH_PATH""#
    )
}

#[tokio::test]
async fn lifecycle_hooks_read_their_kubernetes_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "modules/values.yaml", "webEnabled: true\n", false);
    // The module hook's beforeHelm and afterHelm see both its bindings (one filtered,
    // one with full objects); its onStartup sees no snapshots, as in addon-operator.
    write(
        d,
        "modules/001-web/hooks/pods.sh",
        &format!(
            r#"#!/bin/bash
if [ "$1" = --config ]; then
  echo '{{"configVersion":"v1","onStartup":1,"beforeHelm":1,"afterHelm":1,"kubernetes":[
    {{"name":"backends","kind":"ConfigMap","labelSelector":{{"matchLabels":{{"role":"backend"}}}},
     "jqFilter":".metadata.name","keepFullObjectsInMemory":false}},
    {{"name":"secrets","kind":"Secret","executeHookOnEvent":[],"executeHookOnSynchronization":false}}]}}'
  exit 0
fi
b=$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")
case "$b" in
  beforeHelm) {} ;;
  afterHelm) {} ;;
  onStartup) {} ;;
esac
"#,
            save_contexts("seen-before-helm"),
            save_contexts("seen-after-helm"),
            save_contexts("seen-on-startup"),
        ),
        true,
    );
    write(
        d,
        "global-hooks/hooks/nodes.sh",
        &format!(
            r#"#!/bin/bash
if [ "$1" = --config ]; then
  echo '{{"configVersion":"v1","afterAll":1,"kubernetes":[{{"name":"nodes","kind":"Node",
    "jqFilter":"{{name: .metadata.name}}","keepFullObjectsInMemory":false}}]}}'
  exit 0
fi
if [ "$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")" = afterAll ]; then
  {}
fi
"#,
            save_contexts("seen-after-all")
        ),
        true,
    );
    // A global hook with no kubernetes binding still gets `snapshots: {}`.
    write(
        d,
        "global-hooks/hooks/plain.sh",
        &format!(
            r#"#!/bin/bash
if [ "$1" = --config ]; then echo '{{"configVersion":"v1","beforeAll":1}}'; exit 0; fi
{}
"#,
            save_contexts("seen-before-all")
        ),
        true,
    );
    let cluster = Arc::new(LocalCluster::new());
    for (name, role) in [("b", "backend"), ("a", "backend"), ("c", "other")] {
        add(
            &cluster,
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: operon-demo\n  labels: {{role: {role}}}\n"
            ),
        );
    }
    add(
        &cluster,
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s1\n  namespace: operon-demo\ndata: {}\n",
    );
    add(
        &cluster,
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n",
    );
    let (mut op, events) = operator(&cluster, d).await;
    op.run_until(finishing(&events, Duration::from_secs(20), |done| {
        ran(done, "GlobalHookRun:afterAll:global/nodes.sh")
    }))
    .await
    .unwrap();
    let done = finished(&events);
    assert!(done.iter().all(|(_, r)| r.is_ok()), "{done:?}");
    let contexts = async |name: &str| -> Value {
        let object = config_map(&cluster, name)
            .await
            .unwrap_or_else(|| panic!("no ConfigMap {name}: {done:?}"));
        serde_json::from_str(object["data"]["contexts"].as_str().unwrap()).unwrap()
    };
    let secret = &contexts("seen-before-helm").await[0]["snapshots"]["secrets"][0]["object"];
    assert_eq!(secret["metadata"]["name"], "s1");
    let module_snapshots = json!({
        "backends": [{"filterResult": "a"}, {"filterResult": "b"}],
        "secrets": [{"object": secret}],
    });
    assert_eq!(
        contexts("seen-before-helm").await,
        json!([{"binding": "beforeHelm", "snapshots": module_snapshots}])
    );
    assert_eq!(
        contexts("seen-after-helm").await,
        json!([{"binding": "afterHelm", "snapshots": module_snapshots}])
    );
    assert_eq!(
        contexts("seen-on-startup").await,
        json!([{"binding": "onStartup"}])
    );
    assert_eq!(
        contexts("seen-after-all").await,
        json!([{"binding": "afterAll", "snapshots": {"nodes": [{"filterResult": {"name": "n1"}}]}}])
    );
    assert_eq!(
        contexts("seen-before-all").await,
        json!([{"binding": "beforeAll", "snapshots": {}}])
    );
}

#[tokio::test]
async fn schedules_of_a_module_wait_for_its_synchronization() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "modules/values.yaml", "clockEnabled: true\n", false);
    // The kubernetes binding is on a queue of its own (waited for), so only the hold
    // keeps the every-second schedule on `main` from running during its slow
    // Synchronization; a tick records whether the Synchronization's patch was there.
    write(
        d,
        "modules/001-clock/hooks/tick.sh",
        r#"#!/bin/bash
if [ "$1" = --config ]; then
  echo '{"configVersion":"v1","schedule":[{"name":"every-second","crontab":"* * * * * *"}],
    "kubernetes":[{"name":"cms","kind":"ConfigMap","queue":"slow","waitForSynchronization":true,
      "executeHookOnEvent":[]}]}'
  exit 0
fi
case "$(jq -r '.[0].type' "$BINDING_CONTEXT_PATH")" in
  Synchronization)
    sleep 2.5
    echo '[{"op":"add","path":"/clock/synced","value":true}]' > "$VALUES_JSON_PATCH_PATH" ;;
  Schedule)
    if [ "$(jq -r '.clock.synced // false' "$VALUES_PATH")" = true ]; then
      echo '[{"op":"add","path":"/clock/tickAfterSync","value":true}]' > "$VALUES_JSON_PATCH_PATH"
    else
      echo '[{"op":"add","path":"/clock/tickBeforeSync","value":true}]' > "$VALUES_JSON_PATCH_PATH"
    fi ;;
esac
"#,
        true,
    );
    // A grouped schedule fires Group contexts: held the same way.
    write(
        d,
        "modules/001-clock/hooks/grouped.sh",
        r#"#!/bin/bash
if [ "$1" = --config ]; then
  echo '{"configVersion":"v1","schedule":[{"name":"grouped","crontab":"* * * * * *","group":"g"}]}'
  exit 0
fi
if [ "$(jq -r '.clock.synced // false' "$VALUES_PATH")" = true ]; then
  echo '[{"op":"add","path":"/clock/groupAfterSync","value":true}]' > "$VALUES_JSON_PATCH_PATH"
else
  echo '[{"op":"add","path":"/clock/groupBeforeSync","value":true}]' > "$VALUES_JSON_PATCH_PATH"
fi
"#,
        true,
    );
    let cluster = Arc::new(LocalCluster::new());
    let (mut op, events) = operator(&cluster, d).await;
    op.run_until(tokio::time::sleep(Duration::from_secs(6)))
        .await
        .unwrap();
    let done = finished(&events);
    assert!(done.iter().all(|(_, r)| r.is_ok()), "{done:?}");
    let values = op.module_values("clock").unwrap().values;
    assert_eq!(values["synced"], true, "{values}");
    assert_eq!(
        values["tickAfterSync"], true,
        "the schedule runs once synchronized: {values}"
    );
    assert!(
        values.get("tickBeforeSync").is_none(),
        "a tick ran before the Synchronization was done: {values}"
    );
    assert_eq!(values["groupAfterSync"], true, "{values}");
    assert!(
        values.get("groupBeforeSync").is_none(),
        "a grouped tick ran before the Synchronization was done: {values}"
    );
}

#[tokio::test]
async fn delete_hooks_of_a_disabled_module_read_its_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "modules/values.yaml", "webEnabled: true\n", false);
    write(
        d,
        "modules/001-web/manifests/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: operon-demo\n",
        false,
    );
    write(
        d,
        "modules/001-web/hooks/pods.sh",
        &format!(
            r#"#!/bin/bash
if [ "$1" = --config ]; then
  echo '{{"configVersion":"v1","beforeDeleteHelm":1,"afterDeleteHelm":1,"kubernetes":[
    {{"name":"backends","kind":"ConfigMap","labelSelector":{{"matchLabels":{{"role":"backend"}}}},
     "jqFilter":".metadata.name","keepFullObjectsInMemory":false}}]}}'
  exit 0
fi
case "$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")" in
  beforeDeleteHelm) {} ;;
  afterDeleteHelm) {} ;;
esac
"#,
            save_contexts("seen-before-delete"),
            save_contexts("seen-after-delete"),
        ),
        true,
    );
    let cluster = Arc::new(LocalCluster::new());
    add(
        &cluster,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: operon-demo\n  labels: {role: backend}\n",
    );
    let (mut op, events) = operator(&cluster, d).await;
    let disabling = cluster.clone();
    let enabled = events.clone();
    let disable = tokio::spawn(async move {
        finishing(&enabled, Duration::from_secs(20), |done| {
            ran(done, "ModuleRun:web")
        })
        .await;
        add(
            &disabling,
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: operon-demo\ndata:\n  webEnabled: \"false\"\n",
        );
    });
    op.run_until(finishing(&events, Duration::from_secs(20), |done| {
        ran(done, "ModuleDelete:web")
    }))
    .await
    .unwrap();
    disable.await.unwrap();
    let done = finished(&events);
    assert!(done.iter().all(|(_, r)| r.is_ok()), "{done:?}");
    assert!(
        done.iter().any(|(t, _)| t == "ModuleDelete:web"),
        "{done:?}"
    );
    assert!(config_map(&cluster, "web").await.is_none(), "{done:?}");
    for (name, binding) in [
        ("seen-before-delete", "beforeDeleteHelm"),
        ("seen-after-delete", "afterDeleteHelm"),
    ] {
        let object = config_map(&cluster, name)
            .await
            .unwrap_or_else(|| panic!("no ConfigMap {name}: {done:?}"));
        let contexts: Value =
            serde_json::from_str(object["data"]["contexts"].as_str().unwrap()).unwrap();
        assert_eq!(
            contexts,
            json!([{"binding": binding, "snapshots": {"backends": [{"filterResult": "a"}]}}])
        );
    }
}
