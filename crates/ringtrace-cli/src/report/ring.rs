//! `ringtrace stat` of a ring file: header, positions, counters and the processes
//! attached. Counters carry the library's names (`Stats`, `inspect::State`).

use std::fmt::Write as _;
use std::fs::File;
use std::path::Path;

use ringtrace::format::control::PAUSER;
use ringtrace::inspect::{Header, RingFile, RingKind, RingMode, State};
use serde::Serialize;

use crate::failure::Failure;
use crate::liveness::{alive, pid_text};
use crate::output::decimal;
use crate::output::{print, print_json};
use crate::units::{bytes, utc, wakeup_name, wakeups, watermark_bytes};

pub fn stat(path: &Path, ring: &RingFile<File>, json: bool) -> Result<(), Failure> {
    let state = ring.state()?;
    let h = ring.header();
    if json {
        print_json(&to_json(path, h, &state))
    } else {
        print(&to_text(path, h, &state))
    }
}

fn clock(c: u32) -> String {
    if c == 0 {
        "0 (no timestamps)".into()
    } else {
        c.to_string()
    }
}

/// The producers' processes, each marked `(exited)` if it is gone, and how many are
/// alive.
fn pids(state: &State) -> (String, usize) {
    if state.producers.is_empty() {
        let pid = state.producer_attached;
        return (pid_text(pid), usize::from(pid != 0 && alive(pid)));
    }
    let live = state.producers.iter().filter(|p| alive(p.owner)).count();
    let text = state
        .producers
        .iter()
        .map(|p| {
            if alive(p.owner) {
                format!("{} (slot {})", p.owner, p.slot)
            } else {
                format!("{} (slot {}, exited)", p.owner, p.slot)
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    (text, live)
}

/// The retire lock's holder: its pid (without the pauser bit), and whether it pauses.
fn lock_holder(s: &State) -> String {
    let pid = s.lock_pid & !PAUSER;
    let what = if s.lock_pid & PAUSER != 0 { "paused by" } else { "retire lock held by" };
    format!("{what} pid {}", pid_text(pid))
}

fn to_text(path: &Path, h: &Header, s: &State) -> String {
    let (lo, hi) = s.window(h.mode);
    let used = hi - lo;
    let overwrite = h.mode == RingMode::Overwrite;
    let mut t = String::new();
    let _ = writeln!(t, "ring file     {}", path.display());
    let _ = writeln!(t, "layout        version {}, created {} by pid {}", h.version, utc(h.created_ns), h.creator_pid);
    let producers = if h.kind == RingKind::Mpsc { "multi" } else { "single" };
    let _ = writeln!(t, "kind          {} ({producers}-producer)", h.kind);
    let _ = writeln!(t, "mode          {}", h.mode);
    let _ = writeln!(t, "capacity      {}, data at offset {}", bytes(h.capacity), h.data_offset);
    let futex = if h.futex() { ", futex doorbell" } else { "" };
    let _ = writeln!(t, "wakeups       {}{futex}", wakeups(h.watermark));
    let _ = writeln!(t, "clock         {}", clock(h.clock));
    let pct = used as f64 * 100.0 / h.capacity as f64;
    let held = if overwrite { "held" } else { "unconsumed" };
    let _ = writeln!(t, "in the ring   {} {held} ({pct:.1}%), positions {lo}..{hi}", bytes(used));
    let _ = write!(t, "positions     producer {}", s.producer_pos);
    if s.paused {
        t.push_str(" (paused)");
    }
    let _ = write!(t, ", consumer {} (read {})", s.consumer_pos, s.consumer_read);
    if overwrite {
        let _ = write!(t, ", overwrite {}, zeroed to {}", s.over_pos, s.zeroed);
        if s.retire_locked || s.lock_pid != 0 {
            let _ = write!(t, " ({})", lock_holder(s));
        }
    }
    t.push('\n');
    let _ = writeln!(
        t,
        "producers     committed {}, discarded {}, lost {} (refused paused {}), too large {}",
        s.committed, s.discarded, s.lost, s.refused_paused, s.too_large
    );
    let _ = write!(t, "consumer      consumed {}, skipped {}", s.consumed, s.skipped);
    if overwrite {
        let _ = write!(t, "; overwritten {} (of them unread {})", s.overwritten, s.overwritten_unread);
    }
    let _ = writeln!(t, ", dead {}", s.dead);
    let (producers, live) = pids(s);
    let gone = s.attached_producers() - live;
    let exited = if gone > 0 { format!(" ({gone} exited)") } else { String::new() };
    let _ = writeln!(
        t,
        "processes     consumer {}; {live} producer(s) attached{exited}: {producers}",
        pid_text(s.consumer_attached),
    );
    t
}

/// `stat --format json` of a ring file: header fields, then `inspect::State`'s fields
/// under their names, then liveness. `created_ns` is a decimal string; counts, sizes
/// and byte positions are numbers (see `records`' docs).
#[derive(Serialize)]
struct Json {
    path: String,
    version: u32,
    kind: &'static str,
    mode: &'static str,
    creator_pid: u32,
    capacity: u64,
    data_offset: u64,
    /// As the header stores it: 0, `u64::MAX` (forced wakeups only), `u64::MAX - 1`
    /// (every half ring) or a byte count; `wakeup` names it. A number: a reader holding
    /// numbers as doubles reads both codes as 2^64, and `wakeup` tells them apart.
    watermark: u64,
    /// `caught-up`, `forced-only`, `half-ring` or `watermark`.
    wakeup: &'static str,
    /// The watermark in bytes, null unless `wakeup` is `watermark`.
    watermark_bytes: Option<u64>,
    flags: u32,
    clock: u32,
    /// `CLOCK_REALTIME` nanoseconds: a decimal string (see `records`' docs).
    #[serde(serialize_with = "decimal")]
    created_ns: u64,
    window_start: u64,
    window_end: u64,
    producer_pos: u64,
    paused: bool,
    consumer_pos: u64,
    consumer_read: u64,
    over_pos: u64,
    overwritten: u64,
    zeroed: u64,
    retire_locked: bool,
    lock_pid: u32,
    committed: u64,
    discarded: u64,
    lost: u64,
    refused_paused: u64,
    too_large: u64,
    consumed: u64,
    skipped: u64,
    overwritten_unread: u64,
    dead: u64,
    consumer_attached: u32,
    consumer_alive: bool,
    producer_attached: u32,
    producer_alive: bool,
    lock_pauser: bool,
    producers: Vec<JsonSlot>,
}

#[derive(Serialize)]
struct JsonSlot {
    slot: usize,
    pid: u64,
    alive: bool,
    committed: u64,
}

fn to_json(path: &Path, h: &Header, s: &State) -> Json {
    let (window_start, window_end) = s.window(h.mode);
    Json {
        path: path.display().to_string(),
        version: h.version,
        kind: h.kind.name(),
        mode: h.mode.name(),
        creator_pid: h.creator_pid,
        capacity: h.capacity,
        data_offset: h.data_offset,
        watermark: h.watermark,
        wakeup: wakeup_name(h.watermark),
        watermark_bytes: watermark_bytes(h.watermark),
        flags: h.flags,
        clock: h.clock,
        created_ns: h.created_ns,
        window_start,
        window_end,
        producer_pos: s.producer_pos,
        paused: s.paused,
        consumer_pos: s.consumer_pos,
        consumer_read: s.consumer_read,
        over_pos: s.over_pos,
        overwritten: s.overwritten,
        zeroed: s.zeroed,
        retire_locked: s.retire_locked,
        lock_pid: s.lock_pid,
        committed: s.committed,
        discarded: s.discarded,
        lost: s.lost,
        refused_paused: s.refused_paused,
        too_large: s.too_large,
        consumed: s.consumed,
        skipped: s.skipped,
        overwritten_unread: s.overwritten_unread,
        dead: s.dead,
        consumer_attached: s.consumer_attached,
        consumer_alive: s.consumer_attached != 0 && alive(s.consumer_attached),
        producer_attached: s.producer_attached,
        producer_alive: s.producer_attached != 0 && alive(s.producer_attached),
        lock_pauser: s.lock_pid & PAUSER != 0,
        producers: s
            .producers
            .iter()
            .map(|p| JsonSlot { slot: p.slot, pid: p.owner, alive: alive(p.owner), committed: p.committed })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::debug_fields;
    use super::*;

    /// Where the text shows each number of `inspect::State` (its counters are `Stats`',
    /// under the same names): the words before the value.
    const TEXT_LABELS: &[(&str, &str)] = &[
        ("producer_pos", "producer"),
        ("consumer_pos", "consumer"),
        ("consumer_read", "read"),
        ("over_pos", "overwrite"),
        ("overwritten", "overwritten"),
        ("zeroed", "zeroed to"),
        ("committed", "committed"),
        ("discarded", "discarded"),
        ("lost", "lost"),
        ("refused_paused", "refused paused"),
        ("too_large", "too large"),
        ("consumed", "consumed"),
        ("skipped", "skipped"),
        ("overwritten_unread", "of them unread"),
        ("dead", "dead"),
    ];

    /// `State`'s fields the text shows otherwise: flags, pids and the producers' slots.
    const TEXT_OTHERWISE: &[&str] =
        &["paused", "producer_attached", "consumer_attached", "retire_locked", "lock_pid", "producers"];

    /// An overwrite ring's file, and a state with every number distinct.
    fn distinct_state(name: &str) -> (std::path::PathBuf, ringtrace::FlightRecorder, RingFile<File>, State) {
        let path = std::env::temp_dir().join(format!("ringtrace-stat-{name}-{}.ring", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let ring = ringtrace::FlightRecorder::builder(4096).create(&path).unwrap();
        let file = RingFile::open(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let mut s = file.state().unwrap();
        (s.over_pos, s.consumer_pos, s.consumer_read, s.producer_pos, s.zeroed) = (1008, 1016, 1024, 2000, 3008);
        (s.committed, s.discarded, s.lost, s.refused_paused, s.too_large) = (101, 102, 103, 104, 105);
        (s.consumed, s.skipped, s.overwritten, s.overwritten_unread, s.dead) = (106, 107, 108, 109, 110);
        (s.producer_attached, s.consumer_attached, s.lock_pid) = (111, 112, 113);
        (s.paused, s.retire_locked) = (true, true);
        (path, ring, file, s)
    }

    #[test]
    fn the_json_has_every_field_of_the_state_under_its_name() {
        let (path, _ring, file, s) = distinct_state("json-names");
        let j = serde_json::to_value(to_json(&path, file.header(), &s)).unwrap();
        for (name, value) in debug_fields(&format!("{s:?}")) {
            if name == "producers" {
                assert!(j[&name].is_array());
                continue;
            }
            assert_eq!(j[&name].to_string(), value, "State::{name} in the JSON");
        }
    }

    #[test]
    fn the_text_shows_every_number_of_the_state_under_its_label() {
        let (path, _ring, file, s) = distinct_state("text-labels");
        let fields = debug_fields(&format!("{s:?}"));
        let listed: std::collections::BTreeSet<&str> =
            TEXT_LABELS.iter().map(|(n, _)| *n).chain(TEXT_OTHERWISE.iter().copied()).collect();
        let names: std::collections::BTreeSet<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, listed, "State's fields and the text's labels differ");
        let text = to_text(&path, file.header(), &s);
        for (name, label) in TEXT_LABELS {
            let value = &fields.iter().find(|(n, _)| n == name).unwrap().1;
            assert!(
                text.contains(&format!("{label} {value}")),
                "State::{name} is not shown as `{label} {value}`:\n{text}"
            );
        }
    }

    #[test]
    fn created_ns_is_a_decimal_string_and_positions_numbers() {
        let path = std::env::temp_dir().join(format!("ringtrace-stat-json-{}.ring", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let ring = ringtrace::FlightRecorder::builder(4096).create(&path).unwrap();
        let file = RingFile::open(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let h = file.header();
        let j = serde_json::to_value(to_json(&path, h, &file.state().unwrap())).unwrap();
        // CLOCK_REALTIME nanoseconds: past 2^53 since 1970-04-15.
        assert!(h.created_ns > 1 << 53);
        assert_eq!(j["created_ns"].as_str().map(str::parse::<u64>), Some(Ok(h.created_ns)));
        assert_eq!((j["capacity"].as_u64(), j["producer_pos"].as_u64()), (Some(4096), Some(0)));
        drop(ring);
    }
}
