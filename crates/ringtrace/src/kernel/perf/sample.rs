//! The fixed fields at the start of a `PERF_RECORD_SAMPLE`.

use perf_event_open_sys::bindings as sys;

use super::record::{PerfRecord, RECORD_SAMPLE};

/// `PERF_SAMPLE_IP`: the instruction pointer.
pub const SAMPLE_IP: u64 = sys::PERF_SAMPLE_IP as u64;
/// `PERF_SAMPLE_TID`: process and thread id.
pub const SAMPLE_TID: u64 = sys::PERF_SAMPLE_TID as u64;
/// `PERF_SAMPLE_TIME`: the timestamp (the event's clock: `perf_clock`, or the one given to
/// [`EventBuilder::clockid`](super::EventBuilder::clockid)).
pub const SAMPLE_TIME: u64 = sys::PERF_SAMPLE_TIME as u64;
/// `PERF_SAMPLE_ADDR`: an address (the faulting address of page fault events).
pub const SAMPLE_ADDR: u64 = sys::PERF_SAMPLE_ADDR as u64;
/// `PERF_SAMPLE_ID`: the event's id.
pub const SAMPLE_ID: u64 = sys::PERF_SAMPLE_ID as u64;
/// `PERF_SAMPLE_STREAM_ID`: the id of the event's parent, for inherited events.
pub const SAMPLE_STREAM_ID: u64 = sys::PERF_SAMPLE_STREAM_ID as u64;
/// `PERF_SAMPLE_CPU`: the CPU the sample was taken on.
pub const SAMPLE_CPU: u64 = sys::PERF_SAMPLE_CPU as u64;
/// `PERF_SAMPLE_PERIOD`: the sample period.
pub const SAMPLE_PERIOD: u64 = sys::PERF_SAMPLE_PERIOD as u64;
/// `PERF_SAMPLE_IDENTIFIER`: the event's id, first in the record (at a fixed offset
/// whatever else is sampled).
pub const SAMPLE_IDENTIFIER: u64 = sys::PERF_SAMPLE_IDENTIFIER as u64;

/// The fields of a `PERF_RECORD_SAMPLE` up to `PERF_SAMPLE_PERIOD`, in the kernel's order:
/// `IDENTIFIER`, `IP`, `TID`, `TIME`, `ADDR`, `ID`, `STREAM_ID`, `CPU`, `PERIOD`. A field
/// is `Some` when its bit is in the `sample_type` given to [`Sample::parse`]. Fields that
/// come later in the record (`READ`, `CALLCHAIN`, `RAW`, ...) are not decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// `PERF_SAMPLE_IP`.
    pub ip: Option<u64>,
    /// `PERF_SAMPLE_TID`: the process id.
    pub pid: Option<u32>,
    /// `PERF_SAMPLE_TID`: the thread id.
    pub tid: Option<u32>,
    /// `PERF_SAMPLE_TIME`, in nanoseconds of the event's clock.
    pub time: Option<u64>,
    /// `PERF_SAMPLE_ADDR`.
    pub addr: Option<u64>,
    /// `PERF_SAMPLE_IDENTIFIER` or `PERF_SAMPLE_ID` (the same value).
    pub id: Option<u64>,
    /// `PERF_SAMPLE_STREAM_ID`.
    pub stream_id: Option<u64>,
    /// `PERF_SAMPLE_CPU`.
    pub cpu: Option<u32>,
    /// `PERF_SAMPLE_PERIOD`.
    pub period: Option<u64>,
}

/// Reads the body left to right, 8 bytes at a time.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn next(&mut self) -> Option<[u8; 8]> {
        let (word, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(*word)
    }

    fn u64_if(&mut self, sample_type: u64, bit: u64) -> Option<Option<u64>> {
        if sample_type & bit == 0 {
            return Some(None);
        }
        self.next().map(|w| Some(u64::from_ne_bytes(w)))
    }

    fn u32_pair_if(&mut self, sample_type: u64, bit: u64) -> Option<Option<(u32, u32)>> {
        if sample_type & bit == 0 {
            return Some(None);
        }
        self.next()
            .map(|w| Some((u32::from_ne_bytes([w[0], w[1], w[2], w[3]]), u32::from_ne_bytes([w[4], w[5], w[6], w[7]]))))
    }
}

impl Sample {
    /// Decodes a `PERF_RECORD_SAMPLE` of an event opened with `sample_type` (see
    /// [`PerfEvent::sample_type`](super::PerfEvent::sample_type)). `None` if the record is
    /// not a sample or is too short for the fields `sample_type` names.
    ///
    /// ```
    /// use ringtrace::kernel::perf::{PerfRecord, Sample, RECORD_SAMPLE, SAMPLE_TID, SAMPLE_TIME};
    ///
    /// let mut bytes = vec![0u8; 24];
    /// bytes[0..4].copy_from_slice(&RECORD_SAMPLE.to_ne_bytes());
    /// bytes[6..8].copy_from_slice(&24u16.to_ne_bytes());
    /// bytes[8..12].copy_from_slice(&7u32.to_ne_bytes()); // pid
    /// bytes[12..16].copy_from_slice(&8u32.to_ne_bytes()); // tid
    /// bytes[16..24].copy_from_slice(&1234u64.to_ne_bytes()); // time
    /// let rec = PerfRecord { kind: RECORD_SAMPLE, misc: 0, pos: 0, bytes: &bytes };
    /// let s = Sample::parse(&rec, SAMPLE_TID | SAMPLE_TIME).unwrap();
    /// assert_eq!((s.pid, s.tid, s.time, s.ip), (Some(7), Some(8), Some(1234), None));
    /// ```
    pub fn parse(record: &PerfRecord<'_>, sample_type: u64) -> Option<Sample> {
        if record.kind != RECORD_SAMPLE {
            return None;
        }
        let mut r = Fields(record.body());
        let identifier = r.u64_if(sample_type, SAMPLE_IDENTIFIER)?;
        let ip = r.u64_if(sample_type, SAMPLE_IP)?;
        let tid = r.u32_pair_if(sample_type, SAMPLE_TID)?;
        let time = r.u64_if(sample_type, SAMPLE_TIME)?;
        let addr = r.u64_if(sample_type, SAMPLE_ADDR)?;
        let id = r.u64_if(sample_type, SAMPLE_ID)?;
        let stream_id = r.u64_if(sample_type, SAMPLE_STREAM_ID)?;
        let cpu = r.u32_pair_if(sample_type, SAMPLE_CPU)?;
        let period = r.u64_if(sample_type, SAMPLE_PERIOD)?;
        Some(Sample {
            ip,
            pid: tid.map(|t| t.0),
            tid: tid.map(|t| t.1),
            time,
            addr,
            id: identifier.or(id),
            stream_id,
            cpu: cpu.map(|c| c.0),
            period,
        })
    }
}
