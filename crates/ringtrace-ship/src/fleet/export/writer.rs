//! [`TraceWriter`]: a fleet's records written one by one into a Perfetto, Chrome or
//! CTF trace, each format's writer over the shared [record model](ringtrace_export::record).

use std::io::{self, Write};
use std::path::Path;

use ringtrace_export::{chrome, ctf, perfetto};

use ringtrace_export::record::{Plain, Record};

use super::chrome::{EventArgs, RecordArgs, SpanArgs};
use super::ctf::{layout, EventFields, LostFields, RecordFields};
use super::events::{Drawn, Events};
use super::object::Object;
use super::perfetto::{EventAnnotations, RecordAnnotations, SpanAnnotations};
use super::tracks::Exported;
use super::tracks::Tracks;
use crate::fleet::{Entry, Fleet, Item};

/// The format's own writer.
enum Out<'o> {
    Perfetto(Box<perfetto::Writer<'o, dyn Write + 'o>>),
    Chrome(chrome::Writer<'o, dyn Write + 'o>),
    Ctf(Box<ctf::Writer<'static>>),
}

/// A trace written record by record, in any of the three trace formats (see the
/// [module docs](super) for what each holds): the export of a fleet read back as a
/// stream ([`stream_topic`](crate::fleet::stream_topic)), in memory bounded by the
/// format's writer (its open packets and interned names), not by the records.
///
/// Hosts and sources are numbered as they first come (see the
/// [mapping](super#the-mapping-the-same-in-the-three-trace-formats)).
///
/// ```
/// # fn run(items: &[ringtrace_ship::fleet::Item<'_>]) -> std::io::Result<()> {
/// use ringtrace_ship::fleet::export::TraceWriter;
///
/// let mut out = Vec::new();
/// let mut w = TraceWriter::perfetto(&mut out);
/// for item in items {
///     w.put(item)?;
/// }
/// let done = w.finish()?;
/// assert_eq!(done.records, items.len() as u64);
/// # Ok(()) }
/// # run(&[]).unwrap();
/// ```
pub struct TraceWriter<'o> {
    out: Out<'o>,
    tracks: Tracks,
    events: Events,
    records: u64,
}

impl std::fmt::Debug for TraceWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let format = match self.out {
            Out::Perfetto(_) => "perfetto",
            Out::Chrome(_) => "chrome",
            Out::Ctf(_) => "ctf",
        };
        f.debug_struct("TraceWriter").field("format", &format).field("records", &self.records).finish_non_exhaustive()
    }
}

impl<'o> TraceWriter<'o> {
    fn with(out: Out<'o>) -> Self {
        // Only CTF numbers event classes.
        let events = Events::new(matches!(out, Out::Ctf(_)));
        TraceWriter { out, tracks: Tracks::new(), events, records: 0 }
    }

    /// A Perfetto protobuf trace written to `out` (gathered into 64 KiB writes).
    pub fn perfetto(out: &'o mut dyn Write) -> Self {
        Self::with(Out::Perfetto(Box::new(perfetto::Writer::new(out))))
    }

    /// A Chrome trace (JSON) written to `out`.
    pub fn chrome(out: &'o mut dyn Write) -> Self {
        Self::with(Out::Chrome(chrome::Writer::new(out)))
    }

    /// A CTF 1.8 trace written into the directory `dir`, made if missing (with its
    /// parents): a `stream-PID-TID` file per source, each created new (one that exists
    /// fails the export), and `metadata` by [`finish`](Self::finish).
    ///
    /// # Errors
    ///
    /// Making the directory.
    pub fn ctf(dir: &Path) -> io::Result<Self> {
        Ok(Self::with(Out::Ctf(Box::new(ctf::Writer::new(dir, layout())?))))
    }

    /// Numbers the hosts and sources from `fleet`'s, sorted (the in-memory exports').
    pub(super) fn numbered_by(mut self, fleet: &Fleet) -> Self {
        self.tracks = Tracks::of(fleet);
        // `Tracks::of` numbers the fleet's sources in its order: track `i` is lane `i`.
        for (i, t) in self.tracks.sources.iter_mut().enumerate() {
            t.events = fleet.lane_events(i);
        }
        self
    }

    /// Writes a record of a stream.
    ///
    /// # Errors
    ///
    /// The output's.
    pub fn put(&mut self, item: &Item<'_>) -> io::Result<()> {
        let i = self.tracks.of_lane(item.lane, &item.entry);
        if item.events {
            if let Some(t) = self.tracks.sources.get_mut(i) {
                t.events = true;
            }
        }
        self.draw(i, &item.entry)
    }

    /// Writes `e`, whose names live as long as the writer's tracks use them (a fleet's).
    pub(super) fn put_entry(&mut self, e: &Entry<'_>) -> io::Result<()> {
        let i = self.tracks.find(e);
        self.draw(i, e)
    }

    fn draw(&mut self, track: usize, e: &Entry<'_>) -> io::Result<()> {
        if self.tracks.sources.get(track).is_some_and(|t| t.events) {
            if let Ok(o) = Object::read(e.payload) {
                if self.draw_object(track, e, &o)? {
                    self.records += 1;
                    return Ok(());
                }
            }
        }
        let at = self.tracks.place(track);
        match &mut self.out {
            Out::Perfetto(w) => {
                at.described().try_for_each(|d| w.put(d))?;
                w.put(&at.instant(e, RecordAnnotations { seq: e.seq, payload: e.payload }))?;
            }
            Out::Chrome(w) => {
                at.described().try_for_each(|d| w.put(d))?;
                w.put(&at.instant(e, RecordArgs { seq: e.seq, payload: e.payload }))?;
            }
            Out::Ctf(w) => {
                at.described().try_for_each(|d| w.put(d))?;
                w.put(&at.instant(e, RecordFields { seq: e.seq, time_ns: e.time_ns, payload: e.payload }))?;
            }
        }
        self.records += 1;
        Ok(())
    }

    /// Draws what an events source's object `o` of source track `source` says; `false`
    /// where it is to be drawn as a plain record.
    fn draw_object(&mut self, source: usize, e: &Entry<'_>, o: &Object) -> io::Result<bool> {
        let drawn = self.events.take(&mut self.tracks, source, o, e.time_ns);
        let track = match drawn {
            Drawn::Raw => return Ok(false),
            Drawn::Nothing => return Ok(true),
            Drawn::Event { track, .. } | Drawn::Begin { track, .. } | Drawn::End { track, .. } => track,
            Drawn::Lost { track, .. } => track,
        };
        let at = self.tracks.place(track);
        let ((pid, tid), ts_ns) = (at.at(), e.time_ns);
        macro_rules! described {
            ($w:expr) => {
                at.described().try_for_each(|d| $w.put(d))?
            };
        }
        // Perfetto and Chrome draw the same records, each with its arguments' form:
        // `$event` makes an event's from its level, `$span` a slice's from its span.
        macro_rules! slices {
            ($w:expr, $d:expr, $event:expr, $span:expr) => {{
                described!($w);
                match $d {
                    Drawn::Event { name, category, level, .. } => {
                        let args = ($event)(level);
                        $w.put(&Record::Instant { ts_ns, pid, tid, name, category, args })?;
                    }
                    Drawn::Begin { span, known, .. } => {
                        let (name, category) = known.map_or(("?", ""), |s| (s.name.as_str(), s.target.as_str()));
                        let args = ($span)(known, span);
                        $w.put(&Record::Begin { ts_ns, pid, tid, span, name, category, args })?;
                    }
                    Drawn::End { span, closes: true, .. } => {
                        $w.put(&Plain::End { ts_ns, pid, tid, span: Some(span), unfinished: false })?;
                    }
                    Drawn::End { closes: false, .. } | Drawn::Raw | Drawn::Nothing => {}
                    Drawn::Lost { count, .. } => $w.put(&Plain::Lost { ts_ns, pid, tid, count })?,
                }
            }};
        }
        match (&mut self.out, drawn) {
            (_, Drawn::Raw | Drawn::Nothing) => {}
            (Out::Perfetto(w), d) => {
                slices!(w, d, |level| EventAnnotations { object: o, level }, |known, _| SpanAnnotations(known))
            }
            (Out::Chrome(w), d) => {
                slices!(w, d, |level| EventArgs { object: o, level }, |known, id| SpanArgs { span: known, id })
            }
            (Out::Ctf(w), d) => {
                described!(w);
                match d {
                    Drawn::Event { level, class, .. } => {
                        let args = EventFields { object: o, level, class };
                        w.put(&Record::Instant { ts_ns, pid, tid, name: "", category: "", args })?;
                    }
                    Drawn::Begin { span, known, .. } => {
                        let name = known.map_or("?", |s| s.name.as_str());
                        w.put(&Plain::Begin { ts_ns, pid, tid, span, name, category: "", args: () })?;
                    }
                    Drawn::End { span, .. } => {
                        w.put(&Plain::End { ts_ns, pid, tid, span: Some(span), unfinished: false })?
                    }
                    Drawn::Lost { count, .. } => {
                        let args = LostFields(count);
                        w.put(&Record::Instant { ts_ns, pid, tid, name: "", category: "", args })?;
                    }
                    Drawn::Raw | Drawn::Nothing => {}
                }
            }
        }
        Ok(true)
    }

    /// Ends the trace (flushes the output; CTF: the last packets and `metadata`), and
    /// says what was written.
    ///
    /// # Errors
    ///
    /// The output's.
    pub fn finish(mut self) -> io::Result<Exported> {
        // Slices still open at the end: closed at the latest span time, marked (as the
        // trace export's Perfetto and Chrome do; its CTF leaves them open).
        let tracks = &self.tracks;
        for (track, ts_ns) in self.events.open_at_end(|t| tracks.ids(t).3) {
            let (_, pid, _, tid) = tracks.ids(track);
            let end = Plain::End { ts_ns, pid, tid: u64::from(tid), span: None, unfinished: true };
            match &mut self.out {
                Out::Perfetto(w) => w.put(&end)?,
                Out::Chrome(w) => w.put(&end)?,
                Out::Ctf(_) => {}
            }
        }
        let done = self.tracks.exported(self.records, self.events.drawn);
        match self.out {
            Out::Perfetto(w) => (*w).finish()?,
            Out::Chrome(w) => w.finish()?,
            Out::Ctf(w) => (*w).finish()?,
        }
        Ok(done)
    }
}
