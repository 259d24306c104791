//! A recorder directory's records where they lie: in the rings of its channel file.
//!
//! Opening the directory walks every ring once (see `ring_scan`), checking each record,
//! and notes the runs of its records ([`Piece`]s: records one after the other in the
//! ring, their times never decreasing) by position and time alone. Reading them
//! (`ring_read`) merges the pieces by time, reading each ring's records again in small
//! windows of its bytes as they are reached: memory is a window per ring being read,
//! not the rings' bytes, nor their records decoded.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use ringtrace::format::record::{footprint, BUSY_BIT, DISCARD_BIT, HDR_SIZE, LEN_MASK};
use ringtrace::inspect::channel::ChannelHeader;
use ringtrace::inspect::{Header, Records};

/// A ring of the channel file, as it was when the directory was opened.
#[derive(Debug)]
pub(crate) struct RingAt {
    /// Its slot: the records' lane.
    pub slot: u32,
    /// Where its image starts in the channel file.
    pub image: u64,
    /// Its header, checked.
    pub header: Header,
    /// A live ring's records, copied when the directory was opened (a live process
    /// would overwrite them before they are read again): the bytes of positions from
    /// the first, laid out as in the ring.
    pub held: Option<(u64, Vec<u8>)>,
}

/// Records of a ring one after the other, their times never decreasing: from the
/// record whose header is at `start` to `end` (ring positions).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece {
    /// The ring's index in [`RingRecords::rings`] (rings in slot order).
    pub ring: u32,
    pub start: u64,
    pub end: u64,
    /// The earliest and latest times of its records.
    pub min_ts: u64,
    pub max_ts: u64,
}

impl Piece {
    /// What every record of the piece orders at or after: its first record's time, its
    /// ring, its first position (records of equal times order by ring, then position).
    pub fn first_key(&self) -> (u64, u32, u64) {
        (self.min_ts, self.ring, self.start)
    }
}

/// A recorder directory's records, in its channel file: `count` decode, and their `lost`
/// records count `lost` events.
#[derive(Debug)]
pub(crate) struct RingRecords {
    pub file: File,
    pub channel: ChannelHeader,
    pub rings: Vec<RingAt>,
    /// In the order of their [`first_key`](Piece::first_key)s.
    pub pieces: Vec<Piece>,
    pub count: u64,
    pub lost: u64,
}

/// Reads ring positions `[from, from + buf.len())` of `ring`'s data area into `buf`
/// (`buf.len()` at most its capacity): one or two positioned reads, the second where
/// the positions wrap around the data area's end.
/// (A held ring's from its copy.)
pub(crate) fn read_data(file: &File, ring: &RingAt, from: u64, buf: &mut [u8]) -> io::Result<()> {
    let cap = ring.header.capacity;
    let len = buf.len() as u64;
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    if let Some((base, held)) = &ring.held {
        let at = usize::try_from(from.wrapping_sub(*base)).map_err(|_| bad("a position not held"))?;
        let src =
            at.checked_add(buf.len()).and_then(|end| held.get(at..end)).ok_or_else(|| bad("a position not held"))?;
        buf.copy_from_slice(src);
        return Ok(());
    }
    if !cap.is_power_of_two() || len > cap {
        return Err(bad("a read larger than the ring"));
    }
    let base = ring.image.checked_add(ring.header.data_offset).ok_or_else(|| bad("a data area past 2^64"))?;
    let at = from & (cap - 1);
    let first = (cap - at).min(len) as usize;
    let (a, b) = buf.split_at_mut(first);
    file.read_exact_at(a, base.checked_add(at).ok_or_else(|| bad("a data area past 2^64"))?)?;
    if !b.is_empty() {
        file.read_exact_at(b, base)?;
    }
    Ok(())
}

/// The committed record whose header starts at `buf[at..]`: its payload's length and
/// its footprint. `None` if the header is not in `buf`, or is not a committed record's
/// (zero, being written, discarded, or without its producer's pid).
pub(crate) fn committed(buf: &[u8], at: usize) -> Option<(u32, u64)> {
    let h = buf.get(at..at.checked_add(HDR_SIZE as usize)?)?;
    let word = u32::from_ne_bytes(h[..4].try_into().ok()?);
    let pid = u32::from_ne_bytes(h[4..].try_into().ok()?);
    if pid == 0 || word & (BUSY_BIT | DISCARD_BIT) != 0 {
        return None;
    }
    let len = word & LEN_MASK;
    Some((len, footprint(len)))
}

/// A record's payload as the tracing layer writes it: its stamp, turned into
/// nanoseconds with the channel's clock, and its bytes; `None` for a payload shorter
/// than a stamp.
pub(crate) fn stamped<'b>(channel: &ChannelHeader, payload: &'b [u8]) -> Option<(u64, &'b [u8])> {
    let (stamp, body) = payload.split_first_chunk::<8>()?;
    Some((channel.to_ns(u64::from_ne_bytes(*stamp)), body))
}

/// The pieces of one ring, as its records are met in ring order.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    pub pieces: Vec<Piece>,
    open: Option<Piece>,
}

impl Runs {
    /// The record at positions `[pos, end)`, of time `ts` (`None`: it has no stamp, and
    /// a reading steps over it).
    pub fn push(&mut self, ring: u32, pos: u64, end: u64, ts: Option<u64>) {
        match (&mut self.open, ts) {
            (Some(p), Some(ts)) if p.end == pos && ts >= p.max_ts => {
                p.end = end;
                p.max_ts = ts;
            }
            (Some(p), None) if p.end == pos => p.end = end,
            (_, ts) => {
                self.pieces.extend(self.open.take());
                self.open = ts.map(|ts| Piece { ring, start: pos, end, min_ts: ts, max_ts: ts });
            }
        }
    }

    /// The pieces, the last one closed.
    pub fn finish(mut self) -> Vec<Piece> {
        self.pieces.extend(self.open.take());
        self.pieces
    }
}

/// A live ring's records read whole, laid out at their positions (see [`RingAt::held`]):
/// each record's header (its length and its producer's pid) and payload; `None` if it
/// holds none.
pub(crate) fn hold(records: &Records) -> Option<(u64, Vec<u8>)> {
    let base = records.iter().next()?.pos;
    let end = records.iter().next_back()?.end();
    let mut held = vec![0u8; usize::try_from(end.checked_sub(base)?).ok()?];
    for r in records.iter() {
        let at = usize::try_from(r.pos - base).ok()?;
        let out = held.get_mut(at..at + HDR_SIZE as usize + r.payload.len())?;
        out[..4].copy_from_slice(&(r.payload.len() as u32).to_ne_bytes());
        out[4..8].copy_from_slice(&r.pid.to_ne_bytes());
        out[8..].copy_from_slice(r.payload);
    }
    Some((base, held))
}
