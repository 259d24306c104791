//! `--format json`: one JSON object a line (see [`crate::output`] for how 64-bit
//! numbers are written).
//!
//! * A raw record: `slot` and `ts` (channels), `pos` and `pid` (where known), `len`,
//!   and `data` (UTF-8) or `hex`. A record consumed from a ring has `len` and `data` or
//!   `hex` alone.
//! * A trace's event: as `ringtrace-tracing` writes it.
//! * A fleet's record: `time`, `ts_ns`, `host`, `source`, `seq`, `len`, `data` or `hex`.

use std::io;

use ringtrace_tracing::decode::text::{entry_line, Format as EventFormat};
use serde::Serialize;

use super::LineFormat;
use crate::escape::hex;
use crate::pipeline::record::Record;

pub struct Json;

impl LineFormat for Json {
    fn line(&self, r: &Record<'_>, out: &mut String) -> io::Result<()> {
        let line = match r {
            Record::Raw(raw) => {
                let rec = JsonRecord {
                    slot: raw.origin.map(|o| o.slot),
                    ts: raw.origin.map(|o| o.ts),
                    pos: raw.at.map(|(pos, _)| pos),
                    pid: raw.at.map(|(_, pid)| pid),
                    payload: Payload::of(raw.payload),
                };
                serde_json::to_string(&rec).map_err(io::Error::other)
            }
            Record::Traced { trace, entry } => Ok(entry_line(trace, entry, EventFormat::Json).unwrap_or_default()),
            #[cfg(feature = "kafka")]
            Record::Fleet(e) => {
                let j = JsonEntry {
                    time: ringtrace_tracing::decode::text::rfc3339(e.time_ns),
                    ts_ns: e.time_ns,
                    host: e.host,
                    source: e.source,
                    seq: e.seq,
                    payload: Payload::of(e.payload),
                };
                serde_json::to_string(&j).map_err(io::Error::other)
            }
        };
        out.push_str(&line?);
        Ok(())
    }
}

/// A payload: its length, and `data` (UTF-8 text) or else `hex`.
#[derive(Serialize)]
struct Payload<'a> {
    len: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hex: Option<String>,
}

impl<'a> Payload<'a> {
    fn of(p: &'a [u8]) -> Self {
        let data = std::str::from_utf8(p).ok();
        let hex = data.is_none().then(|| {
            let mut h = String::with_capacity(p.len() * 2);
            hex(&mut h, p);
            h
        });
        Payload { len: p.len(), data, hex }
    }
}

/// [`crate::output::decimal`] of a timestamp that may be absent (`null`).
fn decimal_or_null<S: serde::Serializer>(x: &Option<Option<u64>>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(Some(x)) => s.collect_str(x),
        _ => s.serialize_none(),
    }
}

/// A raw record as a JSON object (field order as printed).
#[derive(Serialize)]
struct JsonRecord<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    slot: Option<u32>,
    /// Present for channel records: the timestamp (`CLOCK_MONOTONIC` nanoseconds) as a
    /// decimal string, or null without one.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "decimal_or_null")]
    ts: Option<Option<u64>>,
    /// A byte position: a number (see [`crate::output`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pos: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(flatten)]
    payload: Payload<'a>,
}

/// A fleet's record as a JSON object (field order as printed).
#[cfg(feature = "kafka")]
#[derive(Serialize)]
struct JsonEntry<'a> {
    time: String,
    /// Wall-clock ns since the epoch, as a decimal string.
    #[serde(serialize_with = "crate::output::decimal")]
    ts_ns: u64,
    host: &'a str,
    source: &'a str,
    /// A count of the source's records: a number.
    seq: u64,
    #[serde(flatten)]
    payload: Payload<'a>,
}

#[cfg(test)]
mod tests {
    use crate::pipeline::output::{Format, Lines, Sink};
    use crate::pipeline::record::{Origin, Raw, Record};

    fn lines(recs: &[(Format, Raw<'_>)]) -> String {
        let mut v = Vec::new();
        for (f, r) in recs {
            let mut l = Lines::new(&mut v, f.lines());
            l.write(&Record::Raw(*r)).unwrap();
            l.flush().unwrap();
        }
        String::from_utf8(v).unwrap()
    }

    fn rec(payload: &[u8]) -> String {
        let r = Raw { payload, at: Some((8, 3)), origin: None };
        lines(&[(Format::Text, r), (Format::Hex, r), (Format::Json, r)])
    }

    #[test]
    fn channel_formats() {
        let r = |ts| Raw { payload: b"hi", at: Some((8, 3)), origin: Some(Origin { slot: 2, ts }) };
        assert_eq!(
            lines(&[
                (Format::Text, r(Some(5))),
                (Format::Hex, r(None)),
                (Format::Json, r(Some(5))),
                (Format::Json, r(None))
            ]),
            "2 5 hi\n2 - 6869\n{\"slot\":2,\"ts\":\"5\",\"pos\":8,\"pid\":3,\"len\":2,\"data\":\"hi\"}\n\
             {\"slot\":2,\"ts\":null,\"pos\":8,\"pid\":3,\"len\":2,\"data\":\"hi\"}\n"
        );
    }

    #[test]
    fn a_timestamp_past_2_pow_53_reads_back_exactly() {
        let ts = (1 << 53) + 1;
        let r = Raw { payload: b"hi", at: Some((8, 3)), origin: Some(Origin { slot: 0, ts: Some(ts) }) };
        let j: serde_json::Value = serde_json::from_str(&lines(&[(Format::Json, r)])).unwrap();
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
    fn consumed_records_have_no_position() {
        let r = Raw { payload: b"\xff", at: None, origin: None };
        assert_eq!(lines(&[(Format::Json, r)]), "{\"len\":1,\"hex\":\"ff\"}\n");
    }

    #[test]
    fn json_lines_parse_back() {
        let r = Raw { payload: "tab\tquote\"\u{2028}\u{7f}".as_bytes(), at: Some((1, 2)), origin: None };
        let j: serde_json::Value = serde_json::from_str(&lines(&[(Format::Json, r)])).unwrap();
        assert_eq!(j["data"], "tab\tquote\"\u{2028}\u{7f}");
    }
}
