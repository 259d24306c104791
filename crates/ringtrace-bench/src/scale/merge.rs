//! `scale-merge`: a channel's reader as writers are added.
//!
//! * `drained`, 1, 4, 16, 64, 256 and 1024 writers: a `Channel<Discard, Monotonic>`
//!   (the defaults), its reader attached first; one thread makes the N producers
//!   (`channel.producer()`, a ring each) and writes 4,194,304 records of 16 bytes in
//!   all (quick mode: an eighth), an equal share each, round robin: record i of every
//!   producer before record i+1 of any. So the stamps interleave the same way in every
//!   run, and in the merge's worst way (each delivery from another lane than the
//!   last); with a thread each, the scheduler decided how they interleaved, and the
//!   4-writer row moved between 25 and 127 ns from run to run. Each ring holds twice
//!   its share, so nothing can be lost: the bench fails if a write is refused or if the
//!   reader delivers a different count. The producers are dropped (their rings kept:
//!   `retain_exited`); then the reader `drain`s the channel: the row's wall time is the
//!   drain's, its `CPUns/rec` the reader thread's CPU time
//!   (`CLOCK_THREAD_CPUTIME_ID`) per record: the merge's cost per record at that many
//!   producers.
//! * `live/offered` and `live/delivered`, 256 writers: each writes bursts of 64 records
//!   with 16 ms sleeps between them (about a million records a second in all) while
//!   the reader follows the channel in `poll` (10 ms timeout). `live/offered` counts
//!   the writes attempted in the window (a refused one included: its ring was full,
//!   the reader behind), `live/delivered` the records the reader delivered in the same
//!   window, with the reader thread's CPU time per record. The target: the reader
//!   keeps up, delivering at least 0.9x the records/s offered.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use ringtrace::clock::Monotonic;
use ringtrace::config::Discard;
use ringtrace::{Channel, Wakeup};

use crate::channel::thread_cpu_ns;
use crate::harness::Measured;
use crate::{Progress, Row};

pub(super) const BENCH: &str = "scale-merge";
/// Writer counts of the `drained` rows.
const WRITERS: [usize; 6] = [1, 4, 16, 64, 256, 1024];
/// Records of a `drained` row in all (quick mode: an eighth).
const TOTAL: u64 = 1 << 22;
/// Payload bytes of a record.
const PAYLOAD: usize = 16;
/// A ring record's bytes: its 8-byte header, the 8-byte timestamp, the payload.
const RECORD_BYTES: u64 = 8 + 8 + PAYLOAD as u64;
/// Writers of the live rows.
pub(super) const LIVE_WRITERS: usize = 256;
/// A live writer's burst, and its sleep after each.
const BURST: u64 = 64;
const PERIOD: Duration = Duration::from_millis(16);
/// Each live writer's ring: two seconds of its records.
const LIVE_RING: u64 = 256 << 10;

/// The rows: `drained` at every writer count (the order alternating from round to
/// round), then the live pair.
pub(super) fn rows(quick: bool, round: usize, progress: &mut Progress) -> Vec<Row> {
    let total = if quick { TOTAL / 8 } else { TOTAL };
    let mut out = Vec::new();
    for n in super::alternate(&WRITERS, round) {
        progress.step(&format!("{BENCH} drained writers={n}"));
        out.push(drained(n, total));
    }
    progress.step(&format!("{BENCH} live writers={LIVE_WRITERS}"));
    let (warmup, window) = if quick {
        (Duration::from_millis(100), Duration::from_millis(250))
    } else {
        (Duration::from_millis(200), Duration::from_millis(500))
    };
    out.extend(live(LIVE_WRITERS, warmup, window));
    progress.step(&format!("{BENCH} live-tracing writers={}", super::live_tracing::WRITERS));
    out.extend(super::live_tracing::rows(BENCH, warmup, window));
    out
}

/// `writers` producers write `total` records round robin and are dropped, then the
/// reader drains them.
fn drained(writers: usize, total: u64) -> Row {
    let share = total / writers as u64;
    let ring = (share * RECORD_BYTES * 2).next_power_of_two().max(4096);
    // Every exited writer's ring is kept for the reader.
    let channel =
        Channel::<Discard, Monotonic>::builder(ring).retain_exited(writers).build(Monotonic).expect("valid channel");
    let mut reader = channel.reader().expect("the channel's one reader");
    let mut producers: Vec<_> = (0..writers).map(|_| channel.producer().expect("channel producer")).collect();
    let mut rec = [0u8; PAYLOAD];
    for seq in 0..share {
        rec[..8].copy_from_slice(&seq.to_le_bytes());
        for (w, p) in producers.iter_mut().enumerate() {
            rec[8..].copy_from_slice(&(w as u64).to_le_bytes());
            if let Err(e) = p.output(&rec, Wakeup::NoWakeup) {
                panic!("{BENCH}: writer {w} of {writers}: record {seq} refused ({e}); the ring holds twice the share");
            }
        }
    }
    drop(producers);
    let (t0, c0) = (Instant::now(), thread_cpu_ns());
    let got = reader
        .drain(|r| {
            std::hint::black_box(r.data);
            Ok::<(), Infallible>(())
        })
        .expect("a channel only this process writes");
    let (elapsed, cpu) = (t0.elapsed(), thread_cpu_ns() - c0);
    let written = share * writers as u64;
    assert_eq!(got as u64, written, "{BENCH}: {writers} writers wrote {written} records, the reader delivered {got}");
    let m =
        Measured { delivered: got as u64, committed: written, drops: 0, elapsed, cpu: Some(Duration::from_nanos(cpu)) };
    let mut row = Row::new(BENCH, "ringtrace-channel", "drained", writers, &m);
    row.record_bytes = PAYLOAD;
    row
}

/// A live writer's counts, alone on its line.
#[repr(align(128))]
#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    refused: AtomicU64,
}

/// `writers` paced writers and a reader following them: the `live/offered` and
/// `live/delivered` rows of one window.
fn live(writers: usize, warmup: Duration, window: Duration) -> [Row; 2] {
    let channel = Channel::<Discard, Monotonic>::builder(LIVE_RING)
        .retain_exited(writers)
        .build(Monotonic)
        .expect("valid channel");
    let mut reader = channel.reader().expect("the channel's one reader");
    let counts: Vec<Counts> = (0..writers).map(|_| Counts::default()).collect();
    let stop = AtomicBool::new(false);
    // The reader's count and CPU time, published after each poll.
    let (delivered, reader_cpu) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for c in &counts {
            let (channel, stop) = (&channel, &stop);
            s.spawn(move || {
                let mut p = channel.producer().expect("channel producer");
                let (mut ok, mut refused) = (0u64, 0u64);
                let rec = [7u8; PAYLOAD];
                while !stop.load(Relaxed) {
                    for _ in 0..BURST {
                        match p.output(&rec, Wakeup::NoWakeup) {
                            Ok(()) => ok += 1,
                            Err(_) => refused += 1,
                        }
                    }
                    c.ok.store(ok, Relaxed);
                    c.refused.store(refused, Relaxed);
                    std::thread::sleep(PERIOD);
                }
            });
        }
        let (stop, delivered, reader_cpu, reader) = (&stop, &delivered, &reader_cpu, &mut reader);
        s.spawn(move || {
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                n += reader
                    .poll(Some(Duration::from_millis(10)), |r| {
                        std::hint::black_box(r.data);
                    })
                    .expect("a channel only this process writes") as u64;
                delivered.store(n, Relaxed);
                reader_cpu.store(thread_cpu_ns(), Relaxed);
            }
        });
        let snap = || {
            let (mut ok, mut refused) = (0, 0);
            for c in &counts {
                ok += c.ok.load(Relaxed);
                refused += c.refused.load(Relaxed);
            }
            (ok, refused, delivered.load(Relaxed), reader_cpu.load(Relaxed))
        };
        std::thread::sleep(warmup);
        let ((ok0, ref0, d0, cpu0), t0) = (snap(), Instant::now());
        std::thread::sleep(window);
        let ((ok1, ref1, d1, cpu1), elapsed) = (snap(), t0.elapsed());
        stop.store(true, Relaxed);
        let (committed, drops) = (ok1 - ok0, ref1 - ref0);
        let got = Measured {
            delivered: d1 - d0,
            committed,
            drops,
            elapsed,
            cpu: Some(Duration::from_nanos(cpu1.saturating_sub(cpu0))),
        };
        let offered = Measured { delivered: committed + drops, committed, drops, elapsed, cpu: None };
        let mut rows = [
            Row::new(BENCH, "ringtrace-channel", "live/delivered", writers, &got),
            Row::new(BENCH, "ringtrace-channel", "live/offered", writers, &offered),
        ];
        rows.iter_mut().for_each(|r| r.record_bytes = PAYLOAD);
        if got.delivered == 0 {
            // `Row::new` counts committed records for a row that delivered none.
            rows[0].mrec_per_s = 0.0;
        }
        rows
    })
}
