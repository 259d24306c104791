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
use opentelemetry_proto::tonic::common::v1::{
    any_value::Value as V, AnyValue, ArrayValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde::Deserialize;
use serde_json::{Map, Value as Json};

use super::{Entry, Fleet, Otlp, OtlpCounts, Tracks};

/// Log records one line of [`write_json`] holds at most.
pub(super) const LINE_RECORDS: usize = 2048;

/// An events source's record as the agent ships it (`entry_json`'s object); the
/// members not listed (`time`, `ts_ns`) are not read.
#[derive(Deserialize)]
struct Object {
    level: Option<String>,
    lost: Option<u64>,
    span: Option<String>,
    undecodable: Option<String>,
    thread: Option<String>,
    tid: Option<u32>,
    target: Option<String>,
    name: Option<String>,
    spans: Option<Vec<Context>>,
    fields: Option<Map<String, Json>>,
    cut: Option<Vec<String>>,
    dropped: Option<u64>,
    id: Option<Id>,
    parent: Option<Id>,
    follows: Option<Id>,
    len: Option<u64>,
    program: Option<String>,
}

/// A span of an event's context.
#[derive(Deserialize)]
struct Context {
    name: Option<String>,
    id: Option<Id>,
}

/// A span id: a decimal string as the agent writes it, or a number.
#[derive(Deserialize)]
#[serde(untagged)]
enum Id {
    Text(String),
    Number(u64),
}

impl Id {
    fn get(&self) -> Result<u64, Undecodable> {
        match self {
            Id::Text(s) => s.parse().map_err(|_| Undecodable::SpanId(s.clone())),
            Id::Number(n) => Ok(*n),
        }
    }
}

/// Why an events source's payload is not read (the record carries it, as bytes).
#[derive(Debug, thiserror::Error)]
enum Undecodable {
    #[error("not a JSON object")]
    NotObject,
    #[error("not an object the agent writes: {0}")]
    NotOurs(#[source] serde_json::Error),
    #[error("unknown level {0:?}")]
    Level(String),
    #[error("span id {0:?} is not a decimal u64")]
    SpanId(String),
    #[error("unknown span record {0:?}")]
    SpanRecord(String),
    #[error("a span record without its id")]
    NoSpanId,
    #[error("not one of an event, a span record, a lost count, an undecodable record")]
    Unknown,
}

/// What a record was read as.
enum Kind {
    Raw,
    Event,
    Span,
    Lost,
    HostUndecodable,
    Undecodable,
}

fn kv(key: impl Into<String>, value: Option<V>) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value }), ..KeyValue::default() }
}

fn text(s: impl Into<String>) -> Option<V> {
    Some(V::StringValue(s.into()))
}

/// An OTLP int where it fits an i64, else its decimal text.
fn int(n: u64) -> Option<V> {
    Some(i64::try_from(n).map_or_else(|_| V::StringValue(n.to_string()), V::IntValue))
}

/// A JSON value as an attribute's (see the module docs).
fn typed(v: &Json) -> Option<V> {
    match v {
        Json::Null => None,
        Json::Bool(b) => Some(V::BoolValue(*b)),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Some(V::IntValue(i)),
            (None, Some(u), _) => text(u.to_string()),
            (None, None, Some(f)) if f.is_finite() => Some(V::DoubleValue(f)),
            _ => text(n.to_string()),
        },
        Json::String(s) => text(s.clone()),
        Json::Array(_) | Json::Object(_) => text(v.to_string()),
    }
}

/// OTLP's severity number and text of a `tracing` level's name.
fn severity(level: &str) -> Option<(i32, &'static str)> {
    Some(match level {
        "TRACE" => (1, "TRACE"),
        "DEBUG" => (5, "DEBUG"),
        "INFO" => (9, "INFO"),
        "WARN" => (13, "WARN"),
        "ERROR" => (17, "ERROR"),
        _ => return None,
    })
}

fn body(s: String) -> Option<AnyValue> {
    Some(AnyValue { value: text(s) })
}

/// `fields` as attributes after `ours`, leaving out (and counting in `dropped`) those
/// named as one of `ours`; the `message` field is returned apart.
fn with_fields(
    fields: Option<Map<String, Json>>,
    ours: Vec<KeyValue>,
    dropped: &mut u32,
) -> (Vec<KeyValue>, Option<Json>) {
    let fields = fields.unwrap_or_default();
    let mut attrs = Vec::with_capacity(fields.len() + ours.len());
    let mut message = None;
    for (k, v) in fields {
        if k == "message" {
            message = Some(v);
        } else if ours.iter().any(|a| a.key == k) {
            *dropped = dropped.saturating_add(1);
        } else {
            attrs.push(kv(k, typed(&v)));
        }
    }
    attrs.extend(ours);
    (attrs, message)
}

/// A log record of severity `sev` (0: unspecified).
fn log(sev: Option<(i32, &'static str)>, body: Option<AnyValue>, attributes: Vec<KeyValue>, dropped: u32) -> LogRecord {
    let (number, text) = sev.unwrap_or((0, ""));
    LogRecord {
        severity_number: number,
        severity_text: text.to_owned(),
        body,
        attributes,
        dropped_attributes_count: dropped,
        ..LogRecord::default()
    }
}

/// An events source's record read (its program, where the object names one), or why not.
fn decode(payload: &[u8], seq: u64) -> Result<(LogRecord, Kind, Option<String>), Undecodable> {
    // serde reads a struct from an array too: only an object is one.
    if payload.trim_ascii_start().first() != Some(&b'{') {
        return Err(Undecodable::NotObject);
    }
    let o: Object = serde_json::from_slice(payload).map_err(Undecodable::NotOurs)?;
    let mut ours = vec![kv("ringtrace.seq", int(seq))];
    if let Some(t) = o.tid {
        ours.push(kv("thread.id", Some(V::IntValue(i64::from(t)))));
    }
    if let Some(t) = &o.thread {
        ours.push(kv("thread.name", text(t.clone())));
    }
    let mut dropped = o.dropped.map_or(0, |d| u32::try_from(d).unwrap_or(u32::MAX));
    let program = o.program.clone();
    let (record, kind) = match (&o.level, o.lost, &o.span, &o.undecodable) {
        (Some(level), None, None, None) => {
            let sev = severity(level).ok_or_else(|| Undecodable::Level(level.clone()))?;
            if let Some(t) = &o.target {
                ours.push(kv("code.namespace", text(t.clone())));
            }
            if let Some(ctx) = o.spans.as_ref().and_then(|s| s.last()) {
                if let Some(n) = &ctx.name {
                    ours.push(kv("span.name", text(n.clone())));
                }
                if let Some(id) = &ctx.id {
                    ours.push(kv("ringtrace.span_id", text(id.get()?.to_string())));
                }
            }
            if let Some(cut) = o.cut.filter(|c| !c.is_empty()) {
                let values = cut.into_iter().map(|c| AnyValue { value: text(c) }).collect();
                ours.push(kv("ringtrace.cut", Some(V::ArrayValue(ArrayValue { values }))));
            }
            let (attrs, message) = with_fields(o.fields, ours, &mut dropped);
            let body = match message {
                Some(m) => Some(AnyValue { value: typed(&m) }),
                None => o.name.and_then(body),
            };
            (log(Some(sev), body, attrs, dropped), Kind::Event)
        }
        (None, Some(n), None, None) => {
            ours.push(kv("ringtrace.lost", int(n)));
            let say = format!("ringtrace: {n} events lost here (ring full)");
            (log(severity("WARN"), body(say), ours, dropped), Kind::Lost)
        }
        (None, None, Some(kind), None) => {
            if !["new", "record", "enter", "exit", "close", "follows"].contains(&kind.as_str()) {
                return Err(Undecodable::SpanRecord(kind.clone()));
            }
            let id = o.id.as_ref().ok_or(Undecodable::NoSpanId)?.get()?;
            ours.push(kv("ringtrace.span", text(kind.clone())));
            ours.push(kv("ringtrace.span_id", text(id.to_string())));
            if let Some(n) = &o.name {
                ours.push(kv("span.name", text(n.clone())));
            }
            if let Some(t) = &o.target {
                ours.push(kv("code.namespace", text(t.clone())));
            }
            for (key, id) in [("ringtrace.parent_id", &o.parent), ("ringtrace.follows_id", &o.follows)] {
                if let Some(id) = id {
                    ours.push(kv(key, text(id.get()?.to_string())));
                }
            }
            let say = match &o.name {
                Some(n) => format!("{kind} span {n}"),
                None => format!("{kind} span"),
            };
            let (attrs, _) = with_fields(o.fields, ours, &mut dropped);
            (log(None, body(say), attrs, dropped), Kind::Span)
        }
        (None, None, None, Some(why)) => {
            ours.push(kv("ringtrace.undecodable", text(why.clone())));
            if let Some(len) = o.len {
                ours.push(kv("ringtrace.len", int(len)));
            }
            let say = format!("ringtrace: not decoded on its host: {why}");
            (log(None, body(say), ours, dropped), Kind::HostUndecodable)
        }
        _ => return Err(Undecodable::Unknown),
    };
    Ok((record, kind, program))
}

/// A record as bytes; `why` an events source's payload was not read.
fn raw(e: &Entry<'_>, why: Option<String>) -> LogRecord {
    let mut attrs = vec![kv("ringtrace.seq", int(e.seq)), kv("ringtrace.len", int(e.payload.len() as u64))];
    if let Some(why) = why {
        attrs.push(kv("ringtrace.undecodable", text(why)));
    }
    log(None, Some(AnyValue { value: Some(V::BytesValue(e.payload.to_vec())) }), attrs, 0)
}

/// One (host, source): its resource (made at its first record) and its records of
/// the request being built.
#[derive(Default)]
struct Slot {
    resource: Option<Resource>,
    records: Vec<LogRecord>,
}

/// The log records of an export, by source.
struct Builder<'a> {
    fleet: &'a Fleet,
    /// Numbers the fleet's sources in the order of [`Fleet::sources`], its lanes'
    /// order (others after): a track's index is its lane's.
    tracks: Tracks<'a>,
    slots: Vec<Slot>,
    /// The slots holding records, in the order first given one.
    touched: Vec<usize>,
    pending: usize,
    counts: OtlpCounts,
}

impl<'a> Builder<'a> {
    fn new(fleet: &'a Fleet) -> Self {
        let (slots, touched) = (Vec::new(), Vec::new());
        Builder { fleet, tracks: Tracks::new(fleet), slots, touched, pending: 0, counts: OtlpCounts::default() }
    }

    /// Adds `e`'s log record, after one for the gap before it where there is one,
    /// calling `full` whenever a line's worth is pending.
    fn add(&mut self, e: &Entry<'a>, mut full: impl FnMut(&mut Self) -> io::Result<()>) -> io::Result<()> {
        let i = self.tracks.find(e);
        self.tracks.first_use(i);
        let c = &mut self.counts;
        let (record, kind, program) = if self.fleet.lane_events(i) {
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
            let service = program.unwrap_or_else(|| source.to_owned());
            let attributes = vec![
                kv("service.name", text(service)),
                kv("host.name", text(host)),
                kv("ringtrace.source", text(source)),
            ];
            self.slots[i].resource = Some(Resource { attributes, ..Resource::default() });
        }
        let (missing, too_large) = self.fleet.gap_before(i, e.seq);
        if missing > 0 {
            let c = &mut self.counts;
            (c.gaps, c.missing, c.too_large) =
                (c.gaps + 1, c.missing.saturating_add(missing), c.too_large.saturating_add(too_large));
            let mut attrs = vec![kv("ringtrace.lost", int(missing))];
            let mut say = format!("ringtrace: {missing} records missing before this one");
            if too_large > 0 {
                attrs.push(kv("ringtrace.too_large", int(too_large)));
                say.push_str(&format!(" ({too_large} of them too large to ship)"));
            }
            self.push(i, e.time_ns, log(severity("WARN"), body(say), attrs, 0));
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
        let x = self.tracks.exported(0);
        OtlpCounts { hosts: x.hosts, sources: x.sources, ..self.counts }
    }
}

/// `entries` of `fleet` in OTLP's model.
pub(super) fn convert<'a>(fleet: &'a Fleet, entries: impl IntoIterator<Item = Entry<'a>>) -> Otlp {
    let mut b = Builder::new(fleet);
    for e in entries {
        // Nothing to do when a line's worth is pending: all goes into one request.
        let _ = b.add(&e, |_| Ok(()));
    }
    Otlp { logs: b.take(), counts: b.counts() }
}

/// Writes `entries` of `fleet` as OTLP/JSON lines of at most [`LINE_RECORDS`] log
/// records, and flushes `out`.
pub(super) fn write_json<'a, W: Write>(
    fleet: &'a Fleet,
    entries: impl IntoIterator<Item = Entry<'a>>,
    out: &mut W,
) -> io::Result<OtlpCounts> {
    let mut buf = Vec::new();
    let mut line = |b: &mut Builder<'a>| -> io::Result<()> {
        buf.clear();
        serde_json::to_writer(&mut buf, &b.take())?;
        buf.push(b'\n');
        out.write_all(&buf)
    };
    let mut b = Builder::new(fleet);
    for e in entries {
        b.add(&e, &mut line)?;
    }
    if b.pending > 0 {
        line(&mut b)?;
    }
    out.flush()?;
    Ok(b.counts())
}

#[cfg(test)]
mod tests;
