//! [`Source`] for a [`ChannelReader`], which has no doorbell: its async form looks again
//! every millisecond (the channel's own design; see [`ChannelReader::poll`]).

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

/// No descriptor: a channel is one ring per producer, with no single doorbell. Its
/// blocking [`poll`](ChannelReader::poll) naps 1 ms between looks (as LTTng's consumer
/// daemon reads its channels on a timer), and its async form does the same with
/// `tokio::time::sleep`, on the runtime's timer.
impl<M: Mode, C: Clock> Source for ChannelReader<M, C> {
    type Record<'a> = ChannelRecord<'a>;
    type Item = ChannelItem;

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn arm(&mut self) -> io::Result<bool> {
        Ok(true)
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
