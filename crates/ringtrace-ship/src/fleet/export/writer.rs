//! [`TraceWriter`]: a fleet's records written one by one into a Perfetto, Chrome or
//! CTF trace, each format's writer over the shared [record model](ringtrace_export::record).

use std::io::{self, Write};
use std::path::Path;

use ringtrace_export::{chrome, ctf, perfetto};

use super::chrome::RecordArgs;
use super::ctf::{layout, RecordFields};
use super::perfetto::RecordAnnotations;
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
        TraceWriter { out, tracks: Tracks::new(), records: 0 }
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
        self
    }

    /// Writes a record of a stream.
    ///
    /// # Errors
    ///
    /// The output's.
    pub fn put(&mut self, item: &Item<'_>) -> io::Result<()> {
        let i = self.tracks.of_lane(item.lane, &item.entry);
        self.draw(i, &item.entry)
    }

    /// Writes `e`, whose names live as long as the writer's tracks use them (a fleet's).
    pub(super) fn put_entry(&mut self, e: &Entry<'_>) -> io::Result<()> {
        let i = self.tracks.find(e);
        self.draw(i, e)
    }

    fn draw(&mut self, track: usize, e: &Entry<'_>) -> io::Result<()> {
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

    /// Ends the trace (flushes the output; CTF: the last packets and `metadata`), and
    /// says what was written.
    ///
    /// # Errors
    ///
    /// The output's.
    pub fn finish(self) -> io::Result<Exported> {
        let done = self.tracks.exported(self.records);
        match self.out {
            Out::Perfetto(w) => (*w).finish()?,
            Out::Chrome(w) => w.finish()?,
            Out::Ctf(w) => (*w).finish()?,
        }
        Ok(done)
    }
}
