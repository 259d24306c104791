//! A recorder directory read while its process writes it, as `ringtrace decode DIR`
//! and `ringtrace snapshot DIR` read it: every thread that wrote is in every reading
//! (or the reading names the ring it could not read). A reading that silently left a
//! thread out would tell a crash investigation that the thread did nothing.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{dispatch, TempDir};
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::Builder;

/// Readings of the live directory (a reader that walked each ring from the position it
/// read before its copy left a thread out of about one reading in ten).
fn readings() -> usize {
    std::env::var("RINGTRACE_LIVE_READINGS").ok().and_then(|v| v.parse().ok()).unwrap_or(600)
}

#[test]
fn a_live_recorder_directory_shows_every_thread_in_every_reading() {
    let dir = TempDir::new("live");
    let rec_dir = dir.join("rec");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).directory(&rec_dir).build().unwrap();
    let dispatch = dispatch(layer);
    let threads = 3usize;
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..threads as u64)
        .map(|t| {
            let (dispatch, stop, started) = (dispatch.clone(), stop.clone(), started.clone());
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for i in 0..100u64 {
                            let span = tracing::info_span!("job", t, i);
                            let _e = span.enter();
                            tracing::info!(a = n, b = "some text", c = 2.5, d = i, "event");
                            n += 1;
                        }
                        if n == 100 {
                            // Release: pairs with the Acquire load below.
                            started.fetch_add(1, Ordering::Release);
                        }
                        std::thread::sleep(Duration::from_micros(200));
                    }
                })
            })
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    // Acquire: pairs with the threads' Release increments.
    while started.load(Ordering::Acquire) < threads {
        assert!(std::time::Instant::now() < deadline, "the threads did not start within a minute");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut unreadable = 0;
    for i in 0..readings() {
        let trace = Trace::open(&rec_dir).unwrap();
        let lanes: BTreeSet<u32> = trace.events().iter().map(|e| e.lane).collect();
        let problems = &trace.problems;
        unreadable += problems.unreadable_rings.len();
        assert_eq!(
            lanes.len() + problems.unreadable_rings.len(),
            threads,
            "reading {i}: threads {lanes:?} of {threads}, unreadable {:?}",
            problems.unreadable_rings
        );
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert!(unreadable * 10 < readings(), "{unreadable} rings unreadable in {} readings", readings());
    drop(recorder);
}
