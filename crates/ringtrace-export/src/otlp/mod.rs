//! OpenTelemetry's data model (OTLP, through the `opentelemetry-proto` crate's types):
//! a trace's spans as OTLP spans, the events inside them as span events, the events
//! outside any span as log records. The mapping, field by field:
//!
//! The forms of values, attribute lists, severities, log records and resources are
//! [`model`]'s, which the fleet's OTLP export (`ringtrace_ship::fleet::export`) shares:
//! an event outside any span becomes the log record the JSON object an agent ships of
//! it becomes.
//!
//! * **Resource** (one for the trace's process): `service.name` ([`Options::service`],
//!   else the program's name, else `unknown_service`, the OpenTelemetry semantic
//!   conventions' value where the name is not known), `host.name` ([`Options::host`],
//!   where given), `process.pid` and `process.executable.name` (where the trace's
//!   process chunk gives them).
//! * **Scope**: `ringtrace-tracing` (the recorder that wrote the trace) and its version.
//! * **A span** per span of the trace (a `tracing` span id is reused once its span
//!   closed: each `new span` record starts a new one): its callsite's name; start at its
//!   `new span` record and end at its close, in Unix nanoseconds (the trace's process
//!   chunk maps its monotonic clock to the wall clock); its fields as attributes with
//!   their types (integers of any width, 128-bit ones too, as `int` where they fit in
//!   an i64, else a decimal string; finite f64 as `double`; NaN and the infinities as
//!   the strings `NaN`, `Infinity` and `-Infinity`, the spelling of every JSON output of
//!   ringtrace ([`ringtrace_tracing::decode::text::non_finite_text`]), since
//!   `opentelemetry-proto`'s serde form writes a double as a JSON number, which holds
//!   none of them (`serde_json` writes `null`); bool; text and formatted
//!   values as strings; bytes as `bytes`); `code.namespace` (its target),
//!   `code.filepath`, `code.lineno`, `thread.id` and `thread.name`; `follows_from` as
//!   links.
//! * **Attribute keys** are unique in each list, as OTLP requires: a field keeps its
//!   name and its latest value (a `record` replaces the value it had); an attribute the
//!   mapping adds (`level`, `thread.*`, `code.*`, `ringtrace.*`) is left out where a
//!   field has its key, and counted in the `dropped_attributes_count` of a span event
//!   or a log record (a span's attributes change with its `record`s: it counts none).
//! * **Ids**: the spans under one root (a span without a parent, or whose parent the
//!   trace does not hold) make one OTLP trace. A span's id is a hash of the process id,
//!   the host and service names it is exported under ([`Options`]), the span's id and
//!   its start (hashed again where two spans would share it); a trace's id a hash of
//!   its root's span id; so exporting the same trace twice under the same names gives
//!   the same ids, and under other names other ones.
//! * **What OTLP cannot hold, marked**: a span whose `new span` record a flight
//!   recorder overwrote is exported with what the trace holds of it (its name from an
//!   event's context, `?` else), starting at its first record seen or its earliest
//!   descendant's start, whichever is first, with the attribute
//!   `ringtrace.start_unknown = true`; a span not closed in the trace ends at its last
//!   record or its latest descendant's end, whichever is last, with
//!   `ringtrace.end_unknown = true`. Both are counted in [`Converted`]. A trace without
//!   its process chunk (or whose chunk holds no wall-clock reading) has its times in
//!   `CLOCK_MONOTONIC` nanoseconds, not Unix ones: [`Converted::clock_unknown`].
//! * **An event in a span**: a span event of the innermost span, named by its message
//!   (else its callsite's name), its other fields as attributes, and `level`;
//!   `dropped_attributes_count` the values the recorder dropped.
//! * **An event outside any span**: a log record ([`model::event_record`]): severity
//!   number and text from the level (TRACE 1, DEBUG 5, INFO 9, WARN 13, ERROR 17; 0,
//!   `SEVERITY_NUMBER_UNSPECIFIED`, and no text for an event whose callsite the trace
//!   lacks), its `message` field's value as the body (else its callsite's name), its
//!   other fields as attributes, then `code.namespace`, `thread.id`, `thread.name` and,
//!   where the recorder cut values at its bound, `ringtrace.cut` (their names);
//!   `dropped_attributes_count` the values the recorder dropped.
//! * **Lost events** (`lost` entries): counted in [`Converted::lost`], and a log
//!   record of severity WARN says how many at that time ([`model::lost_record`]:
//!   `ringtrace: N events lost here (ring full)`, `ringtrace.lost`, `thread.*`).
//!
//! A collector bounds the requests it takes: [`trace_batches`] and [`log_batches`]
//! split a conversion's into requests of bounded size, and [`JsonLines`] writes them
//! as OTLP/JSON lines.
//!
//! ```
//! # use tracing_subscriber::layer::SubscriberExt;
//! use ringtrace_export::otlp::{convert, trace_batches, Limits, Options};
//!
//! let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).build()?;
//! tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
//!     for i in 0..5u64 {
//!         let _s = tracing::info_span!("work", i).entered();
//!         tracing::info!("step");
//!     }
//! });
//! let mut dump = Vec::new();
//! recorder.dump_to(&mut dump)?;
//! let trace = ringtrace_tracing::decode::Trace::from_bytes(&dump, "dump".as_ref())?;
//! let c = convert(&trace, &Options { service: Some("demo".into()), host: None });
//! assert_eq!((c.spans, c.span_events, c.clock_unknown), (5, 5, false));
//! let batches = trace_batches(c.traces, Limits { max_items: 2, ..Limits::default() });
//! let sizes: Vec<usize> =
//!     batches.iter().map(|b| b.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum()).collect();
//! assert_eq!(sizes, [2, 2, 1]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod batches;
pub mod ids;
mod lines;
pub mod model;
mod spans;

use std::collections::HashMap;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span};

pub use batches::{log_batches, trace_batches, Limits};
pub use lines::JsonLines;
use model::{put, span_attr, string, value, Attributes, Thread};
pub use spans::SpanSource;
use spans::{finish, Building};

use ringtrace_tracing::decode::{EntryKind, Event, Trace};

/// What the export names the resource by.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `service.name` (default: the program's name from the trace, else
    /// `unknown_service`).
    pub service: Option<String>,
    /// `host.name` (left out if `None`).
    pub host: Option<String>,
}

/// A trace in OTLP's model, and what the conversion counted.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Converted {
    /// The spans, under one resource and scope.
    pub traces: ExportTraceServiceRequest,
    /// The log records, under the same resource and scope.
    pub logs: ExportLogsServiceRequest,
    /// Spans written.
    pub spans: u64,
    /// Span events written.
    pub span_events: u64,
    /// Log records written (lost-record notes included).
    pub log_records: u64,
    /// Spans whose start the trace no longer holds (marked `ringtrace.start_unknown`).
    pub start_unknown: u64,
    /// Spans not closed in the trace (marked `ringtrace.end_unknown`).
    pub end_unknown: u64,
    /// Records the recorder lost, as the trace counts them.
    pub lost: u64,
    /// Whether the times are `CLOCK_MONOTONIC` nanoseconds rather than Unix ones: the
    /// trace lacks its process chunk (the process attributes are left out too), or the
    /// chunk holds no wall-clock reading (a channel file of raw records).
    pub clock_unknown: bool,
    /// Records chunks of a trace file skipped because the file changed on disk after
    /// the trace was opened ([`Entries::unread_chunks`](ringtrace_tracing::decode::Entries::unread_chunks)).
    pub unread_chunks: u64,
    /// Where each span of [`traces`](Self::traces) comes from, in their order: what
    /// tells a span apart across reads of a live recorder, whose spans' starts (and so
    /// ids) can change as the recorder overwrites them.
    pub sources: Vec<SpanSource>,
}

/// Fields as attributes, a later field of a name replacing an earlier one.
fn attributes<'f>(fields: impl IntoIterator<Item = &'f ringtrace_tracing::decode::Field<'f>>) -> Attributes {
    let mut attrs = Attributes::new(0);
    for f in fields {
        attrs.field(&f.name, Some(value(&f.value)));
    }
    attrs
}

/// The log record of `ev`, an event outside any span, at `ts` ([`model::event_record`]).
fn event_record(ev: &Event<'_>, ts: u64) -> LogRecord {
    let label = ev.thread.map(|t| t.label());
    let e = model::Event {
        time_ns: ts,
        level: ev.callsite.map(|c| c.level),
        name: ev.callsite.map(|c| c.name.as_str()),
        target: ev.callsite.map(|c| c.target.as_str()),
        thread: Thread { id: ev.thread.map(|t| t.tid), name: label.as_deref() },
        span_name: None,
        span_id: None,
        cut: ev.fields.iter().filter(|f| f.cut).map(|f| f.name.as_ref()).collect(),
        dropped: u64::from(ev.dropped),
    };
    model::event_record(&e, ev.fields.iter().map(|f| (f.name.as_ref(), Some(value(&f.value)))))
}

/// The resource of a trace of process `process` (`None` if the trace lacks its chunk).
fn resource(process: Option<&ringtrace_tracing::decode::Process>, opts: &Options) -> Resource {
    let program = process.map(|p| p.program.as_str()).filter(|p| !p.is_empty());
    let service = opts.service.as_deref().or(program).unwrap_or("unknown_service");
    model::resource(service, opts.host.as_deref(), process.map(|p| p.pid), program)
}

/// Converts `trace` into OTLP's model (see the module's docs for the mapping).
pub fn convert(trace: &Trace, opts: &Options) -> Converted {
    let pid = trace.process.as_ref().map_or(0, |p| p.pid);
    let wall = |ts: u64| trace.process.as_ref().map_or(ts, |p| p.wall_ns(ts));
    let mut out =
        Converted { clock_unknown: trace.process.as_ref().is_none_or(|p| p.realtime_ns == 0), ..Converted::default() };
    // Every span in the order it was first seen (a parent always before its children:
    // a parent unknown when its child starts is made then); the index of each ringtrace
    // id's open span, and of its latest span, open or closed (for links).
    let mut all: Vec<Building> = Vec::new();
    let mut open: HashMap<u64, usize> = HashMap::new();
    let mut latest: HashMap<u64, usize> = HashMap::new();
    let mut logs: Vec<LogRecord> = Vec::new();
    let mut links: Vec<(usize, usize)> = Vec::new();
    let mut entries = trace.entries();
    for e in entries.by_ref() {
        let ts = wall(e.ts_ns);
        let thread = e.thread;
        let add_thread = |attrs: &mut Vec<KeyValue>| {
            if let Some(t) = thread {
                span_attr(attrs, "thread.id", any_value::Value::IntValue(i64::from(t.tid)));
                span_attr(attrs, "thread.name", string(t.label()));
            }
        };
        // The open span of `id`, or one made from what is known (the trace holds no
        // start of it); named from an event's context where it is still `?`.
        let adopt = |all: &mut Vec<Building>,
                     open: &mut HashMap<u64, usize>,
                     latest: &mut HashMap<u64, usize>,
                     id: u64,
                     name: Option<&str>| {
            if let Some(&i) = open.get(&id) {
                if let (Some(n), "?") = (name, all[i].span.name.as_str()) {
                    all[i].span.name = n.to_owned();
                }
                return i;
            }
            all.push(Building {
                id,
                span: Span {
                    name: name.unwrap_or("?").to_owned(),
                    kind: span::SpanKind::Internal as i32,
                    start_time_unix_nano: ts,
                    ..Span::default()
                },
                parent: None,
                start_known: false,
                closed: false,
                last_ns: ts,
            });
            open.insert(id, all.len() - 1);
            latest.insert(id, all.len() - 1);
            all.len() - 1
        };
        match e.kind {
            EntryKind::NewSpan { span, parent, callsite, fields } => {
                // A span of the same id still open is an earlier one whose close the
                // trace does not hold: it stays as it is.
                open.remove(&span);
                let parent = (parent != 0).then(|| adopt(&mut all, &mut open, &mut latest, parent, None));
                let (mut attrs, _) = attributes(&fields).into_parts();
                if let Some(c) = callsite {
                    span_attr(&mut attrs, "code.namespace", string(c.target.clone()));
                    if let Some(f) = &c.file {
                        span_attr(&mut attrs, "code.filepath", string(f.clone()));
                    }
                    if let Some(l) = c.line {
                        span_attr(&mut attrs, "code.lineno", any_value::Value::IntValue(i64::from(l)));
                    }
                }
                add_thread(&mut attrs);
                let name = callsite.map_or_else(|| "?".to_owned(), |c| c.name.clone());
                let span_obj = Span {
                    name,
                    kind: span::SpanKind::Internal as i32,
                    start_time_unix_nano: ts,
                    attributes: attrs,
                    ..Span::default()
                };
                all.push(Building { id: span, span: span_obj, parent, start_known: true, closed: false, last_ns: ts });
                open.insert(span, all.len() - 1);
                latest.insert(span, all.len() - 1);
            }
            EntryKind::Record { span, fields } => {
                let i = adopt(&mut all, &mut open, &mut latest, span, None);
                let b = &mut all[i];
                for f in &fields {
                    put(&mut b.span.attributes, &f.name, Some(value(&f.value)));
                }
                b.last_ns = ts;
            }
            EntryKind::Enter { span } | EntryKind::Exit { span } => {
                let i = adopt(&mut all, &mut open, &mut latest, span, None);
                all[i].last_ns = ts;
            }
            EntryKind::Close { span } => {
                let i = adopt(&mut all, &mut open, &mut latest, span, None);
                let b = &mut all[i];
                b.span.end_time_unix_nano = ts;
                b.closed = true;
                b.last_ns = ts;
                open.remove(&span);
            }
            EntryKind::FollowsFrom { span, follows } => {
                // Both ends as they are now: the open span of each id, else its latest.
                let from = adopt(&mut all, &mut open, &mut latest, span, None);
                if let Some(&to) = open.get(&follows).or(latest.get(&follows)) {
                    links.push((from, to));
                }
            }
            EntryKind::Event(ev) => match ev.spans.last() {
                Some(ctx) => {
                    let name = (ev.message().map(str::to_owned))
                        .or_else(|| ev.callsite.map(|c| c.name.clone()))
                        .unwrap_or_default();
                    let mut attrs = attributes(ev.fields.iter().filter(|f| f.name != "message"));
                    // `Event::level` says TRACE where the callsite is not known.
                    if let Some(c) = ev.callsite {
                        attrs.add("level", string(c.level.as_str()));
                    }
                    let (attributes, dropped) = attrs.into_parts();
                    let i = adopt(&mut all, &mut open, &mut latest, ctx.id, Some(&ctx.name));
                    let b = &mut all[i];
                    b.span.events.push(span::Event {
                        time_unix_nano: ts,
                        name,
                        attributes,
                        dropped_attributes_count: dropped.saturating_add(u32::from(ev.dropped)),
                    });
                    b.last_ns = ts;
                    out.span_events += 1;
                }
                None => logs.push(event_record(&ev, ts)),
            },
            EntryKind::Lost { count } => {
                out.lost = out.lost.saturating_add(count);
                let label = thread.map(|t| t.label());
                let thread = Thread { id: thread.map(|t| t.tid), name: label.as_deref() };
                logs.push(model::lost_record(ts, count, thread));
            }
        }
    }
    out.unread_chunks = entries.unread_chunks().0;
    let service = opts.service.as_deref().unwrap_or_default();
    let (spans, f) = finish(all, &links, ids::origin(pid, opts.host.as_deref().unwrap_or_default(), service));
    out.spans = spans.len() as u64;
    (out.start_unknown, out.end_unknown, out.sources) = (f.start_unknown, f.end_unknown, f.sources);
    out.log_records = logs.len() as u64;
    let resource = resource(trace.process.as_ref(), opts);
    let scope = InstrumentationScope {
        name: "ringtrace-tracing".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..InstrumentationScope::default()
    };
    out.traces = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource.clone()),
            scope_spans: vec![ScopeSpans { scope: Some(scope.clone()), spans, ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    };
    out.logs = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource),
            scope_logs: vec![ScopeLogs { scope: Some(scope), log_records: logs, ..ScopeLogs::default() }],
            ..ResourceLogs::default()
        }],
    };
    out
}

/// What [`write_json_lines`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    /// Spans written.
    pub spans: u64,
    /// Span events written.
    pub span_events: u64,
    /// Log records written (lost-record notes included).
    pub log_records: u64,
    /// Spans marked `ringtrace.start_unknown`.
    pub start_unknown: u64,
    /// Spans marked `ringtrace.end_unknown`.
    pub end_unknown: u64,
    /// Lines written: one per request.
    pub lines: u64,
    /// [`Converted::clock_unknown`]: the times are monotonic, not Unix.
    pub clock_unknown: bool,
    /// [`Converted::unread_chunks`].
    pub unread_chunks: u64,
}

/// Writes `trace` as OTLP/JSON lines ([`JsonLines`]), the form of the OpenTelemetry
/// specification's OTLP File Exporter: the spans as lines each holding an
/// `ExportTraceServiceRequest`, then the log records as lines each holding an
/// `ExportLogsServiceRequest` (none for none), each request a batch of
/// [`Limits::default`], so that no line grows with the trace; and flushes `w`.
/// `otelcol`'s `otlpjsonfile` receiver reads it.
pub fn write_json_lines(trace: &Trace, opts: &Options, w: &mut impl std::io::Write) -> std::io::Result<Written> {
    let c = convert(trace, opts);
    let mut lines = JsonLines::new(w);
    lines.traces(c.traces)?;
    lines.logs(c.logs)?;
    lines.flush()?;
    Ok(Written {
        spans: c.spans,
        span_events: c.span_events,
        log_records: c.log_records,
        start_unknown: c.start_unknown,
        end_unknown: c.end_unknown,
        lines: lines.lines(),
        clock_unknown: c.clock_unknown,
        unread_chunks: c.unread_chunks,
    })
}
