//! A channel's producer: its own single-producer ring and the channel's clock.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::bell::ChannelBell;
use super::lane::Lane;
use crate::clock::Clock;
use crate::config::Mode;
use crate::config::{Discard, Overwrite, Spsc, Wakeup};
use crate::error::ReserveError;
use crate::producer::{Producer, Reservation};

/// Bytes of timestamp at the start of every record of a channel with clock `C`.
#[inline(always)]
pub(crate) const fn stamp_len<C: Clock>() -> usize {
    if C::STAMPED {
        8
    } else {
        0
    }
}

/// A channel record's timestamp (nanoseconds) and payload. A record shorter than its
/// stamp was not written by a channel producer (a hostile or foreign writer): it is
/// given whole, with timestamp 0, rather than dropped.
#[inline]
pub(crate) fn split_stamp<'a, C: Clock>(clock: &C, rec: &'a [u8]) -> (u64, &'a [u8]) {
    match rec.split_first_chunk::<8>() {
        Some((ts, body)) if C::STAMPED => (clock.raw_to_ns(u64::from_ne_bytes(*ts)), body),
        _ => (0, rec),
    }
}

/// Writes records into one ring of a channel. `Send`, not `Clone`: one per thread.
/// Dropping it marks its ring exited (see the channel's lifecycle).
///
/// ```
/// use ringtrace::{Channel, Wakeup};
/// use ringtrace::clock::NoClock;
/// use ringtrace::config::Discard;
///
/// let channel = Channel::<Discard, NoClock>::builder(4096).build(NoClock)?;
/// let mut producer = channel.producer()?;
/// let mut rec = producer.reserve(3)?;
/// rec.copy_from_slice(b"abc");
/// rec.commit();
/// producer.output(b"de", Wakeup::Default)?;
/// let mut seen = Vec::new();
/// channel.reader()?.drain(|r| {
///     seen.push(r.data.to_vec());
///     Ok::<_, std::convert::Infallible>(())
/// })?;
/// assert_eq!(seen, [b"abc".to_vec(), b"de".to_vec()]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ChannelProducer<M: Mode, C: Clock> {
    producer: Producer<Spsc, M>,
    clock: C,
    lane: Arc<Lane<M>>,
    /// The channel's doorbell (a private channel's, or a version 2 channel file's bell
    /// line), rung after each commit.
    bell: Option<Arc<ChannelBell>>,
}

impl<M: Mode, C: Clock> fmt::Debug for ChannelProducer<M, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelProducer").field("id", &self.lane.id).field("name", &self.lane.name).finish()
    }
}

impl<M: Mode, C: Clock> ChannelProducer<M, C> {
    pub(crate) fn new(
        producer: Producer<Spsc, M>,
        clock: C,
        lane: Arc<Lane<M>>,
        bell: Option<Arc<ChannelBell>>,
    ) -> Self {
        ChannelProducer { producer, clock, lane, bell }
    }

    /// This producer's number in its channel.
    pub fn id(&self) -> u32 {
        self.lane.id
    }

    /// Reports the timestamp failures map to: the length asked for, not the stamp.
    #[cold]
    fn unstamped(e: ReserveError, len: usize) -> ReserveError {
        match e {
            ReserveError::Full { .. } => ReserveError::Full { len },
            ReserveError::Pending { .. } => ReserveError::Pending { len },
            ReserveError::Paused { .. } => ReserveError::Paused { len },
            ReserveError::Timeout { .. } => ReserveError::Timeout { len },
            ReserveError::Disconnected { .. } => ReserveError::Disconnected { len },
            ReserveError::TooLarge { max, .. } => ReserveError::TooLarge { len, max: max - stamp_len::<C>() },
            ReserveError::OutOfBounds { .. } => e,
        }
    }
}

/// A reading of a channel's clock ([`ChannelProducer::stamp`]), to stamp a record
/// written later with the moment it stands for ([`ChannelProducer::output_stamped`]).
///
/// A producer's records are in timestamp order in its ring, and a live reader merges
/// the rings on that promise: a stamp must not be older than the stamp of a record the
/// producer wrote before it (such a record is delivered late, and counted so:
/// [`ChannelReader::late`](crate::ChannelReader::late)). A stamp of another channel's
/// clock means nothing here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(u64);

impl<M: Mode, C: Clock> ChannelProducer<M, C> {
    /// The channel's clock now, to stamp a record written later.
    ///
    /// ```
    /// use ringtrace::{Channel, Wakeup};
    /// use ringtrace::clock::Monotonic;
    /// use ringtrace::config::Discard;
    ///
    /// let channel = Channel::<Discard, Monotonic>::builder(4096).build(Monotonic)?;
    /// let mut producer = channel.producer()?;
    /// let opened = producer.stamp();
    /// // ... the record's content is known only now ...
    /// producer.output_stamped(b"opened", opened, Wakeup::Default)?;
    /// let mut seen = Vec::new();
    /// channel.reader()?.drain(|r| {
    ///     seen.push(r.data.to_vec());
    ///     Ok::<_, std::convert::Infallible>(())
    /// })?;
    /// assert_eq!(seen, [b"opened".to_vec()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn stamp(&self) -> Stamp {
        Stamp(self.clock.raw())
    }
}

impl<C: Clock> ChannelProducer<Discard, C> {
    /// Reserves `len` bytes in this producer's ring, stamped with the clock's time now;
    /// the same contract as [`Producer::reserve`].
    #[inline(always)]
    pub fn reserve(&mut self, len: usize) -> Result<ChannelReservation<'_, Discard, C>, ReserveError> {
        let ts = self.stamp();
        self.reserve_stamped(len, ts)
    }

    /// [`reserve`](Self::reserve), the record stamped with `stamp` (see [`Stamp`]).
    #[inline(always)]
    pub fn reserve_stamped(
        &mut self,
        len: usize,
        stamp: Stamp,
    ) -> Result<ChannelReservation<'_, Discard, C>, ReserveError> {
        let ts = stamp.0;
        let mut inner =
            self.producer.reserve(len.saturating_add(stamp_len::<C>())).map_err(|e| Self::unstamped(e, len))?;
        if C::STAMPED {
            inner[..8].copy_from_slice(&ts.to_ne_bytes());
        }
        Ok(ChannelReservation { inner, bell: self.bell.as_deref(), _clock: std::marker::PhantomData })
    }

    /// Reserves, stamps, copies `data` and commits: one call.
    #[inline(always)]
    pub fn output(&mut self, data: &[u8], wakeup: Wakeup) -> Result<(), ReserveError> {
        let ts = self.stamp();
        self.output_stamped(data, ts, wakeup)
    }

    /// [`output`](Self::output), the record stamped with `stamp` (see [`Stamp`]).
    #[inline(always)]
    pub fn output_stamped(&mut self, data: &[u8], stamp: Stamp, wakeup: Wakeup) -> Result<(), ReserveError> {
        let mut rec = self.reserve_stamped(data.len(), stamp)?;
        rec.copy_from_slice(data);
        rec.commit_with(wakeup);
        Ok(())
    }
}

impl<C: Clock> ChannelProducer<Overwrite, C> {
    /// Reserves `len` bytes in this producer's overwrite ring, stamped with the clock's
    /// time now; the same contract as the overwrite [`Producer::reserve`].
    #[inline(always)]
    pub fn reserve(&mut self, len: usize) -> Result<ChannelReservation<'_, Overwrite, C>, ReserveError> {
        let ts = self.stamp();
        self.reserve_stamped(len, ts)
    }

    /// [`reserve`](Self::reserve), the record stamped with `stamp` (see [`Stamp`]).
    #[inline(always)]
    pub fn reserve_stamped(
        &mut self,
        len: usize,
        stamp: Stamp,
    ) -> Result<ChannelReservation<'_, Overwrite, C>, ReserveError> {
        let ts = stamp.0;
        let mut inner =
            self.producer.reserve(len.saturating_add(stamp_len::<C>())).map_err(|e| Self::unstamped(e, len))?;
        if C::STAMPED {
            // The reservation is at least 8 bytes long: no error.
            let _ = inner.write(0, &ts.to_ne_bytes());
        }
        Ok(ChannelReservation { inner, bell: self.bell.as_deref(), _clock: std::marker::PhantomData })
    }

    /// Reserves, stamps, copies `data` and commits: one call.
    #[inline(always)]
    pub fn output(&mut self, data: &[u8], wakeup: Wakeup) -> Result<(), ReserveError> {
        let ts = self.stamp();
        self.output_stamped(data, ts, wakeup)
    }

    /// [`output`](Self::output), the record stamped with `stamp` (see [`Stamp`]).
    #[inline(always)]
    pub fn output_stamped(&mut self, data: &[u8], stamp: Stamp, wakeup: Wakeup) -> Result<(), ReserveError> {
        let mut rec = self.reserve_stamped(data.len(), stamp)?;
        // In bounds: the reservation is `data.len()` bytes.
        let _ = rec.write(0, data);
        rec.commit_with(wakeup);
        Ok(())
    }
}

impl<M: Mode, C: Clock> Drop for ChannelProducer<M, C> {
    fn drop(&mut self) {
        self.lane.exit();
        // A sleeping reader looks: the ring may now be settled (and freed).
        if let Some(bell) = &self.bell {
            bell.ring(Wakeup::Force);
        }
    }
}

/// Space reserved for one channel record, past its timestamp: a `&mut [u8]` in
/// discard mode, written with [`write`](ChannelReservation::write) in overwrite mode.
/// Commit it, discard it, or drop it (which discards it).
#[must_use = "if unused the reservation is discarded at once: commit it to publish the record"]
pub struct ChannelReservation<'a, M: Mode, C: Clock> {
    inner: Reservation<'a, Spsc, M>,
    bell: Option<&'a ChannelBell>,
    _clock: std::marker::PhantomData<C>,
}

impl<M: Mode, C: Clock> fmt::Debug for ChannelReservation<'_, M, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelReservation").field("pos", &self.inner.position()).finish()
    }
}

impl<M: Mode, C: Clock> ChannelReservation<'_, M, C> {
    /// Publishes the record.
    #[inline(always)]
    pub fn commit(self) {
        self.commit_with(Wakeup::Default)
    }

    /// Publishes the record with an explicit wakeup flag.
    #[inline(always)]
    pub fn commit_with(self, wakeup: Wakeup) {
        match self.bell {
            // A private channel's ring has no sleeper of its own: the channel's doorbell
            // is rung instead. A channel file's slot ring may have one (a consumer of
            // the slot alone, `Channel::slot_ring`): both are rung.
            Some(bell) => {
                self.inner.commit_with(if bell.is_file() { wakeup } else { Wakeup::NoWakeup });
                bell.ring(wakeup);
            }
            None => self.inner.commit_with(wakeup),
        }
    }

    /// Gives the space up: readers skip the record.
    #[inline(always)]
    pub fn discard(self) {
        self.inner.discard()
    }
}

impl<C: Clock> ChannelReservation<'_, Overwrite, C> {
    /// Writes `data` at byte `offset` of the record (past its timestamp).
    #[inline]
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result<(), ReserveError> {
        let d = stamp_len::<C>();
        self.inner.write(offset.saturating_add(d), data).map_err(|e| match e {
            ReserveError::OutOfBounds { record_len, .. } => {
                ReserveError::OutOfBounds { offset, len: data.len(), record_len: record_len - d }
            }
            other => other,
        })
    }
}

impl<C: Clock> Deref for ChannelReservation<'_, Discard, C> {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        &self.inner[stamp_len::<C>()..]
    }
}

impl<C: Clock> DerefMut for ChannelReservation<'_, Discard, C> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.inner[stamp_len::<C>()..]
    }
}
