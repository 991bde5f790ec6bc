//! A Hook object's status: what the engine made of it (the digest loaded, the
//! bindings, the last run and error, the last failures, the `Loaded` and `Ready`
//! conditions) written with
//! server-side apply (field manager `operon`) to the status subresource. Updates are
//! coalesced: a hook that runs every second writes its status at most once a second.

use crate::controllers::AbortOnDrop;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use operon_data::api::{
    Condition, ConditionStatus, Hook, HookFailure, HookRunOutcome, HookRunStatus, HookStatus,
};
use operon_hooks::engine::RunRecord;
use operon_hooks::history::RunEntry;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The least time between two status writes of one Hook.
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// How long a failed write waits before it is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// Sets condition `type_` of `conditions` (the Kubernetes rule:
/// [`operon_data::conventions::conditions::set_condition`]).
pub(crate) fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: impl Into<String>,
) {
    operon_data::conventions::conditions::set_condition(
        conditions,
        Condition::new(type_, status, reason, message),
    );
}

/// Records `record` (a run that just ended) in `status`.
pub(crate) fn record_run(status: &mut HookStatus, record: &RunRecord) {
    let binding = record
        .contexts
        .first()
        .map(|c| c.binding.clone())
        .unwrap_or_default();
    let outcome = record.outcome();
    status.last_run = Some(HookRunStatus {
        time: Time(jiff::Timestamp::now()),
        binding: binding.clone(),
        outcome,
        duration_ms: u64::try_from(record.run.elapsed.as_millis()).unwrap_or(u64::MAX),
        patches: u32::try_from(record.run.patches.len()).unwrap_or(u32::MAX),
    });
    let error = match (&record.run.outcome, &record.apply_error) {
        (Err(e), _) => Some(e.to_string()),
        (Ok(_), Some(e)) => Some(e.to_string()),
        _ => None,
    };
    if outcome != HookRunOutcome::Succeeded {
        record_failure(status, &RunEntry::of(record));
    }
    match (error, outcome) {
        (Some(error), HookRunOutcome::Failed) => {
            let message = format!(
                "run of binding {binding:?} failed (retried in {:.0?}): {error}",
                record.retry_in.unwrap_or_default()
            );
            status.last_error = Some(message.clone());
            set_condition(
                &mut status.conditions,
                "Ready",
                ConditionStatus::False,
                "RunFailed",
                message,
            );
        }
        (Some(error), _) => {
            status.last_error = Some(format!(
                "run of binding {binding:?} failed (allowed): {error}"
            ));
        }
        (None, _) => set_condition(
            &mut status.conditions,
            "Ready",
            ConditionStatus::True,
            "Running",
            "the hook runs on its bindings",
        ),
    }
}

/// Keeps `run` (a failed one) among the last failures of `status`, dropping the oldest
/// past [`HookFailure::KEPT`].
pub(crate) fn record_failure(status: &mut HookStatus, run: &RunEntry) {
    if status.last_failures.len() >= HookFailure::KEPT {
        let extra = status.last_failures.len() + 1 - HookFailure::KEPT;
        status.last_failures.drain(..extra);
    }
    status.last_failures.push(HookFailure {
        time: Time(jiff::Timestamp::now()),
        binding: run.bindings.join(","),
        trigger: run.trigger.clone(),
        outcome: run.outcome,
        error: run.error.clone().unwrap_or_default(),
        exit_code: run.exit_code,
    });
}

/// Keeps one Hook's status written: updates go to [`StatusWriter::update`], a task
/// writes the latest one.
pub(crate) struct StatusWriter {
    desired: Arc<watch::Sender<HookStatus>>,
    _task: AbortOnDrop,
}

impl StatusWriter {
    /// Starts writing the status of Hook `name` through `api` (namespaced), starting
    /// from `current` (the status the object has, so transition times carry over),
    /// once `leading` holds: a follower keeps the status it would write, and writes it
    /// if it comes to lead.
    pub(crate) fn start(
        api: Api<Hook>,
        name: String,
        current: HookStatus,
        leading: watch::Receiver<bool>,
    ) -> Self {
        let desired = Arc::new(watch::Sender::new(current));
        let receiver = desired.subscribe();
        Self {
            desired,
            _task: AbortOnDrop::spawn(async move {
                let mut leading = leading;
                if leading.wait_for(|l| *l).await.is_err() {
                    return;
                }
                write_loop(api, name, receiver).await;
            }),
        }
    }

    /// Changes the status to be written.
    pub(crate) fn update(&self, change: impl FnOnce(&mut HookStatus)) {
        self.desired.send_modify(change);
    }

    /// A handle that updates the same status, for the engine's run callback.
    pub(crate) fn handle(&self) -> Arc<watch::Sender<HookStatus>> {
        self.desired.clone()
    }
}

async fn write_loop(api: Api<Hook>, name: String, mut desired: watch::Receiver<HookStatus>) {
    loop {
        if desired.changed().await.is_err() {
            return;
        }
        let status = desired.borrow_and_update().clone();
        match write(&api, &name, &status).await {
            Ok(()) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return,
            Err(e) => {
                tracing::warn!(hook = %name, error = %e, "cannot write a Hook's status");
                tokio::time::sleep(RETRY).await;
                desired.mark_changed();
                continue;
            }
        }
        tokio::time::sleep(MIN_INTERVAL).await;
    }
}

/// Writes `status` to Hook `name` with server-side apply, as field manager `operon`
/// (forcing: the status is the engine's alone).
pub(crate) async fn write(
    api: &Api<Hook>,
    name: &str,
    status: &HookStatus,
) -> Result<(), kube::Error> {
    let body = serde_json::json!({
        "apiVersion": operon_data::api::API_VERSION,
        "kind": "Hook",
        "metadata": {"name": name},
        "status": status,
    });
    let params = PatchParams::apply(operon_cluster::kube::FIELD_MANAGER).force();
    api.patch_status(name, &params, &Patch::Apply(&body))
        .await
        .map(|_| ())
}
