//! Records left unfinished by a process that died: finding them, so that the consumer
//! (discard mode), a producer that overwrites (overwrite mode) or a pause steps over them
//! instead of waiting forever.
//!
//! A reservation is unfinished in one of two ways:
//!
//! * **BUSY**: its header holds its length and its producer's pid. If that process is
//!   dead, the record is stepped over by its length.
//! * **Zero header**: claimed (the producer position moved past it) and the header not
//!   yet stored: a producer killed in the few instructions between its claim CAS and its
//!   BUSY store. Nothing says who claimed it or how long it is. So every producer marks
//!   its counter slot (`claiming`) from before its claim CAS until after its BUSY store
//!   ([`mark_claim`]); a zero header at `x` below the producer position, with no
//!   live process marked as claiming, is a dead claim. Its bytes are all zero (the
//!   space was zeroed before it could be claimed, and its producer wrote nothing), so it
//!   ends at the next nonzero word: the next record's header. A single-producer ring's
//!   one producer records its pid in the producer line instead; its dead claim ends at
//!   the producer position.
//!
//! Only rings other processes produce into ([`Region::producers_may_die`]) need any of
//! this: while a reader runs, the threads of its own process are alive, so in a ring of
//! this process alone producers mark no claim (two stores around every claim saved) and
//! no unfinished record is ever taken for dead.
//!
//! Limit: producers beyond the control block's 58 counter slots share the overflow
//! slot, whose mark is a count without owners: while it is nonzero, zero-header claims
//! are never taken for dead (BUSY ones still are).

use super::core::Core;
use crate::format::control::PAUSED;
use crate::format::record::{aux, footprint, len_word, BUSY_BIT, HDR_SIZE, LEN_MASK};
use crate::owner;
use crate::region::Region;
use crate::sync::AtomicU64;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

/// Marks the start of a claim in the producer's counter slot (`word`: its `claiming`;
/// `shared`: the overflow slot, a count): until [`unmark_claim`], a record this producer
/// claimed may still have a zero header, and a reader must not take it for a dead
/// process's claim. Producers call it before their claim CAS.
#[inline(always)]
pub(crate) fn mark_claim(word: &AtomicU64, shared: bool) {
    if shared {
        // Relaxed: ordered before the claim by the claim CAS's Release.
        word.fetch_add(1, Relaxed);
    } else {
        // Relaxed: as above. A plain store: the slot is this producer's alone.
        word.store(1, Relaxed);
    }
}

/// Ends what [`mark_claim`] started, after the reserve (and its BUSY header store)
/// returned, whether it claimed or not.
#[inline(always)]
pub(crate) fn unmark_claim(word: &AtomicU64, shared: bool) {
    if shared {
        // Release: pairs with the Acquire load in `live_claimer`: a reader that sees
        // the mark gone sees our BUSY header.
        word.fetch_sub(1, Release);
    } else {
        // Release: as above.
        word.store(0, Release);
    }
}

impl<R: Region> Core<R> {
    /// If the reservation at `pos` (a record boundary at or after the reader's
    /// position) is unfinished and its producer dead, the bytes to step over it.
    /// `own_slot`: the caller's counter slot, if it is a producer in the middle of a
    /// reserve (its own mark is not a live claimer); `usize::MAX` otherwise.
    /// `single`: a single-producer ring.
    pub(crate) fn dead_claim_in(&self, pos: u64, own_slot: usize, single: bool) -> Option<u64> {
        if !self.region.producers_may_die() {
            // Every producer is a thread of this live process (and marks no claim).
            return None;
        }
        let ctl = self.control();
        // Acquire: pairs with the Release claim CASes (`Core::reserve`,
        // `claim_overwrite`): every claim below `prod` was marked before it was made,
        // so its mark (or its removal, after the BUSY store) is visible below.
        let prod = ctl.producer.0.pos.load(Acquire) & !PAUSED;
        if pos >= prod || prod - pos > self.capacity() {
            return None;
        }
        // Acquire: pairs with the Release header stores (`commit`); a BUSY store is
        // Relaxed but ordered before the claim mark's Release removal.
        let h = self.region.header(pos).load(Acquire);
        if h != 0 {
            let w = len_word(h);
            let fp = footprint(w & LEN_MASK);
            let pid = aux(h);
            if w & BUSY_BIT == 0 || fp > prod - pos || owner::alive(pid) {
                return None;
            }
            return Some(fp);
        }
        if single {
            // Acquire: pairs with the Release store in `Producer::attach` (a takeover).
            let below = ctl.producer.0.dead_below.load(Acquire);
            if pos < below && below <= prod {
                return Some(below - pos);
            }
            // Acquire: pairs with the Release in `owner::give_back`/`take`.
            let pid = ctl.producer.0.attached.load(Acquire);
            return (pid == 0 || !owner::alive(pid)).then_some(prod - pos);
        }
        if self.live_claimer(own_slot) {
            return None;
        }
        // Re-read: a claimer that finished after our first load left a BUSY header.
        // Acquire: as the first load (pairs with the Release header stores; the mark
        // check above acquired the removal that follows a BUSY store).
        if self.region.header(pos).load(Acquire) != 0 {
            return None;
        }
        // The dead claim ends at the next nonzero word (bounded by the producer
        // position, and by the largest length a header can give a skipped record).
        let limit = prod.min(pos + HDR_SIZE + u64::from(LEN_MASK & !7));
        let mut end = pos + HDR_SIZE;
        // Relaxed: each word is zero or a header stored before the claim mark's
        // removal, which the Acquire loads above ordered.
        while end < limit && self.region.header(end).load(Relaxed) == 0 {
            end += HDR_SIZE;
        }
        Some(end - pos)
    }

    /// [`Self::dead_claim_in`] for an overwrite ring (single- or multi-producer, as its
    /// header says) or a multi-producer one.
    pub(crate) fn dead_claim(&self, pos: u64, own_slot: usize) -> Option<u64> {
        self.dead_claim_in(pos, own_slot, self.single_producer())
    }

    /// Whether a live process (other than the caller's own slot) is between its claim
    /// CAS and its BUSY store, or a producer of the overflow slot is.
    pub(super) fn live_claimer(&self, own_slot: usize) -> bool {
        let ctl = self.control();
        // Acquire: pairs with the Release in `unmark_claim`: a mark seen removed means
        // that claimer's BUSY header is visible.
        if ctl.overflow.0.claiming.load(Acquire) != 0 {
            return true;
        }
        ctl.slots.iter().enumerate().any(|(i, line)| {
            // Acquire: as above.
            i != own_slot
                && line.0.claiming.load(Acquire) != 0
                && u32::try_from(line.0.owner.load(Relaxed)).map_or(true, |pid| pid == 0 || owner::alive(pid))
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::config::Wakeup;
    use crate::format::control::NEVER_WAKE;
    use crate::format::control::{LOCK, PAUSED, PAUSER};
    use crate::format::record::{footprint, pack, BUSY_BIT};
    use crate::protocol::core::Core;
    use crate::region::heap::HeapRegion;
    use crate::region::Region;
    use crate::sync::Ordering::Relaxed;

    /// The id of a process that existed and is gone.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!crate::owner::alive(pid));
        pid
    }

    #[test]
    fn a_zero_header_claim_is_dead_only_when_no_live_process_is_claiming() {
        let core = Core::fresh(HeapRegion::new(256), 0);
        let ctl = core.control();
        let dead = dead_pid();
        // A process in slot 0 claimed [0, 32) and died before its BUSY store.
        ctl.slots[0].0.owner.store(u64::from(dead), Relaxed);
        ctl.slots[0].0.claiming.store(1, Relaxed);
        ctl.producer.0.pos.store(32, Relaxed);
        // A live producer (slot 1) reserves and commits the next record.
        let mut cur = core.producer_cursor();
        cur.slot = 1;
        let pos = core.reserve::<true>(8, &mut cur).unwrap();
        assert_eq!(pos, 32);
        core.commit(pos, 8, false, Wakeup::NoWakeup);
        assert_eq!(core.dead_claim(0, usize::MAX), Some(32));
        // Not while a live process is marked claiming (this one, in slot 2) ...
        ctl.slots[2].0.owner.store(u64::from(std::process::id()), Relaxed);
        ctl.slots[2].0.claiming.store(1, Relaxed);
        assert_eq!(core.dead_claim(0, usize::MAX), None);
        // ... unless that mark is the caller's own.
        assert_eq!(core.dead_claim(0, 2), Some(32));
        ctl.slots[2].0.claiming.store(0, Relaxed);
        // Not while an overflow producer is claiming: its owners are unknown.
        ctl.overflow.0.claiming.store(1, Relaxed);
        assert_eq!(core.dead_claim(0, usize::MAX), None);
        ctl.overflow.0.claiming.store(0, Relaxed);
        // A finished record is never dead; nor is anything at the producer position.
        assert_eq!(core.dead_claim(32, usize::MAX), None);
        assert_eq!(core.dead_claim(48, usize::MAX), None);
    }

    #[test]
    fn in_a_ring_of_this_process_alone_no_claim_is_ever_dead() {
        // The state the test above finds dead: a claim with a zero header, no live
        // claimer marked (producers of such a ring mark none), a dead pid in its slot.
        for region in [HeapRegion::new(256), HeapRegion::private(256)] {
            let private = !region.producers_may_die();
            let core = Core::fresh(region, 0);
            let ctl = core.control();
            ctl.slots[0].0.owner.store(u64::from(dead_pid()), Relaxed);
            ctl.producer.0.pos.store(32, Relaxed);
            let mut cur = core.producer_cursor();
            let pos = core.reserve::<true>(8, &mut cur).unwrap();
            core.commit(pos, 8, false, Wakeup::NoWakeup);
            let want = if private { None } else { Some(32) };
            assert_eq!(core.dead_claim(0, usize::MAX), want, "private: {private}");
            // Nor a BUSY record whose pid is dead.
            core.region.header(0).store(pack(20 | BUSY_BIT, dead_pid()), Relaxed);
            let want = if private { None } else { Some(footprint(20)) };
            assert_eq!(core.dead_claim(0, usize::MAX), want, "private: {private}");
        }
    }

    #[test]
    fn a_busy_record_is_dead_when_its_pid_is() {
        let core = Core::fresh(HeapRegion::new(256), 0);
        core.control().producer.0.pos.store(64, Relaxed);
        core.region.header(0).store(pack(20 | BUSY_BIT, dead_pid()), Relaxed);
        assert_eq!(core.dead_claim(0, usize::MAX), Some(footprint(20)));
        core.region.header(0).store(pack(20 | BUSY_BIT, std::process::id()), Relaxed);
        assert_eq!(core.dead_claim(0, usize::MAX), None);
        // A BUSY length past the producer position is not believed.
        core.region.header(0).store(pack(200 | BUSY_BIT, dead_pid()), Relaxed);
        assert_eq!(core.dead_claim(0, usize::MAX), None);
    }

    #[test]
    fn a_single_producers_dead_claim_ends_at_the_producer_position() {
        let core = Core::fresh(HeapRegion::new(256), 0);
        let ctl = core.control();
        ctl.producer.0.pos.store(40, Relaxed);
        ctl.producer.0.attached.store(std::process::id(), Relaxed);
        assert_eq!(core.dead_claim_in(0, usize::MAX, true), None);
        ctl.producer.0.attached.store(dead_pid(), Relaxed);
        assert_eq!(core.dead_claim_in(0, usize::MAX, true), Some(40));
    }

    /// Writes records of 8 payload bytes until `P` reaches `until`.
    fn fill(core: &Core<HeapRegion>, until: u64) {
        let mut cur = core.producer_cursor();
        while core.prod() < until {
            let pos = core.reserve_overwrite(8, &mut cur).unwrap();
            core.commit(pos, 8, false, Wakeup::NoWakeup);
        }
    }

    #[test]
    fn a_retire_lock_whose_holder_died_is_taken_over_and_its_work_finished() {
        let cap = 256;
        let core = Core::new_overwrite(HeapRegion::new(cap), NEVER_WAKE, 0);
        core.init_zeroed();
        fill(&core, 160);
        let line = &core.control().overwrite.0;
        // A retirer took the lock, moved `O` by two records inside its seqlock write,
        // and died before zeroing and publishing `Z`.
        let z = line.zeroed.load(Relaxed);
        assert_eq!(z, cap);
        line.lock_pid.store(dead_pid(), Relaxed);
        line.zeroed.store(z | LOCK, Relaxed);
        line.seq.store(1, Relaxed);
        line.over_pos.store(32, Relaxed);
        assert!(core.recover_lock(true));
        assert_eq!(line.lock_pid.load(Relaxed), 0);
        assert_eq!(line.seq.load(Relaxed), 2);
        assert_eq!(line.zeroed.load(Relaxed), 32 + cap);
        assert!((cap..cap + 32).step_by(8).all(|x| core.region.header(x).load(Relaxed) == 0));
        assert_eq!(core.control().consumer.0.dead.load(Relaxed), 1);
        // The ring goes on.
        fill(&core, 1024);
        assert!(!core.recover_lock(true), "nothing to recover");
    }

    /// A multi-producer discard ring: writes `n` records of 8 bytes holding `first..`,
    /// reads them back in order and hands their space back.
    fn pass_through(core: &Core<HeapRegion>, rd: &mut crate::protocol::core::ReadCursor, first: u64, n: u64) {
        let mut cur = core.producer_cursor();
        for v in first..first + n {
            let pos = core.reserve::<true>(8, &mut cur).unwrap();
            // SAFETY: we hold the reservation at `pos`; its one payload word is word 0.
            unsafe { core.region.write_payload(pos, 0, v) };
            core.commit(pos, 8, false, Wakeup::NoWakeup);
        }
        for v in first..first + n {
            let crate::protocol::core::Step::Record { pos, .. } = core.next(rd) else { panic!("record {v} missing") };
            // SAFETY: committed, not yet released, we are the consumer.
            assert_eq!(unsafe { core.region.read_payload(pos, 0) }, v);
        }
        let to = rd.pos;
        // SAFETY: we are the consumer and hold no reference into the range.
        unsafe { core.release(rd, to) };
    }

    #[test]
    fn a_zeroing_lock_whose_holder_died_is_taken_over_and_the_zeroing_redone() {
        let cap = 256;
        let core = Core::fresh(HeapRegion::new(cap), 0);
        let mut rd = core.cursor(0, 0, 0);
        pass_through(&core, &mut rd, 0, 14); // 224 bytes: `Z` moved past the first lap
        let line = &core.control().overwrite.0;
        let z = line.zeroed.load(Relaxed);
        assert!(z > 224 + 8 && z <= 224 + cap, "frontier {z}");
        // A producer took the zeroing lock and died before zeroing: the space past `Z`
        // still holds the last lap's records.
        let dead = dead_pid();
        line.lock_pid.store(dead, Relaxed);
        let began = std::time::Instant::now();
        pass_through(&core, &mut rd, 100, 15); // nearly a lap more: it needs zeroing
        assert!(began.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(line.lock_pid.load(Relaxed), 0, "taken over and dropped");
        assert_eq!(core.control().consumer.0.dead.load(Relaxed), 1);
        assert!(line.zeroed.load(Relaxed) > z);
        // Past the producer position every word up to the frontier is zero again.
        let (p, z) = (core.positions().1, line.zeroed.load(Relaxed));
        assert!((p..z).step_by(8).all(|x| core.region.header(x).load(Relaxed) == 0));
    }

    #[test]
    fn a_frontier_behind_the_producer_position_never_zeroes_records() {
        // A control block written by a broken or hostile process: `Z` at 0, with records
        // committed and unread in `[0, P)`. A producer zeroes from `P` on, not over them.
        let core = Core::fresh(HeapRegion::new(256), 0);
        let mut cur = core.producer_cursor();
        for v in 1..=3u64 {
            let pos = core.reserve::<true>(8, &mut cur).unwrap();
            // SAFETY: we hold the reservation at `pos`; its one payload word is word 0.
            unsafe { core.region.write_payload(pos, 0, v) };
            core.commit(pos, 8, false, Wakeup::NoWakeup);
        }
        core.control().overwrite.0.zeroed.store(0, Relaxed);
        let mut other = core.producer_cursor();
        let pos = core.reserve::<true>(8, &mut other).unwrap();
        assert_eq!(pos, 48);
        core.commit(pos, 8, true, Wakeup::NoWakeup);
        let mut rd = core.cursor(0, 0, 0);
        for v in 1..=3u64 {
            let crate::protocol::core::Step::Record { pos, .. } = core.next(&mut rd) else { panic!("record {v} lost") };
            // SAFETY: committed, not yet released, we are the consumer.
            assert_eq!(unsafe { core.region.read_payload(pos, 0) }, v);
        }
    }

    #[test]
    fn a_read_only_reader_ends_a_dead_retirers_seqlock_write_only() {
        let cap = 256;
        let core = Core::new_overwrite(HeapRegion::new(cap), NEVER_WAKE, 0);
        core.init_zeroed();
        fill(&core, 160);
        let line = &core.control().overwrite.0;
        let dead = dead_pid();
        line.lock_pid.store(dead, Relaxed);
        line.zeroed.fetch_or(LOCK, Relaxed);
        line.seq.store(3, Relaxed);
        line.over_pos.store(32, Relaxed);
        assert_eq!(core.over_state(), None, "readers are Busy behind the dead writer");
        assert!(core.recover_lock(false));
        assert_eq!(core.over_state(), Some((32, line.retired.load(Relaxed))));
        assert_eq!(line.lock_pid.load(Relaxed), dead, "the lock and the zeroing are left to a producer");
        assert_eq!(line.zeroed.load(Relaxed), cap | LOCK);
        assert!(core.recover_lock(true));
        assert_eq!(line.zeroed.load(Relaxed), 32 + cap);
    }

    #[test]
    fn a_pause_whose_holder_died_is_ended() {
        let core = Core::new_overwrite(HeapRegion::new(256), NEVER_WAKE, 0);
        core.init_zeroed();
        fill(&core, 64);
        let line = &core.control().overwrite.0;
        line.lock_pid.store(dead_pid() | PAUSER, Relaxed);
        line.zeroed.fetch_or(LOCK, Relaxed);
        core.control().producer.0.pos.fetch_or(PAUSED, Relaxed);
        assert!(core.is_paused());
        assert!(core.recover_lock(true));
        assert!(!core.is_paused());
        fill(&core, 1024);
    }
}
