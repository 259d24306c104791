//! Reading a batch: its header and every record checked before any is handed out.

use super::layout::{
    checksum, pad8, Content, FrameError, TimeSource, COUNT_AT, CRC_AT, HEADER_LEN, MAGIC, MAX_HOST_LEN, MAX_RECORD_LEN,
    MAX_SOURCE_LEN, RECORDS_LEN_AT, RECORD_HEADER_LEN, TOO_LARGE, VERSION,
};

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
