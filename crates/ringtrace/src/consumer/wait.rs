//! Waiting for records: [`Consumer::wait`] (and `poll`, which waits with it) sleeps on
//! the consumer's doorbell, waking now and then to step over a record whose producer
//! died; [`Consumer::arm`] and the doorbell's descriptor ([`AsFd`]) let an event loop
//! wait instead.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use super::{Consumer, STALL_CLOCK_EVERY};
use crate::config::ProducerKind;
use crate::disconnect;
use crate::protocol::core::{Core, ReadCursor};
use crate::region::mmap::MmapView;
use crate::sync::Ordering::Relaxed;
use crate::wait::poll::byte_reader_poll;
use crate::wait::sleep::{arm_for_fd, sleep_until_ready};
use crate::wait::DEAD_CHECK;

impl<K: ProducerKind> Consumer<K> {
    /// Sleeps until a record is ready or `timeout` passes; true if one is ready.
    /// Returns false at once when every producer is gone
    /// ([`is_disconnected`](Self::is_disconnected)).
    ///
    /// While a record is claimed and not finished at its position, wakes every 200 ms
    /// to see whether its producer died (then steps over it: see
    /// [`Stats::dead`](crate::Stats)). With nothing claimed, it sleeps until woken.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            self.publish();
            let core = self.core.clone();
            let (pos, published) = (self.rd.pos, self.rd.published);
            // A whole ring read and not handed back: producers cannot have written anything.
            let ready = |c: &Core<MmapView>| pos - published < c.capacity() && c.ready(pos);
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            // Something claimed and not ready: its producer may be dead; check now and
            // then. (A claim made after this look, by a producer that then dies, is
            // found after the next commit wakes us: before that there is nothing to
            // deliver anyway.) A ring shared between processes: look now and then
            // whether every producer process died (a handle dropped rings the doorbell).
            let slice = if self.available() > 0 || self.core.region.is_futex() {
                Some(left.map_or(DEAD_CHECK, |l| l.min(DEAD_CHECK)))
            } else {
                left
            };
            let r = sleep_until_ready(&core, published, slice, &mut self.armed, |c| {
                ready(c) || disconnect::producers_gone(c)
            });
            self.disarm();
            if r? {
                return Ok(ready(&core));
            }
            if self.step_over_dead() {
                return Ok(true);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
        }
    }

    /// A consume call found nothing. Once consume calls have found nothing for
    /// [`DEAD_CHECK`] (as [`wait`](Self::wait) does; the clock is read every
    /// [`STALL_CLOCK_EVERY`] calls), checks whether the record at the cursor was left
    /// unfinished by a dead process, so a consumer that polls steps over it as soon as
    /// one that sleeps, however often it calls.
    #[cold]
    #[inline(never)]
    pub(super) fn stalled(&mut self) -> bool {
        self.stalls = self.stalls.wrapping_add(1);
        if self.stalls % STALL_CLOCK_EVERY != 1 {
            return false;
        }
        let now = Instant::now();
        let since = *self.stalled_since.get_or_insert(now);
        if now.duration_since(since) < DEAD_CHECK {
            return false;
        }
        self.stalled_since = Some(now);
        self.step_over_dead()
    }

    /// A consume call delivered something: the consumer is not stuck.
    #[inline]
    pub(super) fn unstall(&mut self) {
        if self.stalls != 0 {
            self.stalls = 0;
            self.stalled_since = None;
        }
    }

    /// Steps the cursor over the record at it if its producer died before finishing
    /// it (counted in the consumer line's `dead`).
    pub(super) fn skip_dead(&self, rd: &mut ReadCursor) -> bool {
        if rd.pos - rd.published >= self.core.capacity() {
            return false;
        }
        let Some(len) = self.core.dead_claim_in(rd.pos, usize::MAX, !K::MULTI) else {
            return false;
        };
        // Never past a ring's worth of unreleased space (a hostile producer position
        // could say otherwise): release zeroes what the cursor passed.
        if rd.pos + len - rd.published > self.core.capacity() {
            return false;
        }
        rd.pos += len;
        // Relaxed: a statistic; this consumer is its only writer in discard mode.
        self.core.control().consumer.0.dead.fetch_add(1, Relaxed);
        true
    }

    /// Prepares to wait on [`as_fd`](AsFd::as_fd): publishes the consumer position,
    /// resets the doorbell, and announces the wait. `Ok(true)`: nothing is ready, wait
    /// on the fd. `Ok(false)`: something is ready (or arrived meanwhile, or every
    /// producer is gone: see [`is_disconnected`](Self::is_disconnected)): consume first.
    ///
    /// In a ring shared between processes this also switches the ring's doorbell from
    /// its futex to this consumer's socket (an abstract Unix socket, which is what
    /// `as_fd` lends): producers in other processes must then share this process's
    /// network namespace to wake it. `Unsupported` if this process could not make the
    /// socket. A consumer that waits this way should also look every 200 ms or so
    /// whether every producer process died (`is_disconnected`), as `poll` does: a
    /// killed process rings nothing.
    pub fn arm(&mut self) -> io::Result<bool> {
        self.publish();
        if self.ready() {
            return Ok(false);
        }
        self.arm_inner()
    }

    pub(super) fn arm_inner(&mut self) -> io::Result<bool> {
        let at = self.rd.published;
        let core = self.core.clone();
        let armed = arm_for_fd(&core, at, &mut self.armed, disconnect::producers_gone);
        if !matches!(armed, Ok(true)) {
            self.disarm();
        }
        armed
    }
}

byte_reader_poll! {
    /// Consumes what is available; if nothing is, sleeps until a producer wakes it
    /// (per the wakeup policy and flags) or `timeout` passes (`None`: no timeout), then
    /// consumes. Returns the records seen. libbpf's `ring_buffer__poll`.
    ///
    /// [`ConsumeError::Disconnected`](crate::error::ConsumeError::Disconnected) once every producer is gone and their records
    /// are read (see [`is_disconnected`](Self::is_disconnected)).
    impl[K: ProducerKind] Consumer<K> { read: read_all, disconnected: is_disconnected }
}

impl<K: ProducerKind> AsFd for Consumer<K> {
    /// The doorbell: a descriptor that becomes readable when a producer wakes this
    /// consumer (an eventfd; in a ring shared between processes, a socket, rung once
    /// [`Consumer::arm`] named it). See [`Consumer::arm`].
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.region.doorbell()
    }
}
