//! The OTLP conversion: spans, their trees and ids, attributes by type, span events,
//! log records, links, and what a flight recorder no longer holds, marked.

use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use ringtrace_export::otlp::{convert, Options};
use ringtrace_tracing::decode::Trace;
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

fn spans(c: &ringtrace_export::otlp::Converted) -> &[Span] {
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
    // Under another service or host name: other span and trace ids, each still unique.
    for other in
        [Options { service: Some("svc2".into()), ..opts.clone() }, Options { host: Some("h2".into()), ..opts.clone() }]
    {
        let o = convert(&trace, &other);
        for (a, b) in spans(&o).iter().zip(spans(&c)) {
            assert_ne!((&a.span_id, &a.trace_id), (&b.span_id, &b.trace_id));
            assert_eq!(a.parent_span_id.is_empty(), b.parent_span_id.is_empty());
        }
    }
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
    let w = ringtrace_export::otlp::write_json_lines(&trace, &Options::default(), &mut out).unwrap();
    assert_eq!((w.spans, w.span_events, w.log_records), (1, 1, 1));
    let lines: Vec<serde_json::Value> =
        std::str::from_utf8(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"], "work");
    assert_eq!(lines[1]["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["severityText"], "INFO");
}

/// A dump's chunks `(offset, kind, payload length)`, after its 16-byte header.
fn chunks(bytes: &[u8]) -> Vec<(usize, u8, usize)> {
    let mut out = Vec::new();
    let mut at = 16;
    while at + 12 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        out.push((at, bytes[at], len));
        at += 12 + len;
    }
    assert_eq!(at, bytes.len());
    out
}

/// A dump of `f` with the chunks `drop` picks (by kind and payload) taken out.
fn dump_without(f: impl FnOnce(), drop: impl Fn(u8, &[u8]) -> bool) -> Trace {
    let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f);
    let mut dump = Vec::new();
    recorder.dump_to(&mut dump).unwrap();
    let mut kept = dump[..16].to_vec();
    let mut dropped = 0;
    for (at, kind, len) in chunks(&dump) {
        if drop(kind, &dump[at + 12..at + 12 + len]) {
            dropped += 1;
        } else {
            kept.extend_from_slice(&dump[at..at + 12 + len]);
        }
    }
    assert!(dropped > 0, "no chunk taken out");
    Trace::from_bytes(&kept, "dump".as_ref()).unwrap()
}

/// Chunk kinds and the callsite flag of a span (`file.rs`, `catalog.rs`).
const PROCESS: u8 = 1;
const CALLSITE: u8 = 2;
const IS_SPAN: u8 = 1;

/// A span left open ends no earlier than its children, though its own last record
/// (its enter) is before theirs.
#[test]
fn an_unclosed_span_ends_after_its_children() {
    let trace = record(64 << 10, || {
        let p = tracing::info_span!("parent");
        let e = p.enter();
        {
            let c = tracing::info_span!("child");
            let _c = c.enter();
            std::thread::sleep(std::time::Duration::from_millis(2));
            tracing::info!("work");
        }
        std::mem::forget(e);
        std::mem::forget(p);
    });
    let c = convert(&trace, &Options::default());
    let s = spans(&c);
    let by = |n: &str| s.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("span {n}"));
    let (parent, child) = (by("parent"), by("child"));
    assert_eq!(attr(&parent.attributes, "ringtrace.end_unknown"), Some(&V::BoolValue(true)));
    assert_eq!(attr(&child.attributes, "ringtrace.end_unknown"), None, "the child closed");
    assert!(parent.start_time_unix_nano <= child.start_time_unix_nano);
    assert!(
        parent.end_time_unix_nano >= child.end_time_unix_nano,
        "{} < {}",
        parent.end_time_unix_nano,
        child.end_time_unix_nano
    );
}

/// NaN and the infinities as strings (OTLP/JSON's doubles are JSON numbers, which
/// have none); finite doubles as doubles. The JSON reads back the same.
#[test]
fn non_finite_doubles_are_strings() {
    let trace = record(64 << 10, || {
        let _s = tracing::info_span!("s", nan = f64::NAN, inf = f64::INFINITY, ninf = f64::NEG_INFINITY, one = 1.5)
            .entered();
        tracing::info!(x = f64::NAN, "outside");
    });
    let c = convert(&trace, &Options::default());
    let s = &spans(&c)[0];
    assert_eq!(attr(&s.attributes, "nan"), Some(&V::StringValue("NaN".into())));
    assert_eq!(attr(&s.attributes, "inf"), Some(&V::StringValue("Infinity".into())));
    assert_eq!(attr(&s.attributes, "ninf"), Some(&V::StringValue("-Infinity".into())));
    assert_eq!(attr(&s.attributes, "one"), Some(&V::DoubleValue(1.5)));
    let json = serde_json::to_string(&c.traces).unwrap();
    let back: opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest =
        serde_json::from_str(&json).unwrap();
    assert_eq!(back, c.traces, "{json}");
}

/// Without the process chunk: OpenTelemetry's default service name, no process
/// attributes.
#[test]
fn without_the_process_chunk_the_service_is_unknown() {
    let trace = dump_without(
        || {
            let _s = tracing::info_span!("work").entered();
        },
        |kind, _| kind == PROCESS,
    );
    assert!(trace.process.is_none());
    let c = convert(&trace, &Options::default());
    assert_eq!(c.spans, 1);
    let res = c.traces.resource_spans[0].resource.as_ref().unwrap();
    assert_eq!(attr(&res.attributes, "service.name"), Some(&V::StringValue("unknown_service".into())));
    assert_eq!(attr(&res.attributes, "process.pid"), None);
    assert_eq!(attr(&res.attributes, "process.executable.name"), None);
    assert!(c.clock_unknown, "the times are monotonic ones");
    let named = convert(&trace, &Options { service: Some("svc".into()), host: None });
    let res = named.traces.resource_spans[0].resource.as_ref().unwrap();
    assert_eq!(attr(&res.attributes, "service.name"), Some(&V::StringValue("svc".into())));
}

/// Each key once in every attribute list: a user field keeps its name and value; an
/// attribute the mapping adds under a key a field has is left out.
#[test]
fn attribute_keys_are_unique_and_user_fields_keep_theirs() {
    let trace = record(64 << 10, || {
        tracing::info!(thread.id = 5u64, "outside");
        let s = tracing::info_span!("s", level = "mine", code.lineno = "here", n = 1u64, later = tracing::field::Empty);
        s.record("n", 2u64);
        s.record("later", 3u64);
        let _e = s.enter();
        tracing::info!(level = "custom", "inside");
    });
    let c = convert(&trace, &Options::default());
    let unique = |attrs: &[KeyValue]| {
        let mut keys: Vec<&str> = attrs.iter().map(|a| a.key.as_str()).collect();
        keys.sort_unstable();
        let n = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), n, "{attrs:?}");
    };
    let s = &spans(&c)[0];
    unique(&s.attributes);
    assert_eq!(attr(&s.attributes, "level"), Some(&V::StringValue("mine".into())));
    assert_eq!(attr(&s.attributes, "code.lineno"), Some(&V::StringValue("here".into())));
    assert_eq!(attr(&s.attributes, "n"), Some(&V::IntValue(2)));
    assert_eq!(attr(&s.attributes, "later"), Some(&V::IntValue(3)));
    assert!(matches!(attr(&s.attributes, "thread.id"), Some(V::IntValue(_))), "added where no field has it");
    let ev = &s.events[0];
    unique(&ev.attributes);
    assert_eq!(attr(&ev.attributes, "level"), Some(&V::StringValue("custom".into())));
    assert_eq!(ev.dropped_attributes_count, 1, "the mapping's level, left out");
    let log = &c.logs.resource_logs[0].scope_logs[0].log_records[0];
    unique(&log.attributes);
    assert_eq!(attr(&log.attributes, "thread.id"), Some(&V::IntValue(5)));
    assert!(matches!(attr(&log.attributes, "thread.name"), Some(V::StringValue(_))));
    assert_eq!(log.dropped_attributes_count, 1, "the mapping's thread.id, left out");
}

/// An event whose callsite the trace lacks has no known level: severity number 0
/// (`SEVERITY_NUMBER_UNSPECIFIED`) as a log record, no `level` as a span event.
#[test]
fn an_event_of_unknown_level_is_unspecified() {
    let trace = dump_without(
        || {
            tracing::warn!("outside");
            let _s = tracing::info_span!("work").entered();
            tracing::error!("inside");
        },
        |kind, payload| kind == CALLSITE && payload.get(4).is_some_and(|f| f & IS_SPAN == 0),
    );
    let c = convert(&trace, &Options::default());
    let log = &c.logs.resource_logs[0].scope_logs[0].log_records[0];
    assert_eq!((log.severity_number, log.severity_text.as_str()), (0, ""));
    let s = &spans(&c)[0];
    assert_eq!(s.name, "work");
    assert_eq!(s.events.len(), 1);
    assert_eq!(attr(&s.events[0].attributes, "level"), None);
}

/// What every export must hold to: span ids unique, every parent among the spans and
/// of the same trace, no cycle, a parent starting no later than its children, and as
/// many spans marked `ringtrace.start_unknown` as counted.
fn check_tree(c: &ringtrace_export::otlp::Converted) {
    let s = spans(c);
    let mut ids: Vec<&[u8]> = s.iter().map(|x| x.span_id.as_slice()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), s.len(), "span ids unique");
    let index: std::collections::HashMap<&[u8], usize> =
        s.iter().enumerate().map(|(i, x)| (x.span_id.as_slice(), i)).collect();
    for (i, x) in s.iter().enumerate() {
        let (mut at, mut steps) = (i, 0);
        while !s[at].parent_span_id.is_empty() {
            let p = *index
                .get(s[at].parent_span_id.as_slice())
                .unwrap_or_else(|| panic!("{}'s parent is not exported", s[at].name));
            assert_eq!(s[p].trace_id, s[at].trace_id, "a parent's trace is its child's");
            assert!(s[p].start_time_unix_nano <= s[at].start_time_unix_nano);
            at = p;
            steps += 1;
            assert!(steps <= s.len(), "a cycle through {}", x.name);
        }
    }
    let marked = s.iter().filter(|x| attr(&x.attributes, "ringtrace.start_unknown").is_some()).count();
    assert_eq!(marked as u64, c.start_unknown);
}

/// A parent whose `new span` record a small flight recorder overwrote keeps its
/// children and grandchildren; with a ring that holds it all, the same tree.
#[test]
fn an_overwritten_parent_keeps_its_tree() {
    for ring in [4096, 256 << 10] {
        let trace = record(ring, || {
            let p = tracing::info_span!("p");
            let _p = p.enter();
            for i in 0..300u64 {
                tracing::info!(i, "tick");
            }
            for k in 0..3u64 {
                let c = tracing::info_span!("c", k);
                let _c = c.enter();
                tracing::info_span!("g", k).in_scope(|| tracing::info!("leaf"));
            }
        });
        let c = convert(&trace, &Options::default());
        check_tree(&c);
        let s = spans(&c);
        let p = s.iter().find(|x| x.name == "p").unwrap();
        let overwritten = ring == 4096;
        assert_eq!(attr(&p.attributes, "ringtrace.start_unknown").is_some(), overwritten, "ring {ring}");
        check_children(s, p, 3);
        assert_eq!(s.iter().filter(|x| x.name == "c" || x.name == "g").count(), 6);
    }
}

/// Spans `c` (field `k` from 0 to `n - 1`) children of `p`, each with a child `g` of
/// the same `k`, all of `p`'s trace.
fn check_children(s: &[Span], p: &Span, n: u64) {
    let mut by_k: std::collections::HashMap<(&str, i64), &Span> = std::collections::HashMap::new();
    for x in s {
        if let Some(V::IntValue(k)) = attr(&x.attributes, "k") {
            assert!(by_k.insert((x.name.as_str(), *k), x).is_none(), "one {} of k {k}", x.name);
        }
    }
    for k in 0..n as i64 {
        let (c, g) = (by_k[&("c", k)], by_k[&("g", k)]);
        assert_eq!(c.parent_span_id, p.span_id, "c {k}");
        assert_eq!(g.parent_span_id, c.span_id, "g {k}");
        assert_eq!((c.trace_id.as_slice(), g.trace_id.as_slice()), (p.trace_id.as_slice(), p.trace_id.as_slice()));
        assert_eq!(g.events.len(), 1);
    }
}

/// A span id reused: the registry's ids carry a slot's generation, which wraps after
/// a few thousand reuses of the slot; a thread makes spans (each with a child) in one
/// slot until one gets the first one's id. Their parent is of another thread, whose
/// ring then overwrites its `new span` record.
#[test]
fn a_reused_span_id_starts_a_new_span_with_its_own_children() {
    let mut rounds = 0u64;
    let trace = record(4 << 20, || {
        let p = tracing::info_span!("p");
        let _p = p.enter();
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        std::thread::scope(|scope| {
            scope.spawn(|| {
                tracing::dispatcher::with_default(&dispatch, || {
                    let mut first = None;
                    for k in 0..100_000u64 {
                        let c = tracing::info_span!(parent: &p, "c", k);
                        let _c = c.enter();
                        tracing::info_span!("g", k).in_scope(|| tracing::info!("leaf"));
                        rounds += 1;
                        if *first.get_or_insert(c.id()) == c.id() && k > 0 {
                            break;
                        }
                    }
                })
            });
        });
        let pad = "x".repeat(1000);
        for _ in 0..(8 << 20) / 1000 {
            tracing::info!(pad = pad.as_str(), "tick");
        }
    });
    assert!(rounds < 100_000, "no span id reused");
    // The trace holds both `new span` records of the id.
    let mut c_ids = Vec::new();
    for e in trace.entries() {
        if let ringtrace_tracing::decode::EntryKind::NewSpan { span, callsite: Some(cs), .. } = e.kind {
            if cs.name == "c" {
                c_ids.push(span);
            }
        }
    }
    assert_eq!(c_ids.len() as u64, rounds);
    assert_eq!(c_ids.first(), c_ids.last());
    let c = convert(&trace, &Options::default());
    check_tree(&c);
    let s = spans(&c);
    let p = s.iter().find(|x| x.name == "p").unwrap();
    assert_eq!(attr(&p.attributes, "ringtrace.start_unknown"), Some(&V::BoolValue(true)));
    check_children(s, p, rounds);
}

/// Records chunks that change on disk after the trace was opened are skipped and
/// counted.
#[test]
fn chunks_changed_on_disk_are_counted_unread() {
    let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _s = tracing::info_span!("work").entered();
        tracing::info!("step");
    });
    let path = std::env::temp_dir().join(format!("rtt-otlp-unread-{}.rtt", std::process::id()));
    recorder.dump(&path).unwrap();
    let trace = Trace::open(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let records: Vec<_> = chunks(&bytes).into_iter().filter(|c| c.1 == RECORDS && c.2 > 0).collect();
    assert!(!records.is_empty());
    let mut changed = bytes.clone();
    for &(at, _, len) in &records {
        changed[at + 12 + len / 2] ^= 0x20;
    }
    std::fs::write(&path, &changed).unwrap();
    let c = convert(&trace, &Options::default());
    std::fs::remove_file(&path).unwrap();
    assert_eq!(c.unread_chunks, records.len() as u64);
    assert_eq!(c.spans, 0);
}

const RECORDS: u8 = 4;

/// More spans than a batch holds: several span lines, every one under the resource,
/// then the log line; every line parses and the spans add up.
#[test]
fn json_lines_are_batches() {
    let trace = record(1 << 20, || {
        tracing::info!("outside");
        for i in 0..2100u64 {
            let _s = tracing::info_span!("work", i).entered();
        }
    });
    let mut out = Vec::new();
    let w = ringtrace_export::otlp::write_json_lines(&trace, &Options::default(), &mut out).unwrap();
    assert_eq!((w.spans, w.log_records, w.lines), (2100, 1, 3));
    let lines: Vec<serde_json::Value> =
        std::str::from_utf8(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    let mut names = Vec::new();
    for l in &lines[..2] {
        let rs = &l["resourceSpans"][0];
        assert!(rs["resource"]["attributes"].as_array().unwrap().iter().any(|a| a["key"] == "service.name"));
        assert_eq!(rs["scopeSpans"][0]["scope"]["name"], "ringtrace-tracing");
        for s in rs["scopeSpans"][0]["spans"].as_array().unwrap() {
            names.push(s["attributes"][0]["value"]["intValue"].as_str().unwrap().parse::<u64>().unwrap());
        }
    }
    assert_eq!(names, (0..2100).collect::<Vec<_>>(), "every span once, in order");
    assert_eq!(lines[2]["resourceLogs"][0]["scopeLogs"][0]["logRecords"].as_array().map(Vec::len), Some(1));
}

#[path = "otlp/batches.rs"]
mod batches;
#[path = "otlp/records.rs"]
mod records;
