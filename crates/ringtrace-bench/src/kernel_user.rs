//! `kernel-user-ringbuf`: user space producing into a BPF user ring buffer map
//! (`BPF_MAP_TYPE_USER_RINGBUF`) that a BPF program drains, produced once by ringtrace's
//! [`UserRingBuf`] and once by libbpf's `user_ring_buffer` (see [`crate::libbpf_user`]),
//! back to back in every round, the order alternating from round to round.
//!
//! The drain is ringtrace-fixtures' [`EchoProgram`]: one `bpf_user_ringbuf_drain` per
//! `BPF_PROG_TEST_RUN`, each sample copied into a ring buffer map of 4 MiB that nobody
//! reads (once it is full the program counts each output failure and goes on: the same
//! for both producers). Samples are 64 bytes (a 72-byte footprint with the header).
//! Variants:
//!
//! - `throughput`: one producer thread reserves, writes (a sequence number and a fixed
//!   pattern) and commits samples into a 512 KiB map, and a drainer thread runs the
//!   program in a loop. A reserve that finds the ring full follows the harness's
//!   [`Idle`] policy (spin 64 times, then yield), for both. Mrec/s counts the samples
//!   the producer committed; `ns_per_rec` is the producer thread's CPU time per sample
//!   (`CLOCK_THREAD_CPUTIME_ID`), which includes its spinning and yielding on a full
//!   ring.
//! - `fill` (no target): the producer's own cost with no drain running: one thread
//!   fills the empty map (timed: wall and thread CPU), then drains it (not timed), again
//!   and again. Its Mrec/s is the fills' rate alone.
//! - `blocking`: a one-page map (4 KiB: 56 samples, 64 bytes left free) filled; the
//!   producer blocks in its blocking reserve (timeout 10 s); 1 ms later the measuring
//!   thread drains. The latency is from the instant before the drain's
//!   `BPF_PROG_TEST_RUN` to the producer's reserve returning (see [`blocking`] for why
//!   not from the drain's return); `p50_ns`/`p99_ns` over the repetitions of the
//!   window; `cpu_ns_per_rec` the producer thread's CPU time per blocking reserve (1 ms
//!   of waiting each).

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ringtrace::kernel::bpf::{UserReserveError, UserRingBuf};
use ringtrace_fixtures::{bpf_skip_reason, EchoProgram, RingMap, UserRingMap};

use crate::channel::thread_cpu_ns;
use crate::harness::Idle;
use crate::libbpf_user::LibbpfUser;
use crate::{Measured, Progress, Row, RunCfg, Selection};

const BENCH: &str = "kernel-user-ringbuf";
/// Payload bytes per sample.
const SAMPLE: usize = 64;
const THROUGHPUT_MAP: u32 = 512 * 1024;
const OUT_MAP: u32 = 4 * 1024 * 1024;
const BLOCKING_MAP: u32 = 4096;
/// How long the blocked producer waits before the drain.
const SETTLE: Duration = Duration::from_millis(1);
const BLOCK_TIMEOUT: Duration = Duration::from_secs(10);
/// Reserves between two looks at the phase.
const CHUNK: u64 = 256;

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// The producers compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Imp {
    Ringtrace,
    Libbpf,
}

impl Imp {
    fn name(self) -> &'static str {
        match self {
            Imp::Ringtrace => "ringtrace",
            Imp::Libbpf => "libbpf",
        }
    }
}

/// The `kernel-user-ringbuf` rows (none, with one line on stderr, where BPF or user
/// ring buffer maps are unavailable; no libbpf rows where libbpf.so.1 lacks the
/// `user_ring_buffer__*` functions).
pub fn rows(cfg: &RunCfg, sel: &Selection, progress: &mut Progress) -> Vec<Row> {
    let mut out = Vec::new();
    if !sel.wants(BENCH) {
        return out;
    }
    if let Some(why) = skip_reason() {
        eprintln!("ringtrace-bench: {BENCH} skipped: {why}");
        return out;
    }
    let libbpf = LibbpfUser::load().map_err(|e| eprintln!("ringtrace-bench: {BENCH} libbpf rows skipped: {e}")).ok();
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let order = if CALLS.fetch_add(1, Relaxed) % 2 == 0 {
        [Imp::Ringtrace, Imp::Libbpf]
    } else {
        [Imp::Libbpf, Imp::Ringtrace]
    };
    for variant in ["throughput", "fill", "blocking"] {
        for imp in order {
            if imp == Imp::Libbpf && libbpf.is_none() {
                continue;
            }
            progress.step(&format!("{BENCH} {} {variant}", imp.name()));
            let row = match variant {
                "throughput" => throughput(cfg, imp, libbpf.as_ref()),
                "fill" => fill(cfg, imp, libbpf.as_ref()),
                _ => blocking(cfg, imp, libbpf.as_ref()),
            };
            match row {
                Ok(r) => out.push(r),
                Err(e) => eprintln!("ringtrace-bench: {BENCH} {} {variant} skipped: {e}", imp.name()),
            }
        }
    }
    out
}

/// Why the rows cannot run here, if they cannot: BPF, user ring buffer maps (Linux
/// 6.1) or the drain program (`bpf_user_ringbuf_drain`) unavailable.
fn skip_reason() -> Option<String> {
    if let Some(why) = bpf_skip_reason() {
        return Some(why);
    }
    let page = rustix::param::page_size() as u32;
    let user = match UserRingMap::create(page) {
        Ok(m) => m,
        Err(e) => return Some(format!("user ring buffer maps unavailable (Linux 6.1 and later): {e}")),
    };
    let out = RingMap::create(page).ok()?;
    EchoProgram::load(user.as_fd(), out.as_fd())
        .err()
        .map(|e| format!("the drain program (bpf_user_ringbuf_drain) does not load: {e}"))
}

/// A sample's payload: the sequence number, then a fixed pattern.
#[inline(always)]
fn write_sample(buf: &mut [u8], seq: u64) {
    let mut bytes = [0x5au8; SAMPLE];
    bytes[..8].copy_from_slice(&seq.to_le_bytes());
    buf.copy_from_slice(&bytes);
}

/// The user ring, the drain program and its output ring of one measurement.
struct Maps {
    user: UserRingMap,
    _out: RingMap,
    prog: EchoProgram,
}

fn maps(size: u32) -> Result<Maps, String> {
    let user = UserRingMap::create(size).map_err(|e| format!("creating the user ring map: {e}"))?;
    let out = RingMap::create(OUT_MAP).map_err(|e| format!("creating the output ring map: {e}"))?;
    let prog = EchoProgram::load(user.as_fd(), out.as_fd()).map_err(|e| format!("loading the drain program: {e}"))?;
    Ok(Maps { user, _out: out, prog })
}

/// One producer of either implementation, on the thread that made it.
enum Producer<'a> {
    Ringtrace(UserRingBuf),
    Libbpf(crate::libbpf_user::LibbpfUserRing<'a>),
}

impl<'a> Producer<'a> {
    fn new(imp: Imp, fd: BorrowedFd<'_>, libbpf: Option<&'a LibbpfUser>) -> Result<Producer<'a>, String> {
        Ok(match imp {
            Imp::Ringtrace => {
                let fd = fd.try_clone_to_owned().map_err(|e| e.to_string())?;
                Producer::Ringtrace(UserRingBuf::from_fd(fd).map_err(|e| e.to_string())?)
            }
            Imp::Libbpf => Producer::Libbpf(libbpf.ok_or("libbpf not loaded")?.producer(fd)?),
        })
    }

    /// Reserves, writes and commits one sample; `Ok(false)` if the ring is full.
    #[inline(always)]
    fn push(&mut self, seq: u64) -> Result<bool, String> {
        match self {
            Producer::Ringtrace(ring) => match ring.reserve(SAMPLE) {
                Ok(mut s) => {
                    write_sample(&mut s, seq);
                    s.commit();
                    Ok(true)
                }
                Err(UserReserveError::Full { .. }) => Ok(false),
                Err(e) => Err(e.to_string()),
            },
            Producer::Libbpf(rb) => match rb.reserve(SAMPLE as u32) {
                Ok(Some(mut s)) => {
                    write_sample(s.bytes(), seq);
                    rb.submit(s);
                    Ok(true)
                }
                Ok(None) => Ok(false),
                Err(e) => Err(format!("user_ring_buffer__reserve: {e}")),
            },
        }
    }

    /// The blocking reserve, the sample written and committed.
    fn push_blocking(&mut self, seq: u64) -> Result<(), String> {
        match self {
            Producer::Ringtrace(ring) => {
                let mut s = ring.reserve_blocking(SAMPLE, BLOCK_TIMEOUT).map_err(|e| e.to_string())?;
                write_sample(&mut s, seq);
                s.commit();
            }
            Producer::Libbpf(rb) => {
                let mut s = rb
                    .reserve_blocking(SAMPLE as u32, BLOCK_TIMEOUT)
                    .map_err(|e| format!("user_ring_buffer__reserve_blocking: {e}"))?
                    .ok_or("user_ring_buffer__reserve_blocking: timed out")?;
                write_sample(s.bytes(), seq);
                rb.submit(s);
            }
        }
        Ok(())
    }
}

fn drain(prog: &EchoProgram) -> Result<u64, String> {
    match prog.run() {
        Ok(n) if n >= 0 => Ok(n as u64),
        Ok(n) => Err(format!("the drain failed: errno {}", -n)),
        Err(e) => Err(format!("running the drain program: {e}")),
    }
}

/// The row of a producer that committed `committed` samples (`full` refused) in
/// `elapsed`, with `cpu_ns` of its thread's CPU time: wall-clock Mrec/s, CPU ns per
/// sample.
fn cpu_row(imp: Imp, variant: &str, committed: u64, full: u64, elapsed: Duration, cpu_ns: u64) -> Row {
    let m =
        Measured { committed, drops: full, elapsed, cpu: Some(Duration::from_nanos(cpu_ns)), ..Measured::default() };
    let mut r = Row::new(BENCH, imp.name(), variant, 1, &m);
    r.record_bytes = SAMPLE;
    r.ns_per_rec = r.cpu_ns_per_rec.unwrap_or(f64::INFINITY);
    r
}

fn throughput(cfg: &RunCfg, imp: Imp, libbpf: Option<&LibbpfUser>) -> Result<Row, String> {
    let m = maps(THROUGHPUT_MAP)?;
    let phase = AtomicU8::new(WARMUP);
    let (prog, user) = (&m.prog, m.user.as_fd());
    std::thread::scope(|s| {
        let producer =
            s.spawn(|| {
                let mut p = Producer::new(imp, user, libbpf)?;
                let (mut ok, mut full, mut idle) = (0u64, 0u64, Idle::default());
                let mut start = None;
                loop {
                    for _ in 0..CHUNK {
                        if p.push(ok)? {
                            ok += 1;
                            idle.after(1);
                        } else {
                            full += 1;
                            // Spin or yield, then look at the phase: a yield can take a
                            // whole time slice on a loaded machine.
                            idle.after(0);
                            break;
                        }
                    }
                    match phase.load(Relaxed) {
                        WARMUP => {}
                        MEASURE => {
                            start.get_or_insert((Instant::now(), thread_cpu_ns(), ok, full));
                        }
                        _ => break,
                    }
                }
                let (end, cpu) = (Instant::now(), thread_cpu_ns());
                // The producer's own window, from when it saw the measurement start to when it
                // saw its end; a producer that never ran in it counts nothing.
                Ok::<_, String>(start.map_or((0, 0, Duration::ZERO, 0), |(t0, c0, ok0, full0)| {
                    (ok - ok0, full - full0, end - t0, cpu - c0)
                }))
            });
        let drainer = s.spawn(|| {
            while phase.load(Relaxed) != STOP {
                drain(prog)?;
            }
            Ok::<(), String>(())
        });
        std::thread::sleep(cfg.warmup);
        phase.store(MEASURE, Relaxed);
        std::thread::sleep(cfg.duration);
        phase.store(STOP, Relaxed);
        let produced = producer.join().map_err(|_| "producer panicked".to_string())?;
        drainer.join().map_err(|_| "drainer panicked".to_string())??;
        let (ok, full, elapsed, cpu) = produced?;
        Ok(cpu_row(imp, "throughput", ok, full, elapsed, cpu))
    })
}

fn fill(cfg: &RunCfg, imp: Imp, libbpf: Option<&LibbpfUser>) -> Result<Row, String> {
    let m = maps(THROUGHPUT_MAP)?;
    let mut p = Producer::new(imp, m.user.as_fd(), libbpf)?;
    let mut seq = 0u64;
    // One fill of the empty ring: the samples and the wall and CPU time it took.
    let mut round = |p: &mut Producer<'_>| {
        let (t, c) = (Instant::now(), thread_cpu_ns());
        let first = seq;
        while p.push(seq)? {
            seq += 1;
        }
        let (wall, cpu) = (t.elapsed(), thread_cpu_ns() - c);
        while drain(&m.prog)? > 0 {}
        Ok::<_, String>((seq - first, wall, cpu))
    };
    let warm = Instant::now() + cfg.warmup;
    while Instant::now() < warm {
        round(&mut p)?;
    }
    let (mut n, mut wall, mut cpu) = (0, Duration::ZERO, 0);
    let end = Instant::now() + cfg.duration;
    while Instant::now() < end {
        let (k, w, c) = round(&mut p)?;
        (n, wall, cpu) = (n + k, wall + w, cpu + c);
    }
    Ok(cpu_row(imp, "fill", n, 0, wall, cpu))
}

/// The `blocking` row. The latency runs from the drain's start, not its return:
/// libbpf's blocking reserve spins while any space is free, so it holds its sample as
/// soon as the drain has consumed the first sample, before the drain returns, and a
/// latency from the return would be negative for it. The drain's own time (56 samples)
/// is in both implementations' latencies alike.
fn blocking(cfg: &RunCfg, imp: Imp, libbpf: Option<&LibbpfUser>) -> Result<Row, String> {
    let m = maps(BLOCKING_MAP)?;
    let user = m.user.as_fd();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (woke_tx, woke_rx) = mpsc::channel::<(Instant, u64)>();
    let (go_tx, go_rx) = mpsc::channel::<bool>();
    std::thread::scope(|s| {
        let producer = s.spawn(move || {
            let mut p = Producer::new(imp, user, libbpf)?;
            let mut seq = 0u64;
            loop {
                while p.push(seq)? {
                    seq += 1;
                }
                if ready_tx.send(()).is_err() {
                    return Ok(());
                }
                let c = thread_cpu_ns();
                p.push_blocking(seq)?;
                let woke = Instant::now();
                seq += 1;
                if woke_tx.send((woke, thread_cpu_ns() - c)).is_err() || !go_rx.recv().unwrap_or(false) {
                    return Ok::<(), String>(());
                }
            }
        });
        let measured = (|| {
            let (mut lat, mut cpu) = (Vec::new(), 0u64);
            let warm = Instant::now() + cfg.warmup;
            let end = warm + cfg.duration;
            let mut t0 = None;
            loop {
                ready_rx.recv().map_err(|_| "the producer stopped".to_string())?;
                std::thread::sleep(SETTLE);
                let before = Instant::now();
                drain(&m.prog)?;
                let (woke, c) = woke_rx.recv().map_err(|_| "the producer stopped".to_string())?;
                let now = Instant::now();
                if now >= warm {
                    t0.get_or_insert(now);
                    lat.push(woke.saturating_duration_since(before).as_nanos() as u64);
                    cpu += c;
                }
                let more = now < end;
                let _ = go_tx.send(more);
                if !more {
                    return Ok::<_, String>((lat, cpu, t0.map_or(Duration::ZERO, |t| t.elapsed())));
                }
            }
        })();
        drop(go_tx);
        drop(ready_rx);
        let produced = producer.join().map_err(|_| "producer panicked".to_string())?;
        let (lat, cpu, elapsed) = match (measured, produced) {
            (Ok(m), Ok(())) => m,
            (Err(e), Ok(())) | (Ok(_), Err(e)) => return Err(e),
            (Err(m), Err(p)) => return Err(format!("{p}; {m}")),
        };
        let mut r = cpu_row(imp, "blocking", lat.len() as u64, 0, elapsed, cpu);
        r.p50_ns = crate::wakeups::percentile(&lat, 0.50);
        r.p99_ns = crate::wakeups::percentile(&lat, 0.99);
        Ok(r)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_measure_ringtrace_and_report_latency() {
        if !ringtrace_fixtures::have_bpf() {
            return;
        }
        let cfg = RunCfg { warmup: Duration::from_millis(10), duration: Duration::from_millis(40) };
        let sel = Selection { filter: Some(BENCH.into()), exact: true, quick: true };
        let mut progress = Progress { n: 0, tty: false, round: String::new() };
        let rows = rows(&cfg, &sel, &mut progress);
        for variant in ["throughput", "fill", "blocking"] {
            let r = rows.iter().find(|r| r.imp == "ringtrace" && r.variant == variant).expect(variant);
            // `throughput`'s producer may not be scheduled in so short a window.
            assert!(variant == "throughput" || r.mrec_per_s > 0.0, "{r:?}");
            assert_eq!(r.record_bytes, SAMPLE);
        }
        let blocking = rows.iter().find(|r| r.variant == "blocking").unwrap();
        assert!(blocking.p50_ns.is_some() && blocking.p99_ns >= blocking.p50_ns, "{blocking:?}");
    }
}
