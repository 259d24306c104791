//! [`Source`] for a [`ChannelReader`] (its reading is its
//! [`Reader`](crate::source::Reader)): a private channel's doorbell is an eventfd, which
//! the runtime waits on; a channel file's reader looks again every millisecond (its
//! doorbell, a futex word in the file, cannot be waited on in an event loop).

use std::io;
use std::os::fd::BorrowedFd;

use super::source::Source;
use crate::clock::Clock;
use crate::config::Mode;
use crate::ChannelReader;

/// A private channel: its doorbell's eventfd, and a recheck when records wait for the
/// slack (they are due then, with no commit to ring). A channel file: no descriptor.
/// Its producers (in any process) ring a futex word in the file's bell line, on which
/// the blocking [`poll`](ChannelReader::poll) sleeps; a futex cannot go in an event
/// loop, so the async form looks every millisecond with `tokio::time::sleep`, as LTTng's
/// consumer daemon reads its channels on a timer (the socket doorbell with which a
/// ring shared between processes wakes an event loop is not built for channel files).
impl<M: Mode, C: Clock> Source for ChannelReader<M, C> {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.bell_fd()
    }

    fn arm(&mut self) -> io::Result<bool> {
        if self.bell_fd().is_none() {
            return Ok(true);
        }
        Ok(ChannelReader::arm(self)?.is_some())
    }

    fn recheck(&self) -> Option<std::time::Duration> {
        self.held_back()
    }
}
