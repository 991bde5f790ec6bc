//! `operon_diagnoses_total{role, phase}`: the Diagnoses this process brought to an end,
//! counted once their final status is written. Process-wide, so that the controller and
//! an agent count the same way; registered in the registry each process serves.

use super::Role;
use operon_data::api::DiagnosisPhase;
use prometheus::{IntCounterVec, Opts, Registry};
use std::sync::OnceLock;

fn finished_total() -> &'static IntCounterVec {
    static COUNTER: OnceLock<IntCounterVec> = OnceLock::new();
    COUNTER.get_or_init(|| {
        IntCounterVec::new(
            Opts::new(
                "operon_diagnoses_total",
                "Diagnoses this process ran to their end, by role (controller or agent) and final phase (Succeeded or Failed).",
            ),
            &["role", "phase"],
        )
        .expect("static metric definition is valid")
    })
}

/// Counts one Diagnosis that ended in `phase` here.
pub(crate) fn finished(role: &Role, phase: DiagnosisPhase) {
    let role = match role {
        Role::Controller => "controller",
        Role::Agent { .. } => "agent",
    };
    let phase = match phase {
        DiagnosisPhase::Succeeded => "Succeeded",
        DiagnosisPhase::Failed => "Failed",
        // Not an end; nothing to count.
        DiagnosisPhase::Pending | DiagnosisPhase::Running => return,
    };
    finished_total().with_label_values(&[role, phase]).inc();
}

/// How many Diagnoses ended in `phase` with `role` (`controller`, `agent`) so far.
#[cfg(test)]
pub(crate) fn count(role: &str, phase: &str) -> u64 {
    finished_total().with_label_values(&[role, phase]).get()
}

/// The collectors, one per metric family.
pub(crate) fn collectors() -> Vec<Box<dyn prometheus::core::Collector>> {
    vec![Box::new(finished_total().clone())]
}

/// Registers the metrics in `registry` (once per registry).
pub(crate) fn register_metrics(registry: &Registry) -> Result<(), prometheus::Error> {
    for collector in collectors() {
        registry.register(collector)?;
    }
    Ok(())
}
