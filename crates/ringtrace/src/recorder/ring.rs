//! The overwrite ring's API: [`RingBuf<K, Overwrite>`](RingBuf) (alias
//! [`FlightRecorder`](crate::FlightRecorder)) gains snapshots, pausing and a copying
//! consumer.

use super::paused::Paused;
use super::snapshot::Snapshot;
use crate::config::{Overwrite, ProducerKind};
use crate::error::{ConsumeError, Error};
use crate::protocol::core::DEFAULT_PAUSE_TIMEOUT;
use crate::ring::RingBuf;
use std::time::Duration;

impl<K: ProducerKind> RingBuf<K, Overwrite> {
    /// The records the ring holds now, oldest to newest, copied and checked, without
    /// stopping producers. Records still being written are left out (and counted in
    /// [`Snapshot::unfinished`]); space claimed whose header is not yet written, with
    /// newer records past it, is waited for up to 100 ms (see
    /// [`Snapshot::unfinished`]).
    ///
    /// [`ConsumeError::Busy`] if producers overwrote every copy before it could be
    /// checked (or left nothing committed in it), 16 times in a row, or if a claim
    /// not written within those 100 ms hides every record: then
    /// [`pause`](Self::pause) first. A ring that holds committed records never gives
    /// an empty snapshot.
    ///
    /// Each call allocates a new snapshot: about 1.25 times the ring's capacity for a
    /// ring of 64-byte records (the bytes, and 16 bytes of index per record), written
    /// into fresh memory that the kernel must fault in, so that a fresh snapshot of a
    /// large ring costs several times what [`snapshot_into`](Self::snapshot_into)
    /// costs into a snapshot that has held one before (measured: 3.8 times). Take
    /// repeated snapshots of a large ring with `snapshot_into`.
    pub fn snapshot(&self) -> Result<Snapshot, ConsumeError> {
        let mut snap = Snapshot::new();
        self.snapshot_into(&mut snap)?;
        Ok(snap)
    }

    /// [`snapshot`](Self::snapshot) into an existing one, reusing its memory (no
    /// allocation once it has held a full ring): the way to snapshot a large ring
    /// more than once.
    pub fn snapshot_into(&self, snap: &mut Snapshot) -> Result<(), ConsumeError> {
        Snapshot::take_into(&self.shared, snap)
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
    /// Before it refuses anything, the pause checks the records already written while
    /// producers go on (a walk of their headers, so it takes time in proportion to
    /// the ring's records); producers are then refused only while it waits for the
    /// records still being written and checks the few written meanwhile. It does not
    /// index the records: the guard does that when first read (see [`Paused`]); use
    /// [`Paused::into_snapshot`] to copy them and resume before they are indexed.
    ///
    /// Errors: [`Error::AlreadyPaused`]; [`Error::PauseBusy`] if a producer did
    /// not finish its record in time (the ring is then left running).
    pub fn pause(&self) -> Result<Paused<'_, K>, Error> {
        Paused::new(&self.shared, DEFAULT_PAUSE_TIMEOUT)
    }

    /// [`pause`](Self::pause), waiting at most `timeout` (measured with the monotonic
    /// clock) for the retire lock and for records being written. While it waits,
    /// producers' reserves are already refused (and counted as paused), so a long
    /// timeout costs records; a zero timeout pauses only a ring with no record in
    /// flight.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ringtrace::{Error, FlightRecorder, Wakeup};
    ///
    /// let ring = FlightRecorder::new(4096)?;
    /// let mut p = ring.producer()?;
    /// let rec = p.reserve(8)?;                       // still being written
    /// let err = ring.pause_timeout(Duration::from_millis(5)).unwrap_err();
    /// assert!(matches!(err, Error::PauseBusy { .. }));
    /// rec.commit();
    /// assert_eq!(ring.pause_timeout(Duration::ZERO)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pause_timeout(&self, timeout: Duration) -> Result<Paused<'_, K>, Error> {
        Paused::new(&self.shared, timeout)
    }

    /// Whether the ring is paused.
    pub fn is_paused(&self) -> bool {
        self.shared.core.is_paused()
    }
}
