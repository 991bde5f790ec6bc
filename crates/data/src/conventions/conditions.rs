//! Status conditions, set by one rule: apimachinery's `meta.SetStatusCondition`. A
//! condition's `lastTransitionTime` says when its `status` last changed, so a reason or
//! message that changes under the same status keeps the time, from which clients read how
//! long a status has held.
//! Every writer of a condition (the pipeline's end of a Diagnosis, the controller's
//! failures and placement, the OperationSet, Hook and ModuleConfig statuses) calls
//! [`set_condition`].

use crate::api::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ConditionStatus;

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

    #[test]
    fn other_types_are_left_alone_and_a_condition_without_a_time_gets_one() {
        let mut conditions = vec![
            condition(ConditionStatus::True, "Done", "2026-11-28T10:00:00Z"),
            condition(ConditionStatus::False, "Waiting", "2026-11-28T10:00:00Z"),
        ];
        conditions[1].type_ = "Scheduled".to_owned();
        conditions[1].last_transition_time = None;
        let mut same = conditions[1].clone();
        same.last_transition_time = None;
        // The same status and words, but no time yet: the time is set, now.
        assert!(set_condition(&mut conditions, same));
        assert!(conditions[1].last_transition_time.is_some());
        assert_eq!(
            conditions[0],
            condition(ConditionStatus::True, "Done", "2026-11-28T10:00:00Z")
        );
        // A change without a time of its own keeps the old time while the status holds.
        let mut reworded = condition(ConditionStatus::True, "Done", "2026-11-28T10:00:00Z");
        reworded.message = "said again".to_owned();
        reworded.last_transition_time = None;
        assert!(set_condition(&mut conditions, reworded));
        assert_eq!(conditions[0].message, "said again");
        assert_eq!(
            conditions[0].last_transition_time,
            at("2026-11-28T10:00:00Z")
        );
    }
}
