//! A logger ring: several threads write log lines into one multi-producer ring, and
//! one consumer (here the main thread) reads them in the order they were reserved.
//! The ring is far smaller than what the threads write: a logger that must not drop
//! lines waits for room (`output_wait`) instead of losing them, and the consumer stops
//! when every writer is gone (`ConsumeError::Disconnected`).
//!
//! Run: `cargo run --release -p ringtrace --example logger`

use std::time::Duration;

use ringtrace::{ConsumeError, MpscRing, Wakeup};

const THREADS: usize = 4;
const LINES_PER_THREAD: usize = 10_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A 16 KiB ring, many producers, one consumer. `output` would refuse a line at once
    // when the ring is full (discard mode: counted in `stats().lost`, never blocking);
    // `output_wait` sleeps until the consumer makes room, up to its timeout.
    let ring = MpscRing::new(1 << 14)?;
    let mut consumer = ring.consumer()?;

    // One producer handle per thread (a handle is `Send`; `clone()` makes another).
    let mut threads = Vec::new();
    for t in 0..THREADS {
        let mut producer = ring.producer()?;
        threads.push(std::thread::spawn(move || {
            for i in 0..LINES_PER_THREAD {
                let line = format!("thread {t}: line {i}");
                // reserve + copy + commit, waiting for room; an error here means no room
                // came for 5 seconds (or the consumer went away): counted as lost.
                if let Err(e) = producer.output_wait(line.as_bytes(), Wakeup::Default, Some(Duration::from_secs(5))) {
                    eprintln!("thread {t}: {e}");
                }
            }
            // The handle is dropped here: once every one is, the consumer is told.
        }));
    }

    // The consumer: wait for records (sleeping in `poll`, woken by the producers) until
    // every producer is gone and their lines are read.
    let mut read = 0u64;
    loop {
        let polled = consumer.poll(Some(Duration::from_secs(10)), |rec: &[u8]| {
            // `rec` points into the ring: no copy. Print the first few lines.
            if read < 3 {
                println!("read: {}", String::from_utf8_lossy(rec));
            }
            read += 1;
        });
        match polled {
            Ok(0) => return Err(format!("no line for 10 s after {read}").into()),
            Ok(_) => {}
            Err(ConsumeError::Disconnected) => break,
            Err(e) => return Err(e.into()),
        }
    }
    for t in threads {
        t.join().expect("producer thread panicked");
    }

    let stats = ring.stats();
    let total = (THREADS * LINES_PER_THREAD) as u64;
    println!("{THREADS} threads wrote {total} lines through a 16 KiB ring: {read} read, {} lost", stats.lost);
    assert_eq!((read, stats.committed, stats.lost), (total, total, 0));
    Ok(())
}
