//! The overwrite ring's API: [`RingBuf<K, Overwrite>`](RingBuf) (alias
//! [`FlightRecorder`](crate::FlightRecorder)) gains snapshots, pausing and a copying
//! consumer.

use super::consumer::OverwriteConsumer;
use super::paused::Paused;
use super::snapshot::Snapshot;
use crate::config::{Overwrite, ProducerKind};
use crate::error::{Error, PauseError, SnapshotError};
use crate::protocol::core::DEFAULT_PAUSE_TIMEOUT;
use crate::ring::RingBuf;
use std::time::Duration;

impl<K: ProducerKind> RingBuf<K, Overwrite> {
    /// Attaches the consumer, which follows the ring and copies records out (see
    /// [`OverwriteConsumer`]): one at a time, else [`Error::ConsumerAttached`].
    pub fn consumer(&self) -> Result<OverwriteConsumer<K>, Error> {
        OverwriteConsumer::attach(self.shared.clone())
    }

    /// The records the ring holds now, oldest to newest, copied and checked, without
    /// stopping producers. Records still being written are left out (and counted in
    /// [`Snapshot::unfinished`]).
    ///
    /// [`SnapshotError::Busy`] if producers overwrote every copy before it could be
    /// checked, 16 times in a row: then [`pause`](Self::pause) first.
    pub fn snapshot(&self) -> Result<Snapshot, SnapshotError> {
        let mut snap = Snapshot::new();
        self.snapshot_into(&mut snap)?;
        Ok(snap)
    }

    /// [`snapshot`](Self::snapshot) into an existing one, reusing its memory (no
    /// allocation once it has held a full ring).
    pub fn snapshot_into(&self, snap: &mut Snapshot) -> Result<(), SnapshotError> {
        let core = &self.shared.core;
        if core.capture_newest(crate::protocol::capture::CHUNK, &mut snap.cap).is_none() {
            // Producers overwrote every copy, or a retirer died inside its seqlock
            // write (then readers stay `Busy` until someone ends it): end it, if so,
            // and try once more.
            let recovered = core.recover_lock(self.shared.writable);
            if !recovered || core.capture_newest(crate::protocol::capture::CHUNK, &mut snap.cap).is_none() {
                return Err(SnapshotError::Busy);
            }
        }
        if let crate::protocol::capture::Parse::Corrupt { pos, header } = snap.cap.stop {
            return Err(SnapshotError::Corrupt { pos, header });
        }
        snap.capacity = core.capacity();
        snap.retired_before = snap.cap.retired_at_first.unwrap_or(0);
        self.settle(snap);
        Ok(())
    }

    /// Sets `snap.overwritten` from the previous snapshot's end and records this one's:
    /// committed records before this snapshot's oldest, less those before the previous
    /// one's newest end (which that snapshot held, or counted).
    pub(crate) fn settle(&self, snap: &mut Snapshot) {
        let held = snap.retired_before.saturating_add(snap.len() as u64);
        let mut last = self.shared.last_snapshot.lock().unwrap_or_else(|e| e.into_inner());
        snap.missed = snap.retired_before.saturating_sub(*last);
        *last = (*last).max(held);
    }

    /// Pauses the ring, as perf's `PERF_EVENT_IOC_PAUSE_OUTPUT`: until the returned
    /// guard is dropped, every reserve fails at once (counted as lost and as paused),
    /// and the guard reads the records in place. (A single-producer ring's producer may
    /// go on writing into the free space past the paused records until it would have
    /// to overwrite one, then fails: those records are not in the guard's view and are
    /// not lost.) Pausing waits for records already reserved to be committed or
    /// discarded, for at most 1 second (see [`pause_timeout`](Self::pause_timeout));
    /// a record whose producer died is stepped over, not waited for.
    ///
    /// Errors: [`PauseError::AlreadyPaused`]; [`PauseError::Busy`] if a producer did
    /// not finish its record in time (the ring is then left running).
    pub fn pause(&self) -> Result<Paused<'_, K>, PauseError> {
        Paused::new(self, DEFAULT_PAUSE_TIMEOUT)
    }

    /// [`pause`](Self::pause), waiting at most `timeout` (measured with the monotonic
    /// clock) for the retire lock and for records being written. While it waits,
    /// producers' reserves are already refused (and counted as paused), so a long
    /// timeout costs records; a zero timeout pauses only a ring with no record in
    /// flight.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ringtrace::{FlightRecorder, PauseError, Wakeup};
    ///
    /// let ring = FlightRecorder::new(4096)?;
    /// let mut p = ring.producer()?;
    /// let rec = p.reserve(8)?;                       // still being written
    /// let err = ring.pause_timeout(Duration::from_millis(5)).unwrap_err();
    /// assert!(matches!(err, PauseError::Busy { .. }));
    /// rec.commit();
    /// assert_eq!(ring.pause_timeout(Duration::ZERO)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pause_timeout(&self, timeout: Duration) -> Result<Paused<'_, K>, PauseError> {
        Paused::new(self, timeout)
    }

    /// Whether the ring is paused.
    pub fn is_paused(&self) -> bool {
        self.shared.core.is_paused()
    }
}
