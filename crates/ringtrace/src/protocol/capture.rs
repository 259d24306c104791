//! What a reader copies out of an overwrite ring (or a kernel overwrite map, or a
//! snapshot file) and how the copy is walked: [`Capture`] and [`parse`]. Plain bytes: no
//! atomics, no ring; the copying is in [`super::read`].

use crate::format::record::{footprint, len_word, BUSY_BIT, DISCARD_BIT, HDR_SIZE, LEN_MASK};

pub(crate) const MAX_ATTEMPTS: u32 = 16;

/// What the copy parses up to: a consumer stops at the first unfinished record (it
/// delivers in order); a snapshot steps over BUSY records (their length is known) and
/// stops only at a header still zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Walk {
    Consumer,
    Snapshot,
}

/// Why parsing stopped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Parse {
    /// At the end of the copy (the producer position when it was taken, or the limit).
    #[default]
    End,
    /// At a record not finished yet (zero header; BUSY for a consumer).
    Unfinished,
    /// At a header that cannot be one this ring's producers wrote.
    Corrupt { pos: u64, header: u64 },
}

/// One record found by the parse: its position and its length word (DISCARD bit kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) pos: u64,
    pub(crate) word: u32,
}

impl Found {
    pub(crate) fn len(&self) -> u32 {
        self.word & LEN_MASK
    }
    pub(crate) fn discarded(&self) -> bool {
        self.word & DISCARD_BIT != 0
    }
    pub(crate) fn end(&self) -> u64 {
        self.pos + footprint(self.len())
    }
}

/// A private copy of part of the ring and the records parsed from it. Reused between
/// reads, so steady-state reading allocates nothing.
#[derive(Debug, Default, Clone)]
pub(crate) struct Capture {
    /// The bytes of `[start, start + bytes.len())`.
    pub(crate) bytes: Vec<u8>,
    pub(crate) start: u64,
    /// First record boundary parsed (`>= from`): where the intact records begin.
    pub(crate) first: u64,
    /// Committed records before `first`, when `first` is `O'` (else `None`: `first` is
    /// the reader's own cursor and it knows its count).
    pub(crate) retired_at_first: Option<u64>,
    /// The boundary where parsing stopped.
    pub(crate) end: u64,
    pub(crate) stop: Parse,
    /// Finished records in `[first, end)` (committed and discarded; snapshots leave out
    /// the discarded).
    pub(crate) found: Vec<Found>,
    /// BUSY records a snapshot stepped over.
    pub(crate) unfinished: u64,
}

impl Capture {
    /// The payload of a record found by the last read.
    pub(crate) fn payload(&self, f: Found) -> &[u8] {
        let at = (f.pos + HDR_SIZE - self.start) as usize;
        &self.bytes[at..at + f.len() as usize]
    }

    /// Whether the parse stopped at a header still zero (space claimed by a producer
    /// that has not yet marked it BUSY) with words written after it in the copy: a
    /// claim in progress that hides newer records, whose length no reader can know until
    /// its producer writes the header. (Space past a claim is zero until a later
    /// producer writes its header there, so a nonzero word past it is a newer record.)
    pub(crate) fn hides_records(&self) -> bool {
        if self.stop != Parse::Unfinished {
            return false;
        }
        let after = (self.end - self.start) as usize + HDR_SIZE as usize;
        self.bytes.get(after..).is_some_and(|rest| rest.iter().any(|&b| b != 0))
    }

    fn word_at(&self, pos: u64) -> u64 {
        let at = (pos - self.start) as usize;
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.bytes[at..at + 8]);
        u64::from_ne_bytes(w)
    }
}

/// Snapshots copy the ring newest first in chunks of this many bytes, checking `O`
/// between chunks. (The loom models use 8 bytes, so that records straddle chunks, or 16,
/// so that they do not and the model stays small.)
pub(crate) const CHUNK: u64 = 16 * 1024;

/// Walks the records of the copy from `out.first` to `end` (`cap`: the ring's capacity,
/// which bounds a record's footprint). `cut`: the copy ended at a length limit, not at
/// the producer position, so a record running past `end` is whole in the ring and only
/// left for the next read (otherwise it is corrupt). `out.bytes` covers `[out.start,
/// end)`, and `out.start`, `out.first` and `end` are multiples of 8.
pub(crate) fn parse(walk: Walk, cap: u64, end: u64, cut: bool, out: &mut Capture) {
    out.found.clear();
    out.unfinished = 0;
    let mut x = out.first;
    out.stop = Parse::End;
    // Bounded: `x` grows by at least 8 per step up to `end`.
    while x < end {
        let h = out.word_at(x);
        let w = len_word(h);
        if h == 0 {
            out.stop = Parse::Unfinished;
            break;
        }
        let fp = footprint(w & LEN_MASK);
        // `end - x` cannot underflow (`x < end`) and never overflows, unlike `x + fp`.
        if fp > cap - HDR_SIZE || (fp > end - x && !cut) {
            out.stop = Parse::Corrupt { pos: x, header: h };
            break;
        }
        if fp > end - x {
            break; // cut: read it next time, from its header
        }
        if w & BUSY_BIT != 0 {
            if walk == Walk::Consumer {
                out.stop = Parse::Unfinished;
                break;
            }
            out.unfinished += 1;
        } else if w & DISCARD_BIT == 0 || walk == Walk::Consumer {
            out.found.push(Found { pos: x, word: w });
        }
        x += fp;
    }
    out.end = x;
}
