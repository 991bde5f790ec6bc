//! A ModuleConfig's status, as the operator sees its object: whether the spec was
//! taken (`SettingsAccepted`), whether the module runs (`enabled`, as the last
//! discovery decided it) and is ready (`Ready`: its last ModuleRun since the change
//! succeeded and none waits), the settings version in use, and one line saying what is
//! wrong or the module's state. Written through the status subresource as a JSON merge
//! patch (field manager `operon`, fields it no longer sets removed), only when it
//! changed, and never in a dry run; the operator runs on the leader only, so only the
//! leader writes it.

use super::{Followed, KIND};
use crate::module_config::Target;
use crate::operator::{Operator, Task};
use operon_data::api::{API_VERSION, Condition, ConditionStatus, ModuleConfigStatus};
use operon_data::conventions::conditions::set_condition;
use operon_data::model::{ObjectRef, PatchOperation, PatchSpec};
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long a failed status write waits before it is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// The module's side of a status: whether it runs, whether it is ready, the
/// condition's reason and a sentence.
struct Running {
    enabled: Option<bool>,
    ready: bool,
    reason: &'static str,
    text: String,
}

impl Operator {
    /// Recomputes the status of every ModuleConfig followed and writes those that
    /// changed.
    pub(crate) async fn write_module_config_statuses(&mut self) {
        if self.module_configs.resource.is_none() || self.dry_run {
            return;
        }
        let names: Vec<String> = self.module_configs.followed.keys().cloned().collect();
        let mut failed = false;
        for name in names {
            let Some(followed) = self.module_configs.followed.get(&name) else {
                continue;
            };
            let desired = self.desired_status(followed);
            let unchanged = followed.written.as_ref() == Some(&desired);
            if let Some(followed) = self.module_configs.followed.get_mut(&name) {
                followed.status = desired.clone();
            }
            if unchanged {
                continue;
            }
            match self.write_status(&name, &desired).await {
                Ok(()) => {
                    if let Some(followed) = self.module_configs.followed.get_mut(&name) {
                        followed.written = Some(desired);
                    }
                }
                Err(e) => {
                    tracing::warn!(moduleconfig = %name, error = %e, "cannot write a ModuleConfig's status");
                    failed = true;
                }
            }
        }
        self.module_configs.retry_writes_at = failed.then(|| Instant::now() + RETRY);
    }

    async fn write_status(
        &self,
        name: &str,
        status: &ModuleConfigStatus,
    ) -> Result<(), operon_cluster::ClusterError> {
        let mut fields = serde_json::to_value(status).unwrap_or_default();
        // A merge patch keeps what it does not name: a field now unset is removed.
        if let Value::Object(map) = &mut fields {
            for field in [
                "observedGeneration",
                "enabled",
                "ready",
                "version",
                "message",
                "conditions",
            ] {
                map.entry(field).or_insert(Value::Null);
            }
        }
        let operation = PatchOperation::MergePatch(PatchSpec {
            target: ObjectRef {
                api_version: Some(API_VERSION.to_owned()),
                kind: KIND.to_owned(),
                namespace: None,
                name: name.to_owned(),
            },
            patch: serde_json::json!({ "status": fields }).to_string(),
            subresource: Some("status".to_owned()),
            // Deleted meanwhile: its watch says so next.
            ignore_missing_object: true,
        });
        self.writer.cluster().apply(&operation).await
    }

    /// The status `followed` should carry now.
    fn desired_status(&self, followed: &Followed) -> ModuleConfigStatus {
        let checked = &followed.checked;
        let mut status = followed.status.clone();
        status.observed_generation = checked.generation;
        let taken = followed.taken.as_ref();
        status.version = taken
            .filter(|t| t.target != Target::Unknown)
            .map(|t| i64::from(t.version));
        let mut lines: Vec<String> = Vec::new();
        let accepted = if !checked.accepted() {
            let problems: Vec<String> = checked
                .problems
                .iter()
                .map(|p| format!("{}: {}", p.field, p.reason))
                .collect();
            let keeps = if taken.is_some() {
                "the module keeps the settings of an earlier generation"
            } else {
                "the module keeps what the ConfigMap gives it"
            };
            lines.push(format!("Refused: {}; {keeps}", problems.join("; ")));
            Condition::new(
                "SettingsAccepted",
                ConditionStatus::False,
                "Invalid",
                lines[0].clone(),
            )
        } else if checked.target == Target::Unknown {
            let warning = checked.warnings.join("; ");
            lines.push(format!("Ignored: {warning}"));
            Condition::new(
                "SettingsAccepted",
                ConditionStatus::False,
                "ModuleNotFound",
                warning,
            )
        } else {
            let note = if checked.warnings.is_empty() {
                "the settings are in use".to_owned()
            } else {
                checked.warnings.join("; ")
            };
            Condition::new("SettingsAccepted", ConditionStatus::True, "Accepted", note)
        };
        set_condition(&mut status.conditions, accepted);
        match &checked.target {
            Target::Module { name, .. } => {
                let state = self.module_state(name);
                status.enabled = state.enabled;
                status.ready = Some(state.ready);
                let condition = if state.ready {
                    ConditionStatus::True
                } else {
                    ConditionStatus::False
                };
                set_condition(
                    &mut status.conditions,
                    Condition::new("Ready", condition, state.reason, state.text.clone()),
                );
                if checked.accepted() {
                    lines.push(state.text);
                }
            }
            Target::Global => {
                status.enabled = None;
                status.ready = None;
                if checked.accepted() {
                    lines.push("the global settings are in use".to_owned());
                }
            }
            Target::Unknown => {
                status.enabled = None;
                status.ready = None;
            }
        }
        if checked.accepted() && checked.target != Target::Unknown {
            lines.extend(checked.warnings.iter().cloned());
        }
        if let Some(ignored) = taken.and_then(|t| self.config_map_ignored(&t.target)) {
            lines.push(ignored);
        }
        status.message = capitalized(&lines.join("; "));
        status
    }

    /// Whether `module` runs and is ready, from the last discovery, the queue and its
    /// last ModuleRun.
    fn module_state(&self, module: &str) -> Running {
        let Some(discovered) = self.states.iter().find(|s| s.name == module) else {
            return Running {
                enabled: None,
                ready: false,
                reason: "Discovering",
                text: "waiting for the first discovery".to_owned(),
            };
        };
        if !discovered.enabled {
            return Running {
                enabled: Some(false),
                ready: false,
                reason: "Disabled",
                text: discovered.state.clone(),
            };
        }
        let run = Task::ModuleRun {
            module: module.to_owned(),
        };
        let last = self.module_configs.last_runs.get(module);
        let waiting = self.queue.contains(&run) || self.queue.contains(&Task::DiscoverModules);
        // A failed run waiting for its retry is not queued: it shows as failed.
        let (ready, reason, text) = match last {
            _ if waiting => (
                false,
                "Converging",
                "converging: its ModuleRun is queued".to_owned(),
            ),
            Some(Err(e)) => (false, "RunFailed", format!("its ModuleRun failed: {e}")),
            Some(Ok(())) => (true, "Converged", "enabled and ready".to_owned()),
            None => (
                false,
                "Converging",
                "converging: its ModuleRun is queued".to_owned(),
            ),
        };
        Running {
            enabled: Some(true),
            ready,
            reason,
            text,
        }
    }

    /// What the ConfigMap says about `target` that a ModuleConfig overrides, if
    /// anything.
    fn config_map_ignored(&self, target: &Target) -> Option<String> {
        let keys: Vec<String> = match target {
            Target::Global => (self
                .config_map
                .global
                .as_object()
                .is_some_and(|g| !g.is_empty()))
            .then(|| "global".to_owned())
            .into_iter()
            .collect(),
            Target::Module { key, .. } => [
                self.config_map
                    .modules
                    .contains_key(key)
                    .then(|| key.clone()),
                self.config_map
                    .enabled
                    .contains_key(key)
                    .then(|| format!("{key}Enabled")),
            ]
            .into_iter()
            .flatten()
            .collect(),
            Target::Unknown => Vec::new(),
        };
        let (noun, verb) = if keys.len() == 1 {
            ("key", "is")
        } else {
            ("keys", "are")
        };
        (!keys.is_empty()).then(|| {
            format!(
                "the ConfigMap's {noun} {} {verb} ignored: this ModuleConfig wins",
                keys.join(" and ")
            )
        })
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
