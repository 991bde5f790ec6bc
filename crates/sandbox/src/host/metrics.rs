//! The `metrics` host interface: buffers the metric operations a guest submits.
//!
//! [`MetricsState::queue`] does the work; each linked WIT version's `Host` impl only
//! translates and calls it.

use super::HostLimitExceeded;
use crate::{bindings, convert};
use operon_data::model::MetricOperation;

/// Per-call state of the `metrics` interface.
#[derive(Debug)]
pub(crate) struct MetricsState {
    /// Operations submitted so far, in order.
    pub(crate) operations: Vec<MetricOperation>,
    /// How many operations one run may submit.
    max_operations: usize,
}

impl MetricsState {
    /// A fresh state allowing `max_operations` operations.
    pub(crate) fn new(max_operations: usize) -> Self {
        Self {
            operations: Vec::new(),
            max_operations,
        }
    }
}

/// Prometheus metric and label names: `[a-zA-Z_:][a-zA-Z0-9_:]*` (labels without `:`).
fn valid_name(name: &str, colon: bool) -> bool {
    let mut chars = name.chars();
    let head_ok = |c: char| c.is_ascii_alphabetic() || c == '_' || (colon && c == ':');
    match chars.next() {
        Some(c) if head_ok(c) => chars.all(|c| head_ok(c) || c.is_ascii_digit()),
        _ => false,
    }
}

fn validate(operation: &MetricOperation) -> Result<(), String> {
    let (name, value, labels) = match operation {
        MetricOperation::Add(s) | MetricOperation::Set(s) => (&s.name, s.value, &s.labels),
        MetricOperation::Observe(o) => {
            if o.buckets.windows(2).any(|w| w[0] >= w[1]) || o.buckets.iter().any(|b| b.is_nan()) {
                return Err(format!(
                    "metric {:?}: buckets must be strictly ascending numbers",
                    o.name
                ));
            }
            (&o.name, o.value, &o.labels)
        }
        MetricOperation::ExpireGroup(group) => {
            return if group.is_empty() {
                Err("expire-group needs a group name".to_owned())
            } else {
                Ok(())
            };
        }
    };
    if !valid_name(name, true) {
        return Err(format!(
            "metric name {name:?} is invalid: use letters, digits, '_' and ':', not starting with a digit"
        ));
    }
    if value.is_nan() {
        return Err(format!("metric {name:?}: value is NaN"));
    }
    if let Some((label, _)) = labels.iter().find(|(k, _)| !valid_name(k, false)) {
        return Err(format!("metric {name:?}: label name {label:?} is invalid"));
    }
    Ok(())
}

impl MetricsState {
    /// Buffers `operation`. An invalid one is the guest's error (`Ok(Err(reason))`); one
    /// past the run's budget traps.
    pub(crate) fn queue(
        &mut self,
        operation: MetricOperation,
    ) -> wasmtime::Result<Result<(), String>> {
        if self.operations.len() >= self.max_operations {
            return Err(wasmtime::Error::new(HostLimitExceeded::MetricOperations {
                limit: self.max_operations,
            }));
        }
        if let Err(reason) = validate(&operation) {
            return Ok(Err(reason));
        }
        self.operations.push(operation);
        Ok(Ok(()))
    }
}

impl bindings::metrics::Host for MetricsState {
    fn submit(
        &mut self,
        operation: bindings::metrics::MetricOperation,
    ) -> wasmtime::Result<Result<(), String>> {
        self.queue(convert::metric_operation(operation))
    }
}

impl bindings::v0_2::metrics::Host for MetricsState {
    fn submit(
        &mut self,
        operation: bindings::v0_2::metrics::MetricOperation,
    ) -> wasmtime::Result<Result<(), String>> {
        self.queue(convert::v0_2::metric_operation(operation))
    }
}

impl bindings::v0_1::metrics::Host for MetricsState {
    fn submit(
        &mut self,
        operation: bindings::v0_1::metrics::MetricOperation,
    ) -> wasmtime::Result<Result<(), String>> {
        self.queue(convert::v0_1::metric_operation(operation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_data::model::Sample;

    fn sample(name: &str) -> MetricOperation {
        MetricOperation::Set(Sample {
            name: name.to_owned(),
            value: 1.0,
            labels: vec![],
            group: None,
        })
    }

    #[test]
    fn names_follow_prometheus_rules() {
        let valid = |name| validate(&sample(name)).is_ok();
        assert!(valid("hook_runs_total"));
        assert!(valid("ns:rate"));
        assert!(!valid("9lives"));
        assert!(!valid("with-dash"));
        assert!(!valid(""));
    }

    #[test]
    fn limit_traps_instead_of_growing() {
        let mut state = MetricsState::new(1);
        assert!(matches!(state.queue(sample("a")), Ok(Ok(()))));
        let err = state.queue(sample("b")).unwrap_err();
        assert!(err.downcast_ref::<HostLimitExceeded>().is_some());
    }

    #[test]
    fn both_contract_versions_submit_into_the_same_buffer() {
        use crate::bindings::{metrics as v0_2, v0_1};
        let mut state = MetricsState::new(4);
        let current = v0_2::MetricOperation::ExpireGroup("nodes".to_owned());
        let legacy = v0_1::metrics::MetricOperation::ExpireGroup("pods".to_owned());
        assert!(matches!(
            v0_2::Host::submit(&mut state, current),
            Ok(Ok(()))
        ));
        assert!(matches!(
            v0_1::metrics::Host::submit(&mut state, legacy),
            Ok(Ok(()))
        ));
        assert_eq!(
            state.operations,
            [
                MetricOperation::ExpireGroup("nodes".to_owned()),
                MetricOperation::ExpireGroup("pods".to_owned()),
            ]
        );
    }
}
