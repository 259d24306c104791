//! Records seen in place, for exporters: an event's values are read out of the trace
//! file's chunk as they are written, text borrowed, nothing copied or allocated; span
//! records other than enter and exit (a few per span) are resolved as [`EntryKind`]s.
//! The `ringtrace-export` crate's Perfetto and CTF exports read a trace this way.
//!
//! ```
//! # use tracing_subscriber::layer::SubscriberExt;
//! use ringtrace_tracing::decode::view::{ViewKind, Views};
//!
//! let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).build()?;
//! tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
//!     tracing::info!(n = 7u64, "step");
//! });
//! let mut dump = Vec::new();
//! recorder.dump_to(&mut dump)?;
//! let trace = ringtrace_tracing::decode::Trace::from_bytes(&dump, "dump".as_ref())?;
//! let mut views = Views::new(&trace, 0..u64::MAX, None);
//! let mut values = 0;
//! while let Some(view) = views.next() {
//!     if let ViewKind::Event { values: v, .. } = view.kind {
//!         values += v.iter().count();
//!     }
//! }
//! assert_eq!(values, 2); // the message and `n`
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::ops::Range;

use foldhash::HashMap;

use super::records::{Got, Reading, Unread};
use super::trace::{EntryKind, Field, Trace};
pub use crate::catalog::field_name;
use crate::catalog::{self, Callsite, ThreadInfo};
use crate::wire::{self, RawRecord, RawValue};
pub use crate::wire::{hex, is_span_kind, ValueAt, ValueIn};

/// An event's values, where they lie: in a record's bytes in a trace file's chunk, or
/// in a record held in memory. [`iter`](ViewValues::iter) reads them.
#[derive(Clone, Copy)]
pub struct ViewValues<'b>(Where<'b>);

#[derive(Clone, Copy)]
enum Where<'b> {
    Bytes(&'b [u8]),
    Held(&'b [RawValue]),
}

impl fmt::Debug for ViewValues<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The values of [`ViewValues`]: (field index, cut, value). A value that does not
/// decode ends them (the trace's opening counted its record as bad).
pub struct ViewValuesIter<'b>(Iter<'b>);

enum Iter<'b> {
    Bytes(wire::Values<'b>),
    Held(std::slice::Iter<'b, RawValue>),
}

impl fmt::Debug for ViewValuesIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ViewValuesIter")
    }
}

impl<'b> Iterator for ViewValuesIter<'b> {
    type Item = ValueAt<'b>;

    fn next(&mut self) -> Option<ValueAt<'b>> {
        match &mut self.0 {
            Iter::Bytes(v) => v.next()?.ok(),
            Iter::Held(it) => it.next().map(|r| (r.field, r.cut, ValueIn::of(&r.value))),
        }
    }
}

impl<'b> ViewValues<'b> {
    /// The values, in the record's order.
    pub fn iter(&self) -> ViewValuesIter<'b> {
        ViewValuesIter(match self.0 {
            Where::Bytes(b) => Iter::Bytes(wire::Values::new(b)),
            Where::Held(v) => Iter::Held(v.iter()),
        })
    }
}

/// What a record is, seen in place.
#[derive(Debug)]
pub enum ViewKind<'t, 'b> {
    /// An event: its callsite (if the catalog has it) and its values.
    Event {
        /// The event's callsite.
        callsite: Option<&'t Callsite>,
        /// The event's values.
        values: ViewValues<'b>,
    },
    /// A thread entered the span.
    Enter(u64),
    /// A thread exited the span.
    Exit(u64),
    /// This many events were lost here.
    Lost(u64),
    /// New span, record, close, follows-from: resolved.
    Other(EntryKind<'t>),
    /// Bytes that are not a record (counted when the trace was opened).
    Bad,
}

/// A record, seen in place.
#[derive(Debug)]
pub struct View<'t, 'b> {
    /// Its time, in the trace's clock (nanoseconds).
    pub ts_ns: u64,
    /// The ring (lane) it was written to.
    pub lane: u32,
    /// The thread that wrote it, if the trace names it.
    pub thread: Option<&'t ThreadInfo>,
    /// What it is.
    pub kind: ViewKind<'t, 'b>,
}

/// The index of `callsite`'s `message` field.
pub fn message_index(callsite: &Callsite) -> Option<u8> {
    callsite.fields.iter().position(|f| f == "message").map(|i| i as u8)
}

fn fields<'t>(callsite: Option<&'t Callsite>, values: ViewValues<'_>) -> Vec<Field<'t>> {
    values
        .iter()
        .map(|(field, cut, v)| Field { name: catalog::field_name(callsite, field), value: v.into_value(), cut })
        .collect()
}

/// A trace's records seen in place, in time order (the order [`Trace::entries`] gives).
pub struct Views<'t> {
    trace: &'t Trace,
    reading: Reading<'t>,
    unread: Unread,
    /// Each open span's callsite, for the names of its recorded fields.
    span_callsites: HashMap<u64, u32>,
    /// The last thread found: its lane, the times it answers for, the thread.
    thread: Option<(u32, u64, u64, Option<&'t ThreadInfo>)>,
    /// The second record of one that stands for two (`open`: its `enter`, `done`: its
    /// `close`): its time, lane, thread and span, and whether it is a close.
    second: Option<(u64, u32, Option<&'t ThreadInfo>, u64, bool)>,
}

impl fmt::Debug for Views<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Views").field("unread_chunks", &self.unread.chunks).finish_non_exhaustive()
    }
}

impl<'t> Views<'t> {
    /// The records of times `times`; with `kinds`, only those whose kind byte it accepts
    /// (e.g. [`is_span_kind`]).
    pub fn new(trace: &'t Trace, times: Range<u64>, kinds: Option<fn(u8) -> bool>) -> Self {
        Views {
            trace,
            reading: trace.records.read_window(times, kinds),
            unread: Unread::default(),
            span_callsites: HashMap::default(),
            thread: None,
            second: None,
        }
    }

    /// Records chunks that could not be read again (see
    /// [`Entries::unread_chunks`](super::Entries::unread_chunks)).
    pub fn unread_chunks(&self) -> u64 {
        self.unread.chunks
    }

    /// The next record. Not an `Iterator`: the record borrows what `self` holds (its
    /// values may lie in the chunk read last), so it is gone at the next call.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<View<'t, '_>> {
        if let Some((ts_ns, lane, thread, span, close)) = self.second.take() {
            let kind = if close { ViewKind::Other(EntryKind::Close { span }) } else { ViewKind::Enter(span) };
            return Some(View { ts_ns, lane, thread, kind });
        }
        let t = self.trace;
        let split;
        let (ts_ns, lane, rec, values) = match self.reading.next_got(&mut self.unread)? {
            Got::Bytes { ts, lane, bytes } => match wire::split(bytes) {
                Ok((rec, rest)) => {
                    split = rec;
                    (ts, lane, &split, ViewValues(Where::Bytes(rest)))
                }
                Err(_) => return Some(View { ts_ns: ts, lane, thread: None, kind: ViewKind::Bad }),
            },
            Got::Held(r) => {
                let values = match &r.raw {
                    RawRecord::Event { values, .. }
                    | RawRecord::NewSpan { values, .. }
                    | RawRecord::Open { values, .. }
                    | RawRecord::Record { values, .. } => values.as_slice(),
                    _ => &[],
                };
                (r.ts, r.lane, &r.raw, ViewValues(Where::Held(values)))
            }
        };
        // A record that stands for two: the second follows at the next call.
        let second = match *rec {
            RawRecord::Open { span, .. } => Some((span, false)),
            RawRecord::Done { span } => Some((span, true)),
            _ => None,
        };
        let kind = match *rec {
            RawRecord::Event { callsite, .. } => ViewKind::Event { callsite: t.callsite(callsite), values },
            RawRecord::Enter { span } => ViewKind::Enter(span),
            RawRecord::Exit { span } => ViewKind::Exit(span),
            RawRecord::Lost { count } => ViewKind::Lost(count),
            RawRecord::Done { span } => {
                // Span ids are reused once closed.
                self.span_callsites.remove(&span);
                ViewKind::Exit(span)
            }
            RawRecord::NewSpan { callsite, span, parent, .. } | RawRecord::Open { callsite, span, parent, .. } => {
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
        self.second = second.map(|(span, close)| (ts_ns, lane, thread, span, close));
        Some(View { ts_ns, lane, thread, kind })
    }
}
