//! Records, one per line: as text (with escapes), as hex, or as JSON objects.
//!
//! Every JSON output of the command (these lines, `stat --format json`) writes 64-bit
//! integers as the protobuf JSON mapping does where a reader could round them: a JSON
//! number above 2^53 - 1 is rounded by every reader that holds numbers as doubles
//! (JavaScript; `jq` in arithmetic). Identifiers and absolute times (`ts`,
//! `created_ns`, a TSC calibration), which routinely pass 2^53 (`CLOCK_REALTIME`
//! nanoseconds always, `CLOCK_MONOTONIC` ones after 104 days of uptime), are decimal
//! strings ([`decimal`]). Counts, lengths and byte positions (`pos`, `len`, `committed`,
//! ...) stay numbers: they reach 2^53 only after 9 * 10^15 records or bytes have passed
//! through a ring (104 days at 1 GB/s).

use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};

use clap::ValueEnum;
use ringtrace::inspect::{Record, Records};
use serde::{Serialize, Serializer};

use crate::output::warn;

/// How records are printed, one per line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The payload as text: valid UTF-8 as is, with `\n`, `\r`, `\t`, `\\` and
    /// `\u{..}` escapes for other control characters and `\xNN` for bytes that are not
    /// UTF-8.
    #[default]
    Text,
    /// The payload as lowercase hex digits (one line per record; `xxd -r -p` reads it).
    /// Channel files: text and hex lines start with the slot and the timestamp.
    Hex,
    /// One JSON object per line: "pos", "pid", "len", and "data" (the payload as UTF-8
    /// text), or "hex" (its hex digits) instead of "data" when it is not UTF-8.
    /// Channel files: "slot" and "ts" first ("ts" a decimal string, or null).
    Json,
}

/// Where a channel's record comes from: its slot, and its timestamp if the channel
/// stamps records (`r.payload` is then the payload past the stamp).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    pub slot: u32,
    pub ts: Option<u64>,
}

/// Writes one record in `format`, newline included.
pub fn write_record(w: &mut impl Write, format: Format, r: &Record<'_>) -> io::Result<()> {
    write_line(w, format, r, None)
}

/// Writes one channel record in `format`, newline included: text and hex lines start
/// with the slot and the timestamp (`-` without one), JSON objects with `slot` and `ts`
/// (a decimal string; `null` without one).
pub fn write_channel_record(w: &mut impl Write, format: Format, r: &Record<'_>, o: Origin) -> io::Result<()> {
    write_line(w, format, r, Some(o))
}

/// Writes `records` one per line in `format`, newest first if `reverse`.
pub fn write_records<'a>(
    w: &mut dyn Write,
    format: Format,
    records: impl DoubleEndedIterator<Item = Record<'a>>,
    reverse: bool,
) -> io::Result<()> {
    let mut w = BufWriter::new(w);
    if reverse {
        records.rev().try_for_each(|r| write_record(&mut w, format, &r))?;
    } else {
        records.into_iter().try_for_each(|r| write_record(&mut w, format, &r))?;
    }
    w.flush()
}

/// A corrupt record header is reported, not fatal: the records before it are good.
/// `label` goes before the message (`slot 3: ` for a channel's ring).
pub fn warn_corrupt(records: &Records, label: &str) {
    if let Some(c) = records.corrupt() {
        warn(&format!(
            "{label}corrupt record header {:#018x} at position {}: the records after it are not shown",
            c.header, c.pos
        ));
    }
}

/// Serializes an identifier or an absolute time as a decimal string (see the module's
/// docs).
pub fn decimal<S: Serializer>(x: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(x)
}

/// [`decimal`] of each.
pub fn decimals<S: Serializer>(xs: &[u64], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(xs.iter().map(u64::to_string))
}

/// [`decimal`] of a timestamp that may be absent (`null`).
fn decimal_or_null<S: Serializer>(x: &Option<Option<u64>>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(Some(x)) => s.collect_str(x),
        _ => s.serialize_none(),
    }
}

/// A record as a JSON object (field order as printed).
#[derive(Serialize)]
struct JsonRecord<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    slot: Option<u32>,
    /// Present for channel records: the timestamp (`CLOCK_MONOTONIC` nanoseconds) as a
    /// decimal string, or null without one.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "decimal_or_null")]
    ts: Option<Option<u64>>,
    /// A byte position: a number (see the module's docs).
    pos: u64,
    pid: u32,
    len: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hex: Option<String>,
}

fn write_line(w: &mut impl Write, format: Format, r: &Record<'_>, origin: Option<Origin>) -> io::Result<()> {
    let mut line = String::with_capacity(r.payload.len() + 64);
    if let (Some(o), Format::Text | Format::Hex) = (origin, format) {
        match o.ts {
            Some(ts) => _ = write!(line, "{} {ts} ", o.slot),
            None => _ = write!(line, "{} - ", o.slot),
        }
    }
    match format {
        Format::Text => escape_text(&mut line, r.payload),
        Format::Hex => hex(&mut line, r.payload),
        Format::Json => {
            let data = std::str::from_utf8(r.payload).ok();
            let rec = JsonRecord {
                slot: origin.map(|o| o.slot),
                ts: origin.map(|o| o.ts),
                pos: r.pos,
                pid: r.pid,
                len: r.payload.len(),
                data,
                hex: data.is_none().then(|| {
                    let mut h = String::with_capacity(r.payload.len() * 2);
                    hex(&mut h, r.payload);
                    h
                }),
            };
            line = serde_json::to_string(&rec).map_err(io::Error::other)?;
        }
    }
    line.push('\n');
    w.write_all(line.as_bytes())
}

/// Appends `bytes` as text on one line (see [`Format::Text`]).
pub fn escape_text(out: &mut String, bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if c.is_control() => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
}

/// Appends `bytes` as lowercase hex.
pub fn hex(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(payload: &[u8]) -> String {
        let mut v = Vec::new();
        let r = Record { pos: 8, pid: 3, payload };
        for f in [Format::Text, Format::Hex, Format::Json] {
            write_record(&mut v, f, &r).unwrap();
        }
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn channel_formats() {
        let mut v = Vec::new();
        let r = Record { pos: 8, pid: 3, payload: b"hi" };
        for (f, ts) in [(Format::Text, Some(5)), (Format::Hex, None), (Format::Json, Some(5)), (Format::Json, None)] {
            write_channel_record(&mut v, f, &r, Origin { slot: 2, ts }).unwrap();
        }
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "2 5 hi\n2 - 6869\n{\"slot\":2,\"ts\":\"5\",\"pos\":8,\"pid\":3,\"len\":2,\"data\":\"hi\"}\n\
             {\"slot\":2,\"ts\":null,\"pos\":8,\"pid\":3,\"len\":2,\"data\":\"hi\"}\n"
        );
    }

    #[test]
    fn a_timestamp_past_2_pow_53_reads_back_exactly() {
        let mut v = Vec::new();
        let r = Record { pos: 8, pid: 3, payload: b"hi" };
        let ts = (1 << 53) + 1;
        write_channel_record(&mut v, Format::Json, &r, Origin { slot: 0, ts: Some(ts) }).unwrap();
        let j: serde_json::Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(j["ts"].as_str().map(str::parse::<u64>), Some(Ok(ts)));
        // A position is a number.
        assert_eq!(j["pos"].as_u64(), Some(8));
    }

    #[test]
    fn formats() {
        assert_eq!(rec(b"hi"), "hi\n6869\n{\"pos\":8,\"pid\":3,\"len\":2,\"data\":\"hi\"}\n");
        assert_eq!(
            rec(b"a\n\"\x1b\\"),
            "a\\n\"\\u{1b}\\\\\n610a221b5c\n{\"pos\":8,\"pid\":3,\"len\":5,\"data\":\"a\\n\\\"\\u001b\\\\\"}\n"
        );
        assert_eq!(rec(b"\xffz\xc3\xa9"), "\\xffzé\nff7ac3a9\n{\"pos\":8,\"pid\":3,\"len\":4,\"hex\":\"ff7ac3a9\"}\n");
    }

    #[test]
    fn json_lines_parse_back() {
        let r = Record { pos: 1, pid: 2, payload: "tab\tquote\"\u{2028}\u{7f}".as_bytes() };
        let mut v = Vec::new();
        write_record(&mut v, Format::Json, &r).unwrap();
        let j: serde_json::Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(j["data"], "tab\tquote\"\u{2028}\u{7f}");
    }
}
