//! Positions and claim: a producer reserves space (a compare-and-swap on the producer
//! position, or a single producer's plain store) and, in a single-producer ring, zeroes
//! ahead of itself.

use super::core::{Backoff, Core, ProducerCursor, Refused, LINE, ZERO_AHEAD};
use crate::format::record::{footprint, pack, BUSY_BIT, HDR_SIZE};
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

impl<R: Region> Core<R> {
    /// Claims `footprint(len)` bytes and returns the record's position. A multi-producer
    /// ring marks the header BUSY; a single producer stores its position, and now and
    /// then zeroes space ahead ([`Self::zero_ahead`]).
    #[inline(always)]
    pub(crate) fn reserve<const MULTI: bool>(&self, len: usize, cur: &mut ProducerCursor) -> Result<u64, Refused> {
        // The first test is constant for lengths known at compile time: a record that
        // small fits in any ring of this region type, of either kind (`max_len` is at
        // least the capacity minus 16, and minus the release line).
        const { assert!(R::MIN_CAPACITY >= 2 * HDR_SIZE && R::MIN_CAPACITY >= R::RELEASE_LINE) };
        let small = R::MIN_CAPACITY - if R::RELEASE_LINE > 2 * HDR_SIZE { R::RELEASE_LINE } else { 2 * HDR_SIZE };
        if len > small as usize && len > self.max_len as usize {
            return Err(Refused::TooLarge);
        }
        let len = len as u32;
        let fp = footprint(len);
        let ctl = self.control();
        if !MULTI {
            // Relaxed: only this producer writes the producer position. It is the one
            // copy (a private copy would cost a second store per record).
            let p = ctl.producer.0.pos.load(Relaxed);
            let end = p + fp;
            // The record and the word after it (the next header, which must read zero
            // until the next commit) must lie in zeroed free space.
            if end + HDR_SIZE > cur.zeroed {
                self.zero_ahead(end + HDR_SIZE, cur)?;
            }
            // Relaxed: for statistics and for the consumer's watermark decision in
            // `arm`, which reads it after its heavy barrier (this store precedes our
            // light barrier in `commit`). The header stays zero (it lay in zeroed space)
            // until `commit`: zero already means "wait", and the one producer needs no
            // BUSY mark to be known.
            ctl.producer.0.pos.store(end, Relaxed);
            return Ok(p);
        }
        let prod = &ctl.producer.0.pos;
        let mut p = prod.load(Relaxed);
        let mut backoff = Backoff::new();
        let pos = loop {
            let end = p.wrapping_add(fp);
            if !self.has_room(end, cur) {
                let now = prod.load(Relaxed);
                if now == p {
                    return Err(Refused::Full);
                }
                p = now; // `p` was stale; try again with the current position.
                continue;
            }
            // The CAS decides who owns [p, end); it orders nothing of the record: what
            // was in the space was acquired above, and what we write there is published
            // by the Release header store in `commit`. Release (success): pairs with the
            // Acquire load of `P` in `repair::dead_claim`, so a reader that sees this
            // claim sees the producer's claim mark (`repair::mark_claim`) too.
            match prod.compare_exchange_weak(p, end, Release, Relaxed) {
                Ok(_) => break p,
                Err(now) => {
                    p = now;
                    backoff.spin();
                }
            }
        };
        // Relaxed: to the consumer BUSY means the same as the zero header it replaces
        // ("wait"); it only tells observers who holds the space.
        self.region.header(pos).store(pack(len | BUSY_BIT, 0) | self.aux_bits, Relaxed);
        Ok(pos)
    }

    /// Whether the space before `end` is free: by the consumer position last loaded, or
    /// else by a fresh load of it (kept in `cur`).
    #[inline(always)]
    pub(super) fn has_room(&self, end: u64, cur: &mut ProducerCursor) -> bool {
        if end.wrapping_sub(cur.cons) <= self.cap {
            return true;
        }
        // Acquire: pairs with the Release store in `release`: the consumer finished
        // reading (and, in a multi-producer ring, zeroing) everything before the
        // position it published, and this producer is about to write there.
        cur.cons = self.control().consumer.0.pos.load(Acquire);
        end.wrapping_sub(cur.cons) <= self.cap
    }

    /// A single producer's refill of zeroed space: zeroes from `cur.zeroed` to
    /// [`ZERO_AHEAD`] bytes past `need` (on a line boundary), or to the end of the free
    /// space if that comes first; `Full` if even `need` is not free.
    ///
    /// This is the single-producer ring's replacement for the consumer's zeroing: the
    /// consumer then writes none of the lines it reads, so they travel one way only,
    /// and the zeroing runs in bulk, lines ahead of the consumer.
    #[cold]
    #[inline(never)]
    pub(super) fn zero_ahead(&self, need: u64, cur: &mut ProducerCursor) -> Result<(), Refused> {
        debug_assert!(need > cur.zeroed && cur.zeroed <= cur.cons + self.cap);
        if !self.has_room(need, cur) {
            return Err(Refused::Full);
        }
        let target = ((need + ZERO_AHEAD).next_multiple_of(LINE)).min(cur.cons + self.cap);
        debug_assert!(target >= need && target - cur.zeroed <= self.cap);
        // SAFETY: `[zeroed, target)` lies past the producer position (`zeroed` is past
        // it, see `ProducerCursor`) and before `cons + capacity`: free space that only
        // this producer, the ring's one, may touch, which the consumer reads only after
        // a later commit's Release header store. Its length is at most the capacity, and
        // both ends are multiples of 8.
        unsafe { self.region.zero(cur.zeroed, target - cur.zeroed) };
        cur.zeroed = target;
        Ok(())
    }
}
