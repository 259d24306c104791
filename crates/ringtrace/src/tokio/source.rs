//! [`Source`]: what the async readers need of a reader: the sync
//! [`Reader`] (read records now, take one as an owned item), and
//! the descriptor to wait on and how to prepare to sleep.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use crate::source::Reader;

/// A reader that [`AsyncReader`](super::AsyncReader) can drive: every reader of this
/// crate, and no other type (its [`Reader`] is sealed, as crossbeam-channel's flavours
/// sit behind one API: the contract below is the crate's own, kept by each reader).
/// Reading, taking and [`Reader::disconnected`] are the sync [`Reader`]'s; this adds
/// waiting.
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
pub trait Source: Reader {
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

    /// How long a wait may last without a wakeup before the reader looks again: a ring
    /// shared between processes (a producer process that is killed rings nothing, so
    /// [`disconnected`](Reader::disconnected) is looked at every 200 ms, as the blocking
    /// `poll` does), or a ring whose next record is claimed and unfinished (its producer
    /// process may have died: [`on_recheck`](Self::on_recheck) steps over it). `None`:
    /// only the doorbell ends a wait.
    fn recheck(&self) -> Option<Duration> {
        None
    }

    /// A wait ended at its [`recheck`](Self::recheck) time: whatever the reader looks
    /// at then (a record left unfinished by a producer process that died).
    fn on_recheck(&mut self) {}
}
