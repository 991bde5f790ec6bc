//! Prometheus metrics: the engine's own metrics (shell-operator's, under `operon_`) and
//! the metrics hooks submit.
//!
//! [`Metrics`] owns the registry `/metrics` serves and typed handles to the built-in
//! metrics; [`HookMetrics`] keeps what hooks write, served on `/metrics/hooks` as in
//! shell-operator, so a hook can never shadow or break an engine metric.
//!
//! The hot path (about 20,000 hook runs per second) need not look series up by their
//! labels: the engine can ask once per binding for a [`BindingMetrics`] (and keep the
//! gauge of each queue), whose handles are plain atomics to update.

mod hooks;

pub use hooks::{
    HOOK_LABEL, HookMetrics, MetricError, MetricKind, PreparedMetrics, RESERVED_PREFIX,
};

use prometheus::core::{Collector, MetricVec, MetricVecBuilder};
use prometheus::{
    Counter, CounterVec, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter,
    IntCounterVec, IntGaugeVec, Opts, Registry,
};
use std::time::Duration;

/// Buckets of `operon_hook_run_seconds`: a wasm hook runs in well under a millisecond,
/// a script in seconds, and the default timeout is a minute.
const RUN_SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0, 300.0,
];

/// Buckets of `operon_kube_jq_filter_duration_seconds`: a compiled filter on one
/// object takes microseconds; a tenth of a second is already pathological.
const JQ_SECONDS_BUCKETS: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,
];

/// Buckets of `operon_kube_event_duration_seconds`: filtering and queueing take
/// microseconds; what makes it long is the wait for the engine (a watch's events are
/// handled one at a time).
const EVENT_SECONDS_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0,
];

/// Buckets of `operon_webhook_request_duration_seconds`: a wasm hook answers in a
/// millisecond, a script in tens; the API server gives up after `timeoutSeconds` (10 s
/// by default).
const WEBHOOK_SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Labels of the per-binding metrics, in shell-operator's order.
const BINDING_LABELS: [&str; 3] = ["hook", "binding", "queue"];

/// The engine's metrics and the hooks' metrics.
///
/// Each built-in metric is a field, so the engine can reach the one it updates; the
/// number of label values is part of each field's type, so a call with the wrong
/// labels fails to compile instead of panicking in the `prometheus` crate at run time.
/// Label values come in the order the field's documentation lists.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// What `/metrics` serves; other parts of the engine register their metrics here.
    registry: Registry,
    /// `operon_hook_run_seconds{hook, binding, queue}`: run durations.
    pub(crate) hook_run_seconds: Labeled<HistogramVec, 3>,
    /// `operon_hook_run_errors_total{hook, binding, queue}`: failed runs, retried.
    pub(crate) hook_run_errors_total: Labeled<IntCounterVec, 3>,
    /// `operon_hook_run_allowed_errors_total{hook, binding, queue}`: failed runs of
    /// bindings with `allowFailure`.
    pub(crate) hook_run_allowed_errors_total: Labeled<IntCounterVec, 3>,
    /// `operon_hook_run_success_total{hook, binding, queue}`: successful runs.
    pub(crate) hook_run_success_total: Labeled<IntCounterVec, 3>,
    /// `operon_tasks_queue_length{queue, hook}`: tasks waiting per queue. `hook` is
    /// empty for the queues of the hooks directory (shared by its hooks, as in
    /// shell-operator) and names the Hook object (`Hook/<ns>/<name>`) for the queues of
    /// its own engine, so that two engines' queues of one name are two series.
    pub tasks_queue_length: QueueGauge,
    /// `operon_task_wait_in_queue_seconds_total{hook, binding, queue}`: time tasks
    /// waited before running.
    pub(crate) task_wait_in_queue_seconds_total: Labeled<CounterVec, 3>,
    /// `operon_live_ticks_total`: grows every 10 seconds while the engine is alive.
    pub(crate) live_ticks: IntCounter,
    /// `operon_kube_jq_filter_duration_seconds{hook, binding, queue}`: jq filter runs.
    pub(crate) kube_jq_filter_duration_seconds: Labeled<HistogramVec, 3>,
    /// `operon_kube_event_duration_seconds{hook, binding, queue}`: from the cluster
    /// layer having a watch event to the binding having handled it (filtered, the
    /// snapshot updated, a run queued).
    pub(crate) kube_event_duration_seconds: Labeled<HistogramVec, 3>,
    /// `operon_kube_snapshot_objects{hook, binding}`: objects per snapshot.
    pub(crate) kube_snapshot_objects: Labeled<IntGaugeVec, 2>,
    /// `operon_kube_snapshot_bytes{hook, binding}`: bytes a snapshot holds.
    pub(crate) kube_snapshot_bytes: Labeled<IntGaugeVec, 2>,
    /// `operon_webhook_requests_total{kind, webhook, outcome}`: reviews answered, by
    /// `kind` (`validating`, `mutating`, `conversion`), `webhook` (`HOOK/BINDING`, or the
    /// CRD of a conversion) and `outcome`: `allowed`, `denied`, `would_deny` (a denial of
    /// a `Warn` or `DryRun` binding: the request was allowed), `converted`, or `error`
    /// (the hook failed, timed out or gave no answer: under `Deny` the API server got
    /// code 500).
    pub webhook_requests_total: Labeled<IntCounterVec, 3>,
    /// `operon_webhook_request_duration_seconds{kind, webhook}`: from the review's
    /// arrival to its answer.
    pub webhook_request_duration_seconds: Labeled<HistogramVec, 2>,
    /// `operon_shadow_runs_total{shadow, live, result}`: runs of shadow hooks, by
    /// `result`: `same` (patches and answers as the live hook's), `diverged`, or
    /// `skipped` (the shadow had too many runs in flight).
    pub shadow_runs_total: Labeled<IntCounterVec, 3>,
    /// `operon_shadow_divergences_total{shadow, live, binding, difference}`: what
    /// diverged: `outcome`, `patches`, `allowed`, `admission_patch` or `conversion`.
    pub shadow_divergences_total: Labeled<IntCounterVec, 4>,
    /// `operon_reloads_total{source, outcome}`: reloads of a tree while the process
    /// runs, by `source` (`hooks_directory`, `modules`) and `outcome`: `applied`, or
    /// `refused` (the tree does not load; the one in use stays).
    pub reloads_total: Labeled<IntCounterVec, 2>,
    /// `operon_reload_last_applied_timestamp_seconds{source}`: when the tree in use of
    /// `source` was loaded (at start, or by its last applied reload).
    pub reload_last_applied_timestamp_seconds: Labeled<GaugeVec, 1>,
    /// What hooks write, served apart on `/metrics/hooks`.
    pub hooks: HookMetrics,
}

/// A metric with `N` labels: the `prometheus` vector, with its label count checked
/// by the compiler.
#[derive(Debug, Clone)]
pub struct Labeled<V, const N: usize>(V);

impl<T: MetricVecBuilder, const N: usize> Labeled<MetricVec<T>, N> {
    /// The series with these label values, created on first use. Keep the returned
    /// handle where a series is updated often: this call hashes the values.
    pub fn with_label_values(&self, values: &[&str; N]) -> T::M {
        self.0.with_label_values(values)
    }

    /// Removes the series with these label values, if it exists.
    pub(crate) fn remove_label_values(&self, values: &[&str; N]) {
        // A series never touched is absent; that is not an error worth reporting.
        let _ = self.0.remove_label_values(values);
    }
}

/// The queue-length gauge of one hook engine: `with_label_values(&[queue])` adds the
/// engine's `hook` label.
#[derive(Debug, Clone)]
pub struct QueueGauge {
    gauge: IntGaugeVec,
    hook: std::sync::Arc<str>,
}

impl QueueGauge {
    /// The series of `queue` of this engine.
    pub(crate) fn with_label_values(&self, [queue]: &[&str; 1]) -> prometheus::IntGauge {
        self.gauge.with_label_values(&[*queue, &*self.hook])
    }

    /// Removes the series of `queue` of this engine, if it exists.
    pub fn remove_label_values(&self, [queue]: &[&str; 1]) {
        // A series never touched is absent; that is not an error worth reporting.
        let _ = self.gauge.remove_label_values(&[*queue, &*self.hook]);
    }
}

/// How a hook run ended, for the run counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// The run succeeded (`operon_hook_run_success_total`).
    Success,
    /// The run failed and will be retried (`operon_hook_run_errors_total`).
    Failed,
    /// The run failed and its binding allows failure
    /// (`operon_hook_run_allowed_errors_total`).
    AllowedFailure,
}

/// The metrics of one (hook, binding, queue), resolved once so that recording is a few
/// atomic operations.
#[derive(Debug, Clone)]
pub struct BindingMetrics {
    run_seconds: Histogram,
    errors: IntCounter,
    allowed_errors: IntCounter,
    success: IntCounter,
    wait_in_queue_seconds: Counter,
    jq_filter_seconds: Histogram,
    event_seconds: Histogram,
}

impl BindingMetrics {
    /// Records one run: its duration and how it ended.
    pub fn run(&self, elapsed: Duration, outcome: RunOutcome) {
        self.run_seconds.observe(elapsed.as_secs_f64());
        match outcome {
            RunOutcome::Success => self.success.inc(),
            RunOutcome::Failed => self.errors.inc(),
            RunOutcome::AllowedFailure => self.allowed_errors.inc(),
        }
    }

    /// Records how long a task waited in its queue before it ran.
    pub(crate) fn waited(&self, waited: Duration) {
        self.wait_in_queue_seconds.inc_by(waited.as_secs_f64());
    }

    /// Records one run of the binding's jq filter.
    pub(crate) fn jq_filter(&self, elapsed: Duration) {
        self.jq_filter_seconds.observe(elapsed.as_secs_f64());
    }

    /// Records how long one watch event took from the cluster layer to handled.
    pub(crate) fn event(&self, elapsed: Duration) {
        self.event_seconds.observe(elapsed.as_secs_f64());
    }
}

impl Metrics {
    /// A registry with every built-in metric registered, and an empty hook store.
    pub fn new() -> Result<Self, MetricError> {
        let registry = Registry::new();
        let r = &registry;
        let binding_histogram = |name: &str, help: &str, buckets: &[f64]| {
            let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
            labeled(r, HistogramVec::new(opts, &BINDING_LABELS))
        };
        let binding_counter = |name: &str, help: &str| {
            labeled(
                r,
                IntCounterVec::new(Opts::new(name, help), &BINDING_LABELS),
            )
        };
        let hook_run_seconds = binding_histogram(
            "operon_hook_run_seconds",
            "How long hook runs took.",
            RUN_SECONDS_BUCKETS,
        )?;
        let hook_run_errors_total = binding_counter(
            "operon_hook_run_errors_total",
            "Hook runs that failed and are retried.",
        )?;
        let hook_run_allowed_errors_total = binding_counter(
            "operon_hook_run_allowed_errors_total",
            "Hook runs that failed on a binding with allowFailure.",
        )?;
        let hook_run_success_total =
            binding_counter("operon_hook_run_success_total", "Hook runs that succeeded.")?;
        let tasks_queue_length = QueueGauge {
            gauge: register(
                r,
                IntGaugeVec::new(
                    Opts::new(
                        "operon_tasks_queue_length",
                        "Tasks waiting in each queue (hook: the Hook object whose engine \
                         the queue is, empty for the hooks directory).",
                    ),
                    &["queue", "hook"],
                ),
            )?,
            hook: "".into(),
        };
        let task_wait_in_queue_seconds_total = labeled(
            r,
            CounterVec::new(
                Opts::new(
                    "operon_task_wait_in_queue_seconds_total",
                    "Seconds tasks waited in their queue before running.",
                ),
                &BINDING_LABELS,
            ),
        )?;
        let live_ticks = register(
            r,
            IntCounter::new(
                "operon_live_ticks_total",
                "Grows every 10 seconds while the engine is alive.",
            ),
        )?;
        let kube_jq_filter_duration_seconds = binding_histogram(
            "operon_kube_jq_filter_duration_seconds",
            "How long jq filters of kubernetes bindings took per object.",
            JQ_SECONDS_BUCKETS,
        )?;
        let kube_event_duration_seconds = binding_histogram(
            "operon_kube_event_duration_seconds",
            "How long watch events took from the API client to handled by a kubernetes binding (filtered, snapshot updated, run queued).",
            EVENT_SECONDS_BUCKETS,
        )?;
        let kube_snapshot_objects = labeled(
            r,
            IntGaugeVec::new(
                Opts::new(
                    "operon_kube_snapshot_objects",
                    "Objects in the snapshot of each kubernetes binding.",
                ),
                &["hook", "binding"],
            ),
        )?;
        let kube_snapshot_bytes = labeled(
            r,
            IntGaugeVec::new(
                Opts::new(
                    "operon_kube_snapshot_bytes",
                    "Bytes held by the snapshot of each kubernetes binding: object keys, filter results, full objects where kept, and per-object bookkeeping.",
                ),
                &["hook", "binding"],
            ),
        )?;
        let webhook_requests_total = labeled(
            r,
            IntCounterVec::new(
                Opts::new(
                    "operon_webhook_requests_total",
                    "Admission and conversion reviews answered, by outcome: allowed, denied, would_deny (denied by a Warn or DryRun binding, so allowed), converted, or error (the hook failed, timed out or gave no answer).",
                ),
                &["kind", "webhook", "outcome"],
            ),
        )?;
        let webhook_request_duration_seconds = labeled(
            r,
            HistogramVec::new(
                HistogramOpts::new(
                    "operon_webhook_request_duration_seconds",
                    "How long answering an admission or conversion review took.",
                )
                .buckets(WEBHOOK_SECONDS_BUCKETS.to_vec()),
                &["kind", "webhook"],
            ),
        )?;
        let reloads_total = labeled(
            r,
            IntCounterVec::new(
                Opts::new(
                    "operon_reloads_total",
                    "Reloads of the hooks directory or of the modules while the process runs, by outcome: applied, or refused (the tree does not load; the one in use stays).",
                ),
                &["source", "outcome"],
            ),
        )?;
        let reload_last_applied_timestamp_seconds = labeled(
            r,
            GaugeVec::new(
                Opts::new(
                    "operon_reload_last_applied_timestamp_seconds",
                    "When the hooks directory or the modules in use were loaded (at start or by the last applied reload), in seconds since the epoch.",
                ),
                &["source"],
            ),
        )?;
        let shadow_runs_total = labeled(
            r,
            IntCounterVec::new(
                Opts::new(
                    "operon_shadow_runs_total",
                    "Runs of shadow hooks beside their live hook, by result: same, diverged, or skipped (too many runs in flight).",
                ),
                &["shadow", "live", "result"],
            ),
        )?;
        let shadow_divergences_total = labeled(
            r,
            IntCounterVec::new(
                Opts::new(
                    "operon_shadow_divergences_total",
                    "Differences between a shadow hook's run and its live hook's, by what differed: outcome, patches, allowed, admission_patch or conversion.",
                ),
                &["shadow", "live", "binding", "difference"],
            ),
        )?;
        Ok(Self {
            hook_run_seconds,
            hook_run_errors_total,
            hook_run_allowed_errors_total,
            hook_run_success_total,
            tasks_queue_length,
            task_wait_in_queue_seconds_total,
            live_ticks,
            kube_jq_filter_duration_seconds,
            kube_event_duration_seconds,
            kube_snapshot_objects,
            kube_snapshot_bytes,
            webhook_requests_total,
            webhook_request_duration_seconds,
            shadow_runs_total,
            shadow_divergences_total,
            reloads_total,
            reload_last_applied_timestamp_seconds,
            hooks: HookMetrics::new()?,
            registry,
        })
    }

    /// The handles of one binding's metrics. Ask once per binding (at load) and keep
    /// them: recording through them never looks a series up.
    pub fn binding(&self, hook: &str, binding: &str, queue: &str) -> BindingMetrics {
        let labels = [hook, binding, queue];
        BindingMetrics {
            run_seconds: self.hook_run_seconds.with_label_values(&labels),
            errors: self.hook_run_errors_total.with_label_values(&labels),
            allowed_errors: self
                .hook_run_allowed_errors_total
                .with_label_values(&labels),
            success: self.hook_run_success_total.with_label_values(&labels),
            wait_in_queue_seconds: self
                .task_wait_in_queue_seconds_total
                .with_label_values(&labels),
            jq_filter_seconds: self
                .kube_jq_filter_duration_seconds
                .with_label_values(&labels),
            event_seconds: self.kube_event_duration_seconds.with_label_values(&labels),
        }
    }

    /// The same metrics for the engine of the Hook object `hook` (`Hook/<ns>/<name>`):
    /// its queues' lengths are series of their own.
    pub fn for_hook_object(&self, hook: &str) -> Self {
        let mut scoped = self.clone();
        scoped.tasks_queue_length.hook = hook.into();
        scoped
    }

    /// Removes one binding's series, e.g. when its hook is unloaded.
    pub fn forget_binding(&self, hook: &str, binding: &str, queue: &str) {
        let labels = [hook, binding, queue];
        self.hook_run_seconds.remove_label_values(&labels);
        self.hook_run_errors_total.remove_label_values(&labels);
        self.hook_run_allowed_errors_total
            .remove_label_values(&labels);
        self.hook_run_success_total.remove_label_values(&labels);
        self.task_wait_in_queue_seconds_total
            .remove_label_values(&labels);
        self.kube_jq_filter_duration_seconds
            .remove_label_values(&labels);
        self.kube_event_duration_seconds
            .remove_label_values(&labels);
        self.kube_snapshot_objects
            .remove_label_values(&[hook, binding]);
        self.kube_snapshot_bytes
            .remove_label_values(&[hook, binding]);
    }

    /// The registry `/metrics` serves, for other parts of the engine to register
    /// their metrics in.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The engine's own collectors, one per metric family.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(self.hook_run_seconds.0.clone()),
            Box::new(self.hook_run_errors_total.0.clone()),
            Box::new(self.hook_run_allowed_errors_total.0.clone()),
            Box::new(self.hook_run_success_total.0.clone()),
            Box::new(self.tasks_queue_length.gauge.clone()),
            Box::new(self.task_wait_in_queue_seconds_total.0.clone()),
            Box::new(self.live_ticks.clone()),
            Box::new(self.kube_jq_filter_duration_seconds.0.clone()),
            Box::new(self.kube_event_duration_seconds.0.clone()),
            Box::new(self.kube_snapshot_objects.0.clone()),
            Box::new(self.kube_snapshot_bytes.0.clone()),
            Box::new(self.webhook_requests_total.0.clone()),
            Box::new(self.webhook_request_duration_seconds.0.clone()),
            Box::new(self.shadow_runs_total.0.clone()),
            Box::new(self.shadow_divergences_total.0.clone()),
            Box::new(self.reloads_total.0.clone()),
            Box::new(self.reload_last_applied_timestamp_seconds.0.clone()),
        ]
    }

    /// The engine's metrics in the Prometheus text format (what `/metrics` serves).
    pub fn render(&self) -> String {
        hooks::render(&self.registry)
    }

    /// The hooks' metrics in the Prometheus text format (what `/metrics/hooks`
    /// serves).
    pub fn render_hooks(&self) -> String {
        self.hooks.render()
    }
}

/// Everything `registry` gathers in the Prometheus text format (a process' own
/// registry: the agent's, say).
pub fn render(registry: &Registry) -> String {
    hooks::render(registry)
}

/// Registers `metric` (just built) in `registry` and returns it.
fn register<M: Collector + Clone + 'static>(
    registry: &Registry,
    metric: prometheus::Result<M>,
) -> Result<M, MetricError> {
    let metric = metric.map_err(MetricError::from)?;
    registry
        .register(Box::new(metric.clone()))
        .map_err(MetricError::from)?;
    Ok(metric)
}

/// Registers a vector with `N` labels.
fn labeled<T: MetricVecBuilder + 'static, const N: usize>(
    registry: &Registry,
    metric: prometheus::Result<MetricVec<T>>,
) -> Result<Labeled<MetricVec<T>, N>, MetricError> {
    register(registry, metric).map(Labeled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_data::model::{MetricOperation, Sample};

    #[test]
    fn built_ins_are_registered_with_shell_operator_names() {
        let metrics = Metrics::new().expect("metrics");
        let binding = metrics.binding("pods.sh", "pods", "main");
        binding.run(Duration::from_millis(3), RunOutcome::Success);
        binding.run(Duration::from_millis(3), RunOutcome::Failed);
        binding.run(Duration::from_millis(3), RunOutcome::AllowedFailure);
        binding.waited(Duration::from_millis(1500));
        binding.jq_filter(Duration::from_micros(20));
        binding.event(Duration::from_micros(80));
        metrics
            .tasks_queue_length
            .with_label_values(&["main"])
            .set(4);
        metrics
            .kube_snapshot_objects
            .with_label_values(&["pods.sh", "pods"])
            .set(12);
        metrics.live_ticks.inc();

        let text = metrics.render();
        for family in [
            "operon_hook_run_seconds histogram",
            "operon_hook_run_errors_total counter",
            "operon_hook_run_allowed_errors_total counter",
            "operon_hook_run_success_total counter",
            "operon_tasks_queue_length gauge",
            "operon_task_wait_in_queue_seconds_total counter",
            "operon_live_ticks_total counter",
            "operon_kube_jq_filter_duration_seconds histogram",
            "operon_kube_event_duration_seconds histogram",
            "operon_kube_snapshot_objects gauge",
        ] {
            assert!(
                text.lines().any(|l| l == format!("# TYPE {family}")),
                "missing {family:?} in\n{text}"
            );
        }
        for line in [
            r#"operon_hook_run_success_total{binding="pods",hook="pods.sh",queue="main"} 1"#,
            r#"operon_hook_run_errors_total{binding="pods",hook="pods.sh",queue="main"} 1"#,
            r#"operon_hook_run_allowed_errors_total{binding="pods",hook="pods.sh",queue="main"} 1"#,
            r#"operon_hook_run_seconds_count{binding="pods",hook="pods.sh",queue="main"} 3"#,
            r#"operon_task_wait_in_queue_seconds_total{binding="pods",hook="pods.sh",queue="main"} 1.5"#,
            r#"operon_kube_jq_filter_duration_seconds_count{binding="pods",hook="pods.sh",queue="main"} 1"#,
            r#"operon_kube_event_duration_seconds_count{binding="pods",hook="pods.sh",queue="main"} 1"#,
            r#"operon_tasks_queue_length{hook="",queue="main"} 4"#,
            r#"operon_kube_snapshot_objects{binding="pods",hook="pods.sh"} 12"#,
            "operon_live_ticks_total 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }

        metrics.forget_binding("pods.sh", "pods", "main");
        assert!(!metrics.render().contains("pods.sh"));
    }

    #[test]
    fn each_hook_objects_queues_are_series_of_their_own() {
        let metrics = Metrics::new().expect("metrics");
        let first = metrics.for_hook_object("Hook/demo/a");
        let second = metrics.for_hook_object("Hook/other/a");
        metrics
            .tasks_queue_length
            .with_label_values(&["main"])
            .set(1);
        first.tasks_queue_length.with_label_values(&["main"]).set(2);
        second
            .tasks_queue_length
            .with_label_values(&["main"])
            .set(3);
        let text = metrics.render();
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("operon_tasks_queue_length{"))
            .collect();
        assert_eq!(
            series,
            [
                r#"operon_tasks_queue_length{hook="",queue="main"} 1"#,
                r#"operon_tasks_queue_length{hook="Hook/demo/a",queue="main"} 2"#,
                r#"operon_tasks_queue_length{hook="Hook/other/a",queue="main"} 3"#,
            ],
            "{text}"
        );
        first.tasks_queue_length.remove_label_values(&["main"]);
        let text = metrics.render();
        assert!(!text.contains("Hook/demo/a"), "{text}");
        assert!(text.contains(r#"{hook="Hook/other/a",queue="main"} 3"#));
    }

    #[test]
    fn hook_metrics_are_served_apart() {
        let metrics = Metrics::new().expect("metrics");
        metrics
            .hooks
            .apply(
                "pods.sh",
                &[MetricOperation::Set(Sample {
                    name: "pods_ready".to_owned(),
                    value: 2.0,
                    labels: vec![],
                    group: None,
                })],
            )
            .expect("applied");
        assert!(
            metrics
                .render_hooks()
                .contains(r#"pods_ready{hook="pods.sh"} 2"#)
        );
        assert!(!metrics.render().contains("pods_ready"));
    }
}
