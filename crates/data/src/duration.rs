//! Go durations (`time.ParseDuration`), as shell-operator's configuration writes them
//! (`executionMinInterval: 3s`, `@every 1h30m`).

use std::time::Duration;

/// Why a text is not a Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text is not a sequence of numbers with units.
    #[error("invalid duration {0:?}: use e.g. \"3s\", \"500ms\", \"1h30m\"")]
    Invalid(String),
    /// The duration is longer than Go allows (about 292 years).
    #[error("duration {0:?} is too long")]
    TooLong(String),
}

/// A Go duration (`time.ParseDuration`): a sequence of decimal numbers with units
/// `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`, e.g. `3s`, `1h30m`, `1.5h`; `0` alone is
/// zero. Negative durations are refused: nothing here can wait a negative time.
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid(text.to_owned());
    let rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() || rest.starts_with('-') {
        return Err(invalid());
    }
    let mut total = 0f64;
    let mut rest = rest;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let (number, tail) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return Err(invalid());
        }
        let number: f64 = number.parse().map_err(|_| invalid())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let nanos_per_unit = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(invalid()),
        };
        total += number * nanos_per_unit;
        rest = tail;
    }
    // Go's own limit: about 292 years.
    if !total.is_finite() || total > i64::MAX as f64 {
        return Err(DurationError::TooLong(text.to_owned()));
    }
    Ok(Duration::from_nanos(total as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ms = |text| parse_go_duration(text).map(|d| d.as_millis());
        assert_eq!(ms("3s"), Ok(3_000));
        assert_eq!(ms("1h30m"), Ok(5_400_000));
        assert_eq!(ms("1.5h"), Ok(5_400_000));
        assert_eq!(ms("250ms"), Ok(250));
        assert_eq!(ms("0"), Ok(0));
        for bad in ["", "3", "s", "-1s", "3 s", "1d"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} should not parse");
        }
    }
}
