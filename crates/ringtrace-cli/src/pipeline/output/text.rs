//! `--format text`: a record's payload as text with escapes; a trace's events as
//! `ringtrace-tracing` prints them; a fleet's records after their time, host, source and
//! sequence number.

use std::fmt::Write as _;
use std::io;

use ringtrace_tracing::decode::text::{entry_line, Format as EventFormat};

use super::LineFormat;
use crate::escape::escape_text;
use crate::pipeline::record::Record;

pub struct Text;

impl LineFormat for Text {
    fn line(&self, r: &Record<'_>, out: &mut String) -> io::Result<()> {
        match r {
            Record::Traced { trace, entry } => {
                out.push_str(&entry_line(trace, entry, EventFormat::Text).unwrap_or_default())
            }
            _ => with_payload(r, out, escape_text),
        }
        Ok(())
    }
}

/// A raw or fleet record's line: what goes before its payload (a channel's slot and
/// timestamp, a fleet's time, host, source and sequence number), then its payload as
/// `payload` writes it. Nothing for a trace's entry.
pub fn with_payload(r: &Record<'_>, out: &mut String, payload: fn(&mut String, &[u8])) {
    match r {
        Record::Raw(raw) => {
            if let Some(o) = raw.origin {
                match o.ts {
                    Some(ts) => _ = write!(out, "{} {ts} ", o.slot),
                    None => _ = write!(out, "{} - ", o.slot),
                }
            }
            payload(out, raw.payload);
        }
        Record::Traced { .. } => {}
        #[cfg(feature = "kafka")]
        Record::Fleet(e) => {
            out.push_str(&ringtrace_tracing::decode::text::rfc3339(e.time_ns));
            for part in [e.host, e.source] {
                out.push(' ');
                escape_text(out, part.as_bytes());
            }
            _ = write!(out, " {} ", e.seq);
            payload(out, e.payload);
        }
    }
}
