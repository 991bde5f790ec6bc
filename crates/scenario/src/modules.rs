//! addon-operator modules under test: the operator's queue over a modules directory
//! and the in-memory cluster, config values given as its ConfigMap would give them or
//! as ModuleConfig objects (an `event` step's, which the operator sees as its watch
//! would show them; it writes their status), and the values, enabled modules and tasks
//! shown in the forms `expect.values` and `expect.tasks` are written in.

use crate::ScenarioError;
use crate::check::Observed;
use crate::file::ModulesSubject;
use operon_addons::apply::ObjectWriter;
use operon_addons::config::ConfigMapRef;
use operon_addons::operator::{Operator, QueueEvent, Settings};
use operon_addons::render::Renderer;
use operon_cluster::Cluster;
use operon_cluster::local::LocalCluster;
use operon_data::api::API_VERSION;
use operon_data::model::WatchEvent;
use operon_script::ScriptSandbox;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Makes the cluster serve Operon's ModuleConfig kind, as a cluster where Operon is
/// installed does, so that the test's objects and steps may hold ModuleConfigs.
pub(crate) fn register_kinds(cluster: &LocalCluster) -> Result<(), ScenarioError> {
    let crd = operon_data::api::crds()
        .into_iter()
        .find(|crd| crd.spec.names.kind == "ModuleConfig")
        .ok_or_else(|| ScenarioError::Modules("no ModuleConfig CRD".to_owned()))?;
    let crd = yaml_serde::to_string(&crd).map_err(|source| ScenarioError::ModulesYaml {
        what: "the ModuleConfig CRD".to_owned(),
        source,
    })?;
    cluster
        .load_yaml(&crd, "Operon's ModuleConfig CRD")
        .map(drop)
        .map_err(|problems| {
            let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
            ScenarioError::Modules(format!("the ModuleConfig CRD: {}", problems.join("; ")))
        })
}

/// Tasks that ended, each with its summary or error, shared with the queue's reports.
type Finished = Arc<Mutex<Vec<(String, Result<String, String>)>>>;

/// The operator of a modules test and what its queue reported.
pub(crate) struct Modules {
    operator: Operator,
    config_map: ConfigMapRef,
    /// Tasks that ended since the last step, in order.
    finished: Finished,
}

impl Modules {
    /// The operator over `subject`'s directories (relative to `base`), writing to
    /// `cluster`.
    pub(crate) async fn new(
        subject: &ModulesSubject,
        base: &Path,
        cluster: Arc<LocalCluster>,
        helm: PathBuf,
        strict: bool,
    ) -> Result<Self, ScenarioError> {
        let config_map = ConfigMapRef {
            namespace: subject.namespace.clone(),
            name: subject.config_map.clone(),
        };
        let timeout = Duration::from_secs(60);
        let settings = Settings {
            modules_dir: base.join(&subject.dir),
            global_hooks_dir: subject.global_hooks_dir.as_ref().map(|d| base.join(d)),
            sources: None,
            config_map: config_map.clone(),
            renderer: Renderer {
                helm,
                namespace: subject.namespace.clone(),
                timeout,
            },
            hook_timeout: timeout,
            retry_first: Duration::from_secs(5),
            retry_max: Duration::from_secs(32),
        };
        let finished = Arc::new(Mutex::new(Vec::new()));
        let sink = finished.clone();
        let on_event = move |event: &QueueEvent| {
            let reported = match event {
                QueueEvent::Finished { task, result, .. } => (task.to_string(), result.clone()),
                QueueEvent::ConfigRejected { reason } => {
                    ("ConfigRejected".to_owned(), Err(reason.clone()))
                }
                QueueEvent::PatchRejected { hook, reason } => {
                    (format!("ValuesPatch:{hook}"), Err(reason.clone()))
                }
                QueueEvent::ModuleConfigRefused { name, reason } => {
                    (format!("ModuleConfig:{name}"), Err(reason.clone()))
                }
                _ => return,
            };
            sink.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(reported);
        };
        let sandbox =
            ScriptSandbox::with_this_binary(strict).map_err(ScenarioError::ModulesSandbox)?;
        let cluster: Arc<dyn Cluster> = cluster;
        let writer = ObjectWriter::new(cluster, None, &subject.namespace);
        let operator = Operator::new(settings, sandbox, writer, on_event)
            .await
            .map_err(ScenarioError::Operator)?;
        Ok(Self {
            operator,
            config_map,
            finished,
        })
    }

    /// Runs what is queued (the startup tasks at first) until the queue is empty.
    pub(crate) async fn drain(&mut self) -> Result<Observed, ScenarioError> {
        self.operator.drain().await;
        self.observe()
    }

    /// Tells the operator of a change the cluster just took, when it is one its watches
    /// would show: a ModuleConfig's.
    pub(crate) fn object_changed(&mut self, kind: WatchEvent, object: &Value) {
        if object["kind"] == "ModuleConfig" && object["apiVersion"] == API_VERSION {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            self.operator.module_config_changed(kind, name, object);
        }
    }

    /// Takes new config values as the ConfigMap would carry them, then runs what they
    /// queue.
    pub(crate) async fn configure(
        &mut self,
        config: &Value,
        cluster: &LocalCluster,
    ) -> Result<Observed, ScenarioError> {
        let object = self.config_map_of(config)?;
        let exists = cluster.objects().iter().any(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"] == self.config_map.name.as_str()
                && o["metadata"]["namespace"] == self.config_map.namespace.as_str()
        });
        let kind = if exists {
            WatchEvent::Modified
        } else {
            WatchEvent::Added
        };
        cluster
            .apply_watch_event(kind, object.clone())
            .map_err(ScenarioError::event)?;
        self.operator.config_changed(Some(&object));
        self.drain().await
    }

    /// The ConfigMap holding `config`: each top-level key a YAML document, as
    /// addon-operator reads them (`<module>Enabled` as `"true"` or `"false"`).
    fn config_map_of(&self, config: &Value) -> Result<Value, ScenarioError> {
        let Value::Object(sections) = config else {
            return Err(ScenarioError::Modules(
                "config: expected a map of sections (global, <module>, <module>Enabled)".to_owned(),
            ));
        };
        let mut data = Map::new();
        for (key, value) in sections {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                other => {
                    yaml_serde::to_string(other).map_err(|source| ScenarioError::ModulesYaml {
                        what: format!("config.{key}"),
                        source,
                    })?
                }
            };
            data.insert(key.clone(), Value::String(text));
        }
        Ok(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.config_map.name, "namespace": self.config_map.namespace},
            "data": data,
        }))
    }

    /// The values of every module and the global ones, the enabled modules and the
    /// tasks that ended since the last look.
    fn observe(&self) -> Result<Observed, ScenarioError> {
        let mut values = Map::new();
        let global = self
            .operator
            .global_values()
            .map_err(ScenarioError::Operator)?;
        values.insert("global".to_owned(), global);
        for module in &self.operator.layout().modules {
            let computed = self
                .operator
                .module_values(&module.name)
                .map_err(ScenarioError::Operator)?;
            values.insert(module.values_key.clone(), computed.values);
        }
        values.insert("enabled".to_owned(), json!(self.operator.enabled_modules()));
        let finished = std::mem::take(
            &mut *self
                .finished
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let mut tasks = Map::new();
        for (task, result) in finished {
            let entry = match result {
                Ok(summary) => json!({"ok": true, "summary": summary}),
                Err(error) => json!({"ok": false, "error": error}),
            };
            // A task that ran twice (a retry) is shown as it ended last.
            tasks.insert(task, entry);
        }
        Ok(Observed {
            values: Some(Value::Object(values)),
            tasks: Some(Value::Object(tasks)),
            ..Observed::default()
        })
    }
}
