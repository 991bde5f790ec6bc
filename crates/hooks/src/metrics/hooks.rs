//! Metrics that hooks submit (shell-operator's `$METRICS_PATH`), kept per series and
//! exposed in the Prometheus text format.
//!
//! Semantics, after shell-operator:
//! - `add` adds to a counter, `set` sets a gauge, `observe` observes a value in a
//!   histogram; the metric is created on first use and keeps its type (and, for a
//!   histogram, its buckets) for the life of the process. Every series gets a `hook`
//!   label naming the hook that wrote it.
//! - A run that writes series of group G replaces the hook's earlier series of G:
//!   those it does not write again are removed (those it writes again keep counting,
//!   as counters should). `expire-group` G removes all of the hook's series of G at
//!   that point of the run. Groups work for histograms too, unlike shell-operator.
//! - A run's operations are all checked before any is applied: one invalid operation
//!   applies none, so a hook never leaves half of its metrics updated.
//!
//! Unlike the Go client shell-operator uses, series of one metric may carry different
//! label names (`{hook, kind}` and `{hook, source}`): the store keeps each series with
//! its own label set rather than a vector with fixed label names, so a hook adding a
//! label never fails. The exposition format allows it, and PromQL reads a missing
//! label as an empty one.
//!
//! Names under `operon_` are reserved for the engine's own metrics.

use operon_cluster::Shared;
use operon_data::model::{MetricOperation, Observation, Sample};
use prometheus::core::{Collector, Desc};
use prometheus::proto;
use prometheus::{Encoder as _, Registry, TextEncoder};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The label every hook series carries.
pub const HOOK_LABEL: &str = "hook";

/// The prefix of the engine's metrics, which hooks may not use.
pub const RESERVED_PREFIX: &str = "operon_";

/// The type of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// Written by `add`.
    Counter,
    /// Written by `set`.
    Gauge,
    /// Written by `observe`.
    Histogram,
}

impl fmt::Display for MetricKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Histogram => "histogram",
        })
    }
}

/// Why a run's metric operations were refused (none of them is applied).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricError {
    /// The metric name is not a Prometheus name or is reserved.
    #[error("metric name {metric:?} is invalid: {reason}")]
    InvalidName {
        /// The name as given.
        metric: String,
        /// Why.
        reason: String,
    },
    /// A label name is not a Prometheus label name or is reserved.
    #[error("metric {metric:?}: label {label:?} is invalid: {reason}")]
    InvalidLabel {
        /// The metric.
        metric: String,
        /// The label name.
        label: String,
        /// Why.
        reason: String,
    },
    /// The value cannot be applied (NaN, a negative counter increment...).
    #[error("metric {metric:?}: {reason}")]
    InvalidValue {
        /// The metric.
        metric: String,
        /// Why.
        reason: String,
    },
    /// Histogram buckets that are not strictly ascending numbers.
    #[error("metric {metric:?}: buckets must be strictly ascending numbers, got {buckets:?}")]
    InvalidBuckets {
        /// The metric.
        metric: String,
        /// The buckets given.
        buckets: Vec<f64>,
    },
    /// The metric exists with another type.
    #[error("metric {metric:?} is a {existing}, so it cannot be used as a {requested}")]
    TypeConflict {
        /// The metric.
        metric: String,
        /// Its type.
        existing: MetricKind,
        /// The type the operation implies.
        requested: MetricKind,
    },
    /// The histogram exists with other buckets; buckets are fixed at first use.
    #[error("histogram {metric:?} has buckets {existing:?}, not {requested:?}")]
    BucketConflict {
        /// The metric.
        metric: String,
        /// Its buckets.
        existing: Vec<f64>,
        /// The buckets the operation gives.
        requested: Vec<f64>,
    },
    /// A group name that is empty.
    #[error("metric {metric:?}: an empty group name")]
    EmptyGroup {
        /// The metric, or `expire-group` for that operation.
        metric: String,
    },
    /// Registering a metric in a registry failed (two metrics with one name). Shared,
    /// so that the error stays `Clone`; equal only to itself.
    #[error("cannot register metrics: {0}")]
    Registry(#[source] Shared<prometheus::Error>),
}

impl From<prometheus::Error> for MetricError {
    fn from(error: prometheus::Error) -> Self {
        Self::Registry(Shared::new(error))
    }
}

/// A run's metric operations, validated by `HookMetrics::prepare` and waiting to be
/// committed.
pub struct PreparedMetrics<'a> {
    hook: &'a str,
    prepared: Vec<Prepared<'a>>,
}

impl std::fmt::Debug for PreparedMetrics<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedMetrics")
            .field("hook", &self.hook)
            .field("operations", &self.prepared.len())
            .finish()
    }
}

/// The hook metrics of the process. Cheap to clone; clones share the series.
#[derive(Clone)]
pub struct HookMetrics {
    store: Arc<Mutex<Store>>,
    /// Holds only the store's collector: what `/metrics/hooks` serves.
    registry: Registry,
}

impl fmt::Debug for HookMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let store = self.lock();
        f.debug_struct("HookMetrics")
            .field("metrics", &store.families.len())
            .field("groups", &store.groups.len())
            .finish()
    }
}

impl HookMetrics {
    /// An empty store.
    pub(crate) fn new() -> Result<Self, MetricError> {
        let store = Arc::new(Mutex::new(Store::default()));
        let registry = Registry::new();
        registry
            .register(Box::new(HookCollector {
                store: Arc::clone(&store),
            }))
            .map_err(MetricError::from)?;
        Ok(Self { store, registry })
    }

    /// Validates a run's metric operations and checks them against the registered
    /// metrics, without applying them: the engine does this before it applies the run's
    /// patches, so a bad metric fails the run before it changed the cluster, and then
    /// [`HookMetrics::commit`]s what was prepared.
    pub(crate) fn prepare<'a>(
        &self,
        hook: &'a str,
        operations: &'a [MetricOperation],
    ) -> Result<PreparedMetrics<'a>, MetricError> {
        let prepared = operations
            .iter()
            .map(|operation| Prepared::new(hook, operation))
            .collect::<Result<Vec<_>, _>>()?;
        if !prepared.is_empty() {
            self.lock().check(&prepared)?;
        }
        Ok(PreparedMetrics { hook, prepared })
    }

    /// Applies what [`HookMetrics::prepare`] accepted, all or none. The check is
    /// repeated under the lock, since another hook may have registered a conflicting
    /// metric in between.
    pub(crate) fn commit(&self, metrics: PreparedMetrics<'_>) -> Result<(), MetricError> {
        if metrics.prepared.is_empty() {
            return Ok(());
        }
        let mut store = self.lock();
        store.check(&metrics.prepared)?;
        store.apply(metrics.hook, metrics.prepared);
        Ok(())
    }

    /// Applies the metric operations of one successful run of `hook`, all or none.
    pub fn apply(&self, hook: &str, operations: &[MetricOperation]) -> Result<(), MetricError> {
        if operations.is_empty() {
            return Ok(());
        }
        let prepared = operations
            .iter()
            .map(|operation| Prepared::new(hook, operation))
            .collect::<Result<Vec<_>, _>>()?;
        let mut store = self.lock();
        store.check(&prepared)?;
        store.apply(hook, prepared);
        Ok(())
    }

    /// Removes every series of `hook`, e.g. when the hook is unloaded.
    pub fn forget_hook(&self, hook: &str) {
        let mut store = self.lock();
        for family in store.families.values_mut() {
            family
                .series
                .retain(|labels, _| hook_of(labels) != Some(hook));
        }
        store.groups.retain(|(group_hook, _), _| group_hook != hook);
    }

    /// The metrics in the Prometheus text format (what `/metrics/hooks` serves).
    pub(crate) fn render(&self) -> String {
        render(&self.registry)
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        // The store is consistent between statements (nothing in it panics midway), so
        // a poisoned lock still guards valid data.
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Encodes everything `registry` gathers in the text format.
pub(super) fn render(registry: &Registry) -> String {
    let mut out = Vec::new();
    match TextEncoder::new().encode(&registry.gather(), &mut out) {
        Ok(()) => String::from_utf8_lossy(&out).into_owned(),
        // Only an empty family or a write error fails, and neither can happen when
        // writing gathered families into memory; say so rather than serve nothing.
        Err(e) => format!("# metrics cannot be encoded: {e}\n"),
    }
}

/// A series' labels, sorted by name, `hook` included.
type Labels = Box<[(String, String)]>;

fn hook_of(labels: &Labels) -> Option<&str> {
    labels
        .iter()
        .find(|(name, _)| name == HOOK_LABEL)
        .map(|(_, value)| value.as_str())
}

/// Identifies one series across metrics.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    metric: String,
    labels: Labels,
}

#[derive(Debug, Default)]
struct Store {
    families: HashMap<String, Family>,
    /// Per (hook, group), the series that belong to it, so a group is replaced
    /// without scanning every series.
    groups: HashMap<(String, String), HashSet<SeriesKey>>,
}

#[derive(Debug)]
struct Family {
    kind: MetricKind,
    /// Upper bounds of a histogram's buckets, fixed at creation.
    buckets: Arc<[f64]>,
    /// Sorted, so the output is stable.
    series: BTreeMap<Labels, Series>,
}

#[derive(Debug)]
struct Series {
    value: SeriesValue,
    group: Option<String>,
}

#[derive(Debug)]
enum SeriesValue {
    Counter(f64),
    Gauge(f64),
    Histogram {
        /// Observations per bucket (not cumulative); the last slot counts the ones
        /// above every bound.
        counts: Box<[u64]>,
        sum: f64,
    },
}

/// One operation, checked and with its series' labels built.
enum Prepared<'a> {
    Write {
        kind: MetricKind,
        metric: &'a str,
        labels: Labels,
        value: f64,
        buckets: &'a [f64],
        group: Option<&'a str>,
    },
    ExpireGroup(&'a str),
}

impl<'a> Prepared<'a> {
    fn new(hook: &str, operation: &'a MetricOperation) -> Result<Self, MetricError> {
        let (kind, sample_name, value, labels, group, buckets): (_, _, _, _, _, &[f64]) =
            match operation {
                MetricOperation::Add(Sample {
                    name,
                    value,
                    labels,
                    group,
                }) => (MetricKind::Counter, name, *value, labels, group, &[]),
                MetricOperation::Set(Sample {
                    name,
                    value,
                    labels,
                    group,
                }) => (MetricKind::Gauge, name, *value, labels, group, &[]),
                MetricOperation::Observe(Observation {
                    name,
                    value,
                    buckets,
                    labels,
                    group,
                }) => (MetricKind::Histogram, name, *value, labels, group, buckets),
                MetricOperation::ExpireGroup(group) => {
                    if group.is_empty() {
                        return Err(MetricError::EmptyGroup {
                            metric: "expire-group".to_owned(),
                        });
                    }
                    return Ok(Self::ExpireGroup(group));
                }
            };
        let metric = sample_name.as_str();
        check_metric_name(metric)?;
        let invalid_value = |reason: &str| MetricError::InvalidValue {
            metric: metric.to_owned(),
            reason: reason.to_owned(),
        };
        match kind {
            _ if value.is_nan() => return Err(invalid_value("the value is NaN")),
            MetricKind::Counter if value < 0.0 || value.is_infinite() => {
                return Err(invalid_value(
                    "a counter only grows: add a finite value of 0 or more",
                ));
            }
            _ => {}
        }
        if group.as_deref() == Some("") {
            return Err(MetricError::EmptyGroup {
                metric: metric.to_owned(),
            });
        }
        let buckets = if kind == MetricKind::Histogram {
            check_buckets(metric, buckets)?
        } else {
            buckets
        };
        Ok(Self::Write {
            kind,
            metric,
            labels: series_labels(hook, metric, kind, labels)?,
            value,
            buckets,
            group: group.as_deref(),
        })
    }
}

fn check_metric_name(metric: &str) -> Result<(), MetricError> {
    let invalid = |reason: &str| MetricError::InvalidName {
        metric: metric.to_owned(),
        reason: reason.to_owned(),
    };
    if !is_prometheus_name(metric, true) {
        return Err(invalid(
            "use letters, digits, '_' and ':', not starting with a digit",
        ));
    }
    if metric.starts_with(RESERVED_PREFIX) {
        return Err(invalid("names starting with operon_ belong to the engine"));
    }
    if metric.starts_with("__") {
        return Err(invalid("names starting with __ are reserved by Prometheus"));
    }
    Ok(())
}

/// The buckets to use: the given ones, or the Prometheus defaults when none are given.
fn check_buckets<'a>(metric: &str, buckets: &'a [f64]) -> Result<&'a [f64], MetricError> {
    if buckets.is_empty() {
        return Ok(prometheus::DEFAULT_BUCKETS);
    }
    let ascending = buckets.windows(2).all(|pair| pair[0] < pair[1]);
    if !ascending || buckets.iter().any(|b| b.is_nan()) {
        return Err(MetricError::InvalidBuckets {
            metric: metric.to_owned(),
            buckets: buckets.to_vec(),
        });
    }
    Ok(buckets)
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`, without `:` for label names.
fn is_prometheus_name(name: &str, colon: bool) -> bool {
    let head = |c: char| c.is_ascii_alphabetic() || c == '_' || (colon && c == ':');
    let mut chars = name.chars();
    chars.next().is_some_and(head) && chars.all(|c| head(c) || c.is_ascii_digit())
}

/// The series' labels: the hook's plus the given ones, sorted by name; a repeated
/// label keeps its last value, as every key-value list of the contract does.
fn series_labels(
    hook: &str,
    metric: &str,
    kind: MetricKind,
    labels: &[(String, String)],
) -> Result<Labels, MetricError> {
    let invalid = |label: &str, reason: &str| MetricError::InvalidLabel {
        metric: metric.to_owned(),
        label: label.to_owned(),
        reason: reason.to_owned(),
    };
    for (name, _) in labels {
        if !is_prometheus_name(name, false) {
            return Err(invalid(
                name,
                "use letters, digits and '_', not starting with a digit",
            ));
        }
        if name.starts_with("__") {
            return Err(invalid(name, "names starting with __ are reserved"));
        }
        if name == HOOK_LABEL {
            return Err(invalid(name, "the engine sets the hook label"));
        }
        if kind == MetricKind::Histogram && name == "le" {
            return Err(invalid(name, "histograms use le for their buckets"));
        }
    }
    let mut out: Vec<(String, String)> = Vec::with_capacity(labels.len() + 1);
    out.push((HOOK_LABEL.to_owned(), hook.to_owned()));
    // Reversed before a stable sort, so the first of equal names is the last given.
    out.extend(labels.iter().rev().cloned());
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|later, kept| later.0 == kept.0);
    Ok(out.into_boxed_slice())
}

impl Store {
    /// Refuses operations that conflict with existing metrics or with each other.
    fn check(&self, prepared: &[Prepared<'_>]) -> Result<(), MetricError> {
        let mut created: HashMap<&str, (MetricKind, &[f64])> = HashMap::new();
        for operation in prepared {
            let Prepared::Write {
                kind,
                metric,
                buckets,
                ..
            } = operation
            else {
                continue;
            };
            let existing = match self.families.get(*metric) {
                Some(family) => Some((family.kind, &*family.buckets)),
                None => created.get(metric).copied(),
            };
            match existing {
                None => {
                    created.insert(metric, (*kind, buckets));
                }
                Some((existing, _)) if existing != *kind => {
                    return Err(MetricError::TypeConflict {
                        metric: (*metric).to_owned(),
                        existing,
                        requested: *kind,
                    });
                }
                Some((MetricKind::Histogram, existing)) if existing != *buckets => {
                    return Err(MetricError::BucketConflict {
                        metric: (*metric).to_owned(),
                        existing: existing.to_vec(),
                        requested: buckets.to_vec(),
                    });
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn apply(&mut self, hook: &str, prepared: Vec<Prepared<'_>>) {
        // Groups written by this run first lose the series the run does not write
        // again; the operations then apply in order.
        let mut written: HashMap<&str, HashSet<SeriesKey>> = HashMap::new();
        for operation in &prepared {
            if let Prepared::Write {
                metric,
                labels,
                group: Some(group),
                ..
            } = operation
            {
                written.entry(group).or_default().insert(SeriesKey {
                    metric: (*metric).to_owned(),
                    labels: labels.clone(),
                });
            }
        }
        for (group, keep) in &written {
            self.expire_group(hook, group, Some(keep));
        }
        for operation in prepared {
            match operation {
                Prepared::Write {
                    kind,
                    metric,
                    labels,
                    value,
                    buckets,
                    group,
                } => self.write(hook, kind, metric, labels, value, buckets, group),
                Prepared::ExpireGroup(group) => self.expire_group(hook, group, None),
            }
        }
    }

    #[allow(clippy::too_many_arguments)] // One write's fields, unpacked from `Prepared`.
    fn write(
        &mut self,
        hook: &str,
        kind: MetricKind,
        metric: &str,
        labels: Labels,
        value: f64,
        buckets: &[f64],
        group: Option<&str>,
    ) {
        if !self.families.contains_key(metric) {
            self.families.insert(
                metric.to_owned(),
                Family {
                    kind,
                    buckets: buckets.into(),
                    series: BTreeMap::new(),
                },
            );
        }
        let Some(family) = self.families.get_mut(metric) else {
            return;
        };
        let previous_group = match family.series.get_mut(&labels) {
            Some(series) => {
                series.value.apply(value, &family.buckets);
                let previous = series.group.clone();
                series.group = group.map(str::to_owned);
                previous
            }
            None => {
                let mut series = Series {
                    value: SeriesValue::new(kind, &family.buckets),
                    group: group.map(str::to_owned),
                };
                series.value.apply(value, &family.buckets);
                family.series.insert(labels.clone(), series);
                None
            }
        };
        if previous_group.as_deref() == group {
            return;
        }
        let key = SeriesKey {
            metric: metric.to_owned(),
            labels,
        };
        if let Some(previous) = previous_group {
            let group_key = (hook.to_owned(), previous);
            if let Some(members) = self.groups.get_mut(&group_key) {
                members.remove(&key);
                if members.is_empty() {
                    self.groups.remove(&group_key);
                }
            }
        }
        if let Some(group) = group {
            self.groups
                .entry((hook.to_owned(), group.to_owned()))
                .or_default()
                .insert(key);
        }
    }

    /// Removes the hook's series of `group`, except those in `keep`.
    fn expire_group(&mut self, hook: &str, group: &str, keep: Option<&HashSet<SeriesKey>>) {
        let group_key = (hook.to_owned(), group.to_owned());
        let Some(members) = self.groups.get_mut(&group_key) else {
            return;
        };
        let families = &mut self.families;
        members.retain(|key| {
            if keep.is_some_and(|keep| keep.contains(key)) {
                return true;
            }
            if let Some(family) = families.get_mut(&key.metric) {
                family.series.remove(&key.labels);
            }
            false
        });
        if members.is_empty() {
            self.groups.remove(&group_key);
        }
    }

    fn families(&self) -> Vec<proto::MetricFamily> {
        let mut names: Vec<&String> = self.families.keys().collect();
        names.sort();
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let Some(family) = self.families.get(name) else {
                continue;
            };
            if family.series.is_empty() {
                continue;
            }
            let mut mf = proto::MetricFamily::default();
            mf.set_name(name.clone());
            // shell-operator's help text for hook metrics is the name itself.
            mf.set_help(name.clone());
            mf.set_field_type(match family.kind {
                MetricKind::Counter => proto::MetricType::COUNTER,
                MetricKind::Gauge => proto::MetricType::GAUGE,
                MetricKind::Histogram => proto::MetricType::HISTOGRAM,
            });
            let metrics = family
                .series
                .iter()
                .map(|(labels, series)| series.to_proto(labels, &family.buckets))
                .collect();
            mf.set_metric(metrics);
            out.push(mf);
        }
        out
    }
}

impl SeriesValue {
    fn new(kind: MetricKind, buckets: &[f64]) -> Self {
        match kind {
            MetricKind::Counter => Self::Counter(0.0),
            MetricKind::Gauge => Self::Gauge(0.0),
            MetricKind::Histogram => Self::Histogram {
                counts: vec![0; buckets.len() + 1].into_boxed_slice(),
                sum: 0.0,
            },
        }
    }

    fn apply(&mut self, value: f64, buckets: &[f64]) {
        match self {
            Self::Counter(total) => *total += value,
            Self::Gauge(current) => *current = value,
            Self::Histogram { counts, sum } => {
                let slot = buckets.partition_point(|bound| *bound < value);
                if let Some(count) = counts.get_mut(slot) {
                    *count += 1;
                }
                *sum += value;
            }
        }
    }
}

impl Series {
    fn to_proto(&self, labels: &Labels, buckets: &[f64]) -> proto::Metric {
        let pairs = labels
            .iter()
            .map(|(name, value)| {
                let mut pair = proto::LabelPair::default();
                pair.set_name(name.clone());
                pair.set_value(value.clone());
                pair
            })
            .collect();
        let mut metric = proto::Metric::from_label(pairs);
        match &self.value {
            SeriesValue::Counter(total) => {
                let mut counter = proto::Counter::default();
                counter.set_value(*total);
                metric.set_counter(counter);
            }
            SeriesValue::Gauge(current) => {
                let mut gauge = proto::Gauge::default();
                gauge.set_value(*current);
                metric.set_gauge(gauge);
            }
            SeriesValue::Histogram { counts, sum } => {
                let mut cumulative = 0;
                let mut bucket_protos = Vec::with_capacity(buckets.len());
                for (bound, count) in buckets.iter().zip(counts.iter()) {
                    cumulative += count;
                    let mut bucket = proto::Bucket::default();
                    bucket.set_upper_bound(*bound);
                    bucket.set_cumulative_count(cumulative);
                    bucket_protos.push(bucket);
                }
                let mut histogram = proto::Histogram::default();
                histogram.set_bucket(bucket_protos);
                histogram.set_sample_count(counts.iter().sum());
                histogram.set_sample_sum(*sum);
                metric.set_histogram(histogram);
            }
        }
        metric
    }
}

/// Exposes the store to a Prometheus registry.
struct HookCollector {
    store: Arc<Mutex<Store>>,
}

impl Collector for HookCollector {
    fn desc(&self) -> Vec<&Desc> {
        // Hook metrics appear at run time, so there is nothing to describe up front;
        // the registry then only checks them when gathering.
        Vec::new()
    }

    fn collect(&self) -> Vec<proto::MetricFamily> {
        let store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        store.families()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn add(name: &str, value: f64, pairs: &[(&str, &str)], group: Option<&str>) -> MetricOperation {
        MetricOperation::Add(Sample {
            name: name.to_owned(),
            value,
            labels: labels(pairs),
            group: group.map(str::to_owned),
        })
    }

    fn set(name: &str, value: f64, pairs: &[(&str, &str)], group: Option<&str>) -> MetricOperation {
        MetricOperation::Set(Sample {
            name: name.to_owned(),
            value,
            labels: labels(pairs),
            group: group.map(str::to_owned),
        })
    }

    fn observe(name: &str, value: f64, buckets: &[f64]) -> MetricOperation {
        MetricOperation::Observe(Observation {
            name: name.to_owned(),
            value,
            buckets: buckets.to_vec(),
            labels: labels(&[("path", "/")]),
            group: None,
        })
    }

    fn series(metrics: &HookMetrics) -> Vec<String> {
        metrics
            .render()
            .lines()
            .filter(|line| !line.starts_with('#'))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn add_set_and_observe_carry_the_hook_label() {
        let metrics = HookMetrics::new().expect("metrics");
        metrics
            .apply(
                "pods.sh",
                &[
                    add("pods_seen_total", 1.0, &[("kind", "pod")], None),
                    add("pods_seen_total", 2.0, &[("kind", "pod")], None),
                    set("pods_ready", 3.0, &[], None),
                    observe("latency_seconds", 0.3, &[0.1, 0.5, 1.0]),
                    observe("latency_seconds", 2.0, &[0.1, 0.5, 1.0]),
                ],
            )
            .expect("applied");
        let text = metrics.render();
        for line in [
            "# HELP pods_seen_total pods_seen_total",
            "# TYPE pods_seen_total counter",
            r#"pods_seen_total{hook="pods.sh",kind="pod"} 3"#,
            "# TYPE pods_ready gauge",
            r#"pods_ready{hook="pods.sh"} 3"#,
            "# TYPE latency_seconds histogram",
            r#"latency_seconds_bucket{hook="pods.sh",path="/",le="0.1"} 0"#,
            r#"latency_seconds_bucket{hook="pods.sh",path="/",le="0.5"} 1"#,
            r#"latency_seconds_bucket{hook="pods.sh",path="/",le="1"} 1"#,
            r#"latency_seconds_bucket{hook="pods.sh",path="/",le="+Inf"} 2"#,
            r#"latency_seconds_sum{hook="pods.sh",path="/"} 2.3"#,
            r#"latency_seconds_count{hook="pods.sh",path="/"} 2"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    #[test]
    fn series_of_one_metric_may_have_different_labels() {
        let metrics = HookMetrics::new().expect("metrics");
        metrics
            .apply("a.sh", &[set("common", 1.0, &[("source", "s1")], None)])
            .expect("applied");
        metrics
            .apply(
                "b.sh",
                &[set("common", 2.0, &[("zone", "z"), ("zone", "y")], None)],
            )
            .expect("applied");
        assert_eq!(
            series(&metrics),
            vec![
                r#"common{hook="a.sh",source="s1"} 1"#,
                r#"common{hook="b.sh",zone="y"} 2"#,
            ]
        );
    }

    /// The example of shell-operator's documentation on grouped metrics.
    #[test]
    fn a_group_replaces_its_earlier_series() {
        let metrics = HookMetrics::new().expect("metrics");
        let g1 = Some("hook1");
        metrics
            .apply(
                "hook1.sh",
                &[
                    add("hook_metric", 1.0, &[("kind", "pod")], g1),
                    add("hook_metric", 1.0, &[("kind", "replicaset")], g1),
                    add("hook_metric", 1.0, &[("kind", "deployment")], g1),
                    set("hook1_special_metric", 12.0, &[("label1", "value1")], g1),
                    set("common_metric", 300.0, &[("source", "source3")], g1),
                    set("common_metric", 100.0, &[("source", "source1")], None),
                ],
            )
            .expect("applied");
        metrics
            .apply(
                "hook2.sh",
                &[
                    add("hook_metric", 1.0, &[("kind", "configmap")], Some("hook2")),
                    set("hook2_special_metric", 42.0, &[], Some("hook2")),
                ],
            )
            .expect("applied");
        metrics
            .apply(
                "hook1.sh",
                &[add("hook_metric", 1.0, &[("kind", "pod")], g1)],
            )
            .expect("applied");
        assert_eq!(
            series(&metrics),
            vec![
                r#"common_metric{hook="hook1.sh",source="source1"} 100"#,
                r#"hook2_special_metric{hook="hook2.sh"} 42"#,
                r#"hook_metric{hook="hook1.sh",kind="pod"} 2"#,
                r#"hook_metric{hook="hook2.sh",kind="configmap"} 1"#,
            ]
        );
    }

    #[test]
    fn the_same_group_of_another_hook_is_left_alone() {
        let metrics = HookMetrics::new().expect("metrics");
        metrics
            .apply("a.sh", &[set("m", 1.0, &[("x", "1")], Some("g"))])
            .expect("applied");
        metrics
            .apply("b.sh", &[set("m", 2.0, &[("x", "2")], Some("g"))])
            .expect("applied");
        assert_eq!(
            series(&metrics),
            vec![r#"m{hook="a.sh",x="1"} 1"#, r#"m{hook="b.sh",x="2"} 2"#]
        );
    }

    #[test]
    fn expire_group_removes_the_group_at_its_place_in_the_run() {
        let metrics = HookMetrics::new().expect("metrics");
        metrics
            .apply(
                "hook2.sh",
                &[
                    add("hook_metric", 1.0, &[("kind", "secret")], Some("hook2")),
                    set("common_metric", 200.0, &[("source", "source2")], None),
                ],
            )
            .expect("applied");
        metrics
            .apply(
                "hook2.sh",
                &[MetricOperation::ExpireGroup("hook2".to_owned())],
            )
            .expect("applied");
        assert_eq!(
            series(&metrics),
            vec![r#"common_metric{hook="hook2.sh",source="source2"} 200"#]
        );

        // Expired then written again in one run: only the new value remains.
        metrics
            .apply(
                "hook2.sh",
                &[
                    add("hook_metric", 5.0, &[("kind", "secret")], Some("hook2")),
                    MetricOperation::ExpireGroup("hook2".to_owned()),
                    add("hook_metric", 1.0, &[("kind", "new")], Some("hook2")),
                ],
            )
            .expect("applied");
        assert_eq!(
            series(&metrics),
            vec![
                r#"common_metric{hook="hook2.sh",source="source2"} 200"#,
                r#"hook_metric{hook="hook2.sh",kind="new"} 1"#,
            ]
        );
    }

    #[test]
    fn a_series_moves_between_groups() {
        let metrics = HookMetrics::new().expect("metrics");
        metrics
            .apply("a.sh", &[set("m", 1.0, &[], Some("g"))])
            .expect("applied");
        metrics
            .apply("a.sh", &[set("m", 2.0, &[], None)])
            .expect("applied");
        // No longer in g: expiring g keeps it.
        metrics
            .apply("a.sh", &[MetricOperation::ExpireGroup("g".to_owned())])
            .expect("applied");
        assert_eq!(series(&metrics), vec![r#"m{hook="a.sh"} 2"#]);
    }

    #[test]
    fn type_conflicts_are_refused_and_nothing_is_applied() {
        let metrics = HookMetrics::new().expect("metrics");
        metrics
            .apply("a.sh", &[add("m", 1.0, &[], None)])
            .expect("applied");
        let error = metrics
            .apply(
                "a.sh",
                &[
                    set("other", 5.0, &[], None),
                    add("m", 1.0, &[], None),
                    set("m", 1.0, &[], None),
                ],
            )
            .expect_err("conflict");
        assert_eq!(
            error,
            MetricError::TypeConflict {
                metric: "m".to_owned(),
                existing: MetricKind::Counter,
                requested: MetricKind::Gauge,
            }
        );
        assert_eq!(
            error.to_string(),
            r#"metric "m" is a counter, so it cannot be used as a gauge"#
        );
        assert_eq!(series(&metrics), vec![r#"m{hook="a.sh"} 1"#]);

        // Within one run, too.
        let error = metrics
            .apply(
                "a.sh",
                &[set("fresh", 1.0, &[], None), observe("fresh", 1.0, &[])],
            )
            .expect_err("conflict");
        assert!(matches!(error, MetricError::TypeConflict { .. }));
        assert_eq!(series(&metrics), vec![r#"m{hook="a.sh"} 1"#]);
    }

    #[test]
    fn bucket_conflicts_are_refused_and_nothing_is_applied() {
        let metrics = HookMetrics::new().expect("metrics");
        metrics
            .apply("a.sh", &[observe("h", 1.0, &[1.0, 2.0])])
            .expect("applied");
        let before = metrics.render();
        let error = metrics
            .apply(
                "a.sh",
                &[
                    observe("h", 1.0, &[1.0, 2.0]),
                    observe("h", 1.0, &[1.0, 5.0]),
                ],
            )
            .expect_err("conflict");
        assert_eq!(
            error,
            MetricError::BucketConflict {
                metric: "h".to_owned(),
                existing: vec![1.0, 2.0],
                requested: vec![1.0, 5.0],
            }
        );
        assert_eq!(metrics.render(), before);
        // No buckets means Prometheus' default buckets.
        metrics
            .apply("a.sh", &[observe("d", 1.0, &[])])
            .expect("applied");
        assert!(
            metrics
                .render()
                .contains(r#"d_bucket{hook="a.sh",path="/",le="0.005"} 0"#)
        );
    }

    #[test]
    fn invalid_operations_are_refused() {
        let metrics = HookMetrics::new().expect("metrics");
        let cases = [
            add("9lives", 1.0, &[], None),
            add("operon_hook_run_seconds", 1.0, &[], None),
            add("ok", -1.0, &[], None),
            set("ok", f64::NAN, &[], None),
            add("ok", 1.0, &[("hook", "other")], None),
            add("ok", 1.0, &[("bad-label", "x")], None),
            add("ok", 1.0, &[], Some("")),
            observe("ok", 1.0, &[2.0, 1.0]),
            MetricOperation::ExpireGroup(String::new()),
        ];
        for case in cases {
            assert!(
                metrics
                    .apply("a.sh", &[add("good", 1.0, &[], None), case.clone()])
                    .is_err(),
                "{case:?} should be refused"
            );
        }
        assert_eq!(metrics.render(), "");
    }

    #[test]
    fn forget_hook_drops_its_series() {
        let metrics = HookMetrics::new().expect("metrics");
        metrics
            .apply("a.sh", &[set("m", 1.0, &[], Some("g"))])
            .expect("applied");
        metrics
            .apply("b.sh", &[set("m", 2.0, &[], None)])
            .expect("applied");
        metrics.forget_hook("a.sh");
        assert_eq!(series(&metrics), vec![r#"m{hook="b.sh"} 2"#]);
    }

    #[test]
    fn a_registry_error_is_kept_as_the_source() {
        let error = MetricError::from(prometheus::Error::AlreadyReg);
        assert_eq!(
            error.to_string(),
            format!("cannot register metrics: {}", prometheus::Error::AlreadyReg)
        );
        let source = std::error::Error::source(&error).unwrap();
        let kept = source.downcast_ref::<Shared<prometheus::Error>>().unwrap();
        assert!(matches!(kept.get(), prometheus::Error::AlreadyReg));
        // Clones share it, and so are equal.
        assert_eq!(error.clone(), error);
    }
}
