//! A program instrumented with `tracing` gets a flight recorder by adding one layer:
//! each thread's newest events stay in a ring of its own, in a directory that
//! `ringtrace decode DIR` reads from outside (live, or after a crash), and a panic
//! would dump them to a file (`panic.rtt`; this program does not panic). At the end it
//! dumps them on demand, and leaves the dump and the directory to read:
//!
//!     cargo run --release -p ringtrace-tracing --example flight_recorder
//!     ringtrace decode /tmp/ringtrace-example/dump.rtt
//!     ringtrace decode /tmp/ringtrace-example/recorder
//!
//! (`$TMPDIR` in place of `/tmp` where it is set.)

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Worker threads, and the jobs each runs.
const WORKERS: u64 = 4;
const JOBS: u64 = 10_000;
/// The events the workers emit: a `read` per job, and a `slow job` every 1000th.
pub const EMITTED: u64 = WORKERS * (JOBS + JOBS / 1000);

/// What the dump kept, each number counted as what it is: events (what `tracing`
/// emitted) and records (what the rings hold: an event is one, and so are a span's
/// creation, entry, exit and close).
pub fn summary(kept_events: usize, kept_records: usize, emitted: u64, stats: &ringtrace_tracing::Stats) -> String {
    format!(
        "{kept_events} events kept (in {kept_records} records) of the {emitted} emitted; the rings took {} \
         records, spans' included, and overwrote the oldest {} to make room",
        stats.written, stats.overwritten
    )
}

// `pub`: crates/ringtrace-cli/tests/examples.rs runs it, then the commands above.
pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join("ringtrace-example");
    let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder()
        .per_thread_bytes(1 << 20) // the newest ~1 MiB of events per thread
        .directory(dir.join("recorder")) // readable from outside: ringtrace decode DIR
        .replace_existing(true)
        .build()?;
    recorder.install_panic_hook(dir.join("panic.rtt"))?;
    tracing_subscriber::registry().with(layer).init();

    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            std::thread::Builder::new().name(format!("worker-{w}")).spawn(move || {
                for job in 0..JOBS {
                    let span = tracing::info_span!("job", worker = w, job);
                    let _entered = span.enter();
                    tracing::debug!(bytes = job * 64, path = "/data/in", "read");
                    if job % 1000 == 999 {
                        tracing::warn!(elapsed_ms = 12.5, "slow job");
                    }
                }
            })
        })
        .collect::<Result<_, _>>()?;
    for w in workers {
        w.join().expect("worker");
    }

    // On demand: the newest events of every thread, merged by time.
    recorder.dump(dir.join("dump.rtt"))?;
    let trace = ringtrace_tracing::decode::Trace::open(dir.join("dump.rtt"))?;
    let events = trace.events();
    let newest = events.last().ok_or("the dump holds no event")?;
    assert_eq!(newest.spans[0].name, "job");
    assert_eq!(trace.lost(), 0, "a flight recorder overwrites, it does not lose");
    println!("{}", summary(events.len(), trace.len(), EMITTED, &recorder.stats()));
    println!(
        "newest: {}",
        ringtrace_tracing::decode::text::event_line(&trace, newest, ringtrace_tracing::decode::text::Format::Text)
    );
    println!("read it: ringtrace decode {}", dir.join("dump.rtt").display());
    Ok(())
}
