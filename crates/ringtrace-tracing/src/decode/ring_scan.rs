//! Opening a recorder directory: every ring of its channel file walked once, every
//! record checked, the runs of records noted ([`Piece`]s) for `ring_read` to read
//! again; then the catalog.
//!
//! A ring is walked in windows of [`WINDOW`] bytes where every record of it is a
//! committed record, one after the other (the usual ring, and every ring of a process
//! that finished its records), checking after each window that the ring did not
//! reclaim its bytes meanwhile. Any other ring (a record being written, discarded
//! records, damage, a live ring overwriting what is being read) is read whole through
//! `ringtrace::inspect`, which knows them all, and its records noted the same way: that
//! ring's bytes are held while it is walked, one ring at a time. A ring whose producer's
//! process still runs is read that way too, and its records kept ([`RingAt::held`]): the
//! process would overwrite them before they are read again.

use std::fs::File;
use std::path::Path;

use ringtrace::inspect::channel::{ChannelFile, ChannelHeader};
use ringtrace::inspect::{At, RingFile};

use super::rings::{self, Piece, RingAt, RingRecords, Runs};
use crate::directory::{self, not_a_trace};
use crate::error::{with_causes, Error};
use crate::wire::{self, WireError};

/// Bytes of a ring read at a time by the walk.
const WINDOW: u64 = 256 << 10;

/// One ring's records, as they are met.
#[derive(Default)]
struct Tally {
    runs: Runs,
    count: u64,
    lost: u64,
    unstamped: u64,
    bad: u64,
    first_bad: Option<WireError>,
}

impl Tally {
    fn record(&mut self, channel: &ChannelHeader, ring: u32, pos: u64, end: u64, payload: &[u8]) {
        let Some((ts, body)) = rings::stamped(channel, payload) else {
            self.unstamped += 1;
            self.runs.push(ring, pos, end, None);
            return;
        };
        match wire::check(body) {
            Ok(n) => {
                self.count += 1;
                self.lost += n.unwrap_or(0);
            }
            Err(e) => {
                self.bad += 1;
                self.first_bad.get_or_insert(e);
            }
        }
        self.runs.push(ring, pos, end, Some(ts));
    }
}

/// Opens the channel file read-only and nonblocking, a regular file only.
fn open_rings(path: &Path) -> Result<File, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular = || match ChannelFile::open(path) {
        Err(e) => not_a_trace(path, with_causes(&e)),
        Ok(_) => not_a_trace(path, "not a regular file"),
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|_| not_regular())?;
    match file.metadata() {
        Ok(m) if m.is_file() => Ok(file),
        _ => Err(not_regular()),
    }
}

/// Walks ring `ring` in windows, if every record of it is a committed record one after
/// the other and it reclaims none of them meanwhile; `None` (and nothing noted) if not.
fn walk_clean(
    file: &File,
    ring: &RingFile<At<&&File>>,
    at: &RingAt,
    index: u32,
    channel: &ChannelHeader,
    buf: &mut Vec<u8>,
) -> Option<Tally> {
    let mode = at.header.mode;
    let (lo, hi) = ring.state().ok()?.window(mode);
    let mut t = Tally::default();
    let (mut pos, mut want) = (lo, 0u64);
    // Each turn moves `pos` on by a record at least, or sets `want` to the size of the
    // record it did not hold, which the next turn's window holds.
    while pos < hi {
        let n = WINDOW.max(want).min(hi - pos).min(at.header.capacity);
        buf.resize(n as usize, 0);
        rings::read_data(file, at, pos, buf).ok()?;
        // Bytes the ring reclaimed while they were read may have changed.
        if ring.state().ok()?.window(mode).0 > pos {
            return None;
        }
        let mut off = 0usize;
        want = 0;
        while pos + (off as u64) < hi {
            if off + 8 > buf.len() {
                break;
            }
            let (len, fp) = rings::committed(buf, off)?;
            let rec = pos + off as u64;
            let end = rec.checked_add(fp).filter(|&e| e <= hi)?;
            if off as u64 + fp > buf.len() as u64 {
                want = fp;
                break;
            }
            t.record(channel, index, rec, end, &buf[off + 8..][..len as usize]);
            off += fp as usize;
        }
        if off == 0 && want == 0 {
            // Not a header's bytes left in the window: not a ring this walk reads.
            return None;
        }
        pos += off as u64;
    }
    Some(t)
}

/// Whether a process that runs holds ring `ring`'s producer: it may overwrite the
/// records before they are read again.
fn live(ring: &RingFile<At<&&File>>) -> bool {
    let Ok(s) = ring.state() else { return false };
    let alive = |pid: u64| pid != 0 && u32::try_from(pid).is_ok_and(ringtrace::inspect::process_alive);
    alive(u64::from(s.producer_attached)) || s.producers.iter().any(|p| alive(p.owner))
}

/// Reads ring `ring` whole through `ringtrace::inspect`; a `live` ring's records are
/// kept ([`RingAt::held`]).
fn walk_inspect(
    ring: &RingFile<At<&&File>>,
    at: &mut RingAt,
    index: u32,
    channel: &ChannelHeader,
    live: bool,
    s: &mut Scanned,
) -> Option<Tally> {
    let slot = at.slot;
    let records = match ring.records() {
        Ok(r) => r,
        Err(e) => {
            s.unreadable.push((slot, with_causes(&e)));
            return None;
        }
    };
    s.unfinished += records.unfinished_count();
    if let Some(bad) = records.corrupt() {
        s.unreadable.push((slot, format!("a corrupt header at position {} (read up to it)", bad.pos)));
    }
    let mut t = Tally::default();
    for rec in records.iter() {
        t.record(channel, index, rec.pos, rec.end(), rec.payload);
    }
    if live {
        at.held = rings::hold(&records);
    }
    Some(t)
}

/// A recorder directory opened: its catalog's bytes, where its records are, and what
/// could not be read.
pub(crate) struct Scanned {
    pub catalog: Vec<u8>,
    pub records: RingRecords,
    /// Ring records shorter than their timestamp.
    pub unstamped: u64,
    /// Records that do not decode, and why the first does not.
    pub bad: u64,
    pub first_bad: Option<WireError>,
    /// Records being written when read, stepped over.
    pub unfinished: u64,
    /// Rings that could not be read: `(slot, why)`.
    pub unreadable: Vec<(u32, String)>,
}

/// Opens a recorder directory: walks its rings, then reads its catalog (every record
/// read was committed after its callsite's and thread's entries were appended).
pub(crate) fn scan(dir: &Path) -> Result<Scanned, Error> {
    let (catalog_path, rings_path) = directory::paths(dir)?;
    let file = open_rings(&rings_path)?;
    let ch = ChannelFile::from_source(&file).map_err(|e| not_a_trace(&rings_path, with_causes(&e)))?;
    let channel = *ch.header();
    let mut s = Scanned {
        catalog: Vec::new(),
        records: RingRecords {
            file: file.try_clone().map_err(|e| Error::io("reading", &rings_path, e))?,
            channel,
            rings: Vec::new(),
            pieces: Vec::new(),
            count: 0,
            lost: 0,
        },
        unstamped: 0,
        bad: 0,
        first_bad: None,
        unfinished: 0,
        unreadable: Vec::new(),
    };
    let (mut buf, mut pieces) = (Vec::new(), Vec::new());
    for slot in 0..channel.slots {
        let ring = match ch.ring(slot) {
            Ok(r) => r,
            Err(e) => {
                s.unreadable.push((slot, with_causes(&e)));
                continue;
            }
        };
        let index = s.records.rings.len() as u32;
        let mut at = RingAt { slot, image: channel.ring_offset(slot), header: ring.header().clone(), held: None };
        let live = live(&ring);
        let clean = if live { None } else { walk_clean(&file, &ring, &at, index, &channel, &mut buf) };
        let t = match clean {
            Some(t) => t,
            None => match walk_inspect(&ring, &mut at, index, &channel, live, &mut s) {
                Some(t) => t,
                None => continue,
            },
        };
        s.records.rings.push(at);
        s.records.count += t.count;
        s.records.lost += t.lost;
        s.unstamped += t.unstamped;
        s.bad += t.bad;
        if let Some(e) = t.first_bad {
            s.first_bad.get_or_insert(e);
        }
        pieces.extend(t.runs.finish());
    }
    pieces.sort_unstable_by_key(Piece::first_key);
    s.records.pieces = pieces;
    s.catalog = std::fs::read(&catalog_path).map_err(|e| Error::io("reading", &catalog_path, e))?;
    Ok(s)
}
