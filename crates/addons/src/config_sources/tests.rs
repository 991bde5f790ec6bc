use super::*;
use crate::apply::ObjectWriter;
use crate::config::ConfigMapRef;
use crate::operator::Settings;
use crate::render::Renderer;
use kube::CustomResourceExt as _;
use operon_cluster::Cluster as _;
use operon_cluster::local::LocalCluster;
use operon_script::{Launcher, ScriptSandbox, ScriptSandboxConfig};
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `app` (a ConfigMap, a config schema, the wasm values hook at beforeHelm, no flag)
/// and `other` (a ConfigMap, enabled by `modules/values.yaml`).
struct Fixture {
    _dir: tempfile::TempDir,
    cluster: Arc<LocalCluster>,
    operator: Operator,
    events: Arc<Mutex<Vec<QueueEvent>>>,
}

async fn fixture(objects: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "modules/values.yaml", "otherEnabled: true\n");
    write(
        d,
        "modules/001-app/manifests/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
    );
    write(
        d,
        "modules/001-app/openapi/config-values.yaml",
        "type: object\nproperties:\n  replicas: {type: integer, minimum: 1}\n  \
         patchConfig: {type: boolean}\n",
    );
    std::fs::create_dir_all(d.join("modules/001-app/hooks")).unwrap();
    std::fs::copy(
        operon_tests::VALUES_HOOK,
        d.join("modules/001-app/hooks/values.wasm"),
    )
    .unwrap();
    write(
        d,
        "modules/002-other/manifests/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n",
    );
    let cluster = Arc::new(LocalCluster::new());
    let crd = yaml_serde::to_string(&operon_data::api::ModuleConfig::crd()).unwrap();
    cluster.load_yaml(&crd, "operon CRDs").unwrap();
    if !objects.is_empty() {
        cluster.load_yaml(objects, "objects").unwrap();
    }
    let settings = Settings {
        modules_dir: d.join("modules"),
        global_hooks_dir: None,
        sources: None,
        config_map: ConfigMapRef {
            namespace: "ops".into(),
            name: "addon-operator".into(),
        },
        renderer: Renderer {
            helm: "helm".into(),
            namespace: "ops".into(),
            timeout: Duration::from_secs(10),
        },
        hook_timeout: Duration::from_secs(10),
        retry_first: Duration::from_millis(100),
        retry_max: Duration::from_secs(1),
    };
    // No script runs: the launcher is never started.
    let launcher = Launcher {
        program: "/nonexistent/launcher".into(),
        args: Vec::new(),
    };
    let sandbox = ScriptSandbox::new(ScriptSandboxConfig::new(launcher)).unwrap();
    let events: Arc<Mutex<Vec<QueueEvent>>> = Arc::default();
    let sink = events.clone();
    let writer = ObjectWriter::new(cluster.clone(), None, "ops");
    let operator = Operator::new(settings, sandbox, writer, move |e| {
        sink.lock().unwrap().push(e.clone());
    })
    .await
    .unwrap();
    Fixture {
        _dir: dir,
        cluster,
        operator,
        events,
    }
}

fn module_config(name: &str, generation: i64, spec: Value) -> Value {
    json!({"apiVersion": "operon.dev/v1alpha1", "kind": "ModuleConfig",
           "metadata": {"name": name, "generation": generation}, "spec": spec})
}

impl Fixture {
    /// The change reaches the cluster and the operator (as its watch would tell it),
    /// and the queue runs.
    async fn change(&mut self, kind: WatchEvent, object: Value) -> Vec<String> {
        self.events.lock().unwrap().clear();
        self.cluster
            .apply_watch_event(kind, object.clone())
            .unwrap();
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        self.operator.module_config_changed(kind, &name, &object);
        let failed = self.operator.drain().await;
        assert!(failed.is_empty(), "{failed:?}");
        self.finished()
    }

    fn finished(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                QueueEvent::Finished { task, .. } => Some(task.to_string()),
                _ => None,
            })
            .collect()
    }

    async fn object(&self, kind: &str, name: &str) -> Option<Value> {
        let resource = self.cluster.resolve(None, kind).unwrap();
        self.cluster
            .get(&resource, Some("ops"), name)
            .await
            .unwrap()
    }

    async fn status(&self, name: &str) -> Value {
        self.object("ModuleConfig", name).await.unwrap()["status"].clone()
    }
}

fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {status}"))
}

const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: ops\ndata:\n  app: \"replicas: 1\\n\"\n  appEnabled: \"false\"\n  other: \"note: from the ConfigMap\\n\"\n";

#[tokio::test]
async fn a_module_config_wins_over_the_config_map_for_its_module_only() {
    let objects = format!(
        "{CONFIG_MAP}---\n{}",
        serde_json::to_string(&module_config(
            "app",
            1,
            json!({"enabled": true, "version": 1, "settings": {"replicas": 3}})
        ))
        .unwrap()
    );
    let mut f = fixture(&objects).await;
    let failed = f.operator.drain().await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(f.operator.enabled_modules(), ["app", "other"]);
    let app = f.operator.module_values("app").unwrap();
    assert_eq!(app.values["replicas"], 3);
    assert_eq!(app.sources["/replicas"], Source::ModuleConfig);
    // The hook saw the ModuleConfig's settings.
    assert_eq!(app.values["internal"]["wasmReplicas"], 6);
    let other = f.operator.module_values("other").unwrap();
    assert_eq!(other.values["note"], "from the ConfigMap");
    assert_eq!(other.sources["/note"], Source::ConfigMap);

    let status = f.status("app").await;
    assert_eq!(status["observedGeneration"], 1);
    assert_eq!(status["enabled"], true);
    assert_eq!(status["ready"], true);
    assert_eq!(status["version"], 1);
    assert_eq!(
        status["message"],
        "Enabled and ready; the ConfigMap's keys app and appEnabled are ignored: this ModuleConfig wins"
    );
    assert_eq!(condition(&status, "SettingsAccepted")["status"], "True");
    assert_eq!(condition(&status, "Ready")["reason"], "Converged");

    // Deleted, the ConfigMap takes over again: appEnabled "false" disables the module.
    let object = f.object("ModuleConfig", "app").await.unwrap();
    let done = f.change(WatchEvent::Deleted, object).await;
    assert!(done.contains(&"ModuleDelete:app".to_owned()), "{done:?}");
    assert_eq!(f.operator.enabled_modules(), ["other"]);
    assert!(f.object("ConfigMap", "app").await.is_none());
    let app = f.operator.module_values("app").unwrap();
    assert_eq!(app.values["replicas"], 1);
    assert_eq!(app.sources["/replicas"], Source::ConfigMap);
}

#[tokio::test]
async fn spec_enabled_turns_a_module_on_and_off_and_its_hooks_see_the_settings() {
    let mut f = fixture("").await;
    f.operator.drain().await;
    assert_eq!(f.operator.enabled_modules(), ["other"]);

    let done = f
        .change(
            WatchEvent::Added,
            module_config("app", 1, json!({"enabled": true})),
        )
        .await;
    assert!(done.contains(&"ModuleRun:app".to_owned()), "{done:?}");
    assert!(f.object("ConfigMap", "app").await.is_some());
    let changed = f.events.lock().unwrap().iter().find_map(|e| match e {
        QueueEvent::ModuleConfigChanged { name, queued } => Some((name.clone(), queued.clone())),
        _ => None,
    });
    let (name, queued) = changed.expect("a ModuleConfigChanged event");
    assert_eq!(name, "app");
    assert!(queued.contains(&Task::DiscoverModules), "{queued:?}");
    let status = f.status("app").await;
    assert_eq!(
        (&status["enabled"], &status["ready"]),
        (&json!(true), &json!(true))
    );

    // New settings run the module again (no discovery: the flags did not change), and
    // its beforeHelm hook computes from them.
    let done = f
        .change(
            WatchEvent::Modified,
            module_config(
                "app",
                2,
                json!({"enabled": true, "version": 1, "settings": {"replicas": 4}}),
            ),
        )
        .await;
    assert_eq!(done, ["ModuleRun:app"]);
    let app = f.operator.module_values("app").unwrap();
    assert_eq!(app.values["internal"]["wasmReplicas"], 8);
    assert_eq!(f.status("app").await["observedGeneration"], 2);

    let done = f
        .change(
            WatchEvent::Modified,
            module_config(
                "app",
                3,
                json!({"enabled": false, "version": 1, "settings": {"replicas": 4}}),
            ),
        )
        .await;
    assert!(done.contains(&"ModuleDelete:app".to_owned()), "{done:?}");
    assert!(f.object("ConfigMap", "app").await.is_none());
    let status = f.status("app").await;
    assert_eq!(status["enabled"], false);
    assert_eq!(status["ready"], false);
    assert_eq!(status["message"], "Disabled by ModuleConfig app");
    let ready = condition(&status, "Ready");
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("False"), &json!("Disabled"))
    );
}

#[tokio::test]
async fn a_refused_module_config_changes_nothing_and_says_why() {
    let mut f = fixture("").await;
    f.operator.drain().await;
    let good = json!({"enabled": true, "version": 1, "settings": {"replicas": 2}});
    f.change(WatchEvent::Added, module_config("app", 1, good.clone()))
        .await;
    let ready_since = condition(&f.status("app").await, "Ready")["lastTransitionTime"].clone();

    let bad = json!({"enabled": true, "version": 1, "settings": {"replicas": 0, "colour": "red"}});
    let done = f
        .change(WatchEvent::Modified, module_config("app", 2, bad))
        .await;
    assert!(done.is_empty(), "nothing runs: {done:?}");
    let refused = f.events.lock().unwrap().iter().find_map(|e| match e {
        QueueEvent::ModuleConfigRefused { name, reason } => Some((name.clone(), reason.clone())),
        _ => None,
    });
    let (name, reason) = refused.expect("a ModuleConfigRefused event");
    assert_eq!(name, "app");
    assert!(
        reason.contains("ModuleConfig/app: spec.settings.replicas: "),
        "{reason}"
    );
    assert_eq!(
        f.operator.module_values("app").unwrap().values["replicas"],
        2
    );
    let status = f.status("app").await;
    assert_eq!(status["observedGeneration"], 2);
    let message = status["message"].as_str().unwrap();
    assert!(message.starts_with("Refused: spec.settings"), "{message}");
    assert!(
        message.contains("spec.settings.replicas: 0 is less than the minimum of 1")
            && message.ends_with("the module keeps the settings of an earlier generation"),
        "{message}"
    );
    let accepted = condition(&status, "SettingsAccepted");
    assert_eq!(
        (&accepted["status"], &accepted["reason"]),
        (&json!("False"), &json!("Invalid"))
    );
    // The module still runs with what it had.
    assert_eq!(status["ready"], true);
    assert_eq!(
        condition(&status, "Ready")["lastTransitionTime"],
        ready_since
    );

    // A change of the status alone (its own write, seen by the watch) is no change.
    let mut seen = f.object("ModuleConfig", "app").await.unwrap();
    seen["status"]["message"] = json!("someone else's");
    assert!(f.change(WatchEvent::Modified, seen).await.is_empty());
    assert_eq!(f.events.lock().unwrap().len(), 0);
    // ... and the status is put back.
    let message = f.status("app").await["message"].clone();
    assert!(
        message.as_str().unwrap().starts_with("Refused: "),
        "{message}"
    );
}

#[tokio::test]
async fn hooks_may_not_write_config_values_a_module_config_gives() {
    let mut f = fixture("").await;
    f.operator.drain().await;
    f.events.lock().unwrap().clear();
    let object = module_config(
        "app",
        1,
        json!({"enabled": true, "version": 1, "settings": {"replicas": 1, "patchConfig": true}}),
    );
    f.cluster
        .apply_watch_event(WatchEvent::Added, object.clone())
        .unwrap();
    f.operator
        .module_config_changed(WatchEvent::Added, "app", &object);
    let failed = f.operator.drain().await;
    let (task, error) = failed
        .iter()
        .find(|(t, _)| {
            *t == Task::ModuleRun {
                module: "app".into(),
            }
        })
        .expect("the ModuleRun fails");
    assert_eq!(task.to_string(), "ModuleRun:app");
    assert!(
        error.contains("ModuleConfig app gives them and hooks do not write a ModuleConfig"),
        "{error}"
    );
    let status = f.status("app").await;
    assert_eq!(status["ready"], false);
    assert_eq!(condition(&status, "Ready")["reason"], "RunFailed");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("Its ModuleRun failed: "),
        "{status}"
    );
}

#[tokio::test]
async fn the_global_module_config_gives_the_global_values_and_unknown_names_are_ignored() {
    let mut f = fixture(CONFIG_MAP).await;
    f.operator.drain().await;
    f.change(
        WatchEvent::Added,
        module_config(
            "global",
            1,
            json!({"version": 1, "settings": {"clusterName": "prod"}}),
        ),
    )
    .await;
    assert_eq!(f.operator.global_values().unwrap()["clusterName"], "prod");
    let status = f.status("global").await;
    assert_eq!(status["message"], "The global settings are in use");
    assert!(status.get("enabled").is_none() && status.get("ready").is_none());

    let done = f
        .change(
            WatchEvent::Added,
            module_config("nothing-here", 1, json!({"enabled": true})),
        )
        .await;
    assert!(done.is_empty(), "{done:?}");
    let status = f.status("nothing-here").await;
    assert_eq!(
        status["message"],
        "Ignored: no module \"nothing-here\" in the modules directory: nothing uses this ModuleConfig"
    );
    assert_eq!(
        condition(&status, "SettingsAccepted")["reason"],
        "ModuleNotFound"
    );
}
