//! Units for people: sizes (`64 KiB`), wakeup watermarks in words, UTC times, ages;
//! and sizes and durations as people type them (`1MiB`, `64k`, `65536`; `500ms`, `2s`).

use ringtrace::format::control::{HALF_RING, NEVER_WAKE as NEVER};

/// `4096 bytes (4 KiB)`: the exact count, then the size in the largest binary unit
/// (one decimal unless whole); just `100 bytes` below 1 KiB.
pub fn bytes(n: u64) -> String {
    match human(n) {
        Some(h) => format!("{n} bytes ({h})"),
        None => format!("{n} bytes"),
    }
}

/// `64 KiB`, `1.5 MiB`; `None` below 1 KiB (the exact count says it best).
pub fn human(n: u64) -> Option<String> {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return None;
    }
    let mut unit = 0;
    let mut scale = 1024u64;
    while unit + 1 < UNITS.len() && n / scale >= 1024 {
        unit += 1;
        scale *= 1024;
    }
    Some(if n % scale == 0 {
        format!("{} {}", n / scale, UNITS[unit])
    } else {
        // Tenths rounded down: 65528 bytes are 63.9 KiB, not 64.0.
        let tenths = u128::from(n) * 10 / u128::from(scale);
        format!("{}.{} {}", tenths / 10, tenths % 10, UNITS[unit])
    })
}

/// Parses a size as typed: a number of bytes with an optional binary suffix `k`, `m`,
/// `g` (any case, optionally followed by `b` or `ib`: `64k`, `64K`, `64KiB`, `1MiB`,
/// `1 MiB`) or `b` alone.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let bad = || format!("`{s}` is not a size: write bytes (65536) or a number with k, M or G (64k, 1MiB)");
    if digits.is_empty() {
        return Err(bad());
    }
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(bad()),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("`{s}` is too large"))
}

/// A ring capacity as typed: a size that is a power of two from 4 KiB to 4 GiB, as the
/// library takes.
pub fn parse_capacity(s: &str) -> Result<u64, String> {
    let n = parse_size(s)?;
    let (min, max) = (ringtrace::format::control::MIN_CAPACITY, ringtrace::format::control::MAX_CAPACITY);
    if !n.is_power_of_two() || !(min..=max).contains(&n) {
        return Err(format!(
            "a capacity is a power of two from {} to {} ({} is not)",
            human(min).unwrap_or_default(),
            human(max).unwrap_or_default(),
            human(n).unwrap_or_else(|| format!("{n} bytes"))
        ));
    }
    Ok(n)
}

/// Every duration option's parser: one syntax for both commands, a number and its
/// unit (`500ms`, `2s`, `1m`, `1h30m`; a bare number refused), defined with `ship`'s.
pub use ringtrace_ship::command::{parse_duration, parse_duration_or_zero};

/// The watermark of `WakeupPolicy::CaughtUp` in a ring header (the others are the
/// library's `NEVER_WAKE` and `HALF_RING`).
const CAUGHT_UP: u64 = 0;

/// A ring header's wakeup policy in words: the watermark field holds 0 (wake when the
/// consumer has caught up), `u64::MAX` (forced wakeups only), `u64::MAX - 1` (every
/// half ring) or a watermark in bytes.
pub fn wakeups(watermark: u64) -> String {
    match watermark {
        CAUGHT_UP => "when the consumer has caught up".into(),
        NEVER => "forced wakeups only (no watermark)".into(),
        HALF_RING => "every half ring".into(),
        w => format!("at a watermark of {}", bytes(w)),
    }
}

/// The wakeup policy's name in JSON: `caught-up`, `forced-only`, `half-ring` or
/// `watermark` (then the watermark field is a byte count).
pub fn wakeup_name(watermark: u64) -> &'static str {
    match watermark {
        CAUGHT_UP => "caught-up",
        NEVER => "forced-only",
        HALF_RING => "half-ring",
        _ => "watermark",
    }
}

/// The watermark in bytes, if the policy is a watermark.
pub fn watermark_bytes(watermark: u64) -> Option<u64> {
    (wakeup_name(watermark) == "watermark").then_some(watermark)
}

/// `2024-05-01 12:34:56 UTC` for nanoseconds since the Unix epoch: the decoder's RFC
/// 3339 time to the second.
pub fn utc(ns: u64) -> String {
    let t = ringtrace_tracing::decode::text::rfc3339(ns);
    format!("{} {} UTC", &t[..10], &t[11..19])
}

/// A duration in nanoseconds as people read it: `850 ns`, `12.3 us`, `4.0 ms`, `2.50 s`.
pub fn duration_ns(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} us", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

/// A rate in records per second: `2.1 M/s`, `350 k/s`, `12/s`.
pub fn rate(per_sec: f64) -> String {
    format!("{}/s", decimal_prefix(per_sec))
}

/// A number with a decimal prefix, for a column whose header gives the unit: `2.1 M`,
/// `350 k`, `12`.
pub fn decimal_prefix(n: f64) -> String {
    if n >= 1e6 {
        format!("{:.1} M", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.0} k", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print() {
        assert_eq!(bytes(100), "100 bytes");
        assert_eq!(bytes(4096), "4096 bytes (4 KiB)");
        assert_eq!(bytes(1 << 20), "1048576 bytes (1 MiB)");
        assert_eq!(human(1536).unwrap(), "1.5 KiB");
        assert_eq!(human(65528).unwrap(), "63.9 KiB");
        assert_eq!(human(1 << 32).unwrap(), "4 GiB");
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1 MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        for bad in ["", "k", "1.5M", "12q", "-4", "99999999999999999999"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("99999999999G").is_err());
        assert_eq!(parse_capacity("64k"), Ok(65536));
        assert!(parse_capacity("1000").is_err());
        assert!(parse_capacity("1k").is_err());
        assert!(parse_capacity("8G").is_err());
    }

    #[test]
    fn durations_need_their_unit() {
        use std::time::Duration;
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2").unwrap_err().to_string(), "`2`: a duration needs a unit, as in 2s or 2ms");
        assert_eq!(parse_duration_or_zero("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn watermarks_in_words() {
        assert_eq!(wakeups(u64::MAX), "forced wakeups only (no watermark)");
        assert_eq!(wakeups(0), "when the consumer has caught up");
        assert_eq!(wakeups(8192), "at a watermark of 8192 bytes (8 KiB)");
        assert_eq!(watermark_bytes(u64::MAX), None);
        assert_eq!(watermark_bytes(8192), Some(8192));
    }

    #[test]
    fn times() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000_000_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc(951_782_400 * 1_000_000_000), "2000-02-29 00:00:00 UTC");
        let _ = utc(u64::MAX);
        assert_eq!(duration_ns(850), "850 ns");
        assert_eq!(duration_ns(4_000_000), "4.0 ms");
        assert_eq!(rate(2_100_000.0), "2.1 M/s");
        assert_eq!((rate(350_000.0), rate(12.0)), ("350 k/s".into(), "12/s".into()));
        assert_eq!((decimal_prefix(2_100_000.0), decimal_prefix(12.0)), ("2.1 M".into(), "12".into()));
    }
}
