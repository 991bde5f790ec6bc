//! Why a text is not a schedule: one variant per mistake, each message naming the part
//! at fault and showing a form that works.

use crate::duration::DurationError;
use std::fmt;

/// Why a text is not a schedule.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ScheduleError {
    /// Nothing was given.
    #[error("a schedule is required, e.g. \"*/5 * * * *\" (every five minutes)")]
    Empty,
    /// A `TZ=` or `CRON_TZ=` prefix with nothing after the zone.
    #[error(
        "{prefix}{zone} names a time zone but no schedule follows it, \
         e.g. \"{prefix}{zone} 0 6 * * *\""
    )]
    ZoneWithoutSchedule {
        /// `TZ=` or `CRON_TZ=`, as written.
        prefix: &'static str,
        /// The zone's name, as written.
        zone: String,
    },
    /// The zone of a `TZ=` or `CRON_TZ=` prefix is not in the time zone database.
    #[error(
        "unknown time zone {zone:?} in {prefix}{zone}: use an IANA name, \
         e.g. \"{prefix}Europe/Berlin 0 6 * * *\""
    )]
    UnknownZone {
        /// `TZ=` or `CRON_TZ=`, as written.
        prefix: &'static str,
        /// The zone's name, as written.
        zone: String,
        /// What the database said.
        #[source]
        source: jiff::Error,
    },
    /// Neither 5 nor 6 fields.
    #[error(
        "expected 5 fields (minute hour day-of-month month day-of-week, e.g. \"30 6 * * 1-5\") \
         or 6 with seconds first (e.g. \"*/10 * * * * *\"), found {found}"
    )]
    FieldCount {
        /// How many whitespace-separated fields the text has.
        found: usize,
    },
    /// One field does not parse.
    #[error("{field} {text:?}: {problem}; e.g. {}", field.example())]
    Field {
        /// Which field.
        field: Field,
        /// The field as written.
        text: String,
        /// What is wrong with it.
        problem: FieldProblem,
    },
    /// An `@` word that is not a descriptor.
    #[error(
        "unknown descriptor {0:?}: use @yearly (or @annually), @monthly, @weekly, @daily \
         (or @midnight), @hourly, all lowercase, or @every <duration> (e.g. @every 1h30m)"
    )]
    UnknownDescriptor(String),
    /// `@every` without a Go duration after it.
    #[error("@every needs a Go duration after it: {0}")]
    Every(#[source] DurationError),
}

/// A field of a crontab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// Seconds, 0-59 (only in six-field schedules).
    Second,
    /// Minutes, 0-59.
    Minute,
    /// Hours, 0-23.
    Hour,
    /// Day of month, 1-31.
    DayOfMonth,
    /// Month, 1-12 or `jan`..`dec`.
    Month,
    /// Day of week, 0-7 (0 and 7 are Sunday) or `sun`..`sat`.
    DayOfWeek,
}

impl Field {
    /// A value of the field that parses, shown in errors.
    fn example(self) -> &'static str {
        match self {
            Self::Second => "\"*/10\" or \"0,30\"",
            Self::Minute => "\"*/15\" or \"0,30\"",
            Self::Hour => "\"9-17\" or \"*/6\"",
            Self::DayOfMonth => "\"1,15\" or \"1-7\"",
            Self::Month => "\"*/3\" or \"jan-mar\"",
            Self::DayOfWeek => "\"1-5\" or \"mon-fri\" (0 and 7 are Sunday)",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Second => "second",
            Self::Minute => "minute",
            Self::Hour => "hour",
            Self::DayOfMonth => "day of month",
            Self::Month => "month",
            Self::DayOfWeek => "day of week",
        })
    }
}

/// What is wrong with one field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    /// Two commas in a row, or one at either end.
    #[error("an item of the list is empty")]
    EmptyItem,
    /// An item that is neither `*`, a value, a range nor a step.
    #[error("{0:?} is not a value, a range (a-b) or a step (*/n, a/n, a-b/n)")]
    Malformed(String),
    /// A value that is not a number (or, where the field has them, a name).
    #[error("{text:?} is not {expected}")]
    NotAValue {
        /// The value as written.
        text: String,
        /// What the field takes.
        expected: &'static str,
    },
    /// A number outside the field's range.
    #[error("{value} is outside {min}-{max}")]
    OutOfRange {
        /// The number written.
        value: u32,
        /// The field's smallest value.
        min: u32,
        /// The field's largest value.
        max: u32,
    },
    /// A range whose start is after its end.
    #[error("the range {first}-{last} runs backwards")]
    Backwards {
        /// Where the range starts.
        first: u32,
        /// Where it ends.
        last: u32,
    },
    /// A step that is not a positive number.
    #[error("step {0:?} is not a positive number")]
    Step(String),
}
