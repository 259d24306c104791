//! The CTF 1.8 export: the fleet's records as [`Record`]s, written by the trace
//! export's own writer ([`ringtrace_export::ctf::Writer`]) with named tracks: a stream
//! file per source, its packets' context naming the source and its host, and
//! `metadata` written last.

use std::io;
use std::path::Path;

use ringtrace_export::ctf::{Class, CtfArgs, Event, Files, Kind, Layout, Shape, Tracks, Writer};
use ringtrace_export::record::{Plain, Record};

use super::{text_of, Entry, Exported, Fleet, Head, Tracks as Numbers, Use, CATEGORY, NAME};

/// The fields of a record's event class, in order.
const FIELDS: [(&str, Kind); 5] =
    [("seq", Kind::U64), ("len", Kind::U64), ("time_ns", Kind::U64), ("head", Kind::Text), ("text", Kind::Text)];

/// A record's fields: `seq`, `len`, `time_ns`, `head` and `text` (empty where the
/// payload is not text).
struct RecordFields<'a> {
    seq: u64,
    time_ns: u64,
    payload: &'a [u8],
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

pub(super) fn write<'a>(
    fleet: &'a Fleet,
    entries: impl IntoIterator<Item = Entry<'a>>,
    dir: &Path,
) -> io::Result<Exported> {
    let layout = Layout {
        tracks: Tracks::Named,
        files: Files::New,
        uuid: None,
        tracer: "ringtrace-ship",
        clock: "realtime",
        clock_description: "wall clock: ns since the Unix epoch",
        clock_offset_ns: 0,
        clock_absolute: true,
    };
    let mut w = Writer::new(dir, layout)?;
    let mut tracks = Numbers::new(fleet);
    let mut records = 0u64;
    for e in entries {
        let i = tracks.find(&e);
        let (host, pid, source, tid) = tracks.ids(i);
        let tid = u64::from(tid);
        let u = tracks.first_use(i);
        if u == Use::NewHost {
            w.put(&Plain::Process { pid, tid, name: host, sort_index: Some(u64::from(pid)), category: None })?;
        }
        if u != Use::Again {
            w.put(&Plain::Thread { pid, tid, name: source, sort_index: Some(tid), category: None })?;
        }
        let args = RecordFields { seq: e.seq, time_ns: e.time_ns, payload: e.payload };
        w.put(&Record::Instant { ts_ns: e.time_ns, pid, tid, name: NAME, category: CATEGORY, args })?;
        records += 1;
    }
    w.finish()?;
    Ok(tracks.exported(records))
}
