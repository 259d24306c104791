//! [`Consumer`]: zero-copy callback and iterator forms, batched publication of the
//! consumer position, and waiting (blocking, or through a file descriptor).

#![cfg(not(loom))]

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

pub use crate::callback::{Iter, Outcome};
use crate::config::{Mpsc, ProducerKind};
use crate::error::{ConsumeError, Error};
use crate::format::record::HDR_SIZE;
use crate::protocol::core::{Core, ReadCursor, Step};

/// Empty consume calls between two readings of the clock while the consumer is stuck
/// (reading the clock costs more than an empty call): whether to check for a dead
/// producer is decided by time ([`DEAD_CHECK`](crate::wait::DEAD_CHECK)), not by this count.
const STALL_CLOCK_EVERY: u32 = 8;
use crate::disconnect;
use crate::format::control::SEEN_CONSUMER;
use crate::owner;
use crate::region::mmap::MmapView;
use crate::shared::Shared;
use crate::sync::Ordering::Relaxed;

mod wait;

/// Reads a ring's records in reservation order, in place. One per ring at a time.
///
/// Space is handed back to producers in batches (see
/// [`Builder::consumer_batch`](crate::Builder::consumer_batch)) and at the end of every
/// consume call, not after every record as libbpf does.
///
/// # Waiting
///
/// [`poll`](Self::poll) and [`wait`](Self::wait) block. An event loop instead waits on
/// [`as_fd`](std::os::fd::AsFd::as_fd) (readable when woken; edge-triggered `EPOLLET` is fine, as
/// mio and tokio's `AsyncFd` use): drain, then call [`arm`](Self::arm); wait on the fd
/// only if it returns `true`, else drain again.
///
/// A consumer that busy-polls [`consume`](Self::consume) instead should back off (yield,
/// or pause) when a call returns nothing: re-reading the cache line a producer is writing
/// takes it back from the producer on every poll: spinning moves records between two
/// threads several times slower than yielding between empty calls.
///
/// ```
/// use ringtrace::MpscRing;
/// use std::time::Duration;
///
/// let ring = MpscRing::new(4096)?;
/// let mut consumer = ring.consumer()?;
/// let mut producer = ring.producer()?;
/// let t = std::thread::spawn(move || {
///     std::thread::sleep(Duration::from_millis(20));
///     producer.output(b"late", ringtrace::Wakeup::Default).unwrap();
/// });
/// let mut got = Vec::new();
/// let n = consumer.poll(Some(Duration::from_secs(10)), |d| {
///     got.extend_from_slice(d);
///     Ok::<(), std::convert::Infallible>(())
/// })?;
/// assert_eq!((n, &got[..]), (1, &b"late"[..]));
/// t.join().unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Consumer<K: ProducerKind = Mpsc> {
    /// This handle's copy of the protocol state (a view of `shared.region`).
    core: Core<MmapView>,
    rd: ReadCursor,
    /// The cursor where the last [`iter`](Self::iter) began, for
    /// [`unread`](Self::unread).
    mark: ReadCursor,
    /// Publication batch in bytes.
    batch: u64,
    /// Whether the wait word may still say WAITING.
    armed: bool,
    /// Consume calls in a row that found nothing (see `stalled`).
    /// Empty consume calls in a row, and since when (read every [`STALL_CLOCK_EVERY`]).
    stalls: u32,
    stalled_since: Option<Instant>,
    /// Keeps the mapping alive.
    shared: Arc<Shared>,
    _static: PhantomData<fn() -> K>,
}

impl<K: ProducerKind> fmt::Debug for Consumer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer").field("pos", &self.rd.pos).field("published", &self.rd.published).finish()
    }
}

impl<K: ProducerKind> Consumer<K> {
    pub(crate) fn attach(shared: Arc<Shared>) -> Result<Self, Error> {
        let core = shared.core.clone();
        let line = &core.control().consumer.0;
        owner::take(&line.attached).map_err(|pid| Error::ConsumerAttached { pid })?;
        disconnect::mark_seen(&core, SEEN_CONSUMER);
        // A consumer before us (perhaps in a process that died) may have named its
        // socket doorbell: producers ring the futex until this one names its own.
        core.region.forget_socket();
        // The published position may lie inside a record (space goes back in whole
        // cache lines); `read`, stored before it, is the record boundary the last
        // consumer reached. Start there (its records are not delivered again), and
        // hand back `[pos, read)` with the first publication.
        // Relaxed: the role's handover (`owner::take`, Acquire) ordered the last
        // consumer's stores before these loads.
        let (pos, read) = (line.pos.load(Relaxed), line.read.load(Relaxed));
        let mut rd = core.cursor(pos, line.consumed.load(Relaxed), line.skipped.load(Relaxed));
        if read > pos && read - pos < core.capacity() && read % 8 == 0 {
            rd.pos = read;
        }
        Ok(Consumer {
            core,
            rd,
            mark: rd,
            batch: shared.batch,
            armed: false,
            stalls: 0,
            stalled_since: None,
            shared,
            _static: PhantomData,
        })
    }

    /// One reading step.
    #[inline(always)]
    fn step(&self, rd: &mut ReadCursor) -> Step {
        self.core.next(rd)
    }

    /// Hands back everything read and publishes the consumer position and counters.
    #[inline]
    fn publish(&mut self) {
        let mut rd = self.rd;
        self.publish_cursor(&mut rd);
        self.rd = rd;
    }

    /// Publishes the counters and the read position, and hands back everything read
    /// (`[published, pos)`). The consume loop keeps its cursor in a local (out of `self`,
    /// so that it lives in registers); the callers write it back.
    ///
    /// The consumer writes nothing into the ring: a multi-producer ring's producers
    /// zero the space they claim (`Core::zero_room`), as a single producer does.
    #[inline]
    fn publish_cursor(&self, rd: &mut ReadCursor) {
        let to = rd.pos;
        let line = &self.core.control().consumer.0;
        // Before the position: a consumer that takes over from this one (if this
        // process dies) finds `read >= pos`, a record boundary to start at.
        if line.read.load(Relaxed) != rd.pos {
            // Relaxed: statistics, and a start for a takeover, which the role's
            // handover orders (`owner::take`); the consumer is their only writer.
            line.read.store(rd.pos, Relaxed);
            line.consumed.store(rd.consumed, Relaxed);
            line.skipped.store(rd.skipped, Relaxed);
        }
        if to > rd.published {
            // SAFETY: we are the ring's only consumer and this is its cursor (a local copy
            // of `self.rd` that the caller writes back); `published < to == pos`, a record
            // boundary, so a multiple of 8; `[published, to)` holds records we read, and
            // no slice into them is alive: callback slices end with each call, and
            // iterator slices borrow `self` mutably, which our callers hold.
            unsafe { self.core.release(rd, to) };
        }
    }

    fn disarm(&mut self) {
        if self.armed {
            self.core.disarm(self.rd.published);
            self.armed = false;
        }
    }

    /// Calls `f` with every record available now, in order, then hands the space back.
    /// Returns how many records `f` saw. Stops at the first error of `f` (that record
    /// counts as consumed, as in libbpf) and returns it.
    ///
    /// The callback returns `()`, or a `Result` to stop early (see [`Outcome`]).
    #[inline]
    pub fn consume<F, R>(&mut self, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(&[u8]) -> R,
        R: Outcome,
    {
        self.consume_impl::<false, _, _>(usize::MAX, move |rec| f(rec).into_result())
    }

    /// Like [`consume`](Self::consume), but at most `max` records (libbpf's
    /// `ring__consume_n`).
    #[inline]
    pub fn consume_n<F, R>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(&[u8]) -> R,
        R: Outcome,
    {
        self.consume_impl::<true, _, _>(max, move |rec| f(rec).into_result())
    }

    /// Every record available now, for [`Poll`](crate::wait::poll::Poll).
    fn read_all<F, E>(&mut self, f: &mut F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(&[u8]) -> Result<(), E>,
    {
        self.consume_impl::<false, _, _>(usize::MAX, f)
    }

    /// The consume loop; `LIMITED` is false for [`consume`](Self::consume), whose loop
    /// then has no count to check.
    #[inline(always)]
    fn consume_impl<const LIMITED: bool, F, E>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(&[u8]) -> Result<(), E>,
    {
        self.disarm();
        let mut rd = self.rd;
        // A local copy of the protocol state, like the cursor: `f` may write anywhere,
        // so fields read through `self` would be reloaded after every call.
        let core = self.core.clone();
        let mut n = 0;
        // Publish once the cursor passes this.
        let mut batch_end = rd.published + self.batch;
        let result = loop {
            if LIMITED && n >= max {
                break Ok(n);
            }
            match core.next(&mut rd) {
                Step::Record { pos, len } => {
                    n += 1;
                    // SAFETY: a committed record of `len` bytes, contiguous in the double
                    // mapping, not released before this call returns: the slice is only
                    // lent to `f` for this call.
                    let data =
                        unsafe { std::slice::from_raw_parts(core.region.data_ptr(pos + HDR_SIZE), len as usize) };
                    if let Err(e) = f(data) {
                        break Err(ConsumeError::Callback(e));
                    }
                    if rd.pos >= batch_end {
                        self.publish_cursor(&mut rd);
                        batch_end = rd.published + self.batch;
                    }
                }
                Step::Empty => break Ok(n),
                Step::Full => {
                    self.publish_cursor(&mut rd);
                    batch_end = rd.published + self.batch;
                }
                Step::Corrupt { pos, header } => break Err(ConsumeError::Corrupt { pos, header }),
            }
        };
        self.publish_cursor(&mut rd);
        self.rd = rd;
        match result {
            // Out of the loop, so that the cursor stays in registers there. A record
            // stepped over here is read past by the next call.
            Ok(0) => {
                self.stalled();
            }
            _ => self.unstall(),
        }
        result
    }

    /// The records available now, in order, as slices into the ring. The space is
    /// handed back at the next call on this consumer (or [`release`](Self::release)).
    /// The iterator ends where the producers have not committed yet, or at a corrupt
    /// header (which the next `consume` call reports).
    ///
    /// ```
    /// # let ring = ringtrace::MpscRing::new(4096)?;
    /// # let mut p = ring.producer()?;
    /// # p.output(b"a", ringtrace::Wakeup::Default)?;
    /// let mut consumer = ring.consumer()?;
    /// let total: usize = consumer.iter().map(|rec| rec.len()).sum();
    /// assert_eq!(total, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter(&mut self) -> Records<'_, K> {
        self.disarm();
        self.publish();
        self.mark = self.rd;
        Records { consumer: self }
    }

    /// Hands back the space of records read through [`iter`](Self::iter).
    pub fn release(&mut self) {
        self.publish();
    }

    /// Puts back the records read through the last [`iter`](Self::iter) and not handed
    /// back yet: the next `iter` or consume call delivers them again, and dropping the
    /// consumer leaves them in the ring for the next one. For a reader that could not
    /// pass them on (its output failed) and must not lose them. Does nothing once they
    /// were handed back ([`release`](Self::release), a consume call, a wait).
    ///
    /// ```
    /// # let ring = ringtrace::MpscRing::new(4096)?;
    /// # let mut p = ring.producer()?;
    /// p.output(b"a", ringtrace::Wakeup::Default)?;
    /// p.output(b"b", ringtrace::Wakeup::Default)?;
    /// let mut consumer = ring.consumer()?;
    /// assert_eq!(consumer.iter().count(), 2);
    /// consumer.unread(); // say, stdout failed: keep them
    /// let again: Vec<&[u8]> = consumer.iter().collect();
    /// assert_eq!(again, [&b"a"[..], &b"b"[..]]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unread(&mut self) {
        // Nothing published since `iter` began (it published the read position as the
        // mark's; any later publication moved it, or the space, on): the records past
        // the mark are uncounted and ours, so the cursor may return to it.
        // Relaxed: this consumer is the line's only writer.
        let read = self.core.control().consumer.0.read.load(Relaxed);
        if read == self.mark.pos && self.rd.published == self.mark.published && self.mark.pos <= self.rd.pos {
            self.rd = self.mark;
        }
    }

    /// Whether a record (or a discarded one to step over) is ready at the consumer's
    /// position.
    #[inline]
    pub fn ready(&self) -> bool {
        // A whole ring read and not handed back: producers cannot have written anything.
        if self.rd.pos - self.rd.published >= self.core.capacity() {
            return false;
        }
        self.core.ready(self.rd.pos)
    }

    /// Whether a producer handle attached once and none is left: every one dropped, or
    /// its process died. What they committed before they left is still there to read
    /// ([`poll`](Self::poll) delivers it, then returns
    /// [`ConsumeError::Disconnected`]). A producer may attach again later; one that has
    /// not attached yet is not counted, so a program whose producers come one after
    /// another keeps a handle of its own until the last has attached.
    ///
    /// A ring shared between processes finds a producer process that died when it next
    /// looks: a waiting consumer looks every 200 ms.
    ///
    /// ```
    /// use ringtrace::{ConsumeError, MpscRing, Wakeup};
    ///
    /// let ring = MpscRing::new(4096)?;
    /// let mut consumer = ring.consumer()?;
    /// let mut producer = ring.producer()?;
    /// std::thread::spawn(move || producer.output(b"last words", Wakeup::Default)).join().unwrap()?;
    /// assert!(consumer.is_disconnected());
    /// let n = consumer.poll(None, |rec: &[u8]| assert_eq!(rec, b"last words"))?;
    /// assert_eq!(n, 1);
    /// assert!(matches!(consumer.poll(None, |_: &[u8]| ()), Err(ConsumeError::Disconnected)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_disconnected(&self) -> bool {
        disconnect::producers_gone(&self.core)
    }

    /// Whether the ring is shared between processes (its doorbell a futex, or the
    /// socket `arm` names).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // the async readers' recheck
    pub(crate) fn is_shared(&self) -> bool {
        self.core.region.is_futex()
    }

    /// Steps over the record at the read position if its producer process died before
    /// finishing it (what `wait` does every 200 ms while a record stays unfinished).
    pub(crate) fn step_over_dead(&mut self) -> bool {
        let mut rd = self.rd;
        let skipped = self.skip_dead(&mut rd);
        self.rd = rd;
        skipped
    }

    /// Bytes reserved by producers and not yet consumed (committed or not).
    pub fn available(&self) -> u64 {
        let (_, prod) = self.core.positions();
        prod.wrapping_sub(self.rd.pos)
    }

    /// The consumer's read position (bytes since the ring was created).
    pub fn position(&self) -> u64 {
        self.rd.pos
    }
}

impl<K: ProducerKind> Drop for Consumer<K> {
    fn drop(&mut self) {
        self.disarm();
        self.publish();
        self.core.region.forget_socket();
        owner::give_back(&self.core.control().consumer.0.attached);
        // Producers waiting for room learn that the consumer is gone.
        self.core.wake_all_room();
    }
}

/// Iterator over the records available to a [`Consumer`] ([`Consumer::iter`]).
pub struct Records<'a, K: ProducerKind = Mpsc> {
    consumer: &'a mut Consumer<K>,
}

impl<K: ProducerKind> fmt::Debug for Records<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Records").field("pos", &self.consumer.rd.pos).finish()
    }
}

impl<'a, K: ProducerKind> Iterator for Records<'a, K> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let consumer = &mut *self.consumer;
        let mut rd = consumer.rd;
        let step = consumer.step(&mut rd);
        consumer.rd = rd;
        match step {
            Step::Record { pos, len } => {
                let ptr = consumer.core.region.data_ptr(pos + HDR_SIZE);
                // SAFETY: a committed record, contiguous in the double mapping; its space
                // is released only by `publish`, which needs `&mut Consumer`, which this
                // iterator holds for `'a`: the slice cannot outlive the reservation of it.
                Some(unsafe { std::slice::from_raw_parts(ptr, len as usize) })
            }
            Step::Empty | Step::Full | Step::Corrupt { .. } => None,
        }
    }
}
