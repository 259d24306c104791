//! Waiting for room: the blocking reserves ([`Producer::reserve_wait`],
//! [`Producer::output_wait`]), which sleep on the producers' doorbell until the consumer
//! hands space back, and the pieces the async producer (`crate::tokio`) waits with.

use std::time::{Duration, Instant};

use super::{Producer, Reservation};
use crate::config::{Discard, ProducerKind, Wakeup};
use crate::disconnect;
use crate::error::ReserveError;
use crate::format::record::HDR_SIZE;
use crate::protocol::core::Refused;
use crate::wait::DEAD_CHECK;

/// How long a waiting producer naps when it cannot sleep on the doorbell.
const ROOM_NAP: Duration = Duration::from_millis(1);

impl<K: ProducerKind> Producer<K, Discard> {
    /// Like [`reserve`](Self::reserve), but when the record does not fit, sleeps until
    /// the consumer hands space back (woken by it, without polling: see below), up to
    /// `timeout` (`None`: no limit), instead of refusing it at once. crossbeam-channel's
    /// blocking `send`, for a logger that must not drop records.
    ///
    /// Errors: [`ReserveError::Timeout`] when no room came in time,
    /// [`ReserveError::Disconnected`] when the consumer is gone (dropped, or its process
    /// died: no room will come), each counted as lost; [`ReserveError::TooLarge`]. A
    /// ring whose consumer has never attached is not disconnected: the producer waits
    /// for it (up to `timeout`).
    ///
    /// The wakeup is the consumer's protocol run the other way (the producer announces
    /// its wait, runs the heavy barrier and looks at the consumer position once more;
    /// the consumer looks for waiting producers after every publication of its
    /// position), so no wakeup is lost, between processes too. A waiting producer of a
    /// ring shared between processes also looks every 200 ms whether the consumer's
    /// process died. Waiting producers are woken together; each then reserves again,
    /// and those that still find no room wait again.
    ///
    /// ```
    /// use ringtrace::{MpscRing, Wakeup};
    /// use std::time::Duration;
    ///
    /// let ring = MpscRing::new(4096)?;
    /// let mut producer = ring.producer()?;
    /// let mut consumer = ring.consumer()?;
    /// let writer = std::thread::spawn(move || {
    ///     // 10 000 records of 64 bytes through a 4 KiB ring: none is lost.
    ///     for i in 0..10_000u64 {
    ///         let mut rec = producer.reserve_wait(64, Some(Duration::from_secs(10))).unwrap();
    ///         rec[..8].copy_from_slice(&i.to_le_bytes());
    ///         rec.commit();
    ///     }
    /// });
    /// let mut next = 0u64;
    /// while next < 10_000 {
    ///     consumer.poll(Some(Duration::from_secs(10)), |rec: &[u8]| {
    ///         assert_eq!(rec[..8], next.to_le_bytes());
    ///         next += 1;
    ///     })?;
    /// }
    /// writer.join().unwrap();
    /// assert_eq!(ring.stats().lost, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_wait(
        &mut self,
        len: usize,
        timeout: Option<Duration>,
    ) -> Result<Reservation<'_, K, Discard>, ReserveError> {
        let pos = self.claim_or_wait(len, timeout)?;
        Ok(Reservation { producer: self, pos, len: len as u32 })
    }

    /// Reserves (waiting for room, as [`reserve_wait`](Self::reserve_wait) does), copies
    /// `data` and commits with `wakeup`: one call.
    pub fn output_wait(&mut self, data: &[u8], wakeup: Wakeup, timeout: Option<Duration>) -> Result<(), ReserveError> {
        let pos = self.claim_or_wait(data.len(), timeout)?;
        // SAFETY: as in `output`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.core.region.data_ptr(pos + HDR_SIZE), data.len()) };
        self.finish(pos, data.len() as u32, false, wakeup);
        Ok(())
    }

    /// Whether the ring's consumer attached once and is gone (dropped, or its process
    /// died). A consumer may attach again later.
    pub fn is_disconnected(&self) -> bool {
        disconnect::consumer_gone(&self.core)
    }

    /// Claims space if there is room now: `Ok(None)` when the ring is full (not counted:
    /// the async producer waits and tries again).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn try_claim(&mut self, len: usize) -> Result<Option<u64>, ReserveError> {
        match self.claim(len) {
            Ok(pos) => Ok(Some(pos)),
            Err(Refused::Full) => Ok(None),
            Err(why) => Err(self.refused(why, len)),
        }
    }

    /// The reservation of `len` bytes claimed at `pos` ([`try_claim`](Self::try_claim)).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn reservation(&mut self, pos: u64, len: usize) -> Reservation<'_, K, Discard> {
        Reservation { producer: self, pos, len: len as u32 }
    }

    /// Copies `data` into the reservation claimed at `pos` for it and commits it.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn commit_copy(&mut self, pos: u64, data: &[u8], wakeup: Wakeup) {
        // SAFETY: as in `output`: `pos` is this handle's claim of `data.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.core.region.data_ptr(pos + HDR_SIZE), data.len()) };
        self.finish(pos, data.len() as u32, false, wakeup);
    }

    /// Counts a record given up as lost (a waiting producer that found the consumer
    /// gone).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn count_lost(&self) {
        self.slot.bump(&self.slot.counters().lost);
    }

    /// A producer that found no room announces that it waits, and looks again (the
    /// room protocol's `arm_room`, at the consumer position its failed claim saw).
    /// `Ok(true)`: wait for the room doorbell.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn arm_room(&self) -> std::io::Result<bool> {
        self.core.arm_room(self.cursor.cons)
    }

    /// This process's room socket for the ring, named among those the consumer rings;
    /// `None` if there is none (no socket could be made, or every entry is taken).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn room_socket(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        let (fd, id) = self.shared.region.room_socket()?;
        self.core.region.register_room_socket(id).then_some((fd, id))
    }

    /// What this process's async producers of the ring wake each other with.
    #[cfg(feature = "tokio")]
    pub(crate) fn room_notify(&self) -> &::tokio::sync::Notify {
        &self.shared.region.room_notify
    }

    /// Whether the ring is shared between processes.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn is_shared(&self) -> bool {
        self.core.region.is_futex()
    }

    /// Claims space, waiting for room if there is none.
    #[inline]
    fn claim_or_wait(&mut self, len: usize, timeout: Option<Duration>) -> Result<u64, ReserveError> {
        match self.claim(len) {
            Ok(pos) => Ok(pos),
            Err(Refused::Full) => self.wait_for_room(len, timeout),
            Err(why) => Err(self.refused(why, len)),
        }
    }

    /// The waiting part of [`claim_or_wait`](Self::claim_or_wait): arm, look again,
    /// sleep on the producers' doorbell, reserve again; until a reserve succeeds, the
    /// consumer is gone, or the deadline passes.
    #[cold]
    #[inline(never)]
    fn wait_for_room(&mut self, len: usize, timeout: Option<Duration>) -> Result<u64, ReserveError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let lose = |p: &Self, e: ReserveError| {
            p.slot.bump(&p.slot.counters().lost);
            Err(e)
        };
        // Rings shared between processes: look for a dead consumer now and then (a
        // consumer in this process rings the doorbell when it is dropped).
        let slice = self.core.region.is_futex().then_some(DEAD_CHECK);
        // Bounded by the deadline (each round sleeps until a ring, the slice or the
        // deadline); with no deadline, by the consumer: it frees room or goes away.
        loop {
            if disconnect::consumer_gone(&self.core) {
                return lose(self, ReserveError::Disconnected { len });
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return lose(self, ReserveError::Timeout { len });
            }
            // The consumer position the failed reserve saw (`has_room` reloads it
            // before it refuses).
            let seen = self.cursor.cons;
            let token = self.core.room_token();
            let nap = [left, slice].into_iter().flatten().min();
            match self.core.arm_room(seen) {
                Ok(true) => {
                    // A failed futex wait (only a kernel without futexes) degrades to
                    // a nap, still bounded by the deadline.
                    if self.core.region.sleep_for_room(token, nap).is_err() {
                        std::thread::sleep(nap.unwrap_or(ROOM_NAP).min(ROOM_NAP));
                    }
                }
                Ok(false) => {}
                // The barrier failed (it does not on a kernel that ran it before): the
                // announcement cannot be trusted, nap instead.
                Err(_) => std::thread::sleep(nap.unwrap_or(ROOM_NAP).min(ROOM_NAP)),
            }
            match self.claim(len) {
                Ok(pos) => return Ok(pos),
                Err(Refused::Full) => {}
                Err(why) => return Err(self.refused(why, len)),
            }
        }
    }
}
