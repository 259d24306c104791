//! How an async reader waits ([`Waiter`]): on its doorbell registered with the tokio
//! runtime's reactor ([`AsyncFd`]), or napping on the runtime's timer for a reader with
//! none. A reader that needs to look now and then without a wakeup (a ring shared
//! between processes, whose producer processes may die; [`Source::recheck`]) also has
//! a timer beside its descriptor.

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

/// How long a reader with no doorbell (a channel's) sleeps between two looks: the nap of
/// the channel's blocking `poll`.
pub(super) const NAP: Duration = Duration::from_millis(1);

/// A reader and how it waits.
pub(super) enum Waiter<S> {
    /// On its descriptor, registered with the reactor; and the recheck timer a stream
    /// is waiting for, if the reader asks for one ([`Source::recheck`]).
    Fd(AsyncFd<Registered<S>>, Option<Pin<Box<Sleep>>>),
    /// By napping (no descriptor); the nap a stream is waiting for.
    Nap(S, Option<Pin<Box<Sleep>>>),
}

/// A reader with the descriptor the reactor watches: a duplicate of the reader's own
/// (the same open file, so the same wakeups), owned here so that it stays open and the
/// same for as long as it is registered, whatever is done with the reader through
/// `AsyncReader::get_mut`.
pub(super) struct Registered<S> {
    source: S,
    fd: OwnedFd,
}

impl<S> AsRawFd for Registered<S> {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl<S: Source> Waiter<S> {
    /// Registers `reader`'s descriptor with the current runtime's reactor, if it has one.
    pub(super) fn new(reader: S) -> io::Result<Waiter<S>> {
        let Some(fd) = reader.wait_fd().map(|fd| fd.try_clone_to_owned()).transpose()? else {
            return Ok(Waiter::Nap(reader, None));
        };
        let registered = Registered { source: reader, fd };
        // SAFETY: `as_raw_fd` of a `Registered` is that of its `fd`, an `OwnedFd` in a
        // private field that nothing replaces or closes while it is registered: it is
        // closed only when the `Registered` is dropped, which `AsyncFd` does after
        // deregistering it (on drop and in `into_inner`).
        let fd = unsafe { AsyncFd::register_with_interest(registered, Interest::READABLE) }?;
        Ok(Waiter::Fd(fd, None))
    }

    /// Whether it waits on a descriptor.
    pub(super) fn has_fd(&self) -> bool {
        matches!(self, Waiter::Fd(..))
    }

    pub(super) fn get_ref(&self) -> &S {
        match self {
            Waiter::Fd(fd, _) => &fd.get_ref().source,
            Waiter::Nap(source, _) => source,
        }
    }

    pub(super) fn get_mut(&mut self) -> &mut S {
        match self {
            Waiter::Fd(fd, _) => &mut fd.get_mut().source,
            Waiter::Nap(source, _) => source,
        }
    }

    pub(super) fn into_inner(self) -> S {
        match self {
            Waiter::Fd(fd, _) => fd.into_inner().source,
            Waiter::Nap(source, _) => source,
        }
    }

    /// Until records may be ready (see `AsyncReader::readable`).
    pub(super) async fn readable(&mut self) -> io::Result<()> {
        match self {
            Waiter::Fd(fd, _) => loop {
                let source = &mut fd.get_mut().source;
                // Disconnection looked at after the wait is announced: a producer that
                // leaves later rings the doorbell.
                if !source.arm()? || source.disconnected() {
                    return Ok(());
                }
                let Some(recheck) = source.recheck() else {
                    let mut guard = fd.readable().await?;
                    // Before arming again: a wakeup after this is kept for the next await.
                    guard.clear_ready();
                    continue;
                };
                match ::tokio::time::timeout(recheck, fd.readable()).await {
                    Ok(guard) => guard?.clear_ready(),
                    Err(_elapsed) => {
                        // No wakeup for a while: look at what the doorbell cannot say.
                        let source = &mut fd.get_mut().source;
                        source.on_recheck();
                        return Ok(());
                    }
                }
            },
            Waiter::Nap(source, _) => {
                if source.arm()? {
                    ::tokio::time::sleep(NAP).await;
                }
                Ok(())
            }
        }
    }

    /// One step of waiting, for a stream: `Ready(Ok)` when records may be ready (the
    /// reader said so when armed, its descriptor was readable, or its nap ended);
    /// `Pending` with the waker registered otherwise.
    pub(super) fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Waiter::Fd(fd, timer) => {
                let source = &mut fd.get_mut().source;
                match source.arm() {
                    Ok(true) if !source.disconnected() => {}
                    Ok(_) => return Poll::Ready(Ok(())),
                    Err(e) => return Poll::Ready(Err(e)),
                }
                let recheck = source.recheck();
                match fd.poll_read_ready(cx) {
                    Poll::Pending => {}
                    Poll::Ready(Ok(mut guard)) => {
                        // Before arming again, as in `readable`.
                        guard.clear_ready();
                        *timer = None;
                        return Poll::Ready(Ok(()));
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                }
                let Some(recheck) = recheck else {
                    *timer = None;
                    return Poll::Pending;
                };
                let sleep = timer.get_or_insert_with(|| Box::pin(::tokio::time::sleep(recheck)));
                match sleep.as_mut().poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(()) => {
                        *timer = None;
                        fd.get_mut().source.on_recheck();
                        Poll::Ready(Ok(()))
                    }
                }
            }
            Waiter::Nap(_, nap) => {
                let sleep = nap.get_or_insert_with(|| Box::pin(::tokio::time::sleep(NAP)));
                match sleep.as_mut().poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(()) => {
                        *nap = None;
                        Poll::Ready(Ok(()))
                    }
                }
            }
        }
    }
}

/// Registers `fd`, owned by the returned `AsyncFd`, with the current runtime's reactor
/// for read readiness (an async producer's room socket).
pub(super) fn register_fd(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    register_fd_for(fd, Interest::READABLE)
}

/// [`register_fd`] for `interest` (a BPF user ring buffer map's descriptor: writable).
pub(super) fn register_fd_for(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the `AsyncFd` owns `fd` and closes it only when dropped, after
    // deregistering it; nothing else holds it, so it stays open and the same
    // descriptor for as long as it is registered.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(|e| e.into_parts().1)
}
