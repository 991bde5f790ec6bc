//! Named task queues: shell-operator's queue semantics, with the clock abstracted
//! through tokio's time so tests run on a paused clock.
//!
//! - Each queue is strictly sequential; queues run in parallel with each other.
//! - Before a run, the tasks that follow the head and belong to the same hook (and
//!   task type) are merged into it, contexts concatenated; for grouped bindings only
//!   the last context per group is kept. Synchronization tasks are never merged, nor
//!   are the tasks of hooks declared in the v0 format (shell-operator merges for v1).
//! - A failing task stays at the head and is retried after a backoff growing from 5 s
//!   to 32 s ([`backoff`]); `allowFailure` turns a failure into a counted success.
//! - A hook's `executionMinInterval`/`executionBurst` is a token bucket ([`RateLimit`]):
//!   while the bucket is empty the task waits at the head and later tasks keep being
//!   merged into it.

use operon_data::model::BindingContext;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

/// What kind of work a task is; only tasks of the same kind are merged.
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

/// One queued hook run.
#[derive(Debug, Clone)]
pub(crate) struct Task {
    /// Index of the hook in the engine.
    pub(crate) hook: usize,
    /// The kind of task.
    pub(crate) kind: TaskKind,
    /// Whether later tasks of the same hook and kind may be merged into this one (not
    /// for hooks declared in the v0 format, whose every event is a run of its own).
    pub(crate) merge: bool,
    /// The binding contexts of the run, oldest first.
    pub(crate) contexts: Vec<BindingContext>,
    /// Whether a failure is allowed (every merged binding allows it).
    pub(crate) allow_failure: bool,
    /// For synchronization tasks: the binding whose events wait for it.
    pub(crate) synchronizes: Option<usize>,
    /// When the task was queued (for the wait-time metric).
    pub(crate) queued_at: Instant,
    /// The spans of its trace (none with export off).
    pub(crate) trace: super::engine::TaskTrace,
}

/// A named queue.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    tasks: VecDeque<Task>,
    /// Consecutive failures of the task at the head.
    failures: u32,
}

impl Queue {
    /// Appends a task.
    pub(crate) fn push(&mut self, task: Task) {
        self.tasks.push_back(task);
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
    /// returns a copy of the head to run. The head stays queued until [`Queue::done`]
    /// or [`Queue::failed`] says what happened.
    pub(crate) fn head(&mut self) -> Option<Task> {
        let mut head = self.tasks.pop_front()?;
        if head.kind != TaskKind::Synchronization && head.merge {
            let mut rest = VecDeque::with_capacity(self.tasks.len());
            while let Some(task) = self.tasks.pop_front() {
                if task.hook == head.hook && task.kind == head.kind && task.merge {
                    head.allow_failure &= task.allow_failure;
                    head.contexts.extend(task.contexts);
                } else {
                    rest.push_back(task);
                }
            }
            self.tasks = rest;
            compact_groups(&mut head.contexts);
        }
        head.trace.taken();
        let copy = head.clone();
        self.tasks.push_front(head);
        Some(copy)
    }

    /// The head ran successfully (or its failure was allowed): drop it.
    pub(crate) fn done(&mut self) {
        self.tasks.pop_front();
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
            ..head.clone()
        };
        self.tasks.insert(1, second);
        true
    }

    /// The head failed: it stays; returns how long to wait before retrying it.
    pub(crate) fn failed(&mut self, jitter: Duration) -> Duration {
        self.failures = self.failures.saturating_add(1);
        backoff(self.failures, jitter)
    }
}

/// For grouped contexts only the last one per group is kept, in the position of that
/// last one; ungrouped contexts are all kept.
pub(crate) fn compact_groups(contexts: &mut Vec<BindingContext>) {
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<BindingContext> = Vec::with_capacity(contexts.len());
    for context in contexts.drain(..).rev() {
        match &context.group {
            Some(group) => {
                if seen.insert(group.clone()) {
                    kept.push(context);
                }
            }
            None => kept.push(context),
        }
    }
    kept.reverse();
    *contexts = kept;
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
            synchronizes: None,
            queued_at: Instant::now(),
            trace: Default::default(),
        }
    }

    fn bindings(task: &Task) -> Vec<&str> {
        task.contexts.iter().map(|c| c.binding.as_str()).collect()
    }

    #[test]
    fn tasks_of_the_same_hook_are_combined_others_keep_their_order() {
        let mut q = Queue::default();
        q.push(task(0, TaskKind::Event, "a1", None));
        q.push(task(1, TaskKind::Event, "b1", None));
        q.push(task(0, TaskKind::Event, "a2", None));
        q.push(task(0, TaskKind::Schedule, "s", None));
        q.push(task(0, TaskKind::Event, "a3", None));
        let head = q.head().unwrap();
        assert_eq!(bindings(&head), ["a1", "a2", "a3"]);
        q.done();
        assert_eq!(bindings(&q.head().unwrap()), ["b1"]);
        q.done();
        assert_eq!(bindings(&q.head().unwrap()), ["s"]);
        q.done();
        assert!(q.head().is_none());
    }

    #[test]
    fn grouped_contexts_keep_the_last_per_group() {
        let mut q = Queue::default();
        q.push(task(0, TaskKind::Event, "pods", Some("g")));
        q.push(task(0, TaskKind::Event, "x", None));
        q.push(task(0, TaskKind::Event, "nodes", Some("g")));
        q.push(task(0, TaskKind::Event, "other", Some("h")));
        let head = q.head().unwrap();
        assert_eq!(bindings(&head), ["x", "nodes", "other"]);
    }

    #[test]
    fn a_batch_out_of_time_is_halved_and_takes_in_no_more_tasks() {
        let mut q = Queue::default();
        for i in 0..5 {
            q.push(task(0, TaskKind::Event, &format!("e{i}"), None));
        }
        assert_eq!(q.head().unwrap().contexts.len(), 5);
        assert!(q.split_head());
        q.failed(Duration::ZERO);
        // New events wait behind both halves, and are combined among themselves.
        q.push(task(0, TaskKind::Event, "late-1", None));
        q.push(task(0, TaskKind::Event, "late-2", None));
        let names =
            |t: &Task| -> Vec<String> { bindings(t).into_iter().map(str::to_owned).collect() };
        assert_eq!(names(&q.head().unwrap()), ["e0", "e1"]);
        assert!(q.split_head());
        assert_eq!(names(&q.head().unwrap()), ["e0"]);
        assert!(!q.split_head(), "one context is not split");
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
    fn synchronization_tasks_are_never_combined() {
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
                q.head().unwrap();
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
        q.head().unwrap();
        q.failed(Duration::ZERO);
        q.push(task(0, TaskKind::Event, "a2", None));
        assert_eq!(bindings(&q.head().unwrap()), ["a1", "a2"]);
        assert_eq!(q.len(), 1);
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
