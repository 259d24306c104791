//! The owned items that the readers with more than bytes hand out from
//! [`Reader::take`](super::Reader::take) (and the async record streams):
//! [`ChannelItem`], [`PerfItem`].

use crate::kernel::perf::PerfRecord;

/// A channel record copied out: what [`Reader::take`](super::Reader::take) of a
/// [`ChannelReader`](crate::ChannelReader) hands out (and its async record stream).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelItem {
    /// The producer's number in its channel.
    pub producer: u32,
    /// The record's timestamp (nanoseconds, `CLOCK_MONOTONIC` time base; 0 with
    /// [`NoClock`](crate::clock::NoClock)).
    pub timestamp: u64,
    /// The payload, without the timestamp.
    pub data: Vec<u8>,
}

/// A perf record copied out: what [`Reader::take`](super::Reader::take) of a
/// [`ForwardRing`](crate::kernel::perf::ForwardRing) hands out (and, in batches newest
/// first, of a [`BackwardRing`](crate::kernel::perf::BackwardRing)), and their async
/// record streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfItem {
    /// `header.type` (`PERF_RECORD_SAMPLE`, `PERF_RECORD_LOST`, ...).
    pub kind: u32,
    /// `header.misc`.
    pub misc: u16,
    /// The record's ring position.
    pub pos: u64,
    /// The whole record, its 8-byte header included, as the kernel wrote it.
    pub bytes: Vec<u8>,
}

impl PerfItem {
    /// Copies `rec` out of the ring.
    pub fn new(rec: &PerfRecord<'_>) -> PerfItem {
        PerfItem { kind: rec.kind, misc: rec.misc, pos: rec.pos, bytes: rec.bytes.to_vec() }
    }

    /// The record lent again, for [`Sample::parse`](crate::kernel::perf::Sample::parse)
    /// and the other readers of a [`PerfRecord`].
    pub fn record(&self) -> PerfRecord<'_> {
        PerfRecord { kind: self.kind, misc: self.misc, pos: self.pos, bytes: &self.bytes }
    }
}
