//! [`AsyncReader`]: a reader registered with the tokio runtime's reactor through its
//! doorbell ([`AsyncFd`]), or napping on the runtime's timer for a reader with none.

use std::fmt;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;
use ::tokio::time::Sleep;

use super::source::Source;
use crate::error::ConsumeError;

/// How long a reader with no doorbell (a channel's) sleeps between two looks: the nap of
/// the channel's blocking `poll`.
pub(super) const NAP: Duration = Duration::from_millis(1);

/// An async form of one of the crate's readers (any [`Source`]) on a tokio runtime:
/// [`readable`](Self::readable) waits for records without blocking a thread,
/// [`consume`](Self::consume) waits and reads them in place, and
/// [`stream`](Self::stream) / [`into_stream`](Self::into_stream) hand them out copied,
/// as a [`Stream`](futures_core::Stream).
///
/// The reader's descriptor is registered with the runtime's reactor (tokio's
/// [`AsyncFd`], read interest): no thread and no timer per reader. tokio registers
/// descriptors edge-triggered and keeps the readiness it was told of until it is
/// cleared ([`AsyncFdReadyGuard::clear_ready`](::tokio::io::unix::AsyncFdReadyGuard::clear_ready)),
/// so the reader clears it before arming the reader again: a wakeup that comes between
/// arming and waiting is then kept, never lost (tokio's `AsyncFd` docs describe this
/// loop). A [`ChannelReader`](crate::ChannelReader), which has no doorbell, is looked at
/// every millisecond with `tokio::time::sleep` instead, as its blocking `poll` naps.
///
/// Must be made, used and dropped within a tokio runtime with IO (and, for a channel,
/// time) enabled.
pub struct AsyncReader<S: Source> {
    pub(super) wait: Wait<S>,
    /// Records a stream handed out since it last returned `Pending`.
    pub(super) streak: u32,
    /// A channel reader's nap in progress, for a stream.
    nap: Option<Pin<Box<Sleep>>>,
}

/// How the reader waits.
pub(super) enum Wait<S> {
    /// On its descriptor, registered with the reactor.
    Fd(AsyncFd<Registered<S>>),
    /// By napping (no descriptor).
    Nap(S),
}

/// A reader with the descriptor the reactor watches: a duplicate of the reader's own
/// (the same open file, so the same wakeups), owned here so that it stays open and the
/// same for as long as it is registered, whatever is done with the reader through
/// [`AsyncReader::get_mut`].
pub(super) struct Registered<S> {
    source: S,
    fd: OwnedFd,
}

impl<S> AsRawFd for Registered<S> {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl<S: Source + fmt::Debug> fmt::Debug for AsyncReader<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (how, source) = match &self.wait {
            Wait::Fd(fd) => ("fd", &fd.get_ref().source),
            Wait::Nap(source) => ("nap", source),
        };
        f.debug_struct("AsyncReader").field("waits_on", &how).field("reader", source).finish()
    }
}

impl<S: Source> AsyncReader<S> {
    /// Registers `reader`'s descriptor with the current runtime's reactor (for read
    /// readiness). Fails outside a runtime, or if the reactor refuses the descriptor.
    pub fn new(reader: S) -> io::Result<AsyncReader<S>> {
        let fd = reader.wait_fd().map(|fd| fd.try_clone_to_owned()).transpose()?;
        let wait = match fd {
            Some(fd) => {
                let registered = Registered { source: reader, fd };
                // SAFETY: `as_raw_fd` of a `Registered` is that of its `fd`, an `OwnedFd`
                // in a private field that nothing replaces or closes while it is
                // registered: it is closed only when the `Registered` is dropped, which
                // `AsyncFd` does after deregistering it (on drop and in `into_inner`).
                let fd = unsafe { AsyncFd::register_with_interest(registered, Interest::READABLE) }?;
                Wait::Fd(fd)
            }
            None => Wait::Nap(reader),
        };
        Ok(AsyncReader { wait, streak: 0, nap: None })
    }

    /// The reader.
    pub fn get_ref(&self) -> &S {
        match &self.wait {
            Wait::Fd(fd) => &fd.get_ref().source,
            Wait::Nap(source) => source,
        }
    }

    /// The reader, to read it directly, with its own API (reading never blocks; do not
    /// call its blocking `wait` or `poll` on a runtime thread).
    pub fn get_mut(&mut self) -> &mut S {
        match &mut self.wait {
            Wait::Fd(fd) => &mut fd.get_mut().source,
            Wait::Nap(source) => source,
        }
    }

    /// Deregisters the descriptor and gives the reader back.
    pub fn into_inner(self) -> S {
        match self.wait {
            Wait::Fd(fd) => fd.into_inner().source,
            Wait::Nap(source) => source,
        }
    }

    /// Waits until records may be ready: returns at once if the reader has records
    /// now, else when its doorbell rings (per the reader's wakeup policy). Then read with
    /// [`get_mut`](Self::get_mut) (zero-copy), or use [`consume`](Self::consume).
    ///
    /// For a channel reader, which has no doorbell, it returns after a 1 ms nap: records
    /// may or may not be there.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: it reads no record. Dropped before it completes, it
    /// leaves the reader armed (its wait announced), which the next read undoes, and any
    /// wakeup received stays recorded for the next call.
    pub async fn readable(&mut self) -> io::Result<()> {
        match &mut self.wait {
            Wait::Fd(fd) => loop {
                if !fd.get_mut().source.arm()? {
                    return Ok(());
                }
                let mut guard = fd.readable().await?;
                // Before arming again: a wakeup after this is kept for the next await.
                guard.clear_ready();
            },
            Wait::Nap(source) => {
                if source.arm()? {
                    ::tokio::time::sleep(NAP).await;
                }
                Ok(())
            }
        }
    }

    /// Waits for records and calls `f` with every one available then, in place (the
    /// reader's zero-copy read); returns how many `f` saw (at least one). Stops at the
    /// first error of `f`, as the reader's `consume` does.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: records are read only after the last await, in one
    /// synchronous call that then returns. If it is dropped before it completes (for
    /// instance in a `tokio::select!` whose other branch finished first), `f` saw no
    /// record and every record is still in the reader.
    pub async fn consume<F, R>(&mut self, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(S::Record<'_>) -> R,
        R: crate::callback::Outcome,
    {
        loop {
            let n = self.get_mut().read(usize::MAX, &mut f)?;
            if n > 0 {
                return Ok(n);
            }
            self.readable().await?;
        }
    }

    /// One step of waiting, for a stream: `Ready(Ok)` when records may be ready (the
    /// reader said so when armed, its descriptor was readable, or its nap ended);
    /// `Pending` with the waker registered otherwise.
    pub(super) fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.wait {
            Wait::Fd(fd) => {
                match fd.get_mut().source.arm() {
                    Ok(true) => {}
                    Ok(false) => return Poll::Ready(Ok(())),
                    Err(e) => return Poll::Ready(Err(e)),
                }
                match fd.poll_read_ready(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Ok(mut guard)) => {
                        guard.clear_ready();
                        Poll::Ready(Ok(()))
                    }
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                }
            }
            Wait::Nap(_) => {
                let nap = self.nap.get_or_insert_with(|| Box::pin(::tokio::time::sleep(NAP)));
                match nap.as_mut().poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(()) => {
                        self.nap = None;
                        Poll::Ready(Ok(()))
                    }
                }
            }
        }
    }
}
