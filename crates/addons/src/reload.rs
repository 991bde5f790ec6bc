//! The modules and the global hooks reloaded while the queue runs, with the lifecycle
//! addon-operator gives a module it registers again (its `RegisterModule`, which
//! Deckhouse's module sources call): an operator is made afresh from the changed
//! directories ([`Operator::new`] reads and checks all of them, so a tree that does not
//! load is refused before anything stops), and takes over from the one in use
//! ([`Operator::carry_from`]):
//!
//! - the global hooks, the modules directories' `values.yaml` or the global schemas
//!   changed: everything starts again, as after a restart (addon-operator's
//!   `ReloadAllModules` after its global hooks changed): global `onStartup` hooks, then a
//!   convergence in which every enabled module runs its `onStartup` hooks again;
//! - otherwise a convergence (`beforeAll`, discovery with the `enabled` programs, every
//!   enabled module's ModuleRun, `afterAll`), in which a module that is new or changed
//!   runs its `onStartup` hooks and the Synchronization of its bindings first
//!   (`DoModuleStartup`), a module that did not change does not, keeping the values its
//!   hooks had set; a module that became disabled gets its ModuleDelete, and a module
//!   whose directory is gone gets its release deleted (ModulePurge: its hooks are gone
//!   with it).

use super::operator::{Operator, Task};
use operon_hooks::reload::tree_digest;
use std::collections::{BTreeMap, BTreeSet};

/// What a layout was read from: the global part's digest, and each module's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fingerprint {
    /// The global hooks directory and each modules directory's `values.yaml`.
    pub global: String,
    /// Each module's directory, by module name.
    pub modules: BTreeMap<String, String>,
}

impl Fingerprint {
    /// (added, changed, removed) modules from `self` to `next`, each sorted.
    pub fn diff(&self, next: &Fingerprint) -> (Vec<String>, Vec<String>, Vec<String>) {
        operon_hooks::reload::diff(
            (self.modules.iter()).map(|(n, d)| (n.as_str(), d.as_str())),
            (next.modules.iter()).map(|(n, d)| (n.as_str(), d.as_str())),
        )
    }
}

/// Every directory a change of which is a change of the modules: the modules
/// directories and the global hooks directory.
pub fn watched_dirs(settings: &super::operator::Settings) -> Vec<std::path::PathBuf> {
    let mut dirs = super::layout::split_to_paths(settings.modules_dir.as_os_str());
    dirs.extend(settings.global_hooks_dir.clone());
    dirs
}

impl Operator {
    /// What the operator's layout was read from, digested now.
    pub fn fingerprint(&self) -> Fingerprint {
        let mut global: Vec<std::path::PathBuf> =
            (super::layout::split_to_paths(self.settings.modules_dir.as_os_str()).into_iter())
                .map(|dir| dir.join("values.yaml"))
                .collect();
        global.extend(self.settings.global_hooks_dir.clone());
        Fingerprint {
            global: tree_digest(&global),
            modules: (self.layout.modules.iter())
                .map(|m| (m.name.clone(), tree_digest(std::slice::from_ref(&m.path))))
                .collect(),
        }
    }

    /// Takes over from `previous`, the operator in use, made from the directories as
    /// `was` digested them, when this one was made from them as `now` digests them
    /// (see the module documentation): its metrics, its queue's view and its place on
    /// the debug socket, and, when the global part did not change, the global values
    /// hooks set and what the modules that did not change had done.
    pub fn carry_from(&mut self, previous: &Operator, was: &Fingerprint, now: &Fingerprint) {
        self.metrics = previous.metrics.clone();
        self.hook_metrics = previous.hook_metrics.clone();
        self.view = previous.view.clone();
        self.shown = previous.shown.clone();
        self.platform = previous.platform.clone();
        self.dry_run = previous.dry_run;
        let (_, _, removed) = was.diff(now);
        for module in &removed {
            // Its series would report a module that is no more.
            let _ = self.metrics.enabled.remove_label_values(&[module]);
        }
        if was.global != now.global {
            return;
        }
        self.queue.retain(|task| {
            !matches!(
                task,
                Task::GlobalHookRun {
                    binding: super::hooks::Lifecycle::OnStartup,
                    ..
                }
            )
        });
        self.dynamic_enabled = previous.dynamic_enabled.clone();
        if let Err(e) = self.global.add_patches(previous.global.patches().to_vec()) {
            tracing::warn!(error = %e, "the global values hooks had set do not fit the reloaded schemas; they are dropped");
        }
        let unchanged: BTreeSet<&String> = (now.modules.iter())
            .filter(|(name, digest)| was.modules.get(*name) == Some(*digest))
            .map(|(name, _)| name)
            .collect();
        for name in unchanged {
            if previous.started.contains(name) {
                self.started.insert(name.clone());
            }
            if previous.crds_ensured.contains(name) {
                self.crds_ensured.insert(name.clone());
            }
            let (Some(section), Some(old)) =
                (self.modules.get_mut(name), previous.modules.get(name))
            else {
                continue;
            };
            if let Err(e) = section.add_patches(old.patches().to_vec()) {
                tracing::warn!(module = %name, error = %e, "the values the module's hooks had set do not fit; they are dropped");
            }
        }
    }
}
