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
//! 4. If `O'` passed the end of the copy, everything copied is stale (and a snapshot
//!    copy left with no committed record after producers retired committed ones is as
//!    good as stale): start again, at most [`MAX_ATTEMPTS`] times, then report `Busy`.
//!    A count of copies, not a deadline: each attempt waits for nothing, it copies
//!    again at once, and the bound keeps a reader that producers lap forever from
//!    looping forever.
//!
//! Parsing trusts nothing it copied: a length that runs past the copy or past the
//! largest record is [`crate::protocol::capture::Parse::Corrupt`], never an out-of-bounds read.

use super::capture::{parse, Capture, Walk, MAX_ATTEMPTS};
use super::core::Core;
use crate::format::record::{footprint, len_word, LEN_MASK};
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed};

impl<R: Region> Core<R> {
    /// Copies the ring words of `[from, to)` into `bytes` (exactly that long), with
    /// Acquire loads in ascending order.
    pub(crate) fn copy_words(&self, from: u64, to: u64, bytes: &mut [u8]) {
        debug_assert_eq!(bytes.len() as u64, to - from);
        for (at, dst) in (from..to).step_by(8).zip(bytes.chunks_exact_mut(8)) {
            // Acquire: pairs with the Release header stores in `commit` (a header copied
            // as committed orders the loads of its payload, which come after it, after
            // the producer's writes), and with the Release fences of retirers and
            // producers: a load that reads a rewritten word (a retirer's zero, or a later
            // producer's store) synchronizes with its writer's fence, so the `O` the
            // caller loads next is past that word (module docs of `overwrite`). No
            // separate fence is needed; the seqlock read orders its own loads.
            dst.copy_from_slice(&self.region.header(at).load(Acquire).to_ne_bytes());
        }
    }

    /// Copies and parses the intact records from `from` (a record boundary, or 0), at
    /// most `limit` bytes of ring, into `out`, oldest first: the consumer's read. `None`:
    /// [`MAX_ATTEMPTS`] copies in a row were overwritten before they could be checked,
    /// or the seqlock stayed busy.
    pub(crate) fn capture(&self, from: u64, limit: u64, walk: Walk, out: &mut Capture) -> Option<()> {
        let cap = self.capacity();
        for _ in 0..MAX_ATTEMPTS {
            let (o0, _) = self.over_state()?;
            let start = from.max(o0);
            let z = self.zeroed_acquire();
            // `P` may be past the `Z` just loaded (claims under a newer `Z`); the copy
            // stops at `Z`, and a record running past it is read next time (`cut`).
            let p_now = self.prod();
            let p = p_now.min(z);
            // A record longer than the limit is read whole (its header says how long;
            // if that header is stale, the check below throws the copy away). Relaxed:
            // this only sizes the copy, which loads the header again with Acquire.
            let first_len = footprint(len_word(self.region.header(start).load(Relaxed)) & LEN_MASK);
            let end = p.min(start.saturating_add(limit.max(first_len).min(cap))).max(start);
            out.bytes.clear();
            out.bytes.resize((end - start) as usize, 0);
            self.copy_words(start, end, &mut out.bytes);
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
            parse(walk, cap, end, end < p_now, out);
            return Some(());
        }
        None
    }

    /// `Z` without the lock bit, loaded with Acquire: pairs with the Release store of
    /// `zeroed` in `retire`, so the zeroing of everything below it happens-before the
    /// copy that follows: no word below it is read as it was a lap ago. (Without this,
    /// the argument rests on the header chain: the header just below an old `Z` was
    /// written by a producer that acquired the newer `Z`.) The copy stops below it.
    pub(super) fn zeroed_acquire(&self) -> u64 {
        self.control().overwrite.0.zeroed.load(Acquire) & !crate::format::control::LOCK
    }

    /// A snapshot's copy: the whole ring, **newest first**, in chunks of `chunk` bytes
    /// ([`crate::protocol::capture::CHUNK`]; a multiple of 8), checking `O` after each, and stopping where
    /// producers overwrote what was left to copy.
    ///
    /// Copying oldest first loses the race with producers that write faster than the
    /// copy goes (under two producers, next to nothing of a large ring is kept): by the
    /// time the copy ends, they have overwritten all of it. Newest first, the copy and the
    /// producers' overwriting meet in the middle, and what lies above is kept.
    ///
    /// Within a chunk words are copied in ascending order, so a header orders the loads
    /// of its payload after it. A record that straddles two chunks had its upper part
    /// copied before its header (the chunk above came first); those words are copied
    /// again after parsing, and `O` is checked once more after that.
    pub(crate) fn capture_newest(&self, chunk: u64, out: &mut Capture) -> Option<()> {
        let cap = self.capacity();
        for _ in 0..MAX_ATTEMPTS {
            let (o0, r0) = self.over_state()?;
            let z = self.zeroed_acquire();
            let p_now = self.prod();
            let end = p_now.min(z).max(o0);
            out.bytes.clear();
            out.bytes.resize((end - o0) as usize, 0);
            let mut lo = end;
            // Bounded: `lo` moves down by a chunk per step, to `o0` at most.
            while lo > o0 {
                let c = lo.saturating_sub(chunk).max(o0);
                self.copy_words(c, lo, &mut out.bytes[(c - o0) as usize..(lo - o0) as usize]);
                lo = c;
                let (o, _) = self.over_state()?;
                if o > lo {
                    break; // the rest is overwritten, or being overwritten
                }
            }
            // Every byte copied at or after `o1` is intact, and `o1 >= lo` (the loop
            // ends at `o0`, or stopped below an `O` that only grows).
            let (o1, _) = self.over_state()?;
            if o1 >= end && end > o0 {
                continue; // all of it overwritten while it was copied
            }
            out.start = o0;
            out.first = o1.max(o0);
            parse(Walk::Snapshot, cap, end, end < p_now, out);
            // Straddlers: copy again, now that their headers are loaded, the words above
            // each chunk boundary (chunk boundaries are `end - k * chunk`).
            for f in &out.found {
                let (pos, rec_end) = (f.pos, f.end());
                // The lowest chunk boundary above the header: `end - k * chunk` with the
                // largest `k` that keeps it above `pos`.
                let boundary = end - ((end - pos).div_ceil(chunk) - 1) * chunk;
                if boundary < rec_end {
                    let at = (boundary - o0) as usize..(rec_end - o0) as usize;
                    self.copy_words(boundary, rec_end, &mut out.bytes[at]);
                }
            }
            // Records below the final `O` may have had words copied again after being
            // overwritten: drop them. `O` is a record boundary of the chain parsed from
            // `o1` (intact headers), so the records kept still start at a boundary.
            let (o2, r2) = self.over_state()?;
            if o2 > out.first {
                if o2 >= out.end {
                    continue;
                }
                out.found.retain(|f| f.pos >= o2);
                out.first = o2;
            }
            if out.found.is_empty() && r2 > r0 {
                // Producers lapped the copy (its reader was preempted, most likely),
                // giving up committed records it held: what is left past `O` is at most
                // records being written, and the ring holds committed records. Copy it
                // again (within the attempts above) rather than return it empty. (A
                // ring whose `O` moves over discarded records only retires no
                // committed one, and its empty snapshot is the truth.)
                continue;
            }
            out.retired_at_first = Some(r2);
            return Some(());
        }
        None
    }
}
