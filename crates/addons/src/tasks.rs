//! The bodies of the queue's tasks: global hook runs, discovery, ModuleRun and
//! ModuleDelete, and what a hook run changes (kubernetes patches, memory values, config
//! values written back to the ConfigMap, unless a ModuleConfig gives them).

use super::AddonError;
use super::apply::describe;
use super::bindings::{BindingPatch, lifecycle_snapshots};
use super::config::section_patch;
use super::enabled::{self, Decision};
use super::hooks::{self, AddonHook, HookOutcome, Lifecycle};
use super::operator::{Operator, QueueEvent, Task};
use super::requirements;
use super::status::ModuleState;
use super::values::{check_patch_paths, checksum, patched_config};
use operon_data::model::{
    CreateSpec, HookInput, ObjectRef, PatchOperation, PatchSpec, RunnerContext,
};
use operon_hooks::history::RunEntry;
use serde_json::{Value, json};
use std::time::Instant;

impl Operator {
    /// Runs one task, reporting it; a failed task is scheduled for its retry.
    pub(super) async fn run_task(&mut self, task: Task) -> Result<(), String> {
        (self.on_event)(&QueueEvent::Started {
            task: task.clone(),
            waiting: self.queued(),
        });
        self.publish(Some(&task));
        let started = Instant::now();
        let result = match &task {
            Task::GlobalHookRun { binding, hook } => self.global_hook_run(*binding, hook).await,
            Task::DiscoverModules => self.discover().await,
            Task::ModuleEnsureCrds { module } => self.ensure_crds(module).await,
            Task::ModuleRun { module } => {
                let result = self.module_run(module).await;
                let seconds = started.elapsed().as_secs_f64();
                self.metrics
                    .run_seconds
                    .with_label_values(&[module.as_str()])
                    .observe(seconds);
                if result.is_err() {
                    self.metrics
                        .run_errors
                        .with_label_values(&[module.as_str()])
                        .inc();
                }
                let outcome = match &result {
                    Ok(_) => Ok(()),
                    Err(e) => Err(e.to_string()),
                };
                self.module_configs.record_run(module, outcome);
                result
            }
            Task::ModulePurge { module } => self.module_purge(module).await,
            Task::ModuleDelete { module } => {
                let result = self.module_delete(module).await;
                if result.is_err() {
                    self.metrics
                        .delete_errors
                        .with_label_values(&[module.as_str()])
                        .inc();
                }
                result
            }
        };
        let elapsed = started.elapsed();
        self.refresh_shared();
        let result = match result {
            Ok(summary) => {
                self.failures.remove(&task);
                (self.on_event)(&QueueEvent::Finished {
                    task,
                    result: Ok(summary),
                    elapsed,
                    retry_in: None,
                });
                Ok(())
            }
            Err(e) => {
                let n = {
                    let n = self.failures.entry(task.clone()).or_insert(0);
                    *n += 1;
                    *n
                };
                let wait = self.backoff(n);
                if task.holds_the_queue() {
                    // The modules depend on it: it runs again first, after the delay.
                    self.queue.push_front(task.clone());
                    self.hold_until = Some(Instant::now() + wait);
                } else {
                    self.retries.push((Instant::now() + wait, task.clone()));
                }
                let message = e.to_string();
                (self.on_event)(&QueueEvent::Finished {
                    task,
                    result: Err(message.clone()),
                    elapsed,
                    retry_in: Some(wait),
                });
                Err(message)
            }
        };
        self.publish(None);
        self.write_module_config_statuses().await;
        result
    }

    async fn global_hook_run(
        &mut self,
        binding: Lifecycle,
        name: &str,
    ) -> Result<String, AddonError> {
        let Some(hook) = self.global_hooks.iter().find(|h| h.name == name).cloned() else {
            return Err(AddonError::Hook(format!("no global hook {name}")));
        };
        if binding == Lifecycle::BeforeAll {
            self.synchronize(None).await?;
        }
        let before = self.global_checksum()?;
        let mut global = self.global.compute()?.values;
        global["enabledModules"] = json!(self.enabled);
        let values = json!({"global": global});
        let config = json!({"global": self.global.config()});
        let outcome = self
            .run_lifecycle(&hook, None, binding, &values, &config)
            .await
            .inspect_err(|_| {
                self.metrics
                    .hook_errors
                    .with_label_values(&["global", name, binding.name()])
                    .inc();
            })?;
        self.apply_outcome(&hook, None, outcome).await?;
        let changed = self.global_checksum()? != before;
        if changed && binding == Lifecycle::AfterAll && !self.queue.contains(&Task::DiscoverModules)
        {
            self.queue_convergence();
            return Ok("global values changed: converging again".to_owned());
        }
        Ok(if changed {
            "global values changed"
        } else {
            "ok"
        }
        .to_owned())
    }

    async fn discover(&mut self) -> Result<String, AddonError> {
        self.synchronize(None).await?;
        let mut enabled: Vec<String> = Vec::new();
        let mut lines = Vec::new();
        let mut states = Vec::new();
        for module in self.layout.modules.clone() {
            let decision =
                match enabled::flag(&self.layout, &module, &self.dynamic_enabled, &self.config) {
                    None => Decision::NoFlag,
                    Some((false, source)) => Decision::DisabledBy(source),
                    Some((true, _)) => {
                        let unmet = self.unmet(&module, &enabled);
                        if unmet.is_empty() {
                            self.run_enabled_script(&module, &enabled).await?
                        } else {
                            Decision::Unmet(unmet)
                        }
                    }
                };
            self.metrics
                .enabled
                .with_label_values(&[module.name.as_str()])
                .set(i64::from(decision.enabled()));
            if decision.enabled() {
                enabled.push(module.name.clone());
            }
            let state = decision.describe(&module);
            lines.push(format!("{}: {state}", module.name));
            states.push(ModuleState {
                name: module.name.clone(),
                order: module.order,
                enabled: decision.enabled(),
                state,
                requires: module
                    .definition
                    .requirements
                    .modules
                    .keys()
                    .cloned()
                    .collect(),
                source: module.source(),
            });
        }
        for missing in &self.layout.unavailable {
            let state = format!("unavailable ({}: {})", missing.reason, missing.message);
            lines.push(format!("{}: {state}", missing.name));
            states.push(ModuleState {
                name: missing.name.clone(),
                order: None,
                enabled: false,
                state,
                requires: Vec::new(),
                source: missing.reference.clone(),
            });
        }
        self.states = states;
        let mut next = Vec::new();
        // A module source not pulled is not a module gone: its name is not known
        // until its module.yaml is read, so while any is missing nothing is purged
        // (a registry down at a restart must not delete what a module deployed).
        for module in self.writer.released_modules().await? {
            if self.layout.module(&module).is_some() {
                continue;
            }
            if self.layout.unavailable.is_empty() {
                next.push(Task::ModulePurge { module });
            } else {
                tracing::warn!(module = %module, "a release without a module is kept while a module source is unavailable");
            }
        }
        for module in self.layout.modules.iter().rev() {
            if !enabled.contains(&module.name)
                && (self.enabled.contains(&module.name)
                    || self.writer.release(&module.name).await?.is_some())
            {
                next.push(Task::ModuleDelete {
                    module: module.name.clone(),
                });
            }
        }
        for name in &enabled {
            let has_crds = self.layout.module(name).is_some_and(|m| !m.crds.is_empty());
            if has_crds && !self.crds_ensured.contains(name) {
                next.push(Task::ModuleEnsureCrds {
                    module: name.clone(),
                });
            }
            next.push(Task::ModuleRun {
                module: name.clone(),
            });
        }
        for hook in hooks::with_binding(&self.global_hooks, Lifecycle::AfterAll) {
            next.push(Task::GlobalHookRun {
                binding: Lifecycle::AfterAll,
                hook: hook.name.clone(),
            });
        }
        self.started.retain(|m| enabled.contains(m));
        self.enabled = enabled;
        // What discovery decides runs before anything queued since.
        self.queue.retain(|t| !next.contains(t));
        for task in next.into_iter().rev() {
            self.retries.retain(|(_, t)| *t != task);
            self.queue.push_front(task);
        }
        Ok(lines.join("; "))
    }

    /// The decision of `module`'s `enabled` program (enabled when it has none), with
    /// `enabled` as `global.enabledModules`.
    async fn run_enabled_script(
        &self,
        module: &super::layout::ModuleDir,
        enabled: &[String],
    ) -> Result<Decision, AddonError> {
        let section = self.section(&module.name)?;
        let mut global = self.global.compute()?.values;
        global["enabledModules"] = json!(enabled);
        let values = json!({"global": global, (section.key.clone()): section.compute()?.values});
        let config = self.config_document(&module.name)?;
        let decided = enabled::run_script(
            &self.sandbox,
            module,
            &values,
            &config,
            self.settings.hook_timeout,
        )
        .await?;
        Ok(match decided {
            None | Some((true, _)) => Decision::Enabled,
            Some((false, reason)) => Decision::DisabledByScript(reason),
        })
    }

    /// Why `module`'s requirements are not met, given the modules enabled before it.
    fn unmet(&self, module: &super::layout::ModuleDir, enabled: &[String]) -> Vec<String> {
        requirements::unmet(module, &self.platform, enabled, |name| {
            self.layout
                .module(name)
                .map(|m| m.definition.version.clone())
        })
    }

    async fn module_run(&mut self, name: &str) -> Result<String, AddonError> {
        if !self.enabled.iter().any(|m| m == name) {
            return Ok("skipped: the module is disabled".to_owned());
        }
        let module = self
            .layout
            .module(name)
            .cloned()
            .ok_or_else(|| AddonError::UnknownModule(name.to_owned()))?;
        if !module.crds.is_empty() && !self.crds_ensured.contains(name) {
            // Its ModuleEnsureCRDs failed (or was dropped): the chart may need them.
            self.ensure_crds(name).await?;
        }
        if !self.started.contains(name) {
            self.module_hooks_run(name, Lifecycle::OnStartup).await?;
            self.started.insert(name.to_owned());
        }
        self.synchronize(Some(name)).await?;
        self.module_hooks_run(name, Lifecycle::BeforeHelm).await?;
        self.section(name)?.check_for_helm()?;
        let values = self.values_document(name)?;
        let rendered_with = checksum(&values);
        let objects = self.settings.renderer.render(&module, &values).await?;
        if self.dry_run {
            let lines = self.writer.diff(name, objects).await?;
            return Ok(format!("dry run: {}", lines.join("; ")));
        }
        let report = self.writer.apply(name, objects).await?;
        self.module_hooks_run(name, Lifecycle::AfterHelm).await?;
        if let Some(seen) = self.changed_at.remove(name) {
            (self.on_event)(&QueueEvent::ConvergedAfterChange {
                module: name.to_owned(),
                latency: seen.elapsed(),
            });
        }
        let mut summary = if report.unchanged {
            "objects unchanged".to_owned()
        } else {
            let n = report.applied.len();
            let mut s = format!("applied {n} object{}", if n == 1 { "" } else { "s" });
            if !report.deleted.is_empty() {
                let deleted: Vec<String> = report.deleted.iter().map(describe).collect();
                s.push_str(&format!(", deleted {}", deleted.join(", ")));
            }
            s
        };
        if checksum(&self.values_document(name)?) != rendered_with {
            self.enqueue(Task::ModuleRun {
                module: name.to_owned(),
            });
            summary.push_str("; afterHelm changed the values: running again");
        }
        Ok(summary)
    }

    async fn ensure_crds(&mut self, name: &str) -> Result<String, AddonError> {
        let module = self
            .layout
            .module(name)
            .cloned()
            .ok_or_else(|| AddonError::UnknownModule(name.to_owned()))?;
        if self.dry_run {
            return Ok(format!(
                "dry run: would apply {} CRD file(s)",
                module.crds.len()
            ));
        }
        let names = self.writer.ensure_crds(&module).await?;
        self.crds_ensured.insert(name.to_owned());
        Ok(format!("applied {}", names.join(", ")))
    }

    async fn module_purge(&mut self, name: &str) -> Result<String, AddonError> {
        let deleted = if self.dry_run {
            self.writer.release(name).await?.unwrap_or_default().objects
        } else {
            self.writer.uninstall(name).await?
        };
        let deleted: Vec<String> = deleted.iter().map(describe).collect();
        let verb = if self.dry_run {
            "dry run: would delete"
        } else {
            "deleted"
        };
        Ok(format!("the module is gone; {verb} {}", deleted.join(", ")))
    }

    async fn module_delete(&mut self, name: &str) -> Result<String, AddonError> {
        if self.enabled.iter().any(|m| m == name) {
            return Ok("skipped: the module is enabled again".to_owned());
        }
        if self.dry_run {
            let release = self.writer.release(name).await?.unwrap_or_default();
            let lines: Vec<String> = release
                .objects
                .iter()
                .map(|o| format!("- delete {}", describe(o)))
                .collect();
            return Ok(format!("dry run: {}", lines.join("; ")));
        }
        let has_release = self.writer.release(name).await?.is_some();
        if has_release {
            self.module_hooks_run(name, Lifecycle::BeforeDeleteHelm)
                .await?;
        }
        let deleted = self.writer.uninstall(name).await?;
        self.module_hooks_run(name, Lifecycle::AfterDeleteHelm)
            .await?;
        // Its hooks read their snapshots: its bindings may stop now.
        self.engines.remove(name);
        self.started.remove(name);
        self.crds_ensured.remove(name);
        let deleted: Vec<String> = deleted.iter().map(describe).collect();
        Ok(if deleted.is_empty() {
            "nothing to delete".to_owned()
        } else {
            format!("deleted {}", deleted.join(", "))
        })
    }

    async fn module_hooks_run(
        &mut self,
        module: &str,
        binding: Lifecycle,
    ) -> Result<(), AddonError> {
        let hooks: Vec<AddonHook> = self
            .module_hooks
            .get(module)
            .map(|h| {
                hooks::with_binding(h, binding)
                    .into_iter()
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for hook in hooks {
            let values = self.values_document(module)?;
            let config = self.config_document(module)?;
            let outcome = self
                .run_lifecycle(&hook, Some(module), binding, &values, &config)
                .await
                .inspect_err(|_| {
                    self.metrics
                        .hook_errors
                        .with_label_values(&[module, hook.name.as_str(), binding.name()])
                        .inc();
                })?;
            self.apply_outcome(&hook, Some(module), outcome).await?;
        }
        Ok(())
    }

    /// Runs `hook` for a lifecycle `binding` of its owner (`module`, or `None` for a
    /// global hook). Every binding but `onStartup` carries the snapshots of the hook's
    /// kubernetes bindings, as addon-operator gives them to `beforeAll`, `afterAll`,
    /// `beforeHelm`, `afterHelm`, `beforeDeleteHelm` and `afterDeleteHelm`.
    async fn run_lifecycle(
        &self,
        hook: &AddonHook,
        module: Option<&str>,
        binding: Lifecycle,
        values: &Value,
        config: &Value,
    ) -> Result<HookOutcome, AddonError> {
        let snapshots = if binding == Lifecycle::OnStartup {
            Vec::new()
        } else {
            lifecycle_snapshots(self.engines.get(module.unwrap_or("global")), hook)
        };
        let timeout = self.settings.hook_timeout;
        let input = HookInput {
            context: RunnerContext::new(format!("{}/{}", hook.name, binding.name()), timeout),
            binding_contexts: vec![operon_hooks::context::lifecycle(binding.name(), snapshots)],
        };
        let (run, patches) = hook.run_lifecycle(&input, values, config, timeout).await;
        // No engine runs lifecycle hooks: their runs are kept beside the engines'.
        self.shown.record(RunEntry::of_run(
            &hook.name,
            "main",
            &input.binding_contexts,
            &run,
            patches.as_ref().err().map(ToString::to_string),
        ));
        if let Err(e) = &run.outcome {
            return Err(AddonError::HookRun {
                hook: hook.name.clone(),
                binding: binding.name(),
                source: e.clone(),
            });
        }
        let (values_patch, config_patch) = patches?;
        Ok(HookOutcome {
            run,
            values_patch,
            config_patch,
        })
    }

    /// Applies what a successful hook run submitted: its kubernetes patches in order,
    /// then its memory values patches, then its config values patches (written to the
    /// ConfigMap). `module` is `None` for a global hook.
    async fn apply_outcome(
        &mut self,
        hook: &AddonHook,
        module: Option<&str>,
        outcome: HookOutcome,
    ) -> Result<(), AddonError> {
        if !self.dry_run {
            self.hook_metrics
                .hooks
                .apply(&hook.name, &outcome.run.metrics)
                .map_err(|source| AddonError::HookMetrics {
                    hook: hook.name.clone(),
                    source,
                })?;
        }
        for operation in outcome.run.patches.iter().filter(|_| !self.dry_run) {
            self.writer
                .cluster()
                .apply(operation)
                .await
                .map_err(|source| AddonError::HookPatch {
                    hook: hook.name.clone(),
                    operation: operation.name(),
                    source: source.into(),
                })?;
        }
        self.apply_values_patches(
            &hook.name,
            module,
            outcome.values_patch,
            outcome.config_patch,
        )
        .await
    }

    /// Takes the values patches of a binding run: applied as a lifecycle hook's are;
    /// a module whose values changed runs again, global values that changed converge
    /// again.
    pub(super) async fn take_binding_patch(&mut self, patch: BindingPatch) {
        let module = patch.module.as_deref();
        let before_global = self.global_checksum().ok();
        let before = module.and_then(|m| self.values_document(m).ok().map(|v| checksum(&v)));
        if let Err(e) = self
            .apply_values_patches(&patch.hook, module, patch.values_patch, patch.config_patch)
            .await
        {
            (self.on_event)(&QueueEvent::PatchRejected {
                hook: patch.hook,
                reason: e.to_string(),
            });
            return;
        }
        self.refresh_shared();
        let after_global = self.global_checksum().ok();
        let mut queued = Vec::new();
        if after_global != before_global && !self.queue.contains(&Task::DiscoverModules) {
            let from = self.queue.len();
            self.queue_convergence();
            queued.extend(self.queue.iter().skip(from).cloned());
        } else if let Some(m) = module
            && self.enabled.iter().any(|e| e == m)
            && before != self.values_document(m).ok().map(|v| checksum(&v))
        {
            let task = Task::ModuleRun {
                module: m.to_owned(),
            };
            if self.enqueue(task.clone()) {
                queued.push(task);
            }
        }
        if !queued.is_empty() {
            (self.on_event)(&QueueEvent::ValuesChanged {
                hook: patch.hook,
                queued,
            });
        }
    }

    pub(super) async fn apply_values_patches(
        &mut self,
        hook: &str,
        module: Option<&str>,
        values_patch: Vec<json_patch::PatchOperation>,
        config_patch: Vec<json_patch::PatchOperation>,
    ) -> Result<(), AddonError> {
        let key = match module {
            Some(m) => self.section(m)?.key.clone(),
            None => "global".to_owned(),
        };
        if !config_patch.is_empty()
            && let Some(name) = self.config.governed.get(&key)
        {
            // Checked first: a refused run changes no values at all.
            return Err(AddonError::Patch {
                section: module.map_or_else(|| "global".to_owned(), |m| format!("module {m}")),
                reason: format!(
                    "hook {hook} patched config values, but ModuleConfig {name} gives them \
                     and hooks do not write a ModuleConfig (Deckhouse forbids it too): \
                     patch memory values ($VALUES_JSON_PATCH_PATH) instead"
                ),
            });
        }
        let mut values_patch = values_patch;
        if module.is_none() {
            // Global hooks may also set modules' enabled flags (addon-operator's
            // DynamicallyEnabled): `/<moduleKey>Enabled`, a boolean, or removed.
            let (flags, rest): (Vec<_>, Vec<_>) = values_patch
                .into_iter()
                .partition(|op| enabled_flag_key(op).is_some());
            values_patch = rest;
            for op in flags {
                let key = enabled_flag_key(&op).unwrap_or_default();
                match &op {
                    json_patch::PatchOperation::Remove(_) => {
                        self.dynamic_enabled.remove(&key);
                    }
                    json_patch::PatchOperation::Add(json_patch::AddOperation { value, .. })
                    | json_patch::PatchOperation::Replace(json_patch::ReplaceOperation {
                        value,
                        ..
                    }) => {
                        let flag = value.as_bool().ok_or_else(|| AddonError::Patch {
                            section: "global".to_owned(),
                            reason: format!(
                                "hook {hook}: {key}Enabled must be true or false, not {value}"
                            ),
                        })?;
                        self.dynamic_enabled.insert(key, flag);
                    }
                    _ => {
                        return Err(AddonError::Patch {
                            section: "global".to_owned(),
                            reason: format!(
                                "hook {hook}: {key}Enabled takes add, replace or remove"
                            ),
                        });
                    }
                }
            }
        }
        let section = match module {
            Some(m) => self
                .modules
                .get_mut(m)
                .ok_or_else(|| AddonError::UnknownModule(m.to_owned()))?,
            None => &mut self.global,
        };
        if !values_patch.is_empty() {
            let ops = check_patch_paths(values_patch, &key, hook)?;
            section.add_patches(ops)?;
        }
        if !config_patch.is_empty() {
            let ops = check_patch_paths(config_patch, &key, hook)?;
            let config = patched_config(section.config(), &key, &ops).map_err(|reason| {
                AddonError::Patch {
                    section: section.label.clone(),
                    reason,
                }
            })?;
            section.set_config(config.clone())?;
            // The ConfigMap will hold it: its watch event is then no change.
            for values in [&mut self.config, &mut self.config_map] {
                if key == "global" {
                    values.global = config.clone();
                } else {
                    values.modules.insert(key.clone(), config.clone());
                }
            }
            if !self.dry_run {
                self.write_config_section(&key, &config).await?;
            }
        }
        Ok(())
    }

    /// Writes one section of the ConfigMap (creating the ConfigMap if needed).
    async fn write_config_section(&self, key: &str, values: &Value) -> Result<(), AddonError> {
        let cm = &self.settings.config_map;
        let failed = |reason: String| AddonError::ConfigMap {
            configmap: cm.to_string(),
            key: key.to_owned(),
            reason,
        };
        let unavailable = |e: operon_cluster::ClusterError| AddonError::ConfigMapAccess {
            configmap: cm.to_string(),
            key: key.to_owned(),
            source: e.into(),
        };
        let patch = section_patch(key, values).map_err(failed)?;
        let cluster = self.writer.cluster();
        let resource = cluster
            .resolve(Some("v1"), "ConfigMap")
            .await
            .map_err(unavailable)?;
        let exists = cluster
            .get(&resource, Some(&cm.namespace), &cm.name)
            .await
            .map_err(unavailable)?
            .is_some();
        let operation = if exists {
            PatchOperation::MergePatch(PatchSpec {
                target: ObjectRef {
                    api_version: Some("v1".to_owned()),
                    kind: "ConfigMap".to_owned(),
                    namespace: Some(cm.namespace.clone()),
                    name: cm.name.clone(),
                },
                patch: patch.to_string(),
                subresource: None,
                ignore_missing_object: false,
            })
        } else {
            let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": cm.name, "namespace": cm.namespace}});
            object["data"] = patch["data"].clone();
            PatchOperation::CreateOrUpdate(CreateSpec {
                object: object.to_string(),
                subresource: None,
            })
        };
        cluster.apply(&operation).await.map_err(unavailable)
    }
}

/// The module key of a top-level `/<moduleKey>Enabled` path.
fn enabled_flag_key(op: &json_patch::PatchOperation) -> Option<String> {
    let path = match op {
        json_patch::PatchOperation::Add(o) => o.path.to_string(),
        json_patch::PatchOperation::Remove(o) => o.path.to_string(),
        json_patch::PatchOperation::Replace(o) => o.path.to_string(),
        _ => return None,
    };
    let key = path.strip_prefix('/')?.strip_suffix("Enabled")?;
    (!key.is_empty() && !key.contains('/')).then(|| key.to_owned())
}
