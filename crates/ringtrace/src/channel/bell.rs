//! A channel's doorbell, rung on the protocol of [`crate::wait::flag`] (the ring's
//! no-lost-wakeup argument, one heavy barrier per sleep for any number of rings).
//!
//! * A private channel: a flag on the heap and one eventfd for all its producers'
//!   rings. Producers commit into their ring without its own wakeup (nobody sleeps on a
//!   lane's ring) and then ring this bell if the reader sleeps.
//! * A channel file of version 2: the flag and a futex word in the file's bell line
//!   ([`crate::format::channel`]), so that producers in any process can ring it. They
//!   use the symmetric barrier (`fence(SeqCst)`): the reader's heavy barrier,
//!   membarrier(2) `PRIVATE_EXPEDITED`, reaches only its own process's threads (as for
//!   a ring shared between processes, `Region::cross_process`). They still commit with
//!   the ring's own wakeup too: a slot's ring may have a consumer of its own
//!   ([`Channel::slot_ring`](crate::Channel::slot_ring)) asleep on it.
//!
//! A version 1 channel file has no bell line: its reader polls (see
//! [`ChannelReader::poll`](crate::channel::ChannelReader::poll)).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::{eventfd, EventfdFlags};

use crate::barrier;
use crate::config::Wakeup;
use crate::region::mmap::BellPage;
use crate::sync::AtomicU32;
use crate::wait::doorbell::{Bell, BellToken};
use crate::wait::flag::WaitFlag;

pub(crate) struct ChannelBell {
    kind: Kind,
    /// [`barrier::init`]'s answer for a private channel (false for a file's), at hand
    /// for the commit path.
    asymmetric: bool,
}

enum Kind {
    Private {
        flag: AtomicU32,
        eventfd: OwnedFd,
    },
    /// The file's header page, holding the bell line.
    File(BellPage),
}

impl ChannelBell {
    /// A private channel's bell.
    pub(crate) fn new() -> io::Result<Self> {
        let eventfd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(ChannelBell { kind: Kind::Private { flag: AtomicU32::new(0), eventfd }, asymmetric: barrier::init() })
    }

    /// The bell line of the channel file `fd` (version 2, its header checked).
    pub(crate) fn file(fd: BorrowedFd<'_>) -> io::Result<Self> {
        Ok(ChannelBell { kind: Kind::File(BellPage::map(fd)?), asymmetric: false })
    }

    /// Whether this is a channel file's bell (its producers may be other processes).
    #[inline(always)]
    pub(crate) fn is_file(&self) -> bool {
        matches!(self.kind, Kind::File(_))
    }

    #[inline(always)]
    fn parts(&self) -> (WaitFlag<'_>, Bell<'_>) {
        match &self.kind {
            Kind::Private { flag, eventfd } => (WaitFlag::new(flag), Bell::Eventfd(eventfd.as_fd())),
            Kind::File(page) => {
                let (flag, futex) = page.words();
                (WaitFlag::new(flag), Bell::Futex(futex))
            }
        }
    }

    /// A producer committed (its header stored with Release) or exited: wakes the
    /// reader if it sleeps and `wakeup` allows (a file's: `FUTEX_WAKE`, after adding
    /// one to the futex word, [`Bell::ring`]).
    #[inline(always)]
    pub(crate) fn ring(&self, wakeup: Wakeup) {
        if wakeup == Wakeup::NoWakeup {
            return;
        }
        let (flag, bell) = self.parts();
        if flag.should_ring(self.asymmetric) {
            bell.ring();
        }
    }

    /// The reader resets the doorbell (reads the futex word: its token), arms, and
    /// looks with `look` (true: something to read). `Ok(Some(token))`: sleep with
    /// [`Self::sleep`], then [`Self::disarm`]. `Ok(None)`: read instead (disarmed).
    pub(crate) fn arm(&self, look: impl FnOnce() -> bool) -> io::Result<Option<BellToken>> {
        let (flag, bell) = self.parts();
        let token = bell.token()?;
        Ok(flag.armed_look(look)?.then_some(token))
    }

    /// Sleeps until rung, `timeout` passes or a signal arrives (a futex word another
    /// process changed ends it early: the caller's deadline bounds its waits).
    pub(crate) fn sleep(&self, token: BellToken, timeout: Option<Duration>) -> io::Result<()> {
        self.parts().1.sleep(token, timeout)
    }

    pub(crate) fn disarm(&self) {
        self.parts().0.disarm();
    }

    /// A private channel's eventfd, for an event loop (readable once rung after
    /// [`Self::arm`]); a channel file's futex cannot go in one: `None`.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.kind {
            Kind::Private { eventfd, .. } => Some(eventfd.as_fd()),
            Kind::File(_) => None,
        }
    }
}
