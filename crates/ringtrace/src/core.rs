//! The protocol: reserve, commit and discard without a lock, consume in reservation
//! order, and wake the consumer without ever losing a wakeup. Generic over the
//! [`Region`] that holds the bytes, so loom runs exactly this code.
//!
//! # Reserve
//!
//! The kernel serializes reservations with a spinlock, so that it can write the BUSY
//! header before it publishes the new producer position; a user-space producer
//! descheduled while holding that lock would stall every other producer. ringtrace
//! claims space with a compare-and-swap on the producer position instead, which leaves
//! a window where the space is claimed and its header not yet written. The consumer
//! must not mistake what was there before for a header, so **the consumer zeroes what
//! it consumes before it publishes its position** (as Agrona's many-to-one ring does),
//! and ringtrace headers are never zero (the aux word is the producer's pid). An
//! all-zero header therefore means "wait", exactly like BUSY. A producer stopped between
//! reserve and commit stops nobody but the consumer, which waits at its record while the
//! others go on reserving and committing until the ring is full behind it.
//!
//! ```text
//!   consumer_pos            producer_pos
//!        |  committed | BUSY | committed | 0 (claimed) |    zeroed, free    |
//!        '-- consumer reads in order, stops at BUSY or 0
//! ```
//!
//! Invariants: `consumer_pos <= producer_pos <= consumer_pos + capacity`; every byte
//! outside `[consumer_pos, producer_pos)` is zero; records are contiguous and 8-aligned
//! from `consumer_pos`.
//!
//! # Wakeups
//!
//! The consumer's wait word holds the position it waits at and two flags. Before it
//! sleeps it stores `at | WAITING` (plus `BLOCKED`, see below), runs the heavy barrier,
//! and checks the header at `at` again. A producer stores its header, runs the light
//! barrier, and loads the wait word ([`crate::barrier`]). Either the consumer's check
//! sees the header or the producer sees `WAITING`: no lost wakeup (seed 004's bug).
//! The producer that decides to wake clears `WAITING` with a CAS, so one write reaches
//! the doorbell per sleep.
//!
//! Who wakes: `BLOCKED` set (policy `CaughtUp`, or a watermark already reserved behind
//! an unfinished record) means "wake me when the record at `at` is committed or
//! discarded": the BPF ring buffer's rule, which needs only the committer's own record.
//! Without `BLOCKED` (policy `Watermark(w)`), a committer whose record ends at least `w`
//! bytes past `at` wakes. If that wake finds the record at `at` still unfinished, the
//! consumer sleeps again with `BLOCKED`, because the watermark is already reserved.
//! Every decision uses only the committer's record and the consumer's word, so the
//! pairwise barrier argument above covers it.

use std::io;

use crate::barrier;
use crate::config::Wakeup;
use crate::layout::{decode, footprint, pack, Control, Slot, BUSY_BIT, DISCARD_BIT, HDR_SIZE, LEN_MASK};
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

/// Wait word flag: the consumer is asleep (or about to be).
pub(crate) const WAITING: u64 = 1;
/// Wait word flag: wake only for the record at the waiting position.
pub(crate) const BLOCKED: u64 = 2;
const WAIT_FLAGS: u64 = 7;

/// A producer's private view of the positions.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ProducerCursor {
    /// Consumer position last loaded: space before `cons + capacity` is free.
    pub(crate) cons: u64,
    /// Single-producer rings: the producer position, which only this producer writes.
    pub(crate) prod: u64,
}

/// Why `reserve` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    Full,
    TooLarge,
}

/// The protocol state machine over a region.
pub(crate) struct Core<R> {
    pub(crate) region: R,
    cap: u64,
    /// Largest payload: `capacity - 8`, and at most `LEN_MASK`.
    max_len: u32,
    /// 0 for `CaughtUp`, else the watermark in bytes.
    watermark: u64,
    /// The header's aux word: this process's id (never zero).
    aux: u32,
}

impl<R: Region> Core<R> {
    pub(crate) fn new(region: R, watermark: u64) -> Self {
        let cap = region.capacity();
        debug_assert!(cap.is_power_of_two() && cap >= 16);
        let max_len = (cap - HDR_SIZE).min(LEN_MASK as u64) as u32;
        Core { region, cap, max_len, watermark, aux: std::process::id().max(1) }
    }

    #[inline]
    pub(crate) fn control(&self) -> &Control {
        self.region.control()
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.cap
    }

    pub(crate) fn max_len(&self) -> u32 {
        self.max_len
    }

    /// Claims `footprint(len)` bytes; returns the record's position with its header BUSY.
    #[inline]
    pub(crate) fn reserve<const MULTI: bool>(&self, len: usize, cur: &mut ProducerCursor) -> Result<u64, Refused> {
        if len > self.max_len as usize {
            return Err(Refused::TooLarge);
        }
        let len = len as u32;
        let fp = footprint(len);
        let ctl = self.control();
        let prod = &ctl.producer.0.pos;
        let pos = if MULTI {
            let mut p = prod.load(Relaxed);
            loop {
                let end = p.wrapping_add(fp);
                if end.wrapping_sub(cur.cons) > self.cap {
                    // Acquire: pairs with the Release store in `release`. The consumer
                    // zeroed everything before the position it published, and this
                    // producer is about to write there.
                    cur.cons = ctl.consumer.0.pos.load(Acquire);
                    if end.wrapping_sub(cur.cons) > self.cap {
                        let now = prod.load(Relaxed);
                        if now == p {
                            return Err(Refused::Full);
                        }
                        p = now; // `p` was stale; try again with the current position.
                        continue;
                    }
                }
                // Relaxed: the claim itself orders nothing. What was in the space was
                // acquired above, and what we write there is published by the Release
                // header store in `commit`. The CAS only decides who owns [p, end).
                match prod.compare_exchange_weak(p, end, Relaxed, Relaxed) {
                    Ok(_) => break p,
                    Err(now) => p = now,
                }
            }
        } else {
            let p = cur.prod;
            let end = p + fp;
            if end - cur.cons > self.cap {
                // Acquire: pairs with the Release store in `release` (as above).
                cur.cons = ctl.consumer.0.pos.load(Acquire);
                if end - cur.cons > self.cap {
                    return Err(Refused::Full);
                }
            }
            cur.prod = end;
            // Relaxed: only for statistics and the consumer's watermark decision, which
            // reads it after its heavy barrier (this store precedes our light barrier).
            prod.store(end, Relaxed);
            p
        };
        // Relaxed: to the consumer BUSY means the same as the zero header it replaces
        // ("wait"); it only tells observers who holds the space.
        self.region.header(pos).store(pack(len | BUSY_BIT, self.aux), Relaxed);
        Ok(pos)
    }

    /// Publishes the record at `pos` (committed, or discarded), then wakes the consumer
    /// if `wakeup` and the policy say so.
    #[inline]
    pub(crate) fn commit(&self, pos: u64, len: u32, discard: bool, wakeup: Wakeup) {
        let word = if discard { len | DISCARD_BIT } else { len };
        // Release: pairs with the Acquire load in `peek`: the payload written into the
        // reservation happens-before the consumer reads it.
        self.region.header(pos).store(pack(word, self.aux), Release);
        if wakeup == Wakeup::NoWakeup {
            return;
        }
        // Pairs with `barrier::heavy` in `arm`: either the consumer's check after its
        // barrier sees the header above, or the load below sees its WAITING flag.
        barrier::light();
        let wait = self.control().consumer.0.wait.load(Relaxed);
        if wait & WAITING != 0 {
            self.wake_slow(wait, pos, pos + footprint(len), wakeup);
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_slow(&self, wait: u64, pos: u64, end: u64, wakeup: Wakeup) {
        let at = wait & !WAIT_FLAGS;
        let due = wakeup == Wakeup::Force
            || if wait & BLOCKED != 0 { pos == at } else { end.wrapping_sub(at) >= self.watermark };
        // Relaxed: the CAS only elects the one producer that rings the doorbell. The
        // consumer reads the record after waking with the Acquire load in `peek`, which
        // pairs with our Release header store.
        if due && self.control().consumer.0.wait.compare_exchange(wait, at, Relaxed, Relaxed).is_ok() {
            self.region.notify();
        }
    }

    /// What is at the record boundary `pos`. Consumer only.
    #[inline]
    pub(crate) fn peek(&self, pos: u64) -> Slot {
        // Acquire: pairs with the Release store in `commit`.
        decode(self.region.header(pos).load(Acquire))
    }

    /// The raw header at `pos` (for error reports).
    pub(crate) fn raw_header(&self, pos: u64) -> u64 {
        self.region.header(pos).load(Relaxed)
    }

    /// Whether a record of this length could have been written by a ringtrace producer.
    #[inline]
    pub(crate) fn plausible(&self, len: u32) -> bool {
        len <= self.max_len
    }

    /// Zeroes `[from, to)` and publishes `to` as the consumer position.
    ///
    /// # Safety
    ///
    /// Only the consumer calls this; `from` is the position it last published,
    /// `[from, to)` holds records it has read, and no reference into them is alive.
    pub(crate) unsafe fn release(&self, from: u64, to: u64) {
        debug_assert!(to >= from && to - from <= self.cap && (to - from) % 8 == 0);
        // SAFETY: forwarded from this function's contract.
        unsafe { self.region.zero(from, to - from) };
        // Release: pairs with the Acquire loads of the consumer position in `reserve`:
        // the zeroing above happens-before any producer writes this space again.
        self.control().consumer.0.pos.store(to, Release);
    }

    /// Announces that the consumer will sleep at `at` (its published position) and
    /// checks once more. `Ok(true)`: armed, sleep until the doorbell rings. `Ok(false)`:
    /// a record is ready (or a producer already rang); consume instead.
    pub(crate) fn arm(&self, at: u64) -> io::Result<bool> {
        let wait = &self.control().consumer.0.wait;
        let mut word = at | WAITING | if self.watermark == 0 { BLOCKED } else { 0 };
        // Relaxed: ordered before the check below by the heavy barrier, which is what
        // pairs with the producers' light barrier in `commit`.
        wait.store(word, Relaxed);
        loop {
            if let Err(e) = barrier::heavy() {
                self.disarm(at);
                return Err(e);
            }
            if !matches!(self.peek(at), Slot::Empty | Slot::Busy) {
                self.disarm(at);
                return Ok(false);
            }
            if word & BLOCKED != 0 {
                return Ok(true);
            }
            let prod = self.control().producer.0.pos.load(Relaxed);
            if prod.wrapping_sub(at) < self.watermark {
                return Ok(true);
            }
            // A watermark is already reserved behind an unfinished record: wait for that
            // record alone. If a producer cleared WAITING meanwhile, it rang: don't sleep.
            if wait.compare_exchange(word, word | BLOCKED, Relaxed, Relaxed).is_err() {
                return Ok(false);
            }
            word |= BLOCKED;
        }
    }

    /// Withdraws the announcement of `arm`.
    pub(crate) fn disarm(&self, at: u64) {
        // Relaxed: a producer that still sees the old word at most rings once more.
        self.control().consumer.0.wait.store(at, Relaxed);
    }

    /// Bytes reserved and not yet consumed (the kernel's `BPF_RB_AVAIL_DATA`).
    pub(crate) fn positions(&self) -> (u64, u64) {
        let ctl = self.control();
        (ctl.consumer.0.pos.load(Relaxed), ctl.producer.0.pos.load(Relaxed))
    }
}
