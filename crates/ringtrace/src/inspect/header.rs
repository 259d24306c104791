//! A ring file's fixed description, parsed and checked.

use std::fmt;

use crate::error::FormatError;
use crate::format::control::{
    CONTROL_SIZE, FLAG_FUTEX, KIND_MPSC, KIND_SPSC, KNOWN_FLAGS, LAYOUT_VERSION, LAYOUT_VERSION_5, MAGIC, MAX_CAPACITY,
    MAX_DATA_OFFSET, MIN_CAPACITY, MODE_DISCARD, MODE_OVERWRITE,
};
use crate::format::offsets::{self as fields, u32_at, u64_at};

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
    pub(super) fn parse(block: &[u8], len: u64) -> Result<Header, FormatError> {
        let magic = u64_at(block, fields::MAGIC_AT);
        if magic == 0 {
            return Err(FormatError::Uninitialized);
        }
        if magic != MAGIC {
            return Err(FormatError::BadMagic { found: u64::from_le_bytes(magic.to_ne_bytes()) });
        }
        let version = u32_at(block, fields::VERSION_AT);
        if version != LAYOUT_VERSION && version != LAYOUT_VERSION_5 {
            return Err(FormatError::Version { found: version });
        }
        let bad = |field, value: u64, expected| FormatError::BadField { field, value, expected };
        let kind = match u32_at(block, fields::KIND_AT) {
            KIND_MPSC => RingKind::Mpsc,
            KIND_SPSC => RingKind::Spsc,
            k => return Err(bad("kind", k.into(), "1 (mpsc) or 2 (spsc)")),
        };
        let mode = match u32_at(block, fields::MODE_AT) {
            MODE_DISCARD => RingMode::Discard,
            MODE_OVERWRITE => RingMode::Overwrite,
            m => return Err(bad("mode", m.into(), "1 (discard) or 2 (overwrite)")),
        };
        if version == LAYOUT_VERSION_5 && kind == RingKind::Mpsc && mode == RingMode::Discard {
            return Err(FormatError::Version { found: version });
        }
        let capacity = u64_at(block, fields::CAPACITY_AT);
        if !capacity.is_power_of_two() || !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) {
            return Err(bad("capacity", capacity, "a power of two from 4096 to 4294967296"));
        }
        let data_offset = u64_at(block, fields::DATA_OFFSET_AT);
        if !data_offset.is_power_of_two() || !(CONTROL_SIZE as u64..=MAX_DATA_OFFSET).contains(&data_offset) {
            return Err(bad("data offset", data_offset, "8192 rounded up to the page size"));
        }
        let flags = u32_at(block, fields::FLAGS_AT);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(bad("flags", flags.into(), "a combination of the known flags (1: futex)"));
        }
        // Both at most 2^32 + 2^20: no overflow.
        let need = data_offset + capacity;
        if len < need {
            return Err(FormatError::Truncated { len, capacity, need });
        }
        Ok(Header {
            version,
            kind,
            mode,
            creator_pid: u32_at(block, fields::CREATOR_PID_AT),
            capacity,
            data_offset,
            watermark: u64_at(block, fields::WATERMARK_AT),
            flags,
            clock: u32_at(block, fields::CLOCK_AT),
            created_ns: u64_at(block, fields::CREATED_NS_AT),
            retire_ahead: u64_at(block, fields::RETIRE_AHEAD_AT),
        })
    }
}
