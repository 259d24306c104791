//! The OTLP export: log records and an events source's spans under each (host,
//! source)'s resource, an events source's JSON objects read member by member
//! ([`objects`]) and its span records assembled into spans ([`spans`]); the mapping is
//! in the [`export` module's docs](super#otlp).
//!
//! An event's object is read into [`Object`] by serde: a member of another type than
//! the agent writes, or one given twice, fails the read, and the record is exported
//! as bytes instead. serde_json refuses objects nested deeper than 128 levels, so no
//! payload can exhaust the stack.

use std::io::{self, Write};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use ringtrace_export::otlp::model::{self, kv, string, Attributes, Thread};
use ringtrace_export::otlp::{ids, JsonLines};
use ringtrace_tracing::Level;

use super::object::{Id, Object, Undecodable};
use super::tracks::Tracks;
use crate::fleet::{Entry, Fleet, Item};
pub use counts::{Otlp, OtlpCounts};
use objects::{event_log, int, raw, span_event, start, typed_fields, Kind};
use spans::Assembler;

/// Log records the fleet gathers before it writes them as OTLP/JSON lines: a line's
/// worth ([`JsonLines`] writes at most `Limits::default().max_items`, 2048, a line).
pub(super) const LINE_RECORDS: usize = 2048;

/// One (host, source): its resource (made at its first record), the origin of its
/// spans' ids, and its log records and spans of the request being built.
#[derive(Default)]
struct Slot {
    resource: Option<Resource>,
    origin: u64,
    records: Vec<LogRecord>,
    spans: Vec<Span>,
}

/// The log records and spans of an export, by source.
struct Builder {
    /// A fleet's sources numbered in the order of [`Fleet::sources`], its lanes' order
    /// (others after): a track's index is its lane's; a stream's as they come.
    tracks: Tracks,
    slots: Vec<Slot>,
    /// The slots holding records or spans, in the order first given one.
    touched: Vec<usize>,
    /// Log records and spans pending.
    pending: usize,
    spans: Assembler,
    counts: OtlpCounts,
}

/// The requests pending: spans, and log records.
type Requests = (ExportTraceServiceRequest, ExportLogsServiceRequest);

impl Builder {
    fn new(tracks: Tracks) -> Self {
        let (slots, touched) = (Vec::new(), Vec::new());
        Builder { tracks, slots, touched, pending: 0, spans: Assembler::new(), counts: OtlpCounts::default() }
    }

    /// Adds `e`, an entry of `fleet` ([`add`](Self::add)).
    fn add_entry(
        &mut self,
        fleet: &Fleet,
        e: &Entry<'_>,
        full: impl FnMut(&mut Self) -> io::Result<()>,
    ) -> io::Result<()> {
        let i = self.tracks.find(e);
        self.add(i, e, fleet.lane_events(i), fleet.gap_before(i, e.seq), full)
    }

    /// Adds what `e` makes, of the source numbered `i` (an events source's where
    /// `events`), after a log record for the gap before it where there is one (`gap`:
    /// sequence numbers missing, of them too large to ship), calling `full` whenever a
    /// line's worth is pending.
    fn add(
        &mut self,
        i: usize,
        e: &Entry<'_>,
        events: bool,
        gap: (u64, u64),
        mut full: impl FnMut(&mut Self) -> io::Result<()>,
    ) -> io::Result<()> {
        self.tracks.first_use(i);
        let object = events.then(|| Object::read(e.payload));
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, Slot::default);
        }
        if self.slots[i].resource.is_none() {
            let (host, _, source, _) = self.tracks.ids(i);
            // The program an object names is the process's, as a trace's process chunk
            // names it: its service's name and executable's, as a trace's resource has.
            let program = object.as_ref().and_then(|o| o.as_ref().ok()).and_then(|o| o.program.clone());
            let service = program.as_deref().unwrap_or(source);
            let mut resource = model::resource(service, Some(host), None, program.as_deref());
            resource.attributes.push(kv("ringtrace.source", Some(string(source))));
            // As a trace's, without the pid the objects do not carry.
            self.slots[i].origin = ids::origin(0, host, service);
            self.slots[i].resource = Some(resource);
        }
        let (missing, too_large) = gap;
        if missing > 0 {
            let c = &mut self.counts;
            (c.gaps, c.missing, c.too_large) =
                (c.gaps + 1, c.missing.saturating_add(missing), c.too_large.saturating_add(too_large));
            // Not a recorder's loss (`model::lost_record`, events its ring had no room
            // for) but the fleet's: sequence numbers of any source never read, which
            // the fleet alone knows of; it says so in words and attributes of its own.
            let mut attrs = Attributes::new(0);
            attrs.add("ringtrace.lost", int(missing));
            let mut say = format!("ringtrace: {missing} records missing before this one");
            if too_large > 0 {
                attrs.add("ringtrace.too_large", int(too_large));
                say.push_str(&format!(" ({too_large} of them too large to ship)"));
            }
            self.push(i, e.time_ns, model::log_record(0, Some(Level::WARN), Some(string(say)), attrs));
            if self.pending >= LINE_RECORDS {
                full(self)?;
            }
        }
        let (record, kind) = match object {
            None => (Some(raw(e, None)), Kind::Raw),
            Some(read) => match read.and_then(|o| self.object(i, &o, e)) {
                Ok(made) => made,
                Err(why) => (Some(raw(e, Some(why.to_string()))), Kind::Undecodable),
            },
        };
        let c = &mut self.counts;
        *match kind {
            Kind::Raw => &mut c.raw,
            Kind::Event => &mut c.events,
            Kind::Span => &mut c.spans,
            Kind::Lost => &mut c.lost,
            Kind::HostUndecodable => &mut c.host_undecodable,
            Kind::Undecodable => &mut c.undecodable,
        } += 1;
        c.records += 1;
        if let Some(record) = record {
            self.push(i, e.time_ns, record);
        }
        self.take_spans();
        if self.pending >= LINE_RECORDS {
            full(self)?;
        }
        Ok(())
    }

    /// What object `o` of the events source numbered `i`, record `e`, makes: a log
    /// record, or (`None`) a part of a span; or why it is not read. Nothing is changed
    /// before it is known to be read.
    pub(super) fn object(
        &mut self,
        i: usize,
        o: &Object,
        e: &Entry<'_>,
    ) -> Result<(Option<LogRecord>, Kind), Undecodable> {
        let (ts, origin) = (e.time_ns, self.slots[i].origin);
        let thread = Thread { id: o.tid, name: o.thread.as_deref() };
        let (mut record, kind) = match (&o.level, o.lost, &o.span, &o.undecodable) {
            (Some(level), None, None, None) => {
                let level = model::level_named(level).ok_or_else(|| Undecodable::Level(level.clone()))?;
                let record = event_log(o, level, thread)?;
                // An event in a span: a span event of the innermost span of its context.
                let ctx = o.spans.as_ref().and_then(|s| s.last());
                if let Some((c, id)) = ctx.and_then(|c| Some((c, c.id.as_ref()?.get().ok()?))) {
                    if self.spans.event(i, origin, id, c.name.as_deref(), span_event(o, level, ts)).is_ok() {
                        return Ok((None, Kind::Event));
                    }
                    self.counts.span_events_as_logs += 1;
                }
                (record, Kind::Event)
            }
            (None, Some(n), None, None) => (model::lost_record(0, n, thread), Kind::Lost),
            (None, None, Some(kind), None) => {
                let id = o.id.as_ref().ok_or(Undecodable::NoSpanId)?.get()?;
                let parent = o.parent.as_ref().map(Id::get).transpose()?;
                let follows = o.follows.as_ref().map(Id::get).transpose()?;
                let s = &mut self.spans;
                match kind.as_str() {
                    "new" => s.start(i, origin, start(o, id, parent), ts),
                    "open" => {
                        s.start(i, origin, start(o, id, parent), ts);
                        s.touch(i, origin, id, ts);
                    }
                    "record" => s.record(i, origin, id, typed_fields(o), ts),
                    "enter" | "exit" => s.touch(i, origin, id, ts),
                    "close" => s.close(i, origin, id, ts),
                    "done" => {
                        s.touch(i, origin, id, ts);
                        s.close(i, origin, id, ts);
                    }
                    "follows" => match follows {
                        Some(f) => s.follows(i, origin, id, f, ts),
                        None => s.touch(i, origin, id, ts),
                    },
                    _ => return Err(Undecodable::SpanRecord(kind.clone())),
                }
                return Ok((None, Kind::Span));
            }
            (None, None, None, Some(why)) => {
                let mut attrs = Attributes::new(o.dropped.unwrap_or(0));
                attrs.thread(thread);
                attrs.add("ringtrace.undecodable", string(why.clone()));
                if let Some(len) = o.len {
                    attrs.add("ringtrace.len", int(len));
                }
                let say = format!("ringtrace: not decoded on its host: {why}");
                (model::log_record(0, None, Some(string(say)), attrs), Kind::HostUndecodable)
            }
            _ => return Err(Undecodable::Unknown),
        };
        // The fleet's own: the record's sequence number in its source.
        model::add(&mut record, "ringtrace.seq", int(e.seq));
        Ok((Some(record), kind))
    }

    fn push(&mut self, i: usize, time_ns: u64, mut record: LogRecord) {
        (record.time_unix_nano, record.observed_time_unix_nano) = (time_ns, time_ns);
        self.touch(i);
        self.slots[i].records.push(record);
        self.pending += 1;
        self.counts.log_records += 1;
    }

    /// Marks slot `i` as holding something to send.
    fn touch(&mut self, i: usize) {
        let s = &self.slots[i];
        if s.records.is_empty() && s.spans.is_empty() {
            self.touched.push(i);
        }
    }

    /// The spans the assembler made, into their slots.
    fn take_spans(&mut self) {
        for (i, span) in std::mem::take(&mut self.spans.out) {
            self.touch(i);
            self.slots[i].spans.push(span);
            self.pending += 1;
        }
    }

    /// The spans still open go out ([`Assembler::end`]).
    fn end(&mut self) {
        self.spans.end();
        self.take_spans();
    }

    /// What is pending, as requests, by source in the fleet's order.
    fn take(&mut self) -> Requests {
        self.touched.sort_unstable();
        let scope = InstrumentationScope {
            name: "ringtrace-ship".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            ..InstrumentationScope::default()
        };
        let (mut traces, mut logs) = (Vec::new(), Vec::new());
        for i in self.touched.drain(..) {
            let slot = &mut self.slots[i];
            if !slot.spans.is_empty() {
                traces.push(ResourceSpans {
                    resource: slot.resource.clone(),
                    scope_spans: vec![ScopeSpans {
                        scope: Some(scope.clone()),
                        spans: std::mem::take(&mut slot.spans),
                        ..ScopeSpans::default()
                    }],
                    ..ResourceSpans::default()
                });
            }
            if !slot.records.is_empty() {
                logs.push(ResourceLogs {
                    resource: slot.resource.clone(),
                    scope_logs: vec![ScopeLogs {
                        scope: Some(scope.clone()),
                        log_records: std::mem::take(&mut slot.records),
                        ..ScopeLogs::default()
                    }],
                    ..ResourceLogs::default()
                });
            }
        }
        self.pending = 0;
        (ExportTraceServiceRequest { resource_spans: traces }, ExportLogsServiceRequest { resource_logs: logs })
    }

    fn counts(&self) -> OtlpCounts {
        let x = self.tracks.exported(0, 0);
        let m = self.spans.made;
        OtlpCounts {
            hosts: x.hosts,
            sources: x.sources,
            otlp_spans: m.spans,
            span_events: m.span_events,
            start_unknown: m.start_unknown,
            end_unknown: m.end_unknown,
            ..self.counts
        }
    }
}

/// `entries` of `fleet` in OTLP's model.
pub(super) fn convert<'a>(fleet: &'a Fleet, entries: impl IntoIterator<Item = Entry<'a>>) -> Otlp {
    let mut b = Builder::new(Tracks::of(fleet));
    for e in entries {
        // Nothing to do when a line's worth is pending: all goes into one request.
        let _ = b.add_entry(fleet, &e, |_| Ok(()));
    }
    b.end();
    let (traces, logs) = b.take();
    Otlp { traces, logs, counts: b.counts() }
}

/// Writes `entries` of `fleet` as OTLP/JSON lines ([`JsonLines`]), a line's worth
/// ([`LINE_RECORDS`]) at a time, and flushes `out`.
pub(super) fn write_json<'a, W: Write>(
    fleet: &'a Fleet,
    entries: impl IntoIterator<Item = Entry<'a>>,
    out: &mut W,
) -> io::Result<OtlpCounts> {
    let mut lines = JsonLines::new(out);
    let mut b = Builder::new(Tracks::of(fleet));
    let write = |b: &mut Builder, lines: &mut JsonLines<&mut W>| {
        let (traces, logs) = b.take();
        lines.traces(traces)?;
        lines.logs(logs)
    };
    for e in entries {
        b.add_entry(fleet, &e, |b| write(b, &mut lines))?;
    }
    b.end();
    if b.pending > 0 {
        write(&mut b, &mut lines)?;
    }
    lines.flush()?;
    Ok(b.counts())
}

/// Where a stream's requests go.
enum Sink<'o> {
    Json(JsonLines<&'o mut dyn Write>),
    Requests(Box<dyn FnMut(ExportTraceServiceRequest, ExportLogsServiceRequest) -> io::Result<()> + 'o>),
}

impl Sink<'_> {
    fn take(&mut self, b: &mut Builder) -> io::Result<()> {
        let (traces, logs) = b.take();
        match self {
            Sink::Json(lines) => {
                lines.traces(traces)?;
                lines.logs(logs)
            }
            Sink::Requests(f) => f(traces, logs),
        }
    }
}

/// A fleet's records written one by one in OpenTelemetry's model (the mapping of
/// [`otlp()`](super::otlp): log records, and an events source's spans as each closes),
/// requests of at most 2048 log records and spans at a time: the export of a topic read
/// back as a stream ([`stream_topic`](crate::fleet::stream_topic)), in memory bounded
/// by one request and the spans open (at most 65,536), not by the records. Hosts and
/// sources are numbered as they first come, and a request's resources are in that order.
///
/// ```
/// # fn run(items: &[ringtrace_ship::fleet::Item<'_>]) -> std::io::Result<()> {
/// use ringtrace_ship::fleet::export::OtlpWriter;
///
/// let mut out = Vec::new();
/// let mut w = OtlpWriter::json(&mut out);
/// for item in items {
///     w.put(item)?;
/// }
/// let done = w.finish()?;
/// assert_eq!(done.records, items.len() as u64);
/// # Ok(()) }
/// # run(&[]).unwrap();
/// ```
pub struct OtlpWriter<'o> {
    b: Builder,
    sink: Sink<'o>,
}

impl std::fmt::Debug for OtlpWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpWriter").field("counts", &self.b.counts).finish_non_exhaustive()
    }
}

impl<'o> OtlpWriter<'o> {
    /// OTLP/JSON lines written to `out`, as [`otlp_json()`](super::otlp_json) writes them.
    pub fn json(out: &'o mut dyn Write) -> Self {
        OtlpWriter { b: Builder::new(Tracks::new()), sink: Sink::Json(JsonLines::new(out)) }
    }

    /// Each pair of requests (spans, log records), once they hold 2048 spans and log
    /// records (and the last at [`finish`](Self::finish)), handed to `sink`: a
    /// delivery's batches. Either may be empty.
    pub fn requests(
        sink: impl FnMut(ExportTraceServiceRequest, ExportLogsServiceRequest) -> io::Result<()> + 'o,
    ) -> Self {
        OtlpWriter { b: Builder::new(Tracks::new()), sink: Sink::Requests(Box::new(sink)) }
    }

    /// Adds a record of a stream (and a log record of the gap before it, if any); a
    /// span that closes with it goes out.
    ///
    /// # Errors
    ///
    /// The sink's.
    pub fn put(&mut self, item: &Item<'_>) -> io::Result<()> {
        let OtlpWriter { b, sink } = self;
        let i = b.tracks.of_lane(item.lane, &item.entry);
        b.add(i, &item.entry, item.events, item.gap, |b| sink.take(b))
    }

    /// Hands out the spans still open (marked `ringtrace.end_unknown`) and the last
    /// requests (and flushes the JSON lines), and says what was made.
    ///
    /// # Errors
    ///
    /// The sink's.
    pub fn finish(mut self) -> io::Result<OtlpCounts> {
        self.b.end();
        if self.b.pending > 0 {
            self.sink.take(&mut self.b)?;
        }
        if let Sink::Json(lines) = &mut self.sink {
            lines.flush()?;
        }
        Ok(self.b.counts())
    }
}

mod spans;

mod counts;
mod objects;

#[cfg(test)]
mod parity_tests;
#[cfg(test)]
mod tests;
