//! Channel files, read as untrusted input: the one parser of the channel header (the
//! library checks files with it before mapping anything, and `ringtrace stat/tail/snapshot`
//! read channels with it). The format is [`crate::format::channel`]'s.

use std::fs::File;
use std::path::Path;

use super::{At, FormatError, RingFile, RingMode, Source};
use crate::format::channel::*;
use crate::format::control::MIN_CAPACITY;
use crate::format::offsets::{u32_at, u64_at};

/// A channel file's header, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelHeader {
    /// The layout version: [`CHANNEL_VERSION`] (2, with the bell line) or
    /// [`CHANNEL_VERSION_1`] (without).
    pub version: u32,
    /// Discard or overwrite.
    pub mode: RingMode,
    /// How records are stamped ([`clock_code`]); every clock but `NONE` puts an 8-byte
    /// timestamp (nanoseconds, `CLOCK_MONOTONIC` time base) first in each record.
    pub clock: u32,
    /// Producer slots, each a ring.
    pub slots: u32,
    /// Each ring's data area in bytes.
    pub capacity: u64,
    /// Bytes between two rings' images.
    pub image_len: u64,
    /// Offset of slot 0's ring image.
    pub first: u64,
    /// The TSC calibration `[tsc0, ns0, mult]` of the creator (zeros for other clocks).
    pub calibration: [u64; 3],
    /// The process that created the channel.
    pub creator_pid: u32,
    /// When, in `CLOCK_REALTIME` nanoseconds.
    pub created_ns: u64,
}

impl ChannelHeader {
    /// Whether the file has the bell line (version 2): its writers wake a sleeping
    /// reader ([`crate::format::channel`]).
    pub fn has_bell(&self) -> bool {
        self.version >= CHANNEL_VERSION
    }

    /// Whether records start with a timestamp.
    pub fn stamped(&self) -> bool {
        self.clock != clock_code::NONE
    }

    /// The name of the clock.
    pub fn clock_name(&self) -> &'static str {
        match self.clock {
            clock_code::NONE => "none",
            clock_code::MONOTONIC => "mono",
            clock_code::TSC => "tsc",
            _ => "best",
        }
    }

    /// Nanoseconds (`CLOCK_MONOTONIC` time base) of a record's stamp: TSC ticks
    /// converted with the header's calibration (`ns0 + ((stamp - tsc0) * mult) >> 32`,
    /// saturating) for TSC channels, the stamp itself otherwise.
    pub fn to_ns(&self, stamp: u64) -> u64 {
        let [tsc0, ns0, mult] = self.calibration;
        let tsc = self.clock == clock_code::TSC || (self.clock == clock_code::BEST && mult != 0);
        if !tsc {
            return stamp;
        }
        let d = i128::from(stamp.wrapping_sub(tsc0) as i64);
        let scaled = (d * i128::from(mult)) >> 32;
        let scaled = i64::try_from(scaled).unwrap_or(if scaled < 0 { i64::MIN } else { i64::MAX });
        ns0.saturating_add_signed(scaled)
    }

    /// Offset of slot `i`'s ring image (`i < slots`).
    pub fn ring_offset(&self, i: u32) -> u64 {
        self.first + u64::from(i) * self.image_len
    }

    /// Bytes of the whole file.
    pub fn file_len(&self) -> u64 {
        self.first + u64::from(self.slots) * self.image_len
    }

    /// The header's bytes (a page's first [`HEADER_LEN`] bytes).
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        let mut put = |at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(MAGIC, &CHANNEL_MAGIC.to_ne_bytes());
        put(VERSION, &self.version.to_ne_bytes());
        put(MODE, &self.mode.code().to_ne_bytes());
        put(CLOCK, &self.clock.to_ne_bytes());
        put(SLOTS, &self.slots.to_ne_bytes());
        put(CAPACITY, &self.capacity.to_ne_bytes());
        put(IMAGE_LEN, &self.image_len.to_ne_bytes());
        put(FIRST, &self.first.to_ne_bytes());
        for (i, c) in self.calibration.iter().enumerate() {
            put(CALIBRATION + 8 * i, &c.to_ne_bytes());
        }
        put(CREATOR_PID, &self.creator_pid.to_ne_bytes());
        put(CREATED_NS, &self.created_ns.to_ne_bytes());
        b
    }

    /// Checks a header read from a file of `len` bytes. Each ring image is checked
    /// again when it is opened ([`ChannelFile::ring`]).
    pub fn parse(b: &[u8], len: u64) -> Result<ChannelHeader, FormatError> {
        if b.len() < HEADER_LEN {
            return Err(FormatError::TooSmall { len, need: HEADER_LEN as u64 });
        }
        let bad = |field, value: u64, expected| FormatError::BadField { field, value, expected };
        match u64_at(b, MAGIC) {
            0 => return Err(FormatError::Uninitialized),
            CHANNEL_MAGIC => {}
            found => return Err(FormatError::BadMagic { found }),
        }
        let version = u32_at(b, VERSION);
        if version != CHANNEL_VERSION && version != CHANNEL_VERSION_1 {
            return Err(bad("channel version", version.into(), "1 or 2"));
        }
        let mode = match u32_at(b, MODE) {
            1 => RingMode::Discard,
            2 => RingMode::Overwrite,
            m => return Err(bad("mode", m.into(), "1 (discard) or 2 (overwrite)")),
        };
        let clock = u32_at(b, CLOCK);
        if clock > clock_code::BEST {
            return Err(bad("clock", clock.into(), "0 to 3"));
        }
        let slots = u32_at(b, SLOTS);
        if slots == 0 || slots > MAX_SLOTS {
            return Err(bad("slots", slots.into(), "1 to 4096"));
        }
        let capacity = u64_at(b, CAPACITY);
        if !capacity.is_power_of_two() || !(MIN_CAPACITY..=1 << 32).contains(&capacity) {
            return Err(bad("capacity", capacity, "a power of two from 4096 to 2^32"));
        }
        let image_len = u64_at(b, IMAGE_LEN);
        // At least the control block and the data area: a shorter image would put the
        // next slot's control block inside this slot's data area.
        let least = capacity + crate::format::control::CONTROL_SIZE as u64;
        if image_len < least || image_len > capacity + (1 << 21) || image_len % MIN_CAPACITY != 0 {
            return Err(bad("image length", image_len, "the capacity plus a page-aligned control block"));
        }
        let first = u64_at(b, FIRST);
        if !(MIN_CAPACITY..=1 << 20).contains(&first) || first % MIN_CAPACITY != 0 {
            return Err(bad("first ring offset", first, "a page from 4096 to 1 MiB"));
        }
        let cal = [u64_at(b, CALIBRATION), u64_at(b, CALIBRATION + 8), u64_at(b, CALIBRATION + 16)];
        let h = ChannelHeader {
            version,
            mode,
            clock,
            slots,
            capacity,
            image_len,
            first,
            calibration: cal,
            creator_pid: u32_at(b, CREATOR_PID),
            created_ns: u64_at(b, CREATED_NS),
        };
        // At most 2^20 + 4096 * (2^32 + 2^21): no overflow.
        if len < h.file_len() {
            return Err(FormatError::Truncated { len, capacity, need: h.file_len() });
        }
        Ok(h)
    }
}

/// A channel file (or a byte image of one) opened for reading, its header checked.
#[derive(Debug)]
pub struct ChannelFile<S> {
    source: S,
    header: ChannelHeader,
}

impl ChannelFile<File> {
    /// Opens the channel file at `path` read-only (regular files only, as
    /// [`RingFile::open`]) and checks its header.
    pub fn open(path: impl AsRef<Path>) -> Result<ChannelFile<File>, FormatError> {
        ChannelFile::from_source(super::file::open_regular(path.as_ref())?)
    }
}

impl<S: Source> ChannelFile<S> {
    /// Reads and checks the header of the channel held by `source`.
    pub fn from_source(source: S) -> Result<ChannelFile<S>, FormatError> {
        let len = source.size().map_err(FormatError::io("cannot get the channel file's size"))?;
        if len < HEADER_LEN as u64 {
            return Err(FormatError::TooSmall { len, need: HEADER_LEN as u64 });
        }
        let mut b = [0u8; HEADER_LEN];
        source.read_at(0, &mut b).map_err(FormatError::io("cannot read the channel header"))?;
        let header = ChannelHeader::parse(&b, len)?;
        Ok(ChannelFile { source, header })
    }

    /// The checked header.
    pub fn header(&self) -> &ChannelHeader {
        &self.header
    }

    /// Slot `i`'s ring, its own header checked (and required to be a single-producer
    /// ring of the channel's mode and capacity).
    pub fn ring(&self, i: u32) -> Result<RingFile<At<&S>>, FormatError> {
        if i >= self.header.slots {
            return Err(FormatError::BadField { field: "slot", value: i.into(), expected: "below the slot count" });
        }
        let ring = RingFile::from_source(At::new(&self.source, self.header.ring_offset(i)))?;
        let h = ring.header();
        if h.mode != self.header.mode || h.capacity != self.header.capacity || h.kind != super::RingKind::Spsc {
            return Err(FormatError::Positions(format!(
                "slot {i} holds an {} {} ring of {} bytes, not the channel's spsc {} ring of {}",
                h.kind, h.mode, h.capacity, self.header.mode, self.header.capacity
            )));
        }
        Ok(ring)
    }
}

/// Whether the file at `path` starts with the channel magic (for tools that take ring
/// and channel files alike). Errors only if it cannot be read at all.
pub fn is_channel_file(path: impl AsRef<Path>) -> Result<bool, FormatError> {
    let file = super::file::open_regular(path.as_ref())?;
    let mut b = [0u8; 8];
    Ok(file.read_at(0, &mut b).is_ok() && u64::from_ne_bytes(b) == CHANNEL_MAGIC)
}
