//! `ringtrace stat|tail|snapshot` on a channel file: a header page, then one
//! single-producer ring per slot. Read with the untrusted reader
//! ([`ringtrace::inspect::channel`]); the slots' records are merged by timestamp.
//!
//! Order: records of a stamped channel are sorted by their timestamp, ties in slot
//! order (and, within a slot, in ring order). A channel without timestamps (clock
//! `none`) has no order across slots: its records are listed slot by slot, each slot's
//! oldest first, and `tail -n N` prints the last N of that listing. `tail --follow`
//! sorts the records each pass (every 50 ms) finds: the order is exact within a pass,
//! but a record committed late (after a newer one of another slot was printed) is
//! printed when it shows up.
//!
//! A slot whose ring cannot be read is reported (a line of `stat`, a warning on stderr
//! for `tail` and `snapshot`), never fatal; a channel header that cannot be one is.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use ringtrace::inspect::channel::{is_channel_file, ChannelFile, ChannelHeader, CHANNEL_MAGIC};
use ringtrace::inspect::{At, InspectError, Record, Records, RingFile};

use crate::format::{eprint_line, stdout_err, write_channel_record, Failure, Format, Origin};
use crate::tail::{warn_corrupt, Follower, POLL};

mod stat;

pub use stat::stat;

/// A channel's ring, read through the channel file.
type Ring<'a> = RingFile<At<&'a File>>;

/// Whether `path` is a channel file (else it is read as a ring file).
pub fn is_channel(path: &Path) -> Result<bool, Failure> {
    Ok(is_channel_file(path)?)
}

/// Opens a ring file; a file whose magic is a channel magic of another version is
/// reported as such rather than as "not a ring file".
pub fn open_ring(path: &Path) -> Result<RingFile<File>, Failure> {
    RingFile::open(path).map_err(|e| match e {
        InspectError::BadMagic { found } if found.to_le_bytes()[..7] == CHANNEL_MAGIC.to_le_bytes()[..7] => {
            Failure::Message(format!(
                "channel file format {} is not supported (magic is {found:#018x}; this ringtrace reads format {})",
                found.to_le_bytes()[7],
                CHANNEL_MAGIC.to_le_bytes()[7]
            ))
        }
        e => e.into(),
    })
}

/// Opens a channel file, its header checked (the library's messages say "ring
/// header" where a channel's header is meant).
pub fn open_channel(path: &Path) -> Result<ChannelFile<File>, Failure> {
    ChannelFile::open(path).map_err(|e| {
        Failure::Message(match e {
            InspectError::BadField { field, value, expected } => {
                format!("invalid channel header: {field} is {value}, expected {expected}")
            }
            InspectError::TooSmall { len, need } => {
                format!("channel file is {len} bytes, the header alone needs {need}")
            }
            InspectError::Truncated { len, need, .. } => {
                format!("channel file is {len} bytes but its header says {need} (truncated?)")
            }
            e => e.to_string(),
        })
    })
}

/// The rings of every slot that can be opened; the others are warned about.
fn rings(ch: &ChannelFile<File>) -> Vec<(u32, Ring<'_>)> {
    (0..ch.header().slots)
        .filter_map(|i| match ch.ring(i) {
            Ok(r) => Some((i, r)),
            Err(e) => {
                warn_slot(i, &e);
                None
            }
        })
        .collect()
}

fn warn_slot(slot: u32, e: &dyn std::fmt::Display) {
    let e = e.to_string().replace(['\n', '\r'], " ");
    eprint_line(format_args!("ringtrace: warning: slot {slot} is not shown: {e}"));
}

fn label(slot: u32) -> String {
    format!("slot {slot}: ")
}

/// One record of a merge: its slot, its timestamp (if stamped), the record with the
/// payload past the stamp.
struct Entry<'a> {
    slot: u32,
    ts: Option<u64>,
    rec: Record<'a>,
}

/// Bytes of a stamp.
const STAMP: usize = 8;

/// The records of `slots` (in slot order, each oldest first) merged: sorted by
/// timestamp (stable: ties in slot order) if the channel stamps records. Records too
/// short for a stamp get ts 0 and are counted on stderr.
fn merge<'a>(h: &ChannelHeader, slots: &'a [(u32, Records)]) -> Vec<Entry<'a>> {
    let mut short = 0u64;
    let mut out: Vec<Entry<'a>> = Vec::with_capacity(slots.iter().map(|(_, r)| r.len()).sum());
    for (slot, records) in slots {
        for rec in records.iter() {
            let (ts, payload) = if !h.stamped() {
                (None, rec.payload)
            } else if let Some((stamp, rest)) = rec.payload.split_first_chunk::<STAMP>() {
                (Some(stamp_ns(h, u64::from_ne_bytes(*stamp))), rest)
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
        eprint_line(format_args!(
            "ringtrace: warning: {short} record(s) too short to hold a timestamp (shown with ts 0, whole)"
        ));
    }
    out
}

/// Nanoseconds of a record's stamp: TSC channels' records carry raw ticks, converted
/// with the header's calibration (the order is the same); others carry nanoseconds.
fn stamp_ns(h: &ChannelHeader, stamp: u64) -> u64 {
    h.to_ns(stamp)
}

fn write_entry(w: &mut impl Write, format: Format, e: &Entry<'_>) -> std::io::Result<()> {
    write_channel_record(w, format, &e.rec, Origin { slot: e.slot, ts: e.ts })
}

/// Every slot's records (`records()`), the unreadable slots warned about.
fn read_all(rings: &[(u32, Ring<'_>)]) -> Vec<(u32, Records)> {
    let mut out = Vec::with_capacity(rings.len());
    for (i, ring) in rings {
        match ring.records() {
            Ok(records) => {
                warn_corrupt(&records, &label(*i));
                out.push((*i, records));
            }
            Err(e) => warn_slot(*i, &e),
        }
    }
    out
}

/// `snapshot CHANNEL`: every record of every slot, merged, oldest (or newest) first.
pub fn snapshot(path: &Path, reverse: bool, format: Format, output: Option<&Path>) -> Result<(), Failure> {
    let ch = open_channel(path)?;
    let rings = rings(&ch);
    let slots = read_all(&rings);
    let merged = merge(ch.header(), &slots);
    crate::snapshot::write_output(output, |w| {
        let mut w = BufWriter::new(w);
        if reverse {
            merged.iter().rev().try_for_each(|e| write_entry(&mut w, format, e))?;
        } else {
            merged.iter().try_for_each(|e| write_entry(&mut w, format, e))?;
        }
        w.flush()
    })
}

/// `tail CHANNEL`: the newest `count` records across slots, merged, oldest first; with
/// `follow`, each pass's new records, sorted.
pub fn tail(path: &Path, count: usize, follow: bool, format: Format) -> Result<(), Failure> {
    let ch = open_channel(path)?;
    let h = *ch.header();
    let rings = rings(&ch);
    let mut out = BufWriter::new(std::io::stdout().lock());
    if !follow {
        let slots = read_all(&rings);
        let merged = merge(&h, &slots);
        let skip = merged.len().saturating_sub(count);
        for e in &merged[skip..] {
            write_entry(&mut out, format, e).map_err(stdout_err)?;
        }
        return out.flush().map_err(stdout_err);
    }
    // Follow: each slot's ring followed as `tail --follow` follows a ring file.
    let mut first = Vec::with_capacity(rings.len());
    let mut followed = Vec::with_capacity(rings.len());
    for (i, ring) in &rings {
        match ring.records_from(0, true) {
            Ok(records) => {
                followed.push((*i, ring, Follower::new(ring, &records, label(*i))));
                first.push((*i, records));
            }
            Err(e) => warn_slot(*i, &e),
        }
    }
    let merged = merge(&h, &first);
    let skip = merged.len().saturating_sub(count);
    for e in &merged[skip..] {
        write_entry(&mut out, format, e).map_err(stdout_err)?;
    }
    out.flush().map_err(stdout_err)?;
    loop {
        std::thread::sleep(POLL);
        let mut pass = Vec::with_capacity(followed.len());
        // A slot that cannot be read any more is warned about once and left.
        followed.retain_mut(|(i, ring, follower)| match follower.poll(ring) {
            Ok(records) => {
                pass.push((*i, records));
                true
            }
            Err(Failure::Message(e)) => {
                warn_slot(*i, &e);
                false
            }
            Err(Failure::BrokenPipe) => false,
        });
        for e in &merge(&h, &pass) {
            write_entry(&mut out, format, e).map_err(stdout_err)?;
        }
        out.flush().map_err(stdout_err)?;
    }
}
