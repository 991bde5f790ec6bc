//! The hook engine's spans: one trace per event, schedule, startup, Synchronization or
//! review, with a span for each stage its time goes to.
//!
//! ```text
//! hook.event (root: hook, binding, event, namespace, name, watch.delay_us)
//! ├── hook.filter        the binding's jq filter on the object
//! ├── hook.queue_wait    queued until a worker takes the task (merging ends it too)
//! └── hook.run           the hook's run (hook, queue, contexts, outcome)
//!     └── hook.patch     each patch applied, in order (index, operation, error)
//! ```
//!
//! Schedules, onStartup and Synchronization runs have `hook.schedule`,
//! `hook.startup` and `hook.synchronization` roots; an admission or conversion review
//! has `hook.review`. Every span has the target [`TARGET`] at the `TRACE` level: with
//! export off no subscriber enables it and every `Span` here is `Span::none()`.
//!
//! Each function first asks whether the spans are made at all (one comparison of
//! levels) or whether its parent is disabled, before `trace_span!`: kube and oci-client
//! turn on tracing's `log` feature, under which a disabled span still evaluates its
//! fields and hands them to `log` while no global subscriber was ever set (the engine
//! as a library, a bench). Per event that was the object's namespace and name looked
//! up, a clock read and a record of six fields, for nothing.

use super::TaskKind;
use operon_data::model::WatchEvent;
use operon_runner::trace::TARGET;
use std::time::Instant;
use tracing::Span;
use tracing::field::Empty;

/// The spans a queued task carries: the root of its trace and its wait in a queue.
#[derive(Debug, Clone)]
pub(crate) struct TaskTrace {
    /// The event (or schedule, startup, Synchronization) the task runs for.
    pub(crate) root: Span,
    /// Open while the task waits in its queue.
    pub(crate) wait: Span,
}

impl Default for TaskTrace {
    fn default() -> Self {
        Self {
            root: Span::none(),
            wait: Span::none(),
        }
    }
}

impl TaskTrace {
    /// A task whose trace starts at `root`.
    pub(crate) fn new(root: Span) -> Self {
        Self {
            root,
            wait: Span::none(),
        }
    }

    /// The root of a task of `kind` that no watch event started.
    pub(crate) fn of_kind(kind: TaskKind, hook: &str, binding: &str) -> Self {
        if !made() {
            return Self::default();
        }
        let root = match kind {
            TaskKind::OnStartup => tracing::trace_span!(target: TARGET, parent: None,
                "hook.startup", hook, binding),
            TaskKind::Schedule => tracing::trace_span!(target: TARGET, parent: None,
                "hook.schedule", hook, binding),
            TaskKind::Synchronization => tracing::trace_span!(target: TARGET, parent: None,
                "hook.synchronization", hook, binding),
            TaskKind::Event => tracing::trace_span!(target: TARGET, parent: None,
                "hook.event", hook, binding),
        };
        Self::new(root)
    }

    /// The task enters `queue`: its wait starts.
    pub(crate) fn queued(&mut self, queue: &str) {
        if !self.root.is_disabled() {
            self.wait = tracing::trace_span!(target: TARGET, parent: &self.root,
                "hook.queue_wait", queue);
        }
    }

    /// A worker took the task (or merged it into the head): its wait ends.
    pub(crate) fn taken(&mut self) {
        self.wait = Span::none();
    }
}

/// Whether the engine's spans are made at all: whether the current subscriber enables
/// [`TARGET`] at `TRACE`.
fn made() -> bool {
    tracing::span_enabled!(target: TARGET, tracing::Level::TRACE)
}

/// The root of an event's trace: binding `binding` of `hook` got `kind` for the
/// object at `namespace`/`name`; the watch received it at `received`.
pub(crate) fn event(
    hook: &str,
    binding: &str,
    kind: WatchEvent,
    object: &serde_json::Value,
    received: Instant,
) -> Span {
    if !made() {
        return Span::none();
    }
    let delay = received.elapsed();
    tracing::trace_span!(target: TARGET, parent: None, "hook.event",
        hook,
        binding,
        event = kind.as_str(),
        namespace = object.pointer("/metadata/namespace").and_then(|v| v.as_str()).unwrap_or(""),
        name = object.pointer("/metadata/name").and_then(|v| v.as_str()).unwrap_or(""),
        watch.delay_us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX),
        dropped = Empty,
    )
}

/// The binding's jq filter on the object of the event `root` is for.
pub(crate) fn filter(root: &Span) -> Span {
    if root.is_disabled() {
        return Span::none();
    }
    tracing::trace_span!(target: TARGET, parent: root, "hook.filter")
}

/// Records how a run ended on its span: `outcome`, and the error of a failed one.
pub(crate) fn ended<T, E: std::fmt::Display>(
    span: &Span,
    outcome: &Result<T, E>,
    apply_error: Option<&super::ApplyError>,
) {
    if span.is_disabled() {
        return;
    }
    match (outcome, apply_error) {
        (Ok(_), None) => {
            span.record("outcome", "succeeded");
        }
        (Err(e), _) => {
            span.record("outcome", "failed");
            failed(span, e)
        }
        (Ok(_), Some(e)) => {
            span.record("outcome", "failed");
            failed(span, e)
        }
    }
}

/// A run of `hook` on `queue` with `contexts` binding contexts, in the trace of `root`.
pub(crate) fn run(root: &Span, hook: &str, queue: &str, binding: &str, contexts: usize) -> Span {
    if root.is_disabled() {
        return Span::none();
    }
    tracing::trace_span!(target: TARGET, parent: root, "hook.run",
        hook, queue, binding, contexts,
        outcome = Empty,
        otel.status_code = Empty,
        error = Empty,
    )
}

/// Patch `index` (from 1) of a run, an `operation` (`MergePatch`...).
pub(crate) fn patch(run: &Span, index: usize, operation: &str) -> Span {
    if run.is_disabled() {
        return Span::none();
    }
    tracing::trace_span!(target: TARGET, parent: run, "hook.patch",
        index, operation,
        otel.status_code = Empty,
        error = Empty,
    )
}

/// Marks `span` failed with `error` (the exporter shows it as the span's status).
pub(crate) fn failed(span: &Span, error: &dyn std::fmt::Display) {
    if !span.is_disabled() {
        span.record("otel.status_code", "ERROR");
        span.record("error", tracing::field::display(error));
    }
}

/// An admission or conversion review of binding `binding` of `hook`, asked by `caller`
/// (`webhook` or `audit`).
pub(crate) fn review(hook: &str, binding: &str, caller: &str) -> Span {
    if !made() {
        return Span::none();
    }
    tracing::trace_span!(target: TARGET, "hook.review", hook, binding, caller)
}
