use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().expect("test timestamp")
}

fn schedule(text: &str) -> Schedule {
    Schedule::parse(text).unwrap_or_else(|error| panic!("{text:?}: {error}"))
}

fn next(text: &str, after: &str) -> Option<Timestamp> {
    schedule(text).next_after(at(after))
}

fn latest(text: &str, at_or_before: &str) -> Option<Timestamp> {
    schedule(text).latest_at_or_before(at(at_or_before))
}

#[test]
fn five_fields_fire_at_second_zero() {
    assert_eq!(
        next("*/5 * * * *", "2024-05-01T10:02:30Z"),
        Some(at("2024-05-01T10:05:00Z"))
    );
    assert_eq!(
        next("*/5 * * * *", "2024-05-01T10:05:00Z"),
        Some(at("2024-05-01T10:10:00Z")),
        "strictly after"
    );
    assert_eq!(
        next("0 3 * * *", "2024-05-01T03:00:00Z"),
        Some(at("2024-05-02T03:00:00Z"))
    );
    assert_eq!(
        next("0 0 1 1 *", "2024-12-31T23:59:59.5Z"),
        Some(at("2025-01-01T00:00:00Z"))
    );
    assert_eq!(
        next("5/15 * * * *", "2024-05-01T10:06:00Z"),
        Some(at("2024-05-01T10:20:00Z")),
        "a/n runs from a to the field's end"
    );
    assert_eq!(
        next("0 0 1 */3 *", "2024-05-01T10:00:00Z"),
        Some(at("2024-07-01T00:00:00Z"))
    );
    assert_eq!(
        next("0 0 1 JAN-mar *", "2024-05-01T10:00:00Z"),
        Some(at("2025-01-01T00:00:00Z")),
        "month names in any case"
    );
}

#[test]
fn six_fields_put_seconds_first() {
    assert_eq!(
        next("*/10 * * * * *", "2024-05-01T10:02:30.5Z"),
        Some(at("2024-05-01T10:02:40Z"))
    );
    assert_eq!(
        next("*/10 * * * * *", "2024-05-01T10:00:59Z"),
        Some(at("2024-05-01T10:01:00Z"))
    );
    assert_eq!(
        next("30 */15 * * * *", "2024-05-01T10:15:30Z"),
        Some(at("2024-05-01T10:30:30Z"))
    );
    assert_eq!(
        next("0 2 */3 * * *", "2024-05-01T10:02:30Z"),
        Some(at("2024-05-01T12:02:00Z")),
        "the same text as five fields would be minute 0 of every third hour"
    );
    assert_eq!(
        next("0 2 */3 * *", "2024-05-01T10:02:30Z"),
        Some(at("2024-05-04T02:00:00Z"))
    );
}

#[test]
fn day_of_week_counts_like_crontab() {
    // 2024-05-04 is a Saturday.
    for sunday in [
        "0 0 * * 0",
        "0 0 * * 7",
        "0 0 * * sun",
        "0 0 * * SUN",
        "0 0 0 * * 0",
        "@weekly",
    ] {
        assert_eq!(
            next(sunday, "2024-05-04T00:00:00Z"),
            Some(at("2024-05-05T00:00:00Z")),
            "{sunday}"
        );
    }
    assert_eq!(
        next("30 8 * * mon-fri", "2024-05-04T12:00:00Z"),
        Some(at("2024-05-06T08:30:00Z"))
    );
    assert_eq!(
        next("0 9 ? * 1-5", "2024-05-04T00:00:00Z"),
        Some(at("2024-05-06T09:00:00Z")),
        "? is any day of the month"
    );
    assert_eq!(
        next("0 0 * * 5-7", "2024-05-04T12:00:00Z"),
        Some(at("2024-05-05T00:00:00Z")),
        "a range may end at 7"
    );
    assert_eq!(
        next("0 0 * * mon-wed/2", "2024-05-06T12:00:00Z"),
        Some(at("2024-05-08T00:00:00Z"))
    );
    // `1/2` runs to Saturday (1, 3, 5), never wrapping to Sunday.
    assert_eq!(
        next("0 0 * * 1/2", "2024-05-10T12:00:00Z"),
        Some(at("2024-05-13T00:00:00Z"))
    );
}

#[test]
fn either_restricted_day_field_fires() {
    // The 13th, or any Friday. 2024-05-01 is a Wednesday.
    assert_eq!(
        next("0 0 13 * 5", "2024-05-01T00:00:00Z"),
        Some(at("2024-05-03T00:00:00Z"))
    );
    assert_eq!(
        next("0 0 10 * sun", "2024-05-06T00:00:00Z"),
        Some(at("2024-05-10T00:00:00Z"))
    );
    assert_eq!(
        next("0 0 10 * sun", "2024-05-10T00:00:00Z"),
        Some(at("2024-05-12T00:00:00Z"))
    );
    assert_eq!(
        next("0 0 13 * *", "2024-05-01T00:00:00Z"),
        Some(at("2024-05-13T00:00:00Z"))
    );
    assert_eq!(
        next("0 0 31 * *", "2024-04-01T00:00:00Z"),
        Some(at("2024-05-31T00:00:00Z"))
    );
}

#[test]
fn a_star_with_a_step_still_makes_both_day_fields_required() {
    // robfig/cron's star bit: `*/2` counts as `*`, so the day must be odd *and* a
    // Monday. The first odd Monday after 2024-05-01 is the 13th (the 6th is even).
    assert_eq!(
        next("0 0 */2 * mon", "2024-05-01T00:00:00Z"),
        Some(at("2024-05-13T00:00:00Z"))
    );
    assert_eq!(
        next("0 0 1,*/2 * mon", "2024-05-01T00:00:00Z"),
        Some(at("2024-05-13T00:00:00Z")),
        "any item starting with a star counts"
    );
    assert_eq!(
        next("0 0 1-31/2 * mon", "2024-05-01T00:00:00Z"),
        Some(at("2024-05-03T00:00:00Z")),
        "a range is a restriction: either field matching is enough"
    );
}

#[test]
fn leap_days_and_impossible_days() {
    assert_eq!(
        next("0 0 29 2 *", "2024-03-01T00:00:00Z"),
        Some(at("2028-02-29T00:00:00Z"))
    );
    assert_eq!(
        next("0 0 29 2 *", "2096-03-01T00:00:00Z"),
        Some(at("2104-02-29T00:00:00Z")),
        "2100 is no leap year"
    );
    assert_eq!(
        latest("0 0 29 2 *", "2104-02-28T00:00:00Z"),
        Some(at("2096-02-29T00:00:00Z"))
    );
    let never = schedule("0 0 30 2 *");
    assert_eq!(never.next_after(at("2024-03-01T00:00:00Z")), None);
    assert_eq!(never.latest_at_or_before(at("2024-03-01T00:00:00Z")), None);
    assert_eq!(never.latest_due(None, at("2024-03-01T00:00:00Z")), None);
}

#[test]
fn each_descriptor_stands_for_its_fields() {
    let after = "2024-05-01T10:07:30Z";
    for (descriptor, expected) in [
        ("@yearly", "2025-01-01T00:00:00Z"),
        ("@annually", "2025-01-01T00:00:00Z"),
        ("@monthly", "2024-06-01T00:00:00Z"),
        ("@weekly", "2024-05-05T00:00:00Z"),
        ("@daily", "2024-05-02T00:00:00Z"),
        ("@midnight", "2024-05-02T00:00:00Z"),
        ("@hourly", "2024-05-01T11:00:00Z"),
        ("@every 1h30m", "2024-05-01T11:37:30Z"),
    ] {
        assert_eq!(next(descriptor, after), Some(at(expected)), "{descriptor}");
    }
    assert_eq!(latest("@monthly", after), Some(at("2024-05-01T00:00:00Z")));
    assert_eq!(
        latest("@every 1h", after),
        None,
        "@every has no fixed slots"
    );
}

#[test]
fn every_counts_whole_seconds_from_each_run() {
    let every = schedule("@every 1h30m");
    assert_eq!(every.as_str(), "@every 1h30m");
    assert_eq!(
        every.next_after(at("2024-05-01T10:00:00.7Z")),
        Some(at("2024-05-01T11:30:00Z"))
    );
    // robfig/cron's `Every`: under a second runs every second, fractions are dropped.
    for (period, seconds) in [("10ms", 1), ("0s", 1), ("1.9s", 1), ("2.5s", 2)] {
        assert_eq!(
            next(&format!("@every {period}"), "2024-05-01T10:00:00.5Z"),
            Some(at("2024-05-01T10:00:00Z") + SignedDuration::from_secs(seconds)),
            "@every {period}"
        );
    }
}

#[test]
fn missed_slots_make_one_late_run() {
    let hourly = schedule("0 * * * *");
    // Down from 10:00 to 13:30: one run, for 13:00.
    let slot = hourly.latest_due(Some(at("2024-05-01T10:00:00Z")), at("2024-05-01T13:30:00Z"));
    assert_eq!(slot, Some(at("2024-05-01T13:00:00Z")));
    assert_eq!(hourly.latest_due(slot, at("2024-05-01T13:45:00Z")), None);
    assert_eq!(
        hourly.latest_due(slot, at("2024-05-01T14:00:00Z")),
        Some(at("2024-05-01T14:00:00Z"))
    );
    assert_eq!(
        hourly.latest_due(None, at("2024-05-01T13:30:00Z")),
        Some(at("2024-05-01T13:00:00Z")),
        "with nothing to go by, the latest slot"
    );

    let every = schedule("@every 40m");
    let last = at("2024-05-01T10:00:00.3Z");
    assert_eq!(
        every.latest_due(Some(last), at("2024-05-01T10:39:59Z")),
        None
    );
    assert_eq!(
        every.latest_due(Some(last), at("2024-05-01T10:40:00Z")),
        Some(at("2024-05-01T10:40:00Z"))
    );
    assert_eq!(
        every.latest_due(Some(last), at("2024-05-01T12:30:00Z")),
        Some(at("2024-05-01T12:00:00Z")),
        "three periods missed, one run, for the latest"
    );
    assert_eq!(
        every.latest_due(None, at("2024-05-01T12:30:00.9Z")),
        Some(at("2024-05-01T12:30:00Z"))
    );
}

#[test]
fn slots_are_computed_on_the_zone_wall_clock() {
    // Berlin is UTC+2 in summer, UTC+1 in winter.
    assert_eq!(
        next("TZ=Europe/Berlin 0 6 * * *", "2024-05-01T00:00:00Z"),
        Some(at("2024-05-01T04:00:00Z"))
    );
    assert_eq!(
        next("TZ=Europe/Berlin 0 6 * * *", "2024-01-10T00:00:00Z"),
        Some(at("2024-01-10T05:00:00Z"))
    );
    assert_eq!(
        next(
            "CRON_TZ=America/New_York 0 9 * * 1-5",
            "2024-05-04T00:00:00Z"
        ),
        Some(at("2024-05-06T13:00:00Z")),
        "the day of week is the zone's: Monday in New York"
    );
    assert_eq!(
        next("CRON_TZ=Asia/Tokyo @daily", "2024-05-01T10:00:00Z"),
        Some(at("2024-05-01T15:00:00Z"))
    );
    assert_eq!(
        next("TZ=Asia/Kolkata 0 9 * * *", "2024-05-01T00:00:00Z"),
        Some(at("2024-05-01T03:30:00Z")),
        "a half-hour offset"
    );
    assert_eq!(
        latest("TZ=Europe/Berlin 0 0 1 * *", "2024-05-01T00:00:00Z"),
        Some(at("2024-04-30T22:00:00Z")),
        "May began in Berlin before it did in UTC"
    );
    assert_eq!(
        next("TZ=UTC 0 6 * * *", "2024-05-01T00:00:00Z"),
        Some(at("2024-05-01T06:00:00Z"))
    );
    assert_eq!(
        next("TZ= 0 6 * * *", "2024-05-01T00:00:00Z"),
        Some(at("2024-05-01T06:00:00Z")),
        "an empty zone is UTC, as Go's time.LoadLocation has it"
    );
    assert_eq!(
        next("TZ=Europe/Berlin   @every 1m", "2024-05-01T00:00:00Z"),
        Some(at("2024-05-01T00:01:00Z"))
    );
}

#[test]
fn a_slot_the_clocks_skip_does_not_fire_that_day() {
    // 2024-03-31 in Berlin: 02:00 CET is followed by 03:00 CEST.
    let half_past_two = schedule("TZ=Europe/Berlin 30 2 * * *");
    assert_eq!(
        half_past_two.next_after(at("2024-03-30T12:00:00Z")),
        Some(at("2024-04-01T00:30:00Z"))
    );
    assert_eq!(
        half_past_two.latest_at_or_before(at("2024-04-01T00:00:00Z")),
        Some(at("2024-03-30T01:30:00Z"))
    );
    // Every half hour: 01:30 CET, then 03:00 CEST, one hour of wall clock later.
    assert_eq!(
        next("TZ=Europe/Berlin */30 * * * *", "2024-03-31T00:30:00Z"),
        Some(at("2024-03-31T01:00:00Z"))
    );
    // 2018-11-04 in São Paulo had no midnight (00:00 became 01:00): @daily skips it,
    // as robfig/cron's midnight correction does.
    assert_eq!(
        next("TZ=America/Sao_Paulo @daily", "2018-11-03T12:00:00Z"),
        Some(at("2018-11-05T02:00:00Z"))
    );
}

#[test]
fn a_slot_the_clocks_repeat_fires_at_each_occurrence() {
    // 2024-10-27 in Berlin: 03:00 CEST (01:00 UTC) is followed by 02:00 CET.
    let half_past_two = schedule("TZ=Europe/Berlin 30 2 * * *");
    let first = half_past_two.next_after(at("2024-10-26T12:00:00Z"));
    assert_eq!(first, Some(at("2024-10-27T00:30:00Z")), "02:30 CEST");
    let second = half_past_two.next_after(first.expect("first"));
    assert_eq!(second, Some(at("2024-10-27T01:30:00Z")), "02:30 CET");
    assert_eq!(
        half_past_two.next_after(second.expect("second")),
        Some(at("2024-10-28T01:30:00Z"))
    );
    assert_eq!(
        half_past_two.latest_at_or_before(at("2024-10-27T01:29:59Z")),
        Some(at("2024-10-27T00:30:00Z"))
    );
    // After 02:45 CEST the wall clock goes back: 02:15 CET comes next, not 03:15.
    assert_eq!(
        next("TZ=Europe/Berlin 15,45 * * * *", "2024-10-27T00:45:00Z"),
        Some(at("2024-10-27T01:15:00Z"))
    );
    assert_eq!(
        latest("TZ=Europe/Berlin 15,45 * * * *", "2024-10-27T01:10:00Z"),
        Some(at("2024-10-27T00:45:00Z"))
    );
}

#[test]
fn zones_resolve_without_a_system_database() {
    // The tzdb built into the binary (jiff's `tzdb-bundle-always`) is what jiff falls
    // back to on a machine with no /usr/share/zoneinfo.
    let bundled = jiff::tz::TimeZoneDatabase::bundled();
    let berlin = bundled
        .get("Europe/Berlin")
        .expect("Berlin in the bundled tzdb");
    let noon = at("2024-05-01T10:00:00Z");
    assert_eq!(berlin.to_offset(noon), jiff::tz::offset(2));
}

#[test]
fn next_and_latest_agree() {
    for (text, start, count) in [
        ("*/7 * * * *", "2023-11-05T07:08:09Z", 15),
        ("15 10 * * 1-5", "2023-11-05T07:08:09Z", 15),
        ("0 0 13 * 5", "2023-11-05T07:08:09Z", 15),
        ("0 0 29 2 *", "2023-11-05T07:08:09Z", 25),
        ("45 30 */6 * * *", "2023-11-05T07:08:09Z", 15),
        ("0 12 1 */3 *", "2023-11-05T07:08:09Z", 15),
        // Around both of Berlin's changes in 2024.
        ("TZ=Europe/Berlin 15,45 * * * *", "2024-03-30T20:00:00Z", 30),
        ("TZ=Europe/Berlin 15,45 * * * *", "2024-10-26T20:00:00Z", 30),
        ("TZ=Europe/Berlin 30 2 * * *", "2024-03-29T00:00:00Z", 4),
        ("TZ=Europe/Berlin 30 2 * * *", "2024-10-25T00:00:00Z", 4),
        (
            "CRON_TZ=America/New_York */20 1 * * *",
            "2024-11-02T00:00:00Z",
            12,
        ),
    ] {
        let schedule = schedule(text);
        let mut slot = schedule
            .latest_at_or_before(at(start))
            .expect("an earlier slot");
        for _ in 0..count {
            let next = schedule.next_after(slot).expect("a next slot");
            assert!(next > slot, "{text}");
            assert_eq!(schedule.latest_at_or_before(next), Some(next), "{text}");
            let just_before = next - SignedDuration::from_secs(1);
            assert_eq!(
                schedule.latest_at_or_before(just_before),
                Some(slot),
                "{text}: nothing between {slot} and {next}"
            );
            slot = next;
        }
    }
}

#[test]
fn before_1970_is_an_ordinary_time() {
    assert_eq!(
        next("@yearly", "1960-06-01T00:00:00Z"),
        Some(at("1961-01-01T00:00:00Z"))
    );
    assert_eq!(
        latest("@yearly", "1960-06-01T00:00:00Z"),
        Some(at("1960-01-01T00:00:00Z"))
    );
    assert_eq!(
        next("@every 1s", "1960-06-01T00:00:00.5Z"),
        Some(at("1960-06-01T00:00:01Z")),
        "fractions are floored towards the past"
    );
}

#[test]
fn errors_say_what_is_wrong_and_show_a_form_that_works() {
    for (text, expected) in [
        ("", "a schedule is required, e.g. \"*/5 * * * *\""),
        ("   ", "a schedule is required"),
        (
            "* * *",
            "expected 5 fields (minute hour day-of-month month day-of-week",
        ),
        ("* * *", "found 3"),
        ("0 0 0 * * * 2030", "found 7"),
        (
            "61 * * * *",
            "minute \"61\": 61 is outside 0-59; e.g. \"*/15\"",
        ),
        ("60 * * * * *", "second \"60\": 60 is outside 0-59"),
        ("* 24 * * *", "hour \"24\": 24 is outside 0-23"),
        ("* * 0 * *", "day of month \"0\": 0 is outside 1-31"),
        ("* * 32 * *", "day of month \"32\""),
        (
            "* * * 13 *",
            "month \"13\": 13 is outside 1-12; e.g. \"*/3\" or \"jan-mar\"",
        ),
        ("* * * * 8", "day of week \"8\": 8 is outside 0-7"),
        ("* * * * 5-1", "the range 5-1 runs backwards"),
        ("* * * * */0", "step \"0\" is not a positive number"),
        ("*/x * * * *", "step \"x\" is not a positive number"),
        (
            "* * * * funday",
            "\"funday\" is not a number or a day (sun..sat)",
        ),
        ("* * * * sunday", "\"sunday\" is not a number or a day"),
        (
            "* * * june *",
            "\"june\" is not a number or a month (jan..dec)",
        ),
        ("x * * * *", "\"x\" is not a number; e.g."),
        ("-1 * * * *", "\"\" is not a number"),
        ("1,,2 * * * *", "an item of the list is empty"),
        (
            "1-2-3 * * * *",
            "\"1-2-3\" is not a value, a range (a-b) or a step",
        ),
        ("*/2/3 * * * *", "\"*/2/3\" is not a value"),
        (
            "@fortnightly",
            "unknown descriptor \"@fortnightly\": use @yearly",
        ),
        ("@Daily", "unknown descriptor \"@Daily\""),
        ("@everyday", "unknown descriptor \"@everyday\""),
        ("@every", "@every needs a Go duration after it"),
        ("@every soon", "invalid duration \"soon\": use e.g. \"3s\""),
        ("@every -1s", "invalid duration \"-1s\""),
        (
            "TZ=Europe/Berlin",
            "TZ=Europe/Berlin names a time zone but no schedule follows it",
        ),
        (
            "CRON_TZ=Mars/Olympus 0 6 * * *",
            "unknown time zone \"Mars/Olympus\" in CRON_TZ=Mars/Olympus: use an IANA name, \
             e.g. \"CRON_TZ=Europe/Berlin 0 6 * * *\"",
        ),
        ("TZ=Europe/Berlin 0 6 * *", "found 4"),
        (
            "TZ=Europe/Berlin @weekly2",
            "unknown descriptor \"@weekly2\"",
        ),
    ] {
        let error = Schedule::parse(text).expect_err(text).to_string();
        assert!(error.contains(expected), "{text:?}: {error}");
    }
}

#[test]
fn errors_are_typed() {
    assert!(matches!(Schedule::parse(""), Err(ScheduleError::Empty)));
    assert!(matches!(
        Schedule::parse("* * * *"),
        Err(ScheduleError::FieldCount { found: 4 })
    ));
    assert!(matches!(
        Schedule::parse("* * * * 9"),
        Err(ScheduleError::Field {
            field: Field::DayOfWeek,
            problem: FieldProblem::OutOfRange {
                value: 9,
                min: 0,
                max: 7
            },
            ..
        })
    ));
    let Err(ScheduleError::UnknownZone { zone, source, .. }) =
        Schedule::parse("TZ=Nowhere/Special 0 6 * * *")
    else {
        panic!("an unknown zone is refused");
    };
    assert_eq!(zone, "Nowhere/Special");
    assert!(source.to_string().contains("Nowhere/Special"), "{source}");
}

#[test]
fn a_schedule_keeps_its_text() {
    let text = " TZ=Europe/Berlin 0 6 * * * ";
    let parsed: Schedule = text.parse().expect("valid");
    assert_eq!(parsed.as_str(), text);
    assert_eq!(parsed.to_string(), text);
    assert_eq!(parsed, schedule(text));
}
