//! Cron Triggers: when one last fired. The schedule itself, its slots and what a
//! schedule text means are [`operon_data::schedule`]'s.

use jiff::Timestamp;
use operon_data::api::Trigger;

/// When a cron Trigger last fired: its `status.lastScheduleTime`, or its creation time
/// when it never fired, so that a new Trigger waits for its first slot instead of
/// firing at once for a slot that passed before it existed.
pub fn last_schedule_or_creation(trigger: &Trigger) -> Option<Timestamp> {
    trigger
        .status
        .as_ref()
        .and_then(|status| status.last_schedule_time.as_ref())
        .or(trigger.metadata.creation_timestamp.as_ref())
        .map(|time| time.0)
}

#[cfg(test)]
mod tests {
    use super::super::new_diagnosis::tests::assert_valid_name;
    use super::super::tests::trigger;
    use super::super::{CompiledTrigger, SOURCE_LABEL};
    use super::*;
    use operon_data::api::Problem;

    fn compiled(schedule: &str) -> CompiledTrigger {
        try_compile(schedule).unwrap_or_else(|problems| panic!("{schedule:?}: {problems:?}"))
    }

    fn try_compile(schedule: &str) -> Result<CompiledTrigger, Vec<Problem>> {
        let yaml = format!(
            "metadata: {{name: nightly}}\nspec:\n  operationSet: s\n  nodeName: node-1\n  \
             sourceTemplate:\n    cronTemplate: {{schedule: {schedule:?}}}\n"
        );
        CompiledTrigger::new(&trigger(&yaml))
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("test timestamp")
    }

    fn next(schedule: &str, after: &str) -> Option<Timestamp> {
        compiled(schedule).next_fire_after(at(after))
    }

    #[test]
    fn schedules_mean_what_hook_schedules_mean() {
        assert_eq!(
            next("*/15 * * * *", "2024-05-01T10:07:30Z"),
            Some(at("2024-05-01T10:15:00Z"))
        );
        assert_eq!(
            next("30 */15 * * * *", "2024-05-01T10:07:30Z"),
            Some(at("2024-05-01T10:15:30Z")),
            "six fields put seconds first"
        );
        assert_eq!(
            next("0 0 13 * 5", "2024-05-01T00:00:00Z"),
            Some(at("2024-05-03T00:00:00Z")),
            "the 13th, or any Friday"
        );
        assert_eq!(
            next("CRON_TZ=Asia/Shanghai 0 9 * * *", "2024-05-01T00:00:00Z"),
            Some(at("2024-05-01T01:00:00Z")),
            "09:00 in Shanghai"
        );
        assert_eq!(
            next("@every 1h", "2024-05-01T10:07:30Z"),
            Some(at("2024-05-01T11:07:30Z"))
        );
    }

    #[test]
    fn bad_schedules_name_the_field() {
        for (schedule, reason) in [
            ("* * * *", "found 4"),
            ("", "a schedule is required"),
            ("61 * * * *", "minute \"61\": 61 is outside 0-59"),
            ("* * * * 8", "day of week \"8\""),
            ("* * * * Sunday", "is not a number or a day (sun..sat)"),
            ("@fortnightly", "unknown descriptor"),
            (
                "CRON_TZ=Asia/Atlantis 0 9 * * *",
                "unknown time zone \"Asia/Atlantis\"",
            ),
        ] {
            let problems = try_compile(schedule).expect_err(schedule);
            assert_eq!(problems.len(), 1, "{schedule}: {problems:?}");
            assert_eq!(
                problems[0].field,
                "spec.sourceTemplate.cronTemplate.schedule"
            );
            assert!(
                problems[0].reason.contains(reason),
                "{schedule}: {}",
                problems[0].reason
            );
        }
    }

    #[test]
    fn impossible_schedules_never_fire() {
        let t = compiled("0 0 30 2 *");
        assert_eq!(t.next_fire_after(at("2024-01-01T00:00:00Z")), None);
        assert_eq!(t.due(None, at("2024-01-01T00:00:00Z")), None);
    }

    #[test]
    fn missed_slots_fire_once() {
        let t = compiled("0 * * * *");
        // Down from 10:00 to 13:30: one Diagnosis, for 13:00.
        let slot = t.due(Some(at("2024-05-01T10:00:00Z")), at("2024-05-01T13:30:00Z"));
        assert_eq!(slot, Some(at("2024-05-01T13:00:00Z")));
        assert_eq!(t.due(slot, at("2024-05-01T13:45:00Z")), None);
        assert_eq!(
            t.due(slot, at("2024-05-01T14:00:00Z")),
            Some(at("2024-05-01T14:00:00Z"))
        );
    }

    #[test]
    fn a_new_trigger_waits_for_its_first_slot() {
        let t = compiled("0 3 * * *");
        let created = at("2024-05-01T12:00:00Z");
        assert_eq!(t.due(Some(created), at("2024-05-01T23:00:00Z")), None);
        assert_eq!(
            t.due(Some(created), at("2024-05-02T03:00:01Z")),
            Some(at("2024-05-02T03:00:00Z"))
        );
        assert_eq!(
            t.due(None, at("2024-05-01T23:00:00Z")),
            Some(at("2024-05-01T03:00:00Z")),
            "with nothing to go by, the latest slot fires"
        );
    }

    #[test]
    fn an_every_trigger_counts_periods_from_its_last_slot() {
        let t = compiled("@every 30m");
        let created = at("2024-05-01T12:00:00Z");
        assert_eq!(t.due(Some(created), at("2024-05-01T12:29:59Z")), None);
        let slot = t.due(Some(created), at("2024-05-01T13:10:00Z"));
        assert_eq!(slot, Some(at("2024-05-01T13:00:00Z")));
        assert_eq!(t.due(slot, at("2024-05-01T13:20:00Z")), None);
        assert_eq!(
            t.due(slot, at("2024-05-01T13:30:00Z")),
            Some(at("2024-05-01T13:30:00Z"))
        );
    }

    #[test]
    fn a_zoned_trigger_fires_on_the_zone_clock() {
        let t = compiled("TZ=Europe/Berlin 0 6 * * *");
        assert_eq!(
            t.due(Some(at("2024-05-01T00:00:00Z")), at("2024-05-01T04:30:00Z")),
            Some(at("2024-05-01T04:00:00Z")),
            "06:00 in Berlin is 04:00 UTC in summer"
        );
        assert_eq!(
            t.due(Some(at("2024-05-01T00:00:00Z")), at("2024-05-01T03:59:59Z")),
            None
        );
    }

    #[test]
    fn last_schedule_falls_back_to_creation() {
        let mut t = trigger(
            "metadata: {name: t, creationTimestamp: '2024-05-01T12:00:00Z'}\n\
             spec: {operationSet: s, sourceTemplate: {cronTemplate: {schedule: '@daily'}}}",
        );
        assert_eq!(
            last_schedule_or_creation(&t),
            Some(at("2024-05-01T12:00:00Z"))
        );
        t.status =
            Some(yaml_serde::from_str("lastScheduleTime: '2024-05-03T00:00:00Z'").expect("status"));
        assert_eq!(
            last_schedule_or_creation(&t),
            Some(at("2024-05-03T00:00:00Z"))
        );
    }

    #[test]
    fn scheduled_diagnosis_is_named_by_its_slot() {
        let t = compiled("@hourly");
        let slot = at("2024-05-01T13:00:00Z");
        let new = t.scheduled_diagnosis(slot).expect("a cron trigger");
        assert_eq!(new.name, format!("cron.nightly.{}", slot.as_second()));
        assert_valid_name(&new.name);
        assert_eq!(new.labels[SOURCE_LABEL], "cron");
        assert_eq!(new.spec.node_name.as_deref(), Some("node-1"));
        assert_eq!(new.spec.operation_set, "s");
        assert_eq!(new.spec.service_account_name, None);
    }

    #[test]
    fn scheduled_diagnoses_name_the_trigger_s_service_account() {
        let yaml = "metadata: {name: nightly}\nspec:\n  operationSet: s\n  \
                    serviceAccountName: repairer\n  sourceTemplate:\n    \
                    cronTemplate: {schedule: '@hourly'}\n";
        let t = CompiledTrigger::new(&trigger(yaml)).unwrap();
        let new = t
            .scheduled_diagnosis(at("2024-05-01T13:00:00Z"))
            .expect("a cron trigger");
        assert_eq!(new.spec.service_account_name.as_deref(), Some("repairer"));
    }

    #[test]
    fn slots_before_1970_make_no_diagnosis() {
        let t = compiled("@yearly");
        let slot = t.due(None, at("1960-06-01T00:00:00Z"));
        assert_eq!(slot, Some(at("1960-01-01T00:00:00Z")));
        assert!(t.scheduled_diagnosis(at("1960-01-01T00:00:00Z")).is_none());
    }
}
