//! Records seen in place, for the exporters: an event's values are read out of the
//! trace file's chunk as they are written, text borrowed, nothing copied or allocated;
//! span records other than enter and exit (a few per span) are resolved as
//! [`EntryKind`]s.

use std::ops::Range;

use foldhash::HashMap;

use super::records::{Got, Reading, Unread};
use super::trace::{EntryKind, Field, Trace};
use crate::catalog::{self, Callsite, ThreadInfo};
use crate::wire::{self, RawRecord, RawValue, ValueAt, ValueIn};

/// An event's values, where they lie.
#[derive(Clone, Copy)]
pub(crate) enum ViewValues<'b> {
    /// A record's value bytes in a trace file's chunk.
    Bytes(&'b [u8]),
    /// A held record's values.
    Held(&'b [RawValue]),
}

/// The values of [`ViewValues`]: (field index, cut, value). A value that does not
/// decode ends them (the trace's opening counted its record as bad).
pub(crate) enum ViewValuesIter<'b> {
    Bytes(wire::Values<'b>),
    Held(std::slice::Iter<'b, RawValue>),
}

impl<'b> Iterator for ViewValuesIter<'b> {
    type Item = ValueAt<'b>;

    fn next(&mut self) -> Option<ValueAt<'b>> {
        match self {
            ViewValuesIter::Bytes(v) => v.next()?.ok(),
            ViewValuesIter::Held(it) => it.next().map(|r| (r.field, r.cut, ValueIn::of(&r.value))),
        }
    }
}

impl<'b> ViewValues<'b> {
    pub fn iter(&self) -> ViewValuesIter<'b> {
        match *self {
            ViewValues::Bytes(b) => ViewValuesIter::Bytes(wire::Values::new(b)),
            ViewValues::Held(v) => ViewValuesIter::Held(v.iter()),
        }
    }
}

/// What a record is, seen in place.
pub(crate) enum ViewKind<'t, 'b> {
    Event {
        callsite: Option<&'t Callsite>,
        values: ViewValues<'b>,
    },
    Enter(u64),
    Exit(u64),
    Lost(u64),
    /// New span, record, close, follows-from: resolved.
    Other(EntryKind<'t>),
    /// Bytes that are not a record (counted when the trace was opened).
    Bad,
}

/// A record, seen in place.
pub(crate) struct View<'t, 'b> {
    pub ts_ns: u64,
    pub lane: u32,
    pub thread: Option<&'t ThreadInfo>,
    pub kind: ViewKind<'t, 'b>,
}

/// The index of `callsite`'s `message` field.
pub(crate) fn message_index(callsite: &Callsite) -> Option<u8> {
    callsite.fields.iter().position(|f| f == "message").map(|i| i as u8)
}

fn fields<'t>(callsite: Option<&'t Callsite>, values: ViewValues<'_>) -> Vec<Field<'t>> {
    values
        .iter()
        .map(|(field, cut, v)| Field { name: catalog::field_name(callsite, field), value: v.into_value(), cut })
        .collect()
}

/// A trace's records seen in place, in time order (the order [`Trace::entries`] gives).
pub(crate) struct Views<'t> {
    trace: &'t Trace,
    reading: Reading<'t>,
    unread: Unread,
    /// Each open span's callsite, for the names of its recorded fields.
    span_callsites: HashMap<u64, u32>,
    /// The last thread found: its lane, the times it answers for, the thread.
    thread: Option<(u32, u64, u64, Option<&'t ThreadInfo>)>,
}

impl<'t> Views<'t> {
    /// The records of times `times`; with `kinds`, only those whose kind byte it accepts.
    pub fn new(trace: &'t Trace, times: Range<u64>, kinds: Option<fn(u8) -> bool>) -> Self {
        Views {
            trace,
            reading: trace.records.read_window(times, kinds),
            unread: Unread::default(),
            span_callsites: HashMap::default(),
            thread: None,
        }
    }

    /// Records chunks that could not be read again (see
    /// [`Entries::unread_chunks`](super::Entries::unread_chunks)).
    pub fn unread_chunks(&self) -> u64 {
        self.unread.chunks
    }

    /// The next record.
    pub fn next(&mut self) -> Option<View<'t, '_>> {
        let t = self.trace;
        let split;
        let (ts_ns, lane, rec, values) = match self.reading.next_got(&mut self.unread)? {
            Got::Bytes { ts, lane, bytes } => match wire::split(bytes) {
                Ok((rec, rest)) => {
                    split = rec;
                    (ts, lane, &split, ViewValues::Bytes(rest))
                }
                Err(_) => return Some(View { ts_ns: ts, lane, thread: None, kind: ViewKind::Bad }),
            },
            Got::Held(r) => {
                let values = match &r.raw {
                    RawRecord::Event { values, .. }
                    | RawRecord::NewSpan { values, .. }
                    | RawRecord::Record { values, .. } => values.as_slice(),
                    _ => &[],
                };
                (r.ts, r.lane, &r.raw, ViewValues::Held(values))
            }
        };
        let kind = match *rec {
            RawRecord::Event { callsite, .. } => ViewKind::Event { callsite: t.callsite(callsite), values },
            RawRecord::Enter { span } => ViewKind::Enter(span),
            RawRecord::Exit { span } => ViewKind::Exit(span),
            RawRecord::Lost { count } => ViewKind::Lost(count),
            RawRecord::NewSpan { callsite, span, parent, .. } => {
                self.span_callsites.insert(span, callsite);
                let cs = t.callsite(callsite);
                ViewKind::Other(EntryKind::NewSpan { span, parent, callsite: cs, fields: fields(cs, values) })
            }
            RawRecord::Record { span, .. } => {
                let cs = self.span_callsites.get(&span).and_then(|c| t.callsite(*c));
                ViewKind::Other(EntryKind::Record { span, fields: fields(cs, values) })
            }
            RawRecord::Close { span } => {
                // Span ids are reused once closed.
                self.span_callsites.remove(&span);
                ViewKind::Other(EntryKind::Close { span })
            }
            RawRecord::FollowsFrom { span, follows } => ViewKind::Other(EntryKind::FollowsFrom { span, follows }),
        };
        let thread = match self.thread {
            Some((l, from, to, thread)) if l == lane && from <= ts_ns && ts_ns < to => thread,
            _ => {
                let (thread, from, to) = t.thread_and_span(lane, ts_ns);
                self.thread = Some((lane, from, to, thread));
                thread
            }
        };
        Some(View { ts_ns, lane, thread, kind })
    }
}
