//! The hook engines a process runs beside its main one (one per Hook object, one for
//! addon-operator's global hooks and one per module), each with where its hooks come
//! from, and the runs of hooks that no engine runs (addon-operator's lifecycle hooks:
//! `onStartup`, `beforeHelm`...), so that whoever answers about hooks (the debug socket
//! of `operon serve`) sees every hook of the process, not only those of the hooks
//! directory.
//!
//! An engine is in the set while the [`Registration`] its owner holds lives: a Hook
//! object's engine leaves with the task that runs it. The set is locked only to add,
//! remove or copy its list, never while an engine is asked anything, so a reader does
//! not hold up an owner starting or stopping an engine, nor a run.

use super::engine::Engine;
use super::history::{RUNS_PER_HOOK, RunEntry};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

/// Engines by where their hooks come from, and runs kept outside any engine; clones
/// share them.
#[derive(Debug, Clone, Default)]
pub struct EngineSet(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    engines: Mutex<Vec<Registered>>,
    /// Numbers registrations, so that a registration removes its own engine only.
    next: AtomicU64,
    /// The last runs of each hook that no engine runs, by hook.
    runs: Mutex<BTreeMap<String, VecDeque<RunEntry>>>,
    /// Counts changes of the list, for whoever follows which engines run.
    changes: tokio::sync::watch::Sender<u64>,
}

/// One engine of the set.
#[derive(Debug, Clone)]
pub struct Registered {
    /// Where its hooks come from (`Hook object`, `module echo`, `global hooks`).
    pub source: String,
    /// The engine.
    pub engine: Arc<Engine>,
    id: u64,
}

/// Keeps an engine in its set; dropping it takes the engine out.
#[derive(Debug)]
#[must_use = "the engine leaves the set when the registration is dropped"]
pub struct Registration {
    set: Weak<Inner>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(set) = self.set.upgrade() {
            lock(&set.engines).retain(|r| r.id != self.id);
            set.changes.send_modify(|n| *n += 1);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves whole entries only.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl EngineSet {
    /// Adds `engine`, whose hooks come from `source`, until the registration is dropped.
    pub fn register(&self, source: impl Into<String>, engine: Arc<Engine>) -> Registration {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.0.engines).push(Registered {
            source: source.into(),
            engine,
            id,
        });
        self.0.changes.send_modify(|n| *n += 1);
        Registration {
            set: Arc::downgrade(&self.0),
            id,
        }
    }

    /// The engines now, in the order they were registered.
    pub fn engines(&self) -> Vec<Registered> {
        lock(&self.0.engines).clone()
    }

    /// Follows the list: the receiver sees a change each time an engine comes or goes.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.changes.subscribe()
    }

    /// Keeps `entry` as the newest run of its hook, which runs on no engine; the
    /// oldest past [`RUNS_PER_HOOK`] goes.
    pub fn record(&self, entry: RunEntry) {
        let mut runs = lock(&self.0.runs);
        let kept = runs.entry(entry.hook.clone()).or_default();
        if kept.len() == RUNS_PER_HOOK {
            kept.pop_front();
        }
        kept.push_back(entry);
    }

    /// The recorded runs of `hook` (of every hook with `None`), each hook's oldest first;
    /// `None` when `hook` has none.
    pub fn recorded(&self, hook: Option<&str>) -> Option<Vec<RunEntry>> {
        let runs = lock(&self.0.runs);
        match hook {
            Some(hook) => runs.get(hook).map(|r| r.iter().cloned().collect()),
            None => Some(runs.values().flatten().cloned().collect()),
        }
    }
}

/// `lists` merged in the order their runs ended, each list already in that order (the
/// order of equal ends kept).
pub fn merge_by_end(lists: impl IntoIterator<Item = Vec<RunEntry>>) -> Vec<RunEntry> {
    let mut runs: Vec<RunEntry> = lists.into_iter().flatten().collect();
    runs.sort_by_key(end);
    runs
}

fn end(run: &RunEntry) -> jiff::Timestamp {
    let duration = jiff::SignedDuration::from_millis(i64::try_from(run.duration_ms).unwrap_or(0));
    run.started.checked_add(duration).unwrap_or(run.started)
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_data::api::HookRunOutcome;

    fn run(hook: &str, started_ms: i64, duration_ms: u64) -> RunEntry {
        RunEntry {
            hook: hook.to_owned(),
            bindings: vec!["b".to_owned()],
            binding_type: "Event".to_owned(),
            trigger: "schedule".to_owned(),
            queue: "main".to_owned(),
            started: jiff::Timestamp::from_millisecond(started_ms).unwrap(),
            duration_ms,
            outcome: HookRunOutcome::Succeeded,
            error: None,
            patches: 0,
            patch_descriptions: Vec::new(),
            exit_code: None,
            stderr_tail: String::new(),
            stderr_truncated: false,
        }
    }

    #[test]
    fn runs_of_several_lists_merge_in_the_order_they_ended() {
        let merged = merge_by_end([
            vec![run("a", 0, 50), run("a", 100, 10)],
            vec![run("b", 10, 5), run("b", 60, 100)],
        ]);
        let ends: Vec<(&str, u64)> = merged
            .iter()
            .map(|r| (r.hook.as_str(), r.duration_ms))
            .collect();
        assert_eq!(ends, [("b", 5), ("a", 50), ("a", 10), ("b", 100)]);
    }

    #[test]
    fn followers_see_engines_come_and_go() {
        let set = EngineSet::default();
        let mut changes = set.changes();
        let engine = Arc::new(crate::engine::Engine::new(
            Vec::new(),
            Arc::new(operon_cluster::local::LocalCluster::new()),
            Arc::new(crate::metrics::Metrics::new().unwrap()),
        ));
        let registration = set.register("module echo", engine);
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        assert_eq!(set.engines()[0].source, "module echo");
        drop(registration);
        assert!(changes.has_changed().unwrap(), "the engine left");
        assert!(set.engines().is_empty());
    }

    #[test]
    fn recorded_runs_are_bounded_per_hook_and_found_by_name() {
        let set = EngineSet::default();
        for i in 0..(RUNS_PER_HOOK + 3) {
            set.record(run("echo/hooks/a", i as i64, 1));
        }
        set.record(run("global/b", 0, 1));
        let a = set.recorded(Some("echo/hooks/a")).unwrap();
        assert_eq!(a.len(), RUNS_PER_HOOK);
        assert_eq!(a[0].started.as_millisecond(), 3);
        assert!(set.recorded(Some("nothing")).is_none());
        assert_eq!(set.recorded(None).unwrap().len(), RUNS_PER_HOOK + 1);
    }
}
