//! [`AsyncUserRingBuf`]: a BPF user ring buffer producer whose reserve waits for the
//! BPF program to drain room, on a tokio runtime, without blocking its thread.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;

use super::wait::register_fd_for;
use crate::kernel::bpf::{UserReserveError, UserRingBuf, UserSample};

/// How long a wait for the kernel's wakeup lasts before the reserve looks again: a
/// program that drains with `BPF_RB_NO_WAKEUP` wakes no producer (as
/// [`UserRingBuf::reserve_blocking`] looks again).
const LOOK_AGAIN: Duration = Duration::from_millis(10);

/// A [`UserRingBuf`] whose [`reserve`](Self::reserve) awaits room: the map's
/// descriptor (a duplicate) registered with the runtime's reactor for writability,
/// which the kernel signals (`EPOLLOUT`) after a drain that took samples. The reactor
/// registers it edge-triggered and keeps a readiness until it is cleared; a readiness
/// is cleared only after an attempt that found no room, and only the readiness seen
/// before that attempt (tokio's `clear_ready`), so a drain between the attempt and the
/// wait is not missed.
///
/// Cancel safe: a reserve dropped while it waits has reserved nothing. Give up after a
/// while with `tokio::time::timeout`.
///
/// ```
/// use ringtrace::kernel::bpf::UserRingBuf;
/// use ringtrace::tokio::AsyncUserRingBuf;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let Some(map) = ringtrace_fixtures::UserRingMap::create(1 << 16).ok() else { return Ok(()) };
/// # let map_fd: std::os::fd::OwnedFd = map.into();
/// let ring = AsyncUserRingBuf::new(UserRingBuf::from_fd(map_fd)?)?;
/// let mut sample = ring.reserve(5).await?;
/// sample.copy_from_slice(b"hello");
/// sample.commit();
/// assert_eq!(ring.get_ref().stats().committed, 1);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AsyncUserRingBuf {
    ring: UserRingBuf,
    fd: AsyncFd<OwnedFd>,
}

impl AsyncUserRingBuf {
    /// Registers `ring`'s descriptor with the current runtime's reactor.
    ///
    /// # Errors
    ///
    /// Duplicating the descriptor, or registering it (outside a runtime: tokio panics).
    pub fn new(ring: UserRingBuf) -> io::Result<AsyncUserRingBuf> {
        let dup = ring.as_fd().try_clone_to_owned()?;
        Ok(AsyncUserRingBuf { ring, fd: register_fd_for(dup, Interest::WRITABLE)? })
    }

    /// [`UserRingBuf::reserve`], awaiting room while the map is full.
    ///
    /// # Errors
    ///
    /// As `reserve`, but never [`UserReserveError::Full`]; waiting on the reactor's
    /// error as [`UserReserveError::Wait`].
    pub async fn reserve(&self, len: usize) -> Result<UserSample<'_>, UserReserveError> {
        // Room now: no reactor.
        match self.ring.reserve(len) {
            Err(UserReserveError::Full { .. }) => {}
            other => return other,
        }
        loop {
            let ready = ::tokio::time::timeout(LOOK_AGAIN, self.fd.writable()).await;
            let guard = match ready {
                Ok(Ok(g)) => Some(g),
                Ok(Err(e)) => return Err(UserReserveError::Wait(e)),
                // No wakeup within the look-again time: try anyway.
                Err(_) => None,
            };
            match self.ring.reserve(len) {
                Err(UserReserveError::Full { .. }) => {
                    if let Some(mut g) = guard {
                        g.clear_ready();
                    }
                }
                other => return other,
            }
        }
    }

    /// [`reserve`](Self::reserve), then copies `data` in and commits it.
    ///
    /// # Errors
    ///
    /// As `reserve`.
    pub async fn write(&self, data: &[u8]) -> Result<(), UserReserveError> {
        let mut s = self.reserve(data.len()).await?;
        s.copy_from_slice(data);
        s.commit();
        Ok(())
    }

    /// The producer.
    pub fn get_ref(&self) -> &UserRingBuf {
        &self.ring
    }

    /// The producer back.
    pub fn into_inner(self) -> UserRingBuf {
        self.ring
    }
}
