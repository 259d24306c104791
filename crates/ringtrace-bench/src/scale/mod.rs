//! `scale`: how ringtrace's costs grow with what it holds: producers of a channel, the
//! threads of a recorder directory, the size of a paused flight recorder. Four benches,
//! all selected by `--filter scale`:
//!
//! * `scale-merge` (see `merge.rs`): a discard [`Channel`](ringtrace::Channel) with 1,
//!   4, 16, 64, 256 and 1024 producers written round robin; the reader drains 4,194,304 16-byte records
//!   after the writers finished, and its thread CPU time per record is the row's
//!   `CPUns/rec`; 256 live writers with the reader following them: records/s it
//!   delivers against records/s the writers offer; and the same with 256 writer
//!   threads of the `tracing` layer's stream, whose drain is a channel reader (see
//!   `live_tracing.rs`).
//! * `scale-wakeup` (see `wakeup.rs`): a writer writing a timestamped record every
//!   ~100 µs, its reader asleep in `poll`: commit-to-reader latency percentiles of a
//!   channel reader (a private channel's, and a channel file's) against a plain ring's
//!   consumer.
//! * `scale-directory` (see `directory.rs`): a flight recorder directory of T threads'
//!   events, and the same events as a stream's trace file, decoded as `ringtrace decode
//!   PATH > /dev/null` does, in a child process: the child's peak resident memory.
//! * `scale-pause` (see `pause.rs`): a full flight recorder of 16 MiB, 256 MiB and
//!   1 GiB, a writer thread writing 64-byte records; `pause()`, `snapshot()`, resume:
//!   the window in which the writer's reserves are refused, as the writer sees it.
//!
//! The targets ([`TARGETS`]) compare rows of the same round, as every target does
//! (`verdict.rs`): the two configurations compared run back to back within a round,
//! and which goes first alternates from round to round.

mod directory;
mod live_tracing;
mod merge;
mod pause;
mod wakeup;

use crate::harness::RunCfg;
use crate::verdict::{side, Goal, Target};
use crate::{Progress, Row, Selection};

pub use directory::child_main as decode_child_main;

/// The benches of the group, in the order they run.
pub const BENCHES: [&str; 4] = [merge::BENCH, wakeup::BENCH, directory::BENCH, pause::BENCH];

/// The group's targets (judged with the others by `crate::judge`).
pub const TARGETS: &[Target] = &[
    // Reader CPU ns per record, draining: at 256 writers within 2x of 4 writers', at
    // 1024 within 3x.
    Target {
        ours: side(merge::BENCH, "ringtrace-channel", "drained", 256),
        goal: Goal::CpuAtMost(side(merge::BENCH, "ringtrace-channel", "drained", 4), 2.0),
    },
    Target {
        ours: side(merge::BENCH, "ringtrace-channel", "drained", 1024),
        goal: Goal::CpuAtMost(side(merge::BENCH, "ringtrace-channel", "drained", 4), 3.0),
    },
    // 256 live writers: the reader delivers at least 0.9x the records/s they offer.
    Target {
        ours: side(merge::BENCH, "ringtrace-channel", "live/delivered", merge::LIVE_WRITERS),
        goal: Goal::RateAtLeast(side(merge::BENCH, "ringtrace-channel", "live/offered", merge::LIVE_WRITERS), 0.9),
    },
    // 256 writer threads of the tracing layer's stream: its drain (a channel reader)
    // writes at least 0.9x the records/s they emit.
    Target {
        ours: side(merge::BENCH, "ringtrace-tracing", "live-tracing/drained", live_tracing::WRITERS),
        goal: Goal::RateAtLeast(
            side(merge::BENCH, "ringtrace-tracing", "live-tracing/offered", live_tracing::WRITERS),
            0.9,
        ),
    },
    // A sampled writer's commit-to-reader latency: the channel reader's p50 and p99
    // within 2x of a plain ring's consumer's.
    Target {
        ours: side(wakeup::BENCH, "ringtrace-channel", wakeup::VARIANT, 1),
        goal: Goal::P50AtMost(side(wakeup::BENCH, "ringtrace", wakeup::VARIANT, 1), 2.0),
    },
    Target {
        ours: side(wakeup::BENCH, "ringtrace-channel", wakeup::VARIANT, 1),
        goal: Goal::P99AtMost(side(wakeup::BENCH, "ringtrace", wakeup::VARIANT, 1), 2.0),
    },
    // Decoding a recorder directory: peak RSS within 2x of the same events' trace file's.
    dir_peak(1),
    dir_peak(8),
    dir_peak(64),
    dir_peak(256),
    // The writer's refused window of a pause and resume: 1 GiB's within 4x of 16 MiB's
    // (`ns/rec` of a window row is the window).
    Target {
        ours: side(pause::BENCH, "ringtrace", "pause-resume/1GiB", 1),
        goal: Goal::NsAtMost(side(pause::BENCH, "ringtrace", "pause-resume/16MiB", 1), 4.0),
    },
];

const fn dir_peak(threads: usize) -> Target {
    Target {
        ours: side(directory::BENCH, "ringtrace-tracing", "recorder-dir", threads),
        goal: Goal::PeakAtMost(side(directory::BENCH, "ringtrace-tracing", "trace-file", threads), 2.0),
    }
}

/// The `scale-*` rows selected. `round` (0-based) of `rounds` alternates which of two
/// compared configurations goes first; `scale-directory` and `scale-pause`, which run
/// in the first rounds only, free their files and rings after the last of those.
pub fn rows(cfg: &RunCfg, sel: &Selection, round: usize, rounds: usize, progress: &mut Progress) -> Vec<Row> {
    let mut out = Vec::new();
    if sel.wants(merge::BENCH) {
        out.extend(merge::rows(sel.quick, round, progress));
    }
    if sel.wants(wakeup::BENCH) {
        out.extend(wakeup::rows(cfg, sel.quick, round, progress));
    }
    if sel.wants(directory::BENCH) {
        out.extend(directory::rows(sel.quick, round, rounds, progress));
    }
    if sel.wants(pause::BENCH) {
        out.extend(pause::rows(sel.quick, round, rounds, progress));
    }
    out
}

/// The `q` quantile (0 to 1) of `samples`, nearest rank on the sorted samples; `None`
/// for no samples.
pub(crate) fn quantile(samples: &[u64], q: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_unstable();
    let i = ((s.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    Some(s[i] as f64)
}

/// `items` in order on even rounds, reversed on odd ones.
pub(crate) fn alternate<T: Copy>(items: &[T], round: usize) -> Vec<T> {
    let mut v = items.to_vec();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_takes_the_nearest_rank() {
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[7], 0.99), Some(7.0));
        let v: Vec<u64> = (1..=101).rev().collect();
        assert_eq!(quantile(&v, 0.5), Some(51.0));
        assert_eq!(quantile(&v, 0.99), Some(100.0));
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&v, 1.0), Some(101.0));
    }

    #[test]
    fn alternate_reverses_odd_rounds() {
        assert_eq!(alternate(&[1, 2, 3], 0), [1, 2, 3]);
        assert_eq!(alternate(&[1, 2, 3], 1), [3, 2, 1]);
    }

    #[test]
    fn p50_and_peak_targets_read_their_fields() {
        let m = crate::Measured { delivered: 10, elapsed: std::time::Duration::from_secs(1), ..Default::default() };
        let row = |bench: &str, imp: &str, variant: &str, p: usize| Row::new(bench, imp, variant, p, &m);
        let mut rows = Vec::new();
        for (imp, p50) in [("ringtrace-channel", 30.0), ("ringtrace", 10.0)] {
            let mut r = row(wakeup::BENCH, imp, wakeup::VARIANT, 1);
            (r.p50_ns, r.p99_ns) = (Some(p50), Some(p50));
            rows.push(r);
        }
        for (variant, peak) in [("recorder-dir", 5.0), ("trace-file", 4.0)] {
            let mut r = row(directory::BENCH, "ringtrace-tracing", variant, 8);
            r.peak_mib = Some(peak);
            rows.push(r);
        }
        let v = crate::verdict::judge_of(&rows, TARGETS);
        let ratio = |pick: fn(&Goal) -> bool| v.iter().find(|v| pick(&v.target.goal)).map(|v| v.median());
        assert_eq!(ratio(|g| matches!(g, Goal::P50AtMost(..))), Some(3.0));
        assert_eq!(ratio(|g| matches!(g, Goal::P99AtMost(..))), Some(3.0));
        assert_eq!(ratio(|g| matches!(g, Goal::PeakAtMost(..))), Some(1.25));
        assert_eq!(v.len(), 3, "only the targets whose rows exist: {v:?}");
    }

    #[test]
    fn every_target_names_rows_of_the_group() {
        for t in TARGETS {
            assert!(BENCHES.contains(&t.ours.bench), "{t:?}");
            assert_eq!(t.peer().map(|p| p.bench), Some(t.ours.bench), "{t:?}");
        }
    }
}
