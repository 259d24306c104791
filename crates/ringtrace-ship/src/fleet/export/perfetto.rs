//! The Perfetto export's record annotations (the writer: [`super::TraceWriter`]).

use ringtrace_export::record::{Annotations, Typed};
use ringtrace_tracing::Level;

use super::events::Span;
use super::object::{typed, Object};
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

/// An events source's event: its fields with the types they were recorded with, then
/// `level` (interned), as the trace export annotates an event.
pub(super) struct EventAnnotations<'o> {
    pub(super) object: &'o Object,
    pub(super) level: Level,
}

impl Annotations for EventAnnotations<'_> {
    fn annotate<F: FnMut(&str, Typed<'_>)>(&self, f: &mut F) {
        self.object.each_field(&mut *f);
        f("level", Typed::Interned(self.level.as_str()));
    }
}

/// A span's fields, as the trace export annotates a slice.
pub(super) struct SpanAnnotations<'s>(pub(super) Option<&'s Span>);

impl Annotations for SpanAnnotations<'_> {
    fn annotate<F: FnMut(&str, Typed<'_>)>(&self, f: &mut F) {
        for (name, v, kind) in self.0.iter().flat_map(|s| &s.fields) {
            typed(v, *kind, &mut |t| f(name, t));
        }
    }
}
