//! The decoding core: walks over a perf data area and 64-bit ring positions. The area is
//! an [`Area`]: bytes in memory (`[u8]`: tests and fuzzing feed crafted images, and a
//! copied data area decodes the same way as a live one), or the live mapping
//! ([`DataArea`](super::map::DataArea)), which the kernel may write during the walk and
//! which is therefore only ever copied from, never lent as a `&[u8]`.
//!
//! The bytes are untrusted: every header is checked before its record is lent out, every
//! record lies inside the data area (a record that wraps around its end, or any record of
//! the live mapping, is copied into `scratch`), and every walk covers at most one data
//! area's size, advancing by at least 8 bytes a step, so it ends after at most
//! `len / 8` records.

use super::record::{PerfRecord, HEADER_SIZE};
use crate::error::{ConsumeError, CorruptReason, KernelError};

/// A data area a walk reads.
pub(super) trait Area {
    /// Its length in bytes (a walk checks it is a power of two of at least 8).
    fn size(&self) -> usize;

    /// Copies the bytes at offsets `off..off + out.len()` into `out` (`off + out.len()`
    /// is at most [`size`](Self::size): no wrapping here).
    fn copy_to(&self, off: usize, out: &mut [u8]);

    /// The bytes at offsets `off..off + len` in place, if this area can lend them (`None`
    /// also when the range is not inside the area): then they are copied instead.
    fn lend(&self, off: usize, len: usize) -> Option<&[u8]>;
}

/// An image in memory, that nothing writes while it is borrowed: records are lent in
/// place.
impl Area for [u8] {
    fn size(&self) -> usize {
        self.len()
    }
    fn copy_to(&self, off: usize, out: &mut [u8]) {
        out.copy_from_slice(&self[off..off + out.len()]);
    }
    fn lend(&self, off: usize, len: usize) -> Option<&[u8]> {
        self.get(off..off.checked_add(len)?)
    }
}

/// Checks the data area's length; returns it as the ring's size.
fn area_size<A: Area + ?Sized>(data: &A) -> Result<u64, KernelError> {
    let len = data.size();
    if len < HEADER_SIZE || !len.is_power_of_two() {
        return Err(KernelError::InvalidDataArea { len });
    }
    Ok(len as u64)
}

/// Copies the `out.len()` bytes (at most the area's size) at ring position `pos`,
/// wrapping around the end of the area.
#[inline(always)]
fn copy_wrapping<A: Area + ?Sized>(data: &A, pos: u64, out: &mut [u8]) {
    let off = (pos & (data.size() as u64 - 1)) as usize;
    let first = (data.size() - off).min(out.len());
    let (a, b) = out.split_at_mut(first);
    data.copy_to(off, a);
    data.copy_to(0, b);
}

/// The header at ring position `pos`, which may wrap around the end of the area (only a
/// misaligned position makes it wrap).
#[derive(Clone, Copy)]
struct Header {
    bytes: [u8; HEADER_SIZE],
}

impl Header {
    #[inline(always)]
    fn at<A: Area + ?Sized>(data: &A, pos: u64) -> Header {
        let mut bytes = [0u8; HEADER_SIZE];
        copy_wrapping(data, pos, &mut bytes);
        Header { bytes }
    }

    /// `(type, misc, size)`.
    #[inline(always)]
    fn fields(&self) -> (u32, u16, u16) {
        let h = &self.bytes;
        (
            u32::from_ne_bytes([h[0], h[1], h[2], h[3]]),
            u16::from_ne_bytes([h[4], h[5]]),
            u16::from_ne_bytes([h[6], h[7]]),
        )
    }
}

/// The record of `header.size` (`len`, at least the header's 8 bytes, at most
/// `data.size()`) bytes at ring position `pos`: in place where the area lends it, else
/// copied into `scratch` (also when it wraps around the end of the area). A copy starts
/// with `header`, the header the walk checked, even if the area changed since it was
/// read (the live mapping may), so a record's bytes always agree with its fields.
#[inline(always)]
fn bytes_at<'a, A: Area + ?Sized>(
    data: &'a A,
    pos: u64,
    header: Header,
    len: usize,
    scratch: &'a mut Vec<u8>,
) -> &'a [u8] {
    let off = (pos & (data.size() as u64 - 1)) as usize;
    if let Some(s) = data.lend(off, len) {
        return s;
    }
    if scratch.len() < len {
        scratch.resize(len, 0);
    }
    let out = &mut scratch[..len];
    copy_wrapping(data, pos, out);
    out[..HEADER_SIZE].copy_from_slice(&header.bytes);
    out
}

/// Checks a header's size against what kernel records can be; `available` is how many
/// bytes from the header's start may belong to records.
#[inline(always)]
fn check_size(size_of_area: u64, pos: u64, size: u16, available: u64) -> Result<(), KernelError> {
    let reason = if size == 0 {
        CorruptReason::Zero
    } else if (size as usize) < HEADER_SIZE {
        CorruptReason::TooSmall
    } else if size % 8 != 0 {
        CorruptReason::Unaligned
    } else if size as u64 > available {
        CorruptReason::PastEnd { available }
    } else {
        return Ok(());
    };
    Err(KernelError::Corrupt { offset: pos & (size_of_area - 1), pos, size: size as u64, reason })
}

/// Delivers the records of a forward ring from `*tail` up to `head`, oldest first.
///
/// `data` is the data area (a power of two of at least 8 bytes); `tail` and `head` are
/// the 64-bit positions `data_tail` and `data_head`. Returns the number of records
/// delivered. On return, `*tail` is the position after the last record delivered (a
/// record whose callback failed counts as delivered), whether the walk succeeded or not;
/// it is `head` after a complete walk.
///
/// Errors: [`KernelError::Overrun`] if `head - tail` is larger than the area (nothing is
/// walked); [`KernelError::Corrupt`] for a header of size 0, smaller than 8 bytes, not a
/// multiple of 8, or running past `head`; [`ConsumeError::Callback`] when `f` fails.
///
/// ```
/// use ringtrace::kernel::perf::walk_forward;
/// use std::convert::Infallible;
///
/// // Two records: a 16-byte one of type 9 and an 8-byte one of type 2.
/// let mut data = vec![0u8; 64];
/// data[0..4].copy_from_slice(&9u32.to_ne_bytes());
/// data[6..8].copy_from_slice(&16u16.to_ne_bytes());
/// data[16..20].copy_from_slice(&2u32.to_ne_bytes());
/// data[22..24].copy_from_slice(&8u16.to_ne_bytes());
/// let (mut tail, mut kinds) = (0, Vec::new());
/// let n = walk_forward(&data, &mut tail, 24, &mut Vec::new(), |rec| {
///     kinds.push((rec.kind, rec.bytes.len()));
///     Ok::<(), Infallible>(())
/// })?;
/// assert_eq!((n, tail), (2, 24));
/// assert_eq!(kinds, [(9, 16), (2, 8)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn walk_forward<E, F>(
    data: &[u8],
    tail: &mut u64,
    head: u64,
    scratch: &mut Vec<u8>,
    f: F,
) -> Result<usize, ConsumeError<E>>
where
    F: FnMut(PerfRecord<'_>) -> Result<(), E>,
{
    forward(data, tail, head, scratch, f)
}

/// [`walk_forward`] over any [`Area`].
pub(super) fn forward<A, E, F>(
    data: &A,
    tail: &mut u64,
    head: u64,
    scratch: &mut Vec<u8>,
    mut f: F,
) -> Result<usize, ConsumeError<E>>
where
    A: Area + ?Sized,
    F: FnMut(PerfRecord<'_>) -> Result<(), E>,
{
    let size = area_size(data)?;
    if head.wrapping_sub(*tail) > size {
        return Err(KernelError::Overrun { head, tail: *tail, size }.into());
    }
    let mut n = 0;
    // Each step moves `*tail` at least 8 bytes closer to `head`, which is at most `size`
    // bytes away: at most size / 8 steps.
    while *tail != head {
        let pos = *tail;
        let header = Header::at(data, pos);
        let (kind, misc, len) = header.fields();
        check_size(size, pos, len, head.wrapping_sub(pos))?;
        let bytes = bytes_at(data, pos, header, len as usize, scratch);
        *tail = pos.wrapping_add(len as u64);
        n += 1;
        f(PerfRecord { kind, misc, pos, bytes }).map_err(ConsumeError::Callback)?;
    }
    Ok(n)
}

/// Delivers the records of a backward ring (`write_backward`) from the newest, at `head`,
/// toward older ones, over at most `limit` bytes (clamped to the area's size).
///
/// `head` is `data_head`, the position of the newest record's first byte (the kernel
/// counts it down from 0, so it reads as a large number: `-head` bytes were written).
/// Older records follow the newest at higher positions. The walk stops at:
/// * a header of size 0: space the kernel never wrote (its pages start zeroed);
/// * a record that would run past `limit` bytes from `head`: with `limit` the area's
///   size, that is the oldest record, partly overwritten by the newest ones;
/// * `limit` itself.
///
/// Returns the number of records delivered, newest first. Errors:
/// [`KernelError::Corrupt`] for a header smaller than 8 bytes or not a multiple of 8;
/// [`ConsumeError::Callback`] when `f` fails (after it, nothing more is delivered).
///
/// ```
/// use ringtrace::kernel::perf::walk_backward;
/// use std::convert::Infallible;
///
/// // A 32-byte area: the kernel wrote a 16-byte record (type 1), then an 8-byte one
/// // (type 2), each below the previous: data_head = -24.
/// let mut data = vec![0u8; 32];
/// data[16..20].copy_from_slice(&1u32.to_ne_bytes());
/// data[22..24].copy_from_slice(&16u16.to_ne_bytes());
/// data[8..12].copy_from_slice(&2u32.to_ne_bytes());
/// data[14..16].copy_from_slice(&8u16.to_ne_bytes());
/// let mut kinds = Vec::new();
/// let n = walk_backward(&data, 0u64.wrapping_sub(24), 32, &mut Vec::new(), |rec| {
///     kinds.push(rec.kind);
///     Ok::<(), Infallible>(())
/// })?;
/// assert_eq!((n, kinds), (2, vec![2, 1])); // newest first; then zeroes: never written
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn walk_backward<E, F>(
    data: &[u8],
    head: u64,
    limit: u64,
    scratch: &mut Vec<u8>,
    f: F,
) -> Result<usize, ConsumeError<E>>
where
    F: FnMut(PerfRecord<'_>) -> Result<(), E>,
{
    backward(data, head, limit, scratch, f)
}

/// [`walk_backward`] over any [`Area`].
pub(super) fn backward<A, E, F>(
    data: &A,
    head: u64,
    limit: u64,
    scratch: &mut Vec<u8>,
    mut f: F,
) -> Result<usize, ConsumeError<E>>
where
    A: Area + ?Sized,
    F: FnMut(PerfRecord<'_>) -> Result<(), E>,
{
    let size = area_size(data)?;
    let limit = limit.min(size);
    let mut walked = 0u64;
    let mut n = 0;
    // Each step adds at least 8 to `walked`, which stays at most `limit`: at most
    // limit / 8 steps.
    while limit - walked >= HEADER_SIZE as u64 {
        let pos = head.wrapping_add(walked);
        let header = Header::at(data, pos);
        let (kind, misc, len) = header.fields();
        if len == 0 {
            break; // never written
        }
        let left = limit - walked;
        match check_size(size, pos, len, left) {
            Ok(()) => {}
            // The oldest record, partly overwritten by the newest: it ends past the
            // newest record's start.
            Err(KernelError::Corrupt { reason: CorruptReason::PastEnd { .. }, .. }) => break,
            Err(e) => return Err(e.into()),
        }
        let bytes = bytes_at(data, pos, header, len as usize, scratch);
        walked += len as u64;
        n += 1;
        f(PerfRecord { kind, misc, pos, bytes }).map_err(ConsumeError::Callback)?;
    }
    Ok(n)
}
