//! Events in, decode out: the same events, fields, span nesting, per-thread order and
//! threads, in both modes.

mod common;

use common::{dispatch, TempDir};
use ringtrace_tracing::decode::{EntryKind, Trace, Value};
use ringtrace_tracing::Builder;

const THREADS: u64 = 4;
const EVENTS: u64 = 500;

/// Each thread: an outer span with its number, an inner span, events with every kind
/// of field.
fn workload(d: &tracing::Dispatch) {
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let d = d.clone();
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn_scoped(s, move || {
                    tracing::dispatcher::with_default(&d, || {
                        let outer = tracing::info_span!("outer", t);
                        let _o = outer.enter();
                        let inner = tracing::debug_span!("inner", kind = "x");
                        let _i = inner.enter();
                        for seq in 0..EVENTS {
                            tracing::info!(seq, name = "ev", ratio = 0.5, ok = true, delta = -3i64, dbg = ?(t, seq), "msg {}", t);
                        }
                    })
                })
                .unwrap();
        }
    });
}

fn check(trace: &Trace) {
    assert!(!trace.problems.any(), "{:?}", trace.problems);
    let events = trace.events();
    assert_eq!(events.len() as u64, THREADS * EVENTS);
    for t in 0..THREADS {
        let name = format!("worker-{t}");
        let mine: Vec<_> = events.iter().filter(|e| e.thread.is_some_and(|th| th.name == name)).collect();
        assert_eq!(mine.len() as u64, EVENTS, "{name}");
        for (i, e) in mine.iter().enumerate() {
            assert_eq!(e.field("seq"), Some(&Value::U64(i as u64)), "per-thread order");
            assert_eq!(e.field("name"), Some(&Value::Str("ev".into())));
            assert_eq!(e.field("ratio"), Some(&Value::F64(0.5)));
            assert_eq!(e.field("ok"), Some(&Value::Bool(true)));
            assert_eq!(e.field("delta"), Some(&Value::I64(-3)));
            assert_eq!(e.field("dbg"), Some(&Value::Debug(format!("{:?}", (t, i as u64)))));
            assert_eq!(e.message(), Some(format!("msg {t}").as_str()));
            assert_eq!(e.level(), tracing::Level::INFO);
            assert_eq!(e.target(), "roundtrip");
            let spans: Vec<_> = e.spans.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(spans, ["outer", "inner"]);
            assert_eq!(e.spans[0].fields.as_ref().unwrap()[0].value, Value::U64(t));
            assert_eq!(e.spans[1].fields.as_ref().unwrap()[0].value, Value::Str("x".into()));
        }
        assert!(mine.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns), "timestamps non-decreasing per thread");
    }
    assert!(events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns), "merged by timestamp");
    // Span lifecycle: each thread's two spans are made, entered, exited and closed.
    let entries: Vec<_> = trace.entries().collect();
    let count = |f: fn(&EntryKind<'_>) -> bool| entries.iter().filter(|e| f(&e.kind)).count() as u64;
    assert_eq!(count(|k| matches!(k, EntryKind::NewSpan { .. })), THREADS * 2);
    assert_eq!(count(|k| matches!(k, EntryKind::Enter { .. })), THREADS * 2);
    assert_eq!(count(|k| matches!(k, EntryKind::Exit { .. })), THREADS * 2);
    assert_eq!(count(|k| matches!(k, EntryKind::Close { .. })), THREADS * 2);
    assert_eq!(trace.lost(), 0);
}

#[test]
fn a_flight_recorder_dump_gives_back_every_event() {
    let dir = TempDir::new("roundtrip-flight");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(1 << 20).build().unwrap();
    workload(&dispatch(layer));
    let d = recorder.dump(dir.join("dump.rtt")).unwrap();
    assert_eq!(d.failed_rings, 0);
    let trace = Trace::open(dir.join("dump.rtt")).unwrap();
    check(&trace);
    assert!(!trace.problems.incomplete);
    assert_eq!(trace.stat("overwritten"), Some(0));
    let s = recorder.stats();
    assert_eq!(s.threads, THREADS);
    assert_eq!(s.lost + s.no_ring + s.teardown + s.busy + s.unreported, 0);
}

#[test]
fn a_stream_gives_back_every_event() {
    let dir = TempDir::new("roundtrip-stream");
    let (layer, recorder) = Builder::stream(dir.join("stream.rtt")).per_thread_bytes(1 << 20).build().unwrap();
    workload(&dispatch(layer));
    let stats = recorder.finish().unwrap();
    assert_eq!(stats.drained, stats.written);
    let trace = Trace::open(dir.join("stream.rtt")).unwrap();
    assert!(!trace.problems.incomplete);
    check(&trace);
}

#[test]
fn a_recorder_directory_reads_like_a_dump() {
    let dir = TempDir::new("roundtrip-dir");
    let (layer, recorder) =
        Builder::flight_recorder().per_thread_bytes(1 << 20).directory(dir.join("rec")).build().unwrap();
    workload(&dispatch(layer));
    let trace = Trace::open(dir.join("rec")).unwrap();
    check(&trace);
    drop(recorder);
}

#[test]
fn a_directory_left_by_an_earlier_run_is_refused_unless_replaced() {
    let dir = TempDir::new("replace");
    let (_l, r) = Builder::flight_recorder().per_thread_bytes(4096).directory(dir.join("rec")).build().unwrap();
    drop(r);
    let e = Builder::flight_recorder().per_thread_bytes(4096).directory(dir.join("rec")).build().unwrap_err();
    assert!(e.to_string().contains("exists"), "{e}");
    Builder::flight_recorder()
        .per_thread_bytes(4096)
        .directory(dir.join("rec"))
        .replace_existing(true)
        .build()
        .unwrap();
}

#[test]
fn spans_records_and_follows_from_round_trip() {
    let dir = TempDir::new("spans");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        let a = tracing::info_span!("a", x = tracing::field::Empty);
        let b = tracing::info_span!(parent: None, "b");
        b.follows_from(&a);
        a.record("x", 5u64);
        a.in_scope(|| tracing::info!(parent: &b, "explicit parent"));
        a.in_scope(|| tracing::info!("in a"));
        tracing::info!(parent: None, "root");
    });
    recorder.dump(dir.join("d.rtt")).unwrap();
    let trace = Trace::open(dir.join("d.rtt")).unwrap();
    let ev = trace.events();
    assert_eq!(ev.len(), 3);
    assert_eq!(ev[0].spans.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["b"]);
    assert_eq!(ev[1].spans[0].name, "a");
    assert_eq!(ev[1].spans[0].fields.as_ref().unwrap()[0].value, Value::U64(5), "recorded later, merged in");
    assert!(ev[2].spans.is_empty());
    assert!(trace.entries().any(|e| matches!(e.kind, EntryKind::FollowsFrom { .. })));
}
