//! Producers that wait for room: the wakeup protocol run the other way.
//!
//! A producer whose record does not fit may sleep until the consumer hands space back,
//! instead of losing the record. It is the consumer's wakeup ([`super::wakeup`]) with
//! the roles swapped, and the same store-buffering race to rule out: the consumer
//! stores its position, then loads the producers' wait flag; a producer stores the
//! flag, then loads the consumer position. The side that runs often (the consumer,
//! once per publication) takes the light barrier, the side that is about to sleep (the
//! producer) the heavy one ([`crate::barrier`]): either the producer's look after its
//! barrier sees the new position, or the consumer's look sees the flag and rings.
//!
//! ```text
//!   producer (full)                      consumer
//!   token  = room_futex        (Acq)     pos    = p'            (Rel, `release`)
//!   room   = 1                 (Rel)     light barrier
//!   heavy barrier                        if room != 0:
//!   if pos != p: retry reserve              room = 0 (swap), room_futex += 1 (Rel),
//!   else FUTEX_WAIT(room_futex, token)      FUTEX_WAKE(all)
//! ```
//!
//! The flag is one word for every waiting producer: the consumer clears it and wakes
//! them all, and each looks again (the ones that still find no room arm again). A
//! producer never clears it: a flag left set by a producer that found room costs the
//! consumer one needless wake, never a lost one. The doorbell is a counter, read before
//! arming, so a ring between that read and the sleep makes the sleep return at once.

use std::io;

use super::core::Core;
use crate::barrier;
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

impl<R: Region> Core<R> {
    /// The consumer, right after publishing its position: wakes the producers that
    /// wait for room, if any.
    #[inline(always)]
    pub(crate) fn room_made(&self) {
        // Pairs with `barrier::heavy` in `arm_room`: either the producer's look at the
        // consumer position after its barrier sees the position just published, or the
        // load below sees its flag.
        barrier::light(self.asymmetric);
        if self.control().wait.0.room.load(Relaxed) != 0 {
            self.wake_room();
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_room(&self) {
        // Acquire: pairs with the Release store of the flag in `arm_room`, so that the
        // producer's read of the doorbell (`room_token`, before it armed) happens-before
        // the ring below and cannot see it. The swap elects one ringer per arming.
        if self.control().wait.0.room.swap(0, Acquire) != 0 {
            self.region.notify_room();
        }
    }

    /// A producer about to wait for room: the doorbell's value, read before arming.
    pub(crate) fn room_token(&self) -> u32 {
        // Acquire: pairs with the Release increment in `notify_room`.
        self.control().wait.0.room_futex.load(Acquire)
    }

    /// A producer that found the ring full with the consumer at `seen` announces that
    /// it will sleep, and looks once more. `Ok(true)`: the consumer has not moved; sleep
    /// on the doorbell (with the token read before this call). `Ok(false)`: it has moved
    /// since; reserve again instead.
    pub(crate) fn arm_room(&self, seen: u64) -> io::Result<bool> {
        // Release: pairs with the Acquire swap in `wake_room` (the token read before
        // this store happens-before the consumer's ring). Ordered before the load below
        // by the heavy barrier, which pairs with the consumer's light one in `room_made`.
        self.control().wait.0.room.store(1, Release);
        barrier::heavy()?;
        // Acquire: pairs with the Release store in `release` (as in `has_room`).
        Ok(self.control().consumer.0.pos.load(Acquire) == seen)
    }

    /// Wakes every producer waiting for room, whatever the flag says: the consumer
    /// detaches (producers waiting for it learn that it is gone).
    pub(crate) fn wake_all_room(&self) {
        // Relaxed: the ring below carries the news; a producer arming after this store
        // looks at the consumer's state after its heavy barrier.
        self.control().wait.0.room.store(0, Relaxed);
        self.region.notify_room();
    }
}
