//! What a perf ring read yields: the record lent to a callback and the record types it
//! names. Its errors are [`KernelError`](crate::error::KernelError) and
//! [`ConsumeError`](crate::error::ConsumeError).

/// Size of `struct perf_event_header` (`type` u32, `misc` u16, `size` u16).
pub const HEADER_SIZE: usize = 8;

/// `PERF_RECORD_LOST`: records the kernel dropped because a forward ring was full.
pub const RECORD_LOST: u32 = perf_event_open_sys::bindings::PERF_RECORD_LOST;
/// `PERF_RECORD_THROTTLE`: the kernel stopped sampling for the rest of a tick (too many
/// samples per tick, `kernel.perf_event_max_sample_rate`).
pub const RECORD_THROTTLE: u32 = perf_event_open_sys::bindings::PERF_RECORD_THROTTLE;
/// `PERF_RECORD_UNTHROTTLE`: sampling started again.
pub const RECORD_UNTHROTTLE: u32 = perf_event_open_sys::bindings::PERF_RECORD_UNTHROTTLE;
/// `PERF_RECORD_SAMPLE`: one sample; see [`Sample::parse`](super::Sample::parse).
pub const RECORD_SAMPLE: u32 = perf_event_open_sys::bindings::PERF_RECORD_SAMPLE;

/// One record of a perf ring, lent to a read callback.
///
/// `bytes` is the whole record, its 8-byte header included (`struct perf_event_header`:
/// `type` u32, `misc` u16, `size` u16, native byte order), exactly as the kernel wrote it,
/// so it can be stored as is; [`body`](Self::body) is what follows the header. A ring's
/// records are copied out of the mapping (which the kernel may write meanwhile) into the
/// ring's scratch buffer first; a walk over bytes in memory copies only a record that
/// wraps around the end of the data area. Either way `bytes` is contiguous.
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

/// A `/proc/sys` setting for an error's hint, or "unreadable".
pub(super) fn sysctl(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_else(|_| "unreadable".into())
}
