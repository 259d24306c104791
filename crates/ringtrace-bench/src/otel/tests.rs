use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::sink::*;
use super::*;

fn request(body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// A sink served by a thread of the test: its endpoint and its span count.
fn sink_thread() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let spans = Arc::new(AtomicU64::new(0));
    let s2 = spans.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let s3 = s2.clone();
            std::thread::spawn(move || serve(conn.unwrap(), &s3));
        }
    });
    (format!("http://127.0.0.1:{port}/v1/traces"), spans)
}

#[test]
fn the_sink_counts_spans_and_refuses_what_is_not_well_formed() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span};
    use prost::Message;
    let kv = |k: &str, v: any_value::Value| KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    };
    let span = Span {
        trace_id: vec![1; 16],
        span_id: vec![2; 8],
        name: "request".into(),
        start_time_unix_nano: 1,
        end_time_unix_nano: 2,
        attributes: vec![kv("a", any_value::Value::IntValue(7)), kv("b", any_value::Value::DoubleValue(2.5))],
        events: vec![span::Event {
            name: "event".into(),
            attributes: vec![kv("w", any_value::Value::StringValue("msg".into()))],
            ..Default::default()
        }],
        ..Default::default()
    };
    let scope = |n: usize| ScopeSpans {
        scope: Some(InstrumentationScope { name: "s".into(), ..Default::default() }),
        spans: vec![span.clone(); n],
        ..Default::default()
    };
    let resource = Resource {
        attributes: vec![kv("service.name", any_value::Value::StringValue("x".into()))],
        ..Default::default()
    };
    let req = ExportTraceServiceRequest {
        resource_spans: vec![
            ResourceSpans {
                resource: Some(resource.clone()),
                scope_spans: vec![scope(1), scope(0)],
                ..Default::default()
            },
            ResourceSpans { resource: Some(resource), scope_spans: vec![scope(1)], ..Default::default() },
        ],
    };
    let body = req.encode_to_vec();
    assert_eq!(count_spans(&body), Some(2));
    assert_eq!(count_spans(&body[..body.len() - 1]), None, "cut short");
    let (endpoint, spans) = sink_thread();
    let addr = endpoint.trim_start_matches("http://").trim_end_matches("/v1/traces").to_owned();
    let mut c = TcpStream::connect(&addr).unwrap();
    let mut reader = BufReader::new(c.try_clone().unwrap());
    let mut status = |c: &mut TcpStream, body: &[u8]| {
        c.write_all(&request(body)).unwrap();
        let mut l = String::new();
        reader.read_line(&mut l).unwrap();
        let code = l.split(' ').nth(1).unwrap().to_owned();
        // The headers, through the empty line.
        while l.trim_end() != "" {
            l.clear();
            reader.read_line(&mut l).unwrap();
        }
        code
    };
    assert_eq!(status(&mut c, &req.encode_to_vec()), "200");
    assert_eq!(status(&mut c, &req.encode_to_vec()), "200", "a second request on the same connection");
    assert_eq!(status(&mut c, b"\xff\xff\xff"), "400");
    assert_eq!(spans.load(Relaxed), 4);
}

#[test]
fn every_tracing_row_emits_its_spans_and_the_exporter_exports_them() {
    let (endpoint, sink_spans) = sink_thread();
    for (imp, variant) in IMPLS.into_iter().filter(|(imp, _)| *imp != "fastrace") {
        let m = measure(Under::new(imp, variant, &endpoint).unwrap(), 1, 1000, false);
        assert_eq!(m.spans, 1000);
        assert!(m.writer_cpu_ns > 0 && m.wall > Duration::ZERO, "{imp} {variant}");
        let r = m.row(imp, variant, 1);
        assert!(r.ns_per_rec > 0.0 && r.cpu_ns_per_rec.unwrap() > 0.0);
        if imp == "tracing-opentelemetry" {
            // 1,000 spans fit in the processor's queue of 2,048: none dropped.
            assert_eq!((m.exported, m.drops), (1000, 0));
            // The warmup's 100 spans and the window's.
            assert_eq!(sink_spans.load(Relaxed), 1100);
        } else {
            assert_eq!(m.drops, 0, "{imp} {variant}");
        }
    }
}

/// A fastrace row run in this process: `writers` threads of `spans` spans each after a
/// warmup of a tenth as many; every span emitted, warmup included, reported (or
/// exported) with its event, none dropped.
fn fastrace_row(variant: &str, endpoint: &str, writers: usize, spans: u64) -> Measurement {
    let m = measure(Under::new("fastrace", variant, endpoint).unwrap(), writers, spans, false);
    let (emitted, warm) = (spans * writers as u64, spans / 10 * writers as u64);
    assert_eq!(m.spans, emitted);
    assert!(m.writer_cpu_ns > 0 && m.wall > Duration::ZERO, "{variant}");
    assert_eq!(m.drops, 0, "{variant}: every span reported");
    // The warmup's spans were all handed to the reporter before the window opened (100
    // root spans a thread are 300 commands, which fit its queue of 10,240).
    assert_eq!(m.exported, emitted, "{variant}: the window's spans");
    if variant != "otlp-http/batch" {
        assert_eq!(m.events, Some(emitted + warm), "{variant}: each span's event");
    }
    let r = m.row("fastrace", variant, writers);
    assert!(r.ns_per_rec > 0.0 && r.cpu_ns_per_rec.unwrap() > 0.0);
    m
}

#[test]
fn fastrace_root_spans_are_all_reported() {
    fastrace_row("root", "", 2, 1000);
}

#[test]
fn fastrace_spans_beyond_a_full_queue_are_reported_before_the_writer_ends() {
    // 3 commands a root span: 20,000 of them overflow a thread's queue of 10,240
    // commands unless the collector keeps up, and what the writer holds beyond it at its
    // exit would be lost but for the catch-up (the warmup's 2,000 a writer fit).
    fastrace_row("root", "", 2, 20_000);
}

#[test]
fn fastrace_local_spans_are_all_reported_across_their_roots() {
    // 2.5 roots' worth of local spans a writer: the window closes a partial root.
    fastrace_row("local", "", 2, 2 * fastrace_peer::LOCAL_PER_ROOT + fastrace_peer::LOCAL_PER_ROOT / 2);
}

#[test]
fn fastrace_otlp_row_exports_every_span_to_the_sink() {
    let (endpoint, sink_spans) = sink_thread();
    fastrace_row("otlp-http/batch", &endpoint, 2, 1000);
    // The warmup's 2 x 100 spans and the window's 2 x 1,000, as the exporter reported.
    assert_eq!(sink_spans.load(Relaxed), 2200);
}
