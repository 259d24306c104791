//! Reading an overwrite ring while producers write it: copy, fence, check, parse.
//!
//! 1. Load `(O, retired)` (seqlock) and `P`; copy the words of `[max(from, O), P)` (at
//!    most `limit` bytes) into a private buffer with atomic loads (Acquire, so that a
//!    header seen committed orders its payload's loads after it).
//! 2. Load `(O, retired)` again as `O'` (the copy's Acquire loads order it after them).
//! 3. Every byte copied from a position at or after `O'` is the byte that was there
//!    before any rewrite (module rule in [`super`]), and `O'` is a record boundary. Parse
//!    records from `max(from, O')` through the copy; the records before it are counted as
//!    overwritten (`retired` at `O'` says how many committed records lie before it).
//! 4. If `O'` passed the end of the copy, everything copied is stale: start again, at
//!    most [`MAX_ATTEMPTS`] times, then report `Busy` (the kernel review's rule: no
//!    unbounded loop).
//!
//! Parsing trusts nothing it copied: a length that runs past the copy or past the
//! largest record is [`Parse::Corrupt`], never an out-of-bounds read.

use crate::core::Core;
use crate::layout::{footprint, len_word, BUSY_BIT, DISCARD_BIT, HDR_SIZE, LEN_MASK};
use crate::region::Region;
use crate::sync::Ordering::Acquire;

/// Copies a reader makes before it gives up with `Busy`.
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

    fn word_at(&self, pos: u64) -> u64 {
        let at = (pos - self.start) as usize;
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.bytes[at..at + 8]);
        u64::from_ne_bytes(w)
    }
}

impl<R: Region> Core<R> {
    /// Copies and parses the intact records from `from` (a record boundary, or 0), at
    /// most `limit` bytes of ring, into `out`. `None`: [`MAX_ATTEMPTS`] copies in a row
    /// were overwritten before they could be checked, or the seqlock stayed busy.
    pub(crate) fn capture(&self, from: u64, limit: u64, walk: Walk, out: &mut Capture) -> Option<()> {
        let cap = self.capacity();
        for _ in 0..MAX_ATTEMPTS {
            let (o0, _) = self.over_state()?;
            let start = from.max(o0);
            let end = self.prod().min(start + limit.min(cap));
            let end = end.max(start);
            out.bytes.clear();
            out.bytes.reserve((end - start) as usize);
            let mut at = start;
            while at < end {
                // Acquire: pairs with the Release header stores in `commit` (a header
                // copied as committed orders the loads of its payload, which come after
                // it, after the producer's writes), and with the Release fences of
                // retirers and producers for the check below.
                let w = self.region.header(at).load(Acquire);
                out.bytes.extend_from_slice(&w.to_ne_bytes());
                at += 8;
            }
            // No fence needed here: the word loads above are Acquire, so one that read a
            // rewritten word (a retirer's zero, or a later producer's store, each after
            // its writer's Release fence) synchronizes with that fence, and the `O` loaded
            // below is then past it (module docs of `overwrite`). The seqlock read orders
            // its own loads.
            let (o1, r1) = self.over_state()?;
            if o1 > start && o1 >= end && end > start {
                continue; // all of it may be stale
            }
            out.start = start;
            out.first = start.max(o1);
            out.retired_at_first = if out.first == o1 { Some(r1) } else { None };
            if o1 > start && start == end {
                out.start = o1; // nothing copied; the reader moves to `O'`
            }
            parse(walk, cap, end, out);
            return Some(());
        }
        None
    }
}

/// Walks the records of the copy from `out.first` to `end` (`cap`: the ring's capacity,
/// which bounds a record's footprint).
pub(crate) fn parse(walk: Walk, cap: u64, end: u64, out: &mut Capture) {
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
        if fp > cap - HDR_SIZE || x + fp > end {
            out.stop = Parse::Corrupt { pos: x, header: h };
            break;
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
