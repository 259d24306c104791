//! `ringtrace-bench`: the kernel's `bench_ringbufs` matrix in user space, with ringtrace
//! and the queues users would otherwise pick in the same run and the same rows.
//!
//! Benches: `parallel` (one producer thread, one consumer thread), `back-to-back` (one
//! thread produces a batch of 500, then consumes it), `sampled` (the consumer sleeps on
//! wakeups; watermark sweep; peer: crossbeam-channel blocking in `recv_timeout`),
//! `waiting` (producers that wait for room: `output_wait` against crossbeam-channel's
//! blocking `send`, 1 and 2 producers; see `waiting.rs`), `async` (the async consumer
//! against the blocking one: records/s and commit-to-consumer latency percentiles with
//! a sampled and a busy producer; see `wakeups.rs`), `reserve-vs-output`,
//! `contention` (1, 2, 3, 4, 8
//! producers: on 2 cores, more threads than cores on purpose), `overwrite-contention`
//! (the same producer counts into a flight recorder with no reader or with a thread taking
//! snapshots, next to a discard ring with a consumer and to crossbeam's `force_push`; its
//! rows count records committed, as no reader there consumes), `snapshot` (snapshots of
//! a full flight recorder of 64 KiB, 1 MiB and 16 MiB with no producer running; `ns/rec`
//! is a snapshot's time divided by the records it captured), `shm` (producers as threads
//! or as child processes of one ring file), `channel-scaling` (1, 2, 4, 8 writer threads,
//! each with its own ring of a flight-recorder channel, with no timestamp, TSC or
//! `CLOCK_MONOTONIC` timestamps, next to one shared flight recorder, to crossbeam's
//! `ArrayQueue::force_push` from as many threads and to rtrb; LTTng's
//! metric: `ns/rec` there is writer-thread CPU time per record, summed over writers,
//! while `Mrec/s` stays wall-clock; see `channel.rs`), `c-api` (`ringtrace_channel_output`
//! called from C, against LTTng-UST tracepoints in a flight-recorder session and against
//! the same channel write from Rust, 8- and 64-byte records, 1 and 2 writers; the same
//! CPU-time metric; see `c_api.rs`), `kernel-bpf` (a BPF program
//! writing 8-byte records into a ring buffer map, consumed by ringtrace's `BpfRingBuf`
//! and by libbpf's `ring_buffer` consumer; see `kernel.rs`), `kernel-user-ringbuf`
//! (64-byte samples produced into a BPF user ring buffer map by ringtrace's
//! `UserRingBuf` and by libbpf's `user_ring_buffer`, drained by a BPF program: producer
//! throughput and blocking-reserve wakeup latency; see `kernel_user.rs`),
//! `perf-backward` (full reads of a 1 MiB `write_backward` perf ring, newest to
//! oldest; see `perf.rs`), `tracing` (one `tracing` event with two fields in a span,
//! through `ringtrace-tracing` and the tracing layers users would otherwise pick; see
//! `layers.rs`), `export` (a trace of a
//! million `tracing` events exported to Perfetto, CTF and Chrome JSON; see
//! `export.rs`), `otel` (a span of 4 fields around an event of 4 fields through
//! `ringtrace-tracing`, against the same through `tracing-opentelemetry` with the OTLP
//! batch exporter and through fastrace; writer-thread CPU time per span; see `otel.rs`),
//! and the `scale`
//! group, selected by `--filter scale`: `scale-merge`,
//! `scale-wakeup`, `scale-directory`, `scale-pause` (a channel's reader as writers are
//! added, its wakeup latency, a recorder directory's decode memory, a flight
//! recorder's pause window by size; see `scale/mod.rs`).

mod c_api;
mod channel;
pub mod export;
pub mod harness;
mod kernel;
mod kernel_user;
mod layers;
pub mod libbpf;
pub mod libbpf_user;
mod otel;
mod ours;
pub mod peers;
mod perf;
pub mod report;
pub mod scale;
pub mod shm;
pub mod verdict;
mod waiting;
mod wakeups;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

pub use harness::{Measured, RunCfg};
pub use otel::{row_child_main as otel_row_main, sink_main as otlp_sink_main};
pub use report::{Row, Summary};

/// What `ringtrace-bench` was asked for.
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
    /// The filter is a whole bench name, not a part of one: `run` selects one bench at a
    /// time, and `contention` is a part of `overwrite-contention`.
    exact: bool,
    /// Quick mode (fewer sweep points).
    pub quick: bool,
}

impl Selection {
    /// Whether `bench` is selected.
    pub fn wants(&self, bench: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| if self.exact { bench == f } else { bench.contains(f) })
    }

    /// Producer counts of the `contention` and `overwrite-contention` rows.
    pub fn producer_counts(&self) -> Vec<usize> {
        vec![1, 2, 3, 4, 8]
    }
}

/// A one-line progress display on stderr (in place on a terminal).
#[derive(Debug)]
pub struct Progress {
    n: usize,
    tty: bool,
    round: String,
}

impl Progress {
    /// Reports the row group about to run.
    pub fn step(&mut self, what: &str) {
        self.n += 1;
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[2K[{:>3}] {}{what}", self.n, self.round);
        } else {
            let _ = writeln!(e, "[{:>3}] {}{what}", self.n, self.round);
        }
        let _ = e.flush();
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

const ORDER: [&str; 22] = [
    "parallel",
    "back-to-back",
    "sampled",
    "waiting",
    "async",
    "reserve-vs-output",
    "contention",
    "overwrite-contention",
    "snapshot",
    "shm",
    "channel-scaling",
    "c-api",
    "kernel-bpf",
    "kernel-user-ringbuf",
    "perf-backward",
    "tracing",
    "export",
    "otel",
    "scale-merge",
    "scale-wakeup",
    "scale-directory",
    "scale-pause",
];

/// Runs the selected matrix; prints the table; writes the files asked for.
///
/// The matrix runs several times (rounds) and each row reports its median round: on a
/// shared 2-vCPU machine the cost of moving a cache line between the two CPUs changes
/// several-fold from one second to the next, and rounds interleaved in time give every
/// implementation the same weather.
pub fn run(opts: &BenchOpts) -> std::io::Result<Vec<report::Summary>> {
    let (cfg, rounds) = if opts.quick {
        (RunCfg { warmup: Duration::from_millis(30), duration: Duration::from_millis(80) }, 7)
    } else {
        (RunCfg { warmup: Duration::from_millis(150), duration: Duration::from_millis(400) }, 11)
    };
    let sel = Selection { filter: opts.filter.clone(), exact: false, quick: opts.quick };
    let mut progress = Progress { n: 0, tty: std::io::stderr().is_terminal(), round: String::new() };
    let mut all = Vec::new();
    for round in 1..=rounds {
        progress.round = format!("round {round}/{rounds}: ");
        let mut rows = Vec::new();
        // Bench by bench, ringtrace and its peers back to back, so that the rows one
        // compares ran seconds apart, not a whole round apart; which goes first
        // alternates from round to round.
        for bench in ORDER.iter().filter(|b| sel.wants(b)) {
            let one = Selection { filter: Some(bench.to_string()), exact: true, quick: sel.quick };
            if round % 2 == 1 {
                rows.extend(ours::rows(&cfg, &one, &mut progress));
                rows.extend(peers::rows(&cfg, &one, &mut progress));
            } else {
                rows.extend(peers::rows(&cfg, &one, &mut progress));
                rows.extend(ours::rows(&cfg, &one, &mut progress));
            }
            rows.extend(shm::rows(&cfg, &one, &mut progress));
            rows.extend(channel::rows(&cfg, &one, &mut progress));
            rows.extend(c_api::rows(&cfg, &one, round - 1, &mut progress));
            rows.extend(kernel::rows(&cfg, &one, &mut progress));
            rows.extend(kernel_user::rows(&cfg, &one, &mut progress));
            rows.extend(perf::rows(&cfg, &one, &mut progress));
            rows.extend(layers::rows(&cfg, &one, &mut progress));
            rows.extend(export::rows(&one, &mut progress));
            rows.extend(otel::rows(&one, round - 1, &mut progress));
            rows.extend(waiting::rows(&cfg, &one, &mut progress));
            rows.extend(wakeups::rows(&cfg, &one, &mut progress));
            rows.extend(scale::rows(&cfg, &one, round - 1, rounds, &mut progress));
        }
        rows.iter_mut().for_each(|r| r.round = round - 1);
        all.push(rows);
    }
    progress.finish();
    // Every measurement of every round goes to the JSON; the table shows medians.
    let measurements: Vec<Row> = all.into_iter().flatten().collect();
    let mut rows = report::summarize(&measurements);
    let rank = |b: &str| ORDER.iter().position(|o| *o == b).unwrap_or(ORDER.len());
    rows.sort_by(|a, b| {
        let (a, b) = (&a.median, &b.median);
        (rank(&a.bench), a.producers, a.imp != "ringtrace", &a.imp, &a.variant).cmp(&(
            rank(&b.bench),
            b.producers,
            b.imp != "ringtrace",
            &b.imp,
            &b.variant,
        ))
    });
    println!(
        "ringtrace-bench ({} mode, median of {rounds} rounds; 8-byte records; ringtrace barrier: {})",
        if opts.quick { "quick" } else { "full" },
        if ringtrace::config::uses_membarrier() { "membarrier" } else { "fence" }
    );
    report::print_table(&rows, &mut std::io::stdout().lock())?;
    verdict::print(&judge(&measurements), &mut std::io::stdout().lock())?;
    if let Some(p) = &opts.json {
        report::write_json(p, &measurements)?;
    }
    if let Some(p) = &opts.svg {
        std::fs::write(p, report::svg(&rows))?;
    }
    Ok(rows)
}

/// The verdict of every target of the bench ([`verdict::TARGETS`] and the `scale`
/// group's [`scale::TARGETS`]) both of whose rows were measured.
pub fn judge(measurements: &[Row]) -> Vec<verdict::Verdict> {
    verdict::judge_of(measurements, verdict::TARGETS.iter().chain(scale::TARGETS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bench_selection_leaves_out_benches_whose_name_contains_it() {
        let one = Selection { filter: Some("contention".into()), exact: true, quick: true };
        assert!(one.wants("contention") && !one.wants("overwrite-contention"));
        let user = Selection { filter: Some("contention".into()), exact: false, quick: true };
        assert!(user.wants("contention") && user.wants("overwrite-contention"));
    }
}
