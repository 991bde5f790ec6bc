//! Text into a schedule: the `TZ=`/`CRON_TZ=` prefix, descriptors, and robfig/cron's
//! field grammar (a comma-separated list of `*`, values, ranges `a-b` and steps `/n`).

use super::Rule;
use super::error::{Field, FieldProblem, ScheduleError};
use super::fields::{Bits, Fields};
use crate::duration::{DurationError, parse_go_duration};
use jiff::tz::TimeZone;
use std::time::Duration;

/// Reads `text` (already trimmed, not empty) into its zone and rule.
pub(super) fn parse(text: &str) -> Result<(TimeZone, Rule), ScheduleError> {
    let (zone, rest) = split_zone(text)?;
    let rule = match rest.strip_prefix('@') {
        Some(descriptor) => parse_descriptor(descriptor)?,
        None => Rule::Fields(Box::new(parse_fields(rest)?)),
    };
    Ok((zone, rule))
}

/// Splits off a `TZ=Zone ` or `CRON_TZ=Zone ` prefix, looking the zone up in jiff's
/// time zone database (the system's, or the copy built into the binary when the system
/// has none). Without a prefix the zone is UTC.
fn split_zone(text: &str) -> Result<(TimeZone, &str), ScheduleError> {
    for prefix in ["CRON_TZ=", "TZ="] {
        let Some(rest) = text.strip_prefix(prefix) else {
            continue;
        };
        let (zone, schedule) = rest
            .split_once(char::is_whitespace)
            .map_or((rest, ""), |(zone, schedule)| (zone, schedule.trim_start()));
        if schedule.is_empty() {
            return Err(ScheduleError::ZoneWithoutSchedule {
                prefix,
                zone: zone.to_owned(),
            });
        }
        // Go's time.LoadLocation reads an empty name as UTC; so does robfig/cron.
        if zone.is_empty() {
            return Ok((TimeZone::UTC, schedule));
        }
        let zone = jiff::tz::db()
            .get(zone)
            .map_err(|source| ScheduleError::UnknownZone {
                prefix,
                zone: zone.to_owned(),
                source,
            })?;
        return Ok((zone, schedule));
    }
    Ok((TimeZone::UTC, text))
}

/// A descriptor (the text after `@`). Names are matched exactly, as robfig/cron's
/// `switch` does; each stands for the six fields it is short for.
fn parse_descriptor(descriptor: &str) -> Result<Rule, ScheduleError> {
    let fields = match descriptor {
        "yearly" | "annually" => "0 0 0 1 1 *",
        "monthly" => "0 0 0 1 * *",
        "weekly" => "0 0 0 * * 0",
        "daily" | "midnight" => "0 0 0 * * *",
        "hourly" => "0 0 * * * *",
        _ => {
            return match descriptor.strip_prefix("every") {
                Some(period) if period.is_empty() || period.starts_with(char::is_whitespace) => {
                    parse_every(period.trim()).map(Rule::Every)
                }
                _ => Err(ScheduleError::UnknownDescriptor(format!("@{descriptor}"))),
            };
        }
    };
    parse_fields(fields).map(|fields| Rule::Fields(Box::new(fields)))
}

/// `@every`'s period as robfig/cron's `Every` keeps it: whole seconds, at least one.
fn parse_every(period: &str) -> Result<Duration, ScheduleError> {
    if period.is_empty() {
        return Err(ScheduleError::Every(DurationError::Invalid(String::new())));
    }
    let period = parse_go_duration(period).map_err(ScheduleError::Every)?;
    Ok(Duration::from_secs(period.as_secs().max(1)))
}

/// Five fields (second 0) or six (seconds first).
fn parse_fields(text: &str) -> Result<Fields, ScheduleError> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    let [second, minute, hour, day_of_month, month, day_of_week] = match *fields.as_slice() {
        [minute, hour, day_of_month, month, day_of_week] => {
            ["0", minute, hour, day_of_month, month, day_of_week]
        }
        [second, minute, hour, day_of_month, month, day_of_week] => {
            [second, minute, hour, day_of_month, month, day_of_week]
        }
        _ => {
            return Err(ScheduleError::FieldCount {
                found: fields.len(),
            });
        }
    };
    let day_of_month = parse_field(Field::DayOfMonth, day_of_month)?;
    let mut day_of_week = parse_field(Field::DayOfWeek, day_of_week)?;
    // 7 is Sunday as well as 0.
    if day_of_week.bits & 1 << 7 != 0 {
        day_of_week.bits = (day_of_week.bits & !(1 << 7)) | 1;
    }
    Ok(Fields {
        seconds: Bits(parse_field(Field::Second, second)?.bits),
        minutes: Bits(parse_field(Field::Minute, minute)?.bits),
        hours: Bits(parse_field(Field::Hour, hour)?.bits),
        days_of_month: Bits(day_of_month.bits),
        months: Bits(parse_field(Field::Month, month)?.bits),
        days_of_week: Bits(day_of_week.bits),
        day_of_month_star: day_of_month.star,
        day_of_week_star: day_of_week.star,
    })
}

/// One parsed field.
struct ParsedField {
    /// Bit `n` set for each allowed value `n`.
    bits: u64,
    /// Whether an item starts with `*` or `?` (robfig/cron's star bit).
    star: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Field {
    /// The values `*` and `a/n` run over.
    fn bounds(self) -> (u32, u32) {
        match self {
            Self::Second | Self::Minute => (0, 59),
            Self::Hour => (0, 23),
            Self::DayOfMonth => (1, 31),
            Self::Month => (1, 12),
            Self::DayOfWeek => (0, 6),
        }
    }

    /// One value: a number or, for months and days of week, a three-letter English
    /// name in any case. Day of week also takes 7, for Sunday.
    fn value(self, text: &str) -> Result<u32, FieldProblem> {
        let (names, first_name, expected): (&[&str], u32, _) = match self {
            Self::Month => (&MONTHS, 1, "a number or a month (jan..dec)"),
            Self::DayOfWeek => (&DAYS, 0, "a number or a day (sun..sat)"),
            _ => (&[], 0, "a number"),
        };
        let lower = text.to_ascii_lowercase();
        if let Some(index) = names.iter().position(|name| *name == lower) {
            return Ok(first_name + u32::try_from(index).unwrap_or(0));
        }
        let value: u32 = text.parse().map_err(|_| FieldProblem::NotAValue {
            text: text.to_owned(),
            expected,
        })?;
        let (min, max) = self.bounds();
        let max = if self == Self::DayOfWeek { 7 } else { max };
        if (min..=max).contains(&value) {
            Ok(value)
        } else {
            Err(FieldProblem::OutOfRange { value, min, max })
        }
    }
}

/// A field: items separated by commas, each `*` (or `?`), `a`, or `a-b`, optionally
/// followed by `/step`. A lone `a` before a step runs to the field's end (`5/15` in
/// minutes is 5, 20, 35, 50), as in robfig/cron.
fn parse_field(field: Field, text: &str) -> Result<ParsedField, ScheduleError> {
    let error = |problem| ScheduleError::Field {
        field,
        text: text.to_owned(),
        problem,
    };
    let (min, max) = field.bounds();
    let mut parsed = ParsedField {
        bits: 0,
        star: false,
    };
    for item in text.split(',') {
        if item.is_empty() {
            return Err(error(FieldProblem::EmptyItem));
        }
        let malformed = || error(FieldProblem::Malformed(item.to_owned()));
        let (range, step) = match item.split_once('/') {
            None => (item, None),
            Some((_, step)) if step.contains('/') => return Err(malformed()),
            Some((range, step)) => {
                let step: usize = step
                    .parse()
                    .ok()
                    .filter(|&step| step > 0)
                    .ok_or_else(|| error(FieldProblem::Step(step.to_owned())))?;
                (range, Some(step))
            }
        };
        let (first, last) = if range == "*" || range == "?" {
            parsed.star = true;
            (min, max)
        } else {
            match range.split_once('-') {
                None => {
                    let value = field.value(range).map_err(error)?;
                    (value, if step.is_some() { max } else { value })
                }
                Some((_, last)) if last.contains('-') => return Err(malformed()),
                Some((first, last)) => (
                    field.value(first).map_err(error)?,
                    field.value(last).map_err(error)?,
                ),
            }
        };
        if first > last {
            return Err(error(FieldProblem::Backwards { first, last }));
        }
        for value in (first..=last).step_by(step.unwrap_or(1)) {
            parsed.bits |= 1 << value;
        }
    }
    Ok(parsed)
}
