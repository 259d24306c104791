//! `export --to otlp://` and `otlp+http://`: a recorded trace delivered to the test
//! command's Jaeger (started by `scripts/jaeger.sh`) and read back through its query
//! API; through a proxy that holds connections (a slow endpoint) or answers 503 (an
//! overloaded one); to a port nobody listens on; to a server that answers with a
//! partial success; and to one that answers with a web page.

#![cfg(feature = "otlp")]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use tracing_subscriber::layer::SubscriberExt;

mod common;

use common::{run, temp};
use ringtrace_fixtures::{http_get, unique_name, Jaeger};

/// Root spans recorded, each with children; spans in all.
const ROOTS: u64 = 500;
const CHILDREN: u64 = 9;
const SPANS: u64 = ROOTS * (CHILDREN + 1);

/// A recorder directory holding `ROOTS` root spans of `CHILDREN` children each (with an
/// event in every child), and `logs` events outside any span.
fn recorded(logs: u64) -> (ringtrace_tracing::Recorder, String) {
    let dir = temp("rec");
    let (layer, recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(16 << 20).directory(&dir).build().unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        for r in 0..ROOTS {
            let root = tracing::info_span!("request", r, route = "/a");
            let _e = root.enter();
            for c in 0..CHILDREN {
                let child = tracing::debug_span!("step", c, ok = true, ratio = 0.5);
                let _e = child.enter();
                tracing::info!(n = c, "working");
            }
        }
        for n in 0..logs {
            tracing::warn!(n, "outside");
        }
    });
    (recorder, dir.to_str().unwrap().to_owned())
}

/// The span ids `export --format otlp-json` writes for `dir`, as Jaeger shows them (hex).
fn exported_ids(dir: &str, service: &str) -> BTreeSet<String> {
    let out = temp("export.jsonl");
    let o = run(&["export", dir, "--format", "otlp-json", "--service", service, "-o", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let mut ids = BTreeSet::new();
    for line in std::fs::read_to_string(out).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for rs in v["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().unwrap() {
                for s in ss["spans"].as_array().unwrap() {
                    ids.insert(s["spanId"].as_str().unwrap().to_owned());
                }
            }
        }
    }
    ids
}

/// The spans (id, operation name) Jaeger holds for `service` (see [`Jaeger::traces`]).
fn jaeger_spans(j: &Jaeger, service: &str, expect: usize) -> Vec<(String, String)> {
    ringtrace_fixtures::jaeger_spans(&j.traces(service, expect))
        .map(|s| (s["spanID"].as_str().unwrap().to_owned(), s["operationName"].as_str().unwrap().to_owned()))
        .collect()
}

/// The span ids Jaeger holds for `service` (see [`jaeger_spans`]).
fn jaeger_ids(j: &Jaeger, service: &str, expect: usize) -> BTreeSet<String> {
    jaeger_spans(j, service, expect).into_iter().map(|(id, _)| id).collect()
}

/// `export DIR --to ENDPOINT --service SERVICE` with `extra` arguments.
fn deliver(dir: &str, endpoint: &str, service: &str, extra: &[&str]) -> common::Output {
    let mut args = vec!["export", dir, "--to", endpoint, "--service", service];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn every_span_is_delivered_to_jaeger_over_grpc_and_over_http() {
    let Some(j) = ringtrace_fixtures::jaeger() else { return };
    let (_rec, dir) = recorded(0);
    for endpoint in [format!("otlp://{}", j.grpc), format!("otlp+http://{}", j.http)] {
        let svc = unique_name("all");
        let o = deliver(&dir, &endpoint, &svc, &[]);
        assert_eq!(o.code, 0, "{endpoint}: {}", o.stderr);
        // 5000 spans in batches of at most 2048.
        assert!(o.stderr.contains(&format!("delivered {SPANS} of {SPANS} spans in 3 batches")), "{}", o.stderr);
        let sent = exported_ids(&dir, &svc);
        assert_eq!(sent.len() as u64, SPANS);
        let got = jaeger_ids(&j, &svc, sent.len());
        assert_eq!(got, sent, "{endpoint}: Jaeger holds other spans than the export's");
    }
}

#[test]
fn log_records_jaeger_does_not_take_are_said_and_fail_the_export() {
    let Some(j) = ringtrace_fixtures::jaeger() else { return };
    let (_rec, dir) = recorded(10);
    for endpoint in [format!("otlp://{}", j.grpc), format!("otlp+http://{}", j.http)] {
        let svc = unique_name("logs");
        let o = deliver(&dir, &endpoint, &svc, &[]);
        assert_eq!(o.code, 1, "{endpoint}: {}", o.stderr);
        assert!(o.stderr.contains(&format!("delivered {SPANS} of {SPANS} spans")), "{}", o.stderr);
        assert!(o.stderr.contains("0 of 10 log records"), "{}", o.stderr);
        assert!(o.stderr.contains("10 log records not delivered"), "{}", o.stderr);
        assert_eq!(jaeger_ids(&j, &svc, SPANS as usize).len() as u64, SPANS);
        // Spans only: everything asked for is delivered.
        let o = deliver(&dir, &endpoint, &unique_name("traces"), &["--signals", "traces"]);
        assert_eq!(o.code, 0, "{endpoint}: {}", o.stderr);
    }
}

#[test]
fn an_endpoint_nobody_listens_on_is_a_clear_error_and_nothing_is_claimed_sent() {
    let (_rec, dir) = recorded(0);
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for endpoint in [format!("otlp://127.0.0.1:{port}"), format!("otlp+http://127.0.0.1:{port}")] {
        let start = Instant::now();
        let o = deliver(&dir, &endpoint, "down", &["--retry-for", "1s", "--timeout", "1s"]);
        assert_eq!(o.code, 1, "{endpoint}: {}", o.stderr);
        assert!(o.stderr.contains(&format!("delivered 0 of {SPANS} spans in 0 batches")), "{}", o.stderr);
        assert!(o.stderr.contains("gave up") && o.stderr.to_lowercase().contains("refused"), "{}", o.stderr);
        assert!(o.stderr.contains(&format!("{SPANS} spans and log records not delivered")), "{}", o.stderr);
        // Retried for the second asked, then given up: not the default minute.
        assert!(start.elapsed() < Duration::from_secs(10), "{endpoint}: {:?}", start.elapsed());
    }
}

/// How a [`proxy`] treats its first connections.
#[derive(Clone, Copy)]
enum First {
    /// Forwarded after this pause.
    Held(Duration),
    /// One HTTP request read, answered 503 with `Retry-After: 1`.
    Unavailable,
    /// Closed once the first bytes of a request came (a connection lost mid-call).
    Closed,
}

/// A TCP proxy to `upstream` on a port of its own: its first `n` connections are
/// treated as `first` says, the others forwarded. Connections accepted are counted.
fn proxy(upstream: String, n: usize, first: First) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let count = Arc::new(AtomicUsize::new(0));
    let accepted = count.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { return };
            let i = accepted.fetch_add(1, Ordering::SeqCst);
            let upstream = upstream.clone();
            std::thread::spawn(move || {
                match first {
                    _ if i >= n => {}
                    First::Held(pause) => std::thread::sleep(pause),
                    First::Unavailable => return unavailable(c),
                    First::Closed => {
                        let _ = (&c).read(&mut [0; 64]);
                        return;
                    }
                }
                let Ok(u) = TcpStream::connect(&upstream) else { return };
                let (mut a, mut b) = (c.try_clone().unwrap(), u.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut a, &mut b);
                    let _ = b.shutdown(std::net::Shutdown::Write);
                });
                let (mut c, mut u) = (c, u);
                let _ = std::io::copy(&mut u, &mut c);
                let _ = c.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (addr, count)
}

/// Answers one request with 503 and `Retry-After: 1`, and closes.
fn unavailable(mut c: TcpStream) {
    common::sink::read_request(&c);
    let _ = c.write_all(
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy",
    );
}

#[test]
fn a_slow_endpoint_is_retried_until_it_takes_every_batch() {
    let Some(j) = ringtrace_fixtures::jaeger() else { return };
    let (_rec, dir) = recorded(0);
    for (upstream, scheme) in [(&j.grpc, "otlp"), (&j.http, "otlp+http")] {
        // Its first two connections answer after 1.5 s: a batch waits at most 0.5 s.
        let (addr, _) = proxy(upstream.clone(), 2, First::Held(Duration::from_millis(1500)));
        let svc = unique_name("slow");
        let o = deliver(&dir, &format!("{scheme}://{addr}"), &svc, &["--timeout", "500ms", "--retry-for", "20s"]);
        assert_eq!(o.code, 0, "{scheme}: {}", o.stderr);
        assert!(o.stderr.contains(&format!("delivered {SPANS} of {SPANS} spans in 3 batches")), "{}", o.stderr);
        assert!(!o.stderr.contains("spans in 3 batches (0 retries)"), "{scheme}: no retry: {}", o.stderr);
        assert_eq!(jaeger_ids(&j, &svc, SPANS as usize), exported_ids(&dir, &svc));
    }
}

#[test]
fn a_connection_lost_mid_call_is_retried() {
    let Some(j) = ringtrace_fixtures::jaeger() else { return };
    let (_rec, dir) = recorded(0);
    for (upstream, scheme) in [(&j.grpc, "otlp"), (&j.http, "otlp+http")] {
        let (addr, conns) = proxy(upstream.clone(), 2, First::Closed);
        let svc = unique_name("lost");
        let o = deliver(&dir, &format!("{scheme}://{addr}"), &svc, &[]);
        assert_eq!(o.code, 0, "{scheme}: {}", o.stderr);
        assert!(o.stderr.contains(&format!("delivered {SPANS} of {SPANS} spans in 3 batches")), "{}", o.stderr);
        assert!(!o.stderr.contains("spans in 3 batches (0 retries)"), "{scheme}: no retry: {}", o.stderr);
        assert!(conns.load(Ordering::SeqCst) >= 3, "{scheme}: the closed connections, then one that forwards");
        assert_eq!(jaeger_ids(&j, &svc, SPANS as usize), exported_ids(&dir, &svc));
    }
}

#[test]
fn unavailable_answers_are_retried_after_the_pause_they_ask_for() {
    let Some(j) = ringtrace_fixtures::jaeger() else { return };
    let (_rec, dir) = recorded(0);
    let (addr, _) = proxy(j.http.clone(), 2, First::Unavailable);
    let svc = unique_name("503");
    let start = Instant::now();
    let o = deliver(&dir, &format!("otlp+http://{addr}"), &svc, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains(&format!("delivered {SPANS} of {SPANS} spans in 3 batches (2 retries)")), "{}", o.stderr);
    // Two answers asked for a second each.
    assert!(start.elapsed() >= Duration::from_secs(2), "{:?}", start.elapsed());
    assert_eq!(jaeger_ids(&j, &svc, SPANS as usize).len() as u64, SPANS);
}

#[test]
fn a_partial_success_is_counted_and_said_and_fails_the_export() {
    let (_rec, dir) = recorded(0);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let spans_seen = Arc::new(AtomicUsize::new(0));
    let seen = spans_seen.clone();
    // A server that rejects the first span of every batch (HTTP/1.1, one request a
    // connection).
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            let req = ExportTraceServiceRequest::decode(common::sink::read_request(&c).1.as_slice()).unwrap();
            let n: usize = req.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
            seen.fetch_add(n, Ordering::SeqCst);
            let answer = ExportTraceServiceResponse {
                partial_success: Some(ExportTracePartialSuccess {
                    rejected_spans: 1,
                    error_message: "span too old".into(),
                }),
            }
            .encode_to_vec();
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                answer.len()
            );
            let _ = c.write_all(head.as_bytes()).and_then(|()| c.write_all(&answer));
        }
    });
    let o = deliver(&dir, &format!("otlp+http://{addr}"), "partial", &[]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(spans_seen.load(Ordering::SeqCst) as u64, SPANS, "every span sent once");
    assert!(
        o.stderr.contains(&format!("delivered {} of {SPANS} spans in 3 batches (0 retries)", SPANS - 3)),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("rejected 3 spans (partial success): span too old"), "{}", o.stderr);
    assert!(o.stderr.contains("3 spans and log records not delivered"), "{}", o.stderr);
}

/// A server of the test's own that answers every request with `head` and `body`
/// (HTTP/1.1, one request a connection); requests are counted.
fn answering(head: &'static str, body: &'static [u8]) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            common::sink::read_request(&c);
            seen.fetch_add(1, Ordering::SeqCst);
            let head = format!("HTTP/1.1 {head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = c.write_all(head.as_bytes()).and_then(|()| c.write_all(body));
        }
    });
    (addr, count)
}

#[test]
fn a_success_that_is_not_an_otlp_answer_is_a_failure_naming_the_endpoint() {
    let (_rec, dir) = recorded(0);
    // A web UI on the port (Jaeger's query port answers any POST so).
    let (addr, posts) = answering("200 OK\r\nContent-Type: text/html; charset=utf-8", b"<!doctype html><html></html>");
    let endpoint = format!("otlp+http://{addr}");
    let o = deliver(&dir, &endpoint, "web", &["--signals", "traces"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains(&format!("{endpoint}: delivered 0 of {SPANS} spans in 0 batches")), "{}", o.stderr);
    assert!(o.stderr.contains(&format!("http://{addr}/v1/traces")) && o.stderr.contains("not an OTLP"), "{}", o.stderr);
    assert!(o.stderr.contains(&format!("{endpoint}: {SPANS} spans and log records not delivered")), "{}", o.stderr);
    assert_eq!(posts.load(Ordering::SeqCst), 1, "not retried, and the batches after it not sent");
    // An empty success in OTLP's media type is a full success.
    let (addr, posts) = answering("200 OK\r\nContent-Type: application/x-protobuf", b"");
    let o = deliver(&dir, &format!("otlp+http://{addr}"), "empty", &["--signals", "traces"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains(&format!("delivered {SPANS} of {SPANS} spans in 3 batches")), "{}", o.stderr);
    assert_eq!(posts.load(Ordering::SeqCst), 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn to_refuses_what_it_cannot_do_before_reading_anything() {
    for (args, msg) in [
        (&["export", "x", "--to", "https://x:4318"][..], "TLS"),
        (&["export", "x", "--to", "http://x:4318"], "otlp://HOST:PORT"),
        (&["export", "x", "--to", "otlp://x", "--format", "chrome"], "cannot be used with"),
        (&["export", "x", "--to", "otlp://x", "--header", "novalue"], "NAME=VALUE"),
    ] {
        let o = run(args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(msg), "{args:?}: {}", o.stderr);
    }
    let (_rec, dir) = recorded(0);
    let o = run(&["export", &dir, "--format", "chrome", "--signals", "logs"]);
    assert_eq!((o.code, o.stdout.as_str()), (1, ""), "{}", o.stderr);
    assert!(o.stderr.contains("go with --to"), "{}", o.stderr);
}

/// A recorder directory of `ring` bytes a thread (the dispatch recording into it), a
/// service name, and `export DIR --to otlp+http://HTTP --follow` started on it (spans
/// only, a round every 100 ms), its stderr's file.
fn follower(ring: u64, what: &str, http: &str) -> (tracing::Dispatch, String, common::Guard, std::path::PathBuf) {
    let dir = temp(what);
    let (layer, recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(ring).directory(&dir).build().unwrap();
    // The recorder lives as long as the process (a live program's would).
    std::mem::forget(recorder);
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let svc = unique_name(what);
    let endpoint = format!("otlp+http://{http}");
    let args =
        ["export", dir.to_str().unwrap(), "--to", &endpoint, "--service", &svc, "--signals", "traces", "--follow"];
    let (child, _out, err) = common::spawn(&[&args[..], &["--interval", "100ms"]].concat());
    (d, svc, child, err)
}

#[test]
fn follow_delivers_a_live_recorder_span_by_span_once_each_and_the_open_ones_at_the_end() {
    let Some(j) = ringtrace_fixtures::jaeger() else { return };
    let (d, svc, mut child, err) = follower(16 << 20, "follow", &j.http);
    // 1,500 requests of 3 steps over about 1.5 s, read by the follower while they are
    // written; then one left open.
    const REQUESTS: u64 = 1500;
    let writer = std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            for r in 0..REQUESTS {
                let root = tracing::info_span!("request", r);
                let _e = root.enter();
                for c in 0..3u64 {
                    let _s = tracing::info_span!("step", c).entered();
                    tracing::info!(c, "working");
                }
                if r % 100 == 0 {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            let open = tracing::info_span!("open");
            let e = open.enter();
            std::thread::sleep(Duration::from_millis(1500));
            drop(e);
            std::mem::forget(open);
        })
    });
    writer.join().unwrap();
    rustix::process::kill_process(rustix::process::Pid::from_child(&child.0), rustix::process::Signal::TERM).unwrap();
    let status = child.wait(Duration::from_secs(30), "export --follow");
    let stderr = std::fs::read_to_string(err).unwrap();
    // Finished cleanly, then exits as SIGTERM's.
    assert_eq!(status.code(), Some(128 + 15), "{stderr}");
    let expect = REQUESTS * 4 + 1;
    assert!(stderr.contains(&format!("delivered {expect} spans and 0 log records")), "{stderr}");
    let got = jaeger_spans(&j, &svc, expect as usize);
    let unique: BTreeSet<&String> = got.iter().map(|(id, _)| id).collect();
    assert_eq!((got.len() as u64, unique.len() as u64), (expect, expect), "every span once: {stderr}");
    let open: Vec<_> = got.iter().filter(|(_, name)| name == "open").collect();
    assert_eq!(open.len(), 1);
}

#[test]
fn ship_to_an_otlp_endpoint_follows_recorders_under_the_host_name() {
    let (_rec, dir) = recorded(4);
    let (addr, got) = common::sink::start();
    let o = run(&[
        "ship",
        "--to",
        &format!("otlp+http://{addr}"),
        "--host-name",
        "h1",
        "--duration",
        "300ms",
        "--interval",
        "100ms",
        &dir,
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains(&format!("delivered {SPANS} spans and 4 log records")), "{}", o.stderr);
    let mut spans = 0;
    for (path, body) in got.lock().unwrap().iter() {
        if path != "/v1/traces" {
            continue;
        }
        let r = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        for rs in &r.resource_spans {
            let attrs = &rs.resource.as_ref().unwrap().attributes;
            assert!(
                attrs.iter().any(|a| a.key == "host.name" && format!("{:?}", a.value).contains("\"h1\"")),
                "{attrs:?}"
            );
            spans += rs.scope_spans.iter().map(|s| s.spans.len() as u64).sum::<u64>();
        }
    }
    assert_eq!(spans, SPANS, "every span once");
    // Kafka's options are not taken with --to otlp://; --host is the host's name in
    // Kafka records, and says which option is OpenTelemetry's.
    let to = format!("otlp+http://{addr}");
    let o = run(&["ship", "--to", &to, "--state", "s", &dir]);
    assert!(o.stderr.contains("--state is Kafka's"), "{}", o.stderr);
    assert_eq!(o.code, 1);
    let o = run(&["ship", "--to", &to, "--host", "h1", &dir]);
    assert!(o.stderr.contains("OpenTelemetry's host.name is --host-name"), "{}", o.stderr);
    assert_eq!(o.code, 1);
    // A duration is written with its unit.
    let o = run(&["ship", "--to", &to, "--duration", "0.3", &dir]);
    assert!(o.stderr.contains("`0.3`: a duration needs a unit, as in 0.3s or 0.3ms"), "{}", o.stderr);
    assert_eq!(o.code, 2);
}

#[test]
fn follow_sends_each_span_once_while_the_recorder_overwrites_and_says_what_it_lost() {
    let Some(j) = ringtrace_fixtures::jaeger() else { return };
    let (d, svc, mut child, err) = follower(256 << 10, "overwrite", &j.http);
    // A root open all along (its start soon overwritten), its steps in small bursts the
    // follower keeps up with (the ring holds seconds of them, on a busy machine too),
    // then one burst far past what the ring holds.
    const STEPS: u64 = 12000;
    std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            let root = tracing::info_span!("job");
            let _e = root.enter();
            for c in 0..STEPS {
                let s = tracing::info_span!("step", c).entered();
                tracing::info!(c, "working");
                drop(s);
                if c < 2000 && c % 100 == 99 {
                    std::thread::sleep(Duration::from_millis(250));
                }
            }
        })
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    rustix::process::kill_process(rustix::process::Pid::from_child(&child.0), rustix::process::Signal::TERM).unwrap();
    let status = child.wait(Duration::from_secs(30), "export --follow");
    let stderr = std::fs::read_to_string(err).unwrap();
    // The burst's loss fails the command, and is said.
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("bytes of records overwritten by the recorder before a round read them"), "{stderr}");
    let delivered: u64 = stderr
        .split("delivered ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    let v: serde_json::Value =
        serde_json::from_str(&http_get(&format!("{}/api/traces?service={svc}&limit=10000", j.query))).unwrap();
    let spans: Vec<&serde_json::Value> =
        v["data"].as_array().into_iter().flatten().flat_map(|t| t["spans"].as_array().unwrap()).collect();
    let mut steps = BTreeSet::new();
    for s in spans.iter().filter(|s| s["operationName"] == "step") {
        // A step whose start the burst overwrote has no fields: it is marked.
        let tags = s["tags"].as_array().unwrap();
        let Some(c) = tags.iter().find(|t| t["key"] == "c") else {
            assert!(tags.iter().any(|t| t["key"] == "ringtrace.start_unknown"), "{s}");
            continue;
        };
        let c = c["value"].as_u64().unwrap();
        assert!(steps.insert(c), "step {c} delivered twice");
    }
    // Every step of the slow part is there; the burst's were partly overwritten.
    let missing: Vec<u64> = (0..2000).filter(|c| !steps.contains(c)).collect();
    assert!(missing.is_empty(), "steps of the slow part missing: {missing:?}: {stderr}");
    assert!((steps.len() as u64) < STEPS, "the burst overwrote some: {}", steps.len());
    assert_eq!(spans.len() as u64, delivered, "{stderr}");
}

/// An OTLP/gRPC trace service that answers its first call RESOURCE_EXHAUSTED with a
/// RetryInfo of a second, then a partial success rejecting 2 spans of each batch; it
/// counts the spans of the calls it answered with a success.
struct Pushy {
    calls: AtomicUsize,
    taken: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService for Pushy {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        use tonic_types::{ErrorDetails, StatusExt};
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            let details = ErrorDetails::with_retry_info(Some(Duration::from_secs(1)));
            return Err(tonic::Status::with_error_details(tonic::Code::ResourceExhausted, "slow down", details));
        }
        let n: usize =
            request.get_ref().resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
        self.taken.fetch_add(n, Ordering::SeqCst);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: Some(ExportTracePartialSuccess { rejected_spans: 2, error_message: "too old".into() }),
        }))
    }
}

#[test]
fn over_grpc_a_pause_asked_for_is_kept_and_a_partial_success_counted() {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;
    let (_rec, dir) = recorded(0);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let taken = Arc::new(AtomicUsize::new(0));
    let service = Pushy { calls: AtomicUsize::new(0), taken: taken.clone() };
    rt.spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(service))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let start = Instant::now();
    let o = deliver(&dir, &format!("otlp://{addr}"), "pushy", &[]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(start.elapsed() >= Duration::from_secs(1), "the second asked for: {:?}", start.elapsed());
    assert!(
        o.stderr.contains(&format!("delivered {} of {SPANS} spans in 3 batches (1 retries)", SPANS - 6)),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("rejected 6 spans (partial success): too old"), "{}", o.stderr);
    assert_eq!(taken.load(Ordering::SeqCst) as u64, SPANS, "each batch taken once");
}

/// `ship --help` lists the options `ship --to` takes in either build; without the kafka
/// feature, what `ship` says of Kafka gives a command that builds it (from a checkout:
/// the crates are not published). Run by the test command in that build too.
#[test]
fn ship_to_an_otlp_endpoint_is_in_ship_help_and_kafka_is_said_how_to_get() {
    let o = run(&["ship", "--help"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for option in ["--to <DESTINATION>", "--host-name", "--duration", "--interval", "--service", "--signals"] {
        assert!(o.stdout.contains(option), "ship --help does not list {option}:\n{}", o.stdout);
    }
    // The old spelling of the destination, in either build: a usage error naming the new.
    let o = run(&["ship", "--brokers", "k1:9092", "x"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("--to kafka://BROKERS/TOPIC"), "{}", o.stderr);
    let top = run(&["--help"]);
    let line = top.stdout.lines().find(|l| l.trim_start().starts_with("ship ")).expect("ship in the help");
    if cfg!(feature = "kafka") {
        return;
    }
    assert!(line.contains("OpenTelemetry") || line.contains("--to"), "{line}");
    let (_rec, dir) = recorded(1);
    let checkout = "cargo install --path crates/ringtrace-cli --features kafka";
    // Without --to: Kafka, refused with how to get it.
    let o = run(&["ship", &dir]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains(checkout) && o.stderr.contains("--to"), "{}", o.stderr);
    // A Kafka destination: not one this build has, with how to get it.
    let o = run(&["ship", "--to", "kafka://k1:9092/t", &dir]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains(checkout) && o.stderr.contains("kafka://k1:9092/t"), "{}", o.stderr);
    let o = run(&["decode", "kafka://k1:9092/t"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains(checkout), "{}", o.stderr);
    for o in [run(&["ship", &dir]), run(&["decode", "kafka://k1:9092/t"])] {
        assert!(!o.stderr.contains("cargo install ringtrace-cli"), "{}", o.stderr);
    }
}

/// A codec of bytes as they are: a call's request taken whole, its answer sent as given.
#[derive(Clone, Copy, Default)]
struct Bytes;

impl tonic::codec::Codec for Bytes {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Bytes;
    type Decoder = Bytes;

    fn encoder(&mut self) -> Bytes {
        *self
    }

    fn decoder(&mut self) -> Bytes {
        *self
    }
}

impl tonic::codec::Encoder for Bytes {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut tonic::codec::EncodeBuf<'_>) -> Result<(), tonic::Status> {
        bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

impl tonic::codec::Decoder for Bytes {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut tonic::codec::DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        use bytes::Buf;
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

/// A gRPC service on the OTLP trace service's path that is not one: it answers every
/// call with an `ExportTracePartialSuccess`, whose field 1 is an integer where an
/// `ExportTraceServiceResponse`'s is a message, so the answer does not decode as one.
/// Calls are counted.
#[derive(Clone)]
struct NotOtlp(Arc<AtomicUsize>);

impl tonic::server::NamedService for NotOtlp {
    const NAME: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
}

/// [`NotOtlp`]'s answer to a call.
struct WrongAnswer;

impl tonic::server::UnaryService<Vec<u8>> for WrongAnswer {
    type Response = Vec<u8>;
    type Future = std::future::Ready<Result<tonic::Response<Vec<u8>>, tonic::Status>>;

    fn call(&mut self, _: tonic::Request<Vec<u8>>) -> Self::Future {
        let wrong = ExportTracePartialSuccess { rejected_spans: 5, error_message: String::new() };
        std::future::ready(Ok(tonic::Response::new(wrong.encode_to_vec())))
    }
}

impl<B> tonic::codegen::Service<http::Request<B>> for NotOtlp
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = tonic::codegen::BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { Ok(tonic::server::Grpc::new(Bytes).unary(WrongAnswer, request).await) })
    }
}

#[test]
fn over_grpc_an_answer_that_is_not_an_otlp_response_is_a_failure_naming_the_endpoint() {
    let (_rec, dir) = recorded(0);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    rt.spawn(
        tonic::transport::Server::builder()
            .add_service(NotOtlp(calls.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let endpoint = format!("otlp://{addr}");
    let o = deliver(&dir, &endpoint, "not-otlp", &["--signals", "traces"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains(&format!("{endpoint}: delivered 0 of {SPANS} spans in 0 batches")), "{}", o.stderr);
    assert!(o.stderr.contains("not an OTLP export response"), "{}", o.stderr);
    assert!(o.stderr.contains(&format!("{endpoint}: {SPANS} spans and log records not delivered")), "{}", o.stderr);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "not retried, and the batches after it not sent");
    let _ = std::fs::remove_dir_all(&dir);
}
