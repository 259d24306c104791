//! Bounds and loss: cut values, dropped values, full rings, many threads that come and
//! go, a callsite used on several threads. Every event is accounted for.

mod common;

use common::{dispatch, TempDir};
use ringtrace_tracing::decode::{EntryKind, Trace, Value};
use ringtrace_tracing::Builder;

#[test]
fn long_values_are_cut_on_a_character_boundary_and_marked() {
    let dir = TempDir::new("cut");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).max_value_bytes(10).build().unwrap();
    let long = "ééééééééééé"; // 2 bytes each: cut at 10 bytes is 5 characters
    tracing::dispatcher::with_default(&dispatch(layer), || {
        tracing::info!(s = long, d = ?vec![1u8; 100], short = "ok", "m");
    });
    assert_eq!(recorder.stats().cut, 1);
    recorder.dump(dir.join("d.rtt")).unwrap();
    let trace = Trace::open(dir.join("d.rtt")).unwrap();
    let e = &trace.events()[0];
    let f = |n: &str| e.fields.iter().find(|f| f.name == n).unwrap().clone();
    assert_eq!(f("s").value, Value::Str("ééééé".into()));
    assert!(f("s").cut);
    assert_eq!(f("d").value, Value::Debug("[1, 1, 1, ".into()));
    assert!(f("d").cut);
    assert_eq!(f("short").value, Value::Str("ok".into()));
    assert!(!f("short").cut);
    let line = ringtrace_tracing::decode::text::event_line(&trace, e, ringtrace_tracing::decode::text::Format::Text);
    assert!(line.contains("s=\"ééééé\"…[cut]"), "{line}");
}

#[test]
fn values_past_the_record_bound_are_dropped_and_counted() {
    let dir = TempDir::new("drop");
    let (layer, recorder) =
        Builder::flight_recorder().per_thread_bytes(64 << 10).max_record_bytes(64).max_value_bytes(30).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        tracing::info!(a = "aaaaaaaaaaaaaaaaaaaa", b = "bbbbbbbbbbbbbbbbbbbb", c = 1u64, d = 2u64, e = 3u64);
    });
    recorder.dump(dir.join("d.rtt")).unwrap();
    let trace = Trace::open(dir.join("d.rtt")).unwrap();
    let e = &trace.events()[0];
    assert!(e.dropped > 0, "{e:?}");
    assert_eq!(e.fields.len() + e.dropped as usize, 5, "every value kept or counted: {e:?}");
    assert_eq!(e.fields[0].value, Value::Str("aaaaaaaaaaaaaaaaaaaa".into()));
}

#[test]
fn a_full_stream_ring_loses_events_counted_exactly() {
    let dir = TempDir::new("full-stream");
    // 4 KiB rings: the writer outruns the drain's millisecond sleeps.
    let (layer, recorder) = Builder::stream(dir.join("s.rtt")).per_thread_bytes(4096).build().unwrap();
    const N: u64 = 200_000;
    tracing::dispatcher::with_default(&dispatch(layer), || {
        for seq in 0..N {
            tracing::info!(seq);
        }
    });
    let stats = recorder.finish().unwrap();
    assert!(stats.lost > 0, "the test needs a full ring: {stats:?}");
    let trace = Trace::open(dir.join("s.rtt")).unwrap();
    let events = trace.events();
    assert_eq!(events.len() as u64 + trace.lost(), N, "events decoded plus events lost");
    assert_eq!(trace.lost(), stats.lost);
    assert_eq!(trace.stat("lost"), Some(stats.lost));
    // Each `lost` record sits where the gap is: the seq numbers before and after differ
    // by one more than the count.
    let entries: Vec<_> = trace.entries().collect();
    let mut last = None::<u64>;
    let mut pending = 0;
    for e in &entries {
        match &e.kind {
            EntryKind::Lost { count } => pending += count,
            EntryKind::Event(ev) => {
                let Some(Value::U64(seq)) = ev.field("seq") else { panic!() };
                assert_eq!(*seq, last.map_or(0, |l| l + 1) + pending);
                last = Some(*seq);
                pending = 0;
            }
            _ => {}
        }
    }
}

#[test]
fn a_full_flight_recorder_keeps_the_newest_events() {
    let dir = TempDir::new("full-flight");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(4096).build().unwrap();
    const N: u64 = 10_000;
    tracing::dispatcher::with_default(&dispatch(layer), || {
        for seq in 0..N {
            tracing::info!(seq);
        }
    });
    recorder.dump(dir.join("d.rtt")).unwrap();
    let trace = Trace::open(dir.join("d.rtt")).unwrap();
    let seqs: Vec<u64> = trace
        .events()
        .iter()
        .map(|e| match e.field("seq") {
            Some(Value::U64(s)) => *s,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(!seqs.is_empty());
    assert_eq!(*seqs.last().unwrap(), N - 1, "the newest is kept");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "a contiguous run of the newest");
    assert_eq!(trace.stat("overwritten"), Some(N - seqs.len() as u64), "the rest counted overwritten");
}

#[test]
fn hundreds_of_threads_that_come_and_go_share_a_directory_of_fewer_rings() {
    let dir = TempDir::new("threads");
    let (layer, recorder) = Builder::flight_recorder()
        .per_thread_bytes(64 << 10)
        .max_threads(32)
        .directory(dir.join("rec"))
        .build()
        .unwrap();
    let d = dispatch(layer);
    const WAVES: usize = 10;
    const PER_WAVE: usize = 30;
    const EVENTS: u64 = 20;
    for wave in 0..WAVES {
        let handles: Vec<_> = (0..PER_WAVE)
            .map(|i| {
                let d = d.clone();
                let n = wave * PER_WAVE + i;
                std::thread::Builder::new()
                    .name(format!("w-{n}"))
                    .spawn(move || {
                        tracing::dispatcher::with_default(&d, || {
                            for seq in 0..EVENTS {
                                // One callsite, used on every thread.
                                tracing::info!(n = n as u64, seq);
                            }
                        })
                    })
                    .unwrap()
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
    let stats = recorder.stats();
    assert_eq!(stats.threads, (WAVES * PER_WAVE) as u64);
    assert_eq!(stats.no_ring + stats.lost + stats.teardown + stats.busy, 0, "{stats:?}");
    let trace = Trace::open(dir.join("rec")).unwrap();
    assert!(!trace.problems.any(), "{:?}", trace.problems);
    let events = trace.events();
    assert_eq!(events.len(), WAVES * PER_WAVE * EVENTS as usize);
    for e in &events {
        let Some(Value::U64(n)) = e.field("n") else { panic!() };
        assert_eq!(e.thread.unwrap().name, format!("w-{n}"), "each record names the thread that wrote it");
    }
}

#[test]
fn more_live_threads_than_rings_are_counted_not_hidden() {
    let dir = TempDir::new("noring");
    let (layer, recorder) =
        Builder::flight_recorder().per_thread_bytes(4096).max_threads(2).directory(dir.join("rec")).build().unwrap();
    let d = dispatch(layer);
    let barrier = std::sync::Barrier::new(3);
    std::thread::scope(|s| {
        for _ in 0..3 {
            let (d, barrier) = (d.clone(), &barrier);
            s.spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    tracing::info!("first");
                    // All three hold their state (and a ring, if they got one) at once.
                    barrier.wait();
                })
            });
        }
    });
    assert_eq!(recorder.stats().no_ring, 1);
    assert_eq!(Trace::open(dir.join("rec")).unwrap().events().len(), 2);
}

/// FNV-1a of a thread's number and an event's sequence number.
fn check(t: u64, seq: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in t.to_le_bytes().into_iter().chain(seq.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[test]
fn stress_threads_into_a_lossy_stream_every_event_checksummed_and_accounted() {
    let dir = TempDir::new("stress");
    let (layer, recorder) = Builder::stream(dir.join("s.rtt")).per_thread_bytes(16 << 10).build().unwrap();
    let d = dispatch(layer);
    const THREADS: u64 = 4;
    const N: u64 = 50_000;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let d = d.clone();
            s.spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for seq in 0..N {
                        tracing::info!(t, seq, check = check(t, seq), text = "payload");
                    }
                })
            });
        }
    });
    let stats = recorder.finish().unwrap();
    let trace = Trace::open(dir.join("s.rtt")).unwrap();
    assert!(!trace.problems.any() && !trace.problems.incomplete, "{:?}", trace.problems);
    // Per thread: events in order, each checksum right, and every gap preceded by a
    // `lost` record of exactly its size.
    let mut next = std::collections::HashMap::<u32, (u64, u64, u64)>::new(); // lane: (t, next seq, pending lost)
    let (mut events, mut lost) = (0u64, 0u64);
    for e in trace.entries() {
        match &e.kind {
            EntryKind::Lost { count } => {
                lost += count;
                next.entry(e.lane).or_insert((u64::MAX, 0, 0)).2 += count;
            }
            EntryKind::Event(ev) => {
                let (Some(Value::U64(t)), Some(Value::U64(seq)), Some(Value::U64(c))) =
                    (ev.field("t"), ev.field("seq"), ev.field("check"))
                else {
                    panic!("{ev:?}")
                };
                assert_eq!(*c, check(*t, *seq), "checksum");
                let state = next.entry(e.lane).or_insert((*t, 0, 0));
                if state.0 == u64::MAX {
                    state.0 = *t;
                }
                assert_eq!(state.0, *t, "one thread per lane");
                assert_eq!(*seq, state.1 + state.2, "thread {t}: gap not matched by its lost count");
                *state = (*t, seq + 1, 0);
                events += 1;
            }
            _ => {}
        }
    }
    // A thread's trailing losses are written at its next record or its exit, or counted
    // as unreported: either way in the total.
    assert_eq!(events + trace.lost(), THREADS * N, "{stats:?}");
    assert_eq!(lost + stats.unreported, stats.lost);
    eprintln!("stress: {events} events decoded, {} lost: {stats:?}", trace.lost());
}
