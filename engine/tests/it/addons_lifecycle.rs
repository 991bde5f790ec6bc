//! addon-operator's lifecycle on the example modules directory
//! (`operations/addon-modules`) and on test trees, against the local cluster: the task
//! order, values layering and schema errors, enabled flags and `enabled` programs,
//! hook values patches, a chart that drops an object, a disabled module deleting what
//! it applied, and a failing module not blocking the others. Charts are rendered by
//! Helm's own engine (`tests/fixtures/addons/helm` over `helm-python-sdk`).

use crate::addons_support::{Events, finished, finishing, ran, sandbox, write};
use operon::addons::apply::ObjectWriter;
use operon::addons::config::ConfigMapRef;
use operon::addons::operator::{Operator, QueueEvent, Settings, Task};
use operon::addons::render::Renderer;
use operon::addons::values::Source;
use operon::cluster::local::LocalCluster;
use operon::cluster::{Cluster, Resource};
use operon::model::WatchEvent;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../operations/addon-modules")
}

fn helm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/addons/helm")
}

fn settings(modules: &Path, global: Option<&Path>) -> Settings {
    Settings {
        modules_dir: modules.to_owned(),
        global_hooks_dir: global.map(Path::to_owned),
        sources: None,
        config_map: ConfigMapRef {
            namespace: "operon-demo".into(),
            name: "addon-operator".into(),
        },
        renderer: Renderer {
            helm: helm(),
            namespace: "operon-demo".into(),
            timeout: Duration::from_secs(120),
        },
        hook_timeout: Duration::from_secs(30),
        retry_first: Duration::from_millis(200),
        retry_max: Duration::from_secs(1),
    }
}

async fn operator(
    cluster: &Arc<LocalCluster>,
    settings: Settings,
) -> Result<(Operator, Events), operon::addons::AddonError> {
    let events: Events = Arc::default();
    let sink = events.clone();
    let writer = ObjectWriter::new(cluster.clone(), None, "operon-demo");
    let operator = Operator::new(settings, sandbox(), writer, move |e| {
        sink.lock().unwrap().push(e.clone());
    })
    .await?;
    Ok((operator, events))
}

fn task_names(events: &Events) -> Vec<String> {
    finished(events).into_iter().map(|(t, _)| t).collect()
}

async fn get(cluster: &LocalCluster, kind: &str, name: &str) -> Option<Value> {
    let resource: Resource = cluster.resolve(None, kind).unwrap();
    Cluster::get(cluster, &resource, Some("operon-demo"), name)
        .await
        .unwrap()
}

fn example_cluster() -> Arc<LocalCluster> {
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_file(example().join("configmap.yaml")).unwrap();
    cluster
}

#[tokio::test]
async fn the_example_converges_in_addon_operator_order() {
    crate::e2e_support::require_helm_python();
    let cluster = example_cluster();
    let ex = example();
    let (mut op, events) = operator(
        &cluster,
        settings(&ex.join("modules"), Some(&ex.join("global-hooks"))),
    )
    .await
    .unwrap();
    let failed = op.drain().await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(
        task_names(&events),
        [
            "GlobalHookRun:onStartup:global/cluster-info.sh",
            "GlobalHookRun:beforeAll:global/cluster-info.sh",
            "DiscoverModules",
            "ModuleRun:echo-server",
            "ModuleRun:config-reporter",
            "GlobalHookRun:afterAll:global/cluster-info.sh",
        ]
    );
    // configReporterEnabled: false in modules/values.yaml, "true" in the ConfigMap: the
    // ConfigMap wins, and its enabled program sees echo-server enabled before it.
    assert_eq!(op.enabled_modules(), ["echo-server", "config-reporter"]);

    // The chart was rendered after beforeHelm, with the ConfigMap's values.
    let deployment = get(&cluster, "Deployment", "echo-server").await.unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
    assert_eq!(args[1], "-text=hi from demo", "{args}");
    assert!(get(&cluster, "Service", "echo-server").await.is_some());
    // Plain manifests as written; afterHelm patched them once applied.
    let reporter = get(&cluster, "ConfigMap", "config-reporter").await.unwrap();
    assert_eq!(
        reporter["data"]["enabledModules"],
        "echo-server,config-reporter"
    );
    assert_eq!(
        reporter["data"]["purpose"],
        "plain manifests, applied as written"
    );
    // Release records list what each module applied.
    let record = get(&cluster, "ConfigMap", "operon-module-echo-server")
        .await
        .unwrap();
    let objects: Value = serde_json::from_str(record["data"]["objects"].as_str().unwrap()).unwrap();
    assert_eq!(objects.as_array().unwrap().len(), 2, "{objects}");

    // Global memory values from onStartup and beforeAll.
    let global = op.global_values().unwrap();
    assert_eq!(
        global["discovery"],
        json!({"startedBy": "cluster-info", "convergences": 1})
    );
    assert_eq!(global["clusterName"], "demo");

    // Each key of the module's values with its layer.
    let values = op.module_values("echo-server").unwrap();
    assert_eq!(values.sources["/replicas"], Source::ConfigMap);
    assert_eq!(values.sources["/service/port"], Source::ModuleValues);
    assert_eq!(values.sources["/internal/greeting"], Source::HookPatch);
    // `internal: {}` came from a schema default, but its leaf is the hook's.
    assert!(!values.sources.contains_key("/internal"));

    // A second convergence changes nothing: onStartup does not run again and nothing
    // is sent.
    events.lock().unwrap().clear();
    op.config_changed(Some(&json!({"data": {
        "global": "clusterName: demo\n",
        "echoServer": "replicas: 2\nmessage: hi\n",
        "configReporterEnabled": "true",
        "echoServerEnabled": "true",
    }})));
    assert!(op.drain().await.is_empty());
    let runs = finished(&events);
    assert!(
        !runs.iter().any(|(t, _)| t.contains("onStartup")),
        "{runs:?}"
    );
    let echo = runs
        .iter()
        .find(|(t, _)| t == "ModuleRun:echo-server")
        .unwrap();
    assert_eq!(echo.1.as_deref(), Ok("objects unchanged"));
    assert_eq!(op.global_values().unwrap()["discovery"]["convergences"], 2);
}

#[tokio::test]
async fn config_map_changes_rerun_modules_drop_objects_and_disable_modules() {
    crate::e2e_support::require_helm_python();
    let cluster = example_cluster();
    let ex = example();
    let (mut op, events) = operator(
        &cluster,
        settings(&ex.join("modules"), Some(&ex.join("global-hooks"))),
    )
    .await
    .unwrap();
    assert!(op.drain().await.is_empty());
    assert!(get(&cluster, "Service", "echo-server").await.is_some());

    // The service is disabled and replicas change: the chart no longer renders the
    // Service, which is deleted.
    events.lock().unwrap().clear();
    let changed = yaml(&std::fs::read_to_string(ex.join("configmap-changed.yaml")).unwrap());
    cluster
        .apply_watch_event(WatchEvent::Modified, changed.clone())
        .unwrap();
    op.config_changed(Some(&changed));
    assert!(op.drain().await.is_empty());
    let runs = finished(&events);
    let echo = runs
        .iter()
        .find(|(t, _)| t == "ModuleRun:echo-server")
        .unwrap();
    assert_eq!(
        echo.1.as_deref(),
        Ok("applied 1 object, deleted Service operon-demo/echo-server")
    );
    assert!(get(&cluster, "Service", "echo-server").await.is_none());
    let deployment = get(&cluster, "Deployment", "echo-server").await.unwrap();
    assert_eq!(deployment["spec"]["replicas"], 3);

    // replicas: 0 makes echo-server's enabled program say false; config-reporter's then
    // sees echo-server disabled and says false too. Both are deleted, and their
    // release records with them.
    events.lock().unwrap().clear();
    let mut zero = changed.clone();
    zero["data"]["echoServer"] = json!("replicas: 0\n");
    op.config_changed(Some(&zero));
    assert!(op.drain().await.is_empty());
    let names = task_names(&events);
    assert_eq!(
        names,
        [
            "GlobalHookRun:beforeAll:global/cluster-info.sh",
            "DiscoverModules",
            "ModuleDelete:config-reporter",
            "ModuleDelete:echo-server",
            "GlobalHookRun:afterAll:global/cluster-info.sh",
        ]
    );
    assert!(op.enabled_modules().is_empty());
    for (kind, name) in [
        ("Deployment", "echo-server"),
        ("ConfigMap", "config-reporter"),
        ("ConfigMap", "operon-module-echo-server"),
        ("ConfigMap", "operon-module-config-reporter"),
    ] {
        assert!(
            get(&cluster, kind, name).await.is_none(),
            "{kind} {name} remains"
        );
    }
    let metrics = op.metrics().text();
    assert!(
        metrics.contains("operon_module_enabled{module=\"echo-server\"} 0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn invalid_config_values_name_the_module_and_the_path() {
    let cluster = Arc::new(LocalCluster::new());
    cluster
        .load_yaml(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: addon-operator, namespace: operon-demo}\n\
             data:\n  echoServer: |\n    replicas: many\n    colour: red\n",
            "test",
        )
        .unwrap();
    let ex = example();
    let err = operator(
        &cluster,
        settings(&ex.join("modules"), Some(&ex.join("global-hooks"))),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("module echo-server config values are not valid: "),
        "{err}"
    );
    assert!(err.contains("echoServer.replicas: "), "{err}");
    assert!(err.contains("colour"), "{err}");
}

/// A tree of test modules: `broken` fails in beforeHelm, `fine` deploys manifests,
/// `hooks-only` records its lifecycle in its memory values.
fn test_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "modules/values.yaml",
        "brokenEnabled: true\nfineEnabled: true\nhooksOnlyEnabled: true\n",
        false,
    );
    write(
        d,
        "modules/001-broken/hooks/fail.sh",
        "#!/bin/sh\nif [ \"$1\" = --config ]; then echo '{\"beforeHelm\": 1}'; exit 0; fi\n\
         echo 'cannot reach the registry' >&2\nexit 3\n",
        true,
    );
    write(
        d,
        "modules/001-broken/manifests/cm.yaml",
        &config_map("broken"),
        false,
    );
    write(
        d,
        "modules/002-fine/manifests/cm.yaml",
        &config_map("fine"),
        false,
    );
    // onStartup counts its runs; beforeHelm records the modules it saw enabled;
    // afterHelm sets a config value the first time, which changes the module's values
    // and so runs the module again (without onStartup).
    write(
        d,
        "modules/003-hooks-only/hooks/trace.sh",
        r#"#!/bin/bash
if [ "$1" = --config ]; then echo '{"configVersion":"v1","onStartup":1,"beforeHelm":1,"afterHelm":1}'; exit 0; fi
b=$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")
case $b in
  onStartup) jq '[{"op":"add","path":"/hooksOnly/startups","value":((.hooksOnly.startups // 0) + 1)}]' "$VALUES_PATH" > "$VALUES_JSON_PATCH_PATH" ;;
  beforeHelm) jq '[{"op":"add","path":"/hooksOnly/seen","value":(.global.enabledModules | join(","))}]' "$VALUES_PATH" > "$VALUES_JSON_PATCH_PATH" ;;
  afterHelm)
    if [ "$(jq -r '.hooksOnly.reported // false' "$CONFIG_VALUES_PATH")" != true ]; then
      echo '[{"op":"add","path":"/hooksOnly/reported","value":true}]' > "$CONFIG_VALUES_JSON_PATCH_PATH"
    fi ;;
esac
"#,
        true,
    );
    dir
}

fn config_map(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  module: {name}\n")
}

fn yaml(text: &str) -> Value {
    yaml_serde::from_str(text).unwrap()
}

#[tokio::test]
async fn a_failing_module_does_not_block_the_others_and_is_retried() {
    let tree = test_tree();
    let cluster = Arc::new(LocalCluster::new());
    let (mut op, events) = operator(&cluster, settings(&tree.path().join("modules"), None))
        .await
        .unwrap();
    let failed = op.drain().await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(
        failed[0].0,
        Task::ModuleRun {
            module: "broken".into()
        }
    );
    assert!(
        failed[0].1.contains("cannot reach the registry"),
        "{}",
        failed[0].1
    );
    let names = task_names(&events);
    assert_eq!(
        names,
        [
            "DiscoverModules",
            "ModuleRun:broken",
            "ModuleRun:fine",
            "ModuleRun:hooks-only",
            "ModuleRun:hooks-only",
        ]
    );
    assert!(get(&cluster, "ConfigMap", "fine").await.is_some());
    assert!(get(&cluster, "ConfigMap", "broken").await.is_none());

    // hooks-only: onStartup once, beforeHelm saw every enabled module, and afterHelm's
    // config patch went to the ConfigMap (created for it).
    let values = op.module_values("hooks-only").unwrap().values;
    assert_eq!(values["startups"], 1);
    assert_eq!(values["seen"], "broken,fine,hooks-only");
    let cm = get(&cluster, "ConfigMap", "addon-operator").await.unwrap();
    assert_eq!(cm["data"]["hooksOnly"], "reported: true\n");

    // The broken module waits for its retry with backoff; the loop runs it again.
    let retry = events.lock().unwrap().iter().find_map(|e| match e {
        QueueEvent::Finished {
            retry_in: Some(d), ..
        } => Some(*d),
        _ => None,
    });
    assert_eq!(retry, Some(Duration::from_millis(200)));
    events.lock().unwrap().clear();
    op.run_until(tokio::time::sleep(Duration::from_millis(1500)))
        .await
        .unwrap();
    let names = task_names(&events);
    assert!(
        names.len() >= 2 && names.iter().all(|n| n == "ModuleRun:broken"),
        "{names:?}"
    );
    let metrics = op.metrics().text();
    assert!(
        metrics.contains(&format!(
            "operon_module_run_errors_total{{module=\"broken\"}} {}",
            names.len() + 1
        )),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_hook_may_not_patch_another_section() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "modules/values.yaml", "echoEnabled: true\n", false);
    write(
        d,
        "modules/echo/hooks/sneaky.sh",
        "#!/bin/sh\nif [ \"$1\" = --config ]; then echo '{\"beforeHelm\": 1}'; exit 0; fi\n\
         echo '[{\"op\":\"add\",\"path\":\"/global/x\",\"value\":1}]' > \"$VALUES_JSON_PATCH_PATH\"\n",
        true,
    );
    let cluster = Arc::new(LocalCluster::new());
    let (mut op, _) = operator(&cluster, settings(&d.join("modules"), None))
        .await
        .unwrap();
    let failed = op.drain().await;
    assert_eq!(failed.len(), 1);
    assert_eq!(
        failed[0].1,
        "hook echo/sneaky.sh patched global.x, outside its values section echo"
    );
}

#[tokio::test]
async fn flags_decide_before_enabled_programs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // a: enabled by the common values, disabled by its own values.yaml (later wins).
    // b: no flag at all. c: enabled, and its program disables it with a reason.
    write(
        d,
        "modules/values.yaml",
        "aEnabled: true\ncEnabled: true\n",
        false,
    );
    write(d, "modules/001-a/values.yaml", "aEnabled: false\n", false);
    std::fs::create_dir_all(d.join("modules/002-b")).unwrap();
    write(
        d,
        "modules/003-c/enabled",
        "#!/bin/sh\necho 'not today' > \"$MODULE_ENABLED_REASON\"\necho false > \"$MODULE_ENABLED_RESULT\"\n",
        true,
    );
    let cluster = Arc::new(LocalCluster::new());
    let (mut op, events) = operator(&cluster, settings(&d.join("modules"), None))
        .await
        .unwrap();
    assert!(op.drain().await.is_empty());
    assert!(op.enabled_modules().is_empty());
    let runs = finished(&events);
    assert_eq!(
        runs[0].1.as_deref(),
        Ok(
            "a: disabled by the module's values.yaml; b: disabled (no bEnabled flag); \
            c: disabled by its enabled script (not today)"
        )
    );
}

#[tokio::test]
async fn kubernetes_bindings_patch_values_and_run_their_module_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "modules/values.yaml", "watcherEnabled: true\n", false);
    write(
        d,
        "modules/watcher/manifests/cm.yaml",
        &config_map("watcher"),
        false,
    );
    write(
        d,
        "modules/watcher/hooks/count.sh",
        r#"#!/bin/bash
if [ "$1" = --config ]; then
  echo '{"configVersion":"v1","kubernetes":[{"name":"cms","kind":"ConfigMap","labelSelector":{"matchLabels":{"counted":"yes"}}}]}'
  exit 0
fi
jq '[.[] | select(.type == "Event") | {op: "add", path: "/watcher/lastSeen", value: .object.metadata.name}]' \
  "$BINDING_CONTEXT_PATH" > "$VALUES_JSON_PATCH_PATH"
"#,
        true,
    );
    let cluster = Arc::new(LocalCluster::new());
    let (mut op, events) = operator(&cluster, settings(&d.join("modules"), None))
        .await
        .unwrap();
    let change = {
        let cluster = cluster.clone();
        let events = events.clone();
        async move {
            finishing(&events, Duration::from_secs(20), |done| {
                ran(done, "ModuleRun:watcher")
            })
            .await;
            let object = yaml(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: counted-1\n  namespace: operon-demo\n  labels: {counted: \"yes\"}\n",
            );
            cluster
                .apply_watch_event(WatchEvent::Added, object)
                .unwrap();
        }
    };
    let (result, ()) = tokio::join!(
        // A while past the second run, for a third one (there must be none) to show.
        op.run_until(async {
            finishing(&events, Duration::from_secs(20), |done| {
                done.iter()
                    .filter(|(t, _)| t == "ModuleRun:watcher")
                    .count()
                    == 2
            })
            .await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }),
        change
    );
    result.unwrap();
    assert_eq!(
        op.module_values("watcher").unwrap().values["lastSeen"],
        "counted-1"
    );
    let changed: Vec<(String, Vec<Task>)> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            QueueEvent::ValuesChanged { hook, queued } => Some((hook.clone(), queued.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        changed,
        [(
            "watcher/count.sh".to_owned(),
            vec![Task::ModuleRun {
                module: "watcher".into()
            }]
        )]
    );
    let runs = task_names(&events);
    assert_eq!(
        runs,
        ["DiscoverModules", "ModuleRun:watcher", "ModuleRun:watcher"]
    );
}

#[tokio::test]
async fn releases_of_vanished_modules_are_purged_and_hook_metrics_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "modules/values.yaml", "keepEnabled: true\n", false);
    write(
        d,
        "modules/keep/hooks/count.sh",
        "#!/bin/sh\nif [ \"$1\" = --config ]; then echo '{\"beforeHelm\": 1}'; exit 0; fi\n\
         echo '{\"name\":\"keep_runs_total\",\"action\":\"add\",\"value\":1}' > \"$METRICS_PATH\"\n",
        true,
    );
    let cluster = Arc::new(LocalCluster::new());
    cluster
        .load_yaml(
            r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: operon-module-gone
  namespace: operon-demo
  labels: {operon.dev/module-release: gone}
data:
  module: gone
  checksum: "0"
  objects: '[{"apiVersion":"v1","kind":"ConfigMap","namespace":"operon-demo","name":"leftover"}]'
---
apiVersion: v1
kind: ConfigMap
metadata: {name: leftover, namespace: operon-demo}
"#,
            "test",
        )
        .unwrap();
    let (mut op, events) = operator(&cluster, settings(&d.join("modules"), None))
        .await
        .unwrap();
    assert!(op.drain().await.is_empty());
    assert_eq!(
        task_names(&events),
        ["DiscoverModules", "ModulePurge:gone", "ModuleRun:keep"]
    );
    assert!(get(&cluster, "ConfigMap", "leftover").await.is_none());
    assert!(
        get(&cluster, "ConfigMap", "operon-module-gone")
            .await
            .is_none()
    );
    let metrics = op.hook_metrics().render_hooks();
    assert!(metrics.contains("keep_runs_total"), "{metrics}");
}

#[tokio::test]
async fn global_hooks_may_enable_modules() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // b has no flag anywhere but the one a global hook sets before discovery; the
    // ConfigMap still wins over the hook for c.
    write(d, "modules/values.yaml", "", false);
    std::fs::create_dir_all(d.join("modules/001-b")).unwrap();
    std::fs::create_dir_all(d.join("modules/002-c")).unwrap();
    write(
        d,
        "global/hooks/enable.sh",
        "#!/bin/sh\nif [ \"$1\" = --config ]; then echo '{\"beforeAll\": 1}'; exit 0; fi\n\
         echo '[{\"op\":\"add\",\"path\":\"/bEnabled\",\"value\":true},\
         {\"op\":\"add\",\"path\":\"/cEnabled\",\"value\":true}]' > \"$VALUES_JSON_PATCH_PATH\"\n",
        true,
    );
    let cluster = Arc::new(LocalCluster::new());
    cluster
        .load_yaml(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: addon-operator, namespace: operon-demo}\n\
             data: {cEnabled: \"false\"}\n",
            "test",
        )
        .unwrap();
    let (mut op, events) = operator(
        &cluster,
        settings(&d.join("modules"), Some(&d.join("global"))),
    )
    .await
    .unwrap();
    assert!(op.drain().await.is_empty());
    assert_eq!(op.enabled_modules(), ["b"]);
    let runs = finished(&events);
    let discovery = runs.iter().find(|(t, _)| t == "DiscoverModules").unwrap();
    assert_eq!(
        discovery.1.as_deref(),
        Ok("b: enabled; c: disabled by the ConfigMap")
    );
    // The flags are not values: the global values stay as they were.
    assert_eq!(op.global_values().unwrap(), json!({}));
}
