//! A private channel's doorbell: one eventfd for all its producers' rings, rung on the
//! protocol of [`crate::wait::flag`] (the ring's no-lost-wakeup argument, one heavy
//! barrier per sleep for any number of rings).
//!
//! Producers commit into their ring without its own wakeup (nobody sleeps on a lane's
//! ring) and then ring this bell if the reader sleeps. A channel file's producers live
//! in other processes, which cannot reach a process's eventfd: its reader polls
//! instead (see [`ChannelReader::poll`](crate::channel::ChannelReader::poll)).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::{eventfd, EventfdFlags};

use crate::barrier;
use crate::config::Wakeup;
use crate::wait::doorbell::{Bell, BellToken};
use crate::wait::flag::WaitFlag;

pub(crate) struct ChannelBell {
    flag: WaitFlag,
    eventfd: OwnedFd,
    /// [`barrier::init`]'s answer, at hand for the commit path.
    asymmetric: bool,
}

impl ChannelBell {
    pub(crate) fn new() -> io::Result<Self> {
        let eventfd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(ChannelBell { flag: WaitFlag::default(), eventfd, asymmetric: barrier::init() })
    }

    /// A producer committed (its header stored with Release) or exited: wakes the
    /// reader if it sleeps and `wakeup` allows.
    #[inline(always)]
    pub(crate) fn ring(&self, wakeup: Wakeup) {
        if wakeup != Wakeup::NoWakeup && self.flag.should_ring(self.asymmetric) {
            Bell::Eventfd(self.eventfd.as_fd()).ring();
        }
    }

    /// The reader resets the doorbell, arms, and looks with `look` (true: something
    /// to read). `Ok(Some(token))`: sleep with [`Self::sleep`], then [`Self::disarm`].
    /// `Ok(None)`: read instead (disarmed).
    pub(crate) fn arm(&self, look: impl FnOnce() -> bool) -> io::Result<Option<BellToken>> {
        let token = Bell::Eventfd(self.eventfd.as_fd()).token()?;
        Ok(self.flag.armed_look(look)?.then_some(token))
    }

    pub(crate) fn sleep(&self, token: BellToken, timeout: Option<Duration>) -> io::Result<()> {
        Bell::Eventfd(self.eventfd.as_fd()).sleep(token, timeout)
    }

    pub(crate) fn disarm(&self) {
        self.flag.disarm();
    }

    /// The eventfd, for an event loop (readable once rung after [`Self::arm`]).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.eventfd.as_fd()
    }
}
