//! A round of one source: how much it reads ([`Limits`]), what it read ([`Filled`]),
//! what a restart found ([`Recovered`]), and its records into batches ([`Batcher`]):
//! messages each closed before it passes the batch size, a record too large for any
//! message shipped as a marker.

use crate::frame::{BatchWriter, Content, FrameError, TimeSource, RECORD_HEADER_LEN};

use std::time::{Duration, Instant};

use ringtrace::{ConsumeError, Stats};

use super::super::error::ShipError;
use super::channel;
use super::error::{SourceError, SourceErrorKind};
use crate::state::SourceState;

/// How much a round reads and how large its messages grow.
#[derive(Debug, Clone, Copy)]
pub(in crate::agent) struct Limits {
    /// A batch is closed once the next record would take it past this.
    pub batch: usize,
    /// No message is larger: a record whose batch alone would be is a marker.
    pub max: usize,
    /// Bytes read from the ring in one round, at most (about).
    pub round: usize,
}

/// What `Source::fill` read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(in crate::agent) struct Filled {
    /// Records read (markers included).
    pub records: u64,
    /// Of them, records too large for a message, shipped as markers.
    pub too_large: u64,
}

/// What `Source::recover` found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(in crate::agent) struct Recovered {
    /// Records acknowledged by Kafka before a restart but not handed back to the ring:
    /// stepped over, not sent again.
    pub acknowledged: u64,
    /// Whether the ring is another than the state file's (recreated): its records are
    /// numbered on from the state's sequence.
    pub new_ring: bool,
}

/// A round's batches of one source, as records are added.
pub(super) struct Batcher<'a> {
    host: &'a str,
    name: &'a str,
    limits: Limits,
    out: &'a mut Vec<Vec<u8>>,
    batch: BatchWriter,
    /// What its batches hold.
    content: Content,
    filled: Filled,
    /// Ring bytes read this round (records and their headers).
    bytes: usize,
}

impl<'a> Batcher<'a> {
    /// A round whose first record gets `seq`, its first batch's times from `times`
    /// (time source, offset).
    pub fn new(
        host: &'a str,
        name: &'a str,
        seq: u64,
        times: (TimeSource, i64),
        limits: Limits,
        out: &'a mut Vec<Vec<u8>>,
    ) -> Result<Self, ShipError> {
        let batch = BatchWriter::new(host, name, seq, times.0, times.1).map_err(|e| frame(name, e))?;
        Ok(Batcher { host, name, limits, out, batch, content: Content::Records, filled: Filled::default(), bytes: 0 })
    }

    /// Says what the batches hold (plain records if not said).
    pub fn content(mut self, content: Content) -> Self {
        self.content = content;
        self.batch = self.batch.with_content(content);
        self
    }

    /// The sequence number the next record gets.
    pub fn next_seq(&self) -> u64 {
        self.batch.next_seq()
    }

    /// Closes the open batch (if it holds a record) and opens one whose first record
    /// gets `seq`, with `times`.
    pub fn cut(&mut self, seq: u64, times: (TimeSource, i64)) -> Result<(), ShipError> {
        let next = BatchWriter::new(self.host, self.name, seq, times.0, times.1).map_err(|e| frame(self.name, e))?;
        let next = next.with_content(self.content);
        let done = std::mem::replace(&mut self.batch, next);
        if !done.is_empty() {
            self.out.push(done.finish());
        }
        Ok(())
    }

    /// Whether a record of `len` bytes would take the open batch past the batch size:
    /// [`cut`](Self::cut) first.
    pub fn full_for(&self, len: usize) -> bool {
        let len = if self.too_large(len) { 8 } else { len };
        !self.batch.is_empty() && self.batch.len() + RECORD_HEADER_LEN + len.next_multiple_of(8) > self.limits.batch
    }

    fn too_large(&self, len: usize) -> bool {
        BatchWriter::alone(self.host, self.name, len) > self.limits.max
    }

    /// Adds `rec` at `time_ns` (`whole` ring bytes read for it) to the open batch. True
    /// once the round has read its bytes.
    pub fn push(&mut self, time_ns: u64, rec: &[u8], whole: usize) -> Result<bool, ShipError> {
        let too_large = self.too_large(rec.len());
        if too_large {
            tracing::warn!(
                "{}: record {} is {} bytes: with its batch's header it passes the largest message, \
                 {} bytes; a marker is shipped in its place",
                self.name,
                self.batch.next_seq(),
                rec.len(),
                self.limits.max
            );
            self.batch.push_too_large(time_ns, rec.len() as u64).map_err(|e| frame(self.name, e))?;
            self.filled.too_large += 1;
        } else {
            self.batch.push(time_ns, rec).map_err(|e| frame(self.name, e))?;
        }
        self.filled.records += 1;
        self.bytes += whole + 16;
        Ok(self.bytes >= self.limits.round)
    }

    /// For a read callback: adds `whole`, the record `seq` (as the ring holds it: its
    /// stamp, if `times` finds one, is taken off and gives its time), in a new batch if
    /// it does not follow the open one's last record (a gap) or would take it past the
    /// batch size. [`Stop::Full`] once the round has read its bytes (the record is in).
    pub fn take(&mut self, seq: u64, whole: &[u8], times: &mut Times<'_>) -> Result<(), Stop> {
        let (stamp, rec) = times.split(whole);
        self.take_split(seq, stamp, rec, whole.len(), times)
    }

    /// [`take`](Self::take) of a record split already: its stamp, what is shipped of it,
    /// and the ring bytes it took (`whole`).
    pub fn take_split(
        &mut self,
        seq: u64,
        stamp: Option<u64>,
        rec: &[u8],
        whole: usize,
        times: &mut Times<'_>,
    ) -> Result<(), Stop> {
        if seq != self.next_seq() || self.full_for(rec.len()) {
            self.cut(seq, times.batch()).map_err(Stop::Failed)?;
        }
        let time_ns = times.time(stamp);
        match self.push(time_ns, rec, whole) {
            Ok(false) => Ok(()),
            Ok(true) => Err(Stop::Full),
            Err(e) => Err(Stop::Failed(e)),
        }
    }

    /// Closes the last batch; what the round read.
    pub fn finish(self) -> Filled {
        if !self.batch.is_empty() {
            self.out.push(self.batch.finish());
        }
        self.filled
    }
}

/// Why a read callback ([`Batcher::take`]) stopped the read.
#[derive(Debug)]
pub(super) enum Stop {
    /// The round read its bytes.
    Full,
    /// A batch could not be written.
    Failed(ShipError),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Full => f.write_str("the round read its bytes"),
            Stop::Failed(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Stop {}

/// The outcome of a read whose callback was [`Batcher::take`]: a round that read its
/// bytes and, with `busy_ok`, an overwrite ring overwritten faster than it was copied
/// (the next round tries again) are not errors.
pub(super) fn read_outcome<T>(read: Result<T, ConsumeError<Stop>>, name: &str, busy_ok: bool) -> Result<(), ShipError> {
    match read {
        Ok(_) | Err(ConsumeError::Callback(Stop::Full)) => Ok(()),
        Err(ConsumeError::Busy) if busy_ok => Ok(()),
        Err(ConsumeError::Callback(Stop::Failed(e))) => Err(e),
        Err(e) => Err(SourceError::new(name, SourceErrorKind::Read(Box::new(e))).into()),
    }
}

fn frame(name: &str, e: FrameError) -> ShipError {
    SourceError::new(name, e).into()
}

/// A source that keeps its own place (a flight recorder, a BPF map), where a ring
/// file's consumer would be released or unread.
pub(super) trait Reader {
    /// Takes up where the state's entry (`saved`) left off; `same`: whether the entry
    /// is of this very ring.
    fn recover(&mut self, saved: Option<&SourceState>, same: bool, deadline: Instant) -> Result<Recovered, ShipError>;
    /// The sequence number of the next record, as of the last round acknowledged.
    fn next_seq(&self) -> u64;
    /// Reads about `limits.round` bytes of records into batches, each stamped
    /// `time_ns`; the next sequence number and the position after them.
    fn fill(
        &mut self,
        host: &str,
        name: &str,
        time_ns: u64,
        limits: Limits,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(Filled, u64, u64), ShipError>;
    /// The state's `(consumed, skipped, overwritten)` after the round in flight.
    fn pending_counts(&self) -> (u64, u64, u64);
    /// The round in flight was acknowledged (or spooled) and stored.
    fn acknowledged(&mut self);
    /// The round in flight failed: its records are read again.
    fn failed(&mut self);
    fn stats(&self) -> Stats;
    fn ready(&self) -> bool;
    fn is_disconnected(&self) -> bool;
    fn wait(&mut self, timeout: Duration) -> std::io::Result<bool>;
}

/// Where a source's record times come from.
pub(super) enum Times<'a> {
    /// The agent's wall clock when it drained them (ring files, unstamped channels).
    Drained(u64),
    /// A channel's slot: its records' stamps, or the drain time ([`channel::Stamps`]).
    Channel(channel::Stamps<'a>),
}

impl Times<'_> {
    /// A new batch's time source and offset.
    pub fn batch(&mut self) -> (TimeSource, i64) {
        match self {
            Times::Drained(_) => (TimeSource::Drained, 0),
            Times::Channel(s) => s.batch(),
        }
    }

    /// A record's stamp (monotonic ns), if it has one, and what is shipped of it.
    pub fn split<'r>(&self, rec: &'r [u8]) -> (Option<u64>, &'r [u8]) {
        match self {
            Times::Drained(_) => (None, rec),
            Times::Channel(s) => s.slots.split(rec),
        }
    }

    /// The wall-clock time of a record with `stamp`, in the open batch.
    pub fn time(&mut self, stamp: Option<u64>) -> u64 {
        match self {
            Times::Drained(t) => *t,
            Times::Channel(s) => s.time(stamp),
        }
    }
}
