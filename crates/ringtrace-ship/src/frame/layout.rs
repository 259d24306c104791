//! A batch's layout: its magic, version, offsets and limits, what its records hold, and
//! why one is refused (see docs/formats.md).

/// A batch's first four bytes.
pub const MAGIC: [u8; 4] = *b"RTSB";
/// The newest format version, which this module writes for [`Content`] other than
/// plain records (version 1 for those) and reads with version 1.
pub const VERSION: u16 = 2;
/// Bytes of the version 1 header, before the names.
pub const HEADER_LEN: usize = 48;
/// The longest host name, in bytes.
pub const MAX_HOST_LEN: usize = 255;
/// The longest source name, in bytes.
pub const MAX_SOURCE_LEN: usize = 4096;
/// The longest record payload, in bytes.
pub const MAX_RECORD_LEN: usize = (1 << 30) - 1;

/// Offset of the `u32` count of records.
pub(super) const COUNT_AT: usize = 32;
/// Offset of the `u32` length of the records area.
pub(super) const RECORDS_LEN_AT: usize = 36;
/// Offset of the `u32` checksum, which the checksum skips.
pub(super) const CRC_AT: usize = 40;
/// Bytes of a record's header: len, flags, time.
pub const RECORD_HEADER_LEN: usize = 16;
/// A record's flag: it stands for a record too large to ship, whose length its
/// payload holds ([`Record::too_large`](crate::frame::Record::too_large)).
pub const TOO_LARGE: u32 = 1;

/// Where each record's time comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum TimeSource {
    /// The wall clock the agent read when it drained the record, for sources whose
    /// records carry no stamp (ring files).
    Drained = 0,
    /// The record's `CLOCK_MONOTONIC` stamp, converted on the host to wall-clock ns by
    /// adding the batch's `offset_ns` (`CLOCK_REALTIME − CLOCK_MONOTONIC` when the
    /// batch was made). The agent's channel sources say this for every stamped clock:
    /// a TSC stamp is first converted to `CLOCK_MONOTONIC` ns with the channel file's
    /// calibration, so the offset is against `CLOCK_MONOTONIC` either way.
    Monotonic = 1,
    /// The record's TSC stamp, converted on the host to wall-clock ns with the batch's
    /// `offset_ns`. Not written by this agent (see [`Monotonic`](Self::Monotonic)).
    Tsc = 2,
}

/// What a batch's payloads are (the header's content byte, version 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Content {
    /// Records, as their producers wrote them (version 1's only content).
    #[default]
    Records = 0,
    /// The records of one ring of a `ringtrace-tracing` recorder directory, decoded on
    /// the host with the directory's catalog: each one JSON object (UTF-8, one line),
    /// the object `ringtrace decode --format json` prints for an event, or for a span
    /// record its `span` (`new`, `record`, `enter`, `exit`, `close`, `follows`; `open`
    /// and `done` for a record that stands for a new span and its enter, or an exit
    /// and its close) and
    /// `id` (see `ringtrace_tracing::decode::text::entry_json`). The source is named
    /// `DIR#SLOT`, SLOT the ring's slot in the directory's channel file. So a fleet's
    /// events need nothing of their host to be read: any Kafka consumer reads them.
    Events = 1,
}

impl Content {
    pub(super) fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(Self::Records),
            1 => Some(Self::Events),
            _ => None,
        }
    }
}

impl TimeSource {
    pub(super) fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(Self::Drained),
            1 => Some(Self::Monotonic),
            2 => Some(Self::Tsc),
            _ => None,
        }
    }
}

/// Why a batch was not built or not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the header.
    #[error("batch of {len} bytes is shorter than the {HEADER_LEN}-byte header")]
    Short {
        /// Bytes of the message.
        len: usize,
    },
    /// The first four bytes (given) are not [`MAGIC`].
    #[error("not a ringtrace batch (magic {:02x} {:02x} {:02x} {:02x})", .0[0], .0[1], .0[2], .0[3])]
    Magic([u8; 4]),
    /// A version (given) other than 1 and [`VERSION`].
    #[error("batch version {0}, this reader knows 1 to {VERSION}")]
    Version(u16),
    /// Header flags set (given); no version defines any.
    #[error("batch flags {0:#06x} set, no version defines any")]
    Flags(u16),
    /// An unknown content byte (given) in a version 2 batch, or 0 there (plain records
    /// are written as version 1, so that a batch has one encoding).
    #[error("{}", content_message(*.0))]
    Content(u8),
    /// A reserved header byte is not zero.
    #[error("reserved batch header bytes are not zero")]
    Reserved,
    /// A header length (given) other than [`HEADER_LEN`].
    #[error("batch header of {0} bytes, versions 1 and 2 have {HEADER_LEN}")]
    HeaderLen(u16),
    /// An unknown time source byte (given).
    #[error("unknown time source {0}")]
    TimeSource(u8),
    /// A nonzero clock offset (given) with [`TimeSource::Drained`] times.
    #[error("clock offset {0} ns with drained times (must be 0)")]
    Offset(i64),
    /// A name, a payload or the records area is longer than the format allows.
    #[error("{what} of {len} bytes, at most {max} allowed")]
    TooLong {
        /// What is too long.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The most the format allows.
        max: usize,
    },
    /// A name (given) is not UTF-8.
    #[error("{0} name is not UTF-8")]
    Utf8(&'static str),
    /// The message's length is not the one its header implies (truncated or trailing bytes).
    #[error("batch is {len} bytes, its header says {expected}")]
    Length {
        /// Bytes the header implies.
        expected: u64,
        /// Bytes of the message.
        len: usize,
    },
    /// The stored checksum is not the one of the bytes.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The checksum in the header.
        stored: u32,
        /// The checksum of the bytes.
        computed: u32,
    },
    /// Padding bytes after the names or after a record's payload (given) are not zero.
    #[error("padding after the {0} is not zero")]
    Padding(&'static str),
    /// The records do not fit `count` and `records_len`, or a record's header is bad.
    #[error("bad batch records: {reason}")]
    Records {
        /// What is wrong.
        reason: &'static str,
    },
    /// `first_seq + count` does not fit in a `u64`.
    #[error("sequence numbers overflow: first {first_seq} + count {count} exceeds u64")]
    SeqOverflow {
        /// The first sequence number.
        first_seq: u64,
        /// The number of records.
        count: u64,
    },
}

/// [`FrameError::Content`]'s message: 0 is plain records, which version 2 does not hold.
fn content_message(c: u8) -> String {
    match c {
        0 => "plain records in a version 2 batch (they are written as version 1)".into(),
        c => format!("unknown batch content {c}"),
    }
}

/// Rounds `n` up to a multiple of 8.
pub(super) const fn pad8(n: usize) -> usize {
    (n + 7) & !7
}

/// The CRC32C of a message: bytes `[0, 40)` then `[44, end)`.
pub(super) fn checksum(bytes: &[u8]) -> u32 {
    let head = bytes.get(..CRC_AT).unwrap_or(&[]);
    let tail = bytes.get(CRC_AT + 4..).unwrap_or(&[]);
    crc32c::crc32c_append(crc32c::crc32c(head), tail)
}
