//! The OTLP export: each record a log record under its (host, source)'s resource, an
//! events source's JSON objects read member by member (the mapping is in the
//! [`export` module's docs](super#otlp)).
//!
//! An event's object is read into [`Object`] by serde: a member of another type than
//! the agent writes, or one given twice, fails the read, and the record is exported
//! as bytes instead. serde_json refuses objects nested deeper than 128 levels, so no
//! payload can exhaust the stack.

use std::io::{self, Write};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value as V, InstrumentationScope};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use ringtrace_export::otlp::model::{self, kv, string, uint, Attributes, Thread};
use ringtrace_export::otlp::JsonLines;
use ringtrace_tracing::Level;

use super::object::{Id, Object, Undecodable};
use super::tracks::Tracks;
use crate::fleet::{Entry, Fleet, Item};

/// A fleet's records in OpenTelemetry's model (see the [module docs](super#otlp)).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Otlp {
    /// The log records: a `ResourceLogs` for each (host, source) with records.
    pub logs: ExportLogsServiceRequest,
    /// What they hold.
    pub counts: OtlpCounts,
}

/// What an OTLP export made. Every entry is one of `raw`, `events`, `spans`, `lost`,
/// `host_undecodable` and `undecodable`, and `log_records` is `records + gaps`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OtlpCounts {
    /// Entries exported (one log record each).
    pub records: u64,
    /// Log records made: one for each entry, one for each gap.
    pub log_records: u64,
    /// Records of plain sources, their payloads as bytes.
    pub raw: u64,
    /// Tracing events (objects with a `level`).
    pub events: u64,
    /// Span records (objects with a `span`).
    pub spans: u64,
    /// Counts of events the recorder lost (objects with `lost`).
    pub lost: u64,
    /// Records their host could not decode (objects with `undecodable`).
    pub host_undecodable: u64,
    /// Payloads of events sources that are not such an object: exported as bytes.
    pub undecodable: u64,
    /// Gaps: records preceded by sequence numbers their source lacks (a log record each).
    pub gaps: u64,
    /// Sequence numbers those gaps stand for.
    pub missing: u64,
    /// Of them, records too large to ship (markers in the fleet).
    pub too_large: u64,
    /// Hosts with at least one record exported.
    pub hosts: u32,
    /// Sources with at least one record exported (one resource each).
    pub sources: u32,
}

/// Log records the fleet gathers before it writes them as OTLP/JSON lines: a line's
/// worth ([`JsonLines`] writes at most `Limits::default().max_items`, 2048, a line).
pub(super) const LINE_RECORDS: usize = 2048;

/// What a record was read as.
enum Kind {
    Raw,
    Event,
    Span,
    Lost,
    HostUndecodable,
    Undecodable,
}

/// An integer of the fleet's as OTLP holds it ([`model::uint`]).
fn int(n: u64) -> V {
    uint(u128::from(n))
}

/// An events source's record read (its program, where the object names one), or why not.
fn decode(payload: &[u8], seq: u64) -> Result<(LogRecord, Kind, Option<String>), Undecodable> {
    let o = Object::read(payload)?;
    let thread = Thread { id: o.tid, name: o.thread.as_deref() };
    let dropped = o.dropped.unwrap_or(0);
    let fields = || o.fields.iter().flatten().map(|(k, v)| (k.as_str(), model::json(v)));
    let (mut record, kind) = match (&o.level, o.lost, &o.span, &o.undecodable) {
        (Some(level), None, None, None) => {
            let level = model::level_named(level).ok_or_else(|| Undecodable::Level(level.clone()))?;
            let ctx = o.spans.as_ref().and_then(|s| s.last());
            let e = model::Event {
                time_ns: 0,
                level: Some(level),
                name: o.name.as_deref(),
                target: o.target.as_deref(),
                thread,
                span_name: ctx.and_then(|c| c.name.as_deref()),
                span_id: ctx.and_then(|c| c.id.as_ref()).map(Id::get).transpose()?,
                cut: o.cut.iter().flatten().map(String::as_str).collect(),
                dropped,
            };
            (model::event_record(&e, fields()), Kind::Event)
        }
        (None, Some(n), None, None) => (model::lost_record(0, n, thread), Kind::Lost),
        (None, None, Some(kind), None) => {
            if !["new", "record", "enter", "exit", "close", "follows", "open", "done"].contains(&kind.as_str()) {
                return Err(Undecodable::SpanRecord(kind.clone()));
            }
            let id = o.id.as_ref().ok_or(Undecodable::NoSpanId)?.get()?;
            let mut attrs = Attributes::new(dropped);
            for (k, v) in fields() {
                attrs.field(k, v);
            }
            attrs.add("ringtrace.span", string(kind.clone()));
            attrs.add("ringtrace.span_id", string(id.to_string()));
            if let Some(n) = &o.name {
                attrs.add("span.name", string(n.clone()));
            }
            if let Some(t) = &o.target {
                attrs.add("code.namespace", string(t.clone()));
            }
            for (key, id) in [("ringtrace.parent_id", &o.parent), ("ringtrace.follows_id", &o.follows)] {
                if let Some(id) = id {
                    attrs.add(key, string(id.get()?.to_string()));
                }
            }
            attrs.thread(thread);
            let say = match &o.name {
                Some(n) => format!("{kind} span {n}"),
                None => format!("{kind} span"),
            };
            (model::log_record(0, None, Some(string(say)), attrs), Kind::Span)
        }
        (None, None, None, Some(why)) => {
            let mut attrs = Attributes::new(dropped);
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
    model::add(&mut record, "ringtrace.seq", int(seq));
    Ok((record, kind, o.program))
}

/// A record as bytes; `why` an events source's payload was not read.
fn raw(e: &Entry<'_>, why: Option<String>) -> LogRecord {
    let mut attrs = Attributes::new(0);
    attrs.add("ringtrace.seq", int(e.seq));
    attrs.add("ringtrace.len", int(e.payload.len() as u64));
    if let Some(why) = why {
        attrs.add("ringtrace.undecodable", string(why));
    }
    model::log_record(0, None, Some(V::BytesValue(e.payload.to_vec())), attrs)
}

/// One (host, source): its resource (made at its first record) and its records of
/// the request being built.
#[derive(Default)]
struct Slot {
    resource: Option<Resource>,
    records: Vec<LogRecord>,
}

/// The log records of an export, by source.
struct Builder {
    /// A fleet's sources numbered in the order of [`Fleet::sources`], its lanes' order
    /// (others after): a track's index is its lane's; a stream's as they come.
    tracks: Tracks,
    slots: Vec<Slot>,
    /// The slots holding records, in the order first given one.
    touched: Vec<usize>,
    pending: usize,
    counts: OtlpCounts,
}

impl Builder {
    fn new(tracks: Tracks) -> Self {
        let (slots, touched) = (Vec::new(), Vec::new());
        Builder { tracks, slots, touched, pending: 0, counts: OtlpCounts::default() }
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

    /// Adds `e`'s log record, of the source numbered `i` (an events source's where
    /// `events`), after one for the gap before it where there is one (`gap`: sequence
    /// numbers missing, of them too large to ship), calling `full` whenever a line's
    /// worth is pending.
    fn add(
        &mut self,
        i: usize,
        e: &Entry<'_>,
        events: bool,
        gap: (u64, u64),
        mut full: impl FnMut(&mut Self) -> io::Result<()>,
    ) -> io::Result<()> {
        self.tracks.first_use(i);
        let c = &mut self.counts;
        let (record, kind, program) = if events {
            decode(e.payload, e.seq).unwrap_or_else(|why| (raw(e, Some(why.to_string())), Kind::Undecodable, None))
        } else {
            (raw(e, None), Kind::Raw, None)
        };
        *match kind {
            Kind::Raw => &mut c.raw,
            Kind::Event => &mut c.events,
            Kind::Span => &mut c.spans,
            Kind::Lost => &mut c.lost,
            Kind::HostUndecodable => &mut c.host_undecodable,
            Kind::Undecodable => &mut c.undecodable,
        } += 1;
        c.records += 1;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, Slot::default);
        }
        if self.slots[i].resource.is_none() {
            let (host, _, source, _) = self.tracks.ids(i);
            // The program an object names is the process's, as a trace's process chunk
            // names it: its service's name and executable's, as a trace's resource has.
            let service = program.as_deref().unwrap_or(source);
            let mut resource = model::resource(service, Some(host), None, program.as_deref());
            resource.attributes.push(kv("ringtrace.source", Some(string(source))));
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
        self.push(i, e.time_ns, record);
        if self.pending >= LINE_RECORDS {
            full(self)?;
        }
        Ok(())
    }

    fn push(&mut self, i: usize, time_ns: u64, mut record: LogRecord) {
        (record.time_unix_nano, record.observed_time_unix_nano) = (time_ns, time_ns);
        if self.slots[i].records.is_empty() {
            self.touched.push(i);
        }
        self.slots[i].records.push(record);
        self.pending += 1;
        self.counts.log_records += 1;
    }

    /// The records pending, as a request, by source in the fleet's order.
    fn take(&mut self) -> ExportLogsServiceRequest {
        self.touched.sort_unstable();
        let scope = InstrumentationScope {
            name: "ringtrace-ship".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            ..InstrumentationScope::default()
        };
        let resource_logs = (self.touched.drain(..))
            .map(|i| ResourceLogs {
                resource: self.slots[i].resource.clone(),
                scope_logs: vec![ScopeLogs {
                    scope: Some(scope.clone()),
                    log_records: std::mem::take(&mut self.slots[i].records),
                    ..ScopeLogs::default()
                }],
                ..ResourceLogs::default()
            })
            .collect();
        self.pending = 0;
        ExportLogsServiceRequest { resource_logs }
    }

    fn counts(&self) -> OtlpCounts {
        let x = self.tracks.exported(0, 0);
        OtlpCounts { hosts: x.hosts, sources: x.sources, ..self.counts }
    }
}

/// `entries` of `fleet` in OTLP's model.
pub(super) fn convert<'a>(fleet: &'a Fleet, entries: impl IntoIterator<Item = Entry<'a>>) -> Otlp {
    let mut b = Builder::new(Tracks::of(fleet));
    for e in entries {
        // Nothing to do when a line's worth is pending: all goes into one request.
        let _ = b.add_entry(fleet, &e, |_| Ok(()));
    }
    Otlp { logs: b.take(), counts: b.counts() }
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
    for e in entries {
        b.add_entry(fleet, &e, |b| lines.logs(b.take()))?;
    }
    if b.pending > 0 {
        lines.logs(b.take())?;
    }
    lines.flush()?;
    Ok(b.counts())
}

/// Where a stream's requests go.
enum Sink<'o> {
    Json(JsonLines<&'o mut dyn Write>),
    Requests(Box<dyn FnMut(ExportLogsServiceRequest) -> io::Result<()> + 'o>),
}

impl Sink<'_> {
    fn take(&mut self, b: &mut Builder) -> io::Result<()> {
        match self {
            Sink::Json(lines) => lines.logs(b.take()),
            Sink::Requests(f) => f(b.take()),
        }
    }
}

/// A fleet's records written one by one as OpenTelemetry log records (the mapping of
/// [`otlp()`](super::otlp)), a request of at most 2048 of them at a time: the export of
/// a topic read back as a stream ([`stream_topic`](crate::fleet::stream_topic)), in
/// memory bounded by one request, not by the records. Hosts and sources are numbered as
/// they first come, and a request's resources are in that order.
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

    /// Each request, once it holds 2048 log records (and the last at
    /// [`finish`](Self::finish)), handed to `sink`: a delivery's batches.
    pub fn requests(sink: impl FnMut(ExportLogsServiceRequest) -> io::Result<()> + 'o) -> Self {
        OtlpWriter { b: Builder::new(Tracks::new()), sink: Sink::Requests(Box::new(sink)) }
    }

    /// Adds a record of a stream (and a log record of the gap before it, if any).
    ///
    /// # Errors
    ///
    /// The sink's.
    pub fn put(&mut self, item: &Item<'_>) -> io::Result<()> {
        let OtlpWriter { b, sink } = self;
        let i = b.tracks.of_lane(item.lane, &item.entry);
        b.add(i, &item.entry, item.events, item.gap, |b| sink.take(b))
    }

    /// Hands out the last request (and flushes the JSON lines), and says what was made.
    ///
    /// # Errors
    ///
    /// The sink's.
    pub fn finish(mut self) -> io::Result<OtlpCounts> {
        if self.b.pending > 0 {
            self.sink.take(&mut self.b)?;
        }
        if let Sink::Json(lines) = &mut self.sink {
            lines.flush()?;
        }
        Ok(self.b.counts())
    }
}

#[cfg(test)]
mod parity_tests;
#[cfg(test)]
mod tests;
