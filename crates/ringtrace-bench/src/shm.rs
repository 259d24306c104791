//! `shm`: one ring file, producers in this process's threads (`mpsc/in-process`) or in
//! child processes (`mpsc/shm`), the consumer in this process: the cost of crossing
//! processes (the target: `shm` within 10% of `in-process`).
//!
//! Both variants measure the same way, so that only where the producers run differs:
//! producers write 8-byte records flat out (a full ring is a drop, and the producer
//! yields); the consumer drains with `consume` (yielding when it finds nothing) and
//! counts what it receives in the window after the warmup. The child processes are
//! this program run again (`ringtrace-bench __bench-producer`), found with
//! `std::env::current_exe`; [`producer_main`] is their body.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ringtrace::MpscRing;

use crate::harness::{Measured, RunCfg};
use crate::{Progress, Row, Selection};

const RING: u64 = 1 << 20;

/// The body of a producer process (or thread): writes 8-byte records into the ring at
/// `path` for `run`. Returns (committed, refused).
pub fn producer_main(path: &Path, run: Duration) -> std::io::Result<(u64, u64)> {
    let ring = MpscRing::open(path).map_err(std::io::Error::other)?;
    let mut p = ring.producer().map_err(std::io::Error::other)?;
    let (mut ok, mut refused) = (0u64, 0u64);
    let t = Instant::now();
    // Check the clock every 1024 records: a call per record would cost more than the record.
    while t.elapsed() < run {
        for _ in 0..1024 {
            if p.output(&std::hint::black_box(42u64).to_le_bytes(), ringtrace::Wakeup::Default).is_ok() {
                ok += 1;
            } else {
                refused += 1;
                std::thread::yield_now();
            }
        }
    }
    Ok((ok, refused))
}

fn ring_path(tag: &str) -> PathBuf {
    let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    dir.join(format!("ringtrace-bench-{}-{tag}.ring", std::process::id()))
}

/// Producers of one row: threads of this process or child processes.
enum Producers {
    Threads(Vec<std::thread::JoinHandle<std::io::Result<(u64, u64)>>>),
    Processes(Vec<Child>),
}

fn start(path: &Path, n: usize, processes: bool, run: Duration) -> std::io::Result<Producers> {
    if !processes {
        let hs = (0..n)
            .map(|_| {
                let path = path.to_path_buf();
                std::thread::spawn(move || producer_main(&path, run))
            })
            .collect();
        return Ok(Producers::Threads(hs));
    }
    let exe = std::env::current_exe()?;
    let children = (0..n)
        .map(|_| {
            Command::new(&exe)
                .arg("__bench-producer")
                .arg(path)
                .arg(run.as_millis().to_string())
                .stdout(Stdio::null())
                .spawn()
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    Ok(Producers::Processes(children))
}

fn join(p: Producers) -> std::io::Result<()> {
    match p {
        Producers::Threads(hs) => {
            for h in hs {
                h.join().map_err(|_| std::io::Error::other("producer thread panicked"))??;
            }
        }
        Producers::Processes(cs) => {
            for mut c in cs {
                let status = c.wait()?;
                if !status.success() {
                    return Err(std::io::Error::other(format!("producer process failed: {status}")));
                }
            }
        }
    }
    Ok(())
}

/// One row: `n` producers (threads, or processes) into a ring file, this thread consuming.
fn measure(cfg: &RunCfg, n: usize, processes: bool) -> std::io::Result<Measured> {
    let path = ring_path(if processes { "shm" } else { "threads" });
    let _ = std::fs::remove_file(&path);
    let ring = MpscRing::builder(RING).create(&path).map_err(std::io::Error::other)?;
    let mut c = ring.consumer().map_err(std::io::Error::other)?;
    let run = cfg.warmup + cfg.duration + Duration::from_millis(300);
    let producers = start(&path, n, processes, run);
    let producers = match producers {
        Ok(p) => p,
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
    };
    let mut idle = crate::harness::Idle::default();
    let mut drain = || {
        let got = c.consume(|d| {
            std::hint::black_box(d);
            Ok::<(), Infallible>(())
        });
        let got = got.map_err(std::io::Error::other)? as u64;
        idle.after(got);
        Ok::<u64, std::io::Error>(got)
    };
    // Start the clock once records flow (a process takes a few ms to start).
    let t = Instant::now();
    while drain()? == 0 && t.elapsed() < Duration::from_secs(5) {}
    // Every producer has opened it by now (or failed); the mappings keep it alive.
    std::thread::sleep(Duration::from_millis(20));
    let _ = std::fs::remove_file(&path);
    let t = Instant::now();
    while t.elapsed() < cfg.warmup {
        drain()?;
    }
    let before = ring.stats();
    let t0 = Instant::now();
    let mut delivered = 0;
    while t0.elapsed() < cfg.duration {
        delivered += drain()?;
    }
    let elapsed = t0.elapsed();
    let after = ring.stats();
    join(producers)?;
    // CPU time: not measured, the producers may be other processes.
    let (committed, drops) = (after.committed - before.committed, after.lost - before.lost);
    Ok(Measured { delivered, committed, drops, elapsed, cpu: None })
}

/// The `shm` rows the selection asks for.
pub fn rows(cfg: &RunCfg, sel: &Selection, progress: &mut Progress) -> Vec<Row> {
    let mut out = Vec::new();
    if !sel.wants("shm") {
        return out;
    }
    for n in [1, 2] {
        for (processes, variant) in [(false, "mpsc/in-process"), (true, "mpsc/shm")] {
            progress.step(&format!("shm ringtrace {variant} producers={n}"));
            match measure(cfg, n, processes) {
                Ok(m) => out.push(Row::new("shm", "ringtrace", variant, n, &m)),
                Err(e) => eprintln!("ringtrace-bench: shm {variant} producers={n} skipped: {e}"),
            }
        }
    }
    out
}
