//! Snapshot files: a 96-byte header, then a flight recorder's ring bytes from its oldest
//! record to the end of its newest.
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
//! | 56 | committed records no snapshot held, overwritten since the previous one ([`crate::Snapshot::missed`]) |
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
//! a checksum that does not match is [`FormatError::Checksum`], naming the part and
//! its byte range; anything else inconsistent is [`FormatError::InvalidSnapshot`].
//! Version 1 files (no checksums) are refused: take the snapshot again.
//!
//! Every byte format of the project, with this one, is laid out in one page:
//! `docs/formats.md` in the repository.

use std::io::{self, Read};

use crate::error::FormatError;

/// The file's first eight bytes.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"RTSNAP\0\x01";
/// The format version this library writes and reads.
pub const SNAPSHOT_VERSION: u32 = 2;
/// Bytes of the header.
pub const HEADER_LEN: usize = 96;
/// Offset of the version (`u32`).
const VERSION_AT: usize = 8;
/// Offset of the flags (`u32`).
const FLAGS_AT: usize = 12;
/// Offset of the first of the eight `u64` fields.
const FIELDS_AT: usize = 16;
/// Offset of the ring bytes' checksum.
const DATA_CRC_AT: usize = 80;
/// Offset of the header's checksum (of bytes `0..HEADER_CRC_AT`).
const HEADER_CRC_AT: usize = 88;
/// Flag bit 0: the ring bytes are little-endian.
const LITTLE_ENDIAN: u32 = 1;

/// The header's eight `u64` fields, in file order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileHeader {
    pub(crate) capacity: u64,
    pub(crate) first: u64,
    pub(crate) end: u64,
    pub(crate) count: u64,
    pub(crate) retired_before: u64,
    pub(crate) missed: u64,
    pub(crate) unfinished: u64,
    pub(crate) data_len: u64,
}

impl FileHeader {
    fn fields(&self) -> [u64; 8] {
        [
            self.capacity,
            self.first,
            self.end,
            self.count,
            self.retired_before,
            self.missed,
            self.unfinished,
            self.data_len,
        ]
    }

    /// The header's bytes, with `data_crc` (the ring bytes' CRC32C) and its own checksum.
    pub(crate) fn encode(&self, data_crc: u32) -> [u8; HEADER_LEN] {
        let flags = if cfg!(target_endian = "little") { LITTLE_ENDIAN } else { 0 };
        let mut h = [0u8; HEADER_LEN];
        h[..8].copy_from_slice(&SNAPSHOT_MAGIC);
        h[VERSION_AT..VERSION_AT + 4].copy_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        h[FLAGS_AT..FLAGS_AT + 4].copy_from_slice(&flags.to_le_bytes());
        for (i, v) in self.fields().iter().enumerate() {
            h[FIELDS_AT + 8 * i..FIELDS_AT + 8 * i + 8].copy_from_slice(&v.to_le_bytes());
        }
        h[DATA_CRC_AT..DATA_CRC_AT + 4].copy_from_slice(&data_crc.to_le_bytes());
        let header_crc = crc32c::crc32c(&h[..HEADER_CRC_AT]);
        h[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&header_crc.to_le_bytes());
        h
    }

    /// Reads the header and checks its magic, version, checksum, flags, capacity and
    /// positions; returns it with the ring bytes' stored checksum.
    pub(crate) fn read<R: Read>(r: &mut R) -> Result<(FileHeader, u32), FormatError> {
        let mut h = [0u8; HEADER_LEN];
        // The magic and version first, so that a file of another kind or version is
        // named as such even when it is shorter than this version's header.
        read_exact(r, &mut h[..FIELDS_AT], "the header")?;
        if h[..8] != SNAPSHOT_MAGIC {
            return Err(format_err("wrong magic: not a ringtrace snapshot file"));
        }
        let u32_at = |h: &[u8], at: usize| u32::from_le_bytes(h[at..at + 4].try_into().expect("4 bytes"));
        let version = u32_at(&h, VERSION_AT);
        if version == 1 {
            return Err(format_err(
                "format version 1 has no checksums; this library reads version 2: take the snapshot again",
            ));
        }
        if version != SNAPSHOT_VERSION {
            return Err(format_err(format!("format version {version}; this library reads version {SNAPSHOT_VERSION}")));
        }
        read_exact(r, &mut h[FIELDS_AT..], "the header")?;
        let stored = u32_at(&h, HEADER_CRC_AT);
        let computed = crc32c::crc32c(&h[..HEADER_CRC_AT]);
        if stored != computed {
            return Err(FormatError::Checksum {
                part: "header",
                start: 0,
                end: HEADER_CRC_AT as u64,
                stored,
                computed,
            });
        }
        // The padding words are zero; the one after the header's checksum lies outside
        // every checksum, so a damaged byte there is named as such, not as a mismatch.
        if u32_at(&h, HEADER_CRC_AT + 4) != 0 {
            return Err(format_err(format!(
                "the padding after the header's checksum (bytes {}..{HEADER_LEN}) is not zero",
                HEADER_CRC_AT + 4
            )));
        }
        let flags = u32_at(&h, FLAGS_AT);
        let ours = if cfg!(target_endian = "little") { LITTLE_ENDIAN } else { 0 };
        if flags & !LITTLE_ENDIAN != 0 {
            return Err(format_err(format!("unknown flags {flags:#x}")));
        }
        if flags != ours {
            return Err(format_err("written on a machine of the other byte order"));
        }
        if u32_at(&h, DATA_CRC_AT + 4) != 0 {
            return Err(format_err(format!(
                "the padding after the ring bytes' checksum (bytes {}..{HEADER_CRC_AT}) is not zero",
                DATA_CRC_AT + 4
            )));
        }
        let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
        let [capacity, first, end, count, retired_before, missed, unfinished, data_len] =
            std::array::from_fn(|i| u64_at(FIELDS_AT + 8 * i));
        if !capacity.is_power_of_two() || !(16..=super::control::MAX_CAPACITY).contains(&capacity) {
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
        let header = FileHeader { capacity, first, end, count, retired_before, missed, unfinished, data_len };
        Ok((header, u32_at(&h, DATA_CRC_AT)))
    }
}

pub(crate) fn format_err(msg: impl Into<String>) -> FormatError {
    FormatError::InvalidSnapshot(msg.into())
}

/// One `read`, retried when interrupted.
pub(crate) fn read_some<R: Read>(r: &mut R, buf: &mut [u8]) -> Result<usize, FormatError> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other.map_err(FormatError::io("snapshot file")),
        }
    }
}

fn read_exact<R: Read>(r: &mut R, buf: &mut [u8], what: &str) -> Result<(), FormatError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => format_err(format!("truncated in {what}")),
        _ => FormatError::io("snapshot file")(e),
    })
}
