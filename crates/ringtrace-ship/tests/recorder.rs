//! A `ringtrace-tracing` recorder directory shipped into a real Kafka cluster: a
//! process records events from two threads and exits; the agent ships every record of
//! its rings decoded, one JSON object each, and the fleet reader reads each event once,
//! with its level, target, message, fields, thread and span. The topic read back and
//! exported (Perfetto, Chrome, CTF) shows the same events, slices and values on each
//! thread as the recorder exported on its host, times apart by the host's clock offset;
//! in OTLP, the same spans, span events and log records.
//!
//! The cluster is the test command's (see `fleet.rs`).

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::shown::{chrome_threads, ctf_streams, otlp_shown, perfetto_threads, same, same_otlp};
use common::*;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use ringtrace_ship::fleet::export::{OtlpWriter, TraceWriter};
use ringtrace_ship::fleet::{stream_topic, ReadOptions};
use tracing_subscriber::layer::SubscriberExt;

/// Events each of the child's two threads records.
const EVENTS: u64 = 3000;

/// The child's part: records `EVENTS` events from each of two threads into the
/// recorder directory `RECORDER_DIR`, then exits. Not a test: ignored, and run by
/// [`a_recorder_directory_arrives_decoded_every_event_once`] with `--ignored`.
#[test]
#[ignore = "a child role: run by a_recorder_directory_arrives_decoded_every_event_once"]
fn child() {
    let Ok(dir) = std::env::var("RECORDER_DIR") else {
        panic!("not a test: run by a_recorder_directory_arrives_decoded_every_event_once with RECORDER_DIR set")
    };
    let (layer, _recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(4 << 20).directory(dir).build().unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let threads: Vec<_> = ["alpha", "beta"]
        .into_iter()
        .map(|name| {
            let d = dispatch.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        let span = tracing::info_span!("request", host = name);
                        let _e = span.enter();
                        for i in 0..EVENTS {
                            // A span of its own now and then, its fields recorded later.
                            let batch = (i % 100 == 0).then(|| {
                                tracing::debug_span!(target: "store", "batch", n = i, done = tracing::field::Empty)
                                    .entered()
                            });
                            let (neg, big, ratio) = (-(i as i64), u64::MAX - i, i as f64 / 3.0);
                            tracing::info!(i, neg, big, ratio, odd = i % 2 == 1, name, "served");
                            if let Some(b) = batch {
                                b.record("done", true);
                                tracing::warn!(target: "store", nan = f64::NAN, wide = u128::MAX - u128::from(i));
                            }
                        }
                    })
                })
                .unwrap()
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn a_recorder_directory_arrives_decoded_every_event_once() {
    let Some(brokers) = brokers() else { return };
    let topic = create_topic(&brokers, "recorder", 3);
    let dir = TempDir::new("recorder");
    let rec = dir.path().join("rec");
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("RECORDER_DIR", &rec)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the recording child failed: {status}");
    let state = dir.path().join("agent.state");
    let out = wait_output(
        agent(&brokers, &topic, "host-r", &state, std::slice::from_ref(&rec)).spawn().unwrap(),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "the agent exited with {}", out.status);
    let fleet = read_all(&brokers, &topic);
    let stats = fleet.stats();
    assert_eq!((stats.duplicates, stats.missing, stats.damaged), (0, 0, 0), "{stats:?}");
    let mut served: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let (mut spans, mut warned) = (0, 0);
    for e in fleet.timeline() {
        assert_eq!(e.host, "host-r");
        assert!(e.source.starts_with(&format!("{}#", rec.display())), "{}", e.source);
        let v: serde_json::Value = serde_json::from_slice(e.payload).expect("each record one JSON object");
        assert!(v.get("undecodable").is_none(), "{v}");
        if v.get("span").is_some() {
            spans += 1;
            continue;
        }
        if v["level"] == "WARN" {
            assert_eq!(v["kinds"], "fU", "{v}");
            warned += 1;
            continue;
        }
        assert_eq!((v["level"].as_str(), v["fields"]["message"].as_str()), (Some("INFO"), Some("served")), "{v}");
        assert_eq!(v["spans"][0]["name"], "request", "{v}");
        let thread = v["thread"].as_str().unwrap().to_string();
        served.entry(thread).or_default().push(v["fields"]["i"].as_u64().unwrap());
    }
    eprintln!(
        "{served_n} events and {spans} span records read back",
        served_n = served.values().map(Vec::len).sum::<usize>()
    );
    assert_eq!(served.len(), 2, "{:?}", served.keys().collect::<Vec<_>>());
    for (thread, is) in &served {
        assert!(thread.contains("alpha") || thread.contains("beta"), "{thread}");
        assert_eq!(*is, (0..EVENTS).collect::<Vec<_>>(), "{thread}: every event once, in order");
    }
    assert!(spans > 0, "span records are shipped too");
    assert_eq!(warned, 2 * EVENTS / 100);
    same_as_on_the_host(&brokers, &topic, &rec, dir.path(), stats.records);
}

/// The recorder `rec` exported on its host and the topic read back (streamed) and
/// exported show the same thing, thread by thread, in Perfetto, Chrome and CTF, and
/// span by span in OTLP; the topic holds `records`.
fn same_as_on_the_host(brokers: &str, topic: &str, rec: &std::path::Path, scratch: &std::path::Path, records: u64) {
    let trace = ringtrace_tracing::decode::Trace::open_dir(rec).unwrap();
    let p = trace.process.as_ref().expect("the recorder's process");
    // The fleet's times are wall-clock, the agent's offset measured batch by batch.
    let offset = (i128::from(p.realtime_ns) - i128::from(p.monotonic_ns), 100_000_000);
    let streamed = |w: &mut TraceWriter<'_>| {
        let opts = ReadOptions::default();
        stream_topic(brokers, topic, &opts, |i| w.put(&i), |w| panic!("{w}")).expect("streaming the topic");
    };
    let (mut host, mut fleet) = (Vec::new(), Vec::new());
    ringtrace_export::perfetto::write(&trace, &mut host).unwrap();
    let mut w = TraceWriter::perfetto(&mut fleet);
    streamed(&mut w);
    let done = w.finish().unwrap();
    assert_eq!(same(&perfetto_threads(&host), &perfetto_threads(&fleet), offset, "perfetto"), Ok(()));
    assert_eq!(done.records, records);
    assert!(done.events > 2 * EVENTS, "{done:?}");
    let (mut host, mut fleet) = (Vec::new(), Vec::new());
    ringtrace_export::chrome::write(&trace, &mut host).unwrap();
    let mut w = TraceWriter::chrome(&mut fleet);
    streamed(&mut w);
    w.finish().unwrap();
    assert_eq!(same(&chrome_threads(&host), &chrome_threads(&fleet), offset, "chrome"), Ok(()));
    ringtrace_export::ctf::write(&trace, &scratch.join("host.ctf")).unwrap();
    let mut w = TraceWriter::ctf(&scratch.join("fleet.ctf")).unwrap();
    streamed(&mut w);
    w.finish().unwrap();
    assert_eq!(ctf_streams(&scratch.join("host.ctf")), ctf_streams(&scratch.join("fleet.ctf")));
    // OTLP: the host's times are its wall clock's, as the fleet's are.
    let host = ringtrace_export::otlp::convert(&trace, &ringtrace_export::otlp::Options::default());
    let (mut traces, mut logs) = (ExportTraceServiceRequest::default(), ExportLogsServiceRequest::default());
    let mut w = OtlpWriter::requests(|t, l| {
        traces.resource_spans.extend(t.resource_spans);
        logs.resource_logs.extend(l.resource_logs);
        Ok(())
    });
    stream_topic(brokers, topic, &ReadOptions::default(), |i| w.put(&i), |w| panic!("{w}")).expect("streaming");
    let done = w.finish().unwrap();
    assert_eq!((done.records, done.otlp_spans, done.end_unknown), (records, host.spans, host.end_unknown));
    let shown = (otlp_shown(&host.traces, &host.logs), otlp_shown(&traces, &logs));
    assert_eq!(same_otlp(&shown.0, &shown.1, (0, offset.1)), Ok(()));
}
