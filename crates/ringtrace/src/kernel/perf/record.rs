//! What a perf ring read yields: the record lent to a callback, the record types it
//! names, and the errors of opening, mapping and reading perf events.

use std::io;

/// Size of `struct perf_event_header` (`type` u32, `misc` u16, `size` u16).
pub const HEADER_SIZE: usize = 8;

/// `PERF_RECORD_LOST`: records the kernel dropped because a forward ring was full.
pub const RECORD_LOST: u32 = perf_event_open_sys::bindings::PERF_RECORD_LOST;
/// `PERF_RECORD_THROTTLE`: the kernel stopped sampling for the rest of a tick (too many
/// samples per tick, `kernel.perf_event_max_sample_rate`).
pub const RECORD_THROTTLE: u32 = perf_event_open_sys::bindings::PERF_RECORD_THROTTLE;
/// `PERF_RECORD_UNTHROTTLE`: sampling started again.
pub const RECORD_UNTHROTTLE: u32 = perf_event_open_sys::bindings::PERF_RECORD_UNTHROTTLE;
/// `PERF_RECORD_SAMPLE`: one sample; see [`crate::kernel::perf::Sample::parse`].
pub const RECORD_SAMPLE: u32 = perf_event_open_sys::bindings::PERF_RECORD_SAMPLE;

/// One record of a perf ring, lent to a read callback.
///
/// `bytes` is the whole record, its 8-byte header included (`struct perf_event_header`:
/// `type` u32, `misc` u16, `size` u16, native byte order), exactly as the kernel wrote it,
/// so it can be stored as is; [`body`](Self::body) is what follows the header. A record
/// that wraps around the end of the data area is copied into the ring's scratch buffer
/// first, so `bytes` is always contiguous.
#[derive(Clone, Copy, Debug)]
pub struct PerfRecord<'a> {
    /// `header.type`: `PERF_RECORD_SAMPLE` ([`RECORD_SAMPLE`]), [`RECORD_LOST`], ...
    pub kind: u32,
    /// `header.misc` (`PERF_RECORD_MISC_*`: CPU mode and flags).
    pub misc: u16,
    /// The 64-bit ring position of the record's first byte (its offset in the data area is
    /// this modulo the data area's size).
    pub pos: u64,
    /// The whole record, header included: `header.size` bytes.
    pub bytes: &'a [u8],
}

impl<'a> PerfRecord<'a> {
    /// The record after its 8-byte header.
    pub fn body(&self) -> &'a [u8] {
        self.bytes.get(HEADER_SIZE..).unwrap_or_default()
    }

    /// For a `PERF_RECORD_LOST` record, the number of records the kernel dropped
    /// (`struct { header; u64 id; u64 lost; }`); `None` for any other record or one too
    /// short.
    pub fn lost(&self) -> Option<u64> {
        if self.kind != RECORD_LOST {
            return None;
        }
        let b = self.body().get(8..16)?;
        Some(u64::from_ne_bytes(b.try_into().ok()?))
    }
}

/// Why a record header cannot be right (see [`PerfError::Corrupt`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CorruptReason {
    /// A zero size between the tail and the head of a forward ring: the kernel writes
    /// every byte there, so either the memory was changed or the positions are wrong.
    #[error("is zero where the kernel must have written a record")]
    Zero,
    /// Smaller than the 8-byte header itself.
    #[error("is smaller than the 8-byte record header")]
    TooSmall,
    /// The kernel writes records in multiples of 8 bytes.
    #[error("is not a multiple of 8 (the kernel writes 8-byte aligned records)")]
    Unaligned,
    /// The record would end past the head (forward) or past the data area's size.
    #[error("runs past the end of the written data ({available} bytes left there)")]
    PastEnd {
        /// Bytes between the record's start and the end of what may hold records.
        available: u64,
    },
}

/// Errors of opening, mapping and reading perf events.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfError {
    /// `perf_event_open(2)` failed.
    #[error("perf_event_open of the {event} software event failed: {source}; {hint}")]
    Open {
        /// The event asked for.
        event: &'static str,
        /// The system call's error.
        source: io::Error,
        /// What to do about it.
        hint: String,
    },
    /// The number of data pages is not a power of two from 1 up.
    #[error(
        "{pages} data pages is invalid: a perf ring has a power of two of data pages \
         (1, 2, 4, ...) after its metadata page, at most {max}"
    )]
    InvalidPages {
        /// What was asked for.
        pages: usize,
        /// The largest count allowed.
        max: usize,
    },
    /// `mmap(2)` of the event failed.
    #[error("mmap of {bytes} bytes of the perf event failed: {source}; {hint}")]
    Map {
        /// The length of the mapping asked for.
        bytes: usize,
        /// The system call's error.
        source: io::Error,
        /// What to do about it.
        hint: String,
    },
    /// The metadata page describes a data area this reader cannot use.
    #[error(
        "the perf metadata page gives a data area at offset {offset} of {size} bytes, which does not fit \
         the {mapped}-byte mapping or is not a power of two: the file descriptor is not a perf event's"
    )]
    Layout {
        /// `data_offset`.
        offset: u64,
        /// `data_size`.
        size: u64,
        /// Bytes mapped.
        mapped: usize,
    },
    /// Duplicating the event's file descriptor for the ring failed.
    #[error("duplicating the perf event's file descriptor failed: {0} (too many open files? raise RLIMIT_NOFILE)")]
    Dup(#[source] io::Error),
    /// A perf ioctl failed.
    #[error("ioctl {op} on the perf event failed: {source} (is the file descriptor a perf event's?)")]
    Ioctl {
        /// The ioctl (`PERF_EVENT_IOC_ENABLE`, ...).
        op: &'static str,
        /// Its error.
        source: io::Error,
    },
    /// A record header that the kernel cannot have written. Reading stops there.
    #[error("corrupt perf record header at data offset {offset} (ring position {pos}): size {size} {reason}")]
    Corrupt {
        /// Offset of the header in the data area.
        offset: u64,
        /// The 64-bit ring position of the header.
        pos: u64,
        /// `header.size` as read.
        size: u64,
        /// What is wrong with it.
        reason: CorruptReason,
    },
    /// `data_head - data_tail` is larger than the data area: the kernel never lets a
    /// writable ring get there, so the tail was changed behind the reader's back (or the
    /// image is not a forward ring's). Nothing was walked.
    #[error(
        "perf ring positions are inconsistent: data_head {head} - data_tail {tail} is more than \
         the {size}-byte data area (the ring was overwritten or the tail changed by someone else); \
         the reader skipped to the head"
    )]
    Overrun {
        /// `data_head`.
        head: u64,
        /// `data_tail`.
        tail: u64,
        /// Size of the data area.
        size: u64,
    },
    /// `data_head` moved the wrong way for this kind of ring.
    #[error(
        "data_head {head:#x} moved {moved} but this {ring} reads rings written {expected}: \
         open the event with backward({backward}) for a {ring}"
    )]
    Direction {
        /// `ForwardRing` or `BackwardRing`.
        ring: &'static str,
        /// `data_head` as read.
        head: u64,
        /// The direction `data_head` moved.
        moved: &'static str,
        /// The direction this ring reads.
        expected: &'static str,
        /// What [`crate::kernel::perf::EventBuilder::backward`] must be given.
        backward: bool,
    },
    /// A data area for the pure walks that is not a power of two of at least 8 bytes.
    #[error("a perf data area of {len} bytes is invalid: it must be a power of two of at least 8 bytes")]
    InvalidDataArea {
        /// Its length.
        len: usize,
    },
}

/// Why a read stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfReadError<E> {
    /// The callback returned this error. The record it was given counts as read; a
    /// forward ring's tail moves past it.
    #[error("perf record callback failed: {0}")]
    Callback(E),
    /// The ring's content or positions cannot be right, or an ioctl failed.
    #[error(transparent)]
    Perf(#[from] PerfError),
}

/// A `/proc/sys` setting for an error's hint, or "unreadable".
pub(super) fn sysctl(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_else(|_| "unreadable".into())
}
