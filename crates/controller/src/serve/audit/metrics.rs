//! `operon_audit_results_total{hook, binding, result}`: the results audits found, one
//! per object and binding per audit. Process-wide, as `operon_diagnoses_total`, so
//! that `operon serve` registers it once whichever task audits.

use super::report::Verdict;
use prometheus::{IntCounterVec, Opts, Registry};
use std::sync::OnceLock;

fn results_total() -> &'static IntCounterVec {
    static COUNTER: OnceLock<IntCounterVec> = OnceLock::new();
    COUNTER.get_or_init(|| {
        IntCounterVec::new(
            Opts::new(
                "operon_audit_results_total",
                "Results of audits of existing objects, by hook, binding and result (pass, fail, warn, error, skip): one per object and binding per audit.",
            ),
            &["hook", "binding", "result"],
        )
        .expect("static metric definition is valid")
    })
}

/// Counts one result of `hook`'s `binding`.
pub(crate) fn found(hook: &str, binding: &str, verdict: Verdict) {
    results_total()
        .with_label_values(&[hook, binding, verdict.as_str()])
        .inc();
}

/// How many results `verdict` `hook`'s `binding` found so far.
#[cfg(test)]
pub(crate) fn count(hook: &str, binding: &str, verdict: Verdict) -> u64 {
    results_total()
        .with_label_values(&[hook, binding, verdict.as_str()])
        .get()
}

/// The collectors, one per metric family.
pub(crate) fn collectors() -> Vec<Box<dyn prometheus::core::Collector>> {
    vec![Box::new(results_total().clone())]
}

/// Registers the metrics in `registry` (once per registry).
pub(crate) fn register_metrics(registry: &Registry) -> Result<(), prometheus::Error> {
    for collector in collectors() {
        registry.register(collector)?;
    }
    Ok(())
}
