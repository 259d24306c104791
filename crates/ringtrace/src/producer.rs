//! [`Producer`] and its zero-copy [`Reservation`].

#![cfg(not(loom))]

use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::config::{Discard, Mode, Mpsc, Overwrite, ProducerKind, Wakeup};
use crate::error::{Error, ReserveError};
use crate::format::record::HDR_SIZE;
use crate::owner;
use crate::protocol::core::{Core, ProducerCursor, Refused};
use crate::protocol::repair;
use crate::region::mmap::MmapView;
use crate::region::Region;
use crate::shared::{Shared, SlotRef};
use crate::sync::Ordering::{Relaxed, Release};

mod room;

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

    /// Claims space; `K::MULTI` is a constant, so each kind compiles to one path.
    #[inline(always)]
    fn claim(&mut self, len: usize) -> Result<u64, Refused> {
        if K::MULTI {
            // The claim marks (see `repair`): a single producer needs none (its pid in
            // the producer line says who claims), nor does a ring only this process
            // produces into (while it runs, none of its producers is dead).
            if !self.core.region.producers_may_die() {
                return self.core.reserve::<true>(len, &mut self.cursor);
            }
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
        if !self.core.region.producers_may_die() {
            // As in `claim`: no marks where no producer can be dead.
            return self.core.reserve_overwrite(len, &mut self.cursor);
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
