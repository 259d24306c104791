//! [`Source`]: what the async readers need of a reader: the descriptor to wait on, how
//! to prepare to sleep, how to read records now, how to take one as an owned item.

use std::convert::Infallible;
use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use crate::callback::Outcome;
use crate::error::ConsumeError;

/// A reader that [`AsyncReader`](super::AsyncReader) can drive: every reader of this
/// crate, and no other type (the trait is sealed, as crossbeam-channel's flavours sit
/// behind one API: the contract below is the crate's own, kept by each reader).
///
/// Implemented for [`Consumer`](crate::Consumer),
/// [`OverwriteConsumer`](crate::recorder::OverwriteConsumer),
/// [`ChannelReader`](crate::ChannelReader),
/// [`BpfRingBuf`](crate::kernel::bpf::BpfRingBuf),
/// [`RingSet`](crate::kernel::bpf::RingSet),
/// [`ForwardRing`](crate::kernel::perf::ForwardRing) and
/// [`BackwardRing`](crate::kernel::perf::BackwardRing).
///
/// The waiting protocol, for a reader with a descriptor: read until nothing is left, then
/// [`arm`](Self::arm); if it says it is safe to sleep, wait until the descriptor is
/// readable (edge-triggered is fine: arming re-checks after announcing the wait, so a
/// record committed meanwhile is found by the re-check or raises a new edge), and read
/// again.
pub trait Source: sealed::Sealed {
    /// What the callback of [`read`](Self::read) is lent: a record's bytes, or more (a
    /// channel record's producer and timestamp, a ring set's map index, a perf record's
    /// type).
    type Record<'a>;
    /// A record copied out of the reader, as a [`Records`](super::Records) stream hands
    /// it out.
    type Item: Send + 'static;

    /// The descriptor that becomes readable when the reader is woken: a ring's doorbell
    /// eventfd, a BPF map, a ring set's epoll instance, a perf event. `None` for a reader
    /// with no doorbell an event loop can wait on (a channel file's
    /// [`ChannelReader`](crate::ChannelReader), whose doorbell is a futex: its async form
    /// looks every millisecond).
    fn wait_fd(&self) -> Option<BorrowedFd<'_>>;

    /// Prepares to sleep: publishes the read position, resets the doorbell, announces the
    /// wait, and checks again. `Ok(true)`: nothing is ready, and a record committed from
    /// now on will make [`wait_fd`](Self::wait_fd) readable (per the reader's wakeup
    /// policy). `Ok(false)`: records are ready (or arrived meanwhile): read first.
    ///
    /// A reader with no doorbell always answers `Ok(true)`.
    fn arm(&mut self) -> io::Result<bool>;

    /// Whether every writer is gone, so that nothing more will come once what is there
    /// is read: a [`Consumer`](crate::Consumer) whose producer handles were all dropped
    /// ([`Consumer::is_disconnected`](crate::Consumer::is_disconnected)). Always false
    /// for the readers whose writers are the kernel's or a channel's.
    fn disconnected(&self) -> bool {
        false
    }

    /// How long a wait may last without a wakeup before the reader looks again: a ring
    /// shared between processes (a producer process that is killed rings nothing, so
    /// [`disconnected`](Self::disconnected) is looked at every 200 ms, as the blocking
    /// `poll` does), or a ring whose next record is claimed and unfinished (its producer
    /// process may have died: [`on_recheck`](Self::on_recheck) steps over it). `None`:
    /// only the doorbell ends a wait.
    fn recheck(&self) -> Option<Duration> {
        None
    }

    /// A wait ended at its [`recheck`](Self::recheck) time: whatever the reader looks
    /// at then (a record left unfinished by a producer process that died).
    fn on_recheck(&mut self) {}

    /// Calls `f` with at most `max` records available now, in order; returns how many it
    /// saw. Stops at the first error of `f` (that record counts as read). A
    /// [`BackwardRing`](crate::kernel::perf::BackwardRing) is read in one paused walk, so
    /// for any `max > 0` it delivers every record written since its last read.
    fn read<F, R>(&mut self, max: usize, f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(Self::Record<'_>) -> R,
        R: Outcome;

    /// Takes the next item, copied out, if one is available now: the record is consumed
    /// from the reader if and only if this returns it. (For a
    /// [`BackwardRing`](crate::kernel::perf::BackwardRing), the item is every record
    /// written since its last read.)
    fn take(&mut self) -> Result<Option<Self::Item>, ConsumeError<Infallible>>;
}

/// The seal: only this crate's readers implement [`Source`].
pub(super) mod sealed {
    /// Implemented for the crate's readers only.
    pub trait Sealed {}
}

/// Stops a read after its `max`-th record: the error a reader's callback returns so that
/// a reader without a count of its own (a ring set, a channel, a forward perf ring)
/// delivers at most `max` records. Those readers count the record a callback failed on
/// as read, so the callback fails on the last record it keeps, after handling it.
#[derive(Debug)]
pub(super) enum Limit<E> {
    /// The caller's callback failed.
    Caller(E),
    /// `max` records were delivered.
    Reached,
}

/// The callback's result for one record of a read limited by [`Limit`]: counts it in
/// `n`, and stops the read once it is the `max`-th (`max > 0`).
pub(super) fn counted<E>(n: &mut usize, max: usize, r: Result<(), E>) -> Result<(), Limit<E>> {
    *n += 1;
    r.map_err(Limit::Caller)?;
    if *n >= max {
        return Err(Limit::Reached);
    }
    Ok(())
}

/// The result of a read limited by [`Limit`] whose callback saw `n` records, in the
/// caller's error type.
pub(super) fn finish<E>(result: Result<usize, ConsumeError<Limit<E>>>, n: usize) -> Result<usize, ConsumeError<E>> {
    match result {
        Ok(got) => Ok(got),
        Err(ConsumeError::Callback(Limit::Reached)) => Ok(n),
        Err(ConsumeError::Callback(Limit::Caller(e))) => Err(ConsumeError::Callback(e)),
        Err(ConsumeError::Corrupt { pos, header }) => Err(ConsumeError::Corrupt { pos, header }),
        Err(ConsumeError::Positions { reader, producer }) => Err(ConsumeError::Positions { reader, producer }),
        Err(ConsumeError::Busy) => Err(ConsumeError::Busy),
        Err(ConsumeError::Disconnected) => Err(ConsumeError::Disconnected),
        Err(ConsumeError::Io(e)) => Err(ConsumeError::Io(e)),
        Err(ConsumeError::Kernel(e)) => Err(ConsumeError::Kernel(e)),
    }
}

/// [`Source::take`] for a reader whose records are taken one at a time: one
/// [`read`](Source::read) of at most one record, copied out by `copy`.
pub(super) fn take_one<S: Source>(
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
