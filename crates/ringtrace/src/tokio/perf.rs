//! [`Source`] for the perf event rings: [`ForwardRing`] (records taken one at a time)
//! and [`BackwardRing`] (a flight recorder, read in one paused walk); their reading is
//! their [`Reader`](crate::source::Reader).

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use super::source::Source;
use crate::kernel::perf::{BackwardRing, ForwardRing};

/// The event's descriptor, which the kernel makes readable every
/// [`wakeup_events`](crate::kernel::perf::EventBuilder::wakeup_events) records (or at
/// the watermark, half the ring by default), as [`ForwardRing::wait`] says: records
/// below that threshold wait for the next wakeup. Arming only looks whether records are
/// pending: the kernel does not need the reader to announce its wait.
impl Source for ForwardRing {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }

    fn arm(&mut self) -> io::Result<bool> {
        Ok(self.pending_bytes() == 0)
    }
}

/// The event's descriptor (woken as for a [`ForwardRing`]). The kernel overwrites the
/// ring without waiting for the reader, so records cannot be taken one at a time: each
/// read is one paused walk over everything written since the last
/// ([`BackwardRing::read_new`]), newest first, and a stream's item is that whole batch.
impl Source for BackwardRing {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }

    fn arm(&mut self) -> io::Result<bool> {
        BackwardRing::arm(self)
    }
}
