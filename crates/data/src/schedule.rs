//! Cron schedules: hook `schedule` bindings and cron Triggers' `cronTemplate.schedule`
//! parsed into a [`Schedule`], and the slots around an instant found in the schedule's
//! time zone.
//!
//! The meaning is robfig/cron's, the Go library behind both references: shell-operator
//! validates and runs crontabs with its v2 `cron.Parse`, KubeDiag with `ParseStandard`
//! (v1.2); the slot search follows v3's `SpecSchedule.Next`, which fixed v2's handling
//! of zones. What a schedule is:
//!
//! - 5 fields, `minute hour day-of-month month day-of-week`, firing at second 0, or 6
//!   with seconds first. Each field is a comma-separated list of `*` (or `?`), values,
//!   ranges `a-b` and steps `/n`; `a/n` runs from `a` to the field's end. Months and days
//!   of week take three-letter names (`jan`, `mon`) in any case; day of week counts 0 as
//!   Sunday.
//! - Crontab's day rule: when both day fields are restricted a day matching *either*
//!   fires; when one of them has an item starting with `*` or `?` (also `*/2`) a day
//!   must match both.
//! - Descriptors `@yearly`/`@annually`, `@monthly`, `@weekly` (Sunday), `@daily`/
//!   `@midnight`, `@hourly`, and `@every <Go duration>` (`@every 1h30m`): a fixed period
//!   from each run, not aligned to the clock, in whole seconds and at least one second.
//! - A `TZ=Zone ` or `CRON_TZ=Zone ` prefix (`TZ=Europe/Berlin 0 6 * * *`) computes slots
//!   on that zone's wall clock, from jiff's time zone database: the system's, or the
//!   copy built into the binary when the system has none. Without a prefix, UTC.
//!   Across daylight-saving changes slots are wall-clock times: a time the zone skips
//!   (02:30 on the night clocks spring forward) has no slot that day, and a time that
//!   happens twice (02:30 on the night they fall back) fires twice, once per
//!   occurrence, as robfig/cron's `Next` (which steps by absolute hours and minutes and
//!   checks the wall clock) does.
//!
//! Where Operon's former two parsers (hook schedules and Triggers) differed, or differ
//! from the references, this is what was decided:
//!
//! - Six fields are accepted for Triggers too: `ParseStandard` takes only five, but
//!   Operon's Trigger has documented six since it has had schedules.
//! - Day names are three letters only (`sunday` is refused), as in robfig/cron; the
//!   Trigger parser also took full names.
//! - Day of week 7 is Sunday, as in crontab(5) and both former parsers; robfig/cron
//!   refuses 7, so every schedule it accepts means the same here.
//! - The star rule is robfig/cron v1.2's and v2's (any item starting with `*` or `?`,
//!   `*/2` included; v3 dropped `*/n`); the Trigger parser took only a bare `*` or `?`.
//! - Descriptors are matched exactly (lowercase), like robfig/cron's `switch`; the hook
//!   parser ignored case. `@every` works for Triggers too (both references accept it);
//!   a period under a second runs every second and fractions of a second are dropped,
//!   as robfig/cron's `Every` does (the hook parser refused them); a negative period is
//!   refused (Go would run it every second).
//! - `TZ=` (v2 and v3) and `CRON_TZ=` (v3) work everywhere; both former parsers refused
//!   them, and KubeDiag's v1.2 knows neither. Without a prefix robfig/cron uses the
//!   process's local zone; Operon uses UTC so that a schedule does not depend on the
//!   host it runs on.
//! - The search looks 8 years ahead or back (robfig/cron: 5), enough for `0 0 29 2 *`
//!   across 2100, which is no leap year; the Trigger parser's slots were limited to the
//!   `cron` crate's years 1970-2100.
//! - An empty list item (`1,,5`) is refused; robfig/cron skips it.
//!
//! The grammar and the search are written here rather than on the `cron` crate: that
//! crate reads Quartz's dialect (day of week 1 = Sunday, a year field, both day fields
//! always required), so both former parsers translated fields for it and searched
//! slots themselves anyway, and its errors do not name the field at fault.

mod error;
mod fields;
mod parse;
#[cfg(test)]
mod tests;

pub use error::{Field, FieldProblem, ScheduleError};

use fields::Fields;
use jiff::tz::TimeZone;
use jiff::{RoundMode, SignedDuration, Timestamp, TimestampRound, Unit};
use std::fmt;
use std::time::Duration;

/// How far [`Schedule::next_after`] and [`Schedule::latest_at_or_before`] look: 8
/// years, so that a leap day is found across 2100 (2096 to 2104).
const HORIZON: SignedDuration = SignedDuration::from_hours(24 * 366 * 8);

/// A parsed schedule; see the [module documentation](self) for what it means.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// As the user wrote it, for messages and the debug interface.
    source: String,
    /// Whose wall clock the fields are read on (UTC without a prefix).
    zone: TimeZone,
    rule: Rule,
}

#[derive(Debug, Clone)]
enum Rule {
    Fields(Box<Fields>),
    /// `@every`: a period in whole seconds, at least one.
    Every(Duration),
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl std::str::FromStr for Schedule {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl Schedule {
    /// Parses a schedule, or says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let (zone, rule) = parse::parse(trimmed)?;
        Ok(Self {
            source: text.to_owned(),
            zone,
            rule,
        })
    }

    /// The schedule as the user wrote it.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The first slot strictly after `after`, or `None` when there is none within 8
    /// years (e.g. `0 0 30 2 *`). For `@every` it is `after`, to the second, plus the
    /// period.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let whole = floor_second(after)?;
        match &self.rule {
            Rule::Every(period) => whole.checked_add(*period).ok(),
            Rule::Fields(fields) => {
                let start = whole.checked_add(SignedDuration::from_secs(1)).ok()?;
                let limit = start.checked_add(HORIZON).unwrap_or(Timestamp::MAX);
                self.first_from(fields, start, limit)
            }
        }
    }

    /// The last slot at or before `at`, or `None` when there is none within 8 years.
    /// Always `None` for `@every`, whose slots follow from its last run: see
    /// [`Self::latest_due`].
    pub(crate) fn latest_at_or_before(&self, at: Timestamp) -> Option<Timestamp> {
        let Rule::Fields(fields) = &self.rule else {
            return None;
        };
        let end = floor_second(at)?;
        let limit = end.checked_sub(HORIZON).unwrap_or(Timestamp::MIN);
        self.last_from(fields, end, limit)
    }

    /// The slot to run at `now` for a schedule that last ran at `last`: the latest slot
    /// in `(last, now]`, so that slots missed while nothing was watching make one late
    /// run rather than one run each; `None` when no slot passed since `last`.
    ///
    /// With no `last`, the latest slot at or before `now`; an `@every` schedule, which
    /// then has nothing to count from, is due at `now` (to the second). With a `last`,
    /// `@every`'s slots are `last` (to the second) plus whole periods.
    pub fn latest_due(&self, last: Option<Timestamp>, now: Timestamp) -> Option<Timestamp> {
        match (&self.rule, last) {
            (Rule::Fields(_), _) => {
                let slot = self.latest_at_or_before(now)?;
                match last {
                    Some(last) if slot <= last => None,
                    _ => Some(slot),
                }
            }
            (Rule::Every(_), None) => floor_second(now),
            (Rule::Every(period), Some(last)) => {
                let base = floor_second(last)?;
                let period = i64::try_from(period.as_secs()).ok()?;
                let periods = now.duration_since(base).as_secs().checked_div(period)?;
                if periods < 1 {
                    return None;
                }
                let elapsed = SignedDuration::from_secs(periods.checked_mul(period)?);
                base.checked_add(elapsed).ok()
            }
        }
    }

    /// The first instant in `[start, limit)` whose wall clock the fields allow.
    ///
    /// The timeline is walked one stretch of constant UTC offset at a time (between two
    /// transitions of the zone): within a stretch wall-clock time and instants map one
    /// to one, so the fields' search on the wall clock gives the instant. A time a
    /// spring-forward skips lies in no stretch; one a fall-back repeats lies in two.
    fn first_from(&self, fields: &Fields, start: Timestamp, limit: Timestamp) -> Option<Timestamp> {
        let mut from = start;
        while from < limit {
            let offset = self.zone.to_offset(from);
            let end = self
                .zone
                .following(from)
                .next()
                .map_or(limit, |transition| transition.timestamp().min(limit));
            let found = fields.first_at_or_after(offset.to_datetime(from), offset.to_datetime(end));
            if let Some(wall) = found {
                return offset.to_timestamp(wall).ok();
            }
            from = end;
        }
        None
    }

    /// The last instant in `[limit, end]` whose wall clock the fields allow: the mirror
    /// image of [`Self::first_from`].
    fn last_from(&self, fields: &Fields, end: Timestamp, limit: Timestamp) -> Option<Timestamp> {
        let mut to = end;
        while to >= limit {
            let offset = self.zone.to_offset(to);
            // The transition at or before `to` starts its stretch.
            let after_to = to.checked_add(SignedDuration::from_secs(1)).ok()?;
            let start = self
                .zone
                .preceding(after_to)
                .next()
                .map_or(limit, |transition| transition.timestamp().max(limit));
            let found = fields.last_at_or_before(offset.to_datetime(to), offset.to_datetime(start));
            if let Some(wall) = found {
                return offset.to_timestamp(wall).ok();
            }
            to = start.checked_sub(SignedDuration::from_secs(1)).ok()?;
        }
        None
    }
}

/// `t` to the whole second, rounded towards the past.
fn floor_second(t: Timestamp) -> Option<Timestamp> {
    t.round(
        TimestampRound::new()
            .smallest(Unit::Second)
            .mode(RoundMode::Floor),
    )
    .ok()
}
