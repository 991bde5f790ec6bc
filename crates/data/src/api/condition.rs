//! Status conditions in the Kubernetes convention.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether a condition holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// It holds.
    True,
    /// It does not hold.
    False,
    /// It cannot be told.
    Unknown,
}

/// One status condition (`type`, `status`, `reason`, `message`, `lastTransitionTime`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// What the condition is about, e.g. `Ready` or `Complete`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// A CamelCase machine-readable reason, e.g. `Cycle`.
    #[serde(default)]
    pub reason: String,
    /// A human-readable explanation.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Sets `condition` in `conditions`, by its type, as apimachinery's
/// `meta.SetStatusCondition` does: a new type is added; for one already there the
/// reason and message are replaced, and the transition time moves only when the status
/// changes (to `condition`'s, or now when it has none; one that had no time gets one).
/// Whether anything changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut condition: Condition) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == condition.type_) else {
        if condition.last_transition_time.is_none() {
            condition.last_transition_time = Some(Time(jiff::Timestamp::now()));
        }
        conditions.push(condition);
        return true;
    };
    let mut changed = false;
    if existing.status != condition.status || existing.last_transition_time.is_none() {
        existing.status = condition.status;
        existing.last_transition_time = condition
            .last_transition_time
            .or_else(|| Some(Time(jiff::Timestamp::now())));
        changed = true;
    }
    if existing.reason != condition.reason {
        existing.reason = condition.reason;
        changed = true;
    }
    if existing.message != condition.message {
        existing.message = condition.message;
        changed = true;
    }
    changed
}

impl Condition {
    /// A condition that changed now.
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Some(Time(jiff::Timestamp::now())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Option<Time> {
        Some(Time(text.parse().unwrap()))
    }

    fn condition(status: ConditionStatus, reason: &str, time: &str) -> Condition {
        Condition {
            type_: "Complete".to_owned(),
            status,
            reason: reason.to_owned(),
            message: format!("{reason} message"),
            last_transition_time: at(time),
        }
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let mut conditions = vec![condition(
            ConditionStatus::False,
            "Waiting",
            "2026-11-28T10:00:00Z",
        )];
        // Same status, new reason: reason and message change, the time stays.
        assert!(set_condition(
            &mut conditions,
            condition(
                ConditionStatus::False,
                "StillWaiting",
                "2026-11-28T11:00:00Z"
            )
        ));
        assert_eq!(conditions[0].reason, "StillWaiting");
        assert_eq!(conditions[0].message, "StillWaiting message");
        assert_eq!(
            conditions[0].last_transition_time,
            at("2026-11-28T10:00:00Z")
        );
        // Nothing new: nothing changes.
        assert!(!set_condition(
            &mut conditions,
            condition(
                ConditionStatus::False,
                "StillWaiting",
                "2026-11-28T12:00:00Z"
            )
        ));
        // A new status: the time is the new condition's.
        assert!(set_condition(
            &mut conditions,
            condition(ConditionStatus::True, "Done", "2026-11-28T13:00:00Z")
        ));
        assert_eq!(conditions[0].status, ConditionStatus::True);
        assert_eq!(
            conditions[0].last_transition_time,
            at("2026-11-28T13:00:00Z")
        );
        assert_eq!(conditions.len(), 1);
    }

    #[test]
    fn a_new_type_is_added_with_a_time() {
        let mut conditions = vec![condition(
            ConditionStatus::True,
            "Done",
            "2026-11-28T10:00:00Z",
        )];
        let mut ready = condition(ConditionStatus::True, "Ready", "2026-11-28T10:00:00Z");
        ready.type_ = "Ready".to_owned();
        ready.last_transition_time = None;
        assert!(set_condition(&mut conditions, ready));
        assert_eq!(conditions.len(), 2);
        assert!(conditions[1].last_transition_time.is_some());
    }
}
