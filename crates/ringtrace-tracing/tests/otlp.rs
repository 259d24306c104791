//! The OTLP conversion: spans, their trees and ids, attributes by type, span events,
//! log records, links, and what a flight recorder no longer holds, marked.

use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::export::otlp::{convert, Options};
use tracing_subscriber::layer::SubscriberExt;

fn record(per_thread: u64, f: impl FnOnce()) -> Trace {
    let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(per_thread).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f);
    let mut dump = Vec::new();
    recorder.dump_to(&mut dump).unwrap();
    Trace::from_bytes(&dump, "dump".as_ref()).unwrap()
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a V> {
    attrs.iter().find(|a| a.key == key).and_then(|a| a.value.as_ref()).and_then(|v| v.value.as_ref())
}

fn spans(c: &ringtrace_tracing::export::otlp::Converted) -> &[Span] {
    &c.traces.resource_spans[0].scope_spans[0].spans
}

#[test]
fn spans_nest_into_traces_with_typed_attributes_events_and_logs() {
    let trace = record(256 << 10, || {
        tracing::info!(answer = 42u64, "outside any span");
        let a = tracing::info_span!("request", id = 7u64, user = "ann", ratio = 0.5, admin = true, delta = -3i64);
        let _a = a.enter();
        let b = tracing::debug_span!("query", table = "users");
        {
            let _b = b.enter();
            tracing::warn!(rows = 3u64, big = u64::MAX, "slow query");
        }
        b.follows_from(&a);
        drop(b);
        tracing::info!("done");
        drop(_a);
        drop(a);
        let other = tracing::info_span!("second");
        let o = other.enter();
        tracing::error!("in another trace");
        // Never exited nor closed in the dump.
        std::mem::forget(o);
        std::mem::forget(other);
    });
    let opts = Options { service: Some("svc".into()), host: Some("h1".into()) };
    let c = convert(&trace, &opts);
    assert_eq!((c.spans, c.span_events, c.log_records), (3, 3, 1), "{c:?}");
    assert_eq!((c.start_unknown, c.end_unknown), (0, 1), "the second span is not closed in the dump");
    let s = spans(&c);
    let by = |n: &str| s.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("span {n}"));
    let (req, query, second) = (by("request"), by("query"), by("second"));
    assert_eq!(query.parent_span_id, req.span_id);
    assert!(req.parent_span_id.is_empty());
    assert_eq!(query.trace_id, req.trace_id);
    assert_ne!(second.trace_id, req.trace_id);
    assert!(req.start_time_unix_nano < query.start_time_unix_nano);
    assert!(query.end_time_unix_nano <= req.end_time_unix_nano && req.end_time_unix_nano > 0);
    assert_eq!(req.trace_id.len(), 16);
    assert_eq!(req.span_id.len(), 8);
    assert_eq!(attr(&req.attributes, "id"), Some(&V::IntValue(7)));
    assert_eq!(attr(&req.attributes, "user"), Some(&V::StringValue("ann".into())));
    assert_eq!(attr(&req.attributes, "ratio"), Some(&V::DoubleValue(0.5)));
    assert_eq!(attr(&req.attributes, "admin"), Some(&V::BoolValue(true)));
    assert_eq!(attr(&req.attributes, "delta"), Some(&V::IntValue(-3)));
    assert!(attr(&req.attributes, "thread.id").is_some());
    let slow = &query.events[0];
    assert_eq!(slow.name, "slow query");
    assert_eq!(attr(&slow.attributes, "rows"), Some(&V::IntValue(3)));
    assert_eq!(attr(&slow.attributes, "big"), Some(&V::StringValue(u64::MAX.to_string())));
    assert_eq!(attr(&slow.attributes, "level"), Some(&V::StringValue("WARN".into())));
    assert_eq!(req.events[0].name, "done");
    assert_eq!(query.links.len(), 1);
    assert_eq!(
        (query.links[0].trace_id.clone(), query.links[0].span_id.clone()),
        (req.trace_id.clone(), req.span_id.clone())
    );
    assert_eq!(attr(&second.attributes, "ringtrace.end_unknown"), Some(&V::BoolValue(true)));

    let log = &c.logs.resource_logs[0].scope_logs[0].log_records[0];
    assert_eq!((log.severity_number, log.severity_text.as_str()), (9, "INFO"));
    assert_eq!(log.body.as_ref().and_then(|b| b.value.as_ref()), Some(&V::StringValue("outside any span".into())));
    assert_eq!(attr(&log.attributes, "answer"), Some(&V::IntValue(42)));
    let res = c.traces.resource_spans[0].resource.as_ref().unwrap();
    assert_eq!(attr(&res.attributes, "service.name"), Some(&V::StringValue("svc".into())));
    assert_eq!(attr(&res.attributes, "host.name"), Some(&V::StringValue("h1".into())));

    // The same trace gives the same ids; the messages round-trip as protobuf and JSON.
    let again = convert(&trace, &opts);
    assert_eq!(again.traces, c.traces);
    let bytes = c.traces.encode_to_vec();
    let back = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest::decode(&bytes[..]).unwrap();
    assert_eq!(back, c.traces);
    let json = serde_json::to_string(&c.traces).unwrap();
    assert!(json.contains(&format!("\"traceId\":\"{}\"", hex(&req.trace_id))), "{json}");
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn a_span_whose_start_was_overwritten_is_kept_and_marked() {
    // A 4 KiB ring: the span's `new span` record is overwritten by the events after it.
    let trace = record(4096, || {
        let s = tracing::info_span!("long", n = 1u64);
        let _e = s.enter();
        for i in 0..500u64 {
            tracing::info!(i, "tick");
        }
    });
    let c = convert(&trace, &Options::default());
    let s = spans(&c);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0].name, "long", "named from its events' context");
    assert_eq!(attr(&s[0].attributes, "ringtrace.start_unknown"), Some(&V::BoolValue(true)));
    assert_eq!(c.start_unknown, 1);
    assert!(c.span_events > 0 && c.span_events < 500);
    assert_eq!(s[0].events.last().map(|e| attr(&e.attributes, "i")), Some(Some(&V::IntValue(499))));
}

#[test]
fn json_lines_hold_the_traces_then_the_logs() {
    let trace = record(64 << 10, || {
        tracing::info!("outside");
        let _s = tracing::info_span!("work").entered();
        tracing::info!("inside");
    });
    let mut out = Vec::new();
    let w = ringtrace_tracing::export::otlp::write_json_lines(&trace, &Options::default(), &mut out).unwrap();
    assert_eq!((w.spans, w.span_events, w.log_records), (1, 1, 1));
    let lines: Vec<serde_json::Value> =
        std::str::from_utf8(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"], "work");
    assert_eq!(lines[1]["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["severityText"], "INFO");
}
