//! The CTF 1.8 export's record fields and layout (the writer: [`super::TraceWriter`]):
//! named tracks, a stream file per source, its packets' context naming the source and
//! its host, and `metadata` written last.

use std::io;

use ringtrace_export::ctf::{loglevel, Class, CtfArgs, Event, Files, Kind, Layout, Shape, Tracks};
use ringtrace_export::record::Typed;
use ringtrace_tracing::Level;

use super::events::SHARED_CLASS;
use super::object::Object;
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

/// An events source's event: a class per target, name, level and field names (its
/// number from [`Events`](super::events::Events)) and shape, named `TARGET:NAME` with
/// the level's `loglevel`, as the trace export's class of a callsite; its fields with
/// the types they were recorded with (integers, doubles, bools; the rest text).
pub(super) struct EventFields<'o> {
    pub(super) object: &'o Object,
    pub(super) level: Level,
    pub(super) class: u64,
}

impl CtfArgs for EventFields<'_> {
    fn write_ctf(&self, ev: &mut Event<'_>) -> io::Result<()> {
        let mut fields = Vec::new();
        self.object.each_field(|name, v| {
            let kind = match v {
                Typed::Uint(x) => {
                    ev.u64(x);
                    Kind::U64
                }
                Typed::Int(x) => {
                    ev.i64(x);
                    Kind::I64
                }
                Typed::Double(x) => {
                    ev.f64(x);
                    Kind::F64
                }
                Typed::Bool(x) => {
                    ev.bool(x);
                    Kind::Bool
                }
                Typed::Str(s) | Typed::Interned(s) => {
                    ev.text(s);
                    Kind::Text
                }
            };
            fields.push((name.to_owned(), kind));
        });
        let o = self.object;
        let name = match self.class {
            SHARED_CLASS => "ringtrace:event".to_owned(),
            _ => format!("{}:{}", o.target.as_deref().unwrap_or("?"), o.name.as_deref().unwrap_or("?")),
        };
        let level = self.level;
        ev.class(self.class, Shape::of(fields.iter().map(|f| f.1)), || Class {
            name,
            loglevel: Some(loglevel(level)),
            fields,
        });
        Ok(())
    }
}

/// The fields of events a recorder lost (`ringtrace:events_lost`, `count`): a trace of
/// named tracks has no packet count of them.
pub(super) struct LostFields(pub(super) u64);

/// The class number of [`LostFields`].
const LOST_CLASS: u64 = u64::MAX - 2;

impl CtfArgs for LostFields {
    fn write_ctf(&self, ev: &mut Event<'_>) -> io::Result<()> {
        ev.u64(self.0);
        ev.class(LOST_CLASS, Shape::of([Kind::U64].into_iter()), || Class {
            name: "ringtrace:events_lost".into(),
            loglevel: None,
            fields: vec![("count".into(), Kind::U64)],
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
