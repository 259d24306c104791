//! A logger ring: several threads write log lines into one multi-producer ring, and
//! one consumer (here the main thread) reads them in the order they were reserved.
//!
//! Run: `cargo run --release -p ringtrace --example logger`

use std::time::{Duration, Instant};

use ringtrace::{MpscRing, Wakeup};

const THREADS: usize = 4;
const LINES_PER_THREAD: usize = 10_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A 1 MiB ring, many producers, one consumer. A full ring refuses new records at
    // once (discard mode) and counts them in `stats().lost`: a logger never blocks.
    let ring = MpscRing::new(1 << 20)?;
    let mut consumer = ring.consumer()?;

    // One producer handle per thread (a handle is `Send`; `clone()` makes another).
    let mut threads = Vec::new();
    for t in 0..THREADS {
        let mut producer = ring.producer()?;
        threads.push(std::thread::spawn(move || {
            for i in 0..LINES_PER_THREAD {
                let line = format!("thread {t}: line {i}");
                // reserve + copy + commit; an error means the ring was full and the
                // line was counted as lost.
                let _ = producer.output(line.as_bytes(), Wakeup::Default);
            }
        }));
    }

    // The consumer: wait for records (sleeping in `poll`, woken by the producers) until
    // every line was either read or counted as lost. A deadline guards against a bug.
    let total = (THREADS * LINES_PER_THREAD) as u64;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut read = 0u64;
    while read + ring.stats().lost < total {
        if Instant::now() > deadline {
            return Err(format!("timed out: read {read} of {total}").into());
        }
        consumer.poll(Some(Duration::from_millis(100)), |rec: &[u8]| {
            // `rec` points into the ring: no copy. Print the first few lines.
            if read < 3 {
                println!("read: {}", String::from_utf8_lossy(rec));
            }
            read += 1;
        })?;
    }
    for t in threads {
        t.join().expect("producer thread panicked");
    }

    let stats = ring.stats();
    println!(
        "{THREADS} threads wrote {total} lines: {read} read, {} lost (ring full), {} committed",
        stats.lost, stats.committed
    );
    assert_eq!(read, stats.committed);
    Ok(())
}
