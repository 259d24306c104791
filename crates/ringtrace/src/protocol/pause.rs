//! Pausing an overwrite ring: producers are refused (and count it) while a reader reads
//! the ring in place; the pause waits for the retire lock and for records being
//! written, up to a time limit.

use std::time::Duration;

use super::capture::Found;
use super::core::{Core, PauseRefused, PauseToken, DEAD_CHECK};
use crate::format::control::{LOCK, PAUSED, PAUSER};
use crate::format::record::{footprint, len_word, BUSY_BIT, DISCARD_BIT, LEN_MASK};
use crate::owner;
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::wait::Patience;

impl<R: Region> Core<R> {
    /// Whether the ring is paused: `P`'s flag, or (single-producer rings, whose pause
    /// sets no flag) a pauser holding the retire lock.
    pub(crate) fn is_paused(&self) -> bool {
        // Relaxed: a report; a reserve refused meanwhile is counted either way.
        self.control().producer.0.pos.load(Relaxed) & PAUSED != 0 || self.ow_line().lock_pid.load(Relaxed) & PAUSER != 0
    }

    /// Pauses the ring: from now on every reserve fails (counted; a single producer's
    /// only once it needs to retire, see `reserve_overwrite_single`); waits (bounded) for
    /// the retire lock and for every record already claimed to be committed or
    /// discarded. Gives up with `Busy` once `limit` has passed (measured from the
    /// first wait; spinning, then yielding, then sleeping: [`Patience`]). On `Ok`
    /// nothing writes `[over_pos, prod)` until [`Self::resume`].
    /// `may_write`: the caller maps the data area writable (see `recover_lock`).
    pub(crate) fn pause(&self, may_write: bool, limit: Duration) -> Result<PauseToken, PauseRefused> {
        let prod = &self.control().producer.0.pos;
        let line = self.ow_line();
        // The retire lock first (marked as a pauser's, so that whoever takes it over
        // from a dead pauser also clears the pause flag), then the flag.
        let mut patience = Patience::new(limit).loom_rounds(2);
        loop {
            if self.try_lock(owner::my_pid() | PAUSER) {
                break;
            }
            // Relaxed: a hint; the answer is only reported (or a dead pauser's pause
            // ended, and the lock tried again).
            if line.lock_pid.load(Relaxed) & PAUSER != 0 {
                if self.recover_lock(may_write) {
                    continue;
                }
                return Err(PauseRefused::Already);
            }
            // A retirer that died holding the lock is found out now and then.
            if patience.every(DEAD_CHECK) {
                self.recover_lock(may_write);
            }
            if !patience.wait() {
                return Err(PauseRefused::Busy);
            }
        }
        // Relaxed: we hold the lock; its Acquire ordered the last holder's store of `Z`.
        let zeroed = line.zeroed.load(Relaxed);
        // Relaxed RMW: the hint, as in `make_room`.
        line.zeroed.fetch_or(LOCK, Relaxed);
        let prev = if self.single_producer() {
            // Relaxed: the one producer may still claim past this `P`, in zeroed space
            // this pause does not read (see `reserve_overwrite_single`); the records
            // below it are waited for with Acquire header loads.
            prod.load(Relaxed) & !PAUSED
        } else {
            // Relaxed: the flag's place in `P`'s modification order is what matters:
            // every claim CAS ordered before it succeeded with a smaller `P`; every
            // later one fails and then sees the flag.
            let prev = prod.fetch_or(PAUSED, Relaxed);
            debug_assert_eq!(prev & PAUSED, 0, "only the lock holder pauses");
            prev
        };
        // Relaxed: we hold the retire lock (acquired above).
        let over_pos = line.over_pos.load(Relaxed);
        let retired = line.retired.load(Relaxed);
        let mut token = PauseToken { over_pos, prod: prev, retired, index: Vec::new(), zeroed };
        let mut x = over_pos;
        // What is left of the limit (all of it under loom, which has no clock).
        let mut patience = Patience::new(limit.saturating_sub(patience.elapsed()));
        while x < prev {
            // Acquire: pairs with the Release header store in `commit`: the record's
            // bytes are final before anyone reads them in place.
            let h = self.word(x).load(Acquire);
            let w = len_word(h);
            if h == 0 || w & BUSY_BIT != 0 {
                // A dead producer's record is stepped over (and left for the next
                // retirer to count), never waited for: checked now and then.
                if patience.every(DEAD_CHECK) {
                    if let Some(fp) = self.dead_claim(x, usize::MAX) {
                        x += fp;
                        continue;
                    }
                }
                if !patience.wait() {
                    self.resume(token);
                    return Err(PauseRefused::Busy);
                }
                continue;
            }
            if w & DISCARD_BIT == 0 && footprint(w & LEN_MASK) <= prev - x {
                token.index.push(Found { pos: x, word: w });
            }
            x += footprint(w & LEN_MASK).min(prev - x);
        }
        Ok(token)
    }

    /// Ends a pause: drops the retire lock and clears the flag.
    pub(crate) fn resume(&self, token: PauseToken) {
        // Release: clears the hint (the space below `Z` is as it was).
        self.ow_line().zeroed.store(token.zeroed, Release);
        if !self.single_producer() {
            // Relaxed: producers claim only zeroed space past `P`, which nobody read.
            self.control().producer.0.pos.fetch_and(!PAUSED, Relaxed);
        }
        // Release (in `unlock`): pairs with the next retirer's Acquire lock CAS: our
        // in-place reads of the records happen-before it zeroes them.
        self.unlock();
    }
}
