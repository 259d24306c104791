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

mod batch;
mod layout;
mod write;

pub use batch::{Batch, Record, Records};
pub use layout::{
    Content, FrameError, TimeSource, HEADER_LEN, MAGIC, MAX_HOST_LEN, MAX_RECORD_LEN, MAX_SOURCE_LEN,
    RECORD_HEADER_LEN, TOO_LARGE, VERSION,
};
pub use write::BatchWriter;

#[cfg(test)]
mod tests;
