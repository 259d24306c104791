//! `channel-scaling`: the write side of a [`Channel`] (one single-producer ring per
//! writer thread) as writers are added, next to the shared ring and a single-producer
//! reference. It reproduces LTTng's scalability table (Mathieu Desnoyers, "Generic Ring
//! Buffer Library (v2)", LKML RFC PATCH 00/20, 17 Aug 2010): "1 writer thread: 83 ns CPU
//! time/record, 2: 116, 4: 116, 8: 118".
//!
//! The metric is LTTng's: **`ns_per_rec` is CPU time per record**, the sum over writer
//! threads of their thread CPU time (`CLOCK_THREAD_CPUTIME_ID`, read by each writer at
//! the start and the end of its window) divided by the records they wrote. It does not
//! grow when writers outnumber cores and take turns: a writer that waits for a core is
//! not charged for the wait. `mrec_per_s` stays wall-clock: all writers' records over
//! the window's wall time. `drops_per_s` counts failed writes (for `rtrb`: pushes that
//! found the ring full and were retried).
//!
//! Rows (8-byte records; writers are threads started together on a barrier, each
//! writing for the whole window; 1, 2, 4 and 8 writers):
//!
//! * `ringtrace-channel` `ts=none`, `ts=tsc`, `ts=mono`: a `Channel<Overwrite, _>`
//!   stamping with [`NoClock`], [`Tsc::shared`] (rows left out, with a note, where the
//!   TSC is not invariant) or [`Monotonic`]; 1 MiB per writer's ring; no reader (a flight
//!   recorder: writers are never blocked, so the row measures the write side alone, as
//!   LTTng's test did). Each writer has its own `channel.producer()` and calls
//!   `output(&v.to_le_bytes(), Wakeup::NoWakeup)`. The rings retire 1 KiB ahead, as a
//!   `FlightRecorder` of 1 MiB does by default; `ts=none/builder-default` (1 writer)
//!   keeps the channel builder's default look-ahead, 0, with which every write gives up
//!   an old record itself (taking the retire lock, whose owner is the process id: a
//!   `getpid` system call per record).
//! * `ringtrace-mpsc` `ts=none`: one shared flight recorder (`RingBuf<Mpsc, Overwrite>`,
//!   1 MiB), every writer a clone of one producer.
//! * `crossbeam-arrayqueue` `force_push`: every writer `force_push`es into one
//!   `ArrayQueue` of 65,536 `u64`s with no reader (it gives up its oldest item when
//!   full): the flight recorder a user would otherwise build from a Rust crate.
//! * `rtrb` `ts=none`, 1 writer: a writer pushing `u64`s into an rtrb ring of 65,536
//!   items while another thread pops them; a push that finds the ring full is retried,
//!   so the writer's CPU time includes its waits for the consumer.
//! * `rtrb` and `ringtrace-channel` `ts=none/pop-inline`, 1 writer: one thread pushes a
//!   batch of 512 and then pops them back (the channel: a `Channel<Discard, NoClock>`
//!   and its reader; `ts=tsc/pop-inline` the same with TSC stamps); only the push loops are timed, with the same thread CPU clock read
//!   around each batch's loop. The clean "ns per push" figure. A pair of clock reads
//!   costs more than a few pushes (a system call: the vDSO has no thread CPU clock), so
//!   the median cost of an empty pair, measured before the window, is taken off each
//!   batch.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use ringtrace::clock::{Clock, Monotonic, NoClock, Tsc};
use ringtrace::config::{Discard, Overwrite};
use ringtrace::{Channel, FlightRecorder, Wakeup};

use crate::harness::{Measured, RunCfg};
use crate::{Progress, Row, Selection};

const BENCH: &str = "channel-scaling";
/// Each writer's ring (the channel), or the shared ring (`ringtrace-mpsc`).
const RING: u64 = 1 << 20;
/// Writer counts.
const WRITERS: [usize; 4] = [1, 2, 4, 8];
/// The channel's rings' retire look-ahead: what a `FlightRecorder` of the same size
/// uses by default (`min(capacity / 16, 1024)`), so that the channel and the shared ring
/// give up old records in the same steps. The channel builder's default is 0: see the
/// `ts=none/builder-default` row.
const AHEAD: u64 = 1024;
/// Pushes per timed batch of the pop-inline rows.
const BATCH: u64 = 512;
/// Writes between two looks at the phase flag.
const CHUNK: u64 = 1024;

/// The calling thread's CPU time in nanoseconds.
pub(crate) fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    // A thread's CPU time is never negative.
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// What the writers did in the window, and the CPU time they spent on it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuMeasured {
    /// `committed`, `drops` and the window's wall time.
    m: Measured,
    /// Thread CPU time summed over writers (pop-inline: over push loops), ns.
    cpu_ns: u64,
}

impl CpuMeasured {
    /// The row: wall-clock Mrec/s, CPU ns per record.
    fn row(&self, imp: &str, variant: &str, producers: usize) -> Row {
        self.row_of(BENCH, imp, variant, producers)
    }

    /// The row of `bench`: wall-clock Mrec/s, CPU ns per record.
    pub(crate) fn row_of(&self, bench: &str, imp: &str, variant: &str, producers: usize) -> Row {
        let mut r = Row::new(bench, imp, variant, producers, &self.m);
        r.ns_per_rec = if self.m.committed > 0 { self.cpu_ns as f64 / self.m.committed as f64 } else { f64::INFINITY };
        // The writers are the row's only threads.
        r.cpu_ns_per_rec = Some(r.ns_per_rec);
        r
    }
}

/// The phase of a run, alone on its line: every writer polls it.
#[repr(align(128))]
struct Phase(AtomicU8);
const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// One writer per `make(i)` (called in the writer's own thread), plus, if given, a
/// thread running `side` until the end (rtrb's consumer). Writers wait on a barrier,
/// write through the warmup, then count from the first time they see the window open
/// (reading their CPU clock) until they see it closed (reading it again): each
/// writer's records and CPU time cover the same span. `write(v)` says whether the
/// write went in.
pub(crate) fn run_writers<MW, W, S>(cfg: &RunCfg, writers: usize, make: MW, side: Option<S>) -> CpuMeasured
where
    MW: Fn(usize) -> W + Sync,
    W: FnMut(u64) -> bool,
    S: FnMut() + Send,
{
    let phase = Box::new(Phase(AtomicU8::new(WARMUP)));
    let barrier = Barrier::new(writers + 1);
    std::thread::scope(|s| {
        if let Some(mut side) = side {
            let phase = &phase.0;
            s.spawn(move || {
                while phase.load(Relaxed) != STOP {
                    side();
                }
            });
        }
        let handles: Vec<_> = (0..writers)
            .map(|i| {
                let (phase, barrier, make) = (&phase.0, &barrier, &make);
                s.spawn(move || {
                    let mut write = make(i);
                    barrier.wait();
                    let (mut ok, mut fail) = (0u64, 0u64);
                    let mut start = None;
                    loop {
                        for _ in 0..CHUNK {
                            if write(ok) {
                                ok += 1;
                            } else {
                                fail += 1;
                            }
                        }
                        match phase.load(Relaxed) {
                            WARMUP => {}
                            MEASURE => {
                                if start.is_none() {
                                    start = Some((thread_cpu_ns(), ok, fail));
                                }
                            }
                            _ => break,
                        }
                    }
                    let cpu = thread_cpu_ns();
                    // A writer that never ran while the window was open counts nothing.
                    start.map_or((0, 0, 0), |(c0, ok0, fail0)| (ok - ok0, fail - fail0, cpu - c0))
                })
            })
            .collect();
        barrier.wait();
        std::thread::sleep(cfg.warmup);
        let t0 = Instant::now();
        phase.0.store(MEASURE, Relaxed);
        std::thread::sleep(cfg.duration);
        phase.0.store(STOP, Relaxed);
        let elapsed = t0.elapsed();
        let mut out = CpuMeasured { m: Measured { elapsed, ..Measured::default() }, cpu_ns: 0 };
        for h in handles {
            let (ok, fail, cpu) = h.join().expect("writer thread");
            out.m.committed += ok;
            out.m.drops += fail;
            out.cpu_ns += cpu;
        }
        out
    })
}

/// `writers` threads, each with its own producer of a flight-recorder channel whose
/// rings retire [`AHEAD`] bytes ahead (`None`: the channel builder's default).
fn channel_rows<C: Clock>(cfg: &RunCfg, writers: usize, clock: C, ahead: Option<u64>) -> CpuMeasured {
    let builder = Channel::<Overwrite, C>::builder(RING);
    let builder = match ahead {
        Some(a) => builder.retire_ahead(a),
        None => builder,
    };
    let channel = builder.build(clock).expect("valid channel");
    let make = |_| {
        let mut p = channel.producer().expect("channel producer");
        move |v: u64| p.output(&v.to_le_bytes(), Wakeup::NoWakeup).is_ok()
    };
    run_writers(cfg, writers, make, None::<fn()>)
}

/// `writers` threads sharing one flight recorder, each with a clone of one producer.
fn mpsc_rows(cfg: &RunCfg, writers: usize) -> CpuMeasured {
    let ring = FlightRecorder::new(RING).expect("valid ring");
    let first = Mutex::new(ring.producer().expect("producer"));
    let make = |_| {
        let mut p = first.lock().unwrap_or_else(|e| e.into_inner()).clone();
        move |v: u64| p.output(&v.to_le_bytes(), Wakeup::NoWakeup).is_ok()
    };
    run_writers(cfg, writers, make, None::<fn()>)
}

/// `writers` threads `force_push` into one crossbeam `ArrayQueue` of 65,536 `u64`s with
/// no reader: the one concurrent overwrite-oldest queue among the Rust crates, so the
/// flight recorder a user would otherwise build. `force_push` never fails.
fn force_push_rows(cfg: &RunCfg, writers: usize) -> CpuMeasured {
    let q = crossbeam_queue::ArrayQueue::<u64>::new(crate::peers::CAPACITY);
    let make = |_| {
        let q = &q;
        move |v: u64| {
            q.force_push(v);
            true
        }
    };
    run_writers(cfg, writers, make, None::<fn()>)
}

/// One writer into rtrb while a thread pops; a full ring is retried.
fn rtrb_parallel(cfg: &RunCfg) -> CpuMeasured {
    let (p, mut c) = rtrb::RingBuffer::<u64>::new(crate::peers::CAPACITY);
    let p = Mutex::new(Some(p));
    let make = |_| {
        let mut p = p.lock().unwrap_or_else(|e| e.into_inner()).take().expect("one writer");
        move |v: u64| {
            let ok = p.push(v).is_ok();
            if !ok {
                std::hint::spin_loop();
            }
            ok
        }
    };
    let mut idle = crate::harness::Idle::default();
    let pop = move || {
        let n = c.slots();
        idle.after(n as u64);
        if n == 0 {
            return;
        }
        let chunk = c.read_chunk(n).expect("n slots are readable");
        for v in chunk.into_iter() {
            std::hint::black_box(v);
        }
    };
    run_writers(cfg, 1, make, Some(pop))
}

/// The median time between two back-to-back reads of the thread CPU clock: what a
/// timed batch pays for its own timing.
fn clock_pair_ns() -> u64 {
    let mut d: Vec<u64> = (0..1001)
        .map(|_| {
            let a = thread_cpu_ns();
            thread_cpu_ns() - a
        })
        .collect();
    d.sort_unstable();
    d[d.len() / 2]
}

/// One thread: `push_batch()` pushes [`BATCH`] records and says how many went in,
/// timed with the thread CPU clock; then `pop()` takes them back, untimed.
fn pop_inline<P: FnMut() -> u64, D: FnMut()>(cfg: &RunCfg, mut push_batch: P, mut pop: D) -> CpuMeasured {
    let pair = clock_pair_ns();
    let t = Instant::now();
    while t.elapsed() < cfg.warmup {
        push_batch();
        pop();
    }
    let mut m = Measured::default();
    let mut cpu = 0u64;
    let t0 = Instant::now();
    // At least one batch, so that a zero window still times one.
    loop {
        let a = thread_cpu_ns();
        let ok = push_batch();
        let b = thread_cpu_ns();
        pop();
        cpu += (b - a).saturating_sub(pair);
        m.committed += ok;
        m.drops += BATCH - ok;
        if t0.elapsed() >= cfg.duration {
            break;
        }
    }
    m.elapsed = t0.elapsed();
    CpuMeasured { m, cpu_ns: cpu }
}

fn rtrb_pop_inline(cfg: &RunCfg) -> CpuMeasured {
    let (mut p, mut c) = rtrb::RingBuffer::<u64>::new(crate::peers::CAPACITY);
    let push = || {
        let mut ok = 0;
        for v in 0..BATCH {
            ok += p.push(v).is_ok() as u64;
        }
        ok
    };
    let pop = || {
        let n = c.slots();
        if n > 0 {
            c.read_chunk(n).expect("readable").commit_all();
        }
    };
    pop_inline(cfg, push, pop)
}

fn channel_pop_inline<C: Clock>(cfg: &RunCfg, clock: C) -> CpuMeasured {
    let channel = Channel::<Discard, C>::builder(RING).build(clock).expect("valid channel");
    let mut reader = channel.reader().expect("the channel's one reader");
    let mut p = channel.producer().expect("channel producer");
    let push = || {
        let mut ok = 0;
        for v in 0..BATCH {
            ok += p.output(&v.to_le_bytes(), Wakeup::NoWakeup).is_ok() as u64;
        }
        ok
    };
    let pop = || {
        reader
            .drain(|r| {
                std::hint::black_box(r.data);
                Ok::<(), Infallible>(())
            })
            .expect("infallible");
    };
    pop_inline(cfg, push, pop)
}

/// The bench's windows: quick mode shortens them (20 rows a round).
fn window(cfg: &RunCfg, quick: bool) -> RunCfg {
    if !quick {
        return *cfg;
    }
    RunCfg { warmup: cfg.warmup.min(Duration::from_millis(50)), duration: cfg.duration.min(Duration::from_millis(120)) }
}

/// The `channel-scaling` rows, if selected.
pub fn rows(cfg: &RunCfg, sel: &Selection, progress: &mut Progress) -> Vec<Row> {
    let mut out = Vec::new();
    if !sel.wants(BENCH) {
        return out;
    }
    let cfg = &window(cfg, sel.quick);
    let tsc = Tsc::shared();
    if let Err(e) = &tsc {
        progress.step(&format!("{BENCH} ringtrace-channel ts=tsc rows skipped: {e}"));
    }
    // Writer count by writer count, every implementation back to back: rows compared
    // ran seconds apart.
    for n in WRITERS {
        progress.step(&format!("{BENCH} ringtrace-channel producers={n}"));
        out.push(channel_rows(cfg, n, NoClock, Some(AHEAD)).row("ringtrace-channel", "ts=none", n));
        if let Ok(t) = tsc {
            out.push(channel_rows(cfg, n, t, Some(AHEAD)).row("ringtrace-channel", "ts=tsc", n));
        }
        out.push(channel_rows(cfg, n, Monotonic, Some(AHEAD)).row("ringtrace-channel", "ts=mono", n));
        if n == 1 {
            let m = channel_rows(cfg, n, NoClock, None);
            out.push(m.row("ringtrace-channel", "ts=none/builder-default", n));
        }
        progress.step(&format!("{BENCH} ringtrace-mpsc producers={n}"));
        out.push(mpsc_rows(cfg, n).row("ringtrace-mpsc", "ts=none", n));
        progress.step(&format!("{BENCH} crossbeam-arrayqueue producers={n}"));
        out.push(force_push_rows(cfg, n).row("crossbeam-arrayqueue", "force_push", n));
    }
    progress.step(&format!("{BENCH} rtrb"));
    out.push(rtrb_parallel(cfg).row("rtrb", "ts=none", 1));
    out.push(rtrb_pop_inline(cfg).row("rtrb", "ts=none/pop-inline", 1));
    progress.step(&format!("{BENCH} ringtrace-channel pop-inline"));
    out.push(channel_pop_inline(cfg, NoClock).row("ringtrace-channel", "ts=none/pop-inline", 1));
    if let Ok(t) = tsc {
        out.push(channel_pop_inline(cfg, t).row("ringtrace-channel", "ts=tsc/pop-inline", 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_there_with_records_and_a_cpu_time() {
        let cfg = RunCfg { warmup: Duration::from_millis(5), duration: Duration::from_millis(20) };
        let sel = Selection { filter: Some(BENCH.into()), exact: true, quick: true };
        let mut progress = Progress { n: 0, tty: false, round: String::new() };
        let rows = rows(&cfg, &sel, &mut progress);
        // The ts=tsc rows are left out without an invariant TSC: said, or failed where
        // RINGTRACE_REQUIRE lists `tsc`.
        let tsc = match Tsc::shared() {
            Ok(_) => true,
            Err(e) => {
                ringtrace_fixtures::skip(ringtrace_fixtures::Feature::Tsc, format!("the ts=tsc rows: {e}"));
                false
            }
        };
        let mut want: Vec<(&str, &str, usize)> = Vec::new();
        for n in WRITERS {
            want.push(("ringtrace-channel", "ts=none", n));
            if tsc {
                want.push(("ringtrace-channel", "ts=tsc", n));
            }
            want.push(("ringtrace-channel", "ts=mono", n));
            want.push(("ringtrace-mpsc", "ts=none", n));
            want.push(("crossbeam-arrayqueue", "force_push", n));
        }
        want.extend([
            ("ringtrace-channel", "ts=none/builder-default", 1),
            ("rtrb", "ts=none", 1),
            ("rtrb", "ts=none/pop-inline", 1),
            ("ringtrace-channel", "ts=none/pop-inline", 1),
        ]);
        if tsc {
            want.push(("ringtrace-channel", "ts=tsc/pop-inline", 1));
        }
        assert_eq!(rows.len(), want.len(), "{rows:#?}");
        for (imp, variant, producers) in want {
            let r = rows
                .iter()
                .find(|r| r.imp == imp && r.variant == variant && r.producers == producers)
                .unwrap_or_else(|| panic!("no row {imp} {variant} producers={producers}: {rows:#?}"));
            assert_eq!(r.bench, BENCH);
            // A 20 ms window on a loaded machine may see a row's writer not scheduled
            // at all: then no records and no rate, never a wrong one.
            if r.mrec_per_s > 0.0 {
                assert!(r.ns_per_rec.is_finite() && r.ns_per_rec > 0.0, "{r:?}");
            } else {
                assert_eq!(r.mrec_per_s, 0.0, "{r:?}");
            }
        }
        assert!(rows.iter().any(|r| r.mrec_per_s > 0.0), "no row wrote a record: {rows:#?}");
    }
}
