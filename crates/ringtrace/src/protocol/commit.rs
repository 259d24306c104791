//! Commit and consume: a producer publishes its record's header; the consumer reads
//! records in reservation order and hands their space back.

use super::core::{Core, ReadCursor, Step};
use crate::barrier;
use crate::config::Wakeup;
use crate::format::control::{NEVER_WAKE, WAITING};
use crate::format::record::{footprint, len_word, pack, BUSY_BIT, DISCARD_BIT, LEN_MASK};
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

impl<R: Region> Core<R> {
    /// Publishes the record at `pos` (committed, or discarded), then wakes the consumer
    /// if `wakeup` and the policy say so.
    #[inline(always)]
    pub(crate) fn commit(&self, pos: u64, len: u32, discard: bool, wakeup: Wakeup) {
        let word = if discard { len | DISCARD_BIT } else { len };
        // Release: pairs with the Acquire header load in `next` (and `ready`): the
        // payload written into the reservation happens-before the consumer reads it.
        self.region.header(pos).store(pack(word, 0) | self.aux_bits, Release);
        if wakeup == Wakeup::NoWakeup || (self.watermark == NEVER_WAKE && wakeup != Wakeup::Force) {
            return;
        }
        // Pairs with `barrier::heavy` in `arm`: either the consumer's check after its
        // barrier sees the header above, or the load below sees WAITING.
        barrier::light(self.asymmetric);
        let wait = self.control().wait.0.word.load(Relaxed);
        if wait & WAITING != 0 {
            self.wake_slow(wait, pos, pos + footprint(len), wakeup);
        }
    }

    /// Reads the next record boundary: the consumer's whole reading step. Discarded
    /// records are stepped over (and counted) here.
    ///
    /// The common case (a committed record of at least one byte that fits) is a handful
    /// of instructions inline; everything else goes to [`Self::next_slow`].
    #[inline(always)]
    pub(crate) fn next(&self, rd: &mut ReadCursor) -> Step {
        // Acquire: pairs with the Release header store in `commit`.
        let header = self.region.header(rd.pos).load(Acquire);
        // Value prediction: the record is expected to have the previous one's length,
        // and its footprint (`stride`) is known in advance, so the header only confirms
        // the prediction with one (well predicted) compare. That takes the header load
        // out of the chain of dependent instructions from one record to the next, which
        // would otherwise bound the loop at a load's latency per record (the `back-to-back`
        // benchmark rows, one record written and read at a time, show it), and since `last_len` is
        // always a valid committed length, the match is also the whole validity check
        // (not zero, not BUSY, not DISCARD).
        let next = rd.pos + rd.stride;
        if len_word(header) == rd.last_len && next <= rd.end {
            let at = rd.pos;
            rd.pos = next;
            rd.consumed += 1;
            return Step::Record { pos: at, len: rd.last_len };
        }
        // By value, so that the caller's cursor never escapes and stays in registers.
        let (cursor, step) = self.next_slow(*rd);
        *rd = cursor;
        step
    }

    /// Every case of [`Self::next`] but the common one: a record of another size than
    /// the last, discarded and zero-length records, unfinished records, a whole ring
    /// read, corruption.
    #[inline(never)]
    pub(super) fn next_slow(&self, mut rd: ReadCursor) -> (ReadCursor, Step) {
        let step = loop {
            // Acquire: as in `next`.
            let header = self.region.header(rd.pos).load(Acquire);
            let word = len_word(header);
            if header == 0 || word & BUSY_BIT != 0 {
                // Claimed and not finished: wait. (At `published + capacity` lies our own
                // unreleased space: a header there is `Full`, below; zero bytes there,
                // possible when the consumer handed back part of a record, read as
                // `Empty`, which is also true: no producer can have written there, and
                // the consumer's next publication makes room.)
                break Step::Empty;
            }
            let len = word & LEN_MASK;
            let next = rd.pos + footprint(len);
            if next - rd.published > self.cap {
                if rd.pos - rd.published >= self.cap {
                    break Step::Full;
                }
                break Step::Corrupt { pos: rd.pos, header };
            }
            let at = rd.pos;
            rd.pos = next;
            if word & DISCARD_BIT != 0 {
                rd.skipped += 1;
                continue;
            }
            rd.consumed += 1;
            if len != 0 {
                rd.last_len = len;
                rd.stride = next - at;
            }
            break Step::Record { pos: at, len };
        };
        (rd, step)
    }

    /// Hands back `[published, to)`: publishes `to` as the consumer position. `to` may
    /// lie inside a record the consumer has read (it is then handed back in two parts);
    /// the consumer's own cursor stays at `pos`. The consumer writes nothing into the
    /// ring: producers zero the space before they claim it (a single producer in
    /// `zero_ahead`, the others in `zero_room`).
    ///
    /// # Safety
    ///
    /// Only the consumer calls this, with its own cursor and `published <= to <= pos`,
    /// `to` a multiple of 8; `[published, to)` holds records it has read, and no
    /// reference into them is alive.
    #[inline]
    pub(crate) unsafe fn release(&self, rd: &mut ReadCursor, to: u64) {
        let from = rd.published;
        debug_assert!(from <= to && to <= rd.pos && to - from <= self.cap && (to - from) % 8 == 0);
        // Release: pairs with the Acquire loads of the consumer position in `has_room`,
        // `zero_ahead` and `zero_free`: our reads of this space happen-before any
        // producer zeroes or writes it again.
        self.control().consumer.0.pos.store(to, Release);
        rd.published = to;
        rd.end = to + self.cap;
        self.room_made();
    }
}
