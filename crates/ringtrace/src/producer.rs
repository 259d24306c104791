//! [`Producer`] and its zero-copy [`Reservation`].

use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::config::{Discard, Mode, Mpsc, ProducerKind, Wakeup};
use crate::core::{ProducerCursor, Refused};
use crate::error::{Error, ReserveError};
use crate::layout::HDR_SIZE;
use crate::ring::{attach_flag, detach_flag, Shared, SlotRef};

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
    shared: Arc<Shared>,
    cursor: ProducerCursor,
    slot: SlotRef,
    _static: PhantomData<fn() -> (K, M)>,
}

impl<K: ProducerKind, M: Mode> fmt::Debug for Producer<K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer").field("kind", &K::NAME).field("slot", &self.slot).finish()
    }
}

impl<K: ProducerKind, M: Mode> Producer<K, M> {
    pub(crate) fn attach(shared: Arc<Shared>) -> Result<Self, Error> {
        let ctl = shared.core.control();
        if !K::MULTI && !attach_flag(&ctl.producer.0.attached) {
            return Err(Error::ProducerAttached);
        }
        let (cons, prod) = shared.core.positions();
        let slot = SlotRef::claim(&shared);
        Ok(Producer { cursor: ProducerCursor { cons, prod }, slot, shared, _static: PhantomData })
    }

    /// Reserves `len` bytes for one record and returns them to be written in place.
    ///
    /// The record is published by [`Reservation::commit`], or skipped by
    /// [`Reservation::discard`]; dropping the reservation discards it. Until then the
    /// consumer waits at this record, and other producers go on reserving behind it.
    ///
    /// Errors: [`ReserveError::Full`] if it does not fit now (counted as lost),
    /// [`ReserveError::TooLarge`] if it never could (more than
    /// [`RingBuf::max_record_len`](crate::RingBuf::max_record_len)).
    #[inline]
    pub fn reserve(&mut self, len: usize) -> Result<Reservation<'_, K, M>, ReserveError> {
        let core = &self.shared.core;
        // `K::MULTI` is a constant: each producer kind compiles to one branch-free path.
        let claimed = if K::MULTI {
            core.reserve::<true>(len, &mut self.cursor)
        } else {
            core.reserve::<false>(len, &mut self.cursor)
        };
        match claimed {
            Ok(pos) => Ok(Reservation { producer: self, pos, len: len as u32 }),
            Err(why) => Err(self.refused(why, len)),
        }
    }

    /// Reserves, copies `data` and commits with `wakeup`: one call.
    #[inline]
    pub fn output(&mut self, data: &[u8], wakeup: Wakeup) -> Result<(), ReserveError> {
        let mut r = self.reserve(data.len())?;
        r.copy_from_slice(data);
        r.commit_with(wakeup);
        Ok(())
    }

    #[cold]
    fn refused(&self, why: Refused, len: usize) -> ReserveError {
        let c = self.slot.counters(&self.shared);
        match why {
            Refused::Full => {
                self.slot.bump(&c.lost);
                ReserveError::Full { len }
            }
            Refused::TooLarge => {
                self.slot.bump(&c.too_large);
                ReserveError::TooLarge { len, max: self.shared.core.max_len() as usize }
            }
        }
    }
}

impl<M: Mode> Clone for Producer<Mpsc, M> {
    /// Another handle to the same ring, with its own counter line.
    fn clone(&self) -> Self {
        let slot = SlotRef::claim(&self.shared);
        Producer { shared: self.shared.clone(), cursor: self.cursor, slot, _static: PhantomData }
    }
}

impl<K: ProducerKind, M: Mode> Drop for Producer<K, M> {
    fn drop(&mut self) {
        self.slot.free(&self.shared);
        if !K::MULTI {
            detach_flag(&self.shared.core.control().producer.0.attached);
        }
    }
}

/// Space reserved in the ring for one record: a `&mut [u8]` of exactly the length asked
/// for, in place. Commit it, discard it, or drop it (which discards it).
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
    #[inline]
    pub fn commit(self) {
        self.commit_with(Wakeup::Default)
    }

    /// Publishes the record with an explicit wakeup flag.
    #[inline]
    pub fn commit_with(self, wakeup: Wakeup) {
        ManuallyDrop::new(self).finish(false, wakeup)
    }

    /// Gives the space up: the consumer skips the record.
    #[inline]
    pub fn discard(self) {
        self.discard_with(Wakeup::Default)
    }

    /// Gives the space up with an explicit wakeup flag (a consumer blocked at this
    /// record needs a wakeup to move past it).
    #[inline]
    pub fn discard_with(self, wakeup: Wakeup) {
        ManuallyDrop::new(self).finish(true, wakeup)
    }

    /// Position of the record's header in the ring (bytes since creation).
    pub fn position(&self) -> u64 {
        self.pos
    }

    #[inline]
    fn finish(&mut self, discard: bool, wakeup: Wakeup) {
        let p = &*self.producer;
        let c = p.slot.counters(&p.shared);
        p.slot.bump(if discard { &c.discarded } else { &c.committed });
        p.shared.core.commit(self.pos, self.len, discard, wakeup);
    }
}

impl<K: ProducerKind, M: Mode> Drop for Reservation<'_, K, M> {
    fn drop(&mut self) {
        self.finish(true, Wakeup::Default);
    }
}

impl<K: ProducerKind, M: Mode> Deref for Reservation<'_, K, M> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: see `deref_mut`; a shared borrow of the same bytes.
        unsafe { std::slice::from_raw_parts(self.payload_ptr(), self.len as usize) }
    }
}

impl<K: ProducerKind, M: Mode> DerefMut for Reservation<'_, K, M> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: this reservation owns `[pos + 8, pos + 8 + len)` until it commits or
        // discards (no other producer can claim it; the consumer does not read it while
        // the header is BUSY). The bytes are initialized (zeroed by the consumer, or
        // fresh memfd pages) and contiguous thanks to the double mapping; the slice's
        // borrow of `self` ends before `finish` publishes them.
        unsafe { std::slice::from_raw_parts_mut(self.payload_ptr(), self.len as usize) }
    }
}

impl<K: ProducerKind, M: Mode> Reservation<'_, K, M> {
    #[inline]
    fn payload_ptr(&self) -> *mut u8 {
        self.producer.shared.core.region.data_ptr(self.pos + HDR_SIZE)
    }
}
