//! The Perfetto export's record annotations (the writer: [`super::TraceWriter`]).

use ringtrace_export::record::{Annotations, Typed};

use super::payload::{text_of, Head};

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
