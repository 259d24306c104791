//! One producer's ring in a channel, and what differs between the modes.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::config::{Discard, Mode, Overwrite, Spsc};
use crate::error::{ConsumeError, Error};
use crate::recorder::consumer::OverwriteConsumer;
use crate::ring::RingBuf;
use crate::Consumer;

/// What a channel needs of its mode: how a live reader drains one producer's ring, and
/// what is kept when a producer exits. Implemented by [`Discard`] and [`Overwrite`]
/// (sealed through [`Mode`]).
pub trait ChannelMode: Mode + Sized {
    /// Overwrite mode keeps exited producers' rings for snapshots.
    #[doc(hidden)]
    const KEEP_EXITED: bool;
    /// The ring's consumer.
    #[doc(hidden)]
    type Reader: Send;
    #[doc(hidden)]
    fn attach(ring: &RingBuf<Spsc, Self>) -> Result<Self::Reader, Error>;
    /// Calls `f` with up to `max` records, in order.
    #[doc(hidden)]
    fn drain(r: &mut Self::Reader, max: usize, f: impl FnMut(&[u8])) -> Result<usize, ConsumeError<Infallible>>;
    /// Records committed and no longer in the ring unread (overwrite mode).
    #[doc(hidden)]
    fn overwritten(ring: &RingBuf<Spsc, Self>) -> u64;
    /// Records a ring holds that no reader took: what freeing it loses.
    #[doc(hidden)]
    fn unread(ring: &RingBuf<Spsc, Self>, read: u64) -> u64;
}

fn infallible<T>(f: &mut impl FnMut(&[u8]), rec: &[u8]) -> Result<(), T> {
    f(rec);
    Ok(())
}

impl ChannelMode for Discard {
    const KEEP_EXITED: bool = false;
    type Reader = Consumer<Spsc, Discard>;
    fn attach(ring: &RingBuf<Spsc, Self>) -> Result<Self::Reader, Error> {
        ring.consumer()
    }
    fn drain(r: &mut Self::Reader, max: usize, mut f: impl FnMut(&[u8])) -> Result<usize, ConsumeError<Infallible>> {
        r.consume_n(max, |rec| infallible(&mut f, rec))
    }
    fn overwritten(_: &RingBuf<Spsc, Self>) -> u64 {
        0
    }
    fn unread(ring: &RingBuf<Spsc, Self>, read: u64) -> u64 {
        ring.stats().committed.saturating_sub(read)
    }
}

impl ChannelMode for Overwrite {
    const KEEP_EXITED: bool = true;
    type Reader = OverwriteConsumer<Spsc>;
    fn attach(ring: &RingBuf<Spsc, Self>) -> Result<Self::Reader, Error> {
        ring.consumer()
    }
    fn drain(r: &mut Self::Reader, max: usize, mut f: impl FnMut(&[u8])) -> Result<usize, ConsumeError<Infallible>> {
        r.consume_n(max, |rec| infallible(&mut f, rec))
    }
    fn overwritten(ring: &RingBuf<Spsc, Self>) -> u64 {
        ring.stats().overwritten
    }
    fn unread(ring: &RingBuf<Spsc, Self>, _read: u64) -> u64 {
        // Exact for an exited producer: a snapshot holds every record still readable;
        // those before the consumer's position were read.
        let from = ring.stats().consumer_pos;
        ring.snapshot().map_or(0, |s| s.entries().filter(|&(pos, _)| pos >= from).count() as u64)
    }
}

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
pub(crate) struct Lane<M: ChannelMode> {
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

impl<M: ChannelMode> Lane<M> {
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
        M::unread(&self.ring, self.read.load(Ordering::Relaxed))
    }

    pub(crate) fn stats(&self) -> LaneStats {
        let s = self.ring.stats();
        LaneStats {
            id: self.id,
            exited: self.is_exited(),
            written: s.committed,
            lost: s.lost,
            overwritten: M::overwritten(&self.ring),
            overwritten_unread: s.overwritten_unread,
            // Relaxed: a statistic.
            read: self.read.load(Ordering::Relaxed),
        }
    }
}
