//! The channel tests' records (`tests/channel*.rs`): producer tag, sequence number and
//! a checksum of both.

use ringtrace::channel::ChannelRecord;

/// A record: producer tag, sequence number, checksum of both (24 bytes).
pub fn record(tag: u64, seq: u64) -> [u8; 24] {
    let mut r = [0u8; 24];
    r[..8].copy_from_slice(&tag.to_le_bytes());
    r[8..16].copy_from_slice(&seq.to_le_bytes());
    r[16..].copy_from_slice(&checksum(tag, seq).to_le_bytes());
    r
}

pub fn checksum(tag: u64, seq: u64) -> u64 {
    (tag ^ seq.rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Checks a record's checksum; its `(tag, seq)`.
pub fn parse(rec: &ChannelRecord<'_>) -> (u64, u64) {
    assert_eq!(rec.data.len(), 24, "record of {} bytes", rec.data.len());
    let word = |i: usize| u64::from_le_bytes(rec.data[i * 8..i * 8 + 8].try_into().unwrap());
    let (tag, seq) = (word(0), word(1));
    assert_eq!(word(2), checksum(tag, seq), "torn record: tag {tag} seq {seq}");
    (tag, seq)
}
