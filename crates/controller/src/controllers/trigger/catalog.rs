//! [`TriggerCatalog`]: every Trigger of the cluster, compiled once per generation and
//! kept current by a watcher, published as immutable snapshots that the cron loop, the
//! event matcher and the alert receiver read without locks and wait on for changes.

use futures::StreamExt as _;
use kube::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use operon_data::api::{Problem, Trigger};
use operon_pipeline::triggers::CompiledTrigger;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::watch;

/// One Trigger as last seen, with its compiled form when it is valid.
#[derive(Debug, Clone)]
pub(crate) struct TriggerEntry {
    /// The object: its uid for owner references, its status and creation for cron.
    pub(crate) trigger: Arc<Trigger>,
    /// `None` when the Trigger is invalid (its problems were logged when it was seen).
    pub(crate) compiled: Option<Arc<CompiledTrigger>>,
}

/// The Triggers at one moment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    /// Whether the first list completed: before it, "no Trigger" means "not known yet".
    pub(crate) listed: bool,
    /// By name (Triggers are cluster-scoped).
    pub(crate) triggers: Arc<BTreeMap<String, TriggerEntry>>,
}

impl Snapshot {
    /// The valid Triggers, with their objects.
    pub(crate) fn compiled(&self) -> impl Iterator<Item = (&Arc<Trigger>, &Arc<CompiledTrigger>)> {
        self.triggers
            .values()
            .filter_map(|entry| Some((&entry.trigger, entry.compiled.as_ref()?)))
    }
}

/// The Triggers of the cluster, as snapshots.
#[derive(Debug, Clone)]
pub(crate) struct TriggerCatalog {
    snapshots: watch::Sender<Snapshot>,
}

impl Default for TriggerCatalog {
    fn default() -> Self {
        Self::new()
    }
}

impl TriggerCatalog {
    /// An empty catalog, not yet listed.
    pub(crate) fn new() -> Self {
        Self {
            snapshots: watch::Sender::new(Snapshot::default()),
        }
    }

    /// A catalog whose list returned `triggers`, as a watch would deliver it.
    #[cfg(test)]
    pub(crate) fn listed(triggers: Vec<Trigger>) -> Self {
        let catalog = Self::new();
        let mut relisting = None;
        catalog.apply(&mut relisting, Event::Init);
        for t in triggers {
            catalog.apply(&mut relisting, Event::InitApply(t));
        }
        catalog.apply(&mut relisting, Event::InitDone);
        catalog
    }

    /// The current snapshot.
    pub(crate) fn snapshot(&self) -> Snapshot {
        self.snapshots.borrow().clone()
    }

    /// A receiver that is told of every new snapshot.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.snapshots.subscribe()
    }

    /// Watches `api` for ever (retrying with backoff), keeping the snapshots current.
    pub(crate) async fn run(&self, api: Api<Trigger>) {
        let mut relisting = None;
        let mut events =
            std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => self.apply(&mut relisting, event),
                Err(e) => tracing::warn!(error = %e, "watching Triggers failed; retrying"),
            }
        }
    }

    /// Takes one watcher event. A (re-)list is collected in `relisting` and replaces the
    /// snapshot whole at its end, so a Trigger deleted while the watch was down (which
    /// no Delete event reports) disappears too.
    pub(crate) fn apply(
        &self,
        relisting: &mut Option<BTreeMap<String, TriggerEntry>>,
        event: Event<Trigger>,
    ) {
        match event {
            Event::Init => *relisting = Some(BTreeMap::new()),
            Event::InitApply(trigger) => {
                let current = self.snapshots.borrow().triggers.clone();
                insert(relisting.get_or_insert_default(), &current, trigger);
            }
            Event::InitDone => {
                let triggers = relisting.take().unwrap_or_default();
                tracing::info!(triggers = triggers.len(), "Triggers listed");
                self.snapshots.send_replace(Snapshot {
                    listed: true,
                    triggers: Arc::new(triggers),
                });
            }
            Event::Apply(trigger) => self.snapshots.send_modify(|snapshot| {
                let mut triggers = (*snapshot.triggers).clone();
                let previous = snapshot.triggers.clone();
                insert(&mut triggers, &previous, trigger);
                snapshot.triggers = Arc::new(triggers);
            }),
            Event::Delete(trigger) => self.snapshots.send_modify(|snapshot| {
                let name = trigger.metadata.name.clone().unwrap_or_default();
                if snapshot.triggers.contains_key(&name) {
                    let mut triggers = (*snapshot.triggers).clone();
                    triggers.remove(&name);
                    snapshot.triggers = Arc::new(triggers);
                }
            }),
        }
    }
}

/// Puts `trigger` into `triggers`, reusing the compiled form in `previous` when the
/// spec did not change (same uid and generation: a status write, such as
/// `lastScheduleTime`, changes neither), and otherwise compiling it and logging every
/// problem of an invalid one.
fn insert(
    triggers: &mut BTreeMap<String, TriggerEntry>,
    previous: &BTreeMap<String, TriggerEntry>,
    trigger: Trigger,
) {
    let name = trigger.metadata.name.clone().unwrap_or_default();
    let unchanged = previous.get(&name).filter(|entry| {
        entry.trigger.metadata.uid == trigger.metadata.uid
            && entry.trigger.metadata.generation == trigger.metadata.generation
            && entry.trigger.spec == trigger.spec
    });
    let compiled = match unchanged {
        Some(entry) => entry.compiled.clone(),
        None => compile(&trigger),
    };
    triggers.insert(
        name,
        TriggerEntry {
            trigger: Arc::new(trigger),
            compiled,
        },
    );
}

/// The compiled Trigger, or `None` after logging why it is invalid: an invalid Trigger
/// is skipped, never fatal.
fn compile(trigger: &Trigger) -> Option<Arc<CompiledTrigger>> {
    match CompiledTrigger::new(trigger) {
        Ok(compiled) => Some(Arc::new(compiled)),
        Err(problems) => {
            tracing::warn!(
                trigger = %trigger.object_ref(),
                problems = %list(&problems),
                "Trigger is invalid and creates no Diagnosis until it is fixed"
            );
            None
        }
    }
}

/// Every problem, `; `-separated, for one log line.
fn list(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("{}: {}", p.field, p.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn trigger(name: &str, generation: i64, source: serde_json::Value) -> Trigger {
        serde_json::from_value(json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "Trigger",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "generation": generation},
            "spec": {"operationSet": "s", "sourceTemplate": source},
        }))
        .unwrap()
    }

    #[test]
    fn a_relist_replaces_the_set_and_invalid_triggers_are_kept_uncompiled() {
        let catalog = TriggerCatalog::new();
        let mut relisting = None;
        assert!(!catalog.snapshot().listed);
        catalog.apply(&mut relisting, Event::Init);
        catalog.apply(
            &mut relisting,
            Event::InitApply(trigger("a", 1, json!({"kubernetesEventTemplate": {}}))),
        );
        catalog.apply(
            &mut relisting,
            Event::InitApply(trigger(
                "bad",
                1,
                json!({"cronTemplate": {"schedule": "x"}}),
            )),
        );
        assert!(!catalog.snapshot().listed, "not before InitDone");
        catalog.apply(&mut relisting, Event::InitDone);
        let snapshot = catalog.snapshot();
        assert!(snapshot.listed);
        assert_eq!(snapshot.triggers.len(), 2);
        assert!(snapshot.triggers["bad"].compiled.is_none());
        assert_eq!(snapshot.compiled().count(), 1);

        // `a` was deleted while the watch was down: the re-list drops it.
        catalog.apply(&mut relisting, Event::Init);
        catalog.apply(
            &mut relisting,
            Event::InitApply(trigger(
                "bad",
                1,
                json!({"cronTemplate": {"schedule": "x"}}),
            )),
        );
        catalog.apply(&mut relisting, Event::InitDone);
        assert_eq!(
            catalog.snapshot().triggers.keys().collect::<Vec<_>>(),
            ["bad"]
        );
    }

    #[test]
    fn a_status_change_keeps_the_compiled_trigger_and_a_spec_change_recompiles() {
        let catalog = TriggerCatalog::new();
        let mut relisting = None;
        let t = trigger("c", 1, json!({"cronTemplate": {"schedule": "@hourly"}}));
        catalog.apply(&mut relisting, Event::Apply(t.clone()));
        let first = catalog.snapshot().triggers["c"].compiled.clone().unwrap();
        let mut with_status = t.clone();
        with_status.status = Some(Default::default());
        catalog.apply(&mut relisting, Event::Apply(with_status));
        let second = catalog.snapshot().triggers["c"].compiled.clone().unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        catalog.apply(
            &mut relisting,
            Event::Apply(trigger(
                "c",
                2,
                json!({"cronTemplate": {"schedule": "@daily"}}),
            )),
        );
        let third = catalog.snapshot().triggers["c"].compiled.clone().unwrap();
        assert!(!Arc::ptr_eq(&first, &third));
        catalog.apply(&mut relisting, Event::Delete(t));
        assert!(catalog.snapshot().triggers.is_empty());
    }
}
