//! `operon_leader{lease}`: whether this replica leads. Process-wide, as the other
//! metrics of `operon serve`'s own parts are; registered in the registry it serves.

use prometheus::{IntGauge, IntGaugeVec, Opts, Registry};
use std::sync::OnceLock;

fn leader() -> &'static IntGaugeVec {
    static GAUGE: OnceLock<IntGaugeVec> = OnceLock::new();
    GAUGE.get_or_init(|| {
        IntGaugeVec::new(
            Opts::new(
                "operon_leader",
                "Whether this replica leads (1: it runs hooks and controllers) or waits to (0).",
            ),
            &["lease"],
        )
        .expect("static metric definition is valid")
    })
}

/// The gauge of the Lease `lease` (empty without leader election): 1 while this replica
/// leads (or runs without leader election), 0 while it waits to.
pub(crate) fn leading(lease: &str) -> IntGauge {
    leader().with_label_values(&[lease])
}

/// The collectors, one per metric family.
pub(crate) fn collectors() -> Vec<Box<dyn prometheus::core::Collector>> {
    vec![Box::new(leader().clone())]
}

/// Registers the metrics in `registry` (once per registry).
pub(crate) fn register_metrics(registry: &Registry) -> Result<(), prometheus::Error> {
    for collector in collectors() {
        registry.register(collector)?;
    }
    Ok(())
}
