//! `ringtrace stat` of a channel file: the channel header, one line per slot, totals.
//! A slot whose ring cannot be read is a line saying why, left out of the totals.

use std::fmt::Write as _;
use std::fs::File;
use std::path::Path;

use ringtrace::inspect::channel::{ChannelFile, ChannelHeader};
use ringtrace::inspect::{FormatError, RingMode};
use serde::Serialize;

use crate::failure::{chain, Failure};
use crate::liveness::{alive, pid_text};
use crate::output::{decimal, decimals};
use crate::output::{print, print_json};
use crate::units::{bytes, utc};

/// One slot's ring, with the library's counter names.
#[derive(Serialize)]
struct Slot {
    slot: u32,
    producer_pid: u32,
    producer_alive: bool,
    consumer_pid: u32,
    committed: u64,
    lost: u64,
    /// Overwrite mode: records given up to make room, read or not (0 in discard mode).
    overwritten: u64,
    /// Overwrite mode: of them, those a consumer had not read.
    overwritten_unread: u64,
    dead: u64,
    /// Records not consumed yet (discard mode) or held (overwrite mode).
    held: u64,
}

/// A slot that could not be read.
#[derive(Serialize)]
struct Unreadable {
    slot: u32,
    error: String,
}

#[derive(Serialize)]
#[serde(untagged)]
enum SlotLine {
    Read(Slot),
    Unreadable(Unreadable),
}

/// Sums over the slots that could be read.
#[derive(Default, Serialize)]
struct Totals {
    committed: u64,
    lost: u64,
    overwritten: u64,
    dead: u64,
    held: u64,
    live_producers: u64,
    unreadable_slots: u64,
    overwritten_unread: u64,
}

impl Totals {
    fn add(&mut self, s: &SlotLine) {
        match s {
            SlotLine::Read(s) => {
                self.committed = self.committed.saturating_add(s.committed);
                self.lost = self.lost.saturating_add(s.lost);
                self.overwritten = self.overwritten.saturating_add(s.overwritten);
                self.overwritten_unread = self.overwritten_unread.saturating_add(s.overwritten_unread);
                self.dead = self.dead.saturating_add(s.dead);
                self.held = self.held.saturating_add(s.held);
                self.live_producers += u64::from(s.producer_alive);
            }
            SlotLine::Unreadable(_) => self.unreadable_slots += 1,
        }
    }
}

/// `stat --format json` of a channel file: identifiers and absolute times as decimal
/// strings, counts, sizes and offsets as numbers (see `records`' docs).
#[derive(Serialize)]
struct Json {
    path: String,
    kind: &'static str,
    version: u32,
    mode: &'static str,
    clock: &'static str,
    clock_code: u32,
    stamped: bool,
    slot_count: u32,
    capacity: u64,
    image_len: u64,
    first: u64,
    /// `[tsc0, ns0, mult]`: a TSC reading and `CLOCK_MONOTONIC` nanoseconds.
    #[serde(serialize_with = "decimals")]
    calibration: [u64; 3],
    creator_pid: u32,
    /// `CLOCK_REALTIME` nanoseconds.
    #[serde(serialize_with = "decimal")]
    created_ns: u64,
    slots: Vec<SlotLine>,
    totals: Totals,
}

fn read_slot(ch: &ChannelFile<File>, i: u32) -> Result<Slot, FormatError> {
    let overwrite = ch.header().mode == RingMode::Overwrite;
    let ring = ch.ring(i)?;
    let s = ring.state()?;
    let held = ring.records()?.len() as u64;
    let pid = s.producer_attached;
    Ok(Slot {
        slot: i,
        producer_pid: pid,
        producer_alive: pid != 0 && alive(pid),
        consumer_pid: s.consumer_attached,
        committed: s.committed,
        lost: s.lost,
        overwritten: if overwrite { s.overwritten } else { 0 },
        overwritten_unread: s.overwritten_unread,
        dead: s.dead,
        held,
    })
}

pub fn stat(path: &Path, ch: &ChannelFile<File>, json: bool) -> Result<(), Failure> {
    let h = *ch.header();
    let slots: Vec<SlotLine> = (0..h.slots)
        .map(|i| match read_slot(ch, i) {
            Ok(s) => SlotLine::Read(s),
            Err(e) => SlotLine::Unreadable(Unreadable { slot: i, error: chain(&e).replace(['\n', '\r'], " ") }),
        })
        .collect();
    let mut totals = Totals::default();
    slots.iter().for_each(|s| totals.add(s));
    if !json {
        return print(&to_text(path, &h, &slots, &totals));
    }
    print_json(&to_json(path, &h, slots, totals))
}

fn to_json(path: &Path, h: &ChannelHeader, slots: Vec<SlotLine>, totals: Totals) -> Json {
    Json {
        path: path.display().to_string(),
        kind: "channel",
        version: h.version,
        mode: h.mode.name(),
        clock: h.clock_name(),
        clock_code: h.clock,
        stamped: h.stamped(),
        slot_count: h.slots,
        capacity: h.capacity,
        image_len: h.image_len,
        first: h.first,
        calibration: h.calibration,
        creator_pid: h.creator_pid,
        created_ns: h.created_ns,
        slots,
        totals,
    }
}

fn clock_text(h: &ChannelHeader) -> &'static str {
    match h.clock_name() {
        "none" => "none (records carry no timestamp; listed slot by slot)",
        "mono" => "mono (CLOCK_MONOTONIC ns, stamped first in each record)",
        "tsc" => "tsc (the TSC in CLOCK_MONOTONIC ns, stamped first in each record)",
        _ => "best (the TSC where invariant, else CLOCK_MONOTONIC; ns, stamped first in each record)",
    }
}

/// One row of the slot table.
fn row(o: &mut String, cells: [&dyn std::fmt::Display; 7]) {
    let [slot, producer, committed, lost, overwritten, dead, held] = cells;
    let producer = producer.to_string();
    let _ = writeln!(o, "{slot:>6}  {producer:<14} {committed:>12} {lost:>10} {overwritten:>12} {dead:>6} {held:>11}");
}

fn to_text(path: &Path, h: &ChannelHeader, slots: &[SlotLine], t: &Totals) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "channel file  {}", path.display());
    let created = utc(h.created_ns);
    let _ = writeln!(o, "layout        channel version {}, created {created} by pid {}", h.version, h.creator_pid);
    let _ = writeln!(o, "mode          {}", h.mode);
    let _ = writeln!(o, "clock         {}", clock_text(h));
    let _ = writeln!(
        o,
        "slots         {} single-producer rings of {} each (images of {} from offset {})",
        h.slots,
        bytes(h.capacity),
        bytes(h.image_len),
        h.first
    );
    let held = if h.mode == RingMode::Overwrite { "held" } else { "unconsumed" };
    row(&mut o, [&"slot", &"producer", &"committed", &"lost", &"overwritten", &"dead", &held]);
    for s in slots {
        match s {
            SlotLine::Read(s) => {
                let producer = pid_text(s.producer_pid);
                row(&mut o, [&s.slot, &producer, &s.committed, &s.lost, &s.overwritten, &s.dead, &s.held]);
            }
            SlotLine::Unreadable(u) => _ = writeln!(o, "{:>6}  error: {}", u.slot, u.error),
        }
    }
    let live = format!("{} live", t.live_producers);
    row(&mut o, [&"totals", &live, &t.committed, &t.lost, &t.overwritten, &t.dead, &t.held]);
    if t.unreadable_slots > 0 {
        let _ = writeln!(o, "unreadable    {} slot(s), not in the totals", t.unreadable_slots);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::super::debug_fields;
    use super::*;

    /// A slot's fields that are its own; the others are `inspect::State`'s counters,
    /// under their names.
    const SLOT_ONLY: &[&str] = &["slot", "producer_pid", "producer_alive", "consumer_pid", "held"];

    #[test]
    fn a_slot_names_its_counters_as_the_state_does() {
        let slot = Slot {
            slot: 0,
            producer_pid: 0,
            producer_alive: false,
            consumer_pid: 0,
            committed: 0,
            lost: 0,
            overwritten: 0,
            overwritten_unread: 0,
            dead: 0,
            held: 0,
        };
        let state: Vec<String> =
            debug_fields(&format!("{:?}", ringtrace::inspect::State::default())).into_iter().map(|(n, _)| n).collect();
        let j = serde_json::to_value(slot).unwrap();
        for name in j.as_object().unwrap().keys() {
            assert!(
                SLOT_ONLY.contains(&name.as_str()) || state.contains(name),
                "the slot's {name} is neither its own nor a counter of inspect::State"
            );
        }
        for name in serde_json::to_value(Totals::default()).unwrap().as_object().unwrap().keys() {
            let own = ["held", "live_producers", "unreadable_slots"].contains(&name.as_str());
            assert!(own || state.contains(name), "the totals' {name} is not a counter of inspect::State");
        }
    }

    #[test]
    fn created_ns_and_the_calibration_are_decimal_strings_and_sizes_numbers() {
        let h = ChannelHeader {
            version: 2,
            mode: RingMode::Discard,
            clock: 2,
            slots: 1,
            capacity: 4096,
            image_len: 8192,
            first: 4096,
            calibration: [u64::MAX - 1, (1 << 53) + 1, 3 << 31],
            creator_pid: 7,
            created_ns: 1_760_000_000_123_456_789,
        };
        let j = serde_json::to_value(to_json(Path::new("c"), &h, Vec::new(), Totals::default())).unwrap();
        assert_eq!(j["created_ns"], "1760000000123456789");
        assert_eq!(j["calibration"], serde_json::json!([(u64::MAX - 1).to_string(), "9007199254740993", "6442450944"]));
        assert_eq!((j["capacity"].as_u64(), j["first"].as_u64()), (Some(4096), Some(4096)));
    }
}
