//! Sleeping on a ring's doorbell, and ringing it.
//!
//! A ring private to one process rings an eventfd (which its consumer can also hand to
//! an event loop); a ring shared between processes rings a futex on the control block's
//! [`WaitLine::futex`](crate::format::control::WaitLine) word, which any process can
//! wake. The consumer reads the doorbell ([`Bell::token`]) before it arms its wait, so a ring
//! between that read and its sleep is not missed: the eventfd then stays readable, the
//! futex word then differs from the token and `FUTEX_WAIT` returns at once.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::thread::futex;

use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Release};

/// What a consumer read from the doorbell before it armed its wait: the futex value
/// (futex rings) or nothing (the eventfd was reset).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BellToken(pub(crate) u32);

/// The doorbell of one ring: its futex word, or its eventfd.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Bell<'a> {
    Futex(&'a AtomicU32),
    Eventfd(BorrowedFd<'a>),
}

fn timespec(t: Duration) -> Timespec {
    Timespec { tv_sec: t.as_secs().min(i64::MAX as u64) as _, tv_nsec: t.subsec_nanos() as _ }
}

impl Bell<'_> {
    /// Resets the doorbell before the consumer arms its wait: reads the eventfd's
    /// counter, or the futex word's value.
    pub(crate) fn token(self) -> io::Result<BellToken> {
        match self {
            // Acquire: pairs with the Release `fetch_add` in `ring`: a producer that
            // rang before this load is seen here, and then `sleep` sleeps only if no
            // producer rang since.
            Bell::Futex(word) => Ok(BellToken(word.load(Acquire))),
            Bell::Eventfd(fd) => {
                let mut buf = [0u8; 8];
                match rustix::io::read(fd, &mut buf) {
                    Ok(_) | Err(rustix::io::Errno::AGAIN) => Ok(BellToken(0)),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Sleeps until the doorbell rings (after `token` was read), `timeout` passes or a
    /// signal arrives.
    pub(crate) fn sleep(self, token: BellToken, timeout: Option<Duration>) -> io::Result<()> {
        let ts = timeout.map(timespec);
        match self {
            // Not FUTEX_PRIVATE: the word is shared with other processes. The kernel
            // sleeps only if the word still holds `token`, atomically with queueing us.
            Bell::Futex(word) => match futex::wait(word, futex::Flags::empty(), token.0, ts.as_ref()) {
                Ok(()) | Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR | rustix::io::Errno::TIMEDOUT) => {
                    Ok(())
                }
                Err(e) => Err(e.into()),
            },
            Bell::Eventfd(fd) => {
                let mut fds = [PollFd::new(&fd, PollFlags::IN)];
                match poll(&mut fds, ts.as_ref()) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Rings: wakes a consumer asleep on the doorbell (or makes its next sleep return).
    pub(crate) fn ring(self) {
        match self {
            Bell::Futex(word) => {
                // Release: pairs with the Acquire load in `token`. Then FUTEX_WAKE: a
                // consumer that read the old value and went to sleep is woken; one that
                // has not slept yet finds the value changed and does not.
                word.fetch_add(1, Release);
                let _ = futex::wake(word, futex::Flags::empty(), 1);
            }
            // A full counter (2^64 - 2 unread wakeups) cannot happen: the consumer
            // resets it before every sleep. Any error leaves the consumer to its
            // timeout; there is no caller to report it to on the commit path.
            Bell::Eventfd(fd) => {
                let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
            }
        }
    }
}

/// Rings a futex doorbell that several threads or processes may sleep on (the
/// producers' `room_futex`): adds one, then wakes every waiter.
pub(crate) fn ring_all(word: &AtomicU32) {
    // Release: pairs with the Acquire load of the token (`Core::room_token`): a waiter
    // that read the old value sleeps in FUTEX_WAIT only while the word still holds it,
    // atomically with queueing, so it is woken below or does not sleep.
    word.fetch_add(1, Release);
    // `i32::MAX`: the kernel reads the count as an int (`u32::MAX` would wake one).
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}
