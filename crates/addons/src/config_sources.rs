//! Where config values come from: the ConfigMap (`--config-map`, addon-operator's) and
//! ModuleConfig objects (Deckhouse's, [`super::module_config`]), and what a change of
//! either queues.
//!
//! A module (or `global`) with a taken ModuleConfig takes its config values and its
//! enabled flag from it alone: the ConfigMap's `<moduleKey>` and `<moduleKey>Enabled`
//! keys are ignored for it (its status says so), and a ModuleConfig without
//! `spec.enabled` leaves the flag to the `values.yaml` files and global hooks.
//! Deckhouse moved from the ConfigMap to ModuleConfigs and reads only those; Operon
//! reads both, the object winning, so that a cluster can move one module at a time.
//! The ConfigMap is still checked as a whole, as addon-operator checks it, sections a
//! ModuleConfig overrides included: they take over again when it is deleted.
//!
//! Each ModuleConfig is checked on its own: one that is refused changes nothing (its
//! module keeps what it had, from an earlier generation or from the ConfigMap) and says
//! why in its status ([`status`]). A change converges as a ConfigMap change does: a
//! change to `global`, to an enabled flag or to the section of a module with an
//! `enabled` program converges again, a change to another module's section runs that
//! module. Hooks may not write config values a ModuleConfig gives (Deckhouse forbids it
//! too): the object is the user's.

mod status;

use super::AddonError;
use super::config::ConfigValues;
use super::module_config::{Checked, SettingsRules, Target};
use super::operator::{Operator, QueueEvent, Task};
use super::values::Source;
use operon_cluster::{ClusterError, Event, EventStream, Identity, Resource, Selector};
use operon_data::api::{API_VERSION, ModuleConfigStatus};
use operon_data::model::WatchEvent;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Instant;

/// The kind of the objects.
pub(crate) const KIND: &str = "ModuleConfig";

/// The ModuleConfig objects the operator follows.
#[derive(Debug)]
pub(crate) struct ModuleConfigs {
    /// What they are checked against.
    rules: SettingsRules,
    /// The kind as the cluster serves it; `None` when its CRD is not installed.
    resource: Option<Resource>,
    /// By object name.
    followed: BTreeMap<String, Followed>,
    /// Each module's last ModuleRun: whether it succeeded, for `status.ready`.
    last_runs: BTreeMap<String, Result<(), String>>,
    /// When failed status writes are tried again.
    retry_writes_at: Option<Instant>,
}

/// One object.
#[derive(Debug)]
struct Followed {
    /// Its spec as last read: an event that changes only its status changes nothing.
    spec: Value,
    /// The last check of its spec.
    checked: Checked,
    /// What the modules use: the last check that was taken, of this spec or an
    /// earlier one.
    taken: Option<Checked>,
    /// The status to write, begun from the object's so that transition times carry
    /// over.
    status: ModuleConfigStatus,
    /// What the object is known to carry, so that an unchanged status is not written.
    written: Option<ModuleConfigStatus>,
}

impl ModuleConfigs {
    /// Objects checked by `rules`, none followed yet.
    pub(crate) fn new(rules: SettingsRules) -> Self {
        Self {
            rules,
            resource: None,
            followed: BTreeMap::new(),
            last_runs: BTreeMap::new(),
            retry_writes_at: None,
        }
    }

    /// `config_map` with each section a taken ModuleConfig sets replaced by it, and
    /// the flag of each module it sets replaced by its `spec.enabled` (or dropped).
    pub(crate) fn over(&self, config_map: &ConfigValues) -> ConfigValues {
        let mut config = config_map.clone();
        for (name, followed) in &self.followed {
            let Some(taken) = &followed.taken else {
                continue;
            };
            let Some(key) = taken.target.key() else {
                continue;
            };
            let settings = taken.settings.clone();
            if taken.target == Target::Global {
                config.global = settings.unwrap_or_else(|| Value::Object(Default::default()));
            } else {
                match settings {
                    Some(settings) => {
                        config.modules.insert(key.to_owned(), settings);
                    }
                    None => {
                        config.modules.remove(key);
                    }
                }
                config.enabled.remove(key);
                if let Some(flag) = taken.enabled {
                    config.enabled.insert(key.to_owned(), flag);
                }
            }
            config.governed.insert(key.to_owned(), name.clone());
        }
        config
    }

    /// When the next status write is due, if one failed.
    pub(crate) fn retry_writes_at(&self) -> Option<Instant> {
        self.retry_writes_at
    }

    /// Records how `module`'s ModuleRun ended.
    pub(crate) fn record_run(&mut self, module: &str, result: Result<(), String>) {
        self.last_runs.insert(module.to_owned(), result);
    }
}

impl Operator {
    /// Reads the ConfigMap through the writer's cluster.
    pub(super) async fn read_config_map(&self) -> Result<ConfigValues, AddonError> {
        let cm = &self.settings.config_map;
        let failed = |e: ClusterError| AddonError::ConfigMapAccess {
            configmap: cm.to_string(),
            key: String::new(),
            source: e.into(),
        };
        let cluster = self.writer.cluster();
        let resource = cluster
            .resolve(Some("v1"), "ConfigMap")
            .await
            .map_err(failed)?;
        let object = cluster
            .get(&resource, Some(&cm.namespace), &cm.name)
            .await
            .map_err(failed)?;
        ConfigValues::from_object(cm, object.as_ref())
    }

    /// [`Operator::read_module_configs`], then what the objects that changed since the
    /// last list need.
    pub(super) async fn relist_module_configs(
        &mut self,
    ) -> Result<Option<EventStream>, AddonError> {
        let (events, changed) = self.read_module_configs().await?;
        if !changed.is_empty() {
            self.reconfigure(Some(&changed.join(", ")));
        }
        Ok(events)
    }

    /// Lists the ModuleConfig objects and follows them; nothing when the cluster does
    /// not serve the kind (its CRD is not installed), said in the log. Returns the
    /// watch of later changes and the objects that changed since the last list.
    pub(super) async fn read_module_configs(
        &mut self,
    ) -> Result<(Option<EventStream>, Vec<String>), AddonError> {
        let cluster = self.writer.cluster().clone();
        let resource = match cluster.resolve(Some(API_VERSION), KIND).await {
            Ok(resource) => resource,
            Err(ClusterError::UnknownKind { .. }) => {
                if self.module_configs.resource.is_none() {
                    tracing::info!(
                        "the ModuleConfig CRD is not installed: config values come from the ConfigMap only"
                    );
                }
                return Ok((None, Vec::new()));
            }
            Err(e) => return Err(AddonError::ModuleConfigs(e)),
        };
        let (listed, events) = cluster
            .list_and_watch(&resource, &Selector::default())
            .await
            .map_err(AddonError::ModuleConfigs)?;
        self.module_configs.resource = Some(resource);
        let mut seen = Vec::new();
        let mut changed = Vec::new();
        for object in listed {
            let name = operon_cluster::namespace_and_name(&object).1.to_owned();
            if self.follow(&object) {
                changed.push(name.clone());
            }
            seen.push(name);
        }
        // Deleted between two lists (a new leader's, say).
        let gone: Vec<String> = self
            .module_configs
            .followed
            .keys()
            .filter(|name| !seen.contains(name))
            .cloned()
            .collect();
        for name in gone {
            self.module_configs.followed.remove(&name);
            changed.push(name);
        }
        Ok((Some(events), changed))
    }

    /// Checks every section of the ConfigMap's values, as addon-operator does before it
    /// takes any.
    pub(super) fn check_config_map(&self, config: &ConfigValues) -> Result<(), AddonError> {
        self.global.check_config(&config.global)?;
        for (name, section) in &self.modules {
            section
                .check_config(&config.section(&section.key))
                .map_err(|e| match e {
                    AddonError::InvalidValues {
                        problems, which, ..
                    } => AddonError::InvalidValues {
                        section: format!("module {name}"),
                        which,
                        problems,
                    },
                    other => other,
                })?;
        }
        Ok(())
    }

    /// Gives each section its config values from `config` (checked before: only a
    /// disabled module's settings can fail, and its section keeps what it had).
    pub(super) fn take_config(&mut self, config: ConfigValues) {
        let source = |key: &str| {
            if config.governed.contains_key(key) {
                Source::ModuleConfig
            } else {
                Source::ConfigMap
            }
        };
        if let Err(e) = self.global.set_config(config.global.clone()) {
            tracing::warn!(error = %e, "the global config values are not taken");
        }
        self.global.set_config_source(source("global"));
        for section in self.modules.values_mut() {
            if let Err(e) = section.set_config(config.section(&section.key)) {
                tracing::warn!(error = %e, "a module's config values are not taken");
            }
            section.set_config_source(source(&section.key));
        }
        self.config = config;
    }

    /// Takes a ConfigMap change (`None`: it was deleted) when every section is valid.
    pub fn config_changed(&mut self, object: Option<&Value>) {
        let config = ConfigValues::from_object(&self.settings.config_map, object)
            .and_then(|config| self.check_config_map(&config).map(|()| config));
        match config {
            Ok(config) if config == self.config_map => {}
            Ok(config) => {
                self.config_map = config;
                self.reconfigure(None);
            }
            Err(e) => {
                self.metrics.discover_errors.inc();
                (self.on_event)(&QueueEvent::ConfigRejected {
                    reason: e.to_string(),
                });
            }
        }
    }

    /// Takes a watch event of the ModuleConfigs.
    pub(super) fn take_module_config_event(&mut self, event: &Event) {
        let name = match event.deleted_final_state_unknown {
            // Only the identity is known: the object is one of those followed.
            Some(identity) => self
                .module_configs
                .followed
                .keys()
                .find(|name| Identity::of("", name) == identity)
                .cloned(),
            None => Some(
                operon_cluster::namespace_and_name(&event.object)
                    .1
                    .to_owned(),
            ),
        };
        if let Some(name) = name {
            self.module_config_changed(event.kind, &name, &event.object);
        }
    }

    /// Takes a change of ModuleConfig `name` (`object` after it; for `Deleted`, before
    /// it or only its type).
    pub fn module_config_changed(&mut self, kind: WatchEvent, name: &str, object: &Value) {
        if kind == WatchEvent::Deleted {
            if self.module_configs.followed.remove(name).is_some() {
                self.reconfigure(Some(name));
            }
            return;
        }
        if self.follow(object) {
            self.reconfigure(Some(name));
        }
    }

    /// Checks `object` and follows it; whether its spec changed.
    fn follow(&mut self, object: &Value) -> bool {
        let name = operon_cluster::namespace_and_name(object).1.to_owned();
        let spec = object.get("spec").cloned().unwrap_or(Value::Null);
        let current: Option<ModuleConfigStatus> = object
            .get("status")
            .and_then(|s| serde_json::from_value(s.clone()).ok());
        if let Some(followed) = self.module_configs.followed.get_mut(&name)
            && followed.spec == spec
        {
            // Only the status changed: the next write puts back what it should say.
            followed.written = current;
            return false;
        }
        let checked = self.module_configs.rules.check(object);
        if !checked.accepted() {
            let problems: Vec<String> = checked.problems.iter().map(ToString::to_string).collect();
            (self.on_event)(&QueueEvent::ModuleConfigRefused {
                name: name.clone(),
                reason: problems.join("; "),
            });
        }
        let previous = self.module_configs.followed.remove(&name);
        let taken = if checked.accepted() {
            Some(checked.clone())
        } else {
            previous.as_ref().and_then(|p| p.taken.clone())
        };
        let (status, written) = match previous {
            Some(previous) => (previous.status, previous.written),
            None => (current.clone().unwrap_or_default(), current),
        };
        self.module_configs.followed.insert(
            name,
            Followed {
                spec,
                checked,
                taken,
                status,
                written,
            },
        );
        true
    }

    /// Recomputes the config values from both sources and queues what their change
    /// needs; `module_config` names the ModuleConfig that changed (`None`: the
    /// ConfigMap).
    fn reconfigure(&mut self, module_config: Option<&str>) {
        let seen = Instant::now();
        let config = self.module_configs.over(&self.config_map);
        if config == self.config {
            return;
        }
        let old = std::mem::take(&mut self.config);
        self.take_config(config);
        let config = self.config.clone();
        let mut queued = Vec::new();
        // An `enabled` program reads the values: a change to its module's section may
        // enable or disable it, which only a discovery decides.
        let rediscover = self.layout.modules.iter().any(|m| {
            m.enabled_script.is_some()
                && old.section(&m.values_key) != config.section(&m.values_key)
        });
        if old.global != config.global || old.enabled != config.enabled || rediscover {
            for name in self.layout.modules.iter().map(|m| m.name.clone()) {
                self.changed_at.insert(name, seen);
            }
            let before = self.queue.len();
            self.queue_convergence();
            queued.extend(self.queue.iter().skip(before).cloned());
        } else {
            for module in self.layout.modules.clone() {
                if old.section(&module.values_key) != config.section(&module.values_key)
                    && self.enabled.contains(&module.name)
                {
                    let task = Task::ModuleRun {
                        module: module.name.clone(),
                    };
                    self.changed_at.insert(module.name.clone(), seen);
                    if self.enqueue(task.clone()) {
                        queued.push(task);
                    }
                }
            }
        }
        (self.on_event)(&match module_config {
            Some(name) => QueueEvent::ModuleConfigChanged {
                name: name.to_owned(),
                queued,
            },
            None => QueueEvent::ConfigChanged { queued },
        });
    }
}

#[cfg(test)]
mod tests;
