//! Named task queues: shell-operator's queue semantics, with the clock abstracted
//! through tokio's time so tests run on a paused clock.
//!
//! - Each queue is strictly sequential; queues run in parallel with each other.
//! - Before a run, the tasks right behind the head that belong to the same hook are
//!   merged into it, up to the first task of another hook or kind (shell-operator's
//!   `combineBindingContextForHook`). Schedule and Event runs are one kind there (both
//!   `HookRun` tasks); onStartup runs never meet a run of their hook behind them, nor
//!   Synchronization runs anything but their hook's other Synchronization runs, as its
//!   `EnableKubernetesBindings` and `EnableScheduleBindings` tasks stand between them
//!   in its main queue. A context is dropped when the one right after it has the same
//!   group. An ungrouped Synchronization head takes in nothing, and hooks declared in
//!   the v0 format are never merged.
//! - A queue that holds more than [`COMPACTION_THRESHOLD`] tasks, and that many of one
//!   hook, merges that hook's queued tasks into its first one, wherever they are
//!   (shell-operator's queue compaction): ungrouped contexts first, then the last one
//!   of each group.
//! - A failing task stays at the head and is retried after a backoff growing from 5 s
//!   to 32 s ([`backoff`]); the head's `allowFailure` turns a failure into a counted
//!   success.
//! - A hook's `executionMinInterval`/`executionBurst` is a token bucket ([`RateLimit`]):
//!   while the bucket is empty the task waits at the head and later tasks keep being
//!   merged into it.

use operon_data::model::BindingContext;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use tokio::time::Instant;

/// shell-operator's `compactionThreshold`: a queue longer than this, holding this many
/// tasks of one hook, compacts them.
pub(crate) const COMPACTION_THRESHOLD: usize = 100;

/// What kind of work a task is; see [`TaskKind::combines_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum TaskKind {
    /// `onStartup`.
    OnStartup,
    /// A schedule fired.
    Schedule,
    /// The initial list of a kubernetes binding.
    Synchronization,
    /// A watch event of a kubernetes binding.
    Event,
}

impl TaskKind {
    /// Whether a task of kind `next` may be merged into a head of this kind.
    pub(crate) fn combines_with(self, next: TaskKind) -> bool {
        use TaskKind::*;
        matches!(
            (self, next),
            (Schedule | Event, Schedule | Event) | (Synchronization, Synchronization)
        )
    }
}

/// One queued hook run.
#[derive(Debug, Clone)]
pub(crate) struct Task {
    /// Index of the hook in the engine.
    pub(crate) hook: usize,
    /// The kind of task.
    pub(crate) kind: TaskKind,
    /// Whether this task may be merged with the tasks of its hook (not for hooks
    /// declared in the v0 format, whose every event is a run of its own, nor for the
    /// halves of a split batch).
    pub(crate) merge: bool,
    /// The binding contexts of the run, oldest first.
    pub(crate) contexts: Vec<BindingContext>,
    /// Whether a failure is allowed: the binding of the task's own first context says,
    /// as shell-operator keeps the head's flag when it merges.
    pub(crate) allow_failure: bool,
    /// The kubernetes bindings whose events wait for this task: its own for a
    /// Synchronization task, plus those of the Synchronization tasks merged into it.
    pub(crate) synchronizes: Vec<usize>,
    /// When the task was queued (for the wait-time metric).
    pub(crate) queued_at: Instant,
    /// The spans of its trace (none with export off).
    pub(crate) trace: super::engine::TaskTrace,
    /// While its run holds its contexts, the bindings of those contexts.
    pub(crate) running: Vec<String>,
}

/// A named queue.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    tasks: VecDeque<Task>,
    /// Consecutive failures of the task at the head.
    failures: u32,
    /// Queued tasks per hook, so that a push decides on compaction without a scan.
    per_hook: HashMap<usize, usize>,
}

impl Queue {
    /// Appends a task, compacting the queue when it has fallen far behind.
    pub(crate) fn push(&mut self, task: Task) {
        *self.per_hook.entry(task.hook).or_default() += 1;
        self.tasks.push_back(task);
        if self.tasks.len() > COMPACTION_THRESHOLD {
            let crowded: Vec<usize> = (self.per_hook.iter())
                .filter(|(_, n)| **n >= COMPACTION_THRESHOLD)
                .map(|(h, _)| *h)
                .collect();
            for hook in crowded {
                self.compact(hook);
            }
        }
    }

    fn forget(&mut self, hook: usize, tasks: usize) {
        if let Some(n) = self.per_hook.get_mut(&hook) {
            *n = n.saturating_sub(tasks);
            if *n == 0 {
                self.per_hook.remove(&hook);
            }
        }
    }

    /// Merges the queued Schedule and Event tasks of `hook` behind the head into the
    /// first of them. The head is left alone: it may be running, and it merges what
    /// follows it before its next run anyway. shell-operator's compaction takes every
    /// `HookRun` task, but there onStartup and Synchronization tasks are long gone by
    /// the time a queue holds a hundred; here a Synchronization task may still wait
    /// on a binding's own queue, and merged into an Event run its binding would never
    /// count as synchronized.
    fn compact(&mut self, hook: usize) {
        let eligible = |t: &Task| {
            t.hook == hook && t.merge && matches!(t.kind, TaskKind::Schedule | TaskKind::Event)
        };
        let Some(target) = (self.tasks.iter().skip(1))
            .position(eligible)
            .map(|i| i + 1)
        else {
            return;
        };
        let mut merged = 0;
        let mut kept = VecDeque::with_capacity(self.tasks.len());
        for (i, task) in std::mem::take(&mut self.tasks).into_iter().enumerate() {
            if i > target && eligible(&task) {
                let into: &mut Task = &mut kept[target];
                into.contexts.extend(task.contexts);
                into.synchronizes.extend(task.synchronizes);
                merged += 1;
            } else {
                kept.push_back(task);
            }
        }
        self.tasks = kept;
        compact_groups(&mut self.tasks[target].contexts);
        self.forget(hook, merged);
    }

    /// How many tasks wait.
    pub(crate) fn len(&self) -> usize {
        self.tasks.len()
    }

    /// The waiting tasks, head first.
    pub(crate) fn tasks(&self) -> impl Iterator<Item = &Task> {
        self.tasks.iter()
    }

    /// Whether no task waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Consecutive failures of the head task.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// Merges the tasks that follow the head into it where shell-operator would, and
    /// returns the head to run. The head stays queued until [`Queue::done`] or
    /// [`Queue::failed`] says what happened, but its contexts go with the run (a
    /// combined run can carry thousands, and copying them cost more than the queue's
    /// own work): the queued head keeps only their bindings, for the debug view, until
    /// a failed run hands them back ([`Queue::restore_head`]).
    pub(crate) fn head(&mut self) -> Option<Task> {
        let mut head = self.tasks.pop_front()?;
        if takes_in(&head) {
            let mut merged = 0;
            while let Some(next) = self.tasks.pop_front() {
                if next.hook != head.hook || !next.merge || !head.kind.combines_with(next.kind) {
                    self.tasks.push_front(next);
                    break;
                }
                head.contexts.extend(next.contexts);
                head.synchronizes.extend(next.synchronizes);
                merged += 1;
            }
            if merged > 0 {
                drop_superseded(&mut head.contexts);
                self.forget(head.hook, merged);
            }
        }
        head.trace.taken();
        let contexts = std::mem::take(&mut head.contexts);
        head.running = contexts.iter().map(|c| c.binding.clone()).collect();
        let run = Task {
            contexts,
            running: Vec::new(),
            ..head.clone()
        };
        self.tasks.push_front(head);
        Some(run)
    }

    /// The contexts of the head's run, back after it failed, to run again.
    pub(crate) fn restore_head(&mut self, contexts: Vec<BindingContext>) {
        if let Some(head) = self.tasks.front_mut() {
            head.contexts = contexts;
            head.running = Vec::new();
        }
    }

    /// The head ran successfully (or its failure was allowed): drop it.
    pub(crate) fn done(&mut self) {
        if let Some(task) = self.tasks.pop_front() {
            self.forget(task.hook, 1);
        }
        self.failures = 0;
    }

    /// The head hit a per-run limit (its time budget, its patches...) with more than one
    /// binding context: its first half stays at the head and the rest is queued right
    /// behind it, neither taking in later tasks any more. Retried whole, a batch that grew
    /// past what one run may do would fail again and again while new events join it
    /// (shell-operator has no such limits, so it only ever waits). Returns whether it
    /// split.
    pub(crate) fn split_head(&mut self) -> bool {
        let Some(head) = self.tasks.front_mut() else {
            return false;
        };
        if head.contexts.len() < 2 {
            return false;
        }
        head.merge = false;
        let rest = head.contexts.split_off(head.contexts.len() / 2);
        let second = Task {
            contexts: rest,
            // The bindings are released when the first half has run.
            synchronizes: Vec::new(),
            ..head.clone()
        };
        *self.per_hook.entry(second.hook).or_default() += 1;
        self.tasks.insert(1, second);
        true
    }

    /// The head failed: it stays; returns how long to wait before retrying it.
    pub(crate) fn failed(&mut self, jitter: Duration) -> Duration {
        self.failures = self.failures.saturating_add(1);
        backoff(self.failures, jitter)
    }
}

/// Whether a head takes in the tasks behind it: shell-operator combines for v1 hooks
/// only, and never into an ungrouped Synchronization (each binding's objects list is
/// its own run).
fn takes_in(head: &Task) -> bool {
    head.merge
        && head.kind != TaskKind::OnStartup
        && !(head.kind == TaskKind::Synchronization
            && head.contexts.first().is_some_and(|c| c.group.is_none()))
}

/// The compaction of a combined run: a grouped context is dropped when the next one
/// belongs to the same group (the hook reads snapshots only, and the later context
/// carries newer ones); a group interrupted by another context keeps a context on
/// each side.
pub(crate) fn drop_superseded(contexts: &mut Vec<BindingContext>) {
    let mut kept: Vec<BindingContext> = Vec::with_capacity(contexts.len());
    for context in contexts.drain(..) {
        if let Some(last) = kept.last()
            && last.group.is_some()
            && last.group == context.group
        {
            kept.pop();
        }
        kept.push(context);
    }
    *contexts = kept;
}

/// The compaction of a queue that fell behind: ungrouped contexts in their order,
/// then the last context of each group, groups in the order of those last contexts
/// (shell-operator takes them out of a map, in no fixed order).
pub(crate) fn compact_groups(contexts: &mut Vec<BindingContext>) {
    let mut last: HashMap<String, usize> = HashMap::new();
    for (i, context) in contexts.iter().enumerate() {
        if let Some(group) = &context.group {
            last.insert(group.clone(), i);
        }
    }
    if last.is_empty() {
        return;
    }
    let mut ungrouped = Vec::with_capacity(contexts.len());
    let mut grouped = Vec::with_capacity(last.len());
    for (i, context) in contexts.drain(..).enumerate() {
        match &context.group {
            None => ungrouped.push(context),
            Some(group) if last.get(group) == Some(&i) => grouped.push(context),
            Some(_) => {}
        }
    }
    ungrouped.extend(grouped);
    *contexts = ungrouped;
}

/// shell-operator's retry delay after `failures` consecutive failures: 5 s, then
/// 5 s + 2^(n-2) s plus up to 1 s of jitter (≈ 6–7, 7–8, 9–10, 13–14, 21–22 s),
/// capped at 32 s.
pub(crate) fn backoff(failures: u32, jitter: Duration) -> Duration {
    let jitter = jitter.min(Duration::from_secs(1));
    if failures <= 1 {
        return Duration::from_secs(5);
    }
    let exponent = (failures - 2).min(5);
    let delay = Duration::from_secs(5 + (1u64 << exponent)) + jitter;
    delay.min(Duration::from_secs(32))
}

/// A token bucket: `burst` runs back to back, then one per `interval`.
#[derive(Debug, Clone)]
pub(crate) struct RateLimit {
    interval: Duration,
    burst: u32,
    tokens: f64,
    updated: Instant,
}

impl RateLimit {
    /// A full bucket.
    pub(crate) fn new(interval: Duration, burst: u32) -> Self {
        let burst = burst.max(1);
        Self {
            interval,
            burst,
            tokens: f64::from(burst),
            updated: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant) {
        if self.interval.is_zero() {
            self.tokens = f64::from(self.burst);
        } else {
            let gained =
                now.duration_since(self.updated).as_secs_f64() / self.interval.as_secs_f64();
            self.tokens = (self.tokens + gained).min(f64::from(self.burst));
        }
        self.updated = now;
    }

    /// How long to wait before a run may start; zero when a token is available.
    pub(crate) fn wait(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            self.interval.mul_f64(1.0 - self.tokens)
        }
    }

    /// Takes a token for a run starting `now`.
    pub(crate) fn take(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = (self.tokens - 1.0).max(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_data::model::BindingType;

    fn context(binding: &str, group: Option<&str>) -> BindingContext {
        BindingContext {
            binding: binding.to_owned(),
            type_: if group.is_some() {
                BindingType::Group
            } else {
                BindingType::Event
            },
            group: group.map(str::to_owned),
            watch_event: None,
            object: None,
            objects: vec![],
            snapshots: vec![],
            review: None,
        }
    }

    fn task(hook: usize, kind: TaskKind, binding: &str, group: Option<&str>) -> Task {
        Task {
            hook,
            kind,
            merge: true,
            contexts: vec![context(binding, group)],
            allow_failure: false,
            synchronizes: Vec::new(),
            queued_at: Instant::now(),
            trace: Default::default(),
            running: Vec::new(),
        }
    }

    fn bindings(task: &Task) -> Vec<&str> {
        task.contexts.iter().map(|c| c.binding.as_str()).collect()
    }

    #[test]
    fn only_the_run_of_tasks_of_the_head_hook_is_combined_whatever_their_binding() {
        // shell-operator's Test_CombineBindingContext_MultipleHooks: a schedule between
        // kubernetes events of the same hook is combined too; another hook stops it.
        let mut q = Queue::default();
        q.push(task(0, TaskKind::Event, "k1", None));
        q.push(task(0, TaskKind::Event, "k2", None));
        q.push(task(0, TaskKind::Schedule, "s", None));
        q.push(task(0, TaskKind::Event, "k3", None));
        q.push(task(1, TaskKind::Event, "b1", None));
        q.push(task(0, TaskKind::Event, "k4", None));
        assert_eq!(bindings(&q.head().unwrap()), ["k1", "k2", "s", "k3"]);
        assert_eq!(q.len(), 3);
        q.done();
        assert_eq!(bindings(&q.head().unwrap()), ["b1"]);
        q.done();
        assert_eq!(bindings(&q.head().unwrap()), ["k4"]);
        q.done();
        assert!(q.head().is_none());
        assert!(q.per_hook.is_empty());
    }

    #[test]
    fn a_grouped_context_is_dropped_only_when_the_next_has_its_group() {
        let mut q = Queue::default();
        for (binding, group) in [
            ("a", Some("g")),
            ("b", Some("g")),
            ("x", None),
            ("c", Some("g")),
            ("d", Some("h")),
            ("e", Some("h")),
        ] {
            q.push(task(0, TaskKind::Event, binding, group));
        }
        assert_eq!(bindings(&q.head().unwrap()), ["b", "x", "c", "e"]);
    }

    #[test]
    fn the_head_alone_says_whether_a_failure_is_allowed() {
        let mut q = Queue::default();
        q.push(Task {
            allow_failure: true,
            ..task(0, TaskKind::Schedule, "s", None)
        });
        q.push(task(0, TaskKind::Event, "k", None));
        assert!(q.head().unwrap().allow_failure);
        let mut q = Queue::default();
        q.push(task(0, TaskKind::Event, "k", None));
        q.push(Task {
            allow_failure: true,
            ..task(0, TaskKind::Schedule, "s", None)
        });
        assert!(!q.head().unwrap().allow_failure);
    }

    #[test]
    fn a_grouped_synchronization_takes_in_the_next_ones_and_releases_their_bindings() {
        let sync = |b: usize, binding: &str, group: Option<&str>| Task {
            synchronizes: vec![b],
            ..task(0, TaskKind::Synchronization, binding, group)
        };
        let mut q = Queue::default();
        q.push(sync(0, "pods", Some("g")));
        q.push(sync(1, "nodes", Some("g")));
        q.push(sync(2, "plain", None));
        q.push(task(0, TaskKind::Event, "pods", Some("g")));
        let head = q.head().unwrap();
        assert_eq!(bindings(&head), ["nodes", "plain"]);
        assert_eq!(head.synchronizes, [0, 1, 2]);
        q.done();
        assert_eq!(bindings(&q.head().unwrap()), ["pods"]);
    }

    #[test]
    fn an_on_startup_run_is_never_combined() {
        let mut q = Queue::default();
        q.push(task(0, TaskKind::OnStartup, "onStartup", None));
        q.push(task(0, TaskKind::Schedule, "s", None));
        q.push(task(0, TaskKind::Event, "k", None));
        assert_eq!(bindings(&q.head().unwrap()), ["onStartup"]);
        q.done();
        assert_eq!(bindings(&q.head().unwrap()), ["s", "k"]);
    }

    #[test]
    fn queues_that_fell_far_behind_compact_the_tasks_of_a_crowded_hook() {
        let mut q = Queue::default();
        q.push(task(1, TaskKind::Event, "running", None));
        for i in 0..COMPACTION_THRESHOLD {
            let group = (i % 10 == 0).then_some(if i % 20 == 0 { "g" } else { "h" });
            q.push(task(0, TaskKind::Event, &format!("e{i}"), group));
            if i + 1 < COMPACTION_THRESHOLD {
                q.push(task(2, TaskKind::Event, &format!("o{i}"), None));
            }
        }
        // Hook 0 reached the threshold and its tasks were folded into its first one;
        // hook 2, one task short, was not.
        assert_eq!(q.len(), 1 + 1 + COMPACTION_THRESHOLD - 1);
        let tasks: Vec<&Task> = q.tasks().collect();
        assert_eq!(bindings(tasks[0]), ["running"]);
        let merged = bindings(tasks[1]);
        assert_eq!(merged.len(), 90 + 2, "{merged:?}");
        assert_eq!(merged[..2], ["e1", "e2"]);
        assert_eq!(merged[90..], ["e80", "e90"], "the last of g, then of h");
        assert_eq!(bindings(tasks[2]), ["o0"]);
        assert_eq!(q.per_hook[&0], 1);
        assert_eq!(q.per_hook[&2], COMPACTION_THRESHOLD - 1);
    }

    #[test]
    fn a_batch_out_of_time_is_halved_and_takes_in_no_more_tasks() {
        let mut q = Queue::default();
        for i in 0..5 {
            q.push(task(0, TaskKind::Event, &format!("e{i}"), None));
        }
        let names =
            |t: &Task| -> Vec<String> { bindings(t).into_iter().map(str::to_owned).collect() };
        // What the engine does with a run that failed: the contexts go back to the head.
        let fail = |q: &mut Queue, run: Task| {
            q.restore_head(run.contexts);
            q.split_head()
        };
        let run = q.head().unwrap();
        assert_eq!(run.contexts.len(), 5);
        assert!(
            !q.split_head(),
            "a head whose run holds its contexts is not split"
        );
        assert!(fail(&mut q, run));
        q.failed(Duration::ZERO);
        // New events wait behind both halves, and are combined among themselves.
        q.push(task(0, TaskKind::Event, "late-1", None));
        q.push(task(0, TaskKind::Event, "late-2", None));
        let run = q.head().unwrap();
        assert_eq!(names(&run), ["e0", "e1"]);
        assert!(fail(&mut q, run));
        let run = q.head().unwrap();
        assert_eq!(names(&run), ["e0"]);
        assert!(!fail(&mut q, run), "one context is not split");
        q.done();
        assert_eq!(names(&q.head().unwrap()), ["e1"]);
        q.done();
        assert_eq!(names(&q.head().unwrap()), ["e2", "e3", "e4"]);
        q.done();
        assert_eq!(names(&q.head().unwrap()), ["late-1", "late-2"]);
    }

    #[test]
    fn tasks_of_v0_hooks_are_never_combined() {
        let mut q = Queue::default();
        for binding in ["a1", "a2"] {
            q.push(Task {
                merge: false,
                ..task(0, TaskKind::Event, binding, None)
            });
        }
        assert_eq!(bindings(&q.head().unwrap()), ["a1"]);
        q.done();
        assert_eq!(bindings(&q.head().unwrap()), ["a2"]);
    }

    #[test]
    fn an_ungrouped_synchronization_takes_in_nothing() {
        let mut q = Queue::default();
        q.push(task(0, TaskKind::Synchronization, "pods", None));
        q.push(task(0, TaskKind::Synchronization, "nodes", None));
        assert_eq!(bindings(&q.head().unwrap()), ["pods"]);
        q.done();
        assert_eq!(bindings(&q.head().unwrap()), ["nodes"]);
    }

    #[test]
    fn a_failed_head_stays_and_backs_off_like_shell_operator() {
        let mut q = Queue::default();
        q.push(task(0, TaskKind::Event, "a", None));
        let delays: Vec<u64> = (0..8)
            .map(|_| {
                let run = q.head().unwrap();
                q.restore_head(run.contexts);
                q.failed(Duration::ZERO).as_secs()
            })
            .collect();
        assert_eq!(delays, [5, 6, 7, 9, 13, 21, 32, 32]);
        assert_eq!(q.len(), 1);
        assert_eq!(
            backoff(3, Duration::from_millis(600)),
            Duration::from_millis(7_600)
        );
        q.done();
        assert_eq!(q.failures(), 0);
    }

    #[test]
    fn events_arriving_during_a_failure_join_the_retried_head() {
        let mut q = Queue::default();
        q.push(task(0, TaskKind::Event, "a1", None));
        let run = q.head().unwrap();
        q.restore_head(run.contexts);
        q.failed(Duration::ZERO);
        q.push(task(0, TaskKind::Event, "a2", None));
        assert_eq!(bindings(&q.head().unwrap()), ["a1", "a2"]);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn a_running_head_lends_its_contexts_to_the_run_and_a_failed_one_gets_them_back() {
        let mut q = Queue::default();
        q.push(task(0, TaskKind::Event, "a1", None));
        q.push(task(0, TaskKind::Event, "a2", None));
        let run = q.head().unwrap();
        assert_eq!(bindings(&run), ["a1", "a2"]);
        // While it runs, the queued head holds no copy, only what it runs for.
        let queued = q.tasks().next().unwrap();
        assert!(queued.contexts.is_empty());
        assert_eq!(queued.running, ["a1", "a2"]);
        // Tasks queued meanwhile wait behind it; the failed head gets its contexts back
        // and splits, and neither half takes in anything more.
        q.push(task(0, TaskKind::Event, "a3", None));
        q.restore_head(run.contexts);
        assert!(q.tasks().next().unwrap().running.is_empty());
        assert!(q.split_head());
        q.failed(Duration::ZERO);
        assert_eq!(bindings(&q.head().unwrap()), ["a1"]);
        q.done();
        assert_eq!(bindings(&q.head().unwrap()), ["a2"]);
        q.done();
        assert_eq!(bindings(&q.head().unwrap()), ["a3"]);
        q.done();
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn token_bucket_allows_a_burst_then_one_per_interval() {
        let mut limit = RateLimit::new(Duration::from_secs(10), 2);
        let start = Instant::now();
        assert_eq!(limit.wait(start), Duration::ZERO);
        limit.take(start);
        assert_eq!(limit.wait(start), Duration::ZERO);
        limit.take(start);
        assert_eq!(limit.wait(start), Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(limit.wait(Instant::now()), Duration::from_secs(6));
        tokio::time::advance(Duration::from_secs(6)).await;
        assert_eq!(limit.wait(Instant::now()), Duration::ZERO);
    }
}
