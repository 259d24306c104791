//! The measuring loops, modeled on the kernel's `bench_ringbufs`: a warmup, then a
//! measured window; producers never wait for space (a failed push is a drop); the
//! consumer counts what it receives. Closures are generic, so each implementation's loop
//! is monomorphized with no dynamic dispatch.
//!
//! A producer whose push fails yields its CPU (`sched_yield`) before it pushes again,
//! whatever the implementation. A producer that retries in a tight loop on a full queue
//! measures the scheduler, not the queue: with 8 producers and a consumer on 2 cores,
//! the consumer gets its fair share, 2/9 of the CPU against 2/3 with 2 producers, and
//! every implementation delivers about a third as much; with the yield, about as much
//! with 8 producers as with 2. The yield models what a real producer does when its event is dropped: it
//! goes back to its own work.
//!
//! Every consumer follows one policy when a poll finds nothing ([`Idle`]): spin for 64
//! empty polls, then yield on each one after.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Warmup and measured duration of one row.
#[derive(Clone, Copy, Debug)]
pub struct RunCfg {
    /// Time before counting starts.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
}

/// Counts over the measured window.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    /// Records the consumer received.
    pub delivered: u64,
    /// Records producers pushed successfully.
    pub committed: u64,
    /// Failed pushes.
    pub drops: u64,
    /// Length of the window.
    pub elapsed: Duration,
    /// CPU time of the whole bench process over the window (every thread of the row:
    /// producers, consumer, the idle measuring thread), if the row measured it.
    pub cpu: Option<Duration>,
}

/// CPU time of this process so far (`CLOCK_PROCESS_CPUTIME_ID`: all its threads).
pub fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    // CPU time is never negative.
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Two counters alone on a 128-byte line (x86's adjacent-line prefetcher pulls pairs).
#[repr(align(128))]
#[derive(Default)]
struct Padded(AtomicU64, AtomicU64);

/// The stop flag alone on its line: every thread polls it.
#[repr(align(128))]
#[derive(Default)]
struct StopFlag(AtomicBool);

/// Everything the measuring threads share, on the heap, each part on its own line, so
/// that no implementation's row depends on where the compiler put a stack variable
/// (a flag sharing a line with a counter cost some rows 3x in an earlier version).
#[derive(Default)]
struct Board {
    stop: StopFlag,
    delivered: Padded,
}

const PUBLISH_EVERY: u64 = 1024;

/// The consumer policy every implementation gets alike: a poll that finds nothing is
/// followed by a spin (`pause`) for the first [`Idle::SPINS`] empty polls in a row, then
/// by a `sched_yield` on every further empty poll, until a poll finds something. It never
/// gives up: the run's stop flag ends the consumer. A consumer that only spins takes the
/// line a producer is writing on every poll; one that only yields pays a system call per
/// empty poll. Spinning first keeps a consumer that keeps up responsive, and yielding
/// after lets a producer that was preempted on the consumer's core run again.
#[derive(Debug, Default)]
pub struct Idle {
    empty: u32,
}

impl Idle {
    /// Empty polls in a row that spin before the consumer starts to yield.
    pub const SPINS: u32 = 64;

    /// A poll found records.
    #[inline]
    fn found(&mut self) {
        self.empty = 0;
    }

    /// A poll found nothing.
    #[inline]
    fn empty(&mut self) {
        if self.empty < Self::SPINS {
            self.empty += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }

    /// After a poll that found `n` records: start over, or spin or yield.
    #[inline]
    pub fn after(&mut self, n: u64) {
        if n == 0 {
            self.empty();
        } else {
            self.found();
        }
    }
}

/// `producers` threads push in a tight loop, one thread consumes.
pub fn run_parallel<P, MP, C>(cfg: &RunCfg, producers: usize, make_producer: MP, consume: Option<C>) -> Measured
where
    MP: Fn(usize) -> P + Sync,
    P: FnMut() -> bool,
    C: FnMut() -> u64 + Send,
{
    let board = Box::<Board>::default();
    let counts: Vec<Padded> = (0..producers).map(|_| Padded::default()).collect();
    std::thread::scope(|s| {
        for (i, c) in counts.iter().enumerate() {
            let (stop, make) = (&board.stop.0, &make_producer);
            s.spawn(move || {
                let mut push = make(i);
                let (mut ok, mut fail) = (0u64, 0u64);
                while !stop.load(Relaxed) {
                    for _ in 0..PUBLISH_EVERY {
                        if push() {
                            ok += 1
                        } else {
                            fail += 1;
                            // A full queue: give the CPU away before trying again
                            // (see the module comment), then publish the counts and
                            // look at the stop flag (a yield can take a whole slice).
                            std::thread::yield_now();
                            break;
                        }
                    }
                    c.0.store(ok, Relaxed);
                    c.1.store(fail, Relaxed);
                }
            });
        }
        if let Some(mut consume) = consume {
            let (stop, delivered) = (&board.stop.0, &board.delivered);
            s.spawn(move || {
                let (mut got, mut idle) = (0u64, Idle::default());
                while !stop.load(Relaxed) {
                    let n = consume();
                    idle.after(n);
                    if n > 0 {
                        got += n;
                        delivered.0.store(got, Relaxed);
                    }
                }
            });
        }
        let snap = || {
            let (mut ok, mut fail) = (0, 0);
            for c in &counts {
                ok += c.0.load(Relaxed);
                fail += c.1.load(Relaxed);
            }
            (board.delivered.0.load(Relaxed), ok, fail)
        };
        std::thread::sleep(cfg.warmup);
        let (d0, c0, f0, t0, cpu0) = {
            let (d, c, f) = snap();
            (d, c, f, Instant::now(), process_cpu())
        };
        std::thread::sleep(cfg.duration);
        let (d1, c1, f1) = snap();
        let (elapsed, cpu) = (t0.elapsed(), process_cpu().saturating_sub(cpu0));
        board.stop.0.store(true, Relaxed);
        Measured { delivered: d1 - d0, committed: c1 - c0, drops: f1 - f0, elapsed, cpu: Some(cpu) }
    })
}

/// Makes a `push_batch` for [`run_back_to_back`] from a closure that pushes one
/// record and says whether it went in.
#[inline(always)]
pub fn batched<P: FnMut() -> bool>(mut push: P) -> impl FnMut(usize) -> u64 {
    move |n| {
        let mut ok = 0u64;
        for _ in 0..n {
            ok += push() as u64;
        }
        ok
    }
}

/// One thread pushes `batch` records, then consumes until empty; repeated.
/// `push_batch(n)` pushes `n` records and returns how many went in: the loop over a
/// batch runs inside the implementation's own closure, as in a producer's own code,
/// where the compiler can keep the producer's state in registers (a loop here, calling
/// a closure per record, made ringtrace reload its state from memory on each record,
/// which slowed its `back-to-back` row).
pub fn run_back_to_back<P: FnMut(usize) -> u64, C: FnMut() -> u64>(
    cfg: &RunCfg,
    batch: usize,
    mut push_batch: P,
    mut consume: C,
) -> Measured {
    // Counts in locals, returned by value: a counter kept behind a `&mut` would be a
    // load-add-store chain through memory on every record, the harness's cost, not the
    // queue's.
    let mut round = |m: &mut Measured| {
        let ok = push_batch(batch);
        let mut got = 0u64;
        loop {
            let n = consume();
            if n == 0 {
                break;
            }
            got += n;
        }
        m.committed += ok;
        m.drops += batch as u64 - ok;
        m.delivered += got;
    };
    let t = Instant::now();
    let mut scratch = Measured::default();
    while t.elapsed() < cfg.warmup {
        round(&mut scratch);
    }
    let mut m = Measured::default();
    let (t0, cpu0) = (Instant::now(), process_cpu());
    while t0.elapsed() < cfg.duration {
        for _ in 0..16 {
            round(&mut m);
        }
    }
    m.elapsed = t0.elapsed();
    m.cpu = Some(process_cpu().saturating_sub(cpu0));
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::VecDeque;

    #[test]
    fn back_to_back_counts_exactly() {
        let q = RefCell::new(VecDeque::new());
        let cfg = RunCfg { warmup: Duration::ZERO, duration: Duration::from_millis(20) };
        let m = run_back_to_back(
            &cfg,
            10,
            batched(|| {
                let mut q = q.borrow_mut();
                if q.len() >= 6 {
                    return false;
                }
                q.push_back(1u64);
                true
            }),
            || q.borrow_mut().drain(..).count() as u64,
        );
        assert!(m.committed > 0);
        assert_eq!(m.delivered, m.committed);
        assert_eq!(m.drops, m.committed / 6 * 4);
    }

    #[test]
    fn idle_spins_then_yields_and_starts_over_on_records() {
        let mut idle = Idle::default();
        for _ in 0..Idle::SPINS {
            idle.empty();
        }
        assert_eq!(idle.empty, Idle::SPINS, "every empty poll up to SPINS spun");
        idle.empty();
        assert_eq!(idle.empty, Idle::SPINS, "past SPINS it yields and stops counting");
        idle.after(3);
        assert_eq!(idle.empty, 0);
    }

    #[test]
    fn failing_producer_only_drops() {
        // 200 ms: long enough that a loaded machine schedules the producer in it.
        let cfg = RunCfg { warmup: Duration::ZERO, duration: Duration::from_millis(200) };
        let m = run_parallel(&cfg, 1, |_| || false, Some(|| 0u64));
        assert!(m.drops > 0);
        assert_eq!((m.delivered, m.committed), (0, 0));
    }
}
