//! Metrics through the host's `metrics` import, built with [`Metric`].
//!
//! These are the metric operations of shell-operator's `$METRICS_PATH`: counters are added
//! to, gauges are set, histograms observe values, and a whole group of series can be
//! expired at once. The host exports them with the guest's name as a label.

use std::marker::PhantomData;

use crate::Error;
use crate::bindings::operation::operon::engine::metrics as wit;

pub use wit::{MetricOperation, Observation, Sample};

/// One metric series being described: a name, labels and an optional group.
///
/// The kind (`Counter`, `Gauge`, `Histogram`) decides which operation is available, so a
/// counter cannot be set nor a gauge observed by mistake.
///
/// ```no_run
/// use operon_sdk::Metric;
///
/// # fn main() -> Result<(), operon_sdk::Error> {
/// Metric::counter("pods_labelled_total").label("namespace", "default").add(1.0)?;
/// Metric::gauge("disk_used_percent").label("mount", "/var").group("disk").set(91.0)?;
/// Metric::histogram("scan_seconds").buckets(&[0.1, 1.0, 10.0]).observe(0.4)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Metric<K> {
    /// The metric name, e.g. `operon_pods_total`.
    name: String,
    /// The labels that identify the series.
    labels: Vec<(String, String)>,
    /// Lets [`expire_group`] drop series that a later run no longer reports.
    group: Option<String>,
    /// Histogram buckets; unused by the other kinds.
    buckets: Vec<f64>,
    kind: PhantomData<K>,
}

/// Marks a [`Metric`] as a counter: a value that only grows, changed with `add`.
///
/// ```
/// let counter: operon_sdk::Metric<operon_sdk::metrics::Counter> =
///     operon_sdk::Metric::counter("runs_total");
/// # let _ = counter;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {}

/// Marks a [`Metric`] as a gauge: a value that is `set`.
///
/// ```
/// let gauge: operon_sdk::Metric<operon_sdk::metrics::Gauge> =
///     operon_sdk::Metric::gauge("queue_depth");
/// # let _ = gauge;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gauge {}

/// Marks a [`Metric`] as a histogram: values are `observe`d into buckets.
///
/// ```
/// let histogram: operon_sdk::Metric<operon_sdk::metrics::Histogram> =
///     operon_sdk::Metric::histogram("scan_seconds");
/// # let _ = histogram;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Histogram {}

impl<K> Metric<K> {
    fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            labels: Vec::new(),
            group: None,
            buckets: Vec::new(),
            kind: PhantomData,
        }
    }

    /// Adds the label `key` = `value` to the series.
    ///
    /// ```
    /// let metric = operon_sdk::Metric::counter("restarts_total")
    ///     .label("namespace", "default")
    ///     .label("pod", "web-0");
    /// # let _ = metric;
    /// ```
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// Puts the series in `group`, so that [`expire_group`] can remove it later.
    ///
    /// ```
    /// let metric = operon_sdk::Metric::gauge("disk_used_percent").group("disk-pressure");
    /// # let _ = metric;
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    fn sample(&self, value: f64) -> Sample {
        Sample {
            name: self.name.clone(),
            value,
            labels: self.labels.clone(),
            group: self.group.clone(),
        }
    }
}

impl Metric<Counter> {
    /// Describes the counter `name`.
    ///
    /// ```
    /// let counter = operon_sdk::Metric::counter("pods_labelled_total");
    /// # let _ = counter;
    /// ```
    pub fn counter(name: impl Into<String>) -> Self {
        Self::named(name)
    }

    /// Adds `value` to the counter.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), operon_sdk::Error> {
    /// operon_sdk::Metric::counter("pods_labelled_total").add(1.0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn add(&self, value: f64) -> Result<(), Error> {
        submit(&MetricOperation::Add(self.sample(value)))
    }
}

impl Metric<Gauge> {
    /// Describes the gauge `name`.
    ///
    /// ```
    /// let gauge = operon_sdk::Metric::gauge("disk_used_percent");
    /// # let _ = gauge;
    /// ```
    pub fn gauge(name: impl Into<String>) -> Self {
        Self::named(name)
    }

    /// Sets the gauge to `value`.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), operon_sdk::Error> {
    /// operon_sdk::Metric::gauge("disk_used_percent").label("mount", "/").set(42.0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn set(&self, value: f64) -> Result<(), Error> {
        submit(&MetricOperation::Set(self.sample(value)))
    }
}

impl Metric<Histogram> {
    /// Describes the histogram `name`; give it [`buckets`](Metric::buckets) before observing.
    ///
    /// ```
    /// let histogram = operon_sdk::Metric::histogram("scan_seconds");
    /// # let _ = histogram;
    /// ```
    pub fn histogram(name: impl Into<String>) -> Self {
        Self::named(name)
    }

    /// Sets the upper bounds of the buckets, ascending.
    ///
    /// ```
    /// let histogram = operon_sdk::Metric::histogram("scan_seconds").buckets(&[0.1, 1.0, 10.0]);
    /// # let _ = histogram;
    /// ```
    pub fn buckets(mut self, upper_bounds: &[f64]) -> Self {
        self.buckets = upper_bounds.to_vec();
        self
    }

    /// Observes `value` in the histogram.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), operon_sdk::Error> {
    /// operon_sdk::Metric::histogram("scan_seconds").buckets(&[1.0, 5.0]).observe(0.3)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn observe(&self, value: f64) -> Result<(), Error> {
        submit(&MetricOperation::Observe(Observation {
            name: self.name.clone(),
            value,
            buckets: self.buckets.clone(),
            labels: self.labels.clone(),
            group: self.group.clone(),
        }))
    }
}

/// Removes every series of `group` that this run did not set again.
///
/// ```no_run
/// # fn main() -> Result<(), operon_sdk::Error> {
/// operon_sdk::metrics::expire_group("disk-pressure")?;
/// # Ok(())
/// # }
/// ```
pub fn expire_group(group: &str) -> Result<(), Error> {
    submit(&MetricOperation::ExpireGroup(group.to_owned()))
}

/// Queues one operation in the contract's own shape; [`Metric`] is usually simpler.
///
/// ```no_run
/// use operon_sdk::metrics::{submit, MetricOperation};
///
/// # fn main() -> Result<(), operon_sdk::Error> {
/// submit(&MetricOperation::ExpireGroup("disk-pressure".into()))?;
/// # Ok(())
/// # }
/// ```
pub fn submit(operation: &MetricOperation) -> Result<(), Error> {
    wit::submit(operation).map_err(|err| Error::new(format_args!("submitting a metric: {err}")))
}
