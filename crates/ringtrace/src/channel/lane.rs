//! One producer's ring in a channel.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::config::{Mode, Spsc};
use crate::ring::RingBuf;

/// One producer's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneStats {
    /// The producer's number in its channel (in order of creation).
    pub id: u32,
    /// The producer's handle was dropped (its thread exited).
    pub exited: bool,
    /// Records committed.
    pub written: u64,
    /// Reserves refused (ring full in discard mode; a record still being written in the
    /// way, or a pause, in overwrite mode): records that never entered the ring.
    pub lost: u64,
    /// Overwrite mode: committed records given up to make room.
    pub overwritten: u64,
    /// Overwrite mode: of `overwritten`, the records the live reader never got. Once
    /// the live reader has drained the ring after the producer's last commit,
    /// `written = read + overwritten_unread`.
    pub overwritten_unread: u64,
    /// Records the channel's live reader delivered.
    pub read: u64,
}

/// A producer's ring and what the channel knows of it.
pub(crate) struct Lane<M: Mode> {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) ring: RingBuf<Spsc, M>,
    /// A shared channel's slot: never freed; its producer is whichever process holds
    /// the ring's producer role.
    pub(crate) slot: bool,
    exited: AtomicBool,
    /// The live reader delivered everything the exited producer wrote (it may be freed).
    finished: AtomicBool,
    read: AtomicU64,
}

impl<M: Mode> Lane<M> {
    pub(crate) fn new(id: u32, name: String, ring: RingBuf<Spsc, M>) -> Self {
        Lane {
            id,
            name,
            ring,
            slot: false,
            exited: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            read: AtomicU64::new(0),
        }
    }

    /// Slot `id` of a shared channel.
    pub(crate) fn slot(id: u32, ring: RingBuf<Spsc, M>) -> Self {
        Lane { slot: true, ..Lane::new(id, String::new(), ring) }
    }

    /// A shared channel's slot taken by a new producer of this process.
    pub(crate) fn reopen(&self) {
        // Relaxed: the flag is only read for slots through `is_exited`, which asks the
        // ring's producer role instead.
        self.exited.store(false, Ordering::Relaxed);
    }

    /// Called by the producer's handle when dropped, after its last commit.
    pub(crate) fn exit(&self) {
        // Release: pairs with the Acquire load in `is_exited`: a reader that sees the
        // flag and then finds the ring empty has seen every commit.
        self.exited.store(true, Ordering::Release);
    }

    /// Whether the producer is gone: its handle dropped (a private channel's ring), or
    /// no live process holds the slot's producer role (a shared channel's).
    pub(crate) fn is_exited(&self) -> bool {
        if self.slot {
            return self.ring.producer_pid().is_none();
        }
        // Acquire: pairs with the Release store in `exit`.
        self.exited.load(Ordering::Acquire)
    }

    /// Called by the live reader once it delivered all the exited producer wrote.
    pub(crate) fn finish(&self) {
        // Release: pairs with the Acquire load in `is_finished`: the reader's count of
        // what it read comes before.
        self.finished.store(true, Ordering::Release);
    }

    pub(crate) fn is_finished(&self) -> bool {
        // Acquire: pairs with the Release store in `finish`.
        self.finished.load(Ordering::Acquire)
    }

    /// Records delivered by the live reader (its one writer).
    pub(crate) fn add_read(&self, n: u64) {
        // Relaxed: a statistic with one writer.
        self.read.store(self.read.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    pub(crate) fn unread(&self) -> u64 {
        // Relaxed: a statistic.
        M::unread(&self.ring.shared, self.read.load(Ordering::Relaxed))
    }

    pub(crate) fn stats(&self) -> LaneStats {
        let s = self.ring.stats();
        LaneStats {
            id: self.id,
            exited: self.is_exited(),
            written: s.committed,
            lost: s.lost,
            overwritten: s.overwritten,
            overwritten_unread: s.overwritten_unread,
            // Relaxed: a statistic.
            read: self.read.load(Ordering::Relaxed),
        }
    }
}
