//! A channel file's slots read together: every slot's ring, its records merged by
//! timestamp.
//!
//! Order: records of a stamped channel are sorted by their timestamp, ties in slot
//! order (and, within a slot, in ring order). A channel without timestamps (clock
//! `none`) has no order across slots: its records are listed slot by slot, each slot's
//! oldest first. A slot whose ring cannot be read is warned about on stderr, never
//! fatal.

use std::fs::File;

use ringtrace::inspect::channel::{ChannelFile, ChannelHeader};
use ringtrace::inspect::{At, Record, Records, RingFile};

use crate::failure::chain;
use crate::output::{warn, warn_corrupt};
use crate::pipeline::record::{self, Origin, Raw};

/// A channel's ring, read through the channel file.
pub type SlotRing<'a> = RingFile<At<&'a File>>;

/// The rings of every slot that can be opened; the others are warned about.
pub fn rings(ch: &ChannelFile<File>) -> Vec<(u32, SlotRing<'_>)> {
    (0..ch.header().slots)
        .filter_map(|i| match ch.ring(i) {
            Ok(r) => Some((i, r)),
            Err(e) => {
                warn_slot(i, &chain(&e));
                None
            }
        })
        .collect()
}

/// Warns that slot `slot` is not shown, and why.
pub fn warn_slot(slot: u32, e: &dyn std::fmt::Display) {
    warn(&format!("slot {slot} is not shown: {e}"));
}

/// What goes before a slot's messages on stderr.
pub fn label(slot: u32) -> String {
    format!("slot {slot}: ")
}

/// Every slot's records, the unreadable slots warned about.
pub fn read_all(rings: &[(u32, SlotRing<'_>)]) -> Vec<(u32, Records)> {
    let mut out = Vec::with_capacity(rings.len());
    for (i, ring) in rings {
        match ring.records() {
            Ok(records) => {
                warn_corrupt(&records, &label(*i));
                out.push((*i, records));
            }
            Err(e) => warn_slot(*i, &chain(&e)),
        }
    }
    out
}

/// One record of a merge: its slot, its timestamp (if stamped), the record with the
/// payload past the stamp.
#[derive(Debug)]
pub struct Entry<'a> {
    slot: u32,
    ts: Option<u64>,
    rec: Record<'a>,
}

impl<'a> Entry<'a> {
    /// The record, with its slot and timestamp.
    pub fn record(&self) -> record::Record<'a> {
        let origin = Some(Origin { slot: self.slot, ts: self.ts });
        record::Record::Raw(Raw { origin, ..Raw::of(&self.rec) })
    }
}

/// Bytes of a stamp.
const STAMP: usize = 8;

/// The records of `slots` (in slot order, each oldest first) merged: sorted by
/// timestamp (stable: ties in slot order) if the channel stamps records. Records too
/// short for a stamp get ts 0 and are counted on stderr. TSC channels' stamps are raw
/// ticks, converted to nanoseconds with the header's calibration.
pub fn merge<'a>(h: &ChannelHeader, slots: &'a [(u32, Records)]) -> Vec<Entry<'a>> {
    let mut short = 0u64;
    let mut out: Vec<Entry<'a>> = Vec::with_capacity(slots.iter().map(|(_, r)| r.len()).sum());
    for (slot, records) in slots {
        for rec in records.iter() {
            let (ts, payload) = if !h.stamped() {
                (None, rec.payload)
            } else if let Some((stamp, rest)) = rec.payload.split_first_chunk::<STAMP>() {
                (Some(h.to_ns(u64::from_ne_bytes(*stamp))), rest)
            } else {
                short += 1;
                (Some(0), rec.payload)
            };
            out.push(Entry { slot: *slot, ts, rec: Record { payload, ..rec } });
        }
    }
    if h.stamped() {
        out.sort_by_key(|e| e.ts);
    }
    if short > 0 {
        warn(&format!("{short} record(s) too short to hold a timestamp (shown with ts 0, whole)"));
    }
    out
}
