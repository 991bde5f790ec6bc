//! The binding engines' place in the lifecycle, as addon-operator orders it: the
//! global hooks' kubernetes bindings start once the global `onStartup` hooks ran and
//! their Synchronization runs finish before the first `beforeAll` and discovery; a
//! module's start in its first ModuleRun, after its `onStartup` hooks, and their
//! Synchronization runs finish (values patches applied) before its first `beforeHelm`.
//! Bindings with `executeHookOnSynchronization: false` count as synchronized at once;
//! those on a named queue with `waitForSynchronization: false` are not waited for.
//! Once an owner's waited-for Synchronization is done its schedule bindings are
//! enabled (addon-operator's EnableScheduleBindings), not before. A disabled module's
//! engine stays, schedules stopped, until its ModuleDelete ran its `afterDeleteHelm`
//! hooks, which read its snapshots.
//!
//! A wait that outlasts the hook timeout fails the task, which is retried with its
//! backoff while the engine goes on synchronizing: a module whose hook cannot
//! synchronize does not hold the others.

use super::AddonError;
use super::bindings::{self, BindingEngine};
use super::hooks::Lifecycle;
use super::operator::{Operator, Task};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How often a wait looks at the engine.
const POLL: Duration = Duration::from_millis(10);

impl Operator {
    /// Starts the engine of the global hooks (once no global `onStartup` task is
    /// waiting), stops those of modules no longer enabled; in the loop only.
    pub(super) async fn sync_engines(&mut self) -> Result<(), AddonError> {
        if !self.bindings_live {
            return Ok(());
        }
        // A disabled module keeps its kubernetes bindings until its ModuleDelete ran
        // its `afterDeleteHelm` hooks (they read the snapshots), as addon-operator does;
        // its schedules stop at once.
        let deleting: BTreeSet<String> = self
            .queue
            .iter()
            .chain(self.retries.iter().map(|(_, t)| t))
            .filter_map(|t| match t {
                Task::ModuleDelete { module } if !self.enabled.contains(module) => {
                    Some(module.clone())
                }
                _ => None,
            })
            .collect();
        self.engines.retain(|owner, _| {
            owner == "global" || self.enabled.contains(owner) || deleting.contains(owner)
        });
        let startup_waiting = self.queue.iter().any(|t| {
            matches!(
                t,
                Task::GlobalHookRun {
                    binding: Lifecycle::OnStartup,
                    ..
                }
            )
        });
        if !startup_waiting {
            self.start_engine(None).await?;
        }
        // Modules started before the loop (a drained queue) get their engine now; one
        // that cannot start is retried by its next ModuleRun.
        let started: Vec<String> = self
            .enabled
            .iter()
            .filter(|m| self.started.contains(*m) && !self.engines.contains_key(*m))
            .cloned()
            .collect();
        for module in started {
            if let Err(e) = self.start_engine(Some(&module)).await {
                tracing::warn!(module = %module, error = %e, "cannot start the module's bindings");
            }
        }
        for (owner, engine) in &self.engines {
            if deleting.contains(owner) {
                engine.disable_schedules();
            } else if !engine.schedules_enabled() && engine.pending_synchronization().is_empty() {
                engine.enable_schedules();
            }
        }
        Ok(())
    }

    /// Starts the binding engine of `module` (`None`: the global hooks) unless it runs.
    pub(super) async fn start_engine(&mut self, module: Option<&str>) -> Result<(), AddonError> {
        let owner = module.unwrap_or("global").to_owned();
        if !self.bindings_live || self.engines.contains_key(&owner) {
            return Ok(());
        }
        let hooks = match module {
            Some(m) => self.module_hooks.get(m).cloned().unwrap_or_default(),
            None => self.global_hooks.clone(),
        };
        let engine = bindings::start(
            &hooks,
            module,
            self.writer.cluster().clone(),
            self.hook_metrics.clone(),
            self.shared.clone(),
            self.binding_tx.clone(),
            &self.shown,
        )
        .await
        .map_err(|source| AddonError::Bindings {
            owner: owner.clone(),
            source,
        })?;
        // An owner with nothing to run is remembered so that it is not looked at again.
        self.engines
            .insert(owner, engine.unwrap_or_else(BindingEngine::idle));
        Ok(())
    }

    /// Starts `module`'s engine (`None`: the global one) and waits for the
    /// Synchronization of its waited-for bindings, applying the values patches their
    /// runs write as they come (for the owner's own section without running it
    /// again: the task that waits is about to use them). In the loop only.
    pub(super) async fn synchronize(&mut self, module: Option<&str>) -> Result<(), AddonError> {
        if !self.bindings_live {
            return Ok(());
        }
        self.start_engine(module).await?;
        let owner = module.unwrap_or("global");
        let deadline = Instant::now() + self.settings.hook_timeout;
        loop {
            let pending = self
                .engines
                .get(owner)
                .map(BindingEngine::pending_synchronization)
                .unwrap_or_default();
            // Every patch of a finished Synchronization run was sent before the run
            // counted as finished: this drain sees them all.
            self.take_patches(module).await;
            if pending.is_empty() {
                if let Some(engine) = self.engines.get(owner) {
                    engine.enable_schedules();
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(AddonError::Hook(format!(
                    "{owner}: the Synchronization of {} did not finish within {:?}",
                    pending.join(", "),
                    self.settings.hook_timeout
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Applies the binding patches waiting in the channel: `waiting`'s own without
    /// queueing anything for it, the others as the loop would.
    async fn take_patches(&mut self, waiting: Option<&str>) {
        let Some(mut rx) = self.binding_rx.take() else {
            return;
        };
        while let Ok(patch) = rx.try_recv() {
            if patch.module.as_deref() == waiting {
                let hook = patch.hook.clone();
                if let Err(e) = self
                    .apply_values_patches(
                        &patch.hook,
                        waiting,
                        patch.values_patch,
                        patch.config_patch,
                    )
                    .await
                {
                    (self.on_event)(&super::operator::QueueEvent::PatchRejected {
                        hook,
                        reason: e.to_string(),
                    });
                }
                self.refresh_shared();
            } else {
                self.take_binding_patch(patch).await;
            }
        }
        self.binding_rx = Some(rx);
    }
}
