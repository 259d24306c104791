//! The Chrome export's record arguments (the writer: [`super::TraceWriter`]).

use std::io::{self, Write};

use ringtrace_export::record::Args;
use ringtrace_tracing::decode::text::json_int;

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
