//! The Trigger controller: turns Triggers into Diagnoses in a cluster. It owns the
//! watching and the writing; what matches and how created Diagnoses are named is
//! [`operon_pipeline::triggers`]'.
//!
//! - [`TriggerCatalog`]: every Trigger, compiled once per generation; invalid ones are
//!   logged with every problem and skipped.
//! - cron: each cron Trigger's due slot becomes a Diagnosis and
//!   `status.lastScheduleTime` (server-side apply on the status subresource, field
//!   manager `operon`); the loop sleeps until the next slot or a change of Triggers.
//! - events: core/v1 and events.k8s.io/v1 Events, watched only while an event Trigger
//!   exists (see the rule on which Events count there).
//! - [`DiagnosisCreator`]: the POST, with the deterministic name (a 409 AlreadyExists is
//!   a redelivery, counted, not retried), an owner reference to the Trigger, and the
//!   Trigger's rate limit. The alert receiver of `operon serve` (every replica) uses it
//!   too, with its own catalog.
//!
//! The leader runs [`run_with_metrics`]; a Trigger has one source, so the leader's
//! limits for cron and event Triggers and each replica's for alert Triggers never share
//! a Trigger.

mod catalog;
mod create;
mod cron;
mod events;
pub(crate) mod metrics;
#[cfg(test)]
mod tests;

pub(crate) use catalog::{Snapshot, TriggerCatalog};
pub(crate) use create::{DiagnosisCreator, Outcome};
pub(crate) use metrics::DiagnosesCounter;

use jiff::Timestamp;
use kube::{Api, Client};
use operon_data::api::Trigger;
use std::future::Future;
use std::sync::Arc;

/// Runs the controller until `shutdown` completes, counting what Triggers ask for in
/// `counter` (`operon_trigger_diagnoses_total`).
pub(crate) async fn run_with_metrics(
    client: Client,
    counter: Option<DiagnosesCounter>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let started = Timestamp::now();
    let catalog = TriggerCatalog::new();
    let creator = Arc::new(DiagnosisCreator::new(client.clone(), counter));
    let triggers: Api<Trigger> = Api::all(client.clone());
    tokio::select! {
        () = catalog.run(triggers.clone()) => {}
        () = cron::run(catalog.subscribe(), creator.clone(), triggers) => {}
        () = events::run(client, catalog.subscribe(), creator, started) => {}
        () = shutdown => {}
    }
    tracing::info!("Trigger controller stopped");
}
