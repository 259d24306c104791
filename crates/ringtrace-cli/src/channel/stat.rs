//! `ringtrace stat CHANNEL`: the channel header, one line per slot, totals.

use std::fmt::Write as _;
use std::path::Path;

use ringtrace::inspect::channel::{ChannelHeader, CHANNEL_VERSION};
use ringtrace::inspect::{InspectError, RingMode};

use crate::format::{json_string, Failure};
use crate::stat::utc;

/// What `stat` shows of one slot's ring.
struct Slot {
    /// The producer's pid (0: none) and whether it is alive.
    producer: (u32, bool),
    consumer: u32,
    committed: u64,
    lost: u64,
    /// Overwrite mode: records overwritten in all (read or not).
    overwritten: u64,
    /// Overwrite mode: of them, those a consumer had not read.
    overwritten_unread: u64,
    dead: u64,
    /// Records not consumed yet (discard mode) or held (overwrite mode).
    held: u64,
}

/// Sums over the slots that could be read.
#[derive(Default)]
struct Totals {
    committed: u64,
    lost: u64,
    overwritten: u64,
    dead: u64,
    held: u64,
    producers: u64,
    unreadable: u64,
}

impl Totals {
    fn add(&mut self, s: &Result<Slot, String>) {
        match s {
            Ok(s) => {
                self.committed = self.committed.saturating_add(s.committed);
                self.lost = self.lost.saturating_add(s.lost);
                self.overwritten = self.overwritten.saturating_add(s.overwritten);
                self.dead = self.dead.saturating_add(s.dead);
                self.held = self.held.saturating_add(s.held);
                self.producers += u64::from(s.producer.1);
            }
            Err(_) => self.unreadable += 1,
        }
    }
}

pub fn stat(path: &Path, json: bool) -> Result<(), Failure> {
    let ch = super::open_channel(path)?;
    let h = *ch.header();
    let read = |i| -> Result<Slot, InspectError> {
        let ring = ch.ring(i)?;
        let s = ring.state()?;
        let held = ring.records()?.len() as u64;
        let pid = s.producer_attached;
        Ok(Slot {
            producer: (pid, pid != 0 && crate::format::alive(pid)),
            consumer: s.consumer_attached,
            committed: s.committed,
            lost: s.lost,
            overwritten: if h.mode == RingMode::Overwrite { s.overwritten } else { 0 },
            overwritten_unread: s.overwritten_unread,
            dead: s.dead,
            held,
        })
    };
    let slots: Vec<Result<Slot, String>> =
        (0..h.slots).map(|i| read(i).map_err(|e| e.to_string().replace(['\n', '\r'], " "))).collect();
    let mut totals = Totals::default();
    slots.iter().for_each(|s| totals.add(s));
    let text = if json { to_json(path, &h, &slots, &totals) } else { to_text(path, &h, &slots, &totals) };
    crate::format::print(&text)
}

fn clock_text(h: &ChannelHeader) -> &'static str {
    match h.clock_name() {
        "none" => "none (records carry no timestamp; listed slot by slot)",
        "mono" => "mono (CLOCK_MONOTONIC ns, stamped first in each record)",
        "tsc" => "tsc (the TSC in CLOCK_MONOTONIC ns, stamped first in each record)",
        _ => "best (the TSC where invariant, else CLOCK_MONOTONIC; ns, stamped first in each record)",
    }
}

fn held_name(h: &ChannelHeader) -> &'static str {
    if h.mode == RingMode::Overwrite {
        "held"
    } else {
        "unconsumed"
    }
}

fn producer_text(p: (u32, bool)) -> String {
    match p {
        (0, _) => "none".into(),
        (pid, true) => pid.to_string(),
        (pid, false) => format!("{pid} (dead)"),
    }
}

fn to_text(path: &Path, h: &ChannelHeader, slots: &[Result<Slot, String>], t: &Totals) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "channel file  {}", path.display());
    let _ = writeln!(
        o,
        "layout        channel version {CHANNEL_VERSION}, created {} by pid {}",
        utc(h.created_ns),
        h.creator_pid
    );
    let _ = writeln!(o, "mode          {}", h.mode);
    let _ = writeln!(o, "clock         {}", clock_text(h));
    let _ = writeln!(
        o,
        "slots         {} single-producer rings of {} bytes (images of {} bytes from offset {})",
        h.slots, h.capacity, h.image_len, h.first
    );
    let _ = writeln!(
        o,
        "{:>6}  {:<14} {:>12} {:>10} {:>12} {:>6} {:>11}",
        "slot",
        "producer",
        "committed",
        "lost",
        "overwritten",
        "dead",
        held_name(h)
    );
    for (i, s) in slots.iter().enumerate() {
        match s {
            Ok(s) => {
                let _ = writeln!(
                    o,
                    "{i:>6}  {:<14} {:>12} {:>10} {:>12} {:>6} {:>11}",
                    producer_text(s.producer),
                    s.committed,
                    s.lost,
                    s.overwritten,
                    s.dead,
                    s.held
                );
            }
            Err(e) => _ = writeln!(o, "{i:>6}  error: {e}"),
        }
    }
    let _ = writeln!(
        o,
        "{:>6}  {:<14} {:>12} {:>10} {:>12} {:>6} {:>11}",
        "totals",
        format!("{} live", t.producers),
        t.committed,
        t.lost,
        t.overwritten,
        t.dead,
        t.held
    );
    if t.unreadable > 0 {
        let _ = writeln!(o, "unreadable    {} slot(s), not in the totals", t.unreadable);
    }
    o
}

fn to_json(path: &Path, h: &ChannelHeader, slots: &[Result<Slot, String>], t: &Totals) -> String {
    let mut o = String::from("{\"path\":");
    json_string(&mut o, &path.display().to_string());
    let _ = write!(
        o,
        ",\"kind\":\"channel\",\"version\":{CHANNEL_VERSION},\"mode\":\"{}\",\"clock\":\"{}\",\"clock_code\":{},\
         \"stamped\":{},\"slot_count\":{},\"capacity\":{},\"image_len\":{},\"first\":{},\
         \"calibration\":[{},{},{}],\"creator_pid\":{},\"created_ns\":{},\"slots\":[",
        h.mode,
        h.clock_name(),
        h.clock,
        h.stamped(),
        h.slots,
        h.capacity,
        h.image_len,
        h.first,
        h.calibration[0],
        h.calibration[1],
        h.calibration[2],
        h.creator_pid,
        h.created_ns,
    );
    for (i, s) in slots.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        match s {
            Ok(s) => {
                let _ = write!(
                    o,
                    "{sep}{{\"slot\":{i},\"producer_pid\":{},\"producer_alive\":{},\"consumer_pid\":{},\
                     \"committed\":{},\"lost\":{},\"overwritten\":{},\"overwritten_unread\":{},\"dead\":{},\"held\":{}}}",
                    s.producer.0,
                    s.producer.1,
                    s.consumer,
                    s.committed,
                    s.lost,
                    s.overwritten,
                    s.overwritten_unread,
                    s.dead,
                    s.held
                );
            }
            Err(e) => {
                let _ = write!(o, "{sep}{{\"slot\":{i},\"error\":");
                json_string(&mut o, e);
                o.push('}');
            }
        }
    }
    let _ = writeln!(
        o,
        "],\"totals\":{{\"committed\":{},\"lost\":{},\"overwritten\":{},\"dead\":{},\"held\":{},\
         \"live_producers\":{},\"unreadable_slots\":{}}}}}",
        t.committed, t.lost, t.overwritten, t.dead, t.held, t.producers, t.unreadable
    );
    o
}
