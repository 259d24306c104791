//! A reader's "I am going to sleep" flag over many rings: the wakeup protocol of one
//! ring ([`crate::protocol`]'s wait word and its asymmetric barrier) lifted to a set of
//! rings that share one doorbell, as a channel's producers do.
//!
//! The race is the one a ring's wakeup closes (a store-buffering race, see
//! [`crate::barrier`]): a writer stores its record's header, then loads the flag; the
//! reader stores the flag, then loads every ring's next header. Writers pay
//! [`barrier::light`](crate::barrier) between the two (a compiler fence where
//! membarrier is available), the reader [`barrier::heavy`](crate::barrier), once per
//! sleep whatever the number of rings. So either the reader's look after its barrier
//! sees the record, or the writer's load sees the flag and rings. The writer that
//! clears the flag with its CAS is the one that rings: one doorbell write per sleep.
//!
//! The flag is a word the caller owns ([`WaitFlag::new`] borrows it): a private
//! channel's is on the heap, a channel file's in the file's bell line, shared with
//! writers in other processes. There the writers cannot use the asymmetric barrier
//! (membarrier(2)'s `MEMBARRIER_CMD_PRIVATE_EXPEDITED` reaches only the reader's own
//! threads) and pass `asymmetric: false`: both sides `fence(SeqCst)`, the form loom
//! checks. Another process may write anything into a shared flag: a value other than
//! [`WAITING`] reads as "not asleep" (no ring: the reader sleeps until its timeout),
//! `WAITING` makes writers ring needlessly; neither can make the protocol hang or panic.
//!
//! The loom model beside this file (`flag_loom`) checks it with two writers on two
//! rings.

use crate::barrier;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

/// The flag's value while the reader is asleep (or about to be).
const WAITING: u32 = 1;

/// See the module docs: the protocol over a flag word the caller holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitFlag<'a>(&'a AtomicU32);

impl<'a> WaitFlag<'a> {
    /// The protocol over `word` (0 while nobody sleeps).
    pub(crate) fn new(word: &'a AtomicU32) -> Self {
        WaitFlag(word)
    }

    /// A writer, after storing a record's header with Release: whether it must ring
    /// the doorbell (it cleared the flag; nobody else will ring for this sleep).
    #[inline(always)]
    pub(crate) fn should_ring(self, asymmetric: bool) -> bool {
        // Pairs with `barrier::heavy` in the reader's `armed_look`: either its look sees
        // the header stored before this barrier, or the load below sees WAITING.
        barrier::light(asymmetric);
        // Relaxed: the barrier above orders it; a stale 0 is covered by the pairing.
        self.0.load(Relaxed) == WAITING && self.take()
    }

    #[cold]
    #[inline(never)]
    fn take(self) -> bool {
        // Acquire: pairs with the Release store in `arm`: the reader's reset of the
        // doorbell (done before it armed) happens-before our ring, so the ring is not
        // consumed by that reset.
        self.0.compare_exchange(WAITING, 0, Acquire, Relaxed).is_ok()
    }

    /// The reader announces its sleep (after resetting the doorbell), then looks once
    /// more with `look` (which loads the rings' headers with Acquire) after the heavy
    /// barrier. `Ok(true)`: armed, sleep until the doorbell rings. `Ok(false)`:
    /// something is ready (disarmed again): read instead.
    pub(crate) fn armed_look(self, look: impl FnOnce() -> bool) -> std::io::Result<bool> {
        // Release: pairs with the Acquire CAS in `take` (see there).
        self.0.store(WAITING, Release);
        if let Err(e) = barrier::heavy() {
            self.disarm();
            return Err(e);
        }
        if look() {
            self.disarm();
            return Ok(false);
        }
        Ok(true)
    }

    /// Withdraws the announcement (after a sleep, or instead of one).
    pub(crate) fn disarm(self) {
        // Relaxed: a writer that still sees WAITING rings once more, needlessly.
        self.0.store(0, Relaxed);
    }
}

#[cfg(all(test, loom))]
#[path = "flag_loom.rs"]
mod flag_loom;
