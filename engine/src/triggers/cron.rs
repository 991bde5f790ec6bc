//! Cron schedules: parsing a `cronTemplate.schedule` with crontab's meaning, and finding
//! the slots around an instant, in UTC.
//!
//! The `cron` crate parses the fields, but it reads a six-field expression (seconds
//! first) with Quartz's day-of-week numbering (1 = Sunday) and requires day of month
//! *and* day of week to match. A crontab, and KubeDiag's `cron.ParseStandard`, count
//! 0 (or 7) as Sunday and fire when *either* restricted day field matches. So the
//! day-of-week field is translated before the crate sees it, and the slot search is
//! done here, over the crate's parsed field sets, with crontab's day rule. Doing the
//! search here also keeps `chrono`, the crate's time library, out of Operon's API.

use super::Problems;
use crate::api::Trigger;
use ::cron::{Schedule, TimeUnitSpec as _};
use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::Offset;
use std::ops::Bound::{Excluded, Unbounded};
use std::str::FromStr as _;

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

/// A parsed schedule.
#[derive(Debug, Clone)]
pub(super) struct CronSchedule {
    /// As the user wrote it, for messages.
    source: String,
    /// Six fields, seconds first, day of week in the crate's numbering.
    schedule: Schedule,
    /// Whether day of month is restricted (not `*` or `?`): with day of week also
    /// restricted, a day matching either one fires, as in a crontab.
    day_of_month_restricted: bool,
    /// Whether day of week is restricted (not `*` or `?`).
    day_of_week_restricted: bool,
}

impl CronSchedule {
    /// Parses `text` (at `field`), or records why it does not parse.
    pub(super) fn parse(text: &str, field: &str, problems: &mut Problems) -> Option<Self> {
        match Self::parse_text(text) {
            Ok(schedule) => Some(schedule),
            Err(reason) => {
                problems.push(field, reason);
                None
            }
        }
    }

    fn parse_text(text: &str) -> Result<Self, String> {
        let trimmed = text.trim();
        let expanded = if trimmed.starts_with('@') {
            descriptor(trimmed).ok_or_else(|| {
                format!(
                    "unknown schedule {trimmed:?}: use @yearly, @monthly, @weekly, @daily, \
                     @hourly, or 5 fields"
                )
            })?
        } else {
            trimmed
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields
            .first()
            .is_some_and(|f| f.starts_with("TZ=") || f.starts_with("CRON_TZ="))
        {
            return Err("time zones are not supported: schedules are in UTC".to_owned());
        }
        let (seconds, minute, hour, day_of_month, month, day_of_week) = match *fields.as_slice() {
            [minute, hour, day_of_month, month, day_of_week] => {
                ("0", minute, hour, day_of_month, month, day_of_week)
            }
            [seconds, minute, hour, day_of_month, month, day_of_week] => {
                (seconds, minute, hour, day_of_month, month, day_of_week)
            }
            _ => {
                return Err(format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) or 6 \
                     (seconds first), got {}",
                    fields.len()
                ));
            }
        };
        let days = days_of_week(day_of_week)
            .map_err(|reason| format!("invalid day of week {day_of_week:?}: {reason}"))?;
        let crate_day_of_week = match days {
            None => "*".to_owned(),
            // The crate counts 1 = Sunday .. 7 = Saturday.
            Some(days) => (0..7u8)
                .filter(|day| days & (1 << day) != 0)
                .map(|day| (day + 1).to_string())
                .collect::<Vec<_>>()
                .join(","),
        };
        let schedule = Schedule::from_str(&format!(
            "{seconds} {minute} {hour} {day_of_month} {month} {crate_day_of_week}"
        ))
        .map_err(|error| format!("invalid schedule {text:?}: {error}"))?;
        Ok(Self {
            source: text.to_owned(),
            schedule,
            day_of_month_restricted: !is_any(day_of_month),
            day_of_week_restricted: days.is_some(),
        })
    }

    /// The schedule as the user wrote it.
    pub(super) fn source(&self) -> &str {
        &self.source
    }

    /// The first slot strictly after `after`.
    pub(super) fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let s = &self.schedule;
        let mut m = if after < Timestamp::UNIX_EPOCH {
            Moment::start_of_year(FIRST_YEAR)
        } else {
            Moment::from_timestamp(after)?.next_second()
        };
        // Each step moves forward to the next candidate a field allows; the crate's
        // years end in 2100, so the loop ends.
        loop {
            if !s.years().includes(m.year) {
                let year = s.years().range((Excluded(m.year), Unbounded)).next()?;
                m = Moment::start_of_year(year);
            } else if !s.months().includes(m.month) {
                m = match s.months().range((Excluded(m.month), Unbounded)).next() {
                    Some(month) => Moment::start_of_month(m.year, month),
                    None => Moment::start_of_year(m.year + 1),
                };
            } else if !self.day_matches(m) {
                m = m.next_day();
            } else if !s.hours().includes(m.hour) {
                m = match s.hours().range((Excluded(m.hour), Unbounded)).next() {
                    Some(hour) => Moment {
                        hour,
                        minute: 0,
                        second: 0,
                        ..m
                    },
                    None => m.next_day(),
                };
            } else if !s.minutes().includes(m.minute) {
                m = match s.minutes().range((Excluded(m.minute), Unbounded)).next() {
                    Some(minute) => Moment {
                        minute,
                        second: 0,
                        ..m
                    },
                    None => m.next_hour(),
                };
            } else if !s.seconds().includes(m.second) {
                m = match s.seconds().range((Excluded(m.second), Unbounded)).next() {
                    Some(second) => Moment { second, ..m },
                    None => m.next_minute(),
                };
            } else {
                return m.to_timestamp();
            }
        }
    }

    /// The last slot at or before `at`.
    pub(super) fn latest_at_or_before(&self, at: Timestamp) -> Option<Timestamp> {
        let s = &self.schedule;
        if at < Timestamp::UNIX_EPOCH {
            return None;
        }
        let mut m = Moment::from_timestamp(at)?;
        // The mirror image of `next_after`; the crate's years start in 1970.
        loop {
            if !s.years().includes(m.year) {
                let year = s.years().range(..m.year).next_back()?;
                m = Moment::end_of_month(year, 12);
            } else if !s.months().includes(m.month) {
                m = match s.months().range(..m.month).next_back() {
                    Some(month) => Moment::end_of_month(m.year, month),
                    None => Moment::end_of_month(m.year - 1, 12),
                };
            } else if !self.day_matches(m) {
                m = m.previous_day_end();
            } else if !s.hours().includes(m.hour) {
                m = match s.hours().range(..m.hour).next_back() {
                    Some(hour) => Moment {
                        hour,
                        minute: 59,
                        second: 59,
                        ..m
                    },
                    None => m.previous_day_end(),
                };
            } else if !s.minutes().includes(m.minute) {
                m = match s.minutes().range(..m.minute).next_back() {
                    Some(minute) => Moment {
                        minute,
                        second: 59,
                        ..m
                    },
                    None => m.previous_hour_end(),
                };
            } else if !s.seconds().includes(m.second) {
                m = match s.seconds().range(..m.second).next_back() {
                    Some(second) => Moment { second, ..m },
                    None => m.previous_minute_end(),
                };
            } else {
                return m.to_timestamp();
            }
        }
    }

    fn day_matches(&self, m: Moment) -> bool {
        let s = &self.schedule;
        let in_month = s.days_of_month().includes(m.day);
        let in_week = m
            .weekday_from_sunday_one()
            .is_some_and(|day| s.days_of_week().includes(day));
        if self.day_of_month_restricted && self.day_of_week_restricted {
            in_month || in_week
        } else {
            in_month && in_week
        }
    }
}

/// The five fields a crontab descriptor stands for.
fn descriptor(text: &str) -> Option<&'static str> {
    Some(match text.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return None,
    })
}

fn is_any(field: &str) -> bool {
    matches!(field, "*" | "?")
}

/// A crontab day-of-week field as a bit set (bit 0 = Sunday), or `None` for any day.
///
/// Items are separated by commas; each is `*`, a day, or `day-day`, optionally with
/// `/step`. A day is 0-7 (0 and 7 are Sunday) or a name (`sun` or `sunday`, ...). As in
/// `cron.ParseStandard`, `*` and a lone start before a step (`1/2`) run to Saturday.
fn days_of_week(field: &str) -> Result<Option<u8>, String> {
    if is_any(field) {
        return Ok(None);
    }
    let mut days = 0u8;
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: usize = step
                    .parse()
                    .ok()
                    .filter(|&step| step >= 1)
                    .ok_or_else(|| format!("step {step:?} is not a positive number"))?;
                (range, Some(step))
            }
            None => (item, None),
        };
        let (first, last) = if is_any(range) {
            (0, 6)
        } else if let Some((first, last)) = range.split_once('-') {
            (day_of_week(first)?, day_of_week(last)?)
        } else {
            let day = day_of_week(range)?;
            (day, if step.is_some() { 6 } else { day })
        };
        if first > last {
            return Err(format!("{item:?} runs backwards"));
        }
        for day in (first..=last).step_by(step.unwrap_or(1)) {
            days |= 1 << (day % 7);
        }
    }
    Ok(Some(days))
}

/// One day of week, 0-7 with 0 and 7 for Sunday, or its English name.
fn day_of_week(text: &str) -> Result<u8, String> {
    const NAMES: [&str; 7] = [
        "sunday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
    ];
    if let Ok(day) = text.parse::<u8>() {
        return if day <= 7 {
            Ok(day)
        } else {
            Err(format!("{day} is not 0-7 (0 and 7 are Sunday)"))
        };
    }
    let lower = text.to_ascii_lowercase();
    NAMES
        .iter()
        .position(|name| lower.len() >= 3 && (*name == lower || name[..3] == lower))
        .and_then(|day| u8::try_from(day).ok())
        .ok_or_else(|| format!("{text:?} is not a day of the week"))
}

/// The crate's first year.
const FIRST_YEAR: u32 = 1970;

/// A UTC date and time to the second, in the crate's ordinals (month and day from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Moment {
    year: u32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl Moment {
    /// `t` truncated to the second (`t` is not before 1970).
    fn from_timestamp(t: Timestamp) -> Option<Self> {
        let dt = Offset::UTC.to_datetime(t);
        Some(Self {
            year: u32::try_from(dt.year()).ok()?,
            month: u32::try_from(dt.month()).ok()?,
            day: u32::try_from(dt.day()).ok()?,
            hour: u32::try_from(dt.hour()).ok()?,
            minute: u32::try_from(dt.minute()).ok()?,
            second: u32::try_from(dt.second()).ok()?,
        })
    }

    fn to_timestamp(self) -> Option<Timestamp> {
        let dt = DateTime::new(
            i16::try_from(self.year).ok()?,
            i8::try_from(self.month).ok()?,
            i8::try_from(self.day).ok()?,
            i8::try_from(self.hour).ok()?,
            i8::try_from(self.minute).ok()?,
            i8::try_from(self.second).ok()?,
            0,
        )
        .ok()?;
        Offset::UTC.to_timestamp(dt).ok()
    }

    fn start_of_year(year: u32) -> Self {
        Self::start_of_month(year, 1)
    }

    fn start_of_month(year: u32, month: u32) -> Self {
        Self {
            year,
            month,
            day: 1,
            hour: 0,
            minute: 0,
            second: 0,
        }
    }

    fn end_of_month(year: u32, month: u32) -> Self {
        Self {
            year,
            month,
            day: days_in_month(year, month),
            hour: 23,
            minute: 59,
            second: 59,
        }
    }

    fn next_day(self) -> Self {
        if self.day < days_in_month(self.year, self.month) {
            Self {
                day: self.day + 1,
                ..Self::start_of_month(self.year, self.month)
            }
        } else if self.month < 12 {
            Self::start_of_month(self.year, self.month + 1)
        } else {
            Self::start_of_year(self.year + 1)
        }
    }

    fn next_hour(self) -> Self {
        if self.hour < 23 {
            Self {
                hour: self.hour + 1,
                minute: 0,
                second: 0,
                ..self
            }
        } else {
            self.next_day()
        }
    }

    fn next_minute(self) -> Self {
        if self.minute < 59 {
            Self {
                minute: self.minute + 1,
                second: 0,
                ..self
            }
        } else {
            self.next_hour()
        }
    }

    fn next_second(self) -> Self {
        if self.second < 59 {
            Self {
                second: self.second + 1,
                ..self
            }
        } else {
            self.next_minute()
        }
    }

    fn previous_day_end(self) -> Self {
        if self.day > 1 {
            Self {
                day: self.day - 1,
                ..Self::end_of_month(self.year, self.month)
            }
        } else if self.month > 1 {
            Self::end_of_month(self.year, self.month - 1)
        } else {
            // Years stay at or above 1970 here: the year check runs first.
            Self::end_of_month(self.year.saturating_sub(1), 12)
        }
    }

    fn previous_hour_end(self) -> Self {
        if self.hour > 0 {
            Self {
                hour: self.hour - 1,
                minute: 59,
                second: 59,
                ..self
            }
        } else {
            self.previous_day_end()
        }
    }

    fn previous_minute_end(self) -> Self {
        if self.minute > 0 {
            Self {
                minute: self.minute - 1,
                second: 59,
                ..self
            }
        } else {
            self.previous_hour_end()
        }
    }

    /// 1 = Sunday .. 7 = Saturday, the crate's day-of-week ordinals.
    fn weekday_from_sunday_one(self) -> Option<u32> {
        let date = Date::new(
            i16::try_from(self.year).ok()?,
            i8::try_from(self.month).ok()?,
            i8::try_from(self.day).ok()?,
        )
        .ok()?;
        u32::try_from(date.weekday().to_sunday_one_offset()).ok()
    }
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::super::new_diagnosis::tests::assert_valid_name;
    use super::super::tests::trigger;
    use super::super::{CompiledTrigger, SOURCE_LABEL};
    use super::*;
    use crate::api::Problem;

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
    fn five_fields_fire_at_second_zero() {
        assert_eq!(
            next("*/15 * * * *", "2024-05-01T10:07:30Z"),
            Some(at("2024-05-01T10:15:00Z"))
        );
        assert_eq!(
            next("0 3 * * *", "2024-05-01T03:00:00Z"),
            Some(at("2024-05-02T03:00:00Z")),
            "strictly after"
        );
        assert_eq!(
            next("0 0 1 1 *", "2024-12-31T23:59:59.5Z"),
            Some(at("2025-01-01T00:00:00Z"))
        );
    }

    #[test]
    fn six_fields_put_seconds_first() {
        assert_eq!(
            next("30 */15 * * * *", "2024-05-01T10:07:30Z"),
            Some(at("2024-05-01T10:15:30Z"))
        );
        assert_eq!(
            next("30 */15 * * * *", "2024-05-01T10:15:30Z"),
            Some(at("2024-05-01T10:30:30Z"))
        );
        assert_eq!(
            next("*/10 * * * * *", "2024-05-01T10:00:59Z"),
            Some(at("2024-05-01T10:01:00Z"))
        );
    }

    #[test]
    fn day_of_week_counts_like_crontab() {
        // 2024-05-04 is a Saturday.
        assert_eq!(
            next("0 9 * * 1-5", "2024-05-04T00:00:00Z"),
            Some(at("2024-05-06T09:00:00Z")),
            "1-5 is Monday to Friday"
        );
        assert_eq!(
            next("0 9 ? * 1-5", "2024-05-04T00:00:00Z"),
            Some(at("2024-05-06T09:00:00Z")),
            "? is any day of the month"
        );
        for sunday in [
            "0 0 * * 0",
            "0 0 * * 7",
            "0 0 * * sun",
            "0 0 * * Sunday",
            "@weekly",
        ] {
            assert_eq!(
                next(sunday, "2024-05-04T00:00:00Z"),
                Some(at("2024-05-05T00:00:00Z")),
                "{sunday}"
            );
        }
        assert_eq!(
            next("0 0 0 * * 6", "2024-05-01T00:00:00Z"),
            Some(at("2024-05-04T00:00:00Z")),
            "six fields count days the same way"
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
    }

    #[test]
    fn either_restricted_day_field_fires() {
        // crontab: the 13th, or any Friday. 2024-05-01 is a Wednesday.
        assert_eq!(
            next("0 0 13 * 5", "2024-05-01T00:00:00Z"),
            Some(at("2024-05-03T00:00:00Z"))
        );
        assert_eq!(
            next("0 0 13 * *", "2024-05-01T00:00:00Z"),
            Some(at("2024-05-13T00:00:00Z"))
        );
        assert_eq!(
            next("0 0 31 * *", "2024-04-01T00:00:00Z"),
            Some(at("2024-05-31T00:00:00Z"))
        );
        assert_eq!(
            next("0 0 29 2 *", "2024-03-01T00:00:00Z"),
            Some(at("2028-02-29T00:00:00Z"))
        );
    }

    #[test]
    fn impossible_schedules_never_fire() {
        let t = compiled("0 0 30 2 *");
        assert_eq!(t.next_fire_after(at("2024-01-01T00:00:00Z")), None);
        assert_eq!(t.due(None, at("2024-01-01T00:00:00Z")), None);
    }

    #[test]
    fn descriptors_are_accepted() {
        assert_eq!(
            next("@hourly", "2024-05-01T10:07:30Z"),
            Some(at("2024-05-01T11:00:00Z"))
        );
        assert_eq!(
            next("@daily", "2024-05-01T10:07:30Z"),
            Some(at("2024-05-02T00:00:00Z"))
        );
        assert_eq!(
            next("@monthly", "2024-05-01T10:07:30Z"),
            Some(at("2024-06-01T00:00:00Z"))
        );
        assert_eq!(
            next("@yearly", "2024-05-01T10:07:30Z"),
            Some(at("2025-01-01T00:00:00Z"))
        );
    }

    #[test]
    fn bad_schedules_name_the_field() {
        for (schedule, reason) in [
            ("* * * *", "got 4"),
            ("0 0 0 * * * 2030", "got 7"),
            ("", "got 0"),
            ("61 * * * *", "invalid schedule"),
            ("* * 32 * *", "invalid schedule"),
            ("* * * * 8", "invalid day of week"),
            ("* * * * 5-1", "runs backwards"),
            ("* * * * */0", "not a positive number"),
            ("* * * * funday", "not a day of the week"),
            ("@every 1h", "unknown schedule"),
            ("CRON_TZ=Asia/Shanghai 0 9 * * *", "time zones"),
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
    fn latest_and_next_agree() {
        for schedule in [
            "*/7 * * * *",
            "15 10 * * 1-5",
            "0 0 13 * 5",
            "0 0 29 2 *",
            "45 30 */6 * * *",
            "0 12 1 */3 *",
        ] {
            let compiled = compiled(schedule);
            let super::super::Source::Cron(cron) = &compiled.source else {
                panic!("{schedule} is not a cron source");
            };
            let mut slot = cron
                .latest_at_or_before(at("2023-11-05T07:08:09Z"))
                .expect("an earlier slot");
            // Leap days run out in 2096, fifteen slots after 2020.
            for _ in 0..15 {
                let next = cron.next_after(slot).expect("a next slot");
                assert!(next > slot, "{schedule}");
                assert_eq!(cron.latest_at_or_before(next), Some(next), "{schedule}");
                let just_before = next - jiff::SignedDuration::from_secs(1);
                assert_eq!(
                    cron.latest_at_or_before(just_before),
                    Some(slot),
                    "{schedule}: nothing between {slot} and {next}"
                );
                slot = next;
            }
        }
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
    }

    #[test]
    fn before_1970_starts_at_the_first_slot() {
        assert_eq!(
            next("@yearly", "1960-06-01T00:00:00Z"),
            Some(at("1970-01-01T00:00:00Z"))
        );
        let t = compiled("@yearly");
        assert_eq!(t.due(None, at("1960-06-01T00:00:00Z")), None);
        assert!(t.scheduled_diagnosis(at("1960-01-01T00:00:00Z")).is_none());
    }
}
