//! The Perfetto export: the fleet's records as [`Record`]s, written by the trace
//! export's own writer ([`ringtrace_export::perfetto::Writer`]): a process's and a
//! thread's track just before the thread's first record, each record an instant.

use std::io::{self, Write};

use ringtrace_export::perfetto::Writer;
use ringtrace_export::record::{Annotations, Typed};

use super::{text_of, tracks, Entry, Exported, Fleet, Head};

/// A record's annotations: `seq`, `len`, `head` and, where the payload is text, `text`
/// (names the writer interns once per sequence).
pub(super) struct RecordAnnotations<'a> {
    pub(super) seq: u64,
    pub(super) payload: &'a [u8],
}

impl Annotations for RecordAnnotations<'_> {
    fn annotate<F: FnMut(&str, Typed<'_>)>(&self, f: &mut F) {
        f("seq", Typed::Uint(self.seq));
        f("len", Typed::Uint(self.payload.len() as u64));
        f("head", Typed::Str(Head::of(self.payload).as_str()));
        if let Some(text) = text_of(self.payload) {
            f("text", Typed::Str(text));
        }
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
        w.put(&at.instant(e, RecordAnnotations { seq: e.seq, payload: e.payload }))
    })?;
    w.finish()?;
    Ok(x)
}
