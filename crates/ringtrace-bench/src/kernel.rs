//! `kernel-bpf`: one kernel producer, a BPF program writing 8-byte records into a ring
//! buffer map of 512 KiB (the kernel bench's defaults), consumed once by ringtrace's
//! [`BpfRingBuf`] and once by libbpf's `ring_buffer` consumer, in the same run.
//!
//! The producer is ringtrace-fixtures' socket filter calling `bpf_ringbuf_output` (flags
//! 0: adaptive wakeups), run 500 times per `BPF_PROG_TEST_RUN` call (the kernel bench's
//! `batch_cnt`; it uses an fentry program, which this machine's kernel lacks). Variants:
//!
//! - `parallel`: the producer in its own thread, the consumer sleeping in `poll` when it
//!   has caught up (the kernel's `rb-libbpf` / `rb-custom` row);
//! - `back-to-back`: one thread produces a batch of 500, then consumes it (the kernel's
//!   "highest-throughput happy case").
//!
//! ringtrace runs with its defaults (batched consumer position, 50 µs linger before it
//! arms a wakeup) and, as `parallel/linger=0`, arming at once as libbpf does, which
//! shows what the linger is worth. Records/s counts records the consumer received;
//! drops are failed outputs (the program counts them).

use std::cell::Cell;
use std::convert::Infallible;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use ringtrace::kernel::bpf::{BpfRingBuf, DEFAULT_LINGER};
use ringtrace_fixtures::{bpf_skip_reason, Counters, ProgSpec, RingMap, SeqProgram};

use crate::libbpf::Libbpf;
use crate::{Measured, Progress, Row, RunCfg, Selection};

const MAP_SIZE: u32 = 512 * 1024;
const BATCH: u32 = 500;

/// The consumers compared.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Imp {
    Ringtrace,
    Libbpf,
}

/// The `kernel-bpf` rows (none, with one line on stderr, where BPF is unavailable; no
/// libbpf rows where libbpf.so.1 is not installed).
pub fn rows(cfg: &RunCfg, sel: &Selection, progress: &mut Progress) -> Vec<Row> {
    let mut out = Vec::new();
    if !sel.wants("kernel-bpf") {
        return out;
    }
    if let Some(why) = bpf_skip_reason() {
        eprintln!("ringtrace-bench: kernel-bpf skipped: {why}");
        return out;
    }
    let libbpf = Libbpf::load().map_err(|e| eprintln!("ringtrace-bench: kernel-bpf libbpf rows skipped: {e}")).ok();
    for variant in ["parallel", "parallel/linger=0", "back-to-back"] {
        for imp in [Imp::Ringtrace, Imp::Libbpf] {
            let name = if imp == Imp::Ringtrace { "ringtrace" } else { "libbpf" };
            if imp == Imp::Libbpf && (libbpf.is_none() || variant == "parallel/linger=0") {
                continue;
            }
            progress.step(&format!("kernel-bpf {name} {variant}"));
            let linger = if variant == "parallel/linger=0" { Duration::ZERO } else { DEFAULT_LINGER };
            match measure(cfg, variant != "back-to-back", imp, linger, libbpf.as_ref()) {
                Ok(m) => out.push(Row::new("kernel-bpf", name, variant, 1, &m)),
                Err(e) => eprintln!("ringtrace-bench: kernel-bpf {name} {variant} skipped: {e}"),
            }
        }
    }
    out
}

/// A consumer: consumes what is there (waiting up to `wait` for it first, if
/// `Some`); returns the records received.
type Consume<'a> = Box<dyn FnMut(Option<Duration>) -> Result<u64, String> + 'a>;

fn measure(
    cfg: &RunCfg,
    parallel: bool,
    imp: Imp,
    linger: Duration,
    libbpf: Option<&Libbpf>,
) -> Result<Measured, String> {
    let map = RingMap::create(MAP_SIZE).map_err(|e| format!("creating the ring map: {e}"))?;
    let prog = SeqProgram::load(map.as_fd(), ProgSpec::default()).map_err(|e| format!("loading the program: {e}"))?;
    let received = &Cell::new(0u64);
    // Both consumers count in the callback, so the callback costs the same.
    let mut consume: Consume<'_> = match imp {
        Imp::Ringtrace => {
            let fd = map.as_fd().try_clone_to_owned().map_err(|e| e.to_string())?;
            let mut ring = BpfRingBuf::from_fd(fd).map_err(|e| e.to_string())?;
            ring.set_linger(linger);
            Box::new(move |wait| {
                let count = |_: &[u8]| {
                    received.set(received.get() + 1);
                    Ok::<(), Infallible>(())
                };
                match wait {
                    Some(t) => ring.poll(Some(t), count),
                    None => ring.consume(count),
                }
                .map(|n| n as u64)
                .map_err(|e| e.to_string())
            })
        }
        Imp::Libbpf => {
            let lib = libbpf.ok_or("libbpf not loaded")?;
            let cb = Box::new(|_: &[u8]| {
                received.set(received.get() + 1);
                0
            });
            let mut rb = lib.ring_buffer(map.as_fd(), cb)?;
            Box::new(move |wait| {
                match wait {
                    Some(t) => rb.poll(t.as_millis() as i32),
                    None => rb.consume(),
                }
                .map(|n| n as u64)
                .map_err(|e| e.to_string())
            })
        }
    };
    let counters = || prog.counters().map_err(|e| format!("reading the program's counters: {e}"));
    let stop = AtomicBool::new(false);
    let window = |consume: &mut Consume<'_>, step: &mut dyn FnMut(&mut Consume<'_>) -> Result<(), String>| {
        let warm = Instant::now() + cfg.warmup;
        while Instant::now() < warm {
            step(consume)?;
        }
        let (n0, k0, t0) = (received.get(), counters()?, Instant::now());
        let end = t0 + cfg.duration;
        while Instant::now() < end {
            step(consume)?;
        }
        let (n1, k1, elapsed) = (received.get(), counters()?, t0.elapsed());
        Ok::<_, String>(measured(n1 - n0, k0, k1, elapsed))
    };
    if parallel {
        std::thread::scope(|s| {
            let producer = s.spawn(|| {
                while !stop.load(Relaxed) {
                    prog.run(BATCH).map_err(|e| format!("running the program: {e}"))?;
                }
                Ok::<(), String>(())
            });
            let m = window(&mut consume, &mut |c| c(Some(Duration::from_millis(50))).map(drop));
            stop.store(true, Relaxed);
            producer.join().map_err(|_| "producer panicked".to_string())??;
            m
        })
    } else {
        window(&mut consume, &mut |c| {
            prog.run(BATCH).map_err(|e| format!("running the program: {e}"))?;
            c(None).map(drop)
        })
    }
}

fn measured(delivered: u64, k0: Counters, k1: Counters, elapsed: Duration) -> Measured {
    let drops = k1.drops - k0.drops;
    // CPU time: not measured, the producer's work is the kernel's (BPF_PROG_TEST_RUN).
    Measured { delivered, committed: (k1.attempts - k0.attempts) - drops, drops, elapsed, cpu: None }
}
