//! A Diagnosis whose node is down: while the node it is placed on is not Ready (or
//! gone), its `Scheduled` condition says so, with the node's own reason and since
//! when, and the record the agent wrote stays as it is, for the agent to resume when
//! the node is back; past its deadline it fails.

use super::placement::NodeHealth;
use super::status::StatusWriter;
use super::{AGENT_POLL, Context, DiagnosisError, SCHEDULED, fail, metrics, now};
use kube::runtime::controller::Action;
use operon_data::api::{Condition, ConditionStatus, Diagnosis, DiagnosisPhase};
use operon_data::conventions::conditions::set_condition;
use std::time::Duration;

/// The reason of the condition saying that a Diagnosis' node is down.
pub(crate) const NODE_NOT_READY: &str = "NodeNotReady";

/// Waits for the node `diagnosis` is placed on while it is not Ready (or gone), saying
/// so in its `Scheduled` condition; fails it once the node has been down for its
/// `spec.nodeNotReadyTimeoutSeconds` (or [`Settings::node_wait`]). The agent resumes it
/// from its checkpoint when the node is back: nothing here touches its record.
pub(super) async fn node_down(
    ctx: &Context,
    diagnosis: &mut Diagnosis,
    writer: &mut StatusWriter,
    node: &str,
    health: &NodeHealth,
) -> Result<Action, DiagnosisError> {
    let limit = match diagnosis.spec.node_not_ready_timeout_seconds {
        Some(seconds) => jiff::SignedDuration::from_secs(seconds.max(1)),
        None => jiff::SignedDuration::try_from(ctx.settings.node_wait).unwrap_or_default(),
    };
    let created = diagnosis
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or_else(now, |t| t.0);
    let status = diagnosis.status.get_or_insert_with(Default::default);
    // Since when this Diagnosis has waited for the node: a node down before the
    // Diagnosis existed counts from its creation; a deleted Node from when this
    // controller first saw it gone (the condition it wrote then).
    let down_since = match health {
        NodeHealth::NotReady { since, .. } => since.unwrap_or(created).max(created),
        _ => status
            .conditions
            .iter()
            .find(|c| c.type_ == SCHEDULED && c.reason == NODE_NOT_READY)
            .and_then(|c| c.last_transition_time.as_ref())
            .map_or_else(now, |t| t.0)
            .max(created),
    };
    let deadline = down_since + limit;
    let what = health.describe(node);
    let field = match diagnosis.spec.node_not_ready_timeout_seconds {
        Some(_) => "spec.nodeNotReadyTimeoutSeconds",
        None => "the controller's --diagnosis-node-wait",
    };
    let now = now();
    if now >= deadline {
        let message = format!(
            "{what}: gave up after waiting {}s for it ({field})",
            limit.as_secs()
        );
        fail(status, SCHEDULED, NODE_NOT_READY, message);
        writer.write(diagnosis).await?;
        metrics::finished(&ctx.settings.role, DiagnosisPhase::Failed);
        tracing::info!(diagnosis = %diagnosis.object_ref(), node, "Diagnosis failed: its node stayed down");
        return Ok(Action::await_change());
    }
    let resumes = if status.start_time.is_some() {
        "its agent resumes it from its checkpoint when the node is Ready again"
    } else {
        "its agent runs it when the node is Ready again"
    };
    let message = format!(
        "{what}: {resumes}; it fails at {deadline} ({}s after the node went down, {field})",
        limit.as_secs()
    );
    set_condition(
        &mut status.conditions,
        Condition::new(SCHEDULED, ConditionStatus::False, NODE_NOT_READY, message),
    );
    if status.phase.is_none() {
        status.phase = Some(DiagnosisPhase::Pending);
    }
    writer.write(diagnosis).await?;
    // The Node watch wakes it when the node changes; this wakes it for its deadline.
    let left = deadline.duration_since(now).unsigned_abs() + Duration::from_secs(1);
    Ok(Action::requeue(left.min(AGENT_POLL)))
}
