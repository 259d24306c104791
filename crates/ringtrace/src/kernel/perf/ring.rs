//! The two ring readers: forward (the kernel respects the reader's tail) and backward
//! (a flight recorder the kernel overwrites).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

use super::event::pause_output;
use super::map::Mapping;
use super::record::PerfRecord;
use super::walk::{backward, forward};
use crate::callback::Outcome;
use crate::error::{ConsumeError, KernelError};

/// A reader's own handle on the event: a duplicate of its file descriptor, so the ring
/// does not borrow the [`PerfEvent`](super::PerfEvent).
fn own_fd(event: &impl AsFd) -> Result<OwnedFd, KernelError> {
    event.as_fd().try_clone_to_owned().map_err(KernelError::Dup)
}

/// A perf event's ring mapped writable: the kernel writes records forward and never
/// overwrites what [`read`](Self::read) has not consumed; when the ring is full it drops
/// new records and later writes a `PERF_RECORD_LOST` record saying how many.
///
/// ```
/// use ringtrace::kernel::perf::{ForwardRing, PerfEvent, Software};
/// use std::convert::Infallible;
///
/// let Ok(event) = PerfEvent::software(Software::PageFaults).sample_period(1).open() else {
///     return Ok(()); // perf_event_open not permitted here
/// };
/// let mut ring = ForwardRing::new(&event, 4)?;
/// let mem = vec![1u8; 1 << 20]; // page faults
/// let mut n = 0;
/// ring.read(|_rec| {
///     n += 1;
///     Ok::<(), Infallible>(())
/// })?;
/// assert!(mem[4096] == 1 && n > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ForwardRing {
    fd: OwnedFd,
    map: Mapping,
    scratch: Vec<u8>,
    lost: u64,
}

impl ForwardRing {
    /// Maps the ring of `event` (opened without [`backward`](super::EventBuilder::backward)):
    /// one metadata page and `data_pages` data pages, a power of two from 1 up. An event
    /// has one ring: map it once.
    pub fn new(event: &impl AsFd, data_pages: usize) -> Result<ForwardRing, KernelError> {
        let fd = own_fd(event)?;
        let map = Mapping::new(fd.as_fd(), data_pages, true)?;
        Ok(ForwardRing { fd, map, scratch: Vec::new(), lost: 0 })
    }

    /// Size of the data area in bytes.
    pub fn capacity(&self) -> usize {
        self.map.data_len()
    }

    /// Records the kernel dropped because the ring was full, summed over the
    /// `PERF_RECORD_LOST` records read so far.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Bytes written and not read yet (`data_head - data_tail`).
    pub fn pending_bytes(&self) -> u64 {
        self.map.head().wrapping_sub(self.map.tail())
    }

    /// Delivers every record from `data_tail` to `data_head`, oldest first, then stores
    /// the new `data_tail` (once per call, after a full fence), which frees their space
    /// for the kernel. `PERF_RECORD_LOST` records are delivered too, and their counts
    /// added to [`lost`](Self::lost). Returns the number of records delivered.
    ///
    /// The record lent to `f` is valid for that call only. If `f` fails, the records up
    /// to and including the one it failed on count as read. On a [`KernelError`] (a corrupt
    /// header, inconsistent positions) nothing after the error can be decoded, so the
    /// tail skips to the head: the records there are dropped and the ring keeps working.
    pub fn read<F, R>(&mut self, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(PerfRecord<'_>) -> R,
        R: Outcome,
    {
        let head = self.map.head();
        let start = self.map.tail();
        let size = self.capacity() as u64;
        if head.wrapping_sub(start) > size && start.wrapping_sub(head) <= size {
            return Err(KernelError::Direction {
                ring: "ForwardRing",
                head,
                moved: "backward",
                expected: "forward",
                backward: false,
            }
            .into());
        }
        let mut tail = start;
        let lost = &mut self.lost;
        let r = forward(&self.map.data(), &mut tail, head, &mut self.scratch, |rec| {
            if let Some(n) = rec.lost() {
                *lost = lost.saturating_add(n);
            }
            f(rec).into_result()
        });
        if let Err(ConsumeError::Kernel(_)) = r {
            tail = head;
        }
        if tail != start {
            self.map.store_tail(tail);
        }
        r
    }

    /// Waits until the kernel signals new records (every
    /// [`wakeup_events`](super::EventBuilder::wakeup_events) samples, or when the ring is
    /// half full by default), or the measured task exits, or `timeout` passes (`None`:
    /// no limit). Returns whether it was signalled. Records below the wakeup threshold do
    /// not signal: [`read`](Self::read) whatever the answer when that matters.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let deadline = timeout.map(|t| Instant::now().checked_add(t));
        loop {
            let left = match deadline {
                None | Some(None) => None,
                Some(Some(d)) => {
                    Some(Timespec::try_from(d.saturating_duration_since(Instant::now())).map_err(|_| {
                        io::Error::new(io::ErrorKind::InvalidInput, "wait timeout too large for poll(2)")
                    })?)
                }
            };
            let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
            match rustix::event::poll(&mut fds, left.as_ref()) {
                Ok(n) => return Ok(n > 0),
                // A signal: poll again for the time left.
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl AsFd for ForwardRing {
    /// The ring's own duplicate of the event's descriptor: readable (`POLLIN`) when the
    /// kernel signals new records, as [`wait`](ForwardRing::wait) waits for. For an event
    /// loop (edge-triggered epoll is fine: the kernel wakes its waiters on every signal).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A perf event's ring mapped read-only, for an event opened with
/// [`backward(true)`](super::EventBuilder::backward): the kernel writes each record just
/// below the previous one and overwrites the oldest without limit, so the ring always
/// holds the newest records that fit (a flight recorder), and `data_head` is always the
/// start of the newest one.
///
/// An event opened without `backward(true)` cannot be read this way (its oldest record
/// cannot be found once the ring wrapped): its `data_head` moves up instead of down,
/// which [`read`](Self::read) reports as [`KernelError::Direction`] as soon as the kernel
/// wrote a record.
///
/// ```
/// use ringtrace::kernel::perf::{BackwardRing, PerfEvent, Sample, Software, SAMPLE_TIME};
/// use std::convert::Infallible;
///
/// let Ok(event) = PerfEvent::software(Software::PageFaults)
///     .sample_period(1)
///     .sample_type(SAMPLE_TIME)
///     .backward(true)
///     .open()
/// else {
///     return Ok(()); // perf_event_open not permitted here
/// };
/// let mut ring = BackwardRing::new(&event, 1)?;
/// for _ in 0..10 {
///     drop(std::hint::black_box(vec![1u8; 1 << 20])); // page faults, many times a 4 KiB ring
/// }
/// let mut times = Vec::new();
/// ring.read(|rec| {
///     times.extend(Sample::parse(&rec, SAMPLE_TIME).and_then(|s| s.time));
///     Ok::<(), Infallible>(())
/// })?;
/// assert!(times.windows(2).all(|w| w[0] >= w[1])); // newest first
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct BackwardRing {
    fd: OwnedFd,
    map: Mapping,
    scratch: Vec<u8>,
    last_head: Option<u64>,
}

impl BackwardRing {
    /// Maps the ring of `event`, which must have been opened with
    /// [`backward(true)`](super::EventBuilder::backward), read-only: one metadata page and
    /// `data_pages` data pages, a power of two from 1 up. An event has one ring: map it
    /// once.
    pub fn new(event: &impl AsFd, data_pages: usize) -> Result<BackwardRing, KernelError> {
        let fd = own_fd(event)?;
        let map = Mapping::new(fd.as_fd(), data_pages, false)?;
        let ring = BackwardRing { fd, map, scratch: Vec::new(), last_head: None };
        ring.head()?;
        Ok(ring)
    }

    /// Size of the data area in bytes.
    pub fn capacity(&self) -> usize {
        self.map.data_len()
    }

    /// Bytes the kernel has written into the ring since it was created (`-data_head`),
    /// overwritten ones included.
    pub fn written(&self) -> u64 {
        self.map.head().wrapping_neg()
    }

    /// `data_head`, checked to have moved down from 0.
    fn head(&self) -> Result<u64, KernelError> {
        let head = self.map.head();
        if (head as i64) > 0 {
            return Err(KernelError::Direction {
                ring: "BackwardRing",
                head,
                moved: "forward",
                expected: "backward",
                backward: true,
            });
        }
        Ok(head)
    }

    /// Pauses the kernel's output into the ring (`PERF_EVENT_IOC_PAUSE_OUTPUT`) until the
    /// guard is dropped or [`resume`](PausedRing::resume)d. While paused the kernel drops
    /// new records and counts them: after the resume, its next record is preceded by a
    /// `PERF_RECORD_LOST` saying how many (so the newest record of a later read may be
    /// one).
    pub fn pause(&mut self) -> Result<PausedRing<'_>, KernelError> {
        pause_output(self.fd.as_fd(), true)?;
        Ok(PausedRing { ring: self })
    }

    /// The whole ring, newest record first: pauses the output, walks from the newest
    /// record toward older ones over at most one ring size, and resumes (also when `f` or
    /// the walk fails). See [`PausedRing::read`]. Each call delivers everything the ring
    /// holds, including records an earlier call delivered; [`read_new`](Self::read_new)
    /// delivers only newer ones.
    pub fn read<F, R>(&mut self, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(PerfRecord<'_>) -> R,
        R: Outcome,
    {
        self.paused_walk(false, move |r| f(r).into_result())
    }

    /// The records written since the last successful read ([`read`](Self::read) or
    /// `read_new`), newest first; everything (as `read`) if there was none. See
    /// [`PausedRing::read_new`].
    pub fn read_new<F, R>(&mut self, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(PerfRecord<'_>) -> R,
        R: Outcome,
    {
        self.paused_walk(true, move |r| f(r).into_result())
    }

    /// For an event loop waiting on the event's descriptor: whether it is safe to wait
    /// now. `Ok(true)`: the kernel wrote nothing since the last successful read (or,
    /// before any, nothing at all): wait for its next wakeup (per
    /// [`wakeup_events`](super::EventBuilder::wakeup_events) or the watermark, as
    /// [`ForwardRing::wait`]). `Ok(false)`: there are records [`read_new`](Self::read_new)
    /// has not delivered. A backward ring has no consumer position to publish, so this
    /// only looks; the `Result` is that of every reader's `arm`.
    pub fn arm(&mut self) -> io::Result<bool> {
        Ok(self.map.head() == self.last_head.unwrap_or(0))
    }

    /// Pause, walk (everything, or only what is new), resume.
    fn paused_walk<E, F>(&mut self, only_new: bool, f: F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(PerfRecord<'_>) -> Result<(), E>,
    {
        let mut p = self.pause()?;
        let n = p.walk(only_new, f)?;
        p.resume()?;
        Ok(n)
    }
}

impl AsFd for BackwardRing {
    /// The ring's own duplicate of the event's descriptor: readable when the kernel
    /// signals new records (see [`arm`](BackwardRing::arm)).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A [`BackwardRing`] whose output is paused: the kernel writes nothing into it (records
/// it would write are counted as lost) until this guard is dropped or
/// [`resume`](Self::resume)d.
///
/// Pausing stops new writes; a write already under way on another CPU when the pause
/// began (possible for an event on another CPU than the reader's, not for one measuring
/// the reader's own thread) may still finish during the walk, as in the kernel's own
/// `perf record --overwrite`. Its bytes are treated as untrusted like all others.
#[derive(Debug)]
#[must_use = "the output resumes when this guard is dropped"]
pub struct PausedRing<'a> {
    ring: &'a mut BackwardRing,
}

impl PausedRing<'_> {
    /// `data_head`: the position of the newest record (the kernel counts it down from 0).
    pub fn head(&self) -> Result<u64, KernelError> {
        self.ring.head()
    }

    /// Delivers the records from the newest toward the oldest still whole, over at most
    /// one ring size: stops at a zero-size header (space never written) or at the first
    /// record that would not fit in what is left of one ring size (the oldest, partly
    /// overwritten). Returns the number delivered. Repeated reads deliver the same
    /// records again, plus any written in between.
    pub fn read<F, R>(&mut self, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(PerfRecord<'_>) -> R,
        R: Outcome,
    {
        self.walk(false, move |r| f(r).into_result())
    }

    /// As [`read`](Self::read), but stops at the newest record the last successful read
    /// delivered: delivers only records written since (all of them when more than the
    /// ring's size was written since, or when there was no read before).
    pub fn read_new<F, R>(&mut self, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(PerfRecord<'_>) -> R,
        R: Outcome,
    {
        self.walk(true, move |r| f(r).into_result())
    }

    fn walk<E, F>(&mut self, only_new: bool, f: F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(PerfRecord<'_>) -> Result<(), E>,
    {
        let ring = &mut *self.ring;
        let head = ring.head()?;
        let size = ring.capacity() as u64;
        // The kernel counts data_head down: the bytes written since the last read are
        // last_head - head.
        let limit = match ring.last_head {
            Some(last) if only_new => last.wrapping_sub(head).min(size),
            _ => size,
        };
        let n = backward(&ring.map.data(), head, limit, &mut ring.scratch, f)?;
        ring.last_head = Some(head);
        Ok(n)
    }

    /// Resumes the kernel's output, reporting an error (dropping the guard resumes too,
    /// ignoring errors).
    pub fn resume(self) -> Result<(), KernelError> {
        // Not dropped: the drop would resume a second time.
        let this = std::mem::ManuallyDrop::new(self);
        pause_output(this.ring.fd.as_fd(), false)
    }
}

impl Drop for PausedRing<'_> {
    fn drop(&mut self) {
        let _ = pause_output(self.ring.fd.as_fd(), false);
    }
}
