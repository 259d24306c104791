//! The flight_recorder example's summary counts each number as what it is: the events
//! kept of the events emitted, and the records the rings took (a span's creation, entry,
//! exit and close are records too, not events).

mod common;

#[path = "../examples/flight_recorder.rs"]
#[allow(dead_code)] // its `main` is run by the command's example test
mod example;

use common::{dispatch, TempDir};
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::Builder;

#[test]
fn the_summary_counts_events_as_events_and_records_as_records() {
    const JOBS: u64 = 500;
    let dir = TempDir::new("example-summary");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(1 << 20).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        for job in 0..JOBS {
            let _entered = tracing::info_span!("job", job).entered();
            tracing::debug!(bytes = job * 64, "read");
        }
    });
    recorder.dump(dir.join("dump.rtt")).unwrap();
    let trace = Trace::open(dir.join("dump.rtt")).unwrap();
    let (events, records) = (trace.events().len(), trace.len());
    let stats = recorder.stats();
    // Nothing overwritten: every event emitted is kept, and the spans made more records.
    assert_eq!(events as u64, JOBS);
    assert!(stats.written > JOBS && records as u64 == stats.written, "{stats:?}, {records} records");
    let line = example::summary(events, records, JOBS, &stats);
    assert!(
        line.starts_with(&format!("{JOBS} events kept (in {records} records) of the {JOBS} emitted; ")),
        "events are counted apart from records: {line}"
    );
    assert!(line.contains(&format!("the rings took {} records", stats.written)), "{line}");
}
