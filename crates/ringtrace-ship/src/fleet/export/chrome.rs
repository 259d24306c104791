//! The Chrome export's record arguments (the writer: [`super::TraceWriter`]).

use std::io::{self, Write};

use ringtrace_export::record::Args;
use ringtrace_tracing::decode::text::{json_id, json_int};
use ringtrace_tracing::Level;
use serde_json::{json, Map, Value as Json};

use super::events::Span;
use super::object::Object;
use super::payload::{text_of, Head};

/// A record's `args`: `seq`, `len`, `head` and, where the payload is text, `text`.
pub(super) struct RecordArgs<'a> {
    pub(super) seq: u64,
    pub(super) payload: &'a [u8],
}

impl Args for RecordArgs<'_> {
    fn write_json(&self, b: &mut Vec<u8>) -> io::Result<()> {
        // A decimal string beyond 2^53 - 1, as `ringtrace decode` writes integers.
        write!(b, r#"{{"seq":{},"len":{},"head":""#, json_int(i128::from(self.seq)), self.payload.len())?;
        b.extend_from_slice(Head::of(self.payload).as_bytes());
        b.push(b'"');
        if let Some(text) = text_of(self.payload) {
            b.extend_from_slice(br#","text":"#);
            serde_json::to_writer(&mut *b, text)?;
        }
        b.push(b'}');
        Ok(())
    }
}

/// An events source's event's `args`, as the trace export writes an event's: its
/// `fields` as the agent wrote them (the trace export's JSON values), then `level`,
/// and `cut` and `dropped` where it has them.
pub(super) struct EventArgs<'o> {
    pub(super) object: &'o Object,
    pub(super) level: Level,
}

impl Args for EventArgs<'_> {
    fn write_json(&self, b: &mut Vec<u8>) -> io::Result<()> {
        let o = self.object;
        let mut args = o.fields.clone().unwrap_or_default();
        args.insert("level".into(), json!(self.level.as_str()));
        if let Some(cut) = o.cut.as_ref().filter(|c| !c.is_empty()) {
            args.insert("cut".into(), json!(cut));
        }
        if let Some(dropped) = o.dropped.filter(|&d| d > 0) {
            args.insert("dropped".into(), json!(dropped));
        }
        args.write_json(b)
    }
}

/// A slice's `args`, as the trace export writes a span's: its fields, then `span_id`
/// (a decimal string).
pub(super) struct SpanArgs<'s> {
    pub(super) span: Option<&'s Span>,
    pub(super) id: u64,
}

impl Args for SpanArgs<'_> {
    fn write_json(&self, b: &mut Vec<u8>) -> io::Result<()> {
        let mut args: Map<String, Json> =
            self.span.iter().flat_map(|s| &s.fields).map(|(k, v, _)| (k.clone(), v.clone())).collect();
        args.insert("span_id".into(), json_id(self.id));
        args.write_json(b)
    }
}
