//! [`OverwriteConsumer`]: follows an overwrite ring, copying records out and checking
//! them (see the crate's `protocol::read`), and counts what producers overwrote before it could read.
//! A [`ReadMark`](crate::recorder::ReadMark) ([`OverwriteConsumer::mark`]) lets it
//! read again from where it was.

mod rewind;

use std::convert::Infallible;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::callback::{BatchBuf, Iter, Outcome};
use crate::config::ProducerKind;
use crate::disconnect;
use crate::error::{ConsumeError, Error};
use crate::format::control::SEEN_CONSUMER;
use crate::owner;
use crate::protocol::capture::{Capture, Parse, Walk};
use crate::protocol::core::Core;
use crate::region::mmap::MmapView;
use crate::shared::Shared;
use crate::sync::Ordering::Relaxed;
use crate::wait::poll::byte_reader_poll;
use crate::wait::sleep::{arm_for_fd, sleep_until_ready};
use crate::wait::DEAD_CHECK;

/// Reads an overwrite ring's records in order while producers overwrite the oldest
/// ones. Each record is copied out and checked before the callback sees it, so a record
/// torn or overwritten while it was read is never delivered; records overwritten before
/// the consumer reached them are counted ([`overwritten_unread`](Self::overwritten_unread)) and the
/// consumer goes on from the oldest record still there.
///
/// ```
/// use ringtrace::{FlightRecorder, Wakeup};
///
/// let ring = FlightRecorder::builder(4096).retire_ahead(0).build()?;
/// let mut consumer = ring.consumer()?;
/// let mut p = ring.producer()?;
/// for i in 0..1000u32 {
///     p.output(&i.to_le_bytes(), Wakeup::Default)?;
/// }
/// let mut got = Vec::new();
/// consumer.consume(|rec| {
///     got.push(u32::from_le_bytes(rec.try_into().unwrap()));
///     Ok::<(), std::convert::Infallible>(())
/// })?;
/// // The newest records, in order; the others were overwritten, and counted.
/// assert_eq!(*got.last().unwrap(), 999);
/// assert_eq!(got.len() as u64 + consumer.overwritten_unread(), 1000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct OverwriteConsumer<K: ProducerKind = crate::config::Mpsc> {
    core: Core<MmapView>,
    /// Next record boundary to read.
    pos: u64,
    /// Committed records before `pos` (read or overwritten).
    passed: u64,
    consumed: u64,
    skipped: u64,
    overwritten_unread: u64,
    cap: Capture,
    /// The records of the last [`iter`](Self::iter) call.
    batch_buf: BatchBuf,
    /// Bytes copied and checked at a time (the builder's `consumer_batch`).
    batch: u64,
    armed: bool,
    shared: Arc<Shared>,
    _static: PhantomData<fn() -> K>,
}

impl<K: ProducerKind> fmt::Debug for OverwriteConsumer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OverwriteConsumer")
            .field("pos", &self.pos)
            .field("consumed", &self.consumed)
            .field("overwritten_unread", &self.overwritten_unread)
            .finish()
    }
}

impl<K: ProducerKind> OverwriteConsumer<K> {
    pub(crate) fn attach(shared: Arc<Shared>) -> Result<Self, Error> {
        let core = shared.core.clone();
        let line = &core.control().consumer.0;
        owner::take(&line.attached).map_err(|pid| Error::ConsumerAttached { pid })?;
        disconnect::mark_seen(&core, SEEN_CONSUMER);
        core.region.forget_socket();
        // Relaxed: handed over through the attach flag (Acquire).
        let (consumed, skipped, overwritten) =
            (line.consumed.load(Relaxed), line.skipped.load(Relaxed), line.overwritten.load(Relaxed));
        Ok(OverwriteConsumer {
            pos: line.pos.load(Relaxed),
            passed: consumed + overwritten,
            consumed,
            skipped,
            overwritten_unread: overwritten,
            cap: Capture::default(),
            batch_buf: BatchBuf::default(),
            batch: shared.batch,
            armed: false,
            core,
            shared,
            _static: PhantomData,
        })
    }

    /// Calls `f` with every record available now, in order (each copied and checked),
    /// and returns how many it saw. Stops at the first error of `f` (that record counts
    /// as consumed).
    ///
    /// [`ConsumeError::Busy`] if producers overwrote 16 copies in a row before they
    /// could be checked; [`ConsumeError::Corrupt`] for a header no producer writes.
    ///
    /// The callback returns `()`, or a `Result` to stop early (see [`Outcome`]).
    pub fn consume<F, R>(&mut self, f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(&[u8]) -> R,
        R: Outcome,
    {
        self.consume_n(usize::MAX, f)
    }

    /// Like [`consume`](Self::consume), but at most `max` records.
    pub fn consume_n<F, R>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(&[u8]) -> R,
        R: Outcome,
    {
        self.consume_up_to(max, &mut move |_, rec| f(rec).into_result())
    }

    /// Like [`consume_n`](Self::consume_n), giving each record with its number: the
    /// committed records before it in the ring's life (read, or overwritten before they
    /// could be). Numbers rise by one from record to record, and jump over the records
    /// producers overwrote first, so a gap says how many were lost, and where. A
    /// record read again after a [`rewind`](Self::rewind) has the number it had.
    ///
    /// ```
    /// use ringtrace::{FlightRecorder, Wakeup};
    ///
    /// let ring = FlightRecorder::builder(4096).retire_ahead(0).build()?;
    /// let mut c = ring.consumer()?;
    /// let mut p = ring.producer()?;
    /// for i in 0..1000u64 {
    ///     p.output(&i.to_le_bytes(), Wakeup::Default)?;
    /// }
    /// // Each record's number is its index among the records written.
    /// c.consume_numbered(usize::MAX, |n, rec| assert_eq!(n.to_le_bytes(), rec))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn consume_numbered<F, R>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(u64, &[u8]) -> R,
        R: Outcome,
    {
        self.consume_up_to(max, &mut move |n, rec| f(n, rec).into_result())
    }

    /// Every record available now, for [`Poll`](crate::wait::poll::Poll).
    fn read_all<F, E>(&mut self, f: &mut F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(&[u8]) -> Result<(), E>,
    {
        self.consume_up_to(usize::MAX, &mut |_, rec| f(rec))
    }

    fn consume_up_to<F, E>(&mut self, max: usize, f: &mut F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(u64, &[u8]) -> Result<(), E>,
    {
        self.disarm();
        let mut cap = std::mem::take(&mut self.cap);
        let result = self.consume_with(&mut cap, max, f);
        self.cap = cap;
        self.publish();
        result
    }

    /// The records available now, in order, copied out and checked (as
    /// [`consume`](Self::consume) delivers them): consumed when this returns.
    ///
    /// ```
    /// use ringtrace::{FlightRecorder, Wakeup};
    ///
    /// let ring = FlightRecorder::new(4096)?;
    /// let mut p = ring.producer()?;
    /// p.output(b"a", Wakeup::Default)?;
    /// p.output(b"b", Wakeup::Default)?;
    /// let mut c = ring.consumer()?;
    /// let newest_first: Vec<&[u8]> = c.iter()?.rev().collect();
    /// assert_eq!(newest_first, [&b"b"[..], &b"a"[..]]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter(&mut self) -> Result<Iter<'_>, ConsumeError<Infallible>> {
        let mut batch = std::mem::take(&mut self.batch_buf);
        batch.clear();
        let result = self.consume(|rec| batch.push(rec));
        self.batch_buf = batch;
        result?;
        Ok(self.batch_buf.iter())
    }

    fn consume_with<F, E>(&mut self, cap: &mut Capture, max: usize, f: &mut F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(u64, &[u8]) -> Result<(), E>,
    {
        let mut n = 0;
        // Bounded: each round either delivers or skips at least one record (and stops
        // at `max`), or ends the call.
        while n < max {
            self.core.capture(self.pos, self.batch, Walk::Consumer, cap).ok_or(ConsumeError::Busy)?;
            if cap.first > self.pos {
                // Overtaken: `first` is the oldest record, and the seqlock said how many
                // committed records lie before it.
                let before = cap.retired_at_first.unwrap_or(self.passed);
                self.overwritten_unread += before.saturating_sub(self.passed);
                self.passed = self.passed.max(before);
                self.pos = cap.first;
            }
            let progress = !cap.found.is_empty();
            for &rec in &cap.found {
                if n >= max {
                    return Ok(n);
                }
                self.pos = rec.end();
                if rec.discarded() {
                    self.skipped += 1;
                    continue;
                }
                n += 1;
                self.consumed += 1;
                self.passed += 1;
                f(self.passed - 1, cap.payload(rec)).map_err(ConsumeError::Callback)?;
            }
            self.pos = self.pos.max(cap.end);
            match cap.stop {
                Parse::Corrupt { pos, header } => return Err(ConsumeError::Corrupt { pos, header }),
                Parse::Unfinished => break,
                Parse::End if !progress => break,
                Parse::End => {}
            }
        }
        Ok(n)
    }

    /// Publishes the read position and counters (statistics; the position is also what
    /// [`WakeupPolicy::HalfRing`](crate::config::WakeupPolicy::HalfRing) measures from).
    fn publish(&self) {
        let line = &self.core.control().consumer.0;
        // Relaxed: statistics with one writer; producers never wait for this consumer.
        line.pos.store(self.pos, Relaxed);
        line.read.store(self.pos, Relaxed);
        line.consumed.store(self.consumed, Relaxed);
        line.skipped.store(self.skipped, Relaxed);
        line.overwritten.store(self.overwritten_unread, Relaxed);
    }

    /// Committed records producers overwrote before this consumer could read them
    /// (over the ring's life): the ring's [`Stats::overwritten_unread`] as this
    /// consumer counted it. With the ring drained, `consumed + overwritten_unread =
    /// committed`.
    ///
    /// [`Stats::overwritten_unread`]: crate::Stats::overwritten_unread
    pub fn overwritten_unread(&self) -> u64 {
        self.overwritten_unread
    }

    /// The read position (bytes since the ring was created).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Whether a record is ready at the read position, or the consumer was overtaken
    /// (the oldest record is past it).
    pub fn ready(&self) -> bool {
        ready_at(&self.core, self.pos)
    }

    /// Sleeps until a record is ready or `timeout` passes; true if one is ready.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        self.publish();
        let core = self.core.clone();
        let at = self.pos;
        // A ring shared between processes: look now and then whether every producer
        // process died (a handle dropped rings the doorbell).
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let slice =
                if core.region.is_futex() { Some(left.map_or(DEAD_CHECK, |l| l.min(DEAD_CHECK))) } else { left };
            let r = sleep_until_ready(&core, at, slice, &mut self.armed, |c| {
                ready_at(c, at) || disconnect::producers_gone(c)
            });
            self.disarm();
            if r? || ready_at(&core, at) {
                return Ok(ready_at(&core, at));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
        }
    }

    /// Prepares to wait on [`as_fd`](AsFd::as_fd), as [`Consumer::arm`](crate::Consumer::arm)
    /// does: publishes the read position, resets the doorbell, announces the wait.
    /// `Ok(true)`: nothing is ready, wait on the fd. `Ok(false)`: a record is ready (or
    /// the consumer was overtaken, or every producer is gone): read first.
    pub fn arm(&mut self) -> io::Result<bool> {
        self.publish();
        let at = self.pos;
        if ready_at(&self.core, at) {
            return Ok(false);
        }
        let core = self.core.clone();
        let armed = arm_for_fd(&core, at, &mut self.armed, |c| ready_at(c, at) || disconnect::producers_gone(c));
        if !matches!(armed, Ok(true)) {
            self.disarm();
        }
        armed
    }

    /// Whether the ring is shared between processes.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // the async readers' recheck
    pub(crate) fn is_shared(&self) -> bool {
        self.core.region.is_futex()
    }

    /// Whether a producer handle attached once and none is left (see
    /// [`Consumer::is_disconnected`](crate::Consumer::is_disconnected)).
    pub fn is_disconnected(&self) -> bool {
        disconnect::producers_gone(&self.core)
    }

    fn disarm(&mut self) {
        if self.armed {
            self.core.disarm(self.pos);
            self.armed = false;
        }
    }
}

byte_reader_poll! {
    /// Consumes what is available; if nothing is, sleeps until a producer wakes it (per
    /// the wakeup policy: by default only [`Wakeup::Force`](crate::Wakeup::Force)) or
    /// `timeout` passes, then consumes.
    impl[K: ProducerKind] OverwriteConsumer<K> { read: read_all, disconnected: is_disconnected }
}

/// A record is ready at `at`, or the consumer there was overtaken (the oldest record is
/// past it; a seqlock that stays busy counts as overtaken, so the caller reads and sees).
fn ready_at(core: &Core<MmapView>, at: u64) -> bool {
    core.ready(at) || core.over_state().is_none_or(|(o, _)| o > at)
}

impl<K: ProducerKind> AsFd for OverwriteConsumer<K> {
    /// The doorbell eventfd (see [`Consumer`](crate::Consumer)'s `as_fd`).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.region.doorbell()
    }
}

impl<K: ProducerKind> Drop for OverwriteConsumer<K> {
    fn drop(&mut self) {
        self.disarm();
        self.publish();
        self.core.region.forget_socket();
        owner::give_back(&self.core.control().consumer.0.attached);
    }
}
