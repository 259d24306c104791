//! The record header: 8 bytes before every payload, the Linux BPF ring buffer's
//! `struct bpf_ringbuf_hdr { u32 len; u32 pg_off; }` (`kernel/bpf/ringbuf.c`).
//!
//! Each record is an 8-byte header followed by its payload, padded to 8 bytes: the Linux
//! BPF ring buffer's format (`struct bpf_ringbuf_hdr { u32 len; u32 pg_off; }`), so one
//! consumer code path reads both. The first word holds the payload length in its low 30
//! bits, [`BUSY_BIT`] while the record is being written and [`DISCARD_BIT`] if it was
//! discarded. The second word (the kernel's `pg_off`) is, in ringtrace rings, the process
//! id of the producer that reserved the record: never zero. The consumer of a
//! multi-producer ring zeroes the bytes it has consumed before it hands them back (a
//! single producer zeroes ahead of itself instead), so an all-zero header means
//! "reserved, header not yet written" (or nothing reserved at all): that is what lets
//! producers claim space with a compare-and-swap instead of the kernel's lock.
//!
//! Every byte format of the project, with this one, is laid out in one page:
//! `docs/formats.md` in the repository.

/// Size of the record header in bytes.
pub const HDR_SIZE: u64 = 8;
/// Set in the length word while the record is reserved and not yet committed or discarded.
pub const BUSY_BIT: u32 = 1 << 31;
/// Set in the length word of a record that was discarded; consumers skip it.
pub const DISCARD_BIT: u32 = 1 << 30;
/// The bits of the length word that hold the payload length.
pub const LEN_MASK: u32 = DISCARD_BIT - 1;
/// The largest payload any ring accepts (the BPF ring buffer's `RINGBUF_MAX_RECORD_SZ`);
/// a ring also refuses a record whose footprint exceeds its capacity.
pub const MAX_RECORD_LEN: u32 = LEN_MASK;

/// Bytes a record of `len` payload bytes occupies: header plus payload, rounded up to 8.
#[inline]
pub const fn footprint(len: u32) -> u64 {
    (len as u64 + HDR_SIZE + 7) & !7
}

/// Packs a length word and the aux word into the header's 64-bit value, with the length
/// word at byte offset 0 whatever the byte order (the kernel's layout).
#[inline]
pub(crate) const fn pack(len_word: u32, aux: u32) -> u64 {
    if cfg!(target_endian = "little") {
        len_word as u64 | (aux as u64) << 32
    } else {
        (len_word as u64) << 32 | aux as u64
    }
}

/// The length word of a packed header (inverse of [`pack`]).
#[inline]
pub(crate) const fn len_word(header: u64) -> u32 {
    if cfg!(target_endian = "little") {
        header as u32
    } else {
        (header >> 32) as u32
    }
}

/// What a consumer finds at a record boundary (the decoding that [`crate::protocol`]'s
/// reading step does inline, as a value for tests).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Nothing there yet: not reserved, or reserved and the header not yet written.
    Empty,
    /// Reserved and being written ([`BUSY_BIT`]).
    Busy,
    /// A committed record with this payload length.
    Committed(u32),
    /// A discarded record with this payload length, to skip.
    Discarded(u32),
}

/// Decodes a header value read at a record boundary.
#[cfg(test)]
pub(crate) const fn decode(header: u64) -> Slot {
    if header == 0 {
        return Slot::Empty;
    }
    let w = len_word(header);
    if w & BUSY_BIT != 0 {
        Slot::Busy
    } else if w & DISCARD_BIT != 0 {
        Slot::Discarded(w & LEN_MASK)
    } else {
        Slot::Committed(w)
    }
}

/// The aux word of a header (the kernel's `pg_off`): the producer's pid in ringtrace
/// rings.
#[inline(always)]
pub(crate) const fn aux(header: u64) -> u32 {
    if cfg!(target_endian = "little") {
        (header >> 32) as u32
    } else {
        header as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_matches_the_bpf_layout() {
        let h = pack(5 | BUSY_BIT, 77);
        let bytes = h.to_ne_bytes();
        assert_eq!(u32::from_ne_bytes(bytes[0..4].try_into().unwrap()), 5 | BUSY_BIT);
        assert_eq!(u32::from_ne_bytes(bytes[4..8].try_into().unwrap()), 77);
        assert_eq!(decode(h), Slot::Busy);
        assert_eq!(decode(pack(5 | DISCARD_BIT, 1)), Slot::Discarded(5));
        assert_eq!(decode(pack(0, 1)), Slot::Committed(0));
        assert_eq!(decode(0), Slot::Empty);
    }

    #[test]
    fn footprint_rounds_to_eight() {
        assert_eq!(footprint(0), 8);
        assert_eq!(footprint(1), 16);
        assert_eq!(footprint(8), 16);
        assert_eq!(footprint(9), 24);
        assert_eq!(footprint(MAX_RECORD_LEN), (MAX_RECORD_LEN as u64 + 15) & !7);
    }

    proptest! {
        #[test]
        fn pack_decode_round_trip(len in 0u32..=LEN_MASK, aux in 1u32.., discard: bool) {
            let w = if discard { len | DISCARD_BIT } else { len };
            let slot = decode(pack(w, aux));
            prop_assert_eq!(slot, if discard { Slot::Discarded(len) } else { Slot::Committed(len) });
            prop_assert_eq!(decode(pack(len | BUSY_BIT, aux)), Slot::Busy);
            let fp = footprint(len);
            prop_assert!(fp % 8 == 0 && fp >= len as u64 + HDR_SIZE && fp < len as u64 + HDR_SIZE + 8);
        }
    }
}
