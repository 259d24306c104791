//! Helpers shared by the integration tests (the generic ones ringtrace-fixtures',
//! shared with the other crates' tests).
#![allow(dead_code, unused_imports)]

use std::path::Path;

pub use ringtrace_fixtures::{dispatch, TempDir};
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::Builder;

/// A trace of a few events (three, one thread), dumped by an in-memory flight recorder
/// to `dump` and read back.
pub fn dumped_trace(dump: &Path) -> Trace {
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        for n in 0..3u64 {
            tracing::info!(n, secret = "root's data", "recorded");
        }
    });
    recorder.dump(dump).unwrap();
    Trace::open(dump).unwrap()
}
