//! A recorder directory written by the tracing layer in this process, shipped by the
//! agent's sources: every record once, decoded, under the ring's own numbers.

use std::collections::BTreeMap;

use serde_json::Value;
use tracing_subscriber::layer::SubscriberExt;

use super::super::{Limits, Source};
use crate::frame::{Batch, Content};

/// A fresh directory, removed on drop.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `(source, seq, object)` of each record of the messages.
fn objects(messages: &[Vec<u8>]) -> Vec<(String, u64, Value)> {
    let mut out = Vec::new();
    for m in messages {
        let b = Batch::decode(m).unwrap();
        assert_eq!(b.content, Content::Events);
        for r in b.records() {
            let v: Value = serde_json::from_slice(r.payload).unwrap_or_else(|e| panic!("{e}: {:?}", r.payload));
            out.push((b.source.to_string(), r.seq, v));
        }
    }
    out
}

#[test]
fn a_recorder_directory_ships_each_record_decoded_under_its_ring_number() {
    let dir = TempDir(std::env::temp_dir().join(format!("ringtrace-ship-traced-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    let rec = dir.0.join("rec");
    let (layer, _recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(16 << 10).directory(&rec).build().unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    // Two threads; the second writes far more than its ring holds, so that the
    // producers overwrite records before the agent reads them.
    let write = |n: u64, thread: &'static str| {
        let d = dispatch.clone();
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                let span = tracing::info_span!("job", thread);
                let _e = span.enter();
                for i in 0..n {
                    tracing::warn!(i, thread, "step");
                }
            })
        })
    };
    write(20, "small").join().unwrap();
    write(5000, "big").join().unwrap();
    // A chunk being appended to the catalog, cut short (a writer mid-append): the
    // records decode with the chunks before it.
    let mut cut = vec![2u8, 0, 0, 0];
    cut.extend_from_slice(&100u32.to_le_bytes());
    cut.extend_from_slice(&[0xab; 10]);
    std::io::Write::write_all(
        &mut std::fs::OpenOptions::new().append(true).open(rec.join(ringtrace_tracing::CATALOG_FILE)).unwrap(),
        &cut,
    )
    .unwrap();
    let mut sources = Source::expand(std::slice::from_ref(&rec)).unwrap();
    let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
    assert!(names.iter().all(|n| n.starts_with(&format!("{}#", rec.display()))), "{names:?}");
    let mut got = Vec::new();
    for s in &mut sources {
        for _ in 0..1000 {
            let mut out = Vec::new();
            let filled = s.fill("h", 1, Limits { batch: 4096, max: 1 << 20, round: 8192 }, &mut out).unwrap();
            s.acknowledged();
            if filled.records == 0 {
                break;
            }
            got.extend(objects(&out));
        }
    }
    // Per source: numbers rise; events carry their fields, names and thread.
    let mut by_source: BTreeMap<String, Vec<(u64, Value)>> = BTreeMap::new();
    for (src, seq, v) in got {
        by_source.entry(src).or_default().push((seq, v));
    }
    let events = |thread: &str| -> Vec<u64> {
        by_source
            .values()
            .flatten()
            .filter(|(_, v)| v["fields"]["thread"] == thread && v["fields"]["message"] == "step")
            .map(|(_, v)| v["fields"]["i"].as_u64().unwrap())
            .collect()
    };
    for (src, recs) in &by_source {
        assert!(recs.windows(2).all(|w| w[0].0 < w[1].0), "{src}: numbers out of order");
        for (seq, v) in recs {
            assert!(v.get("undecodable").is_none(), "{src} {seq}: {v}");
        }
    }
    // The small thread: every event, in order, with its level, target and span.
    let small = events("small");
    assert_eq!(small, (0..20).collect::<Vec<_>>());
    let first = by_source
        .values()
        .flatten()
        .find(|(_, v)| v["fields"]["thread"] == "small" && v["fields"]["message"] == "step")
        .unwrap();
    assert_eq!(first.1["level"], "WARN");
    assert!(first.1["target"].as_str().unwrap().contains("traced"), "{}", first.1);
    assert_eq!(first.1["spans"][0]["name"], "job");
    // Span records are shipped too (one object each), so numbers have no gaps but the
    // overwritten ones: a span made and entered at once is one `open` record.
    assert!(by_source.values().flatten().any(|(_, v)| v["span"] == "open" && v["name"] == "job"));
    // The big thread: its newest events, in order, ending at its last; the rest overwritten.
    let big = events("big");
    assert!(!big.is_empty() && big.len() < 5000, "{}", big.len());
    assert!(big.windows(2).all(|w| w[0] + 1 == w[1]), "a gap inside what was read");
    assert_eq!(*big.last().unwrap(), 4999);
}

/// A recorder directory's records shipped, read back as a fleet and exported to OTLP:
/// every object the agent wrote reads as an event or a span record (none as bytes),
/// the events with their level, message, typed fields, thread and span.
#[test]
fn a_recorder_directory_read_back_as_a_fleet_exports_its_events_to_otlp() {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;

    let dir = TempDir(std::env::temp_dir().join(format!("ringtrace-ship-traced-otlp-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    let rec = dir.0.join("rec");
    let (layer, _recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).directory(&rec).build().unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    std::thread::Builder::new()
        .name("otlp-worker".into())
        .spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                let span = tracing::info_span!("job", id = 7u64);
                let _e = span.enter();
                for i in 0..10i64 {
                    tracing::warn!(i, ratio = 0.5, ok = true, "step");
                }
                tracing::error!("done");
            })
        })
        .unwrap()
        .join()
        .unwrap();
    let mut t = crate::fleet::Timeline::new();
    for s in &mut Source::expand(std::slice::from_ref(&rec)).unwrap() {
        for _ in 0..1000 {
            let mut out = Vec::new();
            let filled = s.fill("h", 1, Limits { batch: 4096, max: 1 << 20, round: 8192 }, &mut out).unwrap();
            s.acknowledged();
            for m in &out {
                t.push(m).unwrap();
            }
            if filled.records == 0 {
                break;
            }
        }
    }
    let fleet = t.finish();
    let x = crate::fleet::export::otlp(&fleet, fleet.timeline());
    let k = x.counts;
    assert_eq!(k.records, fleet.stats().records);
    assert_eq!((k.raw, k.undecodable, k.host_undecodable, k.events), (0, 0, 0, 11), "{k:?}");
    assert!(k.spans >= 2, "the span's records, its open and done at least: {k:?}");
    // Every event is in the span: a span event of it, as a trace's export makes it.
    assert_eq!((k.otlp_spans, k.span_events, k.start_unknown, k.end_unknown), (1, 11, 0, 0), "{k:?}");
    assert_eq!(k.log_records, k.records + k.gaps - k.spans - k.span_events);
    let spans: Vec<_> = x.traces.resource_spans.iter().flat_map(|r| &r.scope_spans[0].spans).collect();
    let job = spans[0];
    let attr = |a: &[opentelemetry_proto::tonic::common::v1::KeyValue], key: &str| {
        a.iter().find(|a| a.key == key).and_then(|a| a.value.clone()?.value)
    };
    let text = |s: &str| Some(V::StringValue(s.into()));
    assert_eq!(job.name, "job");
    assert_eq!(attr(&job.attributes, "id"), Some(V::IntValue(7)));
    assert_eq!(attr(&job.attributes, "thread.name"), text("otlp-worker"));
    assert!(matches!(attr(&job.attributes, "thread.id"), Some(V::IntValue(tid)) if tid > 0));
    assert!(matches!(attr(&job.attributes, "code.namespace"), Some(V::StringValue(t)) if t.contains("traced")));
    assert!(matches!(attr(&job.attributes, "code.lineno"), Some(V::IntValue(l)) if l > 0));
    assert!(job.start_time_unix_nano <= job.end_time_unix_nano);
    let steps: Vec<_> = job.events.iter().filter(|e| e.name == "step").collect();
    assert_eq!(steps.len(), 10);
    for (i, e) in steps.iter().enumerate() {
        assert_eq!(attr(&e.attributes, "i"), Some(V::IntValue(i as i64)));
        assert_eq!(attr(&e.attributes, "level"), text("WARN"));
        let (ratio, ok) = (attr(&e.attributes, "ratio"), attr(&e.attributes, "ok"));
        assert_eq!((ratio, ok), (Some(V::DoubleValue(0.5)), Some(V::BoolValue(true))));
    }
    let done = job.events.iter().find(|e| e.name == "done").unwrap();
    assert_eq!(attr(&done.attributes, "level"), text("ERROR"));
}
