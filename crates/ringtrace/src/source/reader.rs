//! [`Reader`]: what every reader of the crate does without waiting: read the records
//! available now, take one as an owned item, say whether its writers are gone. The
//! async `ringtrace::tokio::Source` (feature `tokio`) is this and how to wait.

use std::convert::Infallible;

use super::items::{ChannelItem, PerfItem};
use crate::callback::Outcome;
use crate::channel::ChannelRecord;
use crate::clock::Clock;
use crate::config::{Mode, ProducerKind};
use crate::error::ConsumeError;
use crate::kernel::bpf::{BpfRingBuf, RingSet};
use crate::kernel::perf::{BackwardRing, ForwardRing, PerfRecord};
use crate::recorder::OverwriteConsumer;
use crate::{ChannelReader, Consumer};

/// One of the crate's readers, read synchronously through one interface: every reader
/// of this crate, and no other type (the trait is sealed: the contract below is the
/// crate's own, kept by each reader). Its async form is `ringtrace::tokio::Source`
/// (feature `tokio`), which adds how to wait.
///
/// Implemented for [`Consumer`], [`OverwriteConsumer`], [`ChannelReader`],
/// [`BpfRingBuf`], [`RingSet`], [`ForwardRing`] and [`BackwardRing`].
///
/// ```
/// use ringtrace::source::Reader;
/// use ringtrace::{MpscRing, Wakeup};
///
/// /// Every item a reader has now, whichever reader it is.
/// fn drain<R: Reader>(reader: &mut R) -> Result<Vec<R::Item>, ringtrace::ConsumeError> {
///     let mut items = Vec::new();
///     while let Some(item) = reader.take()? {
///         items.push(item);
///     }
///     Ok(items)
/// }
///
/// let ring = MpscRing::new(1 << 16)?;
/// let mut producer = ring.producer()?;
/// let mut consumer = ring.consumer()?;
/// producer.output(b"one", Wakeup::Default)?;
/// producer.output(b"two", Wakeup::Default)?;
/// assert_eq!(drain(&mut consumer)?, [b"one".to_vec(), b"two".to_vec()]);
/// drop(producer);
/// assert!(consumer.disconnected());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Reader: sealed::Sealed {
    /// What the callback of [`read`](Self::read) is lent: a record's bytes, or more (a
    /// channel record's producer and timestamp, a ring set's map index, a perf record's
    /// type).
    type Record<'a>;
    /// A record copied out of the reader, as [`take`](Self::take) hands it out.
    type Item: Send + 'static;

    /// Whether every writer is gone, so that nothing more will come once what is there
    /// is read: a [`Consumer`] whose producer handles were all dropped
    /// ([`Consumer::is_disconnected`]). Always false for the readers whose writers are
    /// the kernel's or a channel's.
    fn disconnected(&self) -> bool {
        false
    }

    /// Calls `f` with at most `max` records available now, in order; returns how many it
    /// saw. Stops at the first error of `f` (that record counts as read). A
    /// [`BackwardRing`] is read in one paused walk, so for any `max > 0` it delivers
    /// every record written since its last read.
    fn read<F, R>(&mut self, max: usize, f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(Self::Record<'_>) -> R,
        R: Outcome;

    /// Takes the next item, copied out, if one is available now: the record is consumed
    /// from the reader if and only if this returns it. (For a [`BackwardRing`], the item
    /// is every record written since its last read.)
    fn take(&mut self) -> Result<Option<Self::Item>, ConsumeError<Infallible>>;
}

/// The seal: only this crate's readers implement [`Reader`].
pub(crate) mod sealed {
    /// Implemented for the crate's readers only.
    pub trait Sealed {}
}

/// Stops a read after its `max`-th record: the error a reader's callback returns so that
/// a reader without a count of its own (a ring set, a channel, a forward perf ring)
/// delivers at most `max` records. Those readers count the record a callback failed on
/// as read, so the callback fails on the last record it keeps, after handling it.
#[derive(Debug)]
enum Limit<E> {
    /// The caller's callback failed.
    Caller(E),
    /// `max` records were delivered.
    Reached,
}

/// The records a read limited by [`Limit`] delivered, and how many it may.
#[derive(Debug)]
struct AtMost {
    n: usize,
    max: usize,
}

impl AtMost {
    /// The callback's result for one record: counts it, and stops the read once it is
    /// the `max`-th.
    fn count<E>(&mut self, r: Result<(), E>) -> Result<(), Limit<E>> {
        self.n += 1;
        r.map_err(Limit::Caller)?;
        if self.n >= self.max {
            return Err(Limit::Reached);
        }
        Ok(())
    }
}

/// [`Reader::read`] for a reader without a count of its own: `read` is the reader's
/// own read, its callback's results passed through [`AtMost::count`]; at most `max`
/// records are delivered, none for 0.
fn read_at_most<E>(
    max: usize,
    read: impl FnOnce(&mut AtMost) -> Result<usize, ConsumeError<Limit<E>>>,
) -> Result<usize, ConsumeError<E>> {
    if max == 0 {
        return Ok(0);
    }
    let mut limit = AtMost { n: 0, max };
    match read(&mut limit) {
        Ok(got) => Ok(got),
        Err(ConsumeError::Callback(Limit::Reached)) => Ok(limit.n),
        Err(ConsumeError::Callback(Limit::Caller(e))) => Err(ConsumeError::Callback(e)),
        Err(ConsumeError::Corrupt { pos, header }) => Err(ConsumeError::Corrupt { pos, header }),
        Err(ConsumeError::Positions { reader, producer }) => Err(ConsumeError::Positions { reader, producer }),
        Err(ConsumeError::Busy) => Err(ConsumeError::Busy),
        Err(ConsumeError::Disconnected) => Err(ConsumeError::Disconnected),
        Err(ConsumeError::Io(e)) => Err(ConsumeError::Io(e)),
        Err(ConsumeError::Kernel(e)) => Err(ConsumeError::Kernel(e)),
    }
}

/// [`Reader::take`] for a reader whose records are taken one at a time: one
/// [`read`](Reader::read) of at most one record, copied out by `copy`.
fn take_one<S: Reader>(
    source: &mut S,
    copy: impl FnOnce(S::Record<'_>) -> S::Item,
) -> Result<Option<S::Item>, ConsumeError<Infallible>> {
    let mut copy = Some(copy);
    let mut item = None;
    source.read(1, |rec| {
        if let Some(copy) = copy.take() {
            item = Some(copy(rec));
        }
    })?;
    Ok(item)
}

/// The [`Reader`] of a reader of byte records with a `consume_n`, then `$extra`, its
/// own methods.
macro_rules! byte_reader {
    (impl[$($gen:tt)*] $ty:ty { $($extra:item)* }) => {
        impl<$($gen)*> sealed::Sealed for $ty {}

        impl<$($gen)*> Reader for $ty {
            type Record<'a> = &'a [u8];
            type Item = Vec<u8>;

            fn read<F, R>(&mut self, max: usize, f: F) -> Result<usize, ConsumeError<R::Error>>
            where
                F: FnMut(&[u8]) -> R,
                R: Outcome,
            {
                self.consume_n(max, f)
            }

            fn take(&mut self) -> Result<Option<Vec<u8>>, ConsumeError<Infallible>> {
                take_one(self, <[u8]>::to_vec)
            }

            $($extra)*
        }
    };
}

byte_reader! {
    impl[K: ProducerKind] Consumer<K> {
        fn disconnected(&self) -> bool {
            self.is_disconnected()
        }
    }
}

byte_reader! {
    impl[K: ProducerKind] OverwriteConsumer<K> {
        fn disconnected(&self) -> bool {
            self.is_disconnected()
        }
    }
}

byte_reader! {
    impl[] BpfRingBuf {}
}

impl sealed::Sealed for RingSet {}

/// Records come with the index of the map they were read from.
impl Reader for RingSet {
    type Record<'a> = (usize, &'a [u8]);
    type Item = (usize, Vec<u8>);

    fn read<F, R>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut((usize, &[u8])) -> R,
        R: Outcome,
    {
        // A map the callback stops in stays on the set's ready list, its other records
        // ready for the next call.
        read_at_most(max, |limit| self.consume(|i, rec| limit.count(f((i, rec)).into_result())))
    }

    fn take(&mut self) -> Result<Option<(usize, Vec<u8>)>, ConsumeError<Infallible>> {
        take_one(self, |(i, rec)| (i, rec.to_vec()))
    }
}

impl<M: Mode, C: Clock> sealed::Sealed for ChannelReader<M, C> {}

impl<M: Mode, C: Clock> Reader for ChannelReader<M, C> {
    type Record<'a> = ChannelRecord<'a>;
    type Item = ChannelItem;

    fn read<F, R>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(ChannelRecord<'_>) -> R,
        R: Outcome,
    {
        // The reader counts the record its callback fails on as delivered, and keeps
        // the rest staged for the next call.
        read_at_most(max, |limit| self.consume(|rec| limit.count(f(rec).into_result())))
    }

    fn take(&mut self) -> Result<Option<ChannelItem>, ConsumeError<Infallible>> {
        take_one(self, |r| ChannelItem { producer: r.producer, timestamp: r.timestamp, data: r.data.to_vec() })
    }
}

impl sealed::Sealed for ForwardRing {}

impl Reader for ForwardRing {
    type Record<'a> = PerfRecord<'a>;
    type Item = PerfItem;

    fn read<F, R>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(PerfRecord<'_>) -> R,
        R: Outcome,
    {
        // The ring's tail moves past the record the callback fails on, and no further.
        read_at_most(max, |limit| ForwardRing::read(self, |rec| limit.count(f(rec).into_result())))
    }

    fn take(&mut self) -> Result<Option<PerfItem>, ConsumeError<Infallible>> {
        take_one(self, |rec| PerfItem::new(&rec))
    }
}

impl sealed::Sealed for BackwardRing {}

/// The kernel overwrites the ring without waiting for the reader, so records cannot be
/// taken one at a time: each read is one paused walk over everything written since the
/// last ([`BackwardRing::read_new`]), newest first, and an item is that whole batch.
impl Reader for BackwardRing {
    type Record<'a> = PerfRecord<'a>;
    type Item = Vec<PerfItem>;

    fn read<F, R>(&mut self, max: usize, f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(PerfRecord<'_>) -> R,
        R: Outcome,
    {
        // Nothing new: no pause (the kernel drops what it writes while paused).
        if max == 0 || BackwardRing::arm(self)? {
            return Ok(0);
        }
        self.read_new(f)
    }

    fn take(&mut self) -> Result<Option<Vec<PerfItem>>, ConsumeError<Infallible>> {
        if BackwardRing::arm(self)? {
            return Ok(None);
        }
        let mut batch = Vec::new();
        self.read_new(|rec| batch.push(PerfItem::new(&rec)))?;
        Ok(Some(batch).filter(|b| !b.is_empty()))
    }
}
