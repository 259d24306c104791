//! The batch framing: one Kafka message value holds one batch, many records of one
//! source of one host, each with its sequence number and a wall-clock time.
//!
//! # Format, versions 1 and 2
//!
//! All integers are little-endian. A batch is a 48-byte header, the host and source
//! names, then the records:
//!
//! | offset | size | field | value |
//! |-------:|-----:|-------|-------|
//! | 0  | 4 | magic       | `b"RTSB"` ([`MAGIC`]) |
//! | 4  | 2 | version     | `u16`, 1 or 2 ([`VERSION`]) |
//! | 6  | 2 | header_len  | `u16`, 48 ([`HEADER_LEN`]); any other value is refused |
//! | 8  | 2 | flags       | `u16`, 0: no version defines a flag, and any set bit is refused |
//! | 10 | 1 | time_source | `u8`: 0 drained, 1 monotonic, 2 TSC ([`TimeSource`]); other values are refused |
//! | 11 | 1 | content     | `u8`: what the records are ([`Content`]); version 1: 0 (reserved) |
//! | 12 | 2 | host_len    | `u16`, at most 255 ([`MAX_HOST_LEN`]) |
//! | 14 | 2 | source_len  | `u16`, at most 4096 ([`MAX_SOURCE_LEN`]) |
//! | 16 | 8 | first_seq   | `u64`, the sequence number of the first record |
//! | 24 | 8 | offset_ns   | `i64`, wall clock − source clock in ns; 0 for drained times |
//! | 32 | 4 | count       | `u32`, records in the batch |
//! | 36 | 4 | records_len | `u32`, bytes of the records area |
//! | 40 | 4 | crc32c      | `u32`, CRC32C (Castagnoli) of bytes `[0, 40)` followed by bytes `[44, end)` |
//! | 44 | 4 | reserved    | 0 |
//! | 48 | host_len + source_len | names | the host's name, then the source's, both UTF-8, then zero bytes to a multiple of 8 |
//!
//! Then `count` records fill exactly `records_len` bytes, each one:
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0  | 4   | len: `u32`, payload bytes, at most [`MAX_RECORD_LEN`] |
//! | 4  | 4   | flags: `u32`, 0, or [`TOO_LARGE`] (bit 0); other bits are refused |
//! | 8  | 8   | time_ns: `u64`, wall-clock ns since the Unix epoch |
//! | 16 | len | payload, then zero bytes to a multiple of 8 |
//!
//! Version 2 differs from version 1 only in the content byte: version 1 reserves it
//! (0, plain records), version 2 names what the payloads are ([`Content`]): plain
//! records (0, refused there: they are written as version 1) or events, the records of
//! a `ringtrace-tracing` recorder decoded on the host, each a JSON object (1); other
//! values are refused. A writer writes version 1 for
//! plain records, so that a version 1 reader reads every batch it can understand, and
//! refuses the others by their version.
//!
//! A record with [`TOO_LARGE`] set stands for one its agent could not ship: alone in a
//! batch it would have passed the largest message the agent sends (Kafka refuses
//! messages above a limit: the producer's `message.max.bytes`, 1,000,000 bytes by
//! default, and the topic's `max.message.bytes`). Its `len` is 8 and its payload is the
//! record's length (`u64`); nothing else of it travels. It keeps its sequence number,
//! so a reader counts it and sees no gap.
//!
//! The record with index `i` has sequence number `first_seq + i`, and
//! `first_seq + count` fits in a `u64`. The message ends exactly after the records:
//! it is `48 + pad8(host_len + source_len) + records_len` bytes, and trailing bytes are
//! refused, as are padding or reserved bytes that are not zero.
//!
//! # Why this shape
//!
//! The records area is close to the ring's own bytes (8-byte aligned records behind a
//! fixed header), so draining a ring into a batch is a copy per record and no
//! per-record allocation. The padding, the repeated header fields and the times cost
//! little on the wire: Kafka compresses its record batches with lz4 or zstd, which
//! squeeze zero runs and slowly changing times. A batch names its host and source once,
//! and each record has its own sequence number, so a reader drops the duplicates that
//! an agent restarted after a crash resends by (host, source, sequence).
//!
//! # Checks
//!
//! [`Batch::decode`] checks the whole message before it returns: the magic, the
//! version (before anything a later version may lay out differently), the header length,
//! the total length, the checksum, then every field, the names' UTF-8, and every
//! record's length, flags and padding. Iterating over [`Batch::records`] afterwards
//! cannot fail. The checksum catches every changed byte (CRC32C detects every burst of
//! up to 32 bits); the field checks refuse what a faulty writer checksummed. A later
//! version that changes the layout changes [`VERSION`]; this reader refuses it with
//! [`FrameError::Version`] rather than misreading it.

use std::fmt;

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
const COUNT_AT: usize = 32;
/// Offset of the `u32` length of the records area.
const RECORDS_LEN_AT: usize = 36;
/// Offset of the `u32` checksum, which the checksum skips.
const CRC_AT: usize = 40;
/// Bytes of a record's header: len, flags, time.
pub const RECORD_HEADER_LEN: usize = 16;
/// A record's flag: it stands for a record too large to ship, whose length its
/// payload holds ([`Record::too_large`]).
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
    /// record its `span` (`new`, `record`, `enter`, `exit`, `close`, `follows`) and
    /// `id` (see `ringtrace_tracing::decode::text::entry_json`). The source is named
    /// `DIR#SLOT`, SLOT the ring's slot in the directory's channel file. So a fleet's
    /// events need nothing of their host to be read: any Kafka consumer reads them.
    Events = 1,
}

impl Content {
    fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(Self::Records),
            1 => Some(Self::Events),
            _ => None,
        }
    }
}

impl TimeSource {
    fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(Self::Drained),
            1 => Some(Self::Monotonic),
            2 => Some(Self::Tsc),
            _ => None,
        }
    }
}

/// Why a batch was not built or not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Fewer bytes than the header.
    Short {
        /// Bytes of the message.
        len: usize,
    },
    /// The first four bytes (given) are not [`MAGIC`].
    Magic([u8; 4]),
    /// A version (given) other than 1 and [`VERSION`].
    Version(u16),
    /// Header flags set (given); no version defines any.
    Flags(u16),
    /// An unknown content byte (given) in a version 2 batch, or 0 there (plain records
    /// are written as version 1, so that a batch has one encoding).
    Content(u8),
    /// A reserved header byte is not zero.
    Reserved,
    /// A header length (given) other than [`HEADER_LEN`].
    HeaderLen(u16),
    /// An unknown time source byte (given).
    TimeSource(u8),
    /// A nonzero clock offset (given) with [`TimeSource::Drained`] times.
    Offset(i64),
    /// A name, a payload or the records area is longer than the format allows.
    TooLong {
        /// What is too long.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The most the format allows.
        max: usize,
    },
    /// A name (given) is not UTF-8.
    Utf8(&'static str),
    /// The message's length is not the one its header implies (truncated or trailing bytes).
    Length {
        /// Bytes the header implies.
        expected: u64,
        /// Bytes of the message.
        len: usize,
    },
    /// The stored checksum is not the one of the bytes.
    Checksum {
        /// The checksum in the header.
        stored: u32,
        /// The checksum of the bytes.
        computed: u32,
    },
    /// Padding bytes after the names or after a record's payload (given) are not zero.
    Padding(&'static str),
    /// The records do not fit `count` and `records_len`, or a record's header is bad.
    Records {
        /// What is wrong.
        reason: &'static str,
    },
    /// `first_seq + count` does not fit in a `u64`.
    SeqOverflow {
        /// The first sequence number.
        first_seq: u64,
        /// The number of records.
        count: u64,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Short { len } => write!(f, "batch of {len} bytes is shorter than the {HEADER_LEN}-byte header"),
            Self::Magic(m) => {
                write!(f, "not a ringtrace batch (magic {:02x} {:02x} {:02x} {:02x})", m[0], m[1], m[2], m[3])
            }
            Self::Version(v) => write!(f, "batch version {v}, this reader knows 1 to {VERSION}"),
            Self::Flags(x) => write!(f, "batch flags {x:#06x} set, no version defines any"),
            Self::Content(0) => f.write_str("plain records in a version 2 batch (they are written as version 1)"),
            Self::Content(c) => write!(f, "unknown batch content {c}"),
            Self::Reserved => write!(f, "reserved batch header bytes are not zero"),
            Self::HeaderLen(n) => write!(f, "batch header of {n} bytes, versions 1 and 2 have {HEADER_LEN}"),
            Self::TimeSource(b) => write!(f, "unknown time source {b}"),
            Self::Offset(o) => write!(f, "clock offset {o} ns with drained times (must be 0)"),
            Self::TooLong { what, len, max } => write!(f, "{what} of {len} bytes, at most {max} allowed"),
            Self::Utf8(what) => write!(f, "{what} name is not UTF-8"),
            Self::Length { expected, len } => write!(f, "batch is {len} bytes, its header says {expected}"),
            Self::Checksum { stored, computed } => {
                write!(f, "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")
            }
            Self::Padding(what) => write!(f, "padding after the {what} is not zero"),
            Self::Records { reason } => write!(f, "bad batch records: {reason}"),
            Self::SeqOverflow { first_seq, count } => {
                write!(f, "sequence numbers overflow: first {first_seq} + count {count} exceeds u64")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Rounds `n` up to a multiple of 8.
const fn pad8(n: usize) -> usize {
    (n + 7) & !7
}

/// The CRC32C of a message: bytes `[0, 40)` then `[44, end)`.
fn checksum(bytes: &[u8]) -> u32 {
    let head = bytes.get(..CRC_AT).unwrap_or(&[]);
    let tail = bytes.get(CRC_AT + 4..).unwrap_or(&[]);
    crc32c::crc32c_append(crc32c::crc32c(head), tail)
}

/// Builds one message: a header, the names, then records appended one by one.
#[derive(Clone, Debug)]
pub struct BatchWriter {
    buf: Vec<u8>,
    records_at: usize,
    first_seq: u64,
    count: u32,
}

impl BatchWriter {
    /// Starts a batch of `source`'s records on `host`, the first with sequence number
    /// `first_seq`. `offset_ns` is wall clock − source clock in ns, and must be 0 with
    /// [`TimeSource::Drained`].
    ///
    /// Errs with [`FrameError::TooLong`] if `host` is longer than [`MAX_HOST_LEN`] or
    /// `source` longer than [`MAX_SOURCE_LEN`] bytes, and with [`FrameError::Offset`] if
    /// drained times come with a nonzero offset.
    pub fn new(
        host: &str,
        source: &str,
        first_seq: u64,
        time_source: TimeSource,
        offset_ns: i64,
    ) -> Result<Self, FrameError> {
        let (host_len, source_len) =
            (name_len("host", host, MAX_HOST_LEN)?, name_len("source", source, MAX_SOURCE_LEN)?);
        if time_source == TimeSource::Drained && offset_ns != 0 {
            return Err(FrameError::Offset(offset_ns));
        }
        let records_at = HEADER_LEN + pad8(host.len() + source.len());
        let mut buf = Vec::with_capacity(records_at + 4096);
        buf.extend_from_slice(&MAGIC);
        buf.extend_from_slice(&1u16.to_le_bytes());
        buf.extend_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        buf.extend_from_slice(&0u16.to_le_bytes());
        buf.extend_from_slice(&[time_source as u8, 0]);
        buf.extend_from_slice(&host_len.to_le_bytes());
        buf.extend_from_slice(&source_len.to_le_bytes());
        buf.extend_from_slice(&first_seq.to_le_bytes());
        buf.extend_from_slice(&offset_ns.to_le_bytes());
        // count, records_len and crc32c (filled in by `finish`), then the reserved zeros.
        buf.extend_from_slice(&[0; 16]);
        buf.extend_from_slice(host.as_bytes());
        buf.extend_from_slice(source.as_bytes());
        buf.resize(records_at, 0);
        Ok(Self { buf, records_at, first_seq, count: 0 })
    }

    /// Says what the batch's payloads are ([`Content`]): a batch of other content than
    /// plain records is written as version 2.
    pub fn with_content(mut self, content: Content) -> Self {
        let version = if content == Content::Records { 1 } else { VERSION };
        self.buf[4..6].copy_from_slice(&version.to_le_bytes());
        self.buf[11] = content as u8;
        self
    }

    /// Appends a record: `time_ns` is wall-clock ns since the Unix epoch.
    ///
    /// Errs with [`FrameError::TooLong`] if `payload` is longer than [`MAX_RECORD_LEN`]
    /// or the records would no longer fit the `u32` records length (start another
    /// batch), and with [`FrameError::SeqOverflow`] if the record's sequence number
    /// would leave no next one in a `u64`. The batch is unchanged when it errs.
    pub fn push(&mut self, time_ns: u64, payload: &[u8]) -> Result<(), FrameError> {
        self.append(time_ns, 0, payload)
    }

    /// Appends a [`TOO_LARGE`] marker in place of a record of `len` bytes that is not
    /// shipped; errs as [`push`](Self::push) does.
    pub fn push_too_large(&mut self, time_ns: u64, len: u64) -> Result<(), FrameError> {
        self.append(time_ns, TOO_LARGE, &len.to_le_bytes())
    }

    /// Bytes of a batch of `host` and `source` holding one record of `len` bytes.
    pub fn alone(host: &str, source: &str, len: usize) -> usize {
        HEADER_LEN + pad8(host.len() + source.len()) + RECORD_HEADER_LEN + pad8(len)
    }

    fn append(&mut self, time_ns: u64, flags: u32, payload: &[u8]) -> Result<(), FrameError> {
        let len = payload.len();
        if len > MAX_RECORD_LEN {
            return Err(FrameError::TooLong { what: "record payload", len, max: MAX_RECORD_LEN });
        }
        let records_len = (self.buf.len() - self.records_at) as u64 + (RECORD_HEADER_LEN + pad8(len)) as u64;
        if records_len > u64::from(u32::MAX) {
            let len = usize::try_from(records_len).unwrap_or(usize::MAX);
            return Err(FrameError::TooLong { what: "batch records", len, max: u32::MAX as usize });
        }
        let count = u64::from(self.count) + 1;
        if self.first_seq.checked_add(count).is_none() {
            return Err(FrameError::SeqOverflow { first_seq: self.first_seq, count });
        }
        self.buf.reserve(RECORD_HEADER_LEN + pad8(len));
        let mut head = [0u8; RECORD_HEADER_LEN];
        head[..4].copy_from_slice(&(len as u32).to_le_bytes());
        head[4..8].copy_from_slice(&flags.to_le_bytes());
        head[8..].copy_from_slice(&time_ns.to_le_bytes());
        self.buf.extend_from_slice(&head);
        self.buf.extend_from_slice(payload);
        self.buf.resize(self.buf.len() + (pad8(len) - len), 0);
        // Fits: at most u32::MAX / 16 records fit in the records length checked above.
        self.count += 1;
        Ok(())
    }

    /// Records appended so far.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Bytes of the message so far, header included.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether no record was appended (the message still has its header and names).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The sequence number the next record would have: `first_seq + count`.
    pub fn next_seq(&self) -> u64 {
        // Cannot overflow: `push` refuses a record that would leave no next number.
        self.first_seq.saturating_add(u64::from(self.count))
    }

    /// Fills in the count, the records length and the checksum, and returns the message.
    pub fn finish(mut self) -> Vec<u8> {
        let records_len = (self.buf.len() - self.records_at) as u32;
        self.buf[COUNT_AT..COUNT_AT + 4].copy_from_slice(&self.count.to_le_bytes());
        self.buf[RECORDS_LEN_AT..RECORDS_LEN_AT + 4].copy_from_slice(&records_len.to_le_bytes());
        let crc = checksum(&self.buf);
        self.buf[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        self.buf
    }
}

/// Checks a name's length and returns it as the header's `u16`.
fn name_len(what: &'static str, name: &str, max: usize) -> Result<u16, FrameError> {
    match u16::try_from(name.len()) {
        Ok(n) if name.len() <= max => Ok(n),
        _ => Err(FrameError::TooLong { what, len: name.len(), max }),
    }
}

/// A checked batch: its header's fields, and its records by [`Batch::records`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch<'a> {
    /// The host the records come from.
    pub host: &'a str,
    /// The source (ring) on that host the records come from.
    pub source: &'a str,
    /// The sequence number of the first record.
    pub first_seq: u64,
    /// The number of records.
    pub count: u32,
    /// Where the records' times come from.
    pub time_source: TimeSource,
    /// What the payloads are ([`Content::Records`] in a version 1 batch).
    pub content: Content,
    /// Wall clock − source clock in ns, with which the host converted the records'
    /// stamps; 0 for [`TimeSource::Drained`].
    pub offset_ns: i64,
    records: &'a [u8],
}

/// Little-endian integers at constant offsets of the header.
fn u16_at(h: &[u8; HEADER_LEN], at: usize) -> u16 {
    u16::from_le_bytes([h[at], h[at + 1]])
}
fn u32_at(h: &[u8; HEADER_LEN], at: usize) -> u32 {
    u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]])
}
fn u64_at(h: &[u8; HEADER_LEN], at: usize) -> u64 {
    u64::from(u32_at(h, at)) | (u64::from(u32_at(h, at + 4)) << 32)
}

impl<'a> Batch<'a> {
    /// Reads and checks a whole message (see the [module docs](crate::frame) for the checks),
    /// so that iterating over its records cannot fail. Never panics; the work is
    /// bounded by the message's length.
    pub fn decode(bytes: &'a [u8]) -> Result<Batch<'a>, FrameError> {
        let Some((h, body)) = bytes.split_first_chunk::<HEADER_LEN>() else {
            return Err(FrameError::Short { len: bytes.len() });
        };
        if h[..4] != MAGIC {
            return Err(FrameError::Magic([h[0], h[1], h[2], h[3]]));
        }
        let version = match u16_at(h, 4) {
            v @ (1 | VERSION) => v,
            v => return Err(FrameError::Version(v)),
        };
        match u16_at(h, 6) {
            n if usize::from(n) == HEADER_LEN => {}
            n => return Err(FrameError::HeaderLen(n)),
        }
        let (host_len, source_len) = (usize::from(u16_at(h, 12)), usize::from(u16_at(h, 14)));
        let (count, records_len) = (u32_at(h, COUNT_AT), u32_at(h, RECORDS_LEN_AT));
        let names_len = pad8(host_len + source_len);
        let expected = (HEADER_LEN + names_len) as u64 + u64::from(records_len);
        if bytes.len() as u64 != expected {
            return Err(FrameError::Length { expected, len: bytes.len() });
        }
        let (stored, computed) = (u32_at(h, CRC_AT), checksum(bytes));
        if stored != computed {
            return Err(FrameError::Checksum { stored, computed });
        }
        match u16_at(h, 8) {
            0 => {}
            x => return Err(FrameError::Flags(x)),
        }
        if (version == 1 && h[11] != 0) || u32_at(h, 44) != 0 {
            return Err(FrameError::Reserved);
        }
        let content = match Content::from_u8(h[11]) {
            // One encoding per batch: plain records are version 1.
            Some(Content::Records) if version != 1 => return Err(FrameError::Content(0)),
            Some(c) => c,
            None => return Err(FrameError::Content(h[11])),
        };
        let time_source = TimeSource::from_u8(h[10]).ok_or(FrameError::TimeSource(h[10]))?;
        let offset_ns = u64_at(h, 24) as i64;
        if time_source == TimeSource::Drained && offset_ns != 0 {
            return Err(FrameError::Offset(offset_ns));
        }
        if host_len > MAX_HOST_LEN {
            return Err(FrameError::TooLong { what: "host", len: host_len, max: MAX_HOST_LEN });
        }
        if source_len > MAX_SOURCE_LEN {
            return Err(FrameError::TooLong { what: "source", len: source_len, max: MAX_SOURCE_LEN });
        }
        let first_seq = u64_at(h, 16);
        if first_seq.checked_add(u64::from(count)).is_none() {
            return Err(FrameError::SeqOverflow { first_seq, count: u64::from(count) });
        }
        // Never errs: the length check above.
        let length = || FrameError::Length { expected, len: bytes.len() };
        let (names, records) = body.split_at_checked(names_len).ok_or_else(length)?;
        let (host, rest) = names.split_at_checked(host_len).ok_or_else(length)?;
        let (source, padding) = rest.split_at_checked(source_len).ok_or_else(length)?;
        let host = std::str::from_utf8(host).map_err(|_| FrameError::Utf8("host"))?;
        let source = std::str::from_utf8(source).map_err(|_| FrameError::Utf8("source"))?;
        if padding.iter().any(|&b| b != 0) {
            return Err(FrameError::Padding("host and source names"));
        }
        check_records(records, count)?;
        Ok(Batch { host, source, first_seq, count, time_source, content, offset_ns, records })
    }

    /// The records in order, with sequence numbers `first_seq`, `first_seq + 1`, ….
    pub fn records(&self) -> Records<'a> {
        Records { rest: self.records, seq: self.first_seq, left: self.count }
    }
}

/// Checks that exactly `count` well-formed records fill exactly `records`. Every
/// iteration consumes at least 16 bytes or returns, so the loop ends within
/// `records.len() / 16 + 1` iterations whatever `count` says.
fn check_records(mut records: &[u8], count: u32) -> Result<(), FrameError> {
    for _ in 0..count {
        let Some((head, rest)) = records.split_first_chunk::<RECORD_HEADER_LEN>() else {
            return Err(FrameError::Records { reason: "fewer records than the count, or a record header cut short" });
        };
        let (len, flags, _) = record_header(head);
        if len > MAX_RECORD_LEN {
            return Err(FrameError::TooLong { what: "record payload", len, max: MAX_RECORD_LEN });
        }
        match flags {
            0 => {}
            TOO_LARGE if len == 8 => {}
            TOO_LARGE => return Err(FrameError::Records { reason: "a too-large marker's length is not 8" }),
            _ => return Err(FrameError::Records { reason: "a record's flags have a bit no version defines" }),
        }
        let Some((payload, rest)) = rest.split_at_checked(pad8(len)) else {
            return Err(FrameError::Records { reason: "a record's payload runs past the records length" });
        };
        if payload.iter().skip(len).any(|&b| b != 0) {
            return Err(FrameError::Padding("record payload"));
        }
        records = rest;
    }
    if records.is_empty() {
        Ok(())
    } else {
        Err(FrameError::Records { reason: "bytes left after the counted records" })
    }
}

/// A record header's payload length, flags and time.
fn record_header(head: &[u8; RECORD_HEADER_LEN]) -> (usize, u32, u64) {
    let [l0, l1, l2, l3, f0, f1, f2, f3, time @ ..] = *head;
    (u32::from_le_bytes([l0, l1, l2, l3]) as usize, u32::from_le_bytes([f0, f1, f2, f3]), u64::from_le_bytes(time))
}

/// One record of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Its sequence number among its source's records.
    pub seq: u64,
    /// Its time: wall-clock ns since the Unix epoch.
    pub time_ns: u64,
    /// Its bytes (none for a marker).
    pub payload: &'a [u8],
    /// `Some(length)` for a marker that stands for a record too large to ship
    /// ([`TOO_LARGE`]).
    pub too_large: Option<u64>,
}

/// The records of a [`Batch`], in order ([`Batch::records`]).
#[derive(Clone, Debug)]
pub struct Records<'a> {
    rest: &'a [u8],
    seq: u64,
    left: u32,
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        if self.left == 0 {
            return None;
        }
        // `Batch::decode` checked every record, so this never ends the iteration early
        // (if it did, the iterator would stay ended).
        let left = std::mem::replace(&mut self.left, 0);
        let (head, rest) = self.rest.split_first_chunk::<RECORD_HEADER_LEN>()?;
        let (len, flags, time_ns) = record_header(head);
        let payload = rest.get(..len)?;
        self.rest = rest.get(pad8(len)..)?;
        let record = match (flags, payload.first_chunk::<8>()) {
            (TOO_LARGE, Some(n)) => {
                Record { seq: self.seq, time_ns, payload: &[], too_large: Some(u64::from_le_bytes(*n)) }
            }
            _ => Record { seq: self.seq, time_ns, payload, too_large: None },
        };
        self.seq = self.seq.wrapping_add(1);
        self.left = left - 1;
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Records<'_> {}

impl std::iter::FusedIterator for Records<'_> {}

#[cfg(test)]
mod tests;
