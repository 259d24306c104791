//! One duration syntax for every option of both commands (`ringtrace` and
//! `ringtrace-ship`): a number with its unit, as [`humantime::parse_duration`] reads
//! it: `500ms`, `2s`, `1m`, `1h30m`, `7d`. A bare number is refused: seconds or
//! milliseconds, a reader of the command line could not tell.

use std::time::Duration;

/// The longest duration a command takes: 365 days (`365d`), far inside what a
/// monotonic deadline can hold.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Why a duration was refused; each quotes what was typed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// A bare number: seconds or milliseconds, a reader could not tell.
    #[error("`{0}`: a duration needs a unit, as in {t}s or {t}ms", t = .0.trim())]
    NoUnit(String),
    /// Not a duration at all.
    #[error("`{typed}` is not a duration: write a number and a unit, as in 500ms, 2s, 1m or 1h30m")]
    Unreadable {
        /// What was typed.
        typed: String,
        /// What humantime found wrong.
        #[source]
        source: humantime::DurationError,
    },
    /// Below 1 ms or above 365 days.
    #[error("`{0}`: a duration is from 1ms to 365d")]
    OutOfRange(String),
}

/// Parses a duration as typed: from 1 ms to [`MAX_DURATION`]; a bare number is
/// refused with how to write it.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(DurationError::NoUnit(s.into()));
    }
    let d = humantime::parse_duration(t).map_err(|source| DurationError::Unreadable { typed: s.into(), source })?;
    if d < Duration::from_millis(1) || d > MAX_DURATION {
        return Err(DurationError::OutOfRange(s.into()));
    }
    Ok(d)
}

/// [`parse_duration`], or zero (`0`, `0s`, `0ms`: zero needs no unit): for an option
/// whose zero turns something off (`tail --reorder 0`).
pub fn parse_duration_or_zero(s: &str) -> Result<Duration, DurationError> {
    match s.trim() {
        "0" | "0s" | "0ms" => Ok(Duration::ZERO),
        _ => parse_duration(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations_are_written_with_their_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("365d"), Ok(MAX_DURATION));
        assert_eq!(parse_duration("8760h"), Ok(MAX_DURATION));
        for bad in ["", "s", "0s", "0.5ms", "-1s", "1 fortnight", "366d", "8761h", "2x"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        for zero in ["0", "0s", "0ms"] {
            assert_eq!(parse_duration_or_zero(zero), Ok(Duration::ZERO));
        }
        assert_eq!(parse_duration_or_zero("2s"), Ok(Duration::from_secs(2)));
        assert!(parse_duration_or_zero("5").is_err());
    }

    #[test]
    fn a_bare_number_is_refused_with_how_to_write_it() {
        assert_eq!(parse_duration("5").unwrap_err().to_string(), "`5`: a duration needs a unit, as in 5s or 5ms");
        assert!(parse_duration("0.3").unwrap_err().to_string().contains("as in 0.3s"));
    }

    proptest! {
        /// Whatever is typed: no panic; a bare number is always refused, with a way to
        /// write it that is taken (when in range); what is taken is in range.
        #[test]
        fn any_text_is_taken_in_range_or_refused(s in "[0-9. a-z]{0,12}") {
            match parse_duration(&s) {
                Ok(d) => prop_assert!((Duration::from_millis(1)..=MAX_DURATION).contains(&d)),
                Err(e) => prop_assert!(e.to_string().contains('`')),
            }
        }

        #[test]
        fn bare_numbers_are_refused_and_their_suggestion_is_taken(n in 1u64..=31_536_000) {
            let e = parse_duration(&n.to_string()).unwrap_err();
            prop_assert!(e.to_string().contains("needs a unit"));
            prop_assert_eq!(parse_duration(&format!("{n}s")), Ok(Duration::from_secs(n)));
        }
    }
}
