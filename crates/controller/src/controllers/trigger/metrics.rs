//! `operon_trigger_diagnoses_total{trigger, source, outcome}`: what Triggers' matches
//! came to. Process-wide, as `operon_diagnoses_total` is: the Trigger controller (on the
//! leader) and the alert receiver (on every replica) count into one family, registered
//! in the registry `operon serve` serves.

use prometheus::{IntCounterVec, Opts, Registry};
use std::sync::OnceLock;

fn diagnoses_total() -> &'static IntCounterVec {
    static COUNTER: OnceLock<IntCounterVec> = OnceLock::new();
    COUNTER.get_or_init(|| {
        IntCounterVec::new(
            Opts::new(
                "operon_trigger_diagnoses_total",
                "Diagnoses Triggers asked for, by outcome: created, already_exists (a redelivery), rate_limited or failed.",
            ),
            &["trigger", "source", "outcome"],
        )
        .expect("static metric definition is valid")
    })
}

/// Where a [`DiagnosisCreator`](super::DiagnosisCreator) counts what came of each
/// match, when the process serves metrics.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DiagnosesCounter(());

impl DiagnosesCounter {
    /// The process' `operon_trigger_diagnoses_total`.
    pub(crate) fn new() -> Self {
        Self(())
    }

    /// Counts one match of `trigger` from `source` (the `operon.dev/trigger-source` label
    /// of its Diagnosis) that came to `outcome` (`created`, `already_exists`,
    /// `rate_limited`, `failed`).
    pub(crate) fn count(self, trigger: &str, source: &str, outcome: &str) {
        diagnoses_total()
            .with_label_values(&[trigger, source, outcome])
            .inc();
    }
}

/// The collectors, one per metric family.
pub(crate) fn collectors() -> Vec<Box<dyn prometheus::core::Collector>> {
    vec![Box::new(diagnoses_total().clone())]
}

/// Registers the metrics in `registry` (once per registry).
pub(crate) fn register_metrics(registry: &Registry) -> Result<(), prometheus::Error> {
    for collector in collectors() {
        registry.register(collector)?;
    }
    Ok(())
}
