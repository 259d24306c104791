//! `async`: the async consumer (`ringtrace::tokio::AsyncReader` on a current-thread
//! tokio runtime) against the blocking one (`Consumer::poll`), one producer, 8-byte
//! records that carry the TSC (or `CLOCK_MONOTONIC`) time of their `output`. The
//! consumer reads the clock when it holds each record: the difference is the record's
//! latency, from commit to the consumer holding it. Two producers:
//!
//! * `sampled`: bursts of 16 records with 200 µs sleeps between them, so that the
//!   consumer sleeps between bursts and every burst's first record measures a wakeup
//!   (the sampled case of a tracer's agent);
//! * `busy`: a producer that never stops (a full ring makes it yield): records per
//!   second, and latency that is mostly the ring's backlog.
//!
//! Rows report records per second, CPU time per record (every thread of the process,
//! the runtime's included), and latency percentiles (`p50_ns`, `p99_ns`) over the
//! window (`busy`: every 64th record).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringtrace::clock::{BestClock, Clock};
use ringtrace::tokio::AsyncReader;
use ringtrace::{ConsumeError, Consumer, MpscRing, Wakeup};

use crate::harness::{process_cpu, Measured, RunCfg};
use crate::{Progress, Row, Selection};

const RING: u64 = 1 << 20;
const BURST: u64 = 16;
const PAUSE: Duration = Duration::from_micros(200);

/// The `async` rows: blocking and async consumers, sampled and busy producers.
pub fn rows(cfg: &RunCfg, sel: &Selection, progress: &mut Progress) -> Vec<Row> {
    let mut out = Vec::new();
    if !sel.wants("async") {
        return out;
    }
    // Which consumer goes first alternates from call to call (round to round), as
    // ringtrace and its peers do in the other benches.
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let order = if CALLS.fetch_add(1, Relaxed) % 2 == 0 { [false, true] } else { [true, false] };
    for sampled in [true, false] {
        let load = if sampled { "sampled" } else { "busy" };
        for asynchronous in order {
            let how = if asynchronous { "async" } else { "blocking" };
            progress.step(&format!("async ringtrace {how}/{load}"));
            let (m, lat) = run(cfg, sampled, asynchronous);
            let mut row = Row::new("async", "ringtrace", format!("{how}/{load}"), 1, &m);
            row.p50_ns = percentile(&lat, 0.50);
            row.p99_ns = percentile(&lat, 0.99);
            out.push(row);
        }
    }
    out
}

/// The `q` quantile of `samples` (sorted here), in nanoseconds.
pub(crate) fn percentile(samples: &[u64], q: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_unstable();
    let i = ((s.len() - 1) as f64 * q).round() as usize;
    Some(s[i] as f64)
}

/// What the consumer side shares with the measuring thread.
#[derive(Default)]
struct Window {
    /// Records delivered while measuring.
    delivered: AtomicU64,
    measuring: AtomicBool,
    /// Latency samples taken while measuring, nanoseconds.
    samples: Mutex<Vec<u64>>,
}

/// The consumer's per-record work: count it, and sample its latency while measuring.
struct Sampler<'a> {
    clock: BestClock,
    every: u64,
    seen: u64,
    local: Vec<u64>,
    window: &'a Window,
}

impl Sampler<'_> {
    #[inline]
    fn record(&mut self, rec: &[u8]) {
        let now = self.clock.raw();
        self.seen += 1;
        if self.window.measuring.load(Relaxed) {
            self.window.delivered.fetch_add(1, Relaxed);
            if self.seen % self.every == 0 {
                let stamp = u64::from_le_bytes(rec[..8].try_into().expect("8-byte records"));
                let ns = self.clock.raw_to_ns(now).saturating_sub(self.clock.raw_to_ns(stamp));
                self.local.push(ns);
            }
        }
    }

    fn flush(&mut self) {
        self.window.samples.lock().unwrap().append(&mut self.local);
    }
}

fn run(cfg: &RunCfg, sampled: bool, asynchronous: bool) -> (Measured, Vec<u64>) {
    let ring = MpscRing::new(RING).expect("valid ring");
    let consumer = ring.consumer().expect("consumer");
    let mut producer = ring.producer().expect("producer");
    let clock = BestClock::new();
    let window = Arc::new(Window::default());
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));

    let writer = {
        let (stop, committed) = (stop.clone(), committed.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                if sampled {
                    for _ in 0..BURST {
                        if producer.output(&clock.raw().to_le_bytes(), Wakeup::Default).is_ok() {
                            n += 1;
                        }
                    }
                    std::thread::sleep(PAUSE);
                } else {
                    for _ in 0..1024 {
                        if producer.output(&clock.raw().to_le_bytes(), Wakeup::Default).is_err() {
                            std::thread::yield_now();
                        } else {
                            n += 1;
                        }
                    }
                }
                committed.store(n, Relaxed);
            }
            // The producer is dropped here: the consumer is told (`Disconnected`).
        })
    };
    let every = if sampled { 1 } else { 64 };
    let reader = {
        let window = window.clone();
        std::thread::spawn(move || {
            let mut s = Sampler { clock, every, seen: 0, local: Vec::new(), window: &window };
            if asynchronous {
                consume_async(consumer, &mut s);
            } else {
                consume_blocking(consumer, &mut s);
            }
            s.flush();
        })
    };

    std::thread::sleep(cfg.warmup);
    let (c0, t0, cpu0) = (committed.load(Relaxed), Instant::now(), process_cpu());
    window.measuring.store(true, Relaxed);
    std::thread::sleep(cfg.duration);
    window.measuring.store(false, Relaxed);
    let (elapsed, cpu) = (t0.elapsed(), process_cpu().saturating_sub(cpu0));
    let c1 = committed.load(Relaxed);
    stop.store(true, Relaxed);
    writer.join().expect("producer thread");
    reader.join().expect("consumer thread");
    let delivered = window.delivered.load(Relaxed);
    let samples = std::mem::take(&mut *window.samples.lock().unwrap());
    (Measured { delivered, committed: c1 - c0, drops: 0, elapsed, cpu: Some(cpu) }, samples)
}

/// `Consumer::poll` until every producer is gone.
fn consume_blocking(mut c: Consumer, s: &mut Sampler<'_>) {
    loop {
        match c.poll(Some(Duration::from_millis(100)), |rec: &[u8]| s.record(rec)) {
            Ok(_) => {}
            Err(ConsumeError::Disconnected) => return,
            Err(e) => panic!("poll: {e}"),
        }
    }
}

/// `AsyncReader::consume` on a current-thread runtime until every producer is gone.
fn consume_async(c: Consumer, s: &mut Sampler<'_>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    rt.block_on(async move {
        let mut reader = AsyncReader::new(c).expect("registered with the reactor");
        loop {
            match reader.consume(|rec: &[u8]| s.record(rec)).await {
                Ok(_) => {}
                Err(ConsumeError::Disconnected) => return,
                Err(e) => panic!("consume: {e}"),
            }
        }
    });
}
