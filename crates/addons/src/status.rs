//! What the task queue looks like from outside while it runs: the task in progress,
//! the tasks waiting, failed module tasks waiting for their retry and a queue held by
//! a failed global task; published by the operator after every change, for `operon
//! serve`'s debug endpoint (`operon modules queue`, addon-operator's `queue list`)
//! and its readiness: ready once the startup convergence is done, addon-operator's
//! `STARTUP_CONVERGE_DONE` ([`QueueView::startup_converged`]).

use super::operator::Task;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// A handle on the queue's published state; clones share it.
#[derive(Debug, Clone, Default)]
pub struct QueueView(Arc<Mutex<Published>>);

#[derive(Debug, Default)]
pub(super) struct Published {
    pub(super) running: Option<(Task, Instant)>,
    pub(super) waiting: Vec<Task>,
    pub(super) retries: Vec<(Task, Instant, u32)>,
    pub(super) held_until: Option<Instant>,
    pub(super) enabled: Vec<String>,
    pub(super) states: Vec<ModuleState>,
    pub(super) started: bool,
    /// Set once the queue of this run was first empty with nothing failed: every task
    /// of the startup convergence succeeded. Stays set until a new operator publishes.
    pub(super) converged: bool,
}

/// The queue at one moment, as the debug endpoint answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// Whether this replica runs the queue (it leads); a standby's queue is empty.
    pub(crate) running_queue: bool,
    /// The task in progress, if any.
    pub(crate) current: Option<CurrentTask>,
    /// The tasks waiting, head first.
    pub(crate) waiting: Vec<String>,
    /// Failed module tasks and when they run again.
    pub(crate) retries: Vec<RetryingTask>,
    /// When a failed global task holds the queue: milliseconds until it runs again.
    pub(crate) held_for_ms: Option<u64>,
    /// The modules the last discovery enabled, in order.
    pub(crate) enabled_modules: Vec<String>,
    /// Every module's state as the last discovery decided it, with the reason a
    /// module is disabled.
    #[serde(default)]
    pub(crate) modules: Vec<ModuleState>,
    /// Whether the startup convergence is done (global `onStartup` hooks, the first
    /// convergence and what it queued, all succeeded): `operon serve`'s readiness.
    #[serde(default)]
    pub(crate) startup_converged: bool,
}

/// One module as discovery decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleState {
    /// The module.
    pub name: String,
    /// Its order (number prefix or `module.yaml` weight); none for unnumbered ones.
    pub order: Option<u32>,
    /// Whether it runs.
    pub enabled: bool,
    /// `enabled`, or `disabled` with the reason (`disabled by its requirements (needs
    /// module cert-manager, which is disabled)`), as the DiscoverModules summary says.
    pub state: String,
    /// The modules its `module.yaml` requires.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// Where it came from: its directory, or its `oci://` reference.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}

/// The task in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CurrentTask {
    /// The task (`ModuleRun:echo-server`).
    pub(crate) task: String,
    /// How long it has run.
    pub(crate) running_ms: u64,
}

/// A failed module task waiting for its retry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RetryingTask {
    /// The task.
    pub(crate) task: String,
    /// Its consecutive failures.
    pub(crate) failures: u32,
    /// Milliseconds until it is queued again.
    pub(crate) retry_in_ms: u64,
}

fn millis(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_millis()).unwrap_or(u64::MAX)
}

impl QueueView {
    pub(super) fn update(&self, f: impl FnOnce(&mut Published)) {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// The queue now.
    pub fn status(&self) -> QueueStatus {
        let now = Instant::now();
        let p = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        QueueStatus {
            running_queue: p.started,
            current: p.running.as_ref().map(|(task, since)| CurrentTask {
                task: task.to_string(),
                running_ms: millis(*since, now),
            }),
            waiting: p.waiting.iter().map(ToString::to_string).collect(),
            retries: p
                .retries
                .iter()
                .map(|(task, at, failures)| RetryingTask {
                    task: task.to_string(),
                    failures: *failures,
                    retry_in_ms: millis(now, *at),
                })
                .collect(),
            held_for_ms: p
                .held_until
                .filter(|at| *at > now)
                .map(|at| millis(now, at)),
            enabled_modules: p.enabled.clone(),
            modules: p.states.clone(),
            startup_converged: p.converged,
        }
    }

    /// `Ok` once the startup convergence is done, as addon-operator's readiness;
    /// otherwise what it waits for.
    pub fn startup_converged(&self) -> Result<(), String> {
        let status = self.status();
        if status.startup_converged {
            return Ok(());
        }
        if !status.running_queue {
            return Err("the modules' task queue is starting".to_owned());
        }
        let mut waiting: Vec<String> = status.current.into_iter().map(|c| c.task).collect();
        waiting.extend(status.waiting);
        waiting.extend(status.retries.iter().map(|r| {
            let times = if r.failures == 1 { "time" } else { "times" };
            format!("{} (failed {} {times})", r.task, r.failures)
        }));
        Err(format!(
            "waiting for the modules' startup convergence: {}",
            if waiting.is_empty() {
                "-".to_owned()
            } else {
                waiting.join(", ")
            }
        ))
    }

    /// The queue as text, one line per task: what `operon modules queue` prints.
    pub fn text(status: &QueueStatus) -> String {
        let mut out = String::new();
        if !status.running_queue {
            out.push_str("the module queue is not running here (a standby replica, or modules are starting)\n");
        }
        match &status.current {
            Some(c) => out.push_str(&format!("running  {} ({} ms)\n", c.task, c.running_ms)),
            None => out.push_str("running  -\n"),
        }
        for (i, task) in status.waiting.iter().enumerate() {
            out.push_str(&format!("{:>7}  {task}\n", i + 1));
        }
        for r in &status.retries {
            out.push_str(&format!(
                "retry    {} in {} ms (failed {} time{})\n",
                r.task,
                r.retry_in_ms,
                r.failures,
                if r.failures == 1 { "" } else { "s" }
            ));
        }
        if let Some(ms) = status.held_for_ms {
            out.push_str(&format!("held     {ms} ms by a failed global task\n"));
        }
        if status.running_queue && !status.startup_converged {
            out.push_str("startup convergence in progress\n");
        }
        out.push_str(&format!(
            "enabled  {}\n",
            if status.enabled_modules.is_empty() {
                "-".to_owned()
            } else {
                status.enabled_modules.join(", ")
            }
        ));
        for module in status.modules.iter().filter(|m| !m.enabled) {
            out.push_str(&format!("disabled {}: {}\n", module.name, module.state));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_status_shows_running_waiting_and_retrying_tasks() {
        let view = QueueView::default();
        let now = Instant::now();
        view.update(|p| {
            p.started = true;
            p.running = Some((Task::DiscoverModules, now));
            p.waiting = vec![Task::ModuleRun {
                module: "echo".into(),
            }];
            p.retries = vec![(
                Task::ModuleDelete {
                    module: "old".into(),
                },
                now + Duration::from_secs(5),
                2,
            )];
            p.enabled = vec!["echo".into()];
        });
        let status = view.status();
        assert_eq!(status.current.as_ref().unwrap().task, "DiscoverModules");
        assert_eq!(status.waiting, ["ModuleRun:echo"]);
        assert_eq!(status.retries[0].task, "ModuleDelete:old");
        assert!(status.retries[0].retry_in_ms > 4000);
        let text = QueueView::text(&status);
        assert!(text.contains("      1  ModuleRun:echo\n"), "{text}");
        assert!(text.contains("retry    ModuleDelete:old in "), "{text}");
        assert!(text.contains("(failed 2 times)"), "{text}");
        assert!(text.contains("startup convergence in progress"), "{text}");
        let waiting = view.startup_converged().unwrap_err();
        assert_eq!(
            waiting,
            "waiting for the modules' startup convergence: DiscoverModules, ModuleRun:echo, \
             ModuleDelete:old (failed 2 times)"
        );
        view.update(|p| p.converged = true);
        assert_eq!(view.startup_converged(), Ok(()));
        assert!(view.status().startup_converged);
    }
}
