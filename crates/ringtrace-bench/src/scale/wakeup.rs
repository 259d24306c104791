//! `scale-wakeup`: how soon a reader asleep in `poll` holds a sampled writer's record.
//!
//! One writer thread writes a record, then sleeps 100 µs (about 150 µs a period with
//! the timer's slack), over and over; one reader thread waits in `poll` with a 20 ms
//! timeout. The record's latency runs from its commit's timestamp to the reader holding
//! it, both read with [`BestClock`] (the TSC where it is invariant):
//!
//! * `ringtrace-channel`: a `Channel<Discard, BestClock>` (1 MiB ring), its writer
//!   through its own `channel.producer()`, `Wakeup::Default`; the reader in
//!   `ChannelReader::poll`; the timestamp is the channel's own stamp of the record.
//! * `ringtrace-channel-file`: the same through a channel file (in `/dev/shm` where
//!   there is one): the writer through a second handle of the file (`Channel::open`,
//!   its own mapping, as another process would), the reader on the file's bell line
//!   (a futex word, `fence(SeqCst)` on both sides).
//! * `ringtrace`: a plain `MpscRing` of 1 MiB, as the `async` bench's blocking
//!   consumer (`wakeups.rs`): the writer `output`s the clock's raw reading with
//!   `Wakeup::Default`, the consumer waits in `Consumer::poll`.
//!
//! Every record delivered in the window is a sample; the rows carry `p50_ns` and
//! `p99_ns`, records/s and the process's CPU time per record (both threads: a reader
//! that polls on a timer pays for it here). The target: the channel's p50 and p99
//! within 2x of the ring's.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ringtrace::clock::{BestClock, Clock};
use ringtrace::config::Discard;
use ringtrace::{Channel, MpscRing, Wakeup};

use crate::harness::{process_cpu, Measured, RunCfg};
use crate::{Progress, Row};

pub(super) const BENCH: &str = "scale-wakeup";
pub(super) const VARIANT: &str = "poll/sampled";
const RING: u64 = 1 << 20;
/// The writer's sleep after each record.
const GAP: Duration = Duration::from_micros(100);
/// The reader's `poll` timeout: it looks at the stop flag this often when idle.
const TIMEOUT: Duration = Duration::from_millis(20);

/// The three rows, in an order alternating from round to round.
pub(super) fn rows(cfg: &RunCfg, quick: bool, round: usize, progress: &mut Progress) -> Vec<Row> {
    // At least 200 ms of samples (a thousand or more) for a p99.
    let window = cfg.duration.max(Duration::from_millis(if quick { 200 } else { 400 }));
    let mut out = Vec::new();
    for imp in super::alternate(&["ringtrace-channel", "ringtrace-channel-file", "ringtrace"], round) {
        progress.step(&format!("{BENCH} {imp}"));
        let (m, lat) = match imp {
            "ringtrace-channel" => run_channel(cfg.warmup, window),
            "ringtrace-channel-file" => run_channel_file(cfg.warmup, window),
            _ => run_ring(cfg.warmup, window),
        };
        let mut row = Row::new(BENCH, imp, VARIANT, 1, &m);
        row.p50_ns = super::quantile(&lat, 0.50);
        row.p99_ns = super::quantile(&lat, 0.99);
        out.push(row);
    }
    out
}

/// What the reader shares with the measuring thread.
#[derive(Default)]
struct Window {
    measuring: AtomicBool,
    stop: AtomicBool,
    delivered: AtomicU64,
    samples: Mutex<Vec<u64>>,
}

impl Window {
    /// The reader holds a record stamped `stamp_ns` at `now_ns`.
    fn sample(&self, local: &mut Vec<u64>, stamp_ns: u64, now_ns: u64) {
        if self.measuring.load(Relaxed) {
            self.delivered.fetch_add(1, Relaxed);
            local.push(now_ns.saturating_sub(stamp_ns));
        }
    }

    /// Runs `write` every [`GAP`] in one thread and `read` in another (both until
    /// `stop`) through a warmup and a measured window.
    fn run(
        &self,
        warmup: Duration,
        window: Duration,
        mut write: impl FnMut() + Send,
        read: impl FnOnce(&Window) + Send,
    ) -> (Measured, Vec<u64>) {
        let m = std::thread::scope(|s| {
            s.spawn(|| {
                while !self.stop.load(Relaxed) {
                    write();
                    std::thread::sleep(GAP);
                }
            });
            s.spawn(|| read(self));
            std::thread::sleep(warmup);
            let (t0, cpu0) = (Instant::now(), process_cpu());
            self.measuring.store(true, Relaxed);
            std::thread::sleep(window);
            self.measuring.store(false, Relaxed);
            let (elapsed, cpu) = (t0.elapsed(), process_cpu().saturating_sub(cpu0));
            self.stop.store(true, Relaxed);
            let delivered = self.delivered.load(Relaxed);
            Measured { delivered, committed: delivered, drops: 0, elapsed, cpu: Some(cpu) }
        });
        // The scope joined both threads: the reader's samples are in.
        (m, std::mem::take(&mut *self.samples.lock().unwrap_or_else(|e| e.into_inner())))
    }
}

fn run_channel(warmup: Duration, window: Duration) -> (Measured, Vec<u64>) {
    let clock = BestClock::new();
    let channel = Channel::<Discard, BestClock>::builder(RING).build(clock).expect("valid channel");
    let producer = channel.producer().expect("channel producer");
    run_channel_on(&channel, producer, clock, warmup, window)
}

/// The same through a channel file, its writer another handle of the file (its own
/// mapping of the bell line), as a writer in another process has.
fn run_channel_file(warmup: Duration, window: Duration) -> (Measured, Vec<u64>) {
    let clock = BestClock::new();
    let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
    let path = dir.join(format!("ringtrace-bench-wakeup-{}.chan", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let channel =
        Channel::<Discard, BestClock>::builder(RING).max_producers(1).create(&path, clock).expect("channel file");
    let writer = Channel::<Discard, BestClock>::open(&path).expect("the channel file, opened again");
    let _ = std::fs::remove_file(&path);
    let producer = writer.producer().expect("channel file producer");
    run_channel_on(&channel, producer, clock, warmup, window)
}

fn run_channel_on(
    channel: &Channel<Discard, BestClock>,
    mut producer: ringtrace::channel::ChannelProducer<Discard, BestClock>,
    clock: BestClock,
    warmup: Duration,
    window: Duration,
) -> (Measured, Vec<u64>) {
    let mut reader = channel.reader().expect("the channel's one reader");
    let w = Window::default();
    w.run(
        warmup,
        window,
        move || {
            let _ = producer.output(&[0u8; 8], Wakeup::Default);
        },
        move |w| {
            let mut local = Vec::new();
            while !w.stop.load(Relaxed) {
                reader
                    .poll(Some(TIMEOUT), |r| w.sample(&mut local, r.timestamp, clock.now()))
                    .expect("a channel only this process writes");
            }
            w.samples.lock().unwrap_or_else(|e| e.into_inner()).append(&mut local);
        },
    )
}

fn run_ring(warmup: Duration, window: Duration) -> (Measured, Vec<u64>) {
    let clock = BestClock::new();
    let ring = MpscRing::new(RING).expect("valid ring");
    let mut consumer = ring.consumer().expect("consumer");
    let mut producer = ring.producer().expect("producer");
    let w = Window::default();
    w.run(
        warmup,
        window,
        move || {
            let _ = producer.output(&clock.raw().to_le_bytes(), Wakeup::Default);
        },
        move |w| {
            let mut local = Vec::new();
            while !w.stop.load(Relaxed) {
                consumer
                    .poll(Some(TIMEOUT), |rec: &[u8]| {
                        let now = clock.raw_to_ns(clock.raw());
                        let stamp = u64::from_le_bytes(rec[..8].try_into().expect("8-byte records"));
                        w.sample(&mut local, clock.raw_to_ns(stamp), now);
                    })
                    .expect("a ring only this process writes");
            }
            w.samples.lock().unwrap_or_else(|e| e.into_inner()).append(&mut local);
        },
    )
}
