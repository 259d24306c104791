//! `scale-merge` `live-tracing/*`: a channel reader behind 256 writer threads of the
//! `tracing` layer: `ringtrace-tracing`'s stream, whose drain thread is a
//! `ChannelReader` merging every thread's ring into the trace file.
//!
//! Each writer thread, with the stream's subscriber (`registry()` and the layer) as its
//! scoped default, loops: a span made and entered, [`BURST`] events with two fields (a
//! `u64` and a short `&str`) in it, the span closed, then a sleep of [`PERIOD`]: 256
//! threads of a service that log in bursts, about a million records a second in all,
//! which takes about 0.8 of a core on the 2-core VM, writers, wakeups and drain
//! together (the row's `CPUns/rec`).
//!
//! Why not faster: flat out, one thread of the layer emits 27 M events a second
//! (docs/tracing.md), and 256 threads waking every 2 ms ask for several cores of
//! wakeups and events; on 2 cores the drain is then one runnable thread of 257, which
//! the scheduler gives about a 129th of a core (measured: it wrote about 20,000
//! records a second while the writers offered 5.9 M and the stream counted the rest as
//! lost). No reader keeps up with writers that leave it no CPU; the stream counts what
//! it refuses (docs/tracing.md).
//!
//! Rows, counted over the same window after a warmup, from the recorder's `stats()`:
//! * `live-tracing/offered`: records the writers emitted (`written + lost`: events
//!   and their spans' records, those refused because a ring was full included);
//! * `live-tracing/drained`: records the drain wrote into the trace file (`drained`),
//!   with the whole process's CPU time per record (the writers' and the drain's).
//!
//! The target: the drain writes at least 0.9x the records/s offered.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

use crate::harness::{process_cpu, Measured};
use crate::Row;

/// Writer threads.
pub(super) const WRITERS: usize = 256;
/// Events per span, a writer's burst.
const BURST: u64 = 64;
/// A writer's sleep after each burst.
const PERIOD: Duration = Duration::from_millis(16);
/// Each thread's ring: 256 KiB holds about 4,000 records, a burst is 66.
const PER_THREAD: u64 = 256 << 10;

/// The two rows, measured over `window` after `warmup`.
pub(super) fn rows(bench: &'static str, warmup: Duration, window: Duration) -> [Row; 2] {
    let path = crate::layers::temp("live-tracing.rtt");
    let (layer, recorder) = ringtrace_tracing::Builder::stream(&path)
        .per_thread_bytes(PER_THREAD)
        .max_threads(WRITERS as u32)
        .build()
        .expect("a stream recorder in the temporary directory");
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    let stop = AtomicBool::new(false);
    let rows = std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (dispatch, stop) = (&dispatch, &stop);
            s.spawn(move || {
                tracing::dispatcher::with_default(dispatch, || {
                    let mut i = 0u64;
                    while !stop.load(Relaxed) {
                        let span = tracing::info_span!("burst", writer = w);
                        let _in = span.enter();
                        for _ in 0..BURST {
                            tracing::info!(n = i, what = "tick", "event");
                            i += 1;
                        }
                        drop(_in);
                        drop(span);
                        std::thread::sleep(PERIOD);
                    }
                });
            });
        }
        let snap = || {
            let st = recorder.stats();
            (st.written + st.lost, st.lost, st.drained, process_cpu())
        };
        std::thread::sleep(warmup);
        let ((off0, lost0, drained0, cpu0), t0) = (snap(), Instant::now());
        std::thread::sleep(window);
        let ((off1, lost1, drained1, cpu1), elapsed) = (snap(), t0.elapsed());
        stop.store(true, Relaxed);
        let (offered, lost, drained) = (off1 - off0, lost1 - lost0, drained1 - drained0);
        let cpu = cpu1.saturating_sub(cpu0);
        let got = Measured { delivered: drained, committed: offered - lost, drops: lost, elapsed, cpu: Some(cpu) };
        let off = Measured { delivered: offered, committed: offered - lost, drops: lost, elapsed, cpu: None };
        let mut rows = [
            Row::new(bench, "ringtrace-tracing", "live-tracing/drained", WRITERS, &got),
            Row::new(bench, "ringtrace-tracing", "live-tracing/offered", WRITERS, &off),
        ];
        if drained == 0 {
            // `Row::new` counts committed records for a row that delivered none.
            rows[0].mrec_per_s = 0.0;
        }
        rows
    });
    drop(dispatch);
    if let Err(e) = recorder.finish() {
        panic!("{bench}: finishing the stream: {e}");
    }
    let _ = std::fs::remove_file(&path);
    rows
}
