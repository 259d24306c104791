//! Reading ring files as untrusted input: `ringtrace stat`, `tail` and `snapshot`.
//!
//! A ring file is the control block (8192 bytes, see the crate's layout: meta, positions,
//! counters) followed by the data area at `data_offset`. Any process that can write the
//! file can put anything in it, so this reader trusts none of it: it never maps the file
//! (a process that truncates it cannot make us fault), it reads with positioned reads
//! through [`Source`], checks every header field before using it, and every position
//! against the others. Whatever the bytes, the result is a value or an [`InspectError`]
//! with a one-line message; records that make no sense are skipped and counted, and the
//! walk stops at the first header that cannot be one a producer wrote. Work and memory
//! are bounded by the file's size: at most one copy of the data area is read per call.
//!
//! This module has no `unsafe` code.
//!
//! ```
//! use ringtrace::inspect::{image::ImageBuilder, RingFile, RingMode};
//!
//! // A byte image of a ring file (the test-image builder; a real ring file is read
//! // with `RingFile::open(path)`).
//! let image = ImageBuilder::new(4096, RingMode::Overwrite).record(b"hello").record(b"world").build();
//! let ring = RingFile::from_source(image)?;
//! assert_eq!(ring.header().capacity, 4096);
//! let state = ring.state()?;
//! assert_eq!(state.committed, 2);
//! let records = ring.records()?;
//! let payloads: Vec<&[u8]> = records.iter().map(|r| r.payload).collect();
//! assert_eq!(payloads, [&b"hello"[..], &b"world"[..]]);
//! # Ok::<(), ringtrace::inspect::InspectError>(())
//! ```
//!
//! A ring image inside a larger file (one of several rings in one file, at some
//! offset) is read through [`At`]: [`RingFile::open_at`], [`RingFile::from_source_at`].
//!
//! Reading a live ring: [`RingFile::records`] reads the positions, then the records,
//! then the positions again, and drops (and counts in
//! [`Records::gone_during_read`]) the records that the consumer or overwriting
//! producers reclaimed meanwhile, whose bytes may have changed under the copy.

#![cfg(not(loom))]
#![forbid(unsafe_code)]

pub mod channel;
pub mod image;
mod records;
mod source;
mod state;

use std::fmt;
use std::fs::File;
use std::io;
use std::path::Path;

pub use records::{Corrupt, Record, Records, RecordsIter, Unfinished, MAX_LISTED_UNFINISHED};
pub use source::{At, Source};
pub use state::{SlotInfo, State};

use crate::format::control::{
    CONTROL_SIZE, FLAG_FUTEX, KIND_MPSC, KIND_SPSC, KNOWN_FLAGS, LAYOUT_VERSION, MAGIC, MAX_CAPACITY, MAX_DATA_OFFSET,
    MIN_CAPACITY, MODE_DISCARD, MODE_OVERWRITE,
};
use crate::format::offsets::{self as fields, u32_at, u64_at};

/// Why a ring file could not be read. Every message is one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InspectError {
    /// A read or open failed.
    #[error("{what}: {source}")]
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
    /// A ring image's offset ([`RingFile::open_at`]) is at or past the end of the file.
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
    #[error("layout version {found} is not supported (this ringtrace reads version {LAYOUT_VERSION})")]
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
    /// [`RingFile::records_from`] was given a position past the newest record.
    #[error("position {from} is past the producer position {end} (was the ring re-created?)")]
    PastEnd {
        /// The position asked for.
        from: u64,
        /// The producer position.
        end: u64,
    },
    /// [`RingFile::records_from`] was given a position that is not a multiple of 8.
    #[error("position {0} is not a record boundary (positions are multiples of 8)")]
    Unaligned(u64),
    /// Not enough memory to copy the records.
    #[error("cannot allocate {0} bytes to copy the ring's records")]
    OutOfMemory(u64),
}

impl InspectError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> InspectError {
        move |source| InspectError::Io { what: what.into(), source }
    }
}

/// Producer kind of a ring ([`Header::kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RingKind {
    /// Multi-producer (code 1).
    Mpsc,
    /// Single-producer (code 2).
    Spsc,
}

impl RingKind {
    /// The code stored in the file.
    pub fn code(self) -> u32 {
        match self {
            RingKind::Mpsc => KIND_MPSC,
            RingKind::Spsc => KIND_SPSC,
        }
    }
    /// `"mpsc"` or `"spsc"`.
    pub fn name(self) -> &'static str {
        match self {
            RingKind::Mpsc => "mpsc",
            RingKind::Spsc => "spsc",
        }
    }
}

/// What a ring does when it is full ([`Header::mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RingMode {
    /// Refuse new records (code 1).
    Discard,
    /// Give up the oldest records: a flight recorder (code 2).
    Overwrite,
}

impl RingMode {
    /// The code stored in the file.
    pub fn code(self) -> u32 {
        match self {
            RingMode::Discard => MODE_DISCARD,
            RingMode::Overwrite => MODE_OVERWRITE,
        }
    }
    /// `"discard"` or `"overwrite"`.
    pub fn name(self) -> &'static str {
        match self {
            RingMode::Discard => "discard",
            RingMode::Overwrite => "overwrite",
        }
    }
}

impl fmt::Display for RingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for RingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The ring's fixed description (its `Meta` line), checked when the file was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Header {
    /// Layout version (always the one this reader supports).
    pub version: u32,
    /// Producer kind.
    pub kind: RingKind,
    /// Mode.
    pub mode: RingMode,
    /// Process id of the process that created the ring.
    pub creator_pid: u32,
    /// Bytes of the data area: a power of two from 4096 to 2^32.
    pub capacity: u64,
    /// Offset of the data area in the file.
    pub data_offset: u64,
    /// Wakeup policy: 0 = when the consumer has caught up; `u64::MAX` = forced wakeups
    /// only; `u64::MAX - 1` = every half ring; otherwise a watermark in bytes.
    pub watermark: u64,
    /// Flags (bit 0: the doorbell is a futex, for rings shared between processes).
    pub flags: u32,
    /// The clock record timestamps use (0: none), as the library's code.
    pub clock: u32,
    /// When the ring was created, in nanoseconds since the Unix epoch.
    pub created_ns: u64,
    /// Overwrite mode: bytes a producer that overwrites gives up beyond its need.
    pub retire_ahead: u64,
}

impl Header {
    /// Whether the doorbell is the futex word (rings shared between processes).
    pub fn futex(&self) -> bool {
        self.flags & FLAG_FUTEX != 0
    }

    /// Parses and checks the control block's meta line; `len` is the file's length.
    fn parse(block: &[u8], len: u64) -> Result<Header, InspectError> {
        let magic = u64_at(block, fields::MAGIC);
        if magic == 0 {
            return Err(InspectError::Uninitialized);
        }
        if magic != MAGIC {
            return Err(InspectError::BadMagic { found: u64::from_le_bytes(magic.to_ne_bytes()) });
        }
        let version = u32_at(block, fields::VERSION);
        if version != LAYOUT_VERSION {
            return Err(InspectError::Version { found: version });
        }
        let bad = |field, value: u64, expected| InspectError::BadField { field, value, expected };
        let kind = match u32_at(block, fields::KIND) {
            KIND_MPSC => RingKind::Mpsc,
            KIND_SPSC => RingKind::Spsc,
            k => return Err(bad("kind", k.into(), "1 (mpsc) or 2 (spsc)")),
        };
        let mode = match u32_at(block, fields::MODE) {
            MODE_DISCARD => RingMode::Discard,
            MODE_OVERWRITE => RingMode::Overwrite,
            m => return Err(bad("mode", m.into(), "1 (discard) or 2 (overwrite)")),
        };
        let capacity = u64_at(block, fields::CAPACITY);
        if !capacity.is_power_of_two() || !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) {
            return Err(bad("capacity", capacity, "a power of two from 4096 to 4294967296"));
        }
        let data_offset = u64_at(block, fields::DATA_OFFSET);
        if !data_offset.is_power_of_two() || !(CONTROL_SIZE as u64..=MAX_DATA_OFFSET).contains(&data_offset) {
            return Err(bad("data offset", data_offset, "8192 rounded up to the page size"));
        }
        let flags = u32_at(block, fields::FLAGS);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(bad("flags", flags.into(), "a combination of the known flags (1: futex)"));
        }
        // Both at most 2^32 + 2^20: no overflow.
        let need = data_offset + capacity;
        if len < need {
            return Err(InspectError::Truncated { len, capacity, need });
        }
        Ok(Header {
            version,
            kind,
            mode,
            creator_pid: u32_at(block, fields::CREATOR_PID),
            capacity,
            data_offset,
            watermark: u64_at(block, fields::WATERMARK),
            flags,
            clock: u32_at(block, fields::CLOCK),
            created_ns: u64_at(block, fields::CREATED_NS),
            retire_ahead: u64_at(block, fields::RETIRE_AHEAD),
        })
    }
}

/// A ring file (or a byte image of one) opened for reading, its header checked.
///
/// Cheap to keep open: every [`state`](Self::state) or [`records`](Self::records) call
/// reads the file again.
#[derive(Debug)]
pub struct RingFile<S> {
    source: S,
    header: Header,
    /// The meta line as it was when opened: a later read that finds it changed fails
    /// with [`InspectError::HeaderChanged`] instead of using a stale capacity.
    meta: Vec<u8>,
}

impl RingFile<File> {
    /// Opens the ring file at `path` read-only and checks its header.
    ///
    /// Refuses anything but a regular file (symbolic links are followed) before reading
    /// it: a FIFO, a directory, a device such as `/dev/zero`. The file is opened with
    /// `O_NONBLOCK`, so a path swapped for a FIFO after the check cannot block either.
    ///
    /// ```no_run
    /// use ringtrace::inspect::RingFile;
    ///
    /// let ring = RingFile::open("/dev/shm/app.ring")?;
    /// println!("{} bytes, {} mode", ring.header().capacity, ring.header().mode);
    /// # Ok::<(), ringtrace::inspect::InspectError>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<RingFile<File>, InspectError> {
        RingFile::from_source(open_regular(path.as_ref())?)
    }
}

impl RingFile<At<File>> {
    /// Opens the ring image at `offset` in the file at `path` (one of several rings in
    /// one file), with [`open`](RingFile::open)'s checks of the file and
    /// [`from_source_at`](RingFile::from_source_at)'s of the offset.
    pub fn open_at(path: impl AsRef<Path>, offset: u64) -> Result<RingFile<At<File>>, InspectError> {
        RingFile::from_source_at(open_regular(path.as_ref())?, offset)
    }
}

/// Opens `path` read-only and nonblocking, refusing anything but a regular file.
fn open_regular(path: &Path) -> Result<File, InspectError> {
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(InspectError::io(format!("cannot open {shown}")))?;
    check_regular(&meta, &shown)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(InspectError::io(format!("cannot open {shown}")))?;
    let meta = file.metadata().map_err(InspectError::io(format!("cannot stat {shown}")))?;
    check_regular(&meta, &shown)?;
    Ok(file)
}

fn check_regular(meta: &std::fs::Metadata, path: &str) -> Result<(), InspectError> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    };
    Err(InspectError::NotRegular { path: path.to_owned(), kind })
}

impl<S: Source> RingFile<S> {
    /// Reads and checks the header of a ring held by `source` (a [`File`], a
    /// `Vec<u8>`, a `&[u8]`, or your own [`Source`]).
    pub fn from_source(source: S) -> Result<RingFile<S>, InspectError> {
        let len = source.size().map_err(InspectError::io("cannot get the ring file's size"))?;
        if len < CONTROL_SIZE as u64 {
            return Err(InspectError::TooSmall { len, need: CONTROL_SIZE as u64 });
        }
        let mut meta = vec![0u8; fields::META_LEN];
        source.read_at(0, &mut meta).map_err(InspectError::io("cannot read the ring header"))?;
        let header = Header::parse(&meta, len)?;
        Ok(RingFile { source, header, meta })
    }

    /// Reads and checks the header of the ring image at `offset` in `source` (one of
    /// several rings in one file): the ring is read through [`At`], so every offset and
    /// length the reader checks is relative to the image. An offset at or past the end
    /// of the source is [`InspectError::OffsetPastEnd`]; the image may be followed by
    /// other bytes.
    ///
    /// ```
    /// use ringtrace::inspect::{image::ImageBuilder, InspectError, RingFile, RingMode};
    ///
    /// let mut file = vec![0u8; 4096]; // a header page of the file's own
    /// file.extend(ImageBuilder::new(4096, RingMode::Overwrite).record(b"x").build());
    /// let ring = RingFile::from_source_at(&file, 4096)?;
    /// assert_eq!(ring.state()?.committed, 1);
    /// let past = RingFile::from_source_at(&file, 1 << 20).unwrap_err();
    /// assert!(matches!(past, InspectError::OffsetPastEnd { .. }));
    /// # Ok::<(), InspectError>(())
    /// ```
    pub fn from_source_at(source: S, offset: u64) -> Result<RingFile<At<S>>, InspectError> {
        let len = source.size().map_err(InspectError::io("cannot get the ring file's size"))?;
        if offset >= len {
            return Err(InspectError::OffsetPastEnd { offset, len });
        }
        RingFile::from_source(At::new(source, offset))
    }

    /// The header, as checked when the file was opened.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The source the ring is read from.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Reads the control block again and checks that its header is the one opened.
    fn read_control(&self) -> Result<Vec<u8>, InspectError> {
        let mut block = vec![0u8; CONTROL_SIZE];
        self.source.read_at(0, &mut block).map_err(InspectError::io("cannot read the ring's control block"))?;
        if block[..fields::META_LEN] != self.meta[..] {
            return Err(InspectError::HeaderChanged);
        }
        Ok(block)
    }
}

#[cfg(test)]
mod tests;
