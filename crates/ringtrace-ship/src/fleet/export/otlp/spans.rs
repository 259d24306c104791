//! An events source's span records assembled into OTLP spans as they stream past, as
//! a trace's conversion assembles a recorder's on its host
//! ([`ringtrace_export::otlp::convert`]): a span from its `new` (or `open`) object to
//! its `close` (or `done`), its fields and later `record`s as attributes, the events in
//! it as span events, `follows` as links, its ids made as the host makes them
//! ([`ringtrace_export::otlp::ids`]).
//!
//! A span goes out when it closes; the spans still open at the end go out then, each
//! ending at its last record or its latest descendant's end, whichever is last, marked
//! `ringtrace.end_unknown`. A span whose `new` the stream lacks starts at its first
//! record seen, named from an event's context where one names it (else `?`), marked
//! `ringtrace.start_unknown`.
//!
//! Memory is bounded, not by the stream: at most [`MAX_OPEN`] spans open (past it, the
//! one open longest goes out, marked `ringtrace.end_unknown`), [`MAX_HELD_EVENTS`] span
//! events held in them (past it, an event in a span becomes the log record it would be
//! outside one, with its span's name and id), and [`MAX_LATEST`] spans remembered for
//! links (a `follows` of a span forgotten links nothing). A span's id is unique among
//! the spans open and the [`MAX_LATEST`] made before (a trace's conversion's among
//! all its spans): a `tracing` id reused at the same nanosecond is hashed again.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::{span, Span};
use ringtrace_export::otlp::ids;
use ringtrace_export::otlp::model::{mark, put};
use std::collections::BTreeMap;

/// Spans open at once, over all sources.
pub(super) const MAX_OPEN: usize = 1 << 16;

/// Span events held in open spans, over all sources.
pub(super) const MAX_HELD_EVENTS: usize = 1 << 18;

/// Spans whose ids a later `follows` can still link to, over all sources.
pub(super) const MAX_LATEST: usize = 1 << 17;

/// A span of a source: (the source's slot, its `tracing` id).
type Key = (usize, u64);

/// An open span.
struct Open {
    /// When it was made: tells it from a later span of its id.
    seq: u64,
    span: Span,
    /// Its parent's key and `seq`, where it has one.
    parent: Option<(Key, u64)>,
    start_known: bool,
    /// Its latest record's time, or its latest descendant's end, whichever is later.
    last_ns: u64,
    span_id: u64,
}

/// What the assembler made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Made {
    pub(super) spans: u64,
    pub(super) span_events: u64,
    pub(super) start_unknown: u64,
    pub(super) end_unknown: u64,
}

/// The open spans of every events source, and the spans made, to be taken.
#[derive(Default)]
pub(super) struct Assembler {
    open: HashMap<Key, Open>,
    /// The open spans by `seq`: the oldest first.
    order: BTreeMap<u64, Key>,
    next: u64,
    /// Each `tracing` id's latest span (open or not): its trace id and span id.
    latest: HashMap<Key, (Vec<u8>, u64)>,
    /// The span ids of the open spans and of spans made lately.
    used: HashSet<u64>,
    held_events: usize,
    /// The spans made since last taken, with their slots.
    pub(super) out: Vec<(usize, Span)>,
    pub(super) made: Made,
}

/// A span's `new` object read: what the span starts with.
pub(super) struct Start {
    pub(super) id: u64,
    pub(super) parent: Option<u64>,
    pub(super) name: String,
    pub(super) attributes: Vec<KeyValue>,
}

impl Assembler {
    pub(super) fn new() -> Self {
        Assembler { open: HashMap::new(), latest: HashMap::new(), used: HashSet::new(), ..Assembler::default() }
    }

    /// A span starts (`new`, `open`): a span of its id still open is an earlier one
    /// whose close the stream lacks, which goes out now, as it is.
    pub(super) fn start(&mut self, slot: usize, origin: u64, s: Start, ts: u64) {
        if let Some(earlier) = self.open.remove(&(slot, s.id)) {
            self.emit(slot, earlier);
        }
        let parent = s.parent.map(|p| self.adopt(slot, origin, p, None, ts));
        let span = Span {
            name: s.name,
            kind: span::SpanKind::Internal as i32,
            start_time_unix_nano: ts,
            attributes: s.attributes,
            ..Span::default()
        };
        self.make(slot, origin, s.id, span, parent, true, ts);
    }

    /// A `record`: its fields set in the span's attributes.
    pub(super) fn record<'f>(
        &mut self,
        slot: usize,
        origin: u64,
        id: u64,
        fields: impl IntoIterator<Item = (&'f str, Option<V>)>,
        ts: u64,
    ) {
        let k = self.adopt(slot, origin, id, None, ts).0;
        if let Some(o) = self.open.get_mut(&k) {
            for (name, v) in fields {
                put(&mut o.span.attributes, name, v);
            }
            o.last_ns = o.last_ns.max(ts);
        }
    }

    /// An `enter` or `exit`: the span is seen at `ts`.
    pub(super) fn touch(&mut self, slot: usize, origin: u64, id: u64, ts: u64) {
        let k = self.adopt(slot, origin, id, None, ts).0;
        if let Some(o) = self.open.get_mut(&k) {
            o.last_ns = o.last_ns.max(ts);
        }
    }

    /// A `close` (or `done`): the span ends at `ts` and goes out.
    pub(super) fn close(&mut self, slot: usize, origin: u64, id: u64, ts: u64) {
        let k = self.adopt(slot, origin, id, None, ts).0;
        if let Some(mut o) = self.open.remove(&k) {
            o.span.end_time_unix_nano = ts;
            o.last_ns = o.last_ns.max(ts);
            self.order.remove(&o.seq);
            self.finish_one(slot, o, true);
        }
    }

    /// A `follows`: a link from span `id` to span `follows` as it is now (its open
    /// span, else its latest), where that is known.
    pub(super) fn follows(&mut self, slot: usize, origin: u64, id: u64, follows: u64, ts: u64) {
        let k = self.adopt(slot, origin, id, None, ts).0;
        let to = self.latest.get(&(slot, follows)).cloned();
        if let (Some(o), Some((trace_id, span_id))) = (self.open.get_mut(&k), to) {
            o.span.links.push(span::Link {
                trace_id,
                span_id: span_id.to_be_bytes().to_vec(),
                ..span::Link::default()
            });
            o.last_ns = o.last_ns.max(ts);
        }
    }

    /// An event in span `id` (named `name` in the event's context): a span event of it.
    /// `Err` gives the event back when [`MAX_HELD_EVENTS`] are held.
    pub(super) fn event(
        &mut self,
        slot: usize,
        origin: u64,
        id: u64,
        name: Option<&str>,
        event: span::Event,
    ) -> Result<(), span::Event> {
        if self.held_events >= MAX_HELD_EVENTS {
            return Err(event);
        }
        let ts = event.time_unix_nano;
        let k = self.adopt(slot, origin, id, name, ts).0;
        let Some(o) = self.open.get_mut(&k) else { return Err(event) };
        o.span.events.push(event);
        o.last_ns = o.last_ns.max(ts);
        self.held_events += 1;
        self.made.span_events += 1;
        Ok(())
    }

    /// Every span still open goes out, the latest made first (so that each child's end
    /// reaches its parent before the parent goes out).
    pub(super) fn end(&mut self) {
        while let Some((_, k)) = self.order.pop_last() {
            if let Some(o) = self.open.remove(&k) {
                self.finish_one(k.0, o, false);
            }
        }
    }

    /// The open span of `id`, or one made from what is known (its `new` not seen),
    /// named from an event's context where it is still `?`: its key and `seq`.
    fn adopt(&mut self, slot: usize, origin: u64, id: u64, name: Option<&str>, ts: u64) -> (Key, u64) {
        let k = (slot, id);
        if let Some(o) = self.open.get_mut(&k) {
            if let (Some(n), "?") = (name, o.span.name.as_str()) {
                o.span.name = n.to_owned();
            }
            return (k, o.seq);
        }
        let span = Span {
            name: name.unwrap_or("?").to_owned(),
            kind: span::SpanKind::Internal as i32,
            start_time_unix_nano: ts,
            ..Span::default()
        };
        self.make(slot, origin, id, span, None, false, ts)
    }

    /// Makes an open span: its ids (its parent's trace, or one of its own), and room
    /// for it.
    #[allow(clippy::too_many_arguments)]
    fn make(
        &mut self,
        slot: usize,
        origin: u64,
        id: u64,
        mut span: Span,
        parent: Option<(Key, u64)>,
        start_known: bool,
        ts: u64,
    ) -> (Key, u64) {
        if self.open.len() >= MAX_OPEN {
            if let Some((_, oldest)) = self.order.pop_first() {
                if let Some(o) = self.open.remove(&oldest) {
                    self.finish_one(oldest.0, o, false);
                }
            }
        }
        if self.used.len() >= MAX_LATEST {
            self.used = self.open.values().map(|o| o.span_id).collect();
        }
        let used = &mut self.used;
        let span_id = ids::span_id(origin, id, ts, |h| !used.insert(h));
        let parent_ids = parent.and_then(|(pk, seq)| self.open.get(&pk).filter(|p| p.seq == seq));
        span.trace_id = match parent_ids {
            Some(p) => {
                span.parent_span_id = p.span_id.to_be_bytes().to_vec();
                p.span.trace_id.clone()
            }
            None => ids::trace_id(origin, span_id),
        };
        span.span_id = span_id.to_be_bytes().to_vec();
        if self.latest.len() >= MAX_LATEST {
            let open = &self.open;
            self.latest.retain(|k, _| open.contains_key(k));
        }
        self.latest.insert((slot, id), (span.trace_id.clone(), span_id));
        let seq = self.next;
        self.next += 1;
        let k = (slot, id);
        self.order.insert(seq, k);
        self.open.insert(k, Open { seq, span, parent, start_known, last_ns: ts, span_id });
        (k, seq)
    }

    /// `o`, taken out of the open spans by its caller but still in [`order`](Self::order):
    /// out as it is.
    fn emit(&mut self, slot: usize, o: Open) {
        self.order.remove(&o.seq);
        self.finish_one(slot, o, false);
    }

    /// Out: its end (where not `closed`, its last record's or latest descendant's,
    /// marked), its marks, its end passed to its parent.
    fn finish_one(&mut self, slot: usize, mut o: Open, closed: bool) {
        if !closed {
            o.span.end_time_unix_nano = o.last_ns;
            mark(&mut o.span.attributes, "ringtrace.end_unknown");
            self.made.end_unknown += 1;
        }
        if !o.start_known {
            mark(&mut o.span.attributes, "ringtrace.start_unknown");
            self.made.start_unknown += 1;
        }
        let end = o.span.end_time_unix_nano;
        if let Some((pk, seq)) = o.parent {
            if let Some(p) = self.open.get_mut(&pk).filter(|p| p.seq == seq) {
                p.last_ns = p.last_ns.max(end);
            }
        }
        self.held_events -= o.span.events.len();
        self.made.spans += 1;
        self.out.push((slot, o.span));
    }
}

#[cfg(test)]
mod tests;
