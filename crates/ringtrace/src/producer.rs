//! [`Producer`] and its zero-copy [`Reservation`].

#![cfg(not(loom))]

use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{Discard, Mode, Mpsc, Overwrite, ProducerKind, Wakeup};
use crate::disconnect;
use crate::error::{Error, ReserveError};
use crate::format::record::HDR_SIZE;
use crate::owner;
use crate::protocol::core::{Core, ProducerCursor, Refused};
use crate::protocol::repair;
use crate::region::mmap::MmapView;
use crate::shared::{Shared, SlotRef};
use crate::sync::Ordering::{Relaxed, Release};
use crate::wait::DEAD_CHECK;

/// How long a waiting producer naps when it cannot sleep on the doorbell.
const ROOM_NAP: Duration = Duration::from_millis(1);

/// Writes records into a ring. `Send`: each thread uses its own handle.
/// For [`Mpsc`] rings it is cheap to [`Clone`] (each clone gets its own counter line).
///
/// # Examples
///
/// ```
/// use ringtrace::{MpscRing, Wakeup};
///
/// let ring = MpscRing::new(4096)?;
/// let mut consumer = ring.consumer()?;
/// let handles: Vec<_> = (0..4u8)
///     .map(|i| {
///         let mut p = ring.producer().unwrap();
///         std::thread::spawn(move || p.output(&[i; 3], Wakeup::Default).unwrap())
///     })
///     .collect();
/// handles.into_iter().for_each(|h| h.join().unwrap());
/// assert_eq!(consumer.iter().count(), 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Producer<K: ProducerKind = Mpsc, M: Mode = Discard> {
    /// This handle's copy of the protocol state (a view of `shared.region`).
    core: Core<MmapView>,
    cursor: ProducerCursor,
    slot: SlotRef,
    /// Keeps the mapping alive.
    shared: Arc<Shared>,
    _static: PhantomData<fn() -> (K, M)>,
}

impl<K: ProducerKind, M: Mode> fmt::Debug for Producer<K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer").field("kind", &K::NAME).field("slot", &self.slot).finish()
    }
}

impl<K: ProducerKind, M: Mode> Producer<K, M> {
    pub(crate) fn attach(shared: Arc<Shared>) -> Result<Self, Error> {
        if !shared.writable {
            return Err(Error::ReadOnly { what: "attaching a producer" });
        }
        let core = shared.core.clone();
        if !K::MULTI {
            let line = &core.control().producer.0;
            let dead = owner::take(&line.attached).map_err(|pid| Error::ProducerAttached { pid })?;
            if dead != 0 {
                // The dead producer's reservation, if it left one, ends at the producer
                // position: tell the consumer where its unfinished record ends.
                // Relaxed load: the position's one writer is dead. Release: pairs with
                // the Acquire load in `repair::dead_claim_in`.
                line.dead_below.store(line.pos.load(Relaxed), Release);
            }
        }
        let slot = SlotRef::claim(&core);
        let mut cursor = core.producer_cursor();
        cursor.slot = slot.index();
        Ok(Producer { core, cursor, slot, shared, _static: PhantomData })
    }

    /// Counts and publishes the record at `pos`.
    #[inline(always)]
    fn finish(&mut self, pos: u64, len: u32, discard: bool, wakeup: Wakeup) {
        self.slot.count_published(discard);
        self.core.commit(pos, len, discard, wakeup);
    }

    #[cold]
    fn refused(&self, why: Refused, len: usize) -> ReserveError {
        let c = self.slot.counters();
        match why {
            Refused::Full => {
                self.slot.bump(&c.lost);
                ReserveError::Full { len }
            }
            Refused::TooLarge => {
                self.slot.bump(&c.too_large);
                ReserveError::TooLarge { len, max: self.core.max_len() as usize }
            }
            Refused::Pending => {
                self.slot.bump(&c.lost);
                ReserveError::Pending { len }
            }
            Refused::Paused => {
                self.slot.bump(&c.lost);
                self.slot.bump(&c.paused);
                ReserveError::Paused { len }
            }
        }
    }
}

impl<K: ProducerKind> Producer<K, Discard> {
    /// Reserves `len` bytes for one record and returns them to be written in place.
    ///
    /// The record is published by [`Reservation::commit`], or skipped by
    /// [`Reservation::discard`]; dropping the reservation discards it. Until then the
    /// consumer waits at this record, and other producers go on reserving behind it.
    ///
    /// Errors: [`ReserveError::Full`] if it does not fit now (counted as lost),
    /// [`ReserveError::TooLarge`] if it never could (more than
    /// [`RingBuf::max_record_len`](crate::RingBuf::max_record_len)).
    #[inline(always)]
    pub fn reserve(&mut self, len: usize) -> Result<Reservation<'_, K, Discard>, ReserveError> {
        match self.claim(len) {
            Ok(pos) => Ok(Reservation { producer: self, pos, len: len as u32 }),
            Err(why) => Err(self.refused(why, len)),
        }
    }

    /// Reserves, copies `data` and commits with `wakeup`: one call.
    #[inline(always)]
    pub fn output(&mut self, data: &[u8], wakeup: Wakeup) -> Result<(), ReserveError> {
        let pos = match self.claim(data.len()) {
            Ok(pos) => pos,
            Err(why) => return Err(self.refused(why, data.len())),
        };
        // SAFETY: we hold the reservation at `pos` of exactly `data.len()` bytes (see
        // `Reservation::deref_mut`); `data` cannot overlap it (a `&[u8]` into the ring
        // is only ever lent to the consumer, for records it has not released, never for
        // space a producer can claim).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.core.region.data_ptr(pos + HDR_SIZE), data.len()) };
        self.finish(pos, data.len() as u32, false, wakeup);
        Ok(())
    }

    /// Like [`reserve`](Self::reserve), but when the record does not fit, sleeps until
    /// the consumer hands space back (woken by it, without polling: see below), up to
    /// `timeout` (`None`: no limit), instead of refusing it at once. crossbeam-channel's
    /// blocking `send`, for a logger that must not drop records.
    ///
    /// Errors: [`ReserveError::Timeout`] when no room came in time,
    /// [`ReserveError::Disconnected`] when the consumer is gone (dropped, or its process
    /// died: no room will come), each counted as lost; [`ReserveError::TooLarge`]. A
    /// ring whose consumer has never attached is not disconnected: the producer waits
    /// for it (up to `timeout`).
    ///
    /// The wakeup is the consumer's protocol run the other way (the producer announces
    /// its wait, runs the heavy barrier and looks at the consumer position once more;
    /// the consumer looks for waiting producers after every publication of its
    /// position), so no wakeup is lost, between processes too. A waiting producer of a
    /// ring shared between processes also looks every 200 ms whether the consumer's
    /// process died. Waiting producers are woken together; each then reserves again,
    /// and those that still find no room wait again.
    ///
    /// ```
    /// use ringtrace::{MpscRing, Wakeup};
    /// use std::time::Duration;
    ///
    /// let ring = MpscRing::new(4096)?;
    /// let mut producer = ring.producer()?;
    /// let mut consumer = ring.consumer()?;
    /// let writer = std::thread::spawn(move || {
    ///     // 10 000 records of 64 bytes through a 4 KiB ring: none is lost.
    ///     for i in 0..10_000u64 {
    ///         let mut rec = producer.reserve_wait(64, Some(Duration::from_secs(10))).unwrap();
    ///         rec[..8].copy_from_slice(&i.to_le_bytes());
    ///         rec.commit();
    ///     }
    /// });
    /// let mut next = 0u64;
    /// while next < 10_000 {
    ///     consumer.poll(Some(Duration::from_secs(10)), |rec: &[u8]| {
    ///         assert_eq!(rec[..8], next.to_le_bytes());
    ///         next += 1;
    ///     })?;
    /// }
    /// writer.join().unwrap();
    /// assert_eq!(ring.stats().lost, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_wait(
        &mut self,
        len: usize,
        timeout: Option<Duration>,
    ) -> Result<Reservation<'_, K, Discard>, ReserveError> {
        let pos = self.claim_or_wait(len, timeout)?;
        Ok(Reservation { producer: self, pos, len: len as u32 })
    }

    /// Reserves (waiting for room, as [`reserve_wait`](Self::reserve_wait) does), copies
    /// `data` and commits with `wakeup`: one call.
    pub fn output_wait(&mut self, data: &[u8], wakeup: Wakeup, timeout: Option<Duration>) -> Result<(), ReserveError> {
        let pos = self.claim_or_wait(data.len(), timeout)?;
        // SAFETY: as in `output`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.core.region.data_ptr(pos + HDR_SIZE), data.len()) };
        self.finish(pos, data.len() as u32, false, wakeup);
        Ok(())
    }

    /// Whether the ring's consumer attached once and is gone (dropped, or its process
    /// died). A consumer may attach again later.
    pub fn is_disconnected(&self) -> bool {
        disconnect::consumer_gone(&self.core)
    }

    /// Claims space if there is room now: `Ok(None)` when the ring is full (not counted:
    /// the async producer waits and tries again).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn try_claim(&mut self, len: usize) -> Result<Option<u64>, ReserveError> {
        match self.claim(len) {
            Ok(pos) => Ok(Some(pos)),
            Err(Refused::Full) => Ok(None),
            Err(why) => Err(self.refused(why, len)),
        }
    }

    /// The reservation of `len` bytes claimed at `pos` ([`try_claim`](Self::try_claim)).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn reservation(&mut self, pos: u64, len: usize) -> Reservation<'_, K, Discard> {
        Reservation { producer: self, pos, len: len as u32 }
    }

    /// Copies `data` into the reservation claimed at `pos` for it and commits it.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn commit_copy(&mut self, pos: u64, data: &[u8], wakeup: Wakeup) {
        // SAFETY: as in `output`: `pos` is this handle's claim of `data.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.core.region.data_ptr(pos + HDR_SIZE), data.len()) };
        self.finish(pos, data.len() as u32, false, wakeup);
    }

    /// Counts a record given up as lost (a waiting producer that found the consumer
    /// gone).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn count_lost(&self) {
        self.slot.bump(&self.slot.counters().lost);
    }

    /// A producer that found no room announces that it waits, and looks again (the
    /// room protocol's `arm_room`, at the consumer position its failed claim saw).
    /// `Ok(true)`: wait for the room doorbell.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn arm_room(&self) -> std::io::Result<bool> {
        self.core.arm_room(self.cursor.cons)
    }

    /// This process's room socket for the ring, named among those the consumer rings;
    /// `None` if there is none (no socket could be made, or every entry is taken).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn room_socket(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        let (fd, id) = self.shared.region.room_socket()?;
        self.core.region.register_room_socket(id).then_some((fd, id))
    }

    /// What this process's async producers of the ring wake each other with.
    #[cfg(feature = "tokio")]
    pub(crate) fn room_notify(&self) -> &::tokio::sync::Notify {
        &self.shared.region.room_notify
    }

    /// Whether the ring is shared between processes.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn is_shared(&self) -> bool {
        self.core.region.is_futex()
    }

    /// Claims space, waiting for room if there is none.
    #[inline]
    fn claim_or_wait(&mut self, len: usize, timeout: Option<Duration>) -> Result<u64, ReserveError> {
        match self.claim(len) {
            Ok(pos) => Ok(pos),
            Err(Refused::Full) => self.wait_for_room(len, timeout),
            Err(why) => Err(self.refused(why, len)),
        }
    }

    /// The waiting part of [`claim_or_wait`](Self::claim_or_wait): arm, look again,
    /// sleep on the producers' doorbell, reserve again; until a reserve succeeds, the
    /// consumer is gone, or the deadline passes.
    #[cold]
    #[inline(never)]
    fn wait_for_room(&mut self, len: usize, timeout: Option<Duration>) -> Result<u64, ReserveError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let lose = |p: &Self, e: ReserveError| {
            p.slot.bump(&p.slot.counters().lost);
            Err(e)
        };
        // Rings shared between processes: look for a dead consumer now and then (a
        // consumer in this process rings the doorbell when it is dropped).
        let slice = self.core.region.is_futex().then_some(DEAD_CHECK);
        // Bounded by the deadline (each round sleeps until a ring, the slice or the
        // deadline); with no deadline, by the consumer: it frees room or goes away.
        loop {
            if disconnect::consumer_gone(&self.core) {
                return lose(self, ReserveError::Disconnected { len });
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return lose(self, ReserveError::Timeout { len });
            }
            // The consumer position the failed reserve saw (`has_room` reloads it
            // before it refuses).
            let seen = self.cursor.cons;
            let token = self.core.room_token();
            let nap = [left, slice].into_iter().flatten().min();
            match self.core.arm_room(seen) {
                Ok(true) => {
                    // A failed futex wait (only a kernel without futexes) degrades to
                    // a nap, still bounded by the deadline.
                    if self.core.region.sleep_for_room(token, nap).is_err() {
                        std::thread::sleep(nap.unwrap_or(ROOM_NAP).min(ROOM_NAP));
                    }
                }
                Ok(false) => {}
                // The barrier failed (it does not on a kernel that ran it before): the
                // announcement cannot be trusted, nap instead.
                Err(_) => std::thread::sleep(nap.unwrap_or(ROOM_NAP).min(ROOM_NAP)),
            }
            match self.claim(len) {
                Ok(pos) => return Ok(pos),
                Err(Refused::Full) => {}
                Err(why) => return Err(self.refused(why, len)),
            }
        }
    }

    /// Claims space; `K::MULTI` is a constant, so each kind compiles to one path.
    #[inline(always)]
    fn claim(&mut self, len: usize) -> Result<u64, Refused> {
        if K::MULTI {
            // The claim marks (see `repair`): a single producer needs none (its pid in
            // the producer line says who claims).
            let (word, shared) = (&self.slot.counters().claiming, self.slot.is_shared());
            repair::mark_claim(word, shared);
            let claimed = self.core.reserve::<true>(len, &mut self.cursor);
            repair::unmark_claim(word, shared);
            claimed
        } else {
            self.core.reserve::<false>(len, &mut self.cursor)
        }
    }
}

impl<K: ProducerKind> Producer<K, Overwrite> {
    /// Reserves `len` bytes for one record in an overwrite ring, overwriting the oldest
    /// records if there is no room (whole records, never one still being written).
    /// Write the payload with [`Reservation::write`] (an overwrite ring's bytes are read
    /// while they may be rewritten, so they are written with atomic word stores, not
    /// through a `&mut [u8]`).
    ///
    /// Errors, each counted as lost: [`ReserveError::Pending`] if making room would
    /// overwrite a record still being written, [`ReserveError::Paused`] while the ring is
    /// paused; and [`ReserveError::TooLarge`].
    ///
    /// ```
    /// use ringtrace::FlightRecorder;
    ///
    /// let ring = FlightRecorder::new(4096)?;
    /// let mut producer = ring.producer()?;
    /// for i in 0..1000u32 {
    ///     let mut rec = producer.reserve(4)?;
    ///     rec.write(0, &i.to_le_bytes())?;
    ///     rec.commit();
    /// }
    /// let snap = ring.snapshot()?;
    /// let newest = snap.iter().next_back().unwrap();
    /// assert_eq!(newest, 999u32.to_le_bytes());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn reserve(&mut self, len: usize) -> Result<Reservation<'_, K, Overwrite>, ReserveError> {
        match self.claim_overwrite(len) {
            Ok(pos) => Ok(Reservation { producer: self, pos, len: len as u32 }),
            Err(why) => Err(self.refused(why, len)),
        }
    }

    /// Reserves, copies `data` and commits with `wakeup`: one call.
    #[inline(always)]
    pub fn output(&mut self, data: &[u8], wakeup: Wakeup) -> Result<(), ReserveError> {
        let pos = match self.claim_overwrite(data.len()) {
            Ok(pos) => pos,
            Err(why) => return Err(self.refused(why, data.len())),
        };
        self.core.write_payload(pos, 0, data);
        self.finish(pos, data.len() as u32, false, wakeup);
        Ok(())
    }

    /// Claims space: between the claim marks (see `repair`) in a multi-producer ring,
    /// with plain stores in a single-producer one (`K::MULTI` is a constant).
    #[inline(always)]
    fn claim_overwrite(&mut self, len: usize) -> Result<u64, Refused> {
        if !K::MULTI {
            return self.core.reserve_overwrite_single(len, &mut self.cursor);
        }
        let (word, shared) = (&self.slot.counters().claiming, self.slot.is_shared());
        repair::mark_claim(word, shared);
        let claimed = self.core.reserve_overwrite(len, &mut self.cursor);
        repair::unmark_claim(word, shared);
        claimed
    }
}

impl<M: Mode> Clone for Producer<Mpsc, M> {
    /// Another handle to the same ring, with its own counter line.
    fn clone(&self) -> Self {
        let slot = SlotRef::claim(&self.core);
        Producer {
            core: self.core.clone(),
            cursor: self.cursor,
            slot,
            shared: self.shared.clone(),
            _static: PhantomData,
        }
    }
}

impl<K: ProducerKind, M: Mode> Drop for Producer<K, M> {
    fn drop(&mut self) {
        self.slot.free(&self.core);
        if !K::MULTI {
            owner::give_back(&self.core.control().producer.0.attached);
        }
        // A consumer waiting for records may now find every producer gone.
        self.core.wake_detached();
    }
}

/// Space reserved in the ring for one record, of exactly the length asked for, in place:
/// a `&mut [u8]` in discard mode (`DerefMut`), written with
/// [`write`](Reservation::write) in overwrite mode. Commit it, discard it, or drop it
/// (which discards it).
#[must_use = "if unused the reservation is discarded at once: commit it to publish the record"]
pub struct Reservation<'a, K: ProducerKind = Mpsc, M: Mode = Discard> {
    producer: &'a mut Producer<K, M>,
    pos: u64,
    len: u32,
}

impl<K: ProducerKind, M: Mode> fmt::Debug for Reservation<'_, K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation").field("pos", &self.pos).field("len", &self.len).finish()
    }
}

impl<K: ProducerKind, M: Mode> Reservation<'_, K, M> {
    /// Publishes the record; wakes the consumer as the ring's policy says.
    #[inline(always)]
    pub fn commit(self) {
        self.commit_with(Wakeup::Default)
    }

    /// Publishes the record with an explicit wakeup flag.
    #[inline(always)]
    pub fn commit_with(self, wakeup: Wakeup) {
        ManuallyDrop::new(self).finish(false, wakeup)
    }

    /// Gives the space up: the consumer skips the record.
    #[inline(always)]
    pub fn discard(self) {
        self.discard_with(Wakeup::Default)
    }

    /// Gives the space up with an explicit wakeup flag (a consumer blocked at this
    /// record needs a wakeup to move past it).
    #[inline(always)]
    pub fn discard_with(self, wakeup: Wakeup) {
        ManuallyDrop::new(self).finish(true, wakeup)
    }

    /// Position of the record's header in the ring (bytes since creation).
    pub fn position(&self) -> u64 {
        self.pos
    }

    #[inline(always)]
    fn finish(&mut self, discard: bool, wakeup: Wakeup) {
        self.producer.finish(self.pos, self.len, discard, wakeup);
    }
}

impl<K: ProducerKind, M: Mode> Drop for Reservation<'_, K, M> {
    fn drop(&mut self) {
        self.finish(true, Wakeup::Default);
    }
}

impl<K: ProducerKind> Reservation<'_, K, Overwrite> {
    /// Writes `data` at byte `offset` of the record (with atomic word stores: readers
    /// may copy these bytes meanwhile, and discard their copy as torn).
    #[inline]
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result<(), ReserveError> {
        match offset.checked_add(data.len()) {
            Some(end) if end <= self.len as usize => {
                self.producer.core.write_payload(self.pos, offset, data);
                Ok(())
            }
            _ => Err(ReserveError::OutOfBounds { offset, len: data.len(), record_len: self.len as usize }),
        }
    }

    /// Writes the whole payload: the overwrite-mode counterpart of the discard-mode
    /// reservation's `copy_from_slice` (through its `&mut [u8]`), so the same code
    /// writes a record in either mode.
    ///
    /// # Panics
    ///
    /// If `src.len()` is not the record's length, as
    /// [`<[u8]>::copy_from_slice`](slice::copy_from_slice) does.
    ///
    /// ```
    /// let ring = ringtrace::FlightRecorder::new(4096)?;
    /// let mut p = ring.producer()?;
    /// let mut rec = p.reserve(5)?;
    /// rec.copy_from_slice(b"hello");
    /// rec.commit();
    /// assert_eq!(ring.snapshot()?.iter().next(), Some(&b"hello"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn copy_from_slice(&mut self, src: &[u8]) {
        assert_eq!(src.len(), self.len as usize, "source slice length does not match the record's length");
        self.producer.core.write_payload(self.pos, 0, src);
    }

    /// The record's payload length.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the record has no payload.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<K: ProducerKind> Deref for Reservation<'_, K, Discard> {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        // SAFETY: see `deref_mut`; a shared borrow of the same bytes.
        unsafe { std::slice::from_raw_parts(self.payload_ptr(), self.len as usize) }
    }
}

impl<K: ProducerKind> DerefMut for Reservation<'_, K, Discard> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: this reservation owns `[pos + 8, pos + 8 + len)` until it commits or
        // discards (no other producer can claim it; the consumer does not read it while
        // the header is BUSY or zero). The bytes are initialized (zeroed by the consumer
        // or the single producer, earlier records' bytes, or fresh memfd pages) and contiguous thanks to the double mapping; the slice's
        // borrow of `self` ends before `finish` publishes them.
        unsafe { std::slice::from_raw_parts_mut(self.payload_ptr(), self.len as usize) }
    }
}

impl<K: ProducerKind> Reservation<'_, K, Discard> {
    /// Writes `data` at byte `offset` of the record: the discard-mode counterpart of the
    /// overwrite-mode reservation's `write`, so the same code writes a record in
    /// either mode. [`ReserveError::OutOfBounds`] if it does not fit.
    #[inline]
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result<(), ReserveError> {
        let record_len = self.len as usize;
        match self.get_mut(offset..).and_then(|rest| rest.get_mut(..data.len())) {
            Some(dst) => {
                dst.copy_from_slice(data);
                Ok(())
            }
            None => Err(ReserveError::OutOfBounds { offset, len: data.len(), record_len }),
        }
    }

    #[inline(always)]
    fn payload_ptr(&self) -> *mut u8 {
        self.producer.core.region.data_ptr(self.pos + HDR_SIZE)
    }
}
