//! The targets, judged as the median of paired per-round ratios.
//!
//! In each round ringtrace's row and the peer's row of a target ran back to back (the
//! order rotated from round to round), so the ratio taken inside the round compares
//! the two under the same weather of the shared machine; the verdict is the median of
//! those ratios over the rounds, with the number of rounds that met the target. A target
//! on how much ringtrace's row costs over a peer's ([`Goal::WriterCpuOverAtMost`]) takes
//! the difference inside each round instead of the ratio, the same way.

use std::io::{self, Write};

use crate::report::Row;

/// One side of a target: the row it reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Side {
    pub bench: &'static str,
    pub imp: &'static str,
    pub variant: &'static str,
    pub producers: usize,
}

pub(crate) const fn side(bench: &'static str, imp: &'static str, variant: &'static str, producers: usize) -> Side {
    Side { bench, imp, variant, producers }
}

/// What a target asks of ringtrace's row: a ratio to a peer's row of the same round, or
/// a bound of its own.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    /// Records per second: `ours / peer` at least this.
    RateAtLeast(Side, f64),
    /// Wall nanoseconds per record: `ours / peer` at most this.
    NsAtMost(Side, f64),
    /// Wall nanoseconds per record of `ours` alone at most this many: a bound of its
    /// own, with no peer; each round's value is judged.
    NsUnder(f64),
    /// 99th percentile latency (`p99_ns`): `ours / peer` at most this.
    P99AtMost(Side, f64),
    /// Median latency (`p50_ns`): `ours / peer` at most this.
    P50AtMost(Side, f64),
    /// Peak resident memory (`peak_mib`): `ours / peer` at most this.
    PeakAtMost(Side, f64),
    /// CPU nanoseconds per record (`cpu_ns_per_rec`): `ours / peer` at most this.
    CpuAtMost(Side, f64),
    /// The writer threads' CPU nanoseconds per record (`ns_per_rec` of the benches that
    /// report it so: `channel-scaling`, `c-api`, `tracing`, `otel`): `ours / peer` at
    /// most this.
    WriterCpuAtMost(Side, f64),
    /// The writer threads' CPU nanoseconds per record, as [`Goal::WriterCpuAtMost`]:
    /// `ours - peer` at most this many nanoseconds (what ringtrace's row costs over a
    /// floor row, judged as the median of the per-round differences).
    WriterCpuOverAtMost(Side, f64),
}

/// A speed target.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub ours: Side,
    pub goal: Goal,
}

impl Target {
    /// The row `ours` is compared with in each round (none for a bound of its own).
    pub fn peer(&self) -> Option<&Side> {
        match &self.goal {
            Goal::RateAtLeast(peer, _)
            | Goal::NsAtMost(peer, _)
            | Goal::P99AtMost(peer, _)
            | Goal::P50AtMost(peer, _)
            | Goal::PeakAtMost(peer, _)
            | Goal::CpuAtMost(peer, _)
            | Goal::WriterCpuAtMost(peer, _)
            | Goal::WriterCpuOverAtMost(peer, _) => Some(peer),
            Goal::NsUnder(_) => None,
        }
    }
}

/// Every target the bench judges (with `scale::TARGETS`, the `scale` group's).
pub const TARGETS: &[Target] = &[
    Target {
        ours: side("parallel", "ringtrace", "spsc", 1),
        goal: Goal::RateAtLeast(side("parallel", "disruptor", "sp", 1), 1.2),
    },
    Target {
        ours: side("parallel", "ringtrace", "spsc", 1),
        goal: Goal::RateAtLeast(side("parallel", "rtrb", "spsc", 1), 1.0),
    },
    Target {
        ours: side("parallel", "ringtrace", "mpsc", 1),
        goal: Goal::RateAtLeast(side("parallel", "crossbeam-arrayqueue", "mpmc", 1), 1.5),
    },
    Target {
        ours: side("contention", "ringtrace", "mpsc", 2),
        goal: Goal::RateAtLeast(side("contention", "disruptor", "mp", 2), 2.0),
    },
    // The async consumer: at least 0.9x the blocking one's records/s, and its p99 wakeup
    // latency (sampled producer) at most twice the blocking one's.
    Target {
        ours: side("async", "ringtrace", "async/busy", 1),
        goal: Goal::RateAtLeast(side("async", "ringtrace", "blocking/busy", 1), 0.9),
    },
    Target {
        ours: side("async", "ringtrace", "async/sampled", 1),
        goal: Goal::RateAtLeast(side("async", "ringtrace", "blocking/sampled", 1), 0.9),
    },
    Target {
        ours: side("async", "ringtrace", "async/sampled", 1),
        goal: Goal::P99AtMost(side("async", "ringtrace", "blocking/sampled", 1), 2.0),
    },
    // Producers that wait for room: at least twice crossbeam-channel's blocking `send`.
    Target {
        ours: side("waiting", "ringtrace", "output-wait", 1),
        goal: Goal::RateAtLeast(side("waiting", "crossbeam-channel", "send-blocking", 1), 2.0),
    },
    Target {
        ours: side("waiting", "ringtrace", "output-wait", 2),
        goal: Goal::RateAtLeast(side("waiting", "crossbeam-channel", "send-blocking", 2), 2.0),
    },
    Target {
        ours: side("contention", "ringtrace", "mpsc", 2),
        goal: Goal::RateAtLeast(side("contention", "crossbeam-arrayqueue", "mpmc", 2), 1.2),
    },
    Target {
        ours: side("contention", "ringtrace", "mpsc", 4),
        goal: Goal::RateAtLeast(side("contention", "ringtrace", "mpsc", 2), 0.5),
    },
    Target {
        ours: side("contention", "ringtrace", "mpsc", 8),
        goal: Goal::RateAtLeast(side("contention", "ringtrace", "mpsc", 2), 0.5),
    },
    Target {
        ours: side("back-to-back", "ringtrace", "spsc", 1),
        goal: Goal::NsAtMost(side("back-to-back", "rtrb", "spsc", 1), 1.5),
    },
    Target {
        ours: side("back-to-back", "ringtrace", "mpsc", 1),
        goal: Goal::NsAtMost(side("back-to-back", "rtrb", "spsc", 1), 4.0),
    },
    Target {
        ours: side("channel-scaling", "ringtrace-channel", "ts=none", 2),
        goal: Goal::RateAtLeast(side("channel-scaling", "crossbeam-arrayqueue", "force_push", 2), 3.0),
    },
    Target {
        ours: side("overwrite-contention", "ringtrace", "overwrite/no-reader", 1),
        goal: Goal::RateAtLeast(side("overwrite-contention", "ringtrace", "discard/consumer", 1), 0.9),
    },
    Target {
        ours: side("overwrite-contention", "ringtrace", "overwrite/no-reader", 2),
        goal: Goal::RateAtLeast(side("overwrite-contention", "ringtrace", "discard/consumer", 2), 0.9),
    },
    Target {
        ours: side("shm", "ringtrace", "mpsc/shm", 1),
        goal: Goal::RateAtLeast(side("shm", "ringtrace", "mpsc/in-process", 1), 0.9),
    },
    Target {
        ours: side("shm", "ringtrace", "mpsc/shm", 2),
        goal: Goal::RateAtLeast(side("shm", "ringtrace", "mpsc/in-process", 2), 0.9),
    },
    Target { ours: side("perf-backward", "ringtrace", "buf=1MiB/per-read", 1), goal: Goal::NsUnder(1e6) },
    Target {
        ours: side("kernel-bpf", "ringtrace", "parallel", 1),
        goal: Goal::RateAtLeast(side("kernel-bpf", "libbpf", "parallel", 1), 1.5),
    },
    // `kernel-user-ringbuf`: a user-space producer into a BPF user ring buffer map that a
    // BPF program drains: 1.5x libbpf's producer's samples/s, and a blocked reserve
    // woken by a drain no later than libbpf's (p99).
    Target {
        ours: side("kernel-user-ringbuf", "ringtrace", "throughput", 1),
        goal: Goal::RateAtLeast(side("kernel-user-ringbuf", "libbpf", "throughput", 1), 1.5),
    },
    Target {
        ours: side("kernel-user-ringbuf", "ringtrace", "blocking", 1),
        goal: Goal::P99AtMost(side("kernel-user-ringbuf", "libbpf", "blocking", 1), 1.0),
    },
    // `tracing`: writer CPU ns per event, both recorder modes against each peer.
    tracing_cost("flight", "tracing-appender", "non_blocking+fmt", 0.2),
    tracing_cost("flight", "tracing-flight-recorder", "1000-events", 1.0 / 3.0),
    tracing_cost("flight", "tracing-chrome", "file", 1.0 / 3.0),
    tracing_cost("flight", "tracing-perfetto", "file", 1.0 / 3.0),
    tracing_cost("stream", "tracing-appender", "non_blocking+fmt", 0.2),
    tracing_cost("stream", "tracing-flight-recorder", "1000-events", 1.0 / 3.0),
    tracing_cost("stream", "tracing-chrome", "file", 1.0 / 3.0),
    tracing_cost("stream", "tracing-perfetto", "file", 1.0 / 3.0),
    Target {
        ours: side("tracing", "ringtrace-tracing", "flight", 2),
        goal: Goal::RateAtLeast(side("tracing", "ringtrace-tracing", "flight", 1), 1.8),
    },
    Target {
        ours: side("tracing", "ringtrace-tracing", "stream", 2),
        goal: Goal::RateAtLeast(side("tracing", "ringtrace-tracing", "stream", 1), 1.8),
    },
    // The moonshot: within 3x of what `tracing` itself costs with a layer that does nothing.
    tracing_cost("flight", "noop-layer", "registry", 3.0),
    // `c-api`: a record written from C through `ringtrace_channel_producer_output` costs its
    // writer at most a fifth of the CPU time of an LTTng-UST tracepoint of the same
    // payload into a flight-recorder session, and at most 1.1x the same channel write
    // called from Rust.
    c_api("8B", 1, "lttng-ust", 0.2),
    c_api("8B", 2, "lttng-ust", 0.2),
    c_api("64B", 1, "lttng-ust", 0.2),
    c_api("64B", 2, "lttng-ust", 0.2),
    c_api("8B", 1, "ringtrace-rust", 1.1),
    c_api("8B", 2, "ringtrace-rust", 1.1),
    c_api("64B", 1, "ringtrace-rust", 1.1),
    c_api("64B", 2, "ringtrace-rust", 1.1),
    // A typed event of 4 fields from C (`RINGTRACE_INFO`) costs at most 0.3x the
    // LTTng-UST tracepoint of the same fields, and at most 1.2x the same event through
    // the `ringtrace-tracing` layer from Rust.
    c_api("event4", 1, "lttng-ust", 0.3),
    c_api("event4", 2, "lttng-ust", 0.3),
    c_api("event4", 1, "ringtrace-rust-layer", 1.2),
    c_api("event4", 2, "ringtrace-rust-layer", 1.2),
    // `otel`: a span of 4 fields entered and exited around an event of 4 fields costs the
    // writer thread, through the `ringtrace-tracing` layer (flight recorder), at most
    // 0.08x the CPU time it costs through `tracing-opentelemetry` with the OTLP batch
    // exporter; at one writer, at most 0.25x fastrace's local spans (its cheapest way)
    // and 0.1x fastrace's root spans through its OpenTelemetry reporter into the same
    // OTLP exporter; at most 2.3x, and at most 80 ns over, the same span with a `tracing`
    // layer that does nothing (the floor: dispatch and the registry).
    otel(1, "tracing-opentelemetry", "otlp-http/batch", 0.08),
    otel(2, "tracing-opentelemetry", "otlp-http/batch", 0.08),
    otel(1, "fastrace", "local", 0.25),
    otel(1, "fastrace", "otlp-http/batch", 0.1),
    otel(1, "noop-layer", "registry", 2.3),
    Target {
        ours: side("otel", "ringtrace-tracing", "flight", 1),
        goal: Goal::WriterCpuOverAtMost(side("otel", "noop-layer", "registry", 1), 80.0),
    },
    // `export`: at least 5 million events a second (200 ns each, opening the trace
    // included) to Perfetto and to CTF.
    Target { ours: side("export", "ringtrace-tracing", "perfetto/1M", 1), goal: Goal::NsUnder(200.0) },
    Target { ours: side("export", "ringtrace-tracing", "ctf/1M", 1), goal: Goal::NsUnder(200.0) },
];

/// A factor in at most three decimals (`0.333`, `1.5`, `2`).
fn short(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// `ringtrace-tracing`'s `variant` at one thread: wall ns per event recorded
/// (`wall_ns_per_rec`; at one writer thread about its CPU time) at most `x` times the
/// peer's.
const fn tracing_cost(variant: &'static str, peer: &'static str, peer_variant: &'static str, x: f64) -> Target {
    Target {
        ours: side("tracing", "ringtrace-tracing", variant, 1),
        goal: Goal::NsAtMost(side("tracing", peer, peer_variant, 1), x),
    }
}

/// `c-api`: `ringtrace-c`'s writer CPU ns per record at most `x` times `peer`'s, same
/// variant and writers.
const fn c_api(variant: &'static str, producers: usize, peer: &'static str, x: f64) -> Target {
    Target {
        ours: side("c-api", "ringtrace-c", variant, producers),
        goal: Goal::CpuAtMost(side("c-api", peer, variant, producers), x),
    }
}

/// `otel`: the `ringtrace-tracing` flight recorder's writer CPU ns per span at most `x` times
/// the `peer` row's (`peer_variant`), `writers` writer threads.
const fn otel(writers: usize, peer: &'static str, peer_variant: &'static str, x: f64) -> Target {
    Target {
        ours: side("otel", "ringtrace-tracing", "flight", writers),
        goal: Goal::WriterCpuAtMost(side("otel", peer, peer_variant, writers), x),
    }
}

/// A target's verdict over the rounds.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub target: Target,
    /// The ratio in each round that measured both rows, in round order (for
    /// [`Goal::NsUnder`] the value, for [`Goal::WriterCpuOverAtMost`] the difference in
    /// nanoseconds).
    pub ratios: Vec<f64>,
}

impl Verdict {
    /// The median ratio (the mean of the middle two for an even count).
    pub fn median(&self) -> f64 {
        let mut r = self.ratios.clone();
        r.sort_by(f64::total_cmp);
        let n = r.len();
        if n % 2 == 1 {
            r[n / 2]
        } else {
            (r[n / 2 - 1] + r[n / 2]) / 2.0
        }
    }

    /// Whether `ratio` (for [`Goal::NsUnder`] the value, for
    /// [`Goal::WriterCpuOverAtMost`] the difference) meets the target.
    pub fn meets(&self, ratio: f64) -> bool {
        match self.target.goal {
            Goal::RateAtLeast(_, x) => ratio >= x,
            Goal::NsAtMost(_, x)
            | Goal::NsUnder(x)
            | Goal::P99AtMost(_, x)
            | Goal::P50AtMost(_, x)
            | Goal::PeakAtMost(_, x)
            | Goal::CpuAtMost(_, x)
            | Goal::WriterCpuAtMost(_, x)
            | Goal::WriterCpuOverAtMost(_, x) => ratio <= x,
        }
    }

    /// Rounds whose ratio met the target.
    pub fn rounds_met(&self) -> usize {
        self.ratios.iter().filter(|&&r| self.meets(r)).count()
    }
}

fn find<'a>(rows: &'a [Row], s: &Side, round: usize) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.round == round && r.bench == s.bench && r.imp == s.imp && r.variant == s.variant && r.producers == s.producers
    })
}

/// The verdict of each of `targets` both of whose rows were measured, from every
/// measurement of every round (the bench judges [`TARGETS`] and the `scale` group's:
/// `crate::judge`).
pub fn judge_of<'t>(measurements: &[Row], targets: impl IntoIterator<Item = &'t Target>) -> Vec<Verdict> {
    let rounds = measurements.iter().map(|r| r.round + 1).max().unwrap_or(0);
    targets
        .into_iter()
        .filter_map(|t| {
            let ratios: Vec<f64> = (0..rounds)
                .filter_map(|round| {
                    let o = find(measurements, &t.ours, round)?;
                    let ratio = match &t.goal {
                        Goal::RateAtLeast(peer, _) => o.mrec_per_s / find(measurements, peer, round)?.mrec_per_s,
                        Goal::NsAtMost(peer, _) => o.wall_ns_per_rec / find(measurements, peer, round)?.wall_ns_per_rec,
                        Goal::NsUnder(_) => o.wall_ns_per_rec,
                        Goal::P99AtMost(peer, _) => o.p99_ns? / find(measurements, peer, round)?.p99_ns?,
                        Goal::P50AtMost(peer, _) => o.p50_ns? / find(measurements, peer, round)?.p50_ns?,
                        Goal::PeakAtMost(peer, _) => o.peak_mib? / find(measurements, peer, round)?.peak_mib?,
                        Goal::CpuAtMost(peer, _) => {
                            o.cpu_ns_per_rec? / find(measurements, peer, round)?.cpu_ns_per_rec?
                        }
                        Goal::WriterCpuAtMost(peer, _) => o.ns_per_rec / find(measurements, peer, round)?.ns_per_rec,
                        Goal::WriterCpuOverAtMost(peer, _) => {
                            o.ns_per_rec - find(measurements, peer, round)?.ns_per_rec
                        }
                    };
                    ratio.is_finite().then_some(ratio)
                })
                .collect();
            (!ratios.is_empty()).then_some(Verdict { target: *t, ratios })
        })
        .collect()
}

/// The verdict table.
pub fn print(verdicts: &[Verdict], out: &mut impl Write) -> io::Result<()> {
    if verdicts.is_empty() {
        return Ok(());
    }
    let name = |s: &Side| format!("{} {} p={}", s.imp, s.variant, s.producers);
    let pair = |v: &Verdict| {
        let o = &v.target.ours;
        match v.target.peer() {
            None => format!("{}: {}", o.bench, name(o)),
            Some(p) if o.bench == p.bench => format!("{}: {} / {}", o.bench, name(o), name(p)),
            Some(p) => format!("{} {} / {} {}", o.bench, name(o), p.bench, name(p)),
        }
    };
    let width = verdicts.iter().map(|v| pair(v).len()).max().unwrap_or(0);
    writeln!(
        out,
        "\nverdicts (median of paired per-round ratios; ringtrace's row / the peer's row in the same round; \
         a row with no peer: its own median round against a bound; a target `<= +N`: ringtrace's row \
         less the peer's, ns)"
    )?;
    writeln!(
        out,
        "  {:<width$} {:<17} {:>9} {:>19} {:>7}  verdict",
        "ringtrace row / peer row", "target", "median", "min-max", "met"
    )?;
    for v in verdicts {
        let (goal, unit) = match v.target.goal {
            Goal::RateAtLeast(_, x) => (format!("Mrec/s >= {}x", short(x)), "x"),
            Goal::NsAtMost(_, x) => (format!("ns/rec <= {}x", short(x)), "x"),
            Goal::NsUnder(x) => (format!("ns/rec <= {x:.0}"), ""),
            Goal::P99AtMost(_, x) => (format!("p99 <= {}x", short(x)), "x"),
            Goal::P50AtMost(_, x) => (format!("p50 <= {}x", short(x)), "x"),
            Goal::PeakAtMost(_, x) => (format!("peak MiB <= {}x", short(x)), "x"),
            Goal::CpuAtMost(_, x) => (format!("cpu ns <= {}x", short(x)), "x"),
            Goal::WriterCpuAtMost(_, x) => (format!("writer ns <= {}x", short(x)), "x"),
            Goal::WriterCpuOverAtMost(_, x) => (format!("writer ns <= +{x:.0}"), " ns"),
        };
        let min = v.ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.ratios.iter().copied().fold(0.0, f64::max);
        let median = v.median();
        let median_text = format!("{median:.2}{unit}");
        writeln!(
            out,
            "  {:<width$} {:<17} {:>9} {:>9.2}-{:<9.2} {:>3}/{:<3}  {}",
            pair(v),
            goal,
            median_text,
            min,
            max,
            v.rounds_met(),
            v.ratios.len(),
            if v.meets(median) { "met" } else { "MISSED" }
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
