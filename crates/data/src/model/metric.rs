//! Metric operations: what a hook or an operation asks the metrics registry for, in
//! shell-operator's `$METRICS_PATH` vocabulary.

use serde::{Deserialize, Serialize};

/// A value for one metric series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The metric name, e.g. `myhook_pods_total`.
    pub name: String,
    /// The value.
    pub value: f64,
    /// The labels of the series.
    pub labels: Vec<(String, String)>,
    /// The group the series belongs to; `ExpireGroup` removes a whole group at once.
    pub group: Option<String>,
}

/// A histogram observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The metric name.
    pub name: String,
    /// The observed value.
    pub value: f64,
    /// The upper bounds of the histogram buckets, ascending.
    pub buckets: Vec<f64>,
    /// The labels of the series.
    pub labels: Vec<(String, String)>,
    /// The group the series belongs to.
    pub group: Option<String>,
}

/// The metric operations of shell-operator's `$METRICS_PATH`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MetricOperation {
    /// Adds to a counter.
    Add(Sample),
    /// Sets a gauge.
    Set(Sample),
    /// Observes a value in a histogram.
    Observe(Observation),
    /// Removes every series of the group that this run did not set again.
    ExpireGroup(String),
}
