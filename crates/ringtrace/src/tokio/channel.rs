//! [`Source`] for a [`ChannelReader`]: a private channel's doorbell is an eventfd, which
//! the runtime waits on; a channel file's reader looks again every millisecond (its
//! doorbell, a futex word in the file, cannot be waited on in an event loop).

use std::convert::Infallible;
use std::io;
use std::os::fd::BorrowedFd;

use super::items::ChannelItem;
use super::source::{counted, finish, sealed::Sealed, take_one, Source};
use crate::callback::Outcome;
use crate::channel::ChannelRecord;
use crate::clock::Clock;
use crate::config::Mode;
use crate::error::ConsumeError;
use crate::ChannelReader;

impl<M: Mode, C: Clock> Sealed for ChannelReader<M, C> {}

/// A private channel: its doorbell's eventfd, and a recheck when records wait for the
/// slack (they are due then, with no commit to ring). A channel file: no descriptor.
/// Its producers (in any process) ring a futex word in the file's bell line, on which
/// the blocking [`poll`](ChannelReader::poll) sleeps; a futex cannot go in an event
/// loop, so the async form looks every millisecond with `tokio::time::sleep`, as LTTng's
/// consumer daemon reads its channels on a timer (the socket doorbell with which a
/// ring shared between processes wakes an event loop is not built for channel files).
impl<M: Mode, C: Clock> Source for ChannelReader<M, C> {
    type Record<'a> = ChannelRecord<'a>;
    type Item = ChannelItem;

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

    fn read<F, R>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(ChannelRecord<'_>) -> R,
        R: Outcome,
    {
        if max == 0 {
            return Ok(0);
        }
        // The reader counts the record its callback fails on as delivered, and keeps
        // the rest staged for the next call.
        let mut n = 0;
        let result = self.consume(|rec| counted(&mut n, max, f(rec).into_result()));
        finish(result, n)
    }

    fn take(&mut self) -> Result<Option<ChannelItem>, ConsumeError<Infallible>> {
        take_one(self, |r| ChannelItem { producer: r.producer, timestamp: r.timestamp, data: r.data.to_vec() })
    }
}
