//! `ringtrace bench`: the kernel's `bench_ringbufs` matrix in user space, with ringtrace
//! and the queues users would otherwise pick in the same run and the same rows.
//!
//! Benches: `parallel` (one producer thread, one consumer thread), `back-to-back` (one
//! thread produces a batch of 500, then consumes it), `sampled` (the consumer sleeps on
//! wakeups; watermark sweep), `reserve-vs-output`, `contention` (1, 2, 3, 4, 8
//! producers: on 2 cores, more threads than cores on purpose).

pub mod harness;
mod ours;
pub mod peers;
pub mod report;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

pub use harness::{Measured, RunCfg};
pub use report::Row;

/// What `ringtrace bench` was asked for.
#[derive(Clone, Debug, Default)]
pub struct BenchOpts {
    /// Short windows (the whole matrix in well under a minute).
    pub quick: bool,
    /// Only benches whose name contains this.
    pub filter: Option<String>,
    /// Write JSON lines here.
    pub json: Option<PathBuf>,
    /// Write an SVG chart here.
    pub svg: Option<PathBuf>,
}

/// Which benches run.
#[derive(Clone, Debug)]
pub struct Selection {
    filter: Option<String>,
    /// Quick mode (fewer sweep points).
    pub quick: bool,
}

impl Selection {
    /// Whether `bench` is selected.
    pub fn wants(&self, bench: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| bench.contains(f))
    }

    /// Producer counts of the `contention` rows.
    pub fn producer_counts(&self) -> Vec<usize> {
        vec![1, 2, 3, 4, 8]
    }
}

/// A one-line progress display on stderr (in place on a terminal).
#[derive(Debug)]
pub struct Progress {
    n: usize,
    tty: bool,
}

impl Progress {
    /// Reports the row group about to run.
    pub fn step(&mut self, what: &str) {
        self.n += 1;
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[2K[{:>3}] {what}", self.n);
        } else {
            let _ = writeln!(e, "[{:>3}] {what}", self.n);
        }
        let _ = e.flush();
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

const ORDER: [&str; 5] = ["parallel", "back-to-back", "sampled", "reserve-vs-output", "contention"];

/// Runs the selected matrix; prints the table; writes the files asked for.
pub fn run(opts: &BenchOpts) -> std::io::Result<Vec<Row>> {
    let cfg = if opts.quick {
        RunCfg { warmup: Duration::from_millis(150), duration: Duration::from_millis(400) }
    } else {
        RunCfg { warmup: Duration::from_secs(1), duration: Duration::from_secs(3) }
    };
    let sel = Selection { filter: opts.filter.clone(), quick: opts.quick };
    let mut progress = Progress { n: 0, tty: std::io::stderr().is_terminal() };
    let mut rows = ours::rows(&cfg, &sel, &mut progress);
    rows.extend(peers::rows(&cfg, &sel, &mut progress));
    progress.finish();
    let rank = |b: &str| ORDER.iter().position(|o| *o == b).unwrap_or(ORDER.len());
    rows.sort_by(|a, b| {
        (rank(&a.bench), a.producers, a.imp != "ringtrace", &a.imp, &a.variant).cmp(&(
            rank(&b.bench),
            b.producers,
            b.imp != "ringtrace",
            &b.imp,
            &b.variant,
        ))
    });
    println!(
        "ringtrace bench ({} mode; 8-byte records; ringtrace barrier: {})",
        if opts.quick { "quick" } else { "full" },
        if ringtrace::uses_membarrier() { "membarrier" } else { "fence" }
    );
    report::print_table(&rows, &mut std::io::stdout().lock())?;
    if let Some(p) = &opts.json {
        report::write_json(p, &rows)?;
    }
    if let Some(p) = &opts.svg {
        std::fs::write(p, report::svg(&rows))?;
    }
    Ok(rows)
}
