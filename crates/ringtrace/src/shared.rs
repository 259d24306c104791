//! What every handle of one ring shares ([`Shared`]), a producer's counter slot
//! ([`SlotRef`]), and the ring's counters ([`Stats`]).

#![cfg(not(loom))]

use std::ptr::NonNull;

use crate::disconnect;
use crate::format::control::{Counters, N_SLOTS, SEEN_PRODUCER};
use crate::owner;
use crate::protocol::core::Core;
use crate::region::mmap::{MmapRegion, MmapView};
use crate::sync::Ordering::{Acquire, Relaxed, Release};

/// What every handle of one ring shares. Handles copy `core` (a view of `region`) into
/// themselves and keep this alive through their `Arc`.
pub(crate) struct Shared {
    pub(crate) core: Core<MmapView>,
    pub(crate) region: MmapRegion,
    /// Consumer publication batch in bytes.
    pub(crate) batch: u64,
    /// Whether producers may attach through this handle (not opened with
    /// [`Access::Consumer`](crate::Access)).
    pub(crate) writable: bool,
    /// Overwrite mode: committed records that lay before the end of the last snapshot
    /// (for [`Snapshot::missed`](crate::Snapshot::missed)).
    pub(crate) last_snapshot: std::sync::Mutex<u64>,
    /// A channel file's slot: its image's data pages, reserved before a producer is
    /// given the ring ([`crate::RingBuf::producer`]). Unset for every other ring, whose
    /// file is reserved whole.
    pub(crate) deferred: std::sync::OnceLock<crate::region::reserve::Deferred>,
}

/// Counters and positions of a ring ([`crate::RingBuf::stats`]).
///
/// The definition of a ring's counters: the C API's `ringtrace_stats` has these fields,
/// by these names, in this order; [`inspect::State`](crate::inspect::State) (a ring
/// file's words, which `ringtrace stat` shows) has each counter by the same name, and
/// the positions by the control block's names: `over_pos` is `overwrite_pos`, and
/// `consumer_read` is `consumer_pos` (`State::consumer_pos` is where space is handed
/// back, behind it in discard mode). Tests check each of them against this.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Records committed by producers.
    pub committed: u64,
    /// Records discarded by producers (explicitly, or by dropping a reservation).
    pub discarded: u64,
    /// Reservations refused for want of room: records lost. In discard mode, the ring
    /// was full; in overwrite mode, making room would have overwritten a record still
    /// being written, or the ring was paused.
    pub lost: u64,
    /// Of `lost`: refused because the ring was paused (overwrite mode).
    pub refused_paused: u64,
    /// Overwrite mode: committed records overwritten (given up to make room), whether
    /// a reader saw them first or not.
    pub overwritten: u64,
    /// Overwrite mode: of `overwritten`, the records the consumer never read (it counts
    /// them when it finds it was overtaken). With producers and consumer idle and the
    /// ring drained: `committed = consumed + overwritten_unread`.
    pub overwritten_unread: u64,
    /// Records whose producer process died before finishing them, stepped over by the
    /// consumer (discard mode) or by the producer that overwrote them (overwrite mode;
    /// also counts retire locks taken over from a dead holder).
    pub dead: u64,
    /// Overwrite mode: position of the oldest record still in the ring.
    pub overwrite_pos: u64,
    /// Reservations refused because the record was larger than the ring takes.
    pub too_large: u64,
    /// Committed records the consumer delivered.
    pub consumed: u64,
    /// Discarded records the consumer stepped over.
    pub skipped: u64,
    /// Consumer position (bytes ever consumed).
    pub consumer_pos: u64,
    /// Producer position (bytes ever reserved).
    pub producer_pos: u64,
    /// Bytes reserved and not yet consumed: `producer_pos - consumer_pos`.
    pub available: u64,
    /// Data area size in bytes.
    pub capacity: u64,
}

impl Shared {
    /// The ring's counters and positions ([`RingBuf::stats`](crate::RingBuf::stats)).
    pub(crate) fn stats(&self) -> Stats {
        let core = &self.core;
        let ctl = core.control();
        let mut s = Stats::default();
        for c in std::iter::once(&ctl.overflow.0).chain(ctl.slots.iter().map(|l| &l.0)) {
            s.committed += c.committed.load(Relaxed);
            s.discarded += c.discarded.load(Relaxed);
            s.lost += c.lost.load(Relaxed);
            s.refused_paused += c.paused.load(Relaxed);
            s.too_large += c.too_large.load(Relaxed);
        }
        s.consumed = ctl.consumer.0.consumed.load(Relaxed);
        s.skipped = ctl.consumer.0.skipped.load(Relaxed);
        s.overwritten_unread = ctl.consumer.0.overwritten.load(Relaxed);
        s.dead = ctl.consumer.0.dead.load(Relaxed);
        // Consistent as a pair when the seqlock read succeeds; else each is a value it had
        // during the call (a retirer stayed mid-update).
        let ow = &ctl.overwrite.0;
        (s.overwrite_pos, s.overwritten) =
            core.over_state().unwrap_or_else(|| (ow.over_pos.load(Relaxed), ow.retired.load(Relaxed)));
        let (_, prod) = core.positions();
        let cons = ctl.consumer.0.read.load(Relaxed);
        s.consumer_pos = cons;
        s.producer_pos = prod;
        s.available = prod.saturating_sub(cons.max(s.overwrite_pos));
        s.capacity = core.capacity();
        s
    }
}

/// A producer's counter slot: its own line (index below `N_SLOTS`), or the shared
/// overflow line (`N_SLOTS`), with the line's address kept at hand so the commit path
/// does no index arithmetic.
///
/// Invariant: `line` points into the control block of the ring whose [`Core`] `claim`
/// was given; every holder (a `Producer`) also holds an `Arc<Shared>` that keeps that
/// mapping alive.
#[derive(Debug)]
pub(crate) struct SlotRef {
    index: usize,
    line: NonNull<Counters>,
}

// SAFETY: `line` is an address in a shared mapping that every thread sees, and the
// counters there are atomics.
unsafe impl Send for SlotRef {}
// SAFETY: as above; `&SlotRef` only reads the address.
unsafe impl Sync for SlotRef {}

impl SlotRef {
    /// Claims a free slot, or falls back to the overflow slot.
    pub(crate) fn claim(core: &Core<MmapView>) -> SlotRef {
        let ctl = core.control();
        let me = u64::from(owner::my_pid());
        for (index, line) in ctl.slots.iter().enumerate() {
            let now = line.0.owner.load(Relaxed);
            // A slot is free, or its owner's process died (its counts are final: it
            // made them before it died).
            let free = now == 0 || (u32::try_from(now).is_ok_and(|pid| pid != owner::my_pid() && !owner::alive(pid)));
            // Acquire: pairs with the Release store in `free`, so this owner continues
            // from the previous owner's final counts.
            if free && line.0.owner.compare_exchange(now, me, Acquire, Relaxed).is_ok() {
                // A dead owner may have died marked as claiming: its claim, if any, is
                // dead, and the mark would make it look alive for as long as we live.
                // Relaxed: only this owner writes the mark from now on.
                line.0.claiming.store(0, Relaxed);
                disconnect::mark_seen(core, SEEN_PRODUCER);
                return SlotRef { index, line: NonNull::from(&line.0) };
            }
        }
        // Relaxed: a count of the overflow slot's users for `disconnect`, which reads
        // it with Acquire only to pair with the `free` below.
        ctl.overflow.0.owner.fetch_add(1, Relaxed);
        disconnect::mark_seen(core, SEEN_PRODUCER);
        SlotRef { index: N_SLOTS, line: NonNull::from(&ctl.overflow.0) }
    }

    /// The slot's index (`N_SLOTS`: the overflow slot).
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// Whether this is the overflow slot, shared with other producers.
    #[inline(always)]
    pub(crate) fn is_shared(&self) -> bool {
        self.index >= N_SLOTS
    }

    pub(crate) fn free(&self, core: &Core<MmapView>) {
        match core.control().slots.get(self.index) {
            // Release: pairs with the Acquire CAS in `claim` (the counts above are
            // final), and with the Acquire loads in `disconnect::producers_gone` (the
            // records this handle committed are visible to a consumer that sees the
            // slot free).
            Some(line) => line.0.owner.store(0, Release),
            // Release: as above, for the overflow slot's count. A count a hostile
            // process zeroed is not taken below zero.
            None => {
                let count = &core.control().overflow.0.owner;
                let _ = count.fetch_update(Release, Relaxed, |n| n.checked_sub(1));
            }
        }
    }

    #[inline(always)]
    pub(crate) fn counters(&self) -> &Counters {
        // SAFETY: the line lies in a control block whose mapping outlives `self` (type
        // invariant), and it is only ever accessed through its atomics.
        unsafe { self.line.as_ref() }
    }

    /// Counts a published record (committed, or discarded).
    #[inline(always)]
    pub(crate) fn count_published(&self, discard: bool) {
        let c = self.counters();
        self.bump(if discard { &c.discarded } else { &c.committed });
    }

    /// Adds one to a counter of this slot: a plain load and store when the slot is ours
    /// alone (no read-modify-write; x86 compiles the pair to one `inc` on memory), an
    /// atomic add on the shared one. (A private copy of the count in the handle, stored
    /// to the line, cost a second store and a load-add-store chain through the handle,
    /// a visible share of a record written and read back to back.)
    #[inline(always)]
    pub(crate) fn bump(&self, counter: &crate::sync::AtomicU64) {
        if self.index < N_SLOTS {
            // Relaxed: a statistic with one writer (this owner); readers want some
            // recent value.
            counter.store(counter.load(Relaxed) + 1, Relaxed);
        } else {
            counter.fetch_add(1, Relaxed);
        }
    }
}
