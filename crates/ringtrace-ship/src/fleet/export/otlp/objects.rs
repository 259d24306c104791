//! What an events source's object becomes in OpenTelemetry's model, piece by piece:
//! its typed fields, an event's log record or span event, a span's start; and a plain
//! record's log record. `Builder::object` puts them together.

use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::trace::v1::span;
use ringtrace_export::otlp::model::{self, json_typed, span_attr, string, uint, Attributes, Thread};
use ringtrace_tracing::Level;

use super::super::object::{Id, Object, Undecodable};
use super::spans::Start;
use crate::fleet::Entry;

/// What a record was read as.
pub(super) enum Kind {
    Raw,
    Event,
    Span,
    Lost,
    HostUndecodable,
    Undecodable,
}

/// An integer of the fleet's as OTLP holds it ([`model::uint`]).
pub(super) fn int(n: u64) -> V {
    uint(u128::from(n))
}

/// An object's fields, each as the OTLP value of the type it was recorded with
/// ([`json_typed`]).
pub(super) fn typed_fields(o: &Object) -> impl Iterator<Item = (&str, Option<V>)> {
    let mut kinds = o.kinds.as_deref().unwrap_or("").chars();
    o.fields.iter().flatten().map(move |(k, v)| (k.as_str(), json_typed(v, kinds.next())))
}

/// The span event of an event object of level `level` at `ts`, as a trace's conversion
/// makes it: named by its `message` (text; another value's is empty), else its
/// callsite's name; its other fields, then `level` (where its callsite is known: the
/// object names it).
pub(super) fn span_event(o: &Object, level: Level, ts: u64) -> span::Event {
    let name = match o.fields.as_ref().and_then(|f| f.get("message")) {
        Some(serde_json::Value::String(m)) => m.clone(),
        Some(_) => String::new(),
        None => o.name.clone().unwrap_or_default(),
    };
    let mut attrs = Attributes::new(0);
    for (k, v) in typed_fields(o).filter(|(k, _)| *k != "message") {
        attrs.field(k, v);
    }
    if o.name.is_some() {
        attrs.add("level", string(level.as_str()));
    }
    let (attributes, dropped) = attrs.into_parts();
    let recorder = u32::try_from(o.dropped.unwrap_or(0)).unwrap_or(u32::MAX);
    span::Event { time_unix_nano: ts, name, attributes, dropped_attributes_count: dropped.saturating_add(recorder) }
}

/// A span's `new` (or `open`) object: the span it starts, its attributes as a trace's
/// conversion gives them (fields, `code.namespace`, `code.filepath`, `code.lineno`,
/// `thread.id`, `thread.name`).
pub(super) fn start(o: &Object, id: u64, parent: Option<u64>) -> Start {
    let mut attrs = Attributes::new(0);
    for (k, v) in typed_fields(o) {
        attrs.field(k, v);
    }
    let (mut attributes, _) = attrs.into_parts();
    if let Some(t) = &o.target {
        span_attr(&mut attributes, "code.namespace", string(t.clone()));
    }
    if let Some(f) = &o.file {
        span_attr(&mut attributes, "code.filepath", string(f.clone()));
    }
    if let Some(l) = o.line {
        span_attr(&mut attributes, "code.lineno", V::IntValue(i64::from(l)));
    }
    if let Some(tid) = o.tid {
        span_attr(&mut attributes, "thread.id", V::IntValue(i64::from(tid)));
        if let Some(name) = &o.thread {
            span_attr(&mut attributes, "thread.name", string(name.clone()));
        }
    }
    Start { id, parent, name: o.name.clone().unwrap_or_else(|| "?".into()), attributes }
}

/// An event's log record (outside any span, or one its span could not hold).
pub(super) fn event_log(o: &Object, level: Level, thread: Thread<'_>) -> Result<LogRecord, Undecodable> {
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
        dropped: o.dropped.unwrap_or(0),
    };
    Ok(model::event_record(&e, typed_fields(o)))
}

/// A record as bytes; `why` an events source's payload was not read.
pub(super) fn raw(e: &Entry<'_>, why: Option<String>) -> LogRecord {
    let mut attrs = Attributes::new(0);
    attrs.add("ringtrace.seq", int(e.seq));
    attrs.add("ringtrace.len", int(e.payload.len() as u64));
    if let Some(why) = why {
        attrs.add("ringtrace.undecodable", string(why));
    }
    model::log_record(0, None, Some(V::BytesValue(e.payload.to_vec())), attrs)
}
