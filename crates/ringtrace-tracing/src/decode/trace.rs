//! [`Trace`]: a trace read and checked, and its records with their names resolved
//! (callsite numbers to metadata, field indexes to names, lanes to threads, span ids
//! to the spans they name, as far as the trace still holds them).

use std::borrow::Cow;
use std::path::Path;

use foldhash::HashMap;
use tracing_core::Level;

use super::load::{self, Parts, Problems};
use super::raw;
use super::records::{Reading, Records, Unread};
use crate::catalog::{self, Callsite, ThreadInfo};
use crate::error::Error;
use crate::file::{self, Process};
use crate::wire::{RawRecord, RawValue, Value};

/// A trace, read and checked.
#[derive(Debug)]
pub struct Trace {
    /// The process that wrote it (absent if its chunk was lost).
    pub process: Option<Process>,
    pub(crate) callsites: HashMap<u32, Callsite>,
    /// Sorted by lane, then time.
    pub(crate) threads: Vec<ThreadInfo>,
    pub(crate) records: Records,
    /// The recorder's counters when the file was finished (`lost`, `overwritten`, ...).
    pub stats: Vec<(String, u64)>,
    /// What was skipped.
    pub problems: Problems,
}

impl Trace {
    /// Reads a trace file (a dump or a stream), a recorder directory, or a channel file
    /// of raw records (each record an event: see [`raw`](super::raw)).
    ///
    /// A trace file is read once to check it and find its records, and again as
    /// [`entries`](Trace::entries) reaches them: memory does not grow with the file. A
    /// recorder directory is read the same way, its rings walked once when it is opened
    /// and read again a window of each at a time. A channel file's records are held
    /// (its rings bound them).
    pub fn open(path: impl AsRef<Path>) -> Result<Trace, Error> {
        let path = path.as_ref();
        if path.is_dir() {
            return Trace::open_dir(path);
        }
        if ringtrace::inspect::channel::is_channel_file(path).unwrap_or(false) {
            let (parts, problems) = raw::channel(path)?;
            return Ok(Trace::assemble(parts, problems));
        }
        let (parts, records, problems) = load::scan(path)?;
        let mut trace = Trace::assemble(parts, problems);
        trace.records = records;
        Ok(trace)
    }

    /// Reads a trace file's bytes, holding its records; `path` names it in errors.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Trace, Error> {
        let (parts, problems) = load::file(bytes, path)?;
        Ok(Trace::assemble(parts, problems))
    }

    /// A trace of a recorder directory's catalog alone, to decode its records with
    /// ([`decode_json`](Trace::decode_json)) where they are read one round at a time:
    /// `catalog` is the catalog file past its header. A catalog being appended may end
    /// inside a chunk: that is not counted as a loss. `name` names it in errors.
    pub fn from_catalog(catalog: &[u8], name: &Path) -> Result<Trace, Error> {
        let mut bytes = file::header().to_vec();
        bytes.extend_from_slice(catalog);
        let (parts, mut problems) = load::file(&bytes, name)?;
        problems.cut = None;
        problems.incomplete = false;
        Ok(Trace::assemble(parts, problems))
    }

    /// Reads a recorder directory: its catalog, and every ring of its channel file as
    /// it is now (a live process goes on writing; a record being written is stepped
    /// over and counted in [`Problems::unfinished`]). Its records are read again, in
    /// place, as [`entries`](Trace::entries) reaches them: records a live process
    /// overwrites meanwhile are skipped and counted ([`Entries::unread_chunks`]).
    pub fn open_dir(dir: &Path) -> Result<Trace, Error> {
        let (parts, records, problems) = load::dir(dir)?;
        let mut trace = Trace::assemble(parts, problems);
        trace.records = records;
        Ok(trace)
    }

    fn assemble(mut parts: Parts, problems: Problems) -> Trace {
        // A stream's passes are each in order; a late record can fall behind a pass.
        parts.records.sort_by_key(|r| r.ts);
        parts.threads.sort_by_key(|t| (t.lane, t.since_ns));
        Trace {
            process: parts.process,
            callsites: parts.callsites,
            threads: parts.threads,
            records: Records::Held(parts.records),
            stats: parts.stats,
            problems,
        }
    }

    /// Records read.
    pub fn len(&self) -> usize {
        self.records.count() as usize
    }

    /// Whether no record was read.
    pub fn is_empty(&self) -> bool {
        self.records.count() == 0
    }

    /// A callsite by number.
    pub fn callsite(&self, id: u32) -> Option<&Callsite> {
        self.callsites.get(&id)
    }

    /// Every thread that took a lane.
    pub fn threads(&self) -> &[ThreadInfo] {
        &self.threads
    }

    /// The thread that wrote at `ts_ns` into `lane`: the last to take it at or before
    /// then (the first, for a record older than every entry).
    pub fn thread(&self, lane: u32, ts_ns: u64) -> Option<&ThreadInfo> {
        self.thread_and_span(lane, ts_ns).0
    }

    /// [`thread`](Trace::thread), and the times it answers for the lane (from, to:
    /// the same thread wrote every record of the lane in between).
    pub(crate) fn thread_and_span(&self, lane: u32, ts_ns: u64) -> (Option<&ThreadInfo>, u64, u64) {
        let start = self.threads.partition_point(|t| t.lane < lane);
        let end = self.threads.partition_point(|t| t.lane <= lane);
        let of_lane = &self.threads[start..end];
        let i = of_lane.partition_point(|t| t.since_ns <= ts_ns);
        let from = if i <= 1 { 0 } else { of_lane[i - 1].since_ns };
        let to = of_lane.get(i).map_or(u64::MAX, |t| t.since_ns);
        (of_lane.get(i.saturating_sub(1)), from, to)
    }

    /// What each ring of a recorder directory held when it was read: its slot, when it
    /// was created, and the byte positions `[start, end)` of its records read. A ring's
    /// positions only grow, so a later read of the same ring (same slot and creation
    /// time) that starts past an earlier read's end found the bytes between overwritten
    /// before they were read. Empty for a trace file.
    pub fn held_rings(&self) -> Vec<HeldRing> {
        let Records::Rings(r) = &self.records else { return Vec::new() };
        r.rings
            .iter()
            .enumerate()
            .filter_map(|(i, ring)| {
                let mut pieces = r.pieces.iter().filter(|p| p.ring as usize == i);
                let first = pieces.next()?;
                let (start, end) = pieces.fold((first.start, first.end), |(s, e), p| (s.min(p.start), e.max(p.end)));
                Some(HeldRing { slot: ring.slot, created_ns: ring.header.created_ns, start, end })
            })
            .collect()
    }

    /// A counter from the stats chunk.
    pub fn stat(&self, name: &str) -> Option<u64> {
        self.stats.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    /// Events lost: the `lost` records' counts, and what the stats add (losses whose
    /// count a thread could not write, events of threads with no ring, events during a
    /// thread's exit).
    pub fn lost(&self) -> u64 {
        let in_rings = self.records.lost();
        let extra: u64 = ["unreported", "no_ring", "teardown", "busy"].iter().filter_map(|n| self.stat(n)).sum();
        in_rings + extra
    }
}

/// Span ancestry is followed at most this deep (a cycle in a damaged trace ends too).
const MAX_DEPTH: usize = 64;

/// A field: its name, its value, whether its text was cut at the value bound.
#[derive(Clone, Debug, PartialEq)]
pub struct Field<'a> {
    /// Its name in its callsite (`field{N}` if the trace lacks the callsite).
    pub name: Cow<'a, str>,
    pub value: Value,
    pub cut: bool,
}

/// A span an event was in.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanContext<'a> {
    /// The `tracing` span id.
    pub id: u64,
    /// Its name (`?` if its callsite is unknown).
    pub name: String,
    /// Its fields, if the trace still holds its `new span` record (a flight recorder
    /// may have overwritten it): `None` then.
    pub fields: Option<Vec<Field<'a>>>,
}

/// An event, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Event<'a> {
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub ts_ns: u64,
    pub lane: u32,
    pub thread: Option<&'a ThreadInfo>,
    /// Its callsite (`None` if the catalog lacks it).
    pub callsite: Option<&'a Callsite>,
    /// Every field, `message` included.
    pub fields: Vec<Field<'a>>,
    /// Values dropped at the record's size bound.
    pub dropped: u16,
    /// The spans it was in, outermost first; the outermost may be a span whose own
    /// parent the trace no longer names.
    pub spans: Vec<SpanContext<'a>>,
}

impl Event<'_> {
    /// Its level (`TRACE` if unknown).
    pub fn level(&self) -> Level {
        self.callsite.map_or(Level::TRACE, |c| c.level)
    }

    /// Its target (`?` if unknown).
    pub fn target(&self) -> &str {
        self.callsite.map_or("?", |c| &c.target)
    }

    /// The `message` field's text.
    pub fn message(&self) -> Option<&str> {
        self.fields.iter().find(|f| f.name == "message").map(|f| match &f.value {
            Value::Str(s) | Value::Debug(s) | Value::Error(s) => s.as_str(),
            _ => "",
        })
    }

    /// A field's value by name.
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|f| f.name == name).map(|f| &f.value)
    }
}

/// What a record is, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum EntryKind<'a> {
    Event(Event<'a>),
    NewSpan {
        span: u64,
        parent: u64,
        callsite: Option<&'a Callsite>,
        fields: Vec<Field<'a>>,
    },
    Record {
        span: u64,
        fields: Vec<Field<'a>>,
    },
    Enter {
        span: u64,
    },
    Exit {
        span: u64,
    },
    Close {
        span: u64,
    },
    FollowsFrom {
        span: u64,
        follows: u64,
    },
    /// Events this thread could not write before its next record.
    Lost {
        count: u64,
    },
}

/// One record, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry<'a> {
    pub ts_ns: u64,
    pub lane: u32,
    pub thread: Option<&'a ThreadInfo>,
    pub kind: EntryKind<'a>,
}

/// A ring of a recorder directory as it was read ([`Trace::held_rings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldRing {
    /// Its slot in the directory's channel file.
    pub slot: u32,
    /// When the ring was created (nanoseconds since the Unix epoch): a slot given to
    /// another thread's new ring has another.
    pub created_ns: u64,
    /// The byte positions of the records read: the first's and past the last's.
    pub start: u64,
    pub end: u64,
}

#[derive(Debug)]
struct SpanState<'a> {
    callsite: u32,
    parent: u64,
    fields: Vec<Field<'a>>,
}

fn fields(callsite: Option<&Callsite>, values: Vec<RawValue>) -> Vec<Field<'_>> {
    values
        .into_iter()
        .map(|v| Field { name: catalog::field_name(callsite, v.field), value: v.value, cut: v.cut })
        .collect()
}

/// Every record of a trace, resolved as it is reached ([`Trace::entries`]): only the
/// spans still open are held, and of a trace file only the chunks being read, so going
/// through a trace takes memory that does not grow with it.
#[derive(Debug)]
pub struct Entries<'a> {
    trace: &'a Trace,
    reading: Reading<'a>,
    left: u64,
    spans: HashMap<u64, SpanState<'a>>,
    /// Whether events get their span context (the exporters, which draw spans as
    /// slices, do without).
    context: bool,
    unread: Unread,
    /// The second entry of a record that stands for two (`open`: its `enter`; `done`:
    /// its `close`), given next.
    second: Option<Entry<'a>>,
}

impl Entries<'_> {
    /// Records chunks of a trace file that could not be read again as they were when
    /// the trace was opened (the file changed on disk since), skipped; and why the first
    /// could not. Zero for a file left alone. Of a recorder directory: the runs of a
    /// ring's records that could not all be read again (a live process overwrote them).
    pub fn unread_chunks(&self) -> (u64, Option<&str>) {
        (self.unread.chunks, self.unread.first.as_deref())
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        if let Some(e) = self.second.take() {
            return Some(e);
        }
        let t = self.trace;
        let r = self.reading.next(&mut self.unread)?;
        self.left = self.left.saturating_sub(1);
        let spans = &mut self.spans;
        let thread = t.thread(r.lane, r.ts);
        let open = matches!(r.raw, RawRecord::Open { .. });
        let kind = match r.raw {
            RawRecord::Event { callsite, span, span_callsite, values, dropped } => {
                let cs = t.callsite(callsite);
                EntryKind::Event(Event {
                    ts_ns: r.ts,
                    lane: r.lane,
                    thread,
                    callsite: cs,
                    fields: fields(cs, values),
                    dropped,
                    spans: if self.context { t.context(spans, span, span_callsite) } else { Vec::new() },
                })
            }
            RawRecord::NewSpan { callsite, span, parent, values, .. }
            | RawRecord::Open { callsite, span, parent, values, .. } => {
                if open {
                    self.second = Some(Entry { ts_ns: r.ts, lane: r.lane, thread, kind: EntryKind::Enter { span } });
                }
                let cs = t.callsite(callsite);
                let f = fields(cs, values);
                spans.insert(span, SpanState { callsite, parent, fields: f.clone() });
                EntryKind::NewSpan { span, parent, callsite: cs, fields: f }
            }
            RawRecord::Record { span, values, .. } => {
                let f = match spans.get_mut(&span) {
                    Some(s) => {
                        let f = fields(t.callsite(s.callsite), values);
                        for new in &f {
                            match s.fields.iter_mut().find(|old| old.name == new.name) {
                                Some(old) => *old = new.clone(),
                                None => s.fields.push(new.clone()),
                            }
                        }
                        f
                    }
                    None => fields(None, values),
                };
                EntryKind::Record { span, fields: f }
            }
            RawRecord::Enter { span } => EntryKind::Enter { span },
            RawRecord::Exit { span } => EntryKind::Exit { span },
            RawRecord::Close { span } => {
                // Span ids are reused once closed.
                spans.remove(&span);
                EntryKind::Close { span }
            }
            RawRecord::Done { span } => {
                spans.remove(&span);
                self.second = Some(Entry { ts_ns: r.ts, lane: r.lane, thread, kind: EntryKind::Close { span } });
                EntryKind::Exit { span }
            }
            RawRecord::FollowsFrom { span, follows } => EntryKind::FollowsFrom { span, follows },
            RawRecord::Lost { count } => EntryKind::Lost { count },
        };
        Some(Entry { ts_ns: r.ts, lane: r.lane, thread, kind })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // A chunk the file no longer holds as it did gives fewer; a record may stand for
        // two entries.
        let second = usize::from(self.second.is_some());
        (second, Some((self.left as usize).saturating_mul(2).saturating_add(second)))
    }
}

impl Trace {
    /// Every record, resolved, in timestamp order, as the iteration reaches it.
    pub fn entries(&self) -> Entries<'_> {
        self.read(true)
    }

    /// Every record, resolved, but events without their span context
    /// ([`Event::spans`] empty): for the exporters, which draw spans as slices.
    pub fn entries_without_context(&self) -> Entries<'_> {
        self.read(false)
    }

    /// A time that splits the records in two halves of about as many (see
    /// `Records::middle`).
    pub fn middle(&self) -> Option<u64> {
        self.records.middle()
    }

    fn read(&self, context: bool) -> Entries<'_> {
        Entries {
            trace: self,
            reading: self.records.read(),
            left: self.records.count(),
            spans: HashMap::default(),
            context,
            unread: Unread::default(),
            second: None,
        }
    }

    /// The events alone, resolved, in timestamp order.
    pub fn events(&self) -> Vec<Event<'_>> {
        self.entries()
            .filter_map(|e| match e.kind {
                EntryKind::Event(ev) => Some(ev),
                _ => None,
            })
            .collect()
    }

    /// The spans an event in `span` (of callsite `span_cs`) was in, outermost first.
    fn context<'a>(&'a self, spans: &HashMap<u64, SpanState<'a>>, span: u64, span_cs: u32) -> Vec<SpanContext<'a>> {
        let mut chain = Vec::new();
        let (mut id, mut expect) = (span, Some(span_cs));
        while id != 0 && chain.len() < MAX_DEPTH {
            let known = spans.get(&id).filter(|s| expect.is_none_or(|cs| cs == 0 || cs == s.callsite));
            match known {
                Some(s) => {
                    chain.push(SpanContext {
                        id,
                        name: self.callsite(s.callsite).map_or("?".into(), |c| c.name.clone()),
                        fields: Some(s.fields.clone()),
                    });
                    id = s.parent;
                    expect = None;
                }
                None => {
                    // Its `new span` record is gone: the name from the event's record
                    // for the innermost span; its ancestry is unknown.
                    let name = expect.and_then(|cs| self.callsite(cs)).map_or("?".into(), |c| c.name.clone());
                    chain.push(SpanContext { id, name, fields: None });
                    break;
                }
            }
        }
        chain.reverse();
        chain
    }
}
