//! [`Trace`]: a trace read and checked, and its records with their names resolved
//! (callsite numbers to metadata, field indexes to names, lanes to threads, span ids
//! to the spans they name, as far as the trace still holds them).

use std::collections::HashMap;
use std::path::Path;

use tracing_core::Level;

use super::load::{self, Parts, Problems, Rec};
use super::raw;
use crate::catalog::{Callsite, ThreadInfo};
use crate::error::Error;
use crate::file::Process;
use crate::wire::{RawRecord, RawValue, Value};

/// A trace, read and checked.
#[derive(Debug)]
pub struct Trace {
    /// The process that wrote it (absent if its chunk was lost).
    pub process: Option<Process>,
    pub(crate) callsites: HashMap<u32, Callsite>,
    /// Sorted by lane, then time.
    pub(crate) threads: Vec<ThreadInfo>,
    /// In timestamp order.
    pub(crate) records: Vec<Rec>,
    /// The recorder's counters when the file was finished (`lost`, `overwritten`, ...).
    pub stats: Vec<(String, u64)>,
    /// What was skipped.
    pub problems: Problems,
}

impl Trace {
    /// Reads a trace file (a dump or a stream), a recorder directory, or a channel file
    /// of raw records (each record an event: see [`raw`](super::raw)).
    pub fn open(path: impl AsRef<Path>) -> Result<Trace, Error> {
        let path = path.as_ref();
        if path.is_dir() {
            return Trace::open_dir(path);
        }
        if ringtrace::inspect::channel::is_channel_file(path).unwrap_or(false) {
            let (parts, problems) = raw::channel(path)?;
            return Ok(Trace::assemble(parts, problems));
        }
        let bytes = std::fs::read(path).map_err(|e| Error::io("reading", path, e))?;
        Trace::from_bytes(&bytes, path)
    }

    /// Reads a trace file's bytes; `path` names it in errors.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Trace, Error> {
        let (parts, problems) = load::file(bytes, path)?;
        Ok(Trace::assemble(parts, problems))
    }

    /// Reads a recorder directory: its catalog, and every ring of its channel file as
    /// it is now (a live process goes on writing; a record being written is stepped
    /// over and counted in [`Problems::unfinished`]).
    pub fn open_dir(dir: &Path) -> Result<Trace, Error> {
        let (parts, problems) = load::dir(dir)?;
        Ok(Trace::assemble(parts, problems))
    }

    fn assemble(mut parts: Parts, problems: Problems) -> Trace {
        // A stream's passes are each in order; a late record can fall behind a pass.
        parts.records.sort_by_key(|r| r.ts);
        parts.threads.sort_by_key(|t| (t.lane, t.since_ns));
        Trace {
            process: parts.process,
            callsites: parts.callsites,
            threads: parts.threads,
            records: parts.records,
            stats: parts.stats,
            problems,
        }
    }

    /// Records read.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record was read.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
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
        let start = self.threads.partition_point(|t| t.lane < lane);
        let end = self.threads.partition_point(|t| t.lane <= lane);
        let of_lane = &self.threads[start..end];
        let i = of_lane.partition_point(|t| t.since_ns <= ts_ns);
        of_lane.get(i.saturating_sub(1))
    }

    /// A counter from the stats chunk.
    pub fn stat(&self, name: &str) -> Option<u64> {
        self.stats.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    /// Events lost: the `lost` records' counts, and what the stats add (losses whose
    /// count a thread could not write, events of threads with no ring, events during a
    /// thread's exit).
    pub fn lost(&self) -> u64 {
        let in_rings: u64 =
            self.records.iter().map(|r| if let RawRecord::Lost { count } = r.raw { count } else { 0 }).sum();
        let extra: u64 = ["unreported", "no_ring", "teardown", "busy"].iter().filter_map(|n| self.stat(n)).sum();
        in_rings + extra
    }
}

/// Span ancestry is followed at most this deep (a cycle in a damaged trace ends too).
const MAX_DEPTH: usize = 64;

/// A field: its name, its value, whether its text was cut at the value bound.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: String,
    pub value: Value,
    pub cut: bool,
}

/// A span an event was in.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanContext {
    /// The `tracing` span id.
    pub id: u64,
    /// Its name (`?` if its callsite is unknown).
    pub name: String,
    /// Its fields, if the trace still holds its `new span` record (a flight recorder
    /// may have overwritten it): `None` then.
    pub fields: Option<Vec<Field>>,
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
    pub fields: Vec<Field>,
    /// Values dropped at the record's size bound.
    pub dropped: u16,
    /// The spans it was in, outermost first; the outermost may be a span whose own
    /// parent the trace no longer names.
    pub spans: Vec<SpanContext>,
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
        fields: Vec<Field>,
    },
    Record {
        span: u64,
        fields: Vec<Field>,
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

#[derive(Debug)]
struct SpanState {
    callsite: u32,
    parent: u64,
    fields: Vec<Field>,
}

fn fields(callsite: Option<&Callsite>, values: &[RawValue]) -> Vec<Field> {
    values
        .iter()
        .map(|v| Field {
            name: callsite
                .and_then(|c| c.fields.get(v.field as usize))
                .cloned()
                .unwrap_or_else(|| format!("field{}", v.field)),
            value: v.value.clone(),
            cut: v.cut,
        })
        .collect()
}

/// Every record of a trace, resolved as it is reached ([`Trace::entries`]): only the
/// spans still open are held, so going through a trace takes no memory beyond the
/// trace's own.
#[derive(Debug)]
pub struct Entries<'a> {
    trace: &'a Trace,
    next: usize,
    spans: HashMap<u64, SpanState>,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        let t = self.trace;
        let r = t.records.get(self.next)?;
        self.next += 1;
        let spans = &mut self.spans;
        let kind = match &r.raw {
            RawRecord::Event { callsite, span, span_callsite, values, dropped } => {
                let cs = t.callsite(*callsite);
                EntryKind::Event(Event {
                    ts_ns: r.ts,
                    lane: r.lane,
                    thread: t.thread(r.lane, r.ts),
                    callsite: cs,
                    fields: fields(cs, values),
                    dropped: *dropped,
                    spans: t.context(spans, *span, *span_callsite),
                })
            }
            RawRecord::NewSpan { callsite, span, parent, values, .. } => {
                let cs = t.callsite(*callsite);
                let f = fields(cs, values);
                spans.insert(*span, SpanState { callsite: *callsite, parent: *parent, fields: f.clone() });
                EntryKind::NewSpan { span: *span, parent: *parent, callsite: cs, fields: f }
            }
            RawRecord::Record { span, values, .. } => {
                let f = match spans.get_mut(span) {
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
                EntryKind::Record { span: *span, fields: f }
            }
            RawRecord::Enter { span } => EntryKind::Enter { span: *span },
            RawRecord::Exit { span } => EntryKind::Exit { span: *span },
            RawRecord::Close { span } => {
                // Span ids are reused once closed.
                spans.remove(span);
                EntryKind::Close { span: *span }
            }
            RawRecord::FollowsFrom { span, follows } => EntryKind::FollowsFrom { span: *span, follows: *follows },
            RawRecord::Lost { count } => EntryKind::Lost { count: *count },
        };
        Some(Entry { ts_ns: r.ts, lane: r.lane, thread: t.thread(r.lane, r.ts), kind })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.trace.records.len() - self.next;
        (n, Some(n))
    }
}

impl Trace {
    /// Every record, resolved, in timestamp order, as the iteration reaches it.
    pub fn entries(&self) -> Entries<'_> {
        Entries { trace: self, next: 0, spans: HashMap::new() }
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
    fn context(&self, spans: &HashMap<u64, SpanState>, span: u64, span_cs: u32) -> Vec<SpanContext> {
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
