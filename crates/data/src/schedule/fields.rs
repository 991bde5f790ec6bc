//! A crontab's fields as sets of allowed values, and the search for the first or last
//! wall-clock time they allow within a window. Time zones are not known here: the
//! caller maps wall-clock times to instants (see `super::Schedule`).

use jiff::SignedDuration;
use jiff::civil::{Date, DateTime};

/// The allowed values of one field, bit `n` for value `n` (robfig/cron's layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Bits(pub(super) u64);

impl Bits {
    fn has(self, value: i8) -> bool {
        (0..64).contains(&value) && self.0 & (1 << value) != 0
    }

    /// The smallest allowed value above `value`.
    fn next_after(self, value: i8) -> Option<i8> {
        let above = self.0 & u64::MAX.checked_shl(u32::try_from(value).ok()? + 1)?;
        if above == 0 {
            return None;
        }
        i8::try_from(above.trailing_zeros()).ok()
    }

    /// The largest allowed value below `value`.
    fn previous_before(self, value: i8) -> Option<i8> {
        let below = self.0 & !u64::MAX.checked_shl(u32::try_from(value).ok()?)?;
        if below == 0 {
            return None;
        }
        i8::try_from(63 - below.leading_zeros()).ok()
    }
}

/// A crontab: the values each field allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fields {
    pub(super) seconds: Bits,
    pub(super) minutes: Bits,
    pub(super) hours: Bits,
    /// Bits 1-31.
    pub(super) days_of_month: Bits,
    /// Bits 1-12.
    pub(super) months: Bits,
    /// Bits 0-6, 0 = Sunday.
    pub(super) days_of_week: Bits,
    /// Whether an item of the day-of-month field starts with `*` or `?`: robfig/cron's
    /// "star bit", which makes the two day fields combine with "and" instead of "or".
    pub(super) day_of_month_star: bool,
    /// The same for day of week.
    pub(super) day_of_week_star: bool,
}

const ONE_SECOND: SignedDuration = SignedDuration::from_secs(1);
const ONE_MINUTE: SignedDuration = SignedDuration::from_mins(1);
const ONE_HOUR: SignedDuration = SignedDuration::from_hours(1);

impl Fields {
    /// Crontab's day rule, as robfig/cron has it: when either day field is a star, a
    /// day must match both; when both are restricted, either one is enough
    /// (`0 0 13 * 5` is "the 13th, and every Friday").
    fn day_matches(&self, date: Date) -> bool {
        let in_month = self.days_of_month.has(date.day());
        let in_week = self
            .days_of_week
            .has(date.weekday().to_sunday_zero_offset());
        if self.day_of_month_star || self.day_of_week_star {
            in_month && in_week
        } else {
            in_month || in_week
        }
    }

    /// The first wall-clock time at or after `from` (a whole second) and before
    /// `until` that the fields allow.
    pub(super) fn first_at_or_after(&self, from: DateTime, until: DateTime) -> Option<DateTime> {
        let mut t = from;
        // Each step moves to the next candidate the failing field allows, so the loop
        // visits at most a few candidates per day; `until` bounds it.
        loop {
            if t >= until {
                return None;
            }
            t = if !self.months.has(t.month()) {
                match self.months.next_after(t.month()) {
                    Some(month) => Date::new(t.year(), month, 1).ok()?.at(0, 0, 0, 0),
                    None => Date::new(t.year().checked_add(1)?, 1, 1)
                        .ok()?
                        .at(0, 0, 0, 0),
                }
            } else if !self.day_matches(t.date()) {
                t.date().tomorrow().ok()?.at(0, 0, 0, 0)
            } else if !self.hours.has(t.hour()) {
                match self.hours.next_after(t.hour()) {
                    Some(hour) => t.date().at(hour, 0, 0, 0),
                    None => t.date().tomorrow().ok()?.at(0, 0, 0, 0),
                }
            } else if !self.minutes.has(t.minute()) {
                match self.minutes.next_after(t.minute()) {
                    Some(minute) => t.date().at(t.hour(), minute, 0, 0),
                    None => t.date().at(t.hour(), 0, 0, 0).checked_add(ONE_HOUR).ok()?,
                }
            } else if !self.seconds.has(t.second()) {
                match self.seconds.next_after(t.second()) {
                    Some(second) => t.date().at(t.hour(), t.minute(), second, 0),
                    None => t
                        .date()
                        .at(t.hour(), t.minute(), 0, 0)
                        .checked_add(ONE_MINUTE)
                        .ok()?,
                }
            } else {
                return Some(t);
            };
        }
    }

    /// The last wall-clock time at or before `from` (a whole second) and at or after
    /// `since` that the fields allow: the mirror image of [`Self::first_at_or_after`].
    pub(super) fn last_at_or_before(&self, from: DateTime, since: DateTime) -> Option<DateTime> {
        let mut t = from;
        loop {
            if t < since {
                return None;
            }
            t = if !self.months.has(t.month()) {
                match self.months.previous_before(t.month()) {
                    Some(month) => end_of_day(Date::new(t.year(), month, 1).ok()?.last_of_month()),
                    None => end_of_day(Date::new(t.year().checked_sub(1)?, 12, 31).ok()?),
                }
            } else if !self.day_matches(t.date()) {
                end_of_day(t.date().yesterday().ok()?)
            } else if !self.hours.has(t.hour()) {
                match self.hours.previous_before(t.hour()) {
                    Some(hour) => t.date().at(hour, 59, 59, 0),
                    None => end_of_day(t.date().yesterday().ok()?),
                }
            } else if !self.minutes.has(t.minute()) {
                match self.minutes.previous_before(t.minute()) {
                    Some(minute) => t.date().at(t.hour(), minute, 59, 0),
                    None => t
                        .date()
                        .at(t.hour(), 0, 0, 0)
                        .checked_sub(ONE_SECOND)
                        .ok()?,
                }
            } else if !self.seconds.has(t.second()) {
                match self.seconds.previous_before(t.second()) {
                    Some(second) => t.date().at(t.hour(), t.minute(), second, 0),
                    None => t
                        .date()
                        .at(t.hour(), t.minute(), 0, 0)
                        .checked_sub(ONE_SECOND)
                        .ok()?,
                }
            } else {
                return Some(t);
            };
        }
    }
}

fn end_of_day(date: Date) -> DateTime {
    date.at(23, 59, 59, 0)
}
