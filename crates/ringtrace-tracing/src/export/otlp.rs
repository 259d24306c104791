//! OpenTelemetry's data model (OTLP, through the `opentelemetry-proto` crate's types):
//! a trace's spans as OTLP spans, the events inside them as span events, the events
//! outside any span as log records. The mapping, field by field:
//!
//! * **Resource** (one for the trace's process): `service.name` ([`Options::service`],
//!   else the program's name), `host.name` ([`Options::host`], where given),
//!   `process.pid`, `process.executable.name`.
//! * **Scope**: `ringtrace-tracing` and its version.
//! * **A span** per span of the trace (a `tracing` span id is reused once its span
//!   closed: each `new span` record starts a new one): its callsite's name; start at its
//!   `new span` record and end at its close, in Unix nanoseconds (the trace's process
//!   chunk maps its monotonic clock to the wall clock); its fields as attributes with
//!   their types (integers as `int` where they fit in an i64, else a decimal string;
//!   f64 as `double`; bool; text and formatted values as strings; bytes as `bytes`);
//!   `code.namespace` (its target), `code.filepath`, `code.lineno`, `thread.id` and
//!   `thread.name`; `follows_from` as links.
//! * **Trace ids**: the spans under one root (a span without a parent, or whose parent
//!   the trace does not hold) make one OTLP trace. Its id, and each span's id, are
//!   hashes of the process id, the span's id and its start (the root's for a trace id),
//!   so that exporting the same trace twice gives the same ids.
//! * **What OTLP cannot hold, marked**: a span whose `new span` record a flight
//!   recorder overwrote is exported with what the trace holds of it (its name from an
//!   event's context, `?` else), starting at its first record seen, with the attribute
//!   `ringtrace.start_unknown = true`; a span not closed in the trace ends at its last
//!   record, with `ringtrace.end_unknown = true`. Both are counted in [`Converted`].
//! * **An event in a span**: a span event of the innermost span, named by its message
//!   (else its callsite's name), its other fields as attributes, and `level`.
//! * **An event outside any span**: a log record: severity number and text from the
//!   level (TRACE 1, DEBUG 5, INFO 9, WARN 13, ERROR 17), its message as the body,
//!   its other fields as attributes, `thread.id`.
//! * **Lost records** (`lost` entries): counted in [`Converted::lost`], and a log
//!   record of severity WARN says how many at that time.

use std::collections::HashMap;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span};
use tracing_core::Level;

use crate::decode::{EntryKind, Field, Trace, Value};

/// What the export names the resource by.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `service.name` (default: the program's name from the trace).
    pub service: Option<String>,
    /// `host.name` (left out if `None`).
    pub host: Option<String>,
}

/// A trace in OTLP's model, and what the conversion counted.
#[derive(Clone, Debug, Default)]
pub struct Converted {
    pub traces: ExportTraceServiceRequest,
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
}

/// A span being assembled.
struct Building {
    /// The ringtrace (`tracing`) span id.
    id: u64,
    span: Span,
    /// The parent span (an index of the spans in the order first seen, always lower
    /// than this span's).
    parent: Option<usize>,
    start_known: bool,
    closed: bool,
    last_ns: u64,
}

/// A stable 64-bit hash (FNV-1a): ids must be the same from run to run and build to
/// build, which the standard library's hashers do not promise.
fn fnv(parts: &[u64], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for p in parts {
        for b in p.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// A nonzero 8-byte id of span `id` that started at `start_ns` in process `pid`.
fn span_id(pid: u32, id: u64, start_ns: u64) -> Vec<u8> {
    fnv(&[u64::from(pid), id, start_ns], 1).max(1).to_be_bytes().to_vec()
}

/// A nonzero 16-byte trace id of the root span `root` (its id and start).
fn trace_id(pid: u32, root: u64, start_ns: u64) -> Vec<u8> {
    let (a, b) = (fnv(&[u64::from(pid), root, start_ns], 2), fnv(&[u64::from(pid), root, start_ns], 3));
    let mut id = a.to_be_bytes().to_vec();
    id.extend_from_slice(&b.max(1).to_be_bytes());
    id
}

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue { key: key.to_owned(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}

fn string(s: impl Into<String>) -> any_value::Value {
    any_value::Value::StringValue(s.into())
}

/// A recorded value as an OTLP value of its type.
fn value(v: &Value) -> any_value::Value {
    match v {
        Value::U64(x) => i64::try_from(*x).map_or_else(|_| string(x.to_string()), any_value::Value::IntValue),
        Value::I64(x) => any_value::Value::IntValue(*x),
        Value::F64(x) => any_value::Value::DoubleValue(*x),
        Value::Bool(x) => any_value::Value::BoolValue(*x),
        Value::U128(x) => string(x.to_string()),
        Value::I128(x) => string(x.to_string()),
        Value::Str(s) | Value::Debug(s) | Value::Error(s) => string(s.clone()),
        Value::Bytes(b) => any_value::Value::BytesValue(b.clone()),
    }
}

fn attributes<'f>(fields: impl IntoIterator<Item = &'f Field<'f>>) -> Vec<KeyValue> {
    fields.into_iter().map(|f| kv(&f.name, value(&f.value))).collect()
}

/// OTLP's severity number and text of a level.
fn severity(l: Level) -> (i32, &'static str) {
    match l {
        Level::TRACE => (1, "TRACE"),
        Level::DEBUG => (5, "DEBUG"),
        Level::INFO => (9, "INFO"),
        Level::WARN => (13, "WARN"),
        _ => (17, "ERROR"),
    }
}

/// A log record at `ts` of `level`, its body `body`.
fn log_record(ts: u64, level: Level, body: String, attributes: Vec<KeyValue>) -> LogRecord {
    let (number, text) = severity(level);
    LogRecord {
        time_unix_nano: ts,
        observed_time_unix_nano: ts,
        severity_number: number,
        severity_text: text.to_owned(),
        body: Some(AnyValue { value: Some(string(body)) }),
        attributes,
        ..LogRecord::default()
    }
}

/// Converts `trace` into OTLP's model (see the module's docs for the mapping).
pub fn convert(trace: &Trace, opts: &Options) -> Converted {
    let (pid, program) = trace.process.as_ref().map_or((0, String::new()), |p| (p.pid, p.program.clone()));
    let wall = |ts: u64| trace.process.as_ref().map_or(ts, |p| p.wall_ns(ts));
    let mut out = Converted::default();
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
        let thread_attrs = || {
            let mut a = Vec::new();
            if let Some(t) = thread {
                a.push(kv("thread.id", any_value::Value::IntValue(i64::from(t.tid))));
                a.push(kv("thread.name", string(t.label())));
            }
            a
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
                let mut attrs = attributes(&fields);
                if let Some(c) = callsite {
                    attrs.push(kv("code.namespace", string(c.target.clone())));
                    if let Some(f) = &c.file {
                        attrs.push(kv("code.filepath", string(f.clone())));
                    }
                    if let Some(l) = c.line {
                        attrs.push(kv("code.lineno", any_value::Value::IntValue(i64::from(l))));
                    }
                }
                attrs.extend(thread_attrs());
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
                    b.span.attributes.retain(|a| a.key != f.name);
                    b.span.attributes.push(kv(&f.name, value(&f.value)));
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
            EntryKind::Event(ev) => {
                let message = ev.message().map(str::to_owned);
                let name = message.clone().or_else(|| ev.callsite.map(|c| c.name.clone())).unwrap_or_default();
                let mut attrs = attributes(ev.fields.iter().filter(|f| f.name != "message"));
                let level = ev.level();
                match ev.spans.last() {
                    Some(ctx) => {
                        let i = adopt(&mut all, &mut open, &mut latest, ctx.id, Some(&ctx.name));
                        let b = &mut all[i];
                        attrs.push(kv("level", string(level.as_str())));
                        b.span.events.push(span::Event {
                            time_unix_nano: ts,
                            name,
                            attributes: attrs,
                            dropped_attributes_count: u32::from(ev.dropped),
                        });
                        b.last_ns = ts;
                        out.span_events += 1;
                    }
                    None => {
                        attrs.extend(thread_attrs());
                        let mut record = log_record(ts, level, name, attrs);
                        record.dropped_attributes_count = u32::from(ev.dropped);
                        logs.push(record);
                    }
                }
            }
            EntryKind::Lost { count } => {
                out.lost += count;
                let mut attrs = vec![kv("ringtrace.lost", any_value::Value::IntValue(count as i64))];
                attrs.extend(thread_attrs());
                logs.push(log_record(ts, Level::WARN, format!("ringtrace: {count} records lost here"), attrs));
            }
        }
    }
    let spans = finish(&mut out, all, &links, pid);
    out.log_records = logs.len() as u64;
    let resource = Resource {
        attributes: {
            let mut a = vec![kv("service.name", string(opts.service.clone().unwrap_or(program.clone())))];
            if let Some(h) = &opts.host {
                a.push(kv("host.name", string(h.clone())));
            }
            a.push(kv("process.pid", any_value::Value::IntValue(i64::from(pid))));
            a.push(kv("process.executable.name", string(program)));
            a
        },
        ..Resource::default()
    };
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

/// Gives the assembled spans (in the order first seen, every parent before its
/// children) their ids, parents, trace ids, ends and links.
fn finish(out: &mut Converted, spans: Vec<Building>, links: &[(usize, usize)], pid: u32) -> Vec<Span> {
    let ids: Vec<Vec<u8>> = spans.iter().map(|b| span_id(pid, b.id, b.span.start_time_unix_nano)).collect();
    // Each span's root: its parent's (a lower index, so already known), or itself.
    let mut root = Vec::with_capacity(spans.len());
    for (i, b) in spans.iter().enumerate() {
        let r = match b.parent {
            Some(p) if p < i => root[p],
            _ => i,
        };
        root.push(r);
    }
    let traces: Vec<Vec<u8>> =
        root.iter().map(|&r| trace_id(pid, spans[r].id, spans[r].span.start_time_unix_nano)).collect();
    let mut linked: Vec<Vec<span::Link>> = vec![Vec::new(); spans.len()];
    for &(from, to) in links {
        linked[from].push(span::Link {
            trace_id: traces[to].clone(),
            span_id: ids[to].clone(),
            ..span::Link::default()
        });
    }
    let mut result = Vec::with_capacity(spans.len());
    for (i, (mut b, links)) in spans.into_iter().zip(linked).enumerate() {
        b.span.span_id = ids[i].clone();
        b.span.trace_id = traces[i].clone();
        b.span.parent_span_id = b.parent.filter(|&p| p < i).map(|p| ids[p].clone()).unwrap_or_default();
        b.span.links = links;
        if !b.start_known {
            out.start_unknown += 1;
            b.span.attributes.push(kv("ringtrace.start_unknown", any_value::Value::BoolValue(true)));
        }
        if !b.closed {
            out.end_unknown += 1;
            b.span.end_time_unix_nano = b.last_ns;
            b.span.attributes.push(kv("ringtrace.end_unknown", any_value::Value::BoolValue(true)));
        }
        result.push(b.span);
    }
    out.spans = result.len() as u64;
    result
}

/// What [`write_json_lines`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    pub spans: u64,
    pub span_events: u64,
    pub log_records: u64,
    pub start_unknown: u64,
    pub end_unknown: u64,
}

/// Writes `trace` as OTLP/JSON lines, the form of the OpenTelemetry specification's
/// OTLP File Exporter: one line holding an `ExportTraceServiceRequest`, then one holding
/// an `ExportLogsServiceRequest` (each left out when empty). `otelcol`'s `otlpjsonfile`
/// receiver reads it.
pub fn write_json_lines(trace: &Trace, opts: &Options, w: &mut impl std::io::Write) -> std::io::Result<Written> {
    let c = convert(trace, opts);
    if c.spans > 0 {
        serde_json::to_writer(&mut *w, &c.traces)?;
        w.write_all(b"\n")?;
    }
    if c.log_records > 0 {
        serde_json::to_writer(&mut *w, &c.logs)?;
        w.write_all(b"\n")?;
    }
    Ok(Written {
        spans: c.spans,
        span_events: c.span_events,
        log_records: c.log_records,
        start_unknown: c.start_unknown,
        end_unknown: c.end_unknown,
    })
}
