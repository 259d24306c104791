//! Channels: every producer thread gets a ring of its own (no shared cache line, no
//! atomic read-modify-write when writing), records are stamped with a clock, and a
//! reader merges the rings by timestamp while the threads write.
//!
//! Run: `cargo run --release -p ringtrace --example channels`

use std::time::{Duration, Instant};

use ringtrace::clock::BestClock;
use ringtrace::config::Discard;
use ringtrace::{Channel, Wakeup};

const THREADS: u8 = 3;
const EVENTS_PER_THREAD: u32 = 20_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Discard mode (a live reader consumes), 1 MiB per producer, stamped with the TSC
    // where it is invariant, else CLOCK_MONOTONIC. Timestamps reach the reader as
    // CLOCK_MONOTONIC nanoseconds either way.
    let clock = BestClock::new();
    println!("clock: {}", if clock.is_tsc() { "TSC" } else { "CLOCK_MONOTONIC" });
    let channel = Channel::<Discard, BestClock>::builder(1 << 20).build(clock)?;
    let mut reader = channel.reader()?;

    let total = u64::from(THREADS) * u64::from(EVENTS_PER_THREAD);
    let mut read = 0u64;
    std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error>> {
        for t in 0..THREADS {
            // A per-thread producer: its own single-producer ring.
            let mut producer = channel.producer()?;
            s.spawn(move || {
                for i in 0..EVENTS_PER_THREAD {
                    let mut event = [0u8; 5];
                    event[0] = t;
                    event[1..].copy_from_slice(&i.to_le_bytes());
                    // Stamped at reserve; a full ring refuses it (counted in `lost`).
                    let _ = producer.output(&event, Wakeup::Default);
                }
            });
        }

        // The live reader, while the threads write: records of all rings, one
        // sequence in timestamp order. Wait until every event was read or counted lost.
        let deadline = Instant::now() + Duration::from_secs(10);
        while read + channel.stats().lost < total {
            if Instant::now() > deadline {
                return Err(format!("timed out: read {read} of {total}").into());
            }
            reader.poll(Some(Duration::from_millis(100)), |rec| {
                if read < 3 {
                    println!("ts {} ns  producer {}  data {:?}", rec.timestamp, rec.producer, rec.data);
                }
                read += 1;
            })?;
        }
        Ok(())
    })?;

    let stats = channel.stats();
    println!(
        "{} producers wrote {} events: {read} read in timestamp order ({} late), {} lost",
        stats.producers, stats.written, stats.late, stats.lost
    );
    assert_eq!(read, stats.written);
    Ok(())
}
