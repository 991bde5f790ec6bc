//! What the engine holds, for the debug endpoint (`operon debug queue list`, `hook
//! list`, `hook snapshot`) and the readiness probe: queues with their tasks, hooks with
//! their bindings, and the objects each kubernetes binding holds.

use super::{Engine, MAIN_QUEUE, TaskKind};
use operon_data::model::{LogLevel, ObjectAndFilter};
use serde::Serialize;

/// One queue.
#[derive(Debug, Clone, Serialize)]
pub struct QueueInfo {
    /// Its name.
    pub name: String,
    /// Whether a run of its head is in progress.
    pub(crate) running: bool,
    /// Consecutive failures of the head task.
    pub(crate) failures: u32,
    /// The waiting tasks, head first.
    pub(crate) tasks: Vec<TaskInfo>,
}

/// One queued task.
#[derive(Debug, Clone, Serialize)]
pub struct TaskInfo {
    /// The hook it runs.
    pub hook: String,
    /// What kind of run.
    pub kind: TaskKind,
    /// The bindings of its contexts (a group's name for grouped contexts).
    pub bindings: Vec<String>,
    /// How long it has waited, in milliseconds.
    pub(crate) waiting_ms: u64,
}

/// One hook.
#[derive(Debug, Clone, Serialize)]
pub struct HookInfo {
    /// Its name.
    pub name: String,
    /// Its bindings.
    pub bindings: Vec<BindingInfo>,
    /// Its own log level (`operon debug hook log-level`); none: every record at its
    /// level.
    pub log_level: Option<&'static str>,
}

/// One binding of a hook.
#[derive(Debug, Clone, Serialize)]
pub struct BindingInfo {
    /// Its name.
    pub name: String,
    /// `onStartup`, `schedule`, `kubernetes`, `kubernetesValidating` or
    /// `kubernetesCustomResourceConversion`.
    pub(crate) binding_type: &'static str,
    /// The queue its runs go to.
    pub queue: String,
    /// For a kubernetes binding: the objects it holds.
    pub objects: Option<usize>,
    /// For a kubernetes binding: whether its Synchronization is done.
    pub synchronized: Option<bool>,
}

/// The objects a kubernetes binding holds, as the hook sees them.
#[derive(Debug, Clone, Serialize)]
pub struct BindingSnapshot {
    /// The binding.
    pub binding: String,
    /// Its objects, by namespace then name.
    pub objects: Vec<ObjectAndFilter>,
}

impl Engine {
    /// Whether every kubernetes binding finished its Synchronization (the readiness of
    /// `operon serve`).
    pub fn synchronized(&self) -> bool {
        let bindings: usize = self.hooks.iter().map(|h| h.config.kubernetes.len()).sum();
        self.lock().synced.len() >= bindings
    }

    /// Every queue, `main` first, then by name.
    pub fn queues(&self) -> Vec<QueueInfo> {
        let state = self.lock();
        let mut queues: Vec<QueueInfo> = state
            .queues
            .iter()
            .map(|(name, queue)| QueueInfo {
                name: name.clone(),
                running: state.busy.contains(name),
                failures: queue.failures(),
                tasks: queue
                    .tasks()
                    .map(|task| TaskInfo {
                        hook: self.hooks[task.hook].hook.name().to_owned(),
                        kind: task.kind,
                        bindings: if task.contexts.is_empty() {
                            task.running.clone()
                        } else {
                            task.contexts.iter().map(|c| c.binding.clone()).collect()
                        },
                        waiting_ms: u64::try_from(task.queued_at.elapsed().as_millis())
                            .unwrap_or(u64::MAX),
                    })
                    .collect(),
            })
            .collect();
        queues.sort_by_key(|q| (q.name != MAIN_QUEUE, q.name.clone()));
        queues
    }

    /// Every hook with its bindings.
    pub fn hook_infos(&self) -> Vec<HookInfo> {
        let state = self.lock();
        self.hooks
            .iter()
            .enumerate()
            .map(|(h, loaded)| {
                let config = &loaded.config;
                let mut bindings = Vec::new();
                if config.on_startup.is_some() {
                    bindings.push(BindingInfo {
                        name: "onStartup".to_owned(),
                        binding_type: "onStartup",
                        queue: MAIN_QUEUE.to_owned(),
                        objects: None,
                        synchronized: None,
                    });
                }
                for schedule in &config.schedules {
                    bindings.push(BindingInfo {
                        name: schedule.name.clone(),
                        binding_type: "schedule",
                        queue: schedule.queue.clone(),
                        objects: None,
                        synchronized: None,
                    });
                }
                for (b, binding) in config.kubernetes.iter().enumerate() {
                    bindings.push(BindingInfo {
                        name: binding.name.clone(),
                        binding_type: "kubernetes",
                        queue: binding.queue.clone(),
                        objects: Some(state.snapshots.get(&(h, b)).map_or(0, |s| s.len())),
                        synchronized: Some(state.synced.contains(&(h, b))),
                    });
                }
                for binding in config.validating.iter().chain(&config.mutating) {
                    bindings.push(BindingInfo {
                        name: binding.name.clone(),
                        binding_type: binding.id.kind.section(),
                        queue: MAIN_QUEUE.to_owned(),
                        objects: None,
                        synchronized: None,
                    });
                }
                for binding in &config.conversions {
                    bindings.push(BindingInfo {
                        name: binding.name.clone(),
                        binding_type: "kubernetesCustomResourceConversion",
                        queue: MAIN_QUEUE.to_owned(),
                        objects: None,
                        synchronized: None,
                    });
                }
                HookInfo {
                    name: loaded.hook.name().to_owned(),
                    bindings,
                    log_level: self.log_level(h).map(LogLevel::as_str),
                }
            })
            .collect()
    }

    /// The snapshots of a hook's kubernetes bindings; `None` for an unknown hook.
    pub fn hook_snapshot(&self, hook: &str) -> Option<Vec<BindingSnapshot>> {
        let h = self.hooks.iter().position(|l| l.hook.name() == hook)?;
        let state = self.lock();
        Some(
            self.hooks[h]
                .config
                .kubernetes
                .iter()
                .enumerate()
                .map(|(b, binding)| BindingSnapshot {
                    binding: binding.name.clone(),
                    objects: state
                        .snapshots
                        .get(&(h, b))
                        .map(|objects| objects.items().collect())
                        .unwrap_or_default(),
                })
                .collect(),
        )
    }
}
