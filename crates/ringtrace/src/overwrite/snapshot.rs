//! [`Snapshot`]: a checked copy of an overwrite ring's records, walked both ways, read as
//! often as wanted, and written to and read back from a file.
//!
//! # File format
//!
//! A snapshot file is a 96-byte header followed by the ring's bytes from the oldest
//! record to the end of the newest, exactly as they were in the ring (BPF record format:
//! 8-byte headers, payloads padded to 8 bytes; records still being written when the
//! snapshot was taken keep their BUSY bit, discarded ones their DISCARD bit, and readers
//! skip both). All header fields are little-endian `u64`s except where noted:
//!
//! | offset | field |
//! |-------:|-------|
//! | 0  | magic `b"RTSNAP\0\x01"` |
//! | 8  | format version (`u32`, 2), then flags (`u32`: bit 0 = ring bytes are little-endian) |
//! | 16 | ring capacity in bytes |
//! | 24 | position of the oldest record |
//! | 32 | position of the end of the newest record |
//! | 40 | committed records held |
//! | 48 | committed records overwritten before the oldest one |
//! | 56 | committed records no snapshot held, overwritten since the previous one ([`Snapshot::missed`]) |
//! | 64 | records still being written (skipped) |
//! | 72 | length of the ring bytes that follow (`end - oldest`) |
//! | 80 | CRC32C of the ring bytes (`u32`), then 4 zero bytes |
//! | 88 | CRC32C of header bytes 0..88 (`u32`), then 4 zero bytes |
//!
//! A file is written once and read later, perhaps after a crash or a copy between
//! machines, so it carries checksums: CRC32C (Castagnoli), which detects every error of
//! up to 3 flipped bits and every burst of up to 32 bits in parts of this size. Reading
//! checks the header's checksum before it trusts any field, then every field against
//! the others, then the ring bytes' checksum, then every record header against the data;
//! a checksum that does not match is [`SnapshotError::Checksum`], naming the part and
//! its byte range; anything else inconsistent is [`SnapshotError::Format`]. Version 1
//! files (no checksums) are refused: take the snapshot again.

use std::fmt;
use std::io::{self, Read, Write};

use super::read::{parse, Capture, Found, Parse, Walk};
use crate::error::SnapshotError;

/// The file's first eight bytes.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"RTSNAP\0\x01";
const VERSION: u32 = 2;
const HEADER_LEN: usize = 96;
/// Offsets of the two checksums in the header.
const DATA_CRC_AT: usize = 80;
const HEADER_CRC_AT: usize = 88;
const LITTLE_ENDIAN: u32 = 1;

/// The records an overwrite ring held at one moment, oldest to newest, copied out and
/// checked: none is torn or half-overwritten. Made by
/// [`RingBuf::snapshot`](crate::RingBuf::snapshot), by [`Paused::snapshot`](crate::Paused::snapshot), or read
/// from a file with [`Snapshot::read_from`].
///
/// ```
/// use ringtrace::{FlightRecorder, Snapshot, Wakeup};
///
/// let ring = FlightRecorder::new(4096)?;
/// let mut p = ring.producer()?;
/// for i in 0..10u8 {
///     p.output(&[i; 3], Wakeup::Default)?;
/// }
/// let snap = ring.snapshot()?;
/// assert_eq!(snap.len(), 10);
/// assert_eq!(snap.iter().next_back(), Some(&[9u8; 3][..]));   // newest
/// assert_eq!(snap.iter().rev().nth(9), Some(&[0u8; 3][..]));   // oldest
///
/// let mut file = Vec::new();
/// snap.write_to(&mut file)?;
/// let back = Snapshot::read_from(&file[..])?;
/// assert!(back.iter().eq(snap.iter()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct Snapshot {
    pub(crate) cap: Capture,
    pub(crate) capacity: u64,
    pub(crate) retired_before: u64,
    pub(crate) missed: u64,
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("oldest_position", &self.oldest_position())
            .field("end_position", &self.end_position())
            .field("records", &self.len())
            .field("missed", &self.missed)
            .finish()
    }
}

impl Snapshot {
    /// An empty snapshot, to fill with
    /// [`RingBuf::snapshot_into`](crate::RingBuf::snapshot_into) (which reuses its memory).
    pub fn new() -> Self {
        Self::default()
    }

    /// A snapshot of records copied and parsed by another reader (a kernel ring's),
    /// which knows no counts of overwritten records.
    pub(crate) fn from_capture(cap: Capture, capacity: u64) -> Snapshot {
        Snapshot { cap, capacity, retired_before: 0, missed: 0 }
    }

    /// Committed records held.
    pub fn len(&self) -> usize {
        self.cap.found.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.cap.found.is_empty()
    }

    /// The records' payloads, oldest first; `.rev()` walks newest to oldest.
    pub fn iter(&self) -> SnapshotIter<'_> {
        SnapshotIter { snap: self, front: 0, back: self.cap.found.len() }
    }

    /// The records with their positions and their producers' process ids (the header's
    /// second word), oldest first.
    pub fn records(&self) -> impl DoubleEndedIterator<Item = crate::inspect::Record<'_>> + ExactSizeIterator + '_ {
        self.cap.found.iter().map(move |&f| {
            let at = (f.pos - self.cap.start) as usize;
            let header = u64::from_ne_bytes(self.cap.bytes[at..at + 8].try_into().expect("a whole header"));
            crate::inspect::Record { pos: f.pos, pid: crate::repair::aux(header), payload: self.cap.payload(f) }
        })
    }

    /// The records with their positions in the ring (bytes since it was created),
    /// oldest first.
    pub fn entries(&self) -> impl DoubleEndedIterator<Item = (u64, &[u8])> + ExactSizeIterator + '_ {
        self.cap.found.iter().map(move |&f| (f.pos, self.cap.payload(f)))
    }

    /// Position of the oldest record (the ring's `overwrite_pos` when it was taken).
    pub fn oldest_position(&self) -> u64 {
        self.cap.first
    }

    /// Position just past the newest record.
    pub fn end_position(&self) -> u64 {
        self.cap.end
    }

    /// Committed records the ring had overwritten before the oldest one held here: the
    /// ring's [`Stats::overwritten`](crate::Stats::overwritten) when the snapshot was
    /// taken. `overwritten_before() + len()` is every record committed before the
    /// snapshot's end (records still being written, [`unfinished`](Self::unfinished),
    /// aside).
    pub fn overwritten_before(&self) -> u64 {
        self.retired_before
    }

    /// Committed records that no snapshot of this ring held: overwritten after the
    /// previous snapshot's newest record and before this one's oldest (for the first
    /// snapshot: since the ring was created). Over a series of snapshots, the records
    /// they held (each counted once) plus their `missed()` add up to
    /// `overwritten_before() + len()` of the last. Exact when the previous snapshot
    /// had no [`unfinished`](Self::unfinished) records; otherwise a lower bound, short
    /// by at most that many (a record still being written then, and committed and
    /// overwritten since, cannot be told from one that was discarded).
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// Records that were still being written when the snapshot was taken (skipped).
    ///
    /// A record whose header was not yet written at all (its producer between claiming
    /// the space and marking it BUSY, a window of a few instructions unless it is
    /// preempted there) ends the snapshot: its length is unknown, so the records after
    /// it are left out, and not counted here.
    pub fn unfinished(&self) -> u64 {
        self.cap.unfinished
    }

    /// The ring's capacity.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The ring bytes from the oldest record to the end of the newest.
    fn ring_bytes(&self) -> &[u8] {
        let from = (self.cap.first - self.cap.start) as usize;
        let to = (self.cap.end - self.cap.start) as usize;
        &self.cap.bytes[from..to]
    }

    /// Bytes [`write_to`](Self::write_to) writes.
    pub fn file_len(&self) -> u64 {
        HEADER_LEN as u64 + (self.cap.end - self.cap.first)
    }

    /// Writes the snapshot in the file format (module docs); returns the bytes written.
    /// Go's `FlightRecorder.WriteTo`, in ring format.
    pub fn write_to<W: Write>(&self, mut w: W) -> io::Result<u64> {
        let data = self.ring_bytes();
        let flags = if cfg!(target_endian = "little") { LITTLE_ENDIAN } else { 0 };
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(&SNAPSHOT_MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&flags.to_le_bytes());
        let fields = [
            self.capacity,
            self.cap.first,
            self.cap.end,
            self.len() as u64,
            self.retired_before,
            self.missed,
            self.cap.unfinished,
            data.len() as u64,
        ];
        for (i, v) in fields.iter().enumerate() {
            h[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        h[DATA_CRC_AT..DATA_CRC_AT + 4].copy_from_slice(&crc32c::crc32c(data).to_le_bytes());
        let header_crc = crc32c::crc32c(&h[..HEADER_CRC_AT]);
        h[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&header_crc.to_le_bytes());
        w.write_all(&h)?;
        w.write_all(data)?;
        Ok(self.file_len())
    }

    /// Reads a snapshot written by [`write_to`](Self::write_to), checking it whole
    /// (checksums, fields, records: see the module docs), to the end of `r`: bytes
    /// after the records are an error too.
    pub fn read_from<R: Read>(mut r: R) -> Result<Snapshot, SnapshotError> {
        let mut h = [0u8; HEADER_LEN];
        // The magic and version first, so that a file of another kind or version is
        // named as such even when it is shorter than this version's header.
        read_exact(&mut r, &mut h[..16], "the header")?;
        if h[0..8] != SNAPSHOT_MAGIC {
            return Err(format_err("wrong magic: not a ringtrace snapshot file"));
        }
        let u32_at = |h: &[u8], at: usize| u32::from_le_bytes(h[at..at + 4].try_into().expect("4 bytes"));
        let version = u32_at(&h, 8);
        if version == 1 {
            return Err(format_err(
                "format version 1 has no checksums; this library reads version 2: take the snapshot again",
            ));
        }
        if version != VERSION {
            return Err(format_err(format!("format version {version}; this library reads version {VERSION}")));
        }
        read_exact(&mut r, &mut h[16..], "the header")?;
        let stored = u32_at(&h, HEADER_CRC_AT);
        let computed = crc32c::crc32c(&h[..HEADER_CRC_AT]);
        if stored != computed || u32_at(&h, HEADER_CRC_AT + 4) != 0 {
            return Err(SnapshotError::Checksum {
                part: "header",
                start: 0,
                end: HEADER_CRC_AT as u64,
                stored,
                computed,
            });
        }
        let u32_at = |at: usize| u32_at(&h, at);
        let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
        let flags = u32_at(12);
        let ours = if cfg!(target_endian = "little") { LITTLE_ENDIAN } else { 0 };
        if flags & !LITTLE_ENDIAN != 0 {
            return Err(format_err(format!("unknown flags {flags:#x}")));
        }
        if flags != ours {
            return Err(format_err("written on a machine of the other byte order"));
        }
        let [capacity, first, end, count, retired_before, overwritten, unfinished, data_len] =
            std::array::from_fn(|i| u64_at(16 + 8 * i));
        if !capacity.is_power_of_two() || !(16..=crate::MAX_CAPACITY).contains(&capacity) {
            return Err(format_err(format!("capacity {capacity} is not a power of two up to 4 GiB")));
        }
        if first % 8 != 0
            || data_len % 8 != 0
            || end < first
            || end - first != data_len
            || data_len > capacity
            || end > u64::MAX - capacity
        {
            return Err(format_err(format!(
                "positions {first}..{end} and data length {data_len} do not agree (capacity {capacity})"
            )));
        }
        // Read through `take`, so a header that claims gigabytes costs memory only for
        // the bytes the file really holds.
        let mut bytes = Vec::new();
        (&mut r).take(data_len).read_to_end(&mut bytes)?;
        if bytes.len() as u64 != data_len {
            return Err(format_err(format!("truncated in the records ({} of {data_len} bytes)", bytes.len())));
        }
        let (stored, computed) = (u32_at(DATA_CRC_AT), crc32c::crc32c(&bytes));
        if stored != computed || u32_at(DATA_CRC_AT + 4) != 0 {
            let (start, end) = (HEADER_LEN as u64, HEADER_LEN as u64 + data_len);
            return Err(SnapshotError::Checksum { part: "ring bytes", start, end, stored, computed });
        }
        let mut extra = [0u8; 1];
        if read_some(&mut r, &mut extra)? != 0 {
            return Err(format_err(format!(
                "bytes follow the records at offset {} (the header says the file ends there)",
                HEADER_LEN as u64 + data_len
            )));
        }
        let mut cap = Capture { bytes, start: first, first, end, ..Capture::default() };
        parse(Walk::Snapshot, capacity, end, false, &mut cap);
        match cap.stop {
            Parse::End if cap.end == end => {}
            Parse::Corrupt { pos, header } => {
                return Err(format_err(format!("record header {header:#018x} at position {pos} runs past the data")));
            }
            _ => return Err(format_err(format!("records end at position {}, not {end}", cap.end))),
        }
        if cap.found.len() as u64 != count || cap.unfinished != unfinished {
            return Err(format_err(format!(
                "the header says {count} records and {unfinished} unfinished; the data holds {} and {}",
                cap.found.len(),
                cap.unfinished
            )));
        }
        Ok(Snapshot { cap, capacity, retired_before, missed: overwritten })
    }
}

fn format_err(msg: impl Into<String>) -> SnapshotError {
    SnapshotError::Format(msg.into())
}

/// One `read`, retried when interrupted.
fn read_some<R: Read>(r: &mut R, buf: &mut [u8]) -> Result<usize, SnapshotError> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other.map_err(SnapshotError::Io),
        }
    }
}

fn read_exact<R: Read>(r: &mut R, buf: &mut [u8], what: &str) -> Result<(), SnapshotError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => format_err(format!("truncated in {what}")),
        _ => SnapshotError::Io(e),
    })
}

/// Iterator over a [`Snapshot`]'s payloads ([`Snapshot::iter`]); double-ended.
#[derive(Debug, Clone)]
pub struct SnapshotIter<'a> {
    snap: &'a Snapshot,
    front: usize,
    back: usize,
}

impl<'a> SnapshotIter<'a> {
    fn at(&self, i: usize) -> &'a [u8] {
        let f: Found = self.snap.cap.found[i];
        self.snap.cap.payload(f)
    }
}

impl<'a> Iterator for SnapshotIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        (self.front < self.back).then(|| {
            self.front += 1;
            self.at(self.front - 1)
        })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.back - self.front, Some(self.back - self.front))
    }
}

impl DoubleEndedIterator for SnapshotIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            self.at(self.back)
        })
    }
}

impl ExactSizeIterator for SnapshotIter<'_> {}
