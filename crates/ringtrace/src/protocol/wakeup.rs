//! Wakeups: the consumer's wait word, armed before it sleeps; the committer's decision
//! to ring the doorbell. No lost wakeup: see the barrier argument in the module above.

use std::io;

use super::core::{half_ring_due, Core};
use crate::barrier;
use crate::config::Wakeup;
use crate::format::control::{BLOCKED, HALF_RING, NEVER_WAKE, WAITING, WAIT_FLAGS};
use crate::format::record::{len_word, BUSY_BIT};
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

impl<R: Region> Core<R> {
    #[cold]
    #[inline(never)]
    pub(super) fn wake_slow(&self, wait: u64, pos: u64, end: u64, wakeup: Wakeup) {
        let at = wait & !WAIT_FLAGS;
        let due = wakeup == Wakeup::Force
            || match self.watermark {
                NEVER_WAKE => false,
                HALF_RING => half_ring_due(at, pos, end, self.cap),
                _ if wait & BLOCKED != 0 => pos == at,
                w => end.wrapping_sub(at) >= w,
            };
        // The CAS elects the one producer that rings the doorbell. The consumer reads
        // the record after waking with `next`'s Acquire header load, which pairs with
        // our Release header store in `commit`. Acquire: pairs with the Release store
        // of the wait word in `arm`, so the consumer's read of a futex doorbell before
        // it armed (`prepare_sleep`) happens-before our ring and cannot see it.
        if due && self.control().wait.0.word.compare_exchange(wait, at, Acquire, Relaxed).is_ok() {
            self.region.notify();
        }
    }

    /// A producer handle let go of its slot (dropped): wakes the consumer if it waits,
    /// so that it looks whether every producer is gone.
    pub(crate) fn wake_detached(&self) {
        // Pairs with `barrier::heavy` in `arm`: either the consumer's look at the
        // producers' slots after its barrier sees this handle's slot free (stored,
        // Release, before this call), or the load below sees WAITING.
        barrier::light(self.asymmetric);
        let wait = self.control().wait.0.word.load(Relaxed);
        if wait & WAITING != 0 {
            self.wake_slow(wait, 0, 0, Wakeup::Force);
        }
    }

    /// Whether a finished record (committed or discarded) is at `at`.
    #[inline]
    pub(crate) fn ready(&self, at: u64) -> bool {
        // Acquire: as in `next`.
        let header = self.region.header(at).load(Acquire);
        header != 0 && len_word(header) & BUSY_BIT == 0
    }

    /// Announces that the consumer will sleep at `at` (its published position) and
    /// checks once more. `Ok(true)`: armed, sleep until the doorbell rings. `Ok(false)`:
    /// a record is ready (or a producer already rang); consume instead.
    pub(crate) fn arm(&self, at: u64) -> io::Result<bool> {
        let wait = &self.control().wait.0.word;
        let mut word = at | WAITING | if self.watermark == 0 { BLOCKED } else { 0 };
        // Ordered before the check below by the heavy barrier, which is what pairs with
        // the producers' light barrier in `commit`. Release: pairs with the Acquire CAS
        // in `wake_slow` (the doorbell read in `prepare_sleep` comes first).
        wait.store(word, Release);
        loop {
            if let Err(e) = barrier::heavy() {
                self.disarm(at);
                return Err(e);
            }
            if self.ready(at) {
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
        self.control().wait.0.word.store(at, Relaxed);
    }
}
