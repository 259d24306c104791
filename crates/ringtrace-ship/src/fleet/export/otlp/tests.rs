//! The OTLP export of fleets built without Kafka: resources, times, severities,
//! bodies and attributes of each kind of record, gaps, payloads that do not read, the
//! OTLP/JSON lines read back with the same types.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs};
use opentelemetry_proto::tonic::trace::v1::Span;
use proptest::prelude::*;

use super::super::{otlp, otlp_json};
use super::{OtlpCounts, OtlpWriter, LINE_RECORDS};
use crate::fleet::{Entry, Fleet, Item, Timeline};
use crate::frame::{BatchWriter, Content, TimeSource};

/// What a source holds, in sequence order.
#[derive(Clone, Debug)]
enum Rec {
    /// A record: its time and payload.
    Payload(u64, Vec<u8>),
    /// A too-large marker: its time and the record's length.
    TooLarge(u64, u64),
    /// Sequence numbers never shipped.
    Skip(u64),
}

/// A source to make: host, name, whether its batches say events, its records.
type Src = (&'static str, &'static str, bool, Vec<Rec>);

/// The fleet of `srcs`, each run of records between skips one batch.
fn fleet_of(srcs: &[Src]) -> Fleet {
    let mut t = Timeline::new();
    for (host, source, events, recs) in srcs {
        let content = if *events { Content::Events } else { Content::Records };
        let (mut seq, mut w) = (0u64, None::<BatchWriter>);
        let mut flush = |w: &mut Option<BatchWriter>| {
            if let Some(w) = w.take() {
                t.push(&w.finish()).unwrap();
            }
        };
        for r in recs {
            if let Rec::Skip(n) = r {
                flush(&mut w);
                seq += n;
                continue;
            }
            let b = w.get_or_insert_with(|| {
                BatchWriter::new(host, source, seq, TimeSource::Drained, 0).unwrap().with_content(content)
            });
            match r {
                Rec::Payload(time, p) => b.push(*time, p).unwrap(),
                Rec::TooLarge(time, len) => b.push_too_large(*time, *len).unwrap(),
                Rec::Skip(_) => {}
            }
            seq += 1;
        }
        flush(&mut w);
    }
    t.finish()
}

fn attr<'r>(r: &'r LogRecord, key: &str) -> Option<&'r V> {
    of(&r.attributes, key)
}

fn of<'r>(attrs: &'r [KeyValue], key: &str) -> Option<&'r V> {
    attrs.iter().find(|a| a.key == key)?.value.as_ref()?.value.as_ref()
}

/// OTLP/JSON lines read back: the spans' requests and the log records'.
fn read_lines(out: &[u8]) -> (Vec<ExportTraceServiceRequest>, Vec<ExportLogsServiceRequest>) {
    let (mut traces, mut logs) = (Vec::new(), Vec::new());
    for line in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        if v.get("resourceSpans").is_some() {
            traces.push(serde_json::from_value(v).unwrap());
        } else {
            logs.push(serde_json::from_value(v).unwrap());
        }
    }
    (traces, logs)
}

/// Lines read back as one request of each (empty where none).
fn one_each(out: &[u8]) -> (ExportTraceServiceRequest, ExportLogsServiceRequest) {
    let (mut t, mut l) = read_lines(out);
    assert!(t.len() <= 1 && l.len() <= 1, "{} and {} lines", t.len(), l.len());
    (t.pop().unwrap_or_default(), l.pop().unwrap_or_default())
}

fn spans(x: &super::Otlp) -> Vec<&Span> {
    x.traces.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).collect()
}

fn body(r: &LogRecord) -> Option<&V> {
    r.body.as_ref()?.value.as_ref()
}

fn s(text: &str) -> V {
    V::StringValue(text.to_owned())
}

fn resource(rl: &ResourceLogs) -> Vec<(String, V)> {
    let attrs = &rl.resource.as_ref().unwrap().attributes;
    attrs.iter().map(|a| (a.key.clone(), a.value.clone().unwrap().value.unwrap())).collect()
}

fn records(rl: &ResourceLogs) -> &[LogRecord] {
    assert_eq!(rl.scope_logs.len(), 1);
    assert_eq!(rl.scope_logs[0].scope.as_ref().unwrap().name, "ringtrace-ship");
    &rl.scope_logs[0].log_records
}

const T: u64 = 1_700_000_000_000_000_000;

/// An event in two spans, with fields of every JSON type, one named as an attribute
/// the export sets.
const EVENT: &str = r#"{"time":"2023-11-14T22:13:20.000000002Z","ts_ns":"124","level":"INFO","thread":"worker-1","tid":4242,"target":"app::http","name":"event src/http.rs:10","spans":[{"name":"conn","id":"1","fields":{"peer":"10.0.0.1"}},{"name":"request","id":"7","fields":null}],"fields":{"message":"served","status":200,"ratio":0.5,"ok":true,"who":"alice","big":18446744073709551615,"neg":-3,"nan":null,"thread.id":"shadow"},"dropped":2}"#;

fn two_hosts() -> Fleet {
    let p = |t: u64, text: &str| Rec::Payload(T + t, text.as_bytes().to_vec());
    fleet_of(&[
        ("web-1", "/run/a.ring", false, vec![p(1, "GET /x\n")]),
        (
            "web-1",
            "/run/app#0",
            true,
            vec![
                p(
                    2,
                    r#"{"time":"x","ts_ns":"120","thread":"worker-1","name":"request","target":"app::http","parent":"1","fields":{"path":"/x"},"span":"new","id":"7","program":"shop"}"#,
                ),
                p(3, EVENT),
                p(
                    4,
                    r#"{"time":"x","ts_ns":"125","level":"ERROR","thread":"main","target":"app","name":"event src/main.rs:3","spans":[],"fields":{"code":7}}"#,
                ),
                p(5, r#"{"time":"x","ts_ns":"126","thread":"worker-1","lost":12}"#),
                p(6, r#"{"undecodable":"damaged record","len":40}"#),
            ],
        ),
        (
            "db-1",
            "/run/b.ring",
            false,
            vec![
                Rec::Payload(T + 7, vec![0, 159, 146, 150]),
                Rec::Skip(2),
                Rec::TooLarge(T + 8, 5_000_000),
                Rec::Payload(T + 9, b"after".to_vec()),
            ],
        ),
        ("db-1", "/run/db#1", true, vec![p(10, r#"{"level":"DEBUG","fields":{"message":"q"}}"#)]),
    ])
}

#[test]
fn two_hosts_of_raw_and_event_sources_with_a_gap() {
    let fleet = two_hosts();
    let x = otlp(&fleet, fleet.timeline());
    let want = OtlpCounts {
        records: 9,
        log_records: 8,
        raw: 3,
        events: 3,
        spans: 1,
        otlp_spans: 2,
        span_events: 1,
        span_events_as_logs: 0,
        start_unknown: 1,
        end_unknown: 2,
        lost: 1,
        host_undecodable: 1,
        undecodable: 0,
        gaps: 1,
        missing: 3,
        too_large: 1,
        hosts: 2,
        sources: 4,
    };
    assert_eq!(x.counts, want);
    // The fleet counts the same sequence numbers lacking: 2 missing, 1 too large.
    assert_eq!((fleet.stats().missing, fleet.stats().too_large), (2, 1));
    // A resource per source, in the fleet's order (by host, then source).
    let rl = &x.logs.resource_logs;
    let names: Vec<Vec<(String, V)>> = rl.iter().map(resource).collect();
    let res = |service: &str, host: &str, source: &str| {
        vec![("service.name".into(), s(service)), ("host.name".into(), s(host)), ("ringtrace.source".into(), s(source))]
    };
    // The program an object names: the service's and the executable's name.
    let mut shop = res("shop", "web-1", "/run/app#0");
    shop.insert(2, ("process.executable.name".into(), s("shop")));
    assert_eq!(
        names,
        [
            res("/run/b.ring", "db-1", "/run/b.ring"),
            res("/run/db#1", "db-1", "/run/db#1"),
            res("/run/a.ring", "web-1", "/run/a.ring"),
            shop,
        ]
    );
    // db-1's ring: a record, the gap note at the next record's time, the record.
    let b = records(&rl[0]);
    assert_eq!(b.iter().map(|r| r.time_unix_nano).collect::<Vec<_>>(), [T + 7, T + 9, T + 9]);
    assert!(b.iter().all(|r| r.observed_time_unix_nano == r.time_unix_nano && r.trace_id.is_empty()));
    assert_eq!(body(&b[0]), Some(&V::BytesValue(vec![0, 159, 146, 150])));
    assert_eq!(
        (attr(&b[0], "ringtrace.seq"), attr(&b[0], "ringtrace.len")),
        (Some(&V::IntValue(0)), Some(&V::IntValue(4)))
    );
    assert_eq!((b[0].severity_number, b[0].severity_text.as_str()), (0, ""));
    assert_eq!((b[1].severity_number, b[1].severity_text.as_str()), (13, "WARN"));
    assert_eq!(body(&b[1]), Some(&s("ringtrace: 3 records missing before this one (1 of them too large to ship)")));
    assert_eq!(
        (attr(&b[1], "ringtrace.lost"), attr(&b[1], "ringtrace.too_large")),
        (Some(&V::IntValue(3)), Some(&V::IntValue(1)))
    );
    assert_eq!(
        (body(&b[2]), attr(&b[2], "ringtrace.seq")),
        (Some(&V::BytesValue(b"after".to_vec())), Some(&V::IntValue(4)))
    );
    let db = records(&rl[1]);
    assert_eq!((db[0].severity_number, body(&db[0])), (5, Some(&s("q"))));
    let a = records(&rl[2]);
    assert_eq!((a.len(), body(&a[0])), (1, Some(&V::BytesValue(b"GET /x\n".to_vec()))));

    // The events source: its span's `new` and the event in it made a span; the rest
    // log records, in sequence order.
    let ev = records(&rl[3]);
    assert_eq!(ev.iter().map(|r| r.time_unix_nano - T).collect::<Vec<_>>(), [4, 5, 6]);
    let sev: Vec<(i32, &str)> = ev.iter().map(|r| (r.severity_number, r.severity_text.as_str())).collect();
    assert_eq!(sev, [(17, "ERROR"), (13, "WARN"), (0, "")]);
    let (error, lost, undecodable) = (&ev[0], &ev[1], &ev[2]);
    // Span 7 (its parent 1's `new` not read: `?`, from its child's start to its end),
    // neither closed: the child goes out first, at the end.
    assert_eq!(x.traces.resource_spans.len(), 1);
    assert_eq!(x.traces.resource_spans[0].resource, rl[3].resource);
    let got = spans(&x);
    let (request, conn) = (got[0], got[1]);
    assert_eq!((request.name.as_str(), conn.name.as_str()), ("request", "?"));
    assert_eq!((request.start_time_unix_nano - T, request.end_time_unix_nano - T), (2, 3));
    assert_eq!((conn.start_time_unix_nano - T, conn.end_time_unix_nano - T), (2, 3));
    assert_eq!(request.parent_span_id, conn.span_id);
    assert_eq!(request.trace_id, conn.trace_id);
    assert!(conn.parent_span_id.is_empty() && conn.trace_id.len() == 16 && conn.span_id.len() == 8);
    for (k, v) in [("path", s("/x")), ("code.namespace", s("app::http")), ("ringtrace.end_unknown", V::BoolValue(true))]
    {
        assert_eq!(of(&request.attributes, k), Some(&v), "{k}");
    }
    assert_eq!(of(&request.attributes, "ringtrace.start_unknown"), None);
    assert_eq!(of(&conn.attributes, "ringtrace.start_unknown"), Some(&V::BoolValue(true)));
    assert_eq!(request.events.len(), 1);
    let info = &request.events[0];
    assert_eq!((info.name.as_str(), info.time_unix_nano - T), ("served", 3));
    let typed = [
        ("status", V::IntValue(200)),
        ("ratio", V::DoubleValue(0.5)),
        ("ok", V::BoolValue(true)),
        ("who", s("alice")),
        ("big", s("18446744073709551615")),
        ("neg", V::IntValue(-3)),
        ("thread.id", s("shadow")),
        ("level", s("INFO")),
    ];
    for (k, v) in typed {
        assert_eq!(of(&info.attributes, k), Some(&v), "{k}");
    }
    // `null` is an empty value; the message is the name, not an attribute; the
    // recorder's 2 dropped values counted.
    let nan = info.attributes.iter().find(|a| a.key == "nan").unwrap();
    assert_eq!(nan.value.as_ref().unwrap().value, None);
    assert!(of(&info.attributes, "message").is_none());
    assert_eq!(info.dropped_attributes_count, 2);
    // No message: the callsite's name; no span context: no span name.
    assert_eq!((body(error), attr(error, "span.name")), (Some(&s("event src/main.rs:3")), None));
    assert_eq!(attr(error, "code"), Some(&V::IntValue(7)));
    assert_eq!(attr(error, "ringtrace.seq"), Some(&V::IntValue(2)));
    assert_eq!(body(lost), Some(&s("ringtrace: 12 events lost here (ring full)")));
    assert_eq!(attr(lost, "ringtrace.lost"), Some(&V::IntValue(12)));
    assert_eq!(body(undecodable), Some(&s("ringtrace: not decoded on its host: damaged record")));
    assert_eq!(attr(undecodable, "ringtrace.len"), Some(&V::IntValue(40)));

    // The same as OTLP/JSON lines, the spans' then the log records', which read back
    // into the same requests.
    let mut out = Vec::new();
    assert_eq!(otlp_json(&fleet, fleet.timeline(), &mut out).unwrap(), want);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), 2);
    assert!(text.contains(r#""key":"nan","value":{}"#), "{text}");
    assert_eq!(one_each(text.as_bytes()), (x.traces.clone(), x.logs.clone()));
}

#[test]
fn malformed_event_payloads_are_exported_as_bytes_and_counted() {
    // serde would read this array as an event's members in order.
    let array = format!(r#"["INFO"{}]"#, ",null".repeat(16));
    let bad: [&[u8]; 13] = [
        br#"{"level":"INFO""#,
        array.as_bytes(),
        br#"["INFO"]"#,
        b"not json",
        b"\xff\xfe",
        b"",
        br#"{"level":"LOUD"}"#,
        br#"{"level":"INFO","lost":3}"#,
        br#"{"level":"INFO","fields":[1]}"#,
        br#"{"level":"INFO","level":"INFO"}"#,
        br#"{"span":"new"}"#,
        br#"{"span":"new","id":"x"}"#,
        br#"{"time":"x"}"#,
    ];
    let recs = bad.iter().enumerate().map(|(i, p)| Rec::Payload(T + i as u64, p.to_vec())).collect();
    let fleet = fleet_of(&[("h", "/rec#0", true, recs)]);
    let x = otlp(&fleet, fleet.timeline());
    let n = bad.len() as u64;
    assert_eq!((x.counts.records, x.counts.log_records, x.counts.undecodable), (n, n, n));
    assert_eq!(x.counts.events + x.counts.spans + x.counts.lost + x.counts.raw, 0);
    let got = records(&x.logs.resource_logs[0]);
    for (i, (r, p)) in got.iter().zip(bad).enumerate() {
        assert_eq!(body(r), Some(&V::BytesValue(p.to_vec())), "{i}");
        assert_eq!(attr(r, "ringtrace.len"), Some(&V::IntValue(p.len() as i64)));
        assert!(matches!(attr(r, "ringtrace.undecodable"), Some(V::StringValue(why)) if !why.is_empty()), "{i}");
        assert_eq!(r.severity_number, 0);
    }
}

#[test]
fn json_lines_hold_at_most_a_line_of_records_and_read_back() {
    // 5000 records with a gap every 1000: 5004 log records, 3 lines.
    let recs: Vec<Rec> = (0..5000u64)
        .flat_map(|i| {
            let skip = (i % 1000 == 999).then_some(Rec::Skip(1));
            std::iter::once(Rec::Payload(T + i, i.to_le_bytes().to_vec())).chain(skip)
        })
        .collect();
    let fleet = fleet_of(&[("h1", "/a", false, recs.clone()), ("h2", "/b", false, recs[..10].to_vec())]);
    let x = otlp(&fleet, fleet.timeline());
    assert_eq!((x.counts.records, x.counts.gaps, x.counts.log_records), (5010, 4, 5014));
    let mut out = Vec::new();
    assert_eq!(otlp_json(&fleet, fleet.timeline(), &mut out).unwrap(), x.counts);
    let lines: Vec<ExportLogsServiceRequest> =
        out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect();
    let sizes: Vec<usize> =
        lines.iter().map(|l| l.resource_logs.iter().map(|r| records(r).len()).sum::<usize>()).collect();
    assert_eq!(sizes, [LINE_RECORDS, LINE_RECORDS, 5014 - 2 * LINE_RECORDS]);
    // Each source's records across the lines are the request's, in order.
    for want in &x.logs.resource_logs {
        let got: Vec<&LogRecord> = (lines.iter().flat_map(|l| &l.resource_logs))
            .filter(|r| r.resource == want.resource)
            .flat_map(records)
            .collect();
        assert_eq!(got, records(want).iter().collect::<Vec<_>>());
    }
    // No entries: no line.
    let mut out = Vec::new();
    assert_eq!(otlp_json(&fleet, std::iter::empty(), &mut out).unwrap(), OtlpCounts::default());
    assert!(out.is_empty());
}

/// Large payloads: a line holds fewer than 2048 records, at most 1 MiB of protobuf
/// (the trace export's bound, through its writer), and the lines read back whole.
#[test]
fn json_lines_are_bounded_in_bytes_too() {
    let recs: Vec<Rec> = (0..1500u64).map(|i| Rec::Payload(T + i, vec![i as u8; 2000])).collect();
    let fleet = fleet_of(&[("h1", "/a", false, recs)]);
    let x = otlp(&fleet, fleet.timeline());
    let mut out = Vec::new();
    assert_eq!(otlp_json(&fleet, fleet.timeline(), &mut out).unwrap(), x.counts);
    let lines: Vec<ExportLogsServiceRequest> =
        out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect();
    assert!(lines.len() >= 3, "{} lines", lines.len());
    for l in &lines {
        assert!(prost::Message::encoded_len(l) <= 1 << 20);
    }
    let got: Vec<&LogRecord> = lines.iter().flat_map(|l| &l.resource_logs).flat_map(records).collect();
    assert_eq!(got, records(&x.logs.resource_logs[0]).iter().collect::<Vec<_>>());
}

/// Payloads of an events source: bytes, text, and objects near the agent's.
fn payload() -> impl Strategy<Value = Vec<u8>> {
    let key = prop_oneof![
        prop::sample::select(vec!["level", "lost", "span", "fields", "id", "spans", "undecodable"])
            .prop_map(String::from),
        "[a-z.]{1,6}",
    ];
    let value = prop_oneof![
        Just("\"INFO\"".to_owned()),
        Just("\"new\"".to_owned()),
        Just("null".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        // Doubles exact in binary, so that the JSON lines read back equal.
        any::<i32>().prop_map(|n| format!("{n}.25")),
        Just("NaN".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("[{\"name\":\"a\",\"id\":\"3\"}]".to_owned()),
        "\"[ -~]{0,8}\"",
        Just("{\"message\":\"m\",\"x\":1e400}".to_owned()),
    ];
    let object = proptest::collection::vec((key, value), 0..5).prop_map(|kv| {
        let members: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", members.join(",")).into_bytes()
    });
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        "\\PC{0,40}".prop_map(String::into_bytes),
        object.clone(),
        (object, any::<prop::sample::Index>()).prop_map(|(o, at)| o[..at.index(o.len() + 1)].to_vec()),
        Just(EVENT.as_bytes().to_vec()),
        Just(b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[".to_vec()),
    ]
}

fn rec() -> impl Strategy<Value = Rec> {
    prop_oneof![
        8 => (0u64..1000, payload()).prop_map(|(t, p)| Rec::Payload(T + t, p)),
        1 => (0u64..1000, any::<u64>()).prop_map(|(t, n)| Rec::TooLarge(T + t, n)),
        1 => (1u64..5).prop_map(Rec::Skip),
    ]
}

/// The gaps `recs` leave before their records: (gaps, numbers missing, too large).
fn model_gaps(recs: &[Rec]) -> (u64, u64, u64) {
    let (mut started, mut missing, mut too_large, mut total) = (false, 0, 0, (0, 0, 0));
    for r in recs {
        match r {
            Rec::Skip(n) if started => missing += n,
            Rec::Skip(_) => {}
            Rec::TooLarge(..) => (started, missing, too_large) = (true, missing + 1, too_large + 1),
            Rec::Payload(..) => {
                if missing > 0 {
                    total = (total.0 + 1, total.1 + missing, total.2 + too_large);
                }
                (started, missing, too_large) = (true, 0, 0);
            }
        }
    }
    total
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever the payloads, every record is one log record (gaps one more each),
    /// counted once by kind, under its source's resource, with unique attribute keys.
    #[test]
    fn every_record_is_accounted_for(
        a in proptest::collection::vec(rec(), 0..24),
        b in proptest::collection::vec(rec(), 0..24),
        c in proptest::collection::vec(rec(), 0..8),
    ) {
        let fleet = fleet_of(&[("h1", "/rec#0", true, a.clone()), ("h1", "/rec#1", true, b.clone()), ("h2", "/r", false, c.clone())]);
        let entries: Vec<Entry<'_>> = fleet.timeline().collect();
        let x = otlp(&fleet, entries.iter().copied());
        let k = x.counts;
        let gaps = [model_gaps(&a), model_gaps(&b), model_gaps(&c)];
        prop_assert_eq!(k.records, entries.len() as u64);
        prop_assert_eq!((k.gaps, k.missing, k.too_large), gaps.iter().fold((0, 0, 0), |s, g| (s.0 + g.0, s.1 + g.1, s.2 + g.2)));
        prop_assert_eq!(k.log_records, k.records + k.gaps - k.spans - k.span_events);
        prop_assert_eq!(k.otlp_spans, spans(&x).len() as u64);
        prop_assert_eq!(k.span_events, spans(&x).iter().map(|s| s.events.len() as u64).sum::<u64>());
        for sp in spans(&x) {
            for attrs in std::iter::once(&sp.attributes).chain(sp.events.iter().map(|e| &e.attributes)) {
                let mut keys: Vec<&str> = attrs.iter().map(|a| a.key.as_str()).collect();
                keys.sort_unstable();
                prop_assert!(keys.windows(2).all(|w| w[0] != w[1]), "{:?}", keys);
            }
        }
        prop_assert_eq!(k.raw + k.events + k.spans + k.lost + k.host_undecodable + k.undecodable, k.records);
        let raw_entries = entries.iter().filter(|e| e.source == "/r").count() as u64;
        prop_assert_eq!(k.raw, raw_entries);
        let mut made = 0;
        for rl in &x.logs.resource_logs {
            let source = resource(rl).into_iter().find(|(k, _)| k == "ringtrace.source").unwrap().1;
            let want: Vec<&Entry<'_>> = entries.iter().filter(|e| s(e.source) == source).collect();
            // Without the gap notes, the records are the source's entries in order,
            // but those that went into spans.
            let recs: Vec<&LogRecord> = records(rl).iter().filter(|r| attr(r, "ringtrace.seq").is_some()).collect();
            let mut at = want.iter();
            for r in &recs {
                let seq = attr(r, "ringtrace.seq");
                let e = at.find(|e| Some(&V::IntValue(e.seq as i64)) == seq);
                prop_assert!(e.is_some_and(|e| e.time_ns == r.time_unix_nano), "{:?} not in order", seq);
            }
            for r in records(rl) {
                let mut keys: Vec<&str> = r.attributes.iter().map(|a| a.key.as_str()).collect();
                keys.sort_unstable();
                prop_assert!(keys.windows(2).all(|w| w[0] != w[1]), "{:?}", keys);
            }
            made += records(rl).len() as u64;
        }
        prop_assert_eq!(made, k.log_records);
        // The JSON lines hold as many, whatever the payloads.
        let mut out = Vec::new();
        prop_assert_eq!(otlp_json(&fleet, entries.iter().copied(), &mut out).unwrap(), k);
        let (traces, back) = one_each(&out);
        prop_assert_eq!(&back, &x.logs);
        prop_assert_eq!(&traces, &x.traces);
        // A stream of the same records, written one by one, holds the same: its
        // resources in the order their sources first came.
        let sources: Vec<(&str, &str)> = fleet.sources().collect();
        let mut out = Vec::new();
        let mut w = OtlpWriter::json(&mut out);
        for e in &entries {
            let lane = sources.iter().position(|&(h, s)| (h, s) == (e.host, e.source)).unwrap();
            let events = fleet.lane_events(lane);
            let item = Item { entry: *e, lane: lane as u32, events, gap: fleet.gap_before(lane, e.seq) };
            w.put(&item).unwrap();
        }
        prop_assert_eq!(w.finish().unwrap(), k);
        let (streamed_traces, mut streamed) = one_each(&out);
        let spans_by_source = |t: &ExportTraceServiceRequest| {
            let mut v: Vec<(String, Vec<Span>)> = (t.resource_spans.iter())
                .map(|r| (format!("{:?}", r.resource), r.scope_spans[0].spans.clone()))
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        prop_assert_eq!(spans_by_source(&streamed_traces), spans_by_source(&x.traces));
        let by_source = |rl: &ResourceLogs| format!("{:?}", resource(rl));
        streamed.resource_logs.sort_by_key(by_source);
        let mut want = back;
        want.resource_logs.sort_by_key(by_source);
        prop_assert_eq!(streamed, want);
    }
}

/// Why an events source's payload is not read, in the words the record carries.
#[test]
fn undecodable_reasons_keep_their_wording() {
    let why = |p: &str| {
        let mut b = super::Builder::new(super::Tracks::new());
        b.slots.push(super::Slot::default());
        let e = Entry { host: "h", source: "s", seq: 0, time_ns: T, payload: p.as_bytes() };
        super::Object::read(e.payload).and_then(|o| b.object(0, &o, &e)).err().map(|e| e.to_string())
    };
    let say = |s: &str| Some(s.to_owned());
    assert_eq!(why(r#"{"span":"new","id":"x"}"#), say(r#"span id "x" is not a decimal u64"#));
    assert_eq!(why(r#"{"level":"INFO","spans":[{"id":"-1"}]}"#), say(r#"span id "-1" is not a decimal u64"#));
    assert_eq!(why(r#"{"span":"new","id":1,"parent":"p"}"#), say(r#"span id "p" is not a decimal u64"#));
    assert_eq!(why(r#"{"span":"new"}"#), say("a span record without its id"));
    assert_eq!(why(r#"{"span":"reopen","id":1}"#), say(r#"unknown span record "reopen""#));
    assert_eq!(why(r#"{"span":"open","id":1}"#), None, "a span made and entered at once");
    assert_eq!(why(r#"{"level":"LOUD"}"#), say(r#"unknown level "LOUD""#));
    assert_eq!(why("[1]"), say("not a JSON object"));
    assert_eq!(why("{}"), say("not one of an event, a span record, a lost count, an undecodable record"));
    assert!(why(r#"{"tid":"x"}"#).unwrap().starts_with("not an object the agent writes: "));
    assert_eq!(why(r#"{"span":"new","id":"7"}"#), None);
}
