//! [`Source`] for the perf event rings: [`ForwardRing`] (records taken one at a time)
//! and [`BackwardRing`] (a flight recorder, read in one paused walk).

use std::convert::Infallible;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use super::items::PerfItem;
use super::source::{counted, finish, sealed::Sealed, take_one, Source};
use crate::callback::Outcome;
use crate::error::ConsumeError;
use crate::kernel::perf::{BackwardRing, ForwardRing, PerfRecord};

impl Sealed for ForwardRing {}

/// The event's descriptor, which the kernel makes readable every
/// [`wakeup_events`](crate::kernel::perf::EventBuilder::wakeup_events) records (or at
/// the watermark, half the ring by default), as [`ForwardRing::wait`] says: records
/// below that threshold wait for the next wakeup. Arming only looks whether records are
/// pending: the kernel does not need the reader to announce its wait.
impl Source for ForwardRing {
    type Record<'a> = PerfRecord<'a>;
    type Item = PerfItem;

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }

    fn arm(&mut self) -> io::Result<bool> {
        Ok(self.pending_bytes() == 0)
    }

    fn read<F, R>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(PerfRecord<'_>) -> R,
        R: Outcome,
    {
        if max == 0 {
            return Ok(0);
        }
        // The ring's tail moves past the record the callback fails on, and no further.
        let mut n = 0;
        let result = ForwardRing::read(self, |rec| counted(&mut n, max, f(rec).into_result()));
        finish(result, n)
    }

    fn take(&mut self) -> Result<Option<PerfItem>, ConsumeError<Infallible>> {
        take_one(self, |rec| PerfItem::new(&rec))
    }
}

impl Sealed for BackwardRing {}

/// The event's descriptor (woken as for a [`ForwardRing`]). The kernel overwrites the
/// ring without waiting for the reader, so records cannot be taken one at a time: each
/// read is one paused walk over everything written since the last
/// ([`BackwardRing::read_new`]), newest first, and a stream's item is that whole batch.
impl Source for BackwardRing {
    type Record<'a> = PerfRecord<'a>;
    type Item = Vec<PerfItem>;

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }

    fn arm(&mut self) -> io::Result<bool> {
        BackwardRing::arm(self)
    }

    fn read<F, R>(&mut self, max: usize, f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(PerfRecord<'_>) -> R,
        R: Outcome,
    {
        // Nothing new: no pause (the kernel drops what it writes while paused).
        if max == 0 || BackwardRing::arm(self)? {
            return Ok(0);
        }
        self.read_new(f)
    }

    fn take(&mut self) -> Result<Option<Vec<PerfItem>>, ConsumeError<Infallible>> {
        if BackwardRing::arm(self)? {
            return Ok(None);
        }
        let mut batch = Vec::new();
        self.read_new(|rec| batch.push(PerfItem::new(&rec)))?;
        Ok(Some(batch).filter(|b| !b.is_empty()))
    }
}
