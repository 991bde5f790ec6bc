//! `schedule` crontabs with the meaning shell-operator's cron library gives them.

use crate::shell_operator::duration::{DurationError, parse_go_duration};
use ::cron::{Schedule, TimeUnitSpec as _};
use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::Offset;
use std::fmt;
use std::ops::Bound::{Excluded, Unbounded};
use std::str::FromStr as _;
use std::time::Duration;

/// Why a text is not a crontab.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrontabError {
    /// Nothing was given.
    #[error("a crontab is required, e.g. \"*/5 * * * *\"")]
    Empty,
    /// A `TZ=` or `CRON_TZ=` prefix.
    #[error("time zones are not supported: schedules run in UTC")]
    TimeZone,
    /// `@every` with a period that is not a Go duration.
    #[error(transparent)]
    Every(#[from] DurationError),
    /// `@every` with a period under a second.
    #[error("@every needs at least 1s, got {0:?}")]
    EveryTooShort(Duration),
    /// An `@` word that is not a descriptor.
    #[error(
        "unknown descriptor {0:?}: use @yearly, @monthly, @weekly, @daily, @hourly, \
         @every <duration>, or 5 or 6 fields"
    )]
    UnknownDescriptor(String),
    /// The fields do not parse; the reason names the field.
    #[error("{0}")]
    Fields(String),
}

/// A parsed `schedule` crontab, with the meaning shell-operator's cron library
/// (robfig/cron) gives it, in UTC.
///
/// - 5 fields (`minute hour day-of-month month day-of-week`) fire at second 0; 6 fields
///   put seconds first.
/// - Day of week counts 0 (or 7) as Sunday and accepts `sun`..`sat`. When both day
///   fields are restricted a day matching *either* fires, as in a crontab.
/// - `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`,
///   and `@every <duration>` (Go syntax, e.g. `1h30m`) are accepted.
///
/// The `cron` crate parses the fields; the search for the next slot is done here
/// because the crate numbers days of week from 1 = Sunday, requires both day fields
/// to match, and speaks `chrono`, which Operon does not use.
#[derive(Debug, Clone)]
pub struct Crontab {
    /// As the hook wrote it, for messages and the debug interface.
    source: String,
    rule: Rule,
}

#[derive(Debug, Clone)]
enum Rule {
    Fields(Box<CronFields>),
    /// `@every`: a fixed period from each fire, not aligned to the clock.
    Every(Duration),
}

#[derive(Debug, Clone)]
struct CronFields {
    /// Six fields for the crate, day of week always `*` (matched here).
    schedule: Schedule,
    /// Allowed days of week, bit 0 = Sunday.
    days_of_week: u8,
    /// Whether day of month was written as `*` or `?` (possibly with a step), which in
    /// robfig/cron makes the two day fields combine with "and" instead of "or".
    day_of_month_star: bool,
    /// The same for day of week.
    day_of_week_star: bool,
}

impl PartialEq for Crontab {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl fmt::Display for Crontab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl Crontab {
    /// Parses a crontab, or says why it is not one.
    pub fn parse(text: &str) -> Result<Self, CrontabError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(CrontabError::Empty);
        }
        if trimmed.starts_with("TZ=") || trimmed.starts_with("CRON_TZ=") {
            return Err(CrontabError::TimeZone);
        }
        let rule = if let Some(descriptor) = trimmed.strip_prefix('@') {
            match descriptor.split_once(char::is_whitespace) {
                Some((every, period)) if every.eq_ignore_ascii_case("every") => {
                    let period = parse_go_duration(period.trim())?;
                    if period < Duration::from_secs(1) {
                        return Err(CrontabError::EveryTooShort(period));
                    }
                    Rule::Every(period)
                }
                _ => Rule::Fields(Box::new(
                    CronFields::parse(expand_descriptor(trimmed)?).map_err(CrontabError::Fields)?,
                )),
            }
        } else {
            Rule::Fields(Box::new(
                CronFields::parse(trimmed).map_err(CrontabError::Fields)?,
            ))
        };
        Ok(Self {
            source: text.to_owned(),
            rule,
        })
    }

    /// The crontab as the hook wrote it.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The first time strictly after `after` at which the binding fires, or `None` if
    /// it never fires again (e.g. `0 0 30 2 *`).
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.rule {
            Rule::Every(period) => {
                let whole = Timestamp::from_second(floor_second(after)).ok()?;
                let period = jiff::SignedDuration::try_from(*period).ok()?;
                whole.checked_add(period).ok()
            }
            Rule::Fields(fields) => fields.next_after(after),
        }
    }
}

/// The six-field expansion of a robfig/cron descriptor.
fn expand_descriptor(text: &str) -> Result<&'static str, CrontabError> {
    Ok(match text.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 0 1 1 *",
        "@monthly" => "0 0 0 1 * *",
        "@weekly" => "0 0 0 * * 0",
        "@daily" | "@midnight" => "0 0 0 * * *",
        "@hourly" => "0 0 * * * *",
        _ => return Err(CrontabError::UnknownDescriptor(text.to_owned())),
    })
}

/// Whole seconds of `t`, rounded towards the past.
fn floor_second(t: Timestamp) -> i64 {
    let seconds = t.as_second();
    if t.subsec_nanosecond() < 0 {
        seconds - 1
    } else {
        seconds
    }
}

impl CronFields {
    fn parse(text: &str) -> Result<Self, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let (second, minute, hour, day_of_month, month, day_of_week) = match *fields.as_slice() {
            [minute, hour, dom, month, dow] => ("0", minute, hour, dom, month, dow),
            [second, minute, hour, dom, month, dow] => (second, minute, hour, dom, month, dow),
            _ => {
                return Err(format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) or 6 \
                     (seconds first), found {}",
                    fields.len()
                ));
            }
        };
        let days_of_week = parse_days_of_week(day_of_week)
            .map_err(|reason| format!("day of week {day_of_week:?}: {reason}"))?;
        let schedule = Schedule::from_str(&format!(
            "{second} {minute} {hour} {day_of_month} {month} *"
        ))
        .map_err(|e| format!("invalid crontab {text:?}: {e}"))?;
        Ok(Self {
            schedule,
            days_of_week,
            day_of_month_star: is_star_field(day_of_month),
            day_of_week_star: is_star_field(day_of_week),
        })
    }

    fn day_matches(&self, date: Date) -> bool {
        let day = u32::try_from(date.day()).unwrap_or(0);
        let in_month = self.schedule.days_of_month().includes(day);
        let weekday = date.weekday().to_sunday_zero_offset();
        let in_week = self.days_of_week & (1 << weekday) != 0;
        if self.day_of_month_star || self.day_of_week_star {
            in_month && in_week
        } else {
            in_month || in_week
        }
    }

    fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let s = &self.schedule;
        let start = Timestamp::from_second(floor_second(after).checked_add(1)?).ok()?;
        let mut t = Offset::UTC.to_datetime(start);
        // Every rule has a slot within a leap-year cycle (29 February is the rarest day
        // a single day field can ask for), so a search past that finds nothing.
        let last_year = t.year().saturating_add(8);
        loop {
            if t.year() > last_year {
                return None;
            }
            let month = u32::try_from(t.month()).ok()?;
            let hour = u32::try_from(t.hour()).ok()?;
            let minute = u32::try_from(t.minute()).ok()?;
            let second = u32::try_from(t.second()).ok()?;
            t = if !s.months().includes(month) {
                match s.months().range((Excluded(month), Unbounded)).next() {
                    Some(next) => {
                        start_of_day(Date::new(t.year(), i8::try_from(next).ok()?, 1).ok()?)
                    }
                    None => start_of_day(Date::new(t.year().checked_add(1)?, 1, 1).ok()?),
                }
            } else if !self.day_matches(t.date()) {
                start_of_day(t.date().tomorrow().ok()?)
            } else if !s.hours().includes(hour) {
                match s.hours().range((Excluded(hour), Unbounded)).next() {
                    Some(next) => t.date().at(i8::try_from(next).ok()?, 0, 0, 0),
                    None => start_of_day(t.date().tomorrow().ok()?),
                }
            } else if !s.minutes().includes(minute) {
                match s.minutes().range((Excluded(minute), Unbounded)).next() {
                    Some(next) => t.date().at(t.hour(), i8::try_from(next).ok()?, 0, 0),
                    None => next_hour(t)?,
                }
            } else if !s.seconds().includes(second) {
                match s.seconds().range((Excluded(second), Unbounded)).next() {
                    Some(next) => t
                        .date()
                        .at(t.hour(), t.minute(), i8::try_from(next).ok()?, 0),
                    None => next_minute(t)?,
                }
            } else {
                return Offset::UTC.to_timestamp(t).ok();
            };
        }
    }
}

fn start_of_day(date: Date) -> DateTime {
    date.at(0, 0, 0, 0)
}

fn next_hour(t: DateTime) -> Option<DateTime> {
    if t.hour() < 23 {
        Some(t.date().at(t.hour() + 1, 0, 0, 0))
    } else {
        Some(start_of_day(t.date().tomorrow().ok()?))
    }
}

fn next_minute(t: DateTime) -> Option<DateTime> {
    if t.minute() < 59 {
        Some(t.date().at(t.hour(), t.minute() + 1, 0, 0))
    } else {
        next_hour(t)
    }
}

/// robfig/cron's "star bit": a field any of whose items starts with `*` or `?`.
fn is_star_field(field: &str) -> bool {
    field
        .split(',')
        .any(|item| item.starts_with('*') || item.starts_with('?'))
}

/// A day-of-week field as a bit set (bit 0 = Sunday). Items are separated by commas;
/// each is `*`/`?`, a day, or `day-day`, optionally with `/step`; a lone day before a
/// step (`1/2`) runs to Saturday, as in robfig/cron.
fn parse_days_of_week(field: &str) -> Result<u8, String> {
    let mut days = 0u8;
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step = step
                    .parse::<usize>()
                    .ok()
                    .filter(|&step| step >= 1)
                    .ok_or_else(|| format!("step {step:?} is not a positive number"))?;
                (range, Some(step))
            }
            None => (item, None),
        };
        let (first, last) = if range == "*" || range == "?" {
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
    Ok(days)
}

/// One day of week: 0-7 (0 and 7 are Sunday) or a three-letter English name.
fn day_of_week(text: &str) -> Result<u8, String> {
    const NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
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
        .position(|name| *name == lower)
        .and_then(|day| u8::try_from(day).ok())
        .ok_or_else(|| format!("{text:?} is not a day of the week (0-7 or sun..sat)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("timestamp")
    }

    #[test]
    fn crontab_with_five_fields_fires_at_second_zero() {
        let every_five = Crontab::parse("*/5 * * * *").expect("valid");
        assert_eq!(
            every_five.next_after(at("2024-05-01T10:02:30Z")),
            Some(at("2024-05-01T10:05:00Z"))
        );
        assert_eq!(
            every_five.next_after(at("2024-05-01T10:05:00Z")),
            Some(at("2024-05-01T10:10:00Z"))
        );
        let every_ten_seconds = Crontab::parse("*/10 * * * * *").expect("valid");
        assert_eq!(
            every_ten_seconds.next_after(at("2024-05-01T10:02:30.5Z")),
            Some(at("2024-05-01T10:02:40Z"))
        );
        let night = Crontab::parse("0 2 */3 * * *").expect("valid");
        assert_eq!(
            night.next_after(at("2024-05-01T10:02:30Z")),
            Some(at("2024-05-01T12:02:00Z"))
        );
    }

    #[test]
    fn crontab_days_follow_crontab_rules() {
        // 2024-05-04 is a Saturday; 0 is Sunday.
        let sunday = Crontab::parse("0 9 * * 0").expect("valid");
        assert_eq!(
            sunday.next_after(at("2024-05-04T12:00:00Z")),
            Some(at("2024-05-05T09:00:00Z"))
        );
        let weekdays = Crontab::parse("30 8 * * mon-fri").expect("valid");
        assert_eq!(
            weekdays.next_after(at("2024-05-04T12:00:00Z")),
            Some(at("2024-05-06T08:30:00Z"))
        );
        // Both day fields restricted: either one fires (the 10th, or a Sunday).
        let either = Crontab::parse("0 0 10 * sun").expect("valid");
        assert_eq!(
            either.next_after(at("2024-05-06T00:00:00Z")),
            Some(at("2024-05-10T00:00:00Z"))
        );
        assert_eq!(
            either.next_after(at("2024-05-10T00:00:00Z")),
            Some(at("2024-05-12T00:00:00Z"))
        );
        let leap = Crontab::parse("0 0 29 2 *").expect("valid");
        assert_eq!(
            leap.next_after(at("2024-03-01T00:00:00Z")),
            Some(at("2028-02-29T00:00:00Z"))
        );
        let never = Crontab::parse("0 0 30 2 *").expect("valid");
        assert_eq!(never.next_after(at("2024-03-01T00:00:00Z")), None);
    }

    #[test]
    fn crontab_descriptors_and_errors() {
        let daily = Crontab::parse("@daily").expect("valid");
        assert_eq!(
            daily.next_after(at("2024-05-01T10:00:00Z")),
            Some(at("2024-05-02T00:00:00Z"))
        );
        let every = Crontab::parse("@every 1h30m").expect("valid");
        assert_eq!(
            every.next_after(at("2024-05-01T10:00:00.7Z")),
            Some(at("2024-05-01T11:30:00Z"))
        );
        assert_eq!(every.as_str(), "@every 1h30m");
        for bad in [
            "",
            "* * *",
            "* * * 22 *",
            "* * * * 8",
            "@fortnightly",
            "@every 10ms",
            "TZ=Europe/Berlin 0 * * * *",
        ] {
            assert!(Crontab::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }
}
