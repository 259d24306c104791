//! The Chrome export: the fleet's records as [`Record`]s, written by the trace export's
//! own writer ([`ringtrace_export::chrome::Writer`]): the metadata of a process or
//! thread just before its first record, each record an instant.

use std::io::{self, Write};

use ringtrace_export::chrome::Writer;
use ringtrace_export::record::Args;
use ringtrace_tracing::decode::text::json_int;

use super::{text_of, tracks, Entry, Exported, Fleet, Head};

/// A record's `args`: `seq`, `len`, `head` and, where the payload is text, `text`.
struct RecordArgs<'a> {
    seq: u64,
    payload: &'a [u8],
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

pub(super) fn write<'a, W: Write>(
    fleet: &'a Fleet,
    entries: impl IntoIterator<Item = Entry<'a>>,
    out: &mut W,
) -> io::Result<Exported> {
    let mut w = Writer::new(out);
    let x = tracks::draw(fleet, entries, |at, e| {
        at.described().try_for_each(|d| w.put(d))?;
        w.put(&at.instant(e, RecordArgs { seq: e.seq, payload: e.payload }))
    })?;
    w.finish()?;
    Ok(x)
}
