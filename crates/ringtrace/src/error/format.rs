//! [`FormatError`]: bytes that are not a valid ringtrace format.

use std::io;

use crate::format::control::{LAYOUT_VERSION, LAYOUT_VERSION_5};

/// Bytes of a file or of shared memory that are not a valid ringtrace format (a ring or
/// channel file read by [`inspect`](crate::inspect), a snapshot file read by
/// [`Snapshot::read_from`](crate::Snapshot::read_from)), or the I/O of reading them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// A read or open failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The error the system returned.
        #[source]
        source: io::Error,
    },
    /// The path is not a regular file (a FIFO, directory, device or socket).
    #[error("not a ring file: {path} is a {kind}, not a regular file")]
    NotRegular {
        /// The path given.
        path: String,
        /// What it is.
        kind: &'static str,
    },
    /// A ring image's offset ([`RingFile::open_at`](crate::inspect::RingFile::open_at)) is at or past the end of the file.
    #[error("ring image offset {offset} is at or past the end of the file ({len} bytes)")]
    OffsetPastEnd {
        /// The offset asked for.
        offset: u64,
        /// The file's length.
        len: u64,
    },
    /// The file is shorter than the control block.
    #[error("ring file is {len} bytes, the header alone needs {need}")]
    TooSmall {
        /// The file's length.
        len: u64,
        /// The control block's size.
        need: u64,
    },
    /// The magic is 0: the creating process has not finished initializing the ring.
    #[error("ring is not initialized yet (magic is 0): its creator is still setting it up, or died doing so")]
    Uninitialized,
    /// The first word is not the ring magic.
    #[error("not a ringtrace ring file: magic is {found:#018x}, expected \"RINGTRC\\0\"")]
    BadMagic {
        /// The first 8 bytes, as a little-endian number.
        found: u64,
    },
    /// A layout version this reader does not know.
    #[error(
        "layout version {found} is not supported (this ringtrace reads version {LAYOUT_VERSION}, and version \
         {LAYOUT_VERSION_5} for single-producer and overwrite rings)"
    )]
    Version {
        /// The version in the file.
        found: u32,
    },
    /// A header field has a value no ring has.
    #[error("invalid ring header: {field} is {value}, expected {expected}")]
    BadField {
        /// The field's name.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it may be.
        expected: &'static str,
    },
    /// The file is shorter than the header says.
    #[error("file is {len} bytes but capacity {capacity} needs {need} (truncated?)")]
    Truncated {
        /// The file's length.
        len: u64,
        /// The capacity in the header.
        capacity: u64,
        /// `data_offset + capacity`.
        need: u64,
    },
    /// The positions (or the header) contradict each other.
    #[error("positions are inconsistent: {0}")]
    Positions(String),
    /// The header changed after the file was opened.
    #[error("the ring header changed while reading (was the ring re-created?)")]
    HeaderChanged,
    /// [`RingFile::records_from`](crate::inspect::RingFile::records_from) was given a position past the newest record.
    #[error("position {from} is past the producer position {end} (was the ring re-created?)")]
    PastEnd {
        /// The position asked for.
        from: u64,
        /// The producer position.
        end: u64,
    },
    /// [`RingFile::records_from`](crate::inspect::RingFile::records_from) was given a position that is not a multiple of 8.
    #[error("position {0} is not a record boundary (positions are multiples of 8)")]
    Unaligned(u64),
    /// Producers rewrote the whole window of a live ring while it was copied, every time
    /// it was read for `waited` (measured): the reader gives up rather than return no
    /// records. Read again (a reader preempted for a whole lap of the ring).
    #[error("the ring was overwritten faster than it could be read (for {waited:?}); read it again")]
    Overwritten {
        /// How long the reader tried.
        waited: std::time::Duration,
    },
    /// Not enough memory to copy the records.
    #[error("cannot allocate {0} bytes to copy the ring's records")]
    OutOfMemory(u64),
    /// A snapshot file that is not one, or is damaged
    /// ([`Snapshot::read_from`](crate::Snapshot::read_from)).
    #[error("not a valid ringtrace snapshot file: {0}")]
    InvalidSnapshot(String),
    /// A snapshot file's checksum does not match its bytes: the file was damaged after
    /// it was written (a flipped bit, a torn write, a bad copy).
    #[error(
        "damaged ringtrace snapshot file: checksum mismatch in the {part} (bytes {start}..{end}): \
         CRC32C {computed:#010x} computed, {stored:#010x} stored"
    )]
    Checksum {
        /// Which part: `"header"` or `"ring bytes"`.
        part: &'static str,
        /// Its first byte's offset in the file.
        start: u64,
        /// Its end's offset in the file.
        end: u64,
        /// The checksum the file holds.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
}

impl FormatError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> FormatError {
        move |source| FormatError::Io { what: what.into(), source }
    }
}
