//! Cron Triggers: fires each one's due slot ([`CompiledTrigger::due`]: at most one
//! Diagnosis however many slots were missed), records the slot in
//! `status.lastScheduleTime`, and sleeps until the next slot of any Trigger or a
//! change of the Triggers.

use super::catalog::Snapshot;
use super::create::{DiagnosisCreator, Outcome};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use operon_cluster::kube::FIELD_MANAGER;
use operon_data::api::{API_VERSION, Trigger, TriggerStatus};
use operon_pipeline::triggers::{CompiledTrigger, SourceKind, last_schedule_or_creation};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long a Trigger whose Diagnosis could not be created waits before trying again.
const RETRY: Duration = Duration::from_secs(10);
/// The longest sleep: timers run on the monotonic clock and slots on the wall clock,
/// so a wall clock that steps (NTP, a suspended VM) is noticed within this.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// What the loop remembers between rounds, by Trigger uid.
#[derive(Debug, Default)]
pub(super) struct CronState {
    /// The last slot handled: written to status, or skipped by the rate limit. The
    /// snapshot's status may lag behind a write; this does not.
    handled: HashMap<String, Timestamp>,
    /// When a Trigger whose creation failed may try again.
    retry_at: HashMap<String, Timestamp>,
}

/// A slot to fire now.
#[derive(Debug)]
pub(super) struct Due {
    pub(super) trigger: Arc<Trigger>,
    pub(super) compiled: Arc<CompiledTrigger>,
    pub(super) slot: Timestamp,
}

/// The slots due at `now`, and when the next one comes (or a retry is allowed).
pub(super) fn plan(
    snapshot: &Snapshot,
    state: &mut CronState,
    now: Timestamp,
) -> (Vec<Due>, Option<Timestamp>) {
    let mut due = Vec::new();
    let mut next: Option<Timestamp> = None;
    let mut wake = |at: Timestamp| next = Some(next.map_or(at, |n| n.min(at)));
    let mut uids = Vec::new();
    for (trigger, compiled) in snapshot.compiled() {
        if compiled.kind() != SourceKind::Cron {
            continue;
        }
        let uid = trigger.metadata.uid.clone().unwrap_or_default();
        uids.push(uid.clone());
        if let Some(&at) = state.retry_at.get(&uid) {
            if at > now {
                wake(at);
                continue;
            }
            state.retry_at.remove(&uid);
        }
        let last = [
            last_schedule_or_creation(trigger),
            state.handled.get(&uid).copied(),
        ]
        .into_iter()
        .flatten()
        .max();
        match compiled.due(last, now) {
            Some(slot) => due.push(Due {
                trigger: trigger.clone(),
                compiled: compiled.clone(),
                slot,
            }),
            None => {
                // No slot in (last, now], so the first slot after `last` is ahead.
                if let Some(at) = compiled.next_fire_after(last.unwrap_or(now)) {
                    wake(at);
                }
            }
        }
    }
    // Forget Triggers that are gone.
    state.handled.retain(|uid, _| uids.contains(uid));
    state.retry_at.retain(|uid, _| uids.contains(uid));
    (due, next)
}

/// Runs the cron Triggers of `snapshots` until the task is dropped.
pub(super) async fn run(
    mut snapshots: watch::Receiver<Snapshot>,
    creator: Arc<DiagnosisCreator>,
    triggers: Api<Trigger>,
) {
    let mut state = CronState::default();
    loop {
        let snapshot = snapshots.borrow_and_update().clone();
        if !snapshot.listed {
            if snapshots.changed().await.is_err() {
                return;
            }
            continue;
        }
        let now = Timestamp::now();
        let (due, next) = plan(&snapshot, &mut state, now);
        let fired = !due.is_empty();
        for due in due {
            fire(&due, &mut state, &creator, &triggers, now).await;
        }
        if fired {
            // Plan again at once: the slots just handled are in `state`.
            continue;
        }
        let sleep = next
            .map(|at| Duration::try_from(at.duration_since(now)).unwrap_or_default())
            .unwrap_or(MAX_SLEEP)
            .min(MAX_SLEEP);
        tokio::select! {
            () = tokio::time::sleep(sleep) => {}
            changed = snapshots.changed() => if changed.is_err() { return },
        }
    }
}

/// Creates the Diagnosis of one due slot and records the slot.
pub(super) async fn fire(
    due: &Due,
    state: &mut CronState,
    creator: &DiagnosisCreator,
    triggers: &Api<Trigger>,
    now: Timestamp,
) {
    let uid = due.trigger.metadata.uid.clone().unwrap_or_default();
    let name = due.compiled.name();
    let Some(new) = due.compiled.scheduled_diagnosis(due.slot) else {
        // A slot before 1970 cannot be named; skip it rather than retry for ever.
        state.handled.insert(uid, due.slot);
        return;
    };
    match creator.create(&due.trigger, &due.compiled, new).await {
        Ok(Outcome::RateLimited) => {
            state.handled.insert(uid, due.slot);
        }
        Ok(outcome) => {
            state.handled.insert(uid, due.slot);
            if let Err(e) = write_last_schedule(triggers, name, due.slot).await {
                // The slot is remembered here; the next slot's write, or a restart
                // (which finds the Diagnosis existing), records it.
                tracing::warn!(trigger = %name, slot = %due.slot, error = %e,
                    "could not write status.lastScheduleTime");
            } else {
                tracing::info!(trigger = %name, slot = %due.slot, outcome = outcome.label(),
                    "cron Trigger fired");
            }
        }
        Err(e) => {
            tracing::warn!(trigger = %name, slot = %due.slot, error = %e,
                retry_in_s = RETRY.as_secs(), "cron Trigger could not create its Diagnosis");
            let at = now.checked_add(RETRY).unwrap_or(now);
            state.retry_at.insert(uid, at);
        }
    }
}

/// Server-side apply of `status.lastScheduleTime` through the status subresource.
pub(super) async fn write_last_schedule(
    triggers: &Api<Trigger>,
    name: &str,
    slot: Timestamp,
) -> Result<Trigger, kube::Error> {
    let status = TriggerStatus {
        last_schedule_time: Some(Time(slot)),
    };
    let patch = serde_json::json!({
        "apiVersion": API_VERSION,
        "kind": "Trigger",
        "status": status,
    });
    triggers
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
}
