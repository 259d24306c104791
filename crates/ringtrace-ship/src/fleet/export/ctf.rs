//! The CTF 1.8 export's record fields and layout (the writer: [`super::TraceWriter`]):
//! named tracks, a stream file per source, its packets' context naming the source and
//! its host, and `metadata` written last.

use std::io;

use ringtrace_export::ctf::{Class, CtfArgs, Event, Files, Kind, Layout, Shape, Tracks};

use super::payload::{text_of, Head, CATEGORY, NAME};

/// The fields of a record's event class, in order.
const FIELDS: [(&str, Kind); 5] =
    [("seq", Kind::U64), ("len", Kind::U64), ("time_ns", Kind::U64), ("head", Kind::Text), ("text", Kind::Text)];

/// A record's fields: `seq`, `len`, `time_ns`, `head` and `text` (empty where the
/// payload is not text).
pub(super) struct RecordFields<'a> {
    pub(super) seq: u64,
    pub(super) time_ns: u64,
    pub(super) payload: &'a [u8],
}

impl CtfArgs for RecordFields<'_> {
    fn write_ctf(&self, ev: &mut Event<'_>) -> io::Result<()> {
        ev.u64(self.seq);
        ev.u64(self.payload.len() as u64);
        ev.u64(self.time_ns);
        ev.text(Head::of(self.payload).as_str());
        ev.text(text_of(self.payload).unwrap_or(""));
        // One class for every record, apart from any a trace's callsites make.
        ev.class(u64::MAX, Shape::of(FIELDS.iter().map(|f| f.1)), || Class {
            name: format!("{CATEGORY}:{NAME}"),
            loglevel: None,
            fields: FIELDS.iter().map(|(n, k)| ((*n).to_owned(), *k)).collect(),
        });
        Ok(())
    }
}

/// The CTF layout of a fleet's trace: named tracks, new files, the wall clock.
pub(super) fn layout() -> Layout<'static> {
    Layout {
        tracks: Tracks::Named,
        files: Files::New,
        uuid: None,
        tracer: "ringtrace-ship",
        clock: "realtime",
        clock_description: "wall clock: ns since the Unix epoch",
        clock_offset_ns: 0,
        clock_absolute: true,
    }
}
