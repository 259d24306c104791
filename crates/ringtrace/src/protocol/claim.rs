//! Positions and claim: a producer reserves space (a compare-and-swap on the producer
//! position, or a single producer's plain store) and, in a single-producer ring, zeroes
//! ahead of itself.

use super::core::{Backoff, Core, ProducerCursor, Refused, DEAD_CHECK, LINE, RETIRE_SPIN, ZERO_AHEAD, ZERO_WAIT};
use crate::format::record::{footprint, pack, BUSY_BIT, HDR_SIZE};
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::wait::Patience;

impl<R: Region> Core<R> {
    /// Claims `footprint(len)` bytes and returns the record's position. A multi-producer
    /// ring claims with a CAS below the zeroed frontier (moving it now and then:
    /// [`Self::zero_room`]) and marks the header BUSY; a single producer stores its
    /// position, and now and then zeroes space ahead ([`Self::zero_ahead`]).
    #[inline(always)]
    pub(crate) fn reserve<const MULTI: bool>(&self, len: usize, cur: &mut ProducerCursor) -> Result<u64, Refused> {
        // The first test is constant for lengths known at compile time: a record that
        // small fits in any ring of this region type (`max_len` is the capacity minus
        // 16, or `LEN_MASK`, which is larger than any `small`).
        const { assert!(R::MIN_CAPACITY >= 2 * HDR_SIZE) };
        let small = R::MIN_CAPACITY - 2 * HDR_SIZE;
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
            // The record and the word after it (the next header, which must read zero
            // until its record is claimed) must lie below the zeroed frontier, which
            // never passes the end of the free space: no other check of room is needed.
            let need = p.wrapping_add(fp) + HDR_SIZE;
            if need > cur.zeroed {
                // (A stale `p` only makes `need` smaller: a refusal holds for the
                // current position too.)
                self.zero_room(need, cur)?;
            }
            // The CAS decides who owns [p, p + fp); it orders nothing of the record: the
            // zeroing of the space was acquired with the frontier (`zero_room`), and
            // what we write there is published by the Release header store in
            // `commit`. Release (success): pairs with the Acquire load of `P` in
            // `repair::dead_claim`, so a reader that sees this claim sees the
            // producer's claim mark (`repair::mark_claim`) too.
            match prod.compare_exchange_weak(p, p + fp, Release, Relaxed) {
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
    /// The frontier is the producer's own (the ring's one producer needs no lock, as a
    /// multi-producer ring's `zero_room` does): the consumer writes none of the lines it
    /// reads, so they travel one way only, and the zeroing runs in bulk, lines ahead of
    /// the consumer.
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

impl<R: Region> Core<R> {
    /// A multi-producer discard ring's refill of zeroed space: makes `[.., need)` lie
    /// below the zeroed frontier `Z` (the overwrite line's `zeroed`), zeroing ahead of
    /// it under the zeroing lock (the retire lock of overwrite mode, [`super::lock`]), or
    /// says why not: `Full` if `need` is past the end of the free space, `Pending` if
    /// the producer zeroing has not finished within [`ZERO_WAIT`]. A producer that
    /// waits spins, then yields (so that a zeroing producer preempted on its core runs
    /// again), and every [`DEAD_CHECK`] asks whether the holder died, then takes its
    /// lock over.
    ///
    /// Producers zero the space they will claim, in bulk, [`ZERO_AHEAD`] bytes past need
    /// at a time, so the consumer writes none of the lines it reads: they travel one way,
    /// from producers to the consumer. (Zeroing earlier, once less than half the
    /// look-ahead was left, so that the others would rarely wait, made twice as many
    /// refills of half the size and cost a fifth of the one-producer throughput.)
    #[cold]
    #[inline(never)]
    pub(super) fn zero_room(&self, need: u64, cur: &mut ProducerCursor) -> Result<(), Refused> {
        let line = self.ow_line();
        let mut patience = Patience::new(ZERO_WAIT);
        loop {
            // Acquire: pairs with the Release store of `zeroed` in `zero_free`: the
            // zeroing of the space below it happens-before our writes there.
            let z = line.zeroed.load(Acquire);
            cur.zeroed = z;
            if need <= z {
                return Ok(());
            }
            // The frontier never passes the free space, which ends at `C + capacity`:
            // past it, the ring is full (a consumer position loaded again first).
            if !self.has_room(need, cur) {
                return Err(Refused::Full);
            }
            if self.try_lock(self.pid()) {
                return self.zero_free(need, cur);
            }
            // Every so often, ask whether the producer zeroing died (then take its lock
            // over: its work is redone from `Z`, which it had not moved).
            if patience.every(DEAD_CHECK) && self.recover_lock(true) {
                continue;
            }
            if !patience.spin_then_yield(RETIRE_SPIN) {
                return Err(Refused::Pending);
            }
        }
    }

    /// With the zeroing lock held: zeroes from `Z` to [`ZERO_AHEAD`] bytes past `need`
    /// (on a line boundary), or to the end of the free space if that comes first,
    /// publishes the new `Z` and drops the lock.
    fn zero_free(&self, need: u64, cur: &mut ProducerCursor) -> Result<(), Refused> {
        let line = self.ow_line();
        // Relaxed: the lock's Acquire ordered the last holder's store of `Z` (before it
        // unlocked) before this load.
        let z = line.zeroed.load(Relaxed);
        // Relaxed: while the frontier is behind `P` (only in a ring whose control block
        // a hostile or broken process wrote), no producer can claim, so `P` stands
        // still; zeroing starts at it, never over records below it. Otherwise `Z` is
        // past `P` and this load changes nothing.
        let z = z.max(self.control().producer.0.pos.load(Relaxed));
        // The consumer position as last loaded bounds the free space (it only grows);
        // loaded again only if that bound falls short of the look-ahead: a load of the
        // line the consumer keeps writing, once a lap while the consumer keeps up (as in
        // a single producer's `zero_ahead`). Acquire: pairs with the Release store in
        // `release`: the consumer's reads of the space before `C` happen-before our
        // zeroing of it.
        let want = (need + ZERO_AHEAD).next_multiple_of(LINE);
        if cur.cons + self.cap < want {
            cur.cons = self.control().consumer.0.pos.load(Acquire);
        }
        let target = want.min(cur.cons + self.cap);
        let from = z & !7;
        if target > from {
            // SAFETY: `[from, target)` lies past every claim (a claim and the word after it
            // end at or below `Z`, and only the lock holder moves `Z`) and before
            // `C + capacity`: free space that no producer writes and the consumer does
            // not read before a claim there, which the Release store of `Z` below orders
            // after the zeroing. Its length is below the capacity (`Z` is past `C`), and
            // both ends are multiples of 8 (`Z` is, unless a hostile process wrote it:
            // then `zero` still wraps its position, and the length is capped).
            unsafe { self.region.zero(from, (target - from).min(self.cap)) };
        }
        let z = z.max(target);
        // Release: pairs with the Acquire loads of `zeroed` in `zero_room`: the zeroes
        // happen-before any write of the new space.
        line.zeroed.store(z, Release);
        self.unlock();
        cur.zeroed = z;
        if need <= z {
            Ok(())
        } else {
            Err(Refused::Full)
        }
    }
}
