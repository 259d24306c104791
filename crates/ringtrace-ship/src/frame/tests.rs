use proptest::prelude::*;

use super::layout::{checksum, pad8, COUNT_AT, CRC_AT, RECORDS_LEN_AT};
use super::*;

/// A batch of `records` (time, payload) built by the writer.
fn build(host: &str, source: &str, first_seq: u64, ts: TimeSource, offset: i64, records: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut w = BatchWriter::new(host, source, first_seq, ts, offset).unwrap();
    for (time, payload) in records {
        w.push(*time, payload).unwrap();
    }
    w.finish()
}

/// A small valid batch: host "web-1", source "ring/a", three records (payloads of 0, 5
/// and 8 bytes), first sequence 100.
fn sample() -> Vec<u8> {
    let records = [(1, vec![]), (2, b"hello".to_vec()), (3, b"12345678".to_vec())];
    build("web-1", "ring/a", 100, TimeSource::Monotonic, -7, &records)
}

/// Writes `v` little-endian at `at` and fixes the checksum, so that the field check
/// itself is what refuses the message.
fn edit(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
    fix_crc(b);
}

fn fix_crc(b: &mut [u8]) {
    let crc = checksum(b);
    b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
}

/// The offset of the records area of `b`.
fn records_at(b: &[u8]) -> usize {
    let names = usize::from(u16::from_le_bytes([b[12], b[13]])) + usize::from(u16::from_le_bytes([b[14], b[15]]));
    HEADER_LEN + pad8(names)
}

/// The bytes the writer makes of a decoded batch (the format has one encoding per batch).
fn reencode(b: &Batch<'_>) -> Vec<u8> {
    let w = BatchWriter::new(b.host, b.source, b.first_seq, b.time_source, b.offset_ns).unwrap();
    let mut w = w.with_content(b.content);
    for r in b.records() {
        match r.too_large {
            Some(len) => w.push_too_large(r.time_ns, len).unwrap(),
            None => w.push(r.time_ns, r.payload).unwrap(),
        }
    }
    w.finish()
}

fn name(max: usize, wide: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z0-9./-]{1,24}",
        "\\PC{0,40}".prop_map(move |s: String| cut(&s, max)),
        Just("h".repeat(max)),
        Just(format!("{}{}", wide.repeat(max / wide.len()), "x".repeat(max % wide.len()))),
    ]
}

/// The longest prefix of `s` of at most `max` bytes.
fn cut(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

fn time_source() -> impl Strategy<Value = (TimeSource, i64)> {
    prop_oneof![
        Just((TimeSource::Drained, 0)),
        any::<i64>().prop_map(|o| (TimeSource::Monotonic, o)),
        any::<i64>().prop_map(|o| (TimeSource::Tsc, o)),
    ]
}

/// Up to `n` records of 0 to 199 bytes. The payloads are drawn as a length and a seed
/// (drawing every byte would take most of the test's time in a debug build).
fn records(n: usize) -> impl Strategy<Value = Vec<(u64, Vec<u8>)>> {
    let payload = (0usize..200, any::<u64>()).prop_map(|(len, mut x)| {
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    });
    prop::collection::vec((any::<u64>(), payload), 0..n)
}

/// A first sequence number such that `first + n` fits: anywhere, or right at the top.
fn first_seq(kind: u8, raw: u64, n: usize) -> u64 {
    let top = u64::MAX - n as u64;
    if kind == 0 {
        raw.min(top)
    } else {
        top - raw % 4
    }
}

/// A valid batch for the damage tests.
fn valid() -> impl Strategy<Value = Vec<u8>> {
    (name(MAX_HOST_LEN, "é"), "[a-z]{0,9}", any::<u64>(), time_source(), records(12))
        .prop_map(|(h, s, seq, (ts, o), r)| build(&h, &s, first_seq(0, seq, r.len()), ts, o, &r))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Whatever the writer was given comes back, field by field, with consecutive sequence numbers.
    #[test]
    fn batches_round_trip(
        host in name(MAX_HOST_LEN, "é"),
        source in name(MAX_SOURCE_LEN, "ß"),
        seq_kind in 0u8..2,
        seq_raw in any::<u64>(),
        (ts, offset) in time_source(),
        recs in records(300),
    ) {
        let first = first_seq(seq_kind, seq_raw, recs.len());
        let mut w = BatchWriter::new(&host, &source, first, ts, offset).unwrap();
        prop_assert!(w.is_empty());
        for (time, payload) in &recs {
            w.push(*time, payload).unwrap();
        }
        prop_assert_eq!(w.count() as usize, recs.len());
        prop_assert_eq!(w.is_empty(), recs.is_empty());
        prop_assert_eq!(w.next_seq(), first + recs.len() as u64);
        let len = w.len();
        let bytes = w.finish();
        prop_assert_eq!(bytes.len(), len);
        prop_assert_eq!(bytes.len() % 8, 0);
        let b = Batch::decode(&bytes).unwrap();
        prop_assert_eq!((b.host, b.source), (host.as_str(), source.as_str()));
        prop_assert_eq!((b.first_seq, b.count as usize), (first, recs.len()));
        prop_assert_eq!((b.time_source, b.offset_ns), (ts, offset));
        let got = b.records();
        prop_assert_eq!(got.len(), recs.len());
        let got: Vec<Record<'_>> = got.collect();
        prop_assert_eq!(got.len(), recs.len());
        for (i, (r, (time, payload))) in got.iter().zip(&recs).enumerate() {
            prop_assert_eq!(r.seq, first + i as u64);
            prop_assert_eq!(r.time_ns, *time);
            prop_assert_eq!(r.payload, payload.as_slice());
        }
    }

    /// Edited, truncated or extended, a batch is refused, unless the edits restored the
    /// very bytes; nothing panics.
    #[test]
    fn damaged_batches_are_refused(
        bytes in valid(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..5),
        how in 0u8..3,
        cut in any::<prop::sample::Index>(),
        junk in prop::collection::vec(any::<u8>(), 1..20),
    ) {
        let mut damaged = bytes.clone();
        match how {
            0 => edits.iter().for_each(|(at, v)| damaged[at.index(bytes.len())] = *v),
            1 => damaged.truncate(cut.index(bytes.len())),
            _ => damaged.extend_from_slice(&junk),
        }
        match Batch::decode(&damaged) {
            Err(e) => prop_assert!(!e.to_string().is_empty()),
            Ok(b) => {
                prop_assert_eq!(&damaged, &bytes);
                prop_assert_eq!(b, Batch::decode(&bytes).unwrap());
            }
        }
    }

    /// Any single changed byte is refused: by the checksum, or by a field check.
    #[test]
    fn every_single_byte_change_is_refused(bytes in valid(), at in any::<prop::sample::Index>(), x in 1u8..=255) {
        let mut damaged = bytes.clone();
        damaged[at.index(bytes.len())] ^= x;
        prop_assert!(Batch::decode(&damaged).is_err());
    }

    /// Random bytes, bare or behind a valid magic, version and header length, never panic.
    #[test]
    fn random_bytes_never_panic(mut b in prop::collection::vec(any::<u8>(), 0..600), prefix in any::<bool>()) {
        if prefix && b.len() >= 8 {
            b[..4].copy_from_slice(&MAGIC);
            b[4..6].copy_from_slice(&VERSION.to_le_bytes());
            b[6..8].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        }
        if let Ok(batch) = Batch::decode(&b) {
            prop_assert_eq!(batch.records().count(), batch.count as usize);
        }
    }

    /// Loosely built headers and records with consistent lengths and a valid checksum,
    /// each part wrong now and then, reach every check past the checksum; what decodes
    /// is exactly what the writer makes of it, and iterates to its count.
    #[test]
    fn checksummed_junk_decodes_canonically_or_not_at_all(
        host in prop::collection::vec(prop_oneof![19 => Just(b'a'), 1 => Just(0xff)], 0..6),
        head in (rare(), rare(), 0u8..3, rare(), prop_oneof![Just(u64::MAX - 3), any::<u64>()]),
        (version, content) in (prop_oneof![9 => 1u16..=2, 1 => Just(3u16)], prop_oneof![2 => Just(0u8), 2 => Just(1u8), 1 => 2u8..=255]),
        recs in prop::collection::vec(
            (0u32..24, prop_oneof![18 => Just(0u32), 1 => Just(TOO_LARGE), 1 => Just(2)], any::<u64>(), prop::option::weighted(0.1, 0usize..24), rare()),
            0..6,
        ),
        miscount in prop::option::weighted(0.1, 0u32..8),
    ) {
        let (bad_flags, bad_ts, ts, bad_offset, seq) = head;
        let counted = miscount.unwrap_or(recs.len() as u32);
        let mut b = vec![0u8; HEADER_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4..6].copy_from_slice(&version.to_le_bytes());
        b[6..8].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        b[8] = u8::from(bad_flags);
        b[10] = if bad_ts { 3 } else { ts };
        b[11] = content;
        b[12..14].copy_from_slice(&(host.len() as u16).to_le_bytes());
        b[16..24].copy_from_slice(&seq.to_le_bytes());
        b[24] = u8::from(bad_offset);
        b[32..36].copy_from_slice(&counted.to_le_bytes());
        b.extend_from_slice(&host);
        b.resize(pad8(b.len()), 0);
        let at = b.len();
        for (len, flags, time, body, bad_pad) in recs {
            let body = body.unwrap_or(len as usize);
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(&flags.to_le_bytes());
            b.extend_from_slice(&time.to_le_bytes());
            b.extend((0..body).map(|i| i as u8 + 1));
            b.resize(pad8(b.len()), 0);
            if bad_pad && body % 8 != 0 {
                *b.last_mut().unwrap() = 1;
            }
        }
        let records_len = (b.len() - at) as u32;
        b[RECORDS_LEN_AT..RECORDS_LEN_AT + 4].copy_from_slice(&records_len.to_le_bytes());
        fix_crc(&mut b);
        if let Ok(batch) = Batch::decode(&b) {
            prop_assert_eq!(batch.records().len(), counted as usize);
            prop_assert_eq!(batch.records().count(), counted as usize);
            prop_assert_eq!(reencode(&batch), b);
        }
    }
}

/// Something wrong, now and then.
fn rare() -> impl Strategy<Value = bool> {
    prop::bool::weighted(0.05)
}

fn decode_err(b: &[u8]) -> FrameError {
    Batch::decode(b).unwrap_err()
}

#[test]
fn the_sample_decodes() {
    let bytes = sample();
    let b = Batch::decode(&bytes).unwrap();
    assert_eq!((b.host, b.source, b.first_seq, b.count, b.offset_ns), ("web-1", "ring/a", 100, 3, -7));
    let seqs: Vec<(u64, u64, &[u8])> = b.records().map(|r| (r.seq, r.time_ns, r.payload)).collect();
    assert_eq!(seqs, [(100, 1, &b""[..]), (101, 2, b"hello"), (102, 3, b"12345678")]);
    // 48 header + pad8(11) names + (16) + (16 + 8) + (16 + 8) records.
    assert_eq!(bytes.len(), 48 + 16 + 64);
}

#[test]
fn short_and_wrong_length_messages_are_refused() {
    assert_eq!(decode_err(&[]), FrameError::Short { len: 0 });
    let bytes = sample();
    assert_eq!(decode_err(&bytes[..47]), FrameError::Short { len: 47 });
    let expected = bytes.len() as u64;
    assert_eq!(decode_err(&bytes[..bytes.len() - 1]), FrameError::Length { expected, len: bytes.len() - 1 });
    let mut long = bytes.clone();
    long.push(0);
    assert_eq!(decode_err(&long), FrameError::Length { expected, len: bytes.len() + 1 });
    // records_len not matching the message, checksum fixed.
    let mut b = bytes.clone();
    let records_len = u32::from_le_bytes(b[36..40].try_into().unwrap());
    edit(&mut b, RECORDS_LEN_AT, &(records_len + 8).to_le_bytes());
    assert_eq!(decode_err(&b), FrameError::Length { expected: expected + 8, len: bytes.len() });
}

#[test]
fn magic_version_header_len_and_flags_are_checked() {
    let mut b = sample();
    edit(&mut b, 0, b"RTSX");
    assert_eq!(decode_err(&b), FrameError::Magic(*b"RTSX"));
    assert_eq!(decode_err(&b).to_string(), "not a ringtrace batch (magic 52 54 53 58)");
    let mut b = sample();
    edit(&mut b, 4, &7u16.to_le_bytes());
    assert_eq!(decode_err(&b), FrameError::Version(7));
    assert_eq!(decode_err(&b).to_string(), "batch version 7, this reader knows 1 to 2");
    let mut b = sample();
    edit(&mut b, 6, &64u16.to_le_bytes());
    assert_eq!(decode_err(&b), FrameError::HeaderLen(64));
    let mut b = sample();
    edit(&mut b, 8, &0x8000u16.to_le_bytes());
    assert_eq!(decode_err(&b), FrameError::Flags(0x8000));
    assert!(decode_err(&b).to_string().contains("0x8000"));
}

#[test]
fn reserved_bytes_time_source_and_offset_are_checked() {
    for at in [11, 44, 47] {
        let mut b = sample();
        edit(&mut b, at, &[1]);
        assert_eq!(decode_err(&b), FrameError::Reserved, "byte {at}");
    }
    // Version 2: byte 11 is the content.
    let mut b = sample();
    edit(&mut b, 4, &2u16.to_le_bytes());
    edit(&mut b, 11, &[2]);
    assert_eq!(decode_err(&b), FrameError::Content(2));
    edit(&mut b, 11, &[0]);
    assert_eq!(decode_err(&b), FrameError::Content(0));
    let mut b = sample();
    edit(&mut b, 10, &[3]);
    assert_eq!(decode_err(&b), FrameError::TimeSource(3));
    let mut b = build("h", "s", 0, TimeSource::Drained, 0, &[]);
    assert!(Batch::decode(&b).is_ok());
    edit(&mut b, 24, &5i64.to_le_bytes());
    assert_eq!(decode_err(&b), FrameError::Offset(5));
    assert_eq!(BatchWriter::new("h", "s", 0, TimeSource::Drained, 5).unwrap_err(), FrameError::Offset(5));
}

#[test]
fn checksum_mismatches_are_refused() {
    let mut b = sample();
    let last = b.len() - 1;
    b[last] ^= 1;
    let stored = u32::from_le_bytes(b[40..44].try_into().unwrap());
    let computed = checksum(&b);
    assert_ne!(stored, computed);
    assert_eq!(decode_err(&b), FrameError::Checksum { stored, computed });
    assert!(decode_err(&b).to_string().starts_with(&format!("checksum mismatch: stored {stored:#010x}, computed 0x")));
}

#[test]
fn names_are_checked() {
    // A 256-byte host: a 255-byte one and its padding byte, claimed as the host.
    let mut b = build(&"h".repeat(255), "", 0, TimeSource::Tsc, 0, &[]);
    edit(&mut b, 12, &256u16.to_le_bytes());
    assert_eq!(decode_err(&b), FrameError::TooLong { what: "host", len: 256, max: MAX_HOST_LEN });
    // A 4097-byte source: host "a" and a 4096-byte source, claimed as the source.
    let mut b = build("a", &"s".repeat(4096), 0, TimeSource::Tsc, 0, &[]);
    edit(&mut b, 12, &[0, 0, 0x01, 0x10]);
    assert_eq!(decode_err(&b), FrameError::TooLong { what: "source", len: 4097, max: MAX_SOURCE_LEN });
    let mut b = sample();
    edit(&mut b, HEADER_LEN, &[0xff]);
    assert_eq!(decode_err(&b), FrameError::Utf8("host"));
    let mut b = sample();
    edit(&mut b, HEADER_LEN + 5, &[0xc3]);
    assert_eq!(decode_err(&b), FrameError::Utf8("source"));
    let mut b = sample();
    edit(&mut b, HEADER_LEN + 11, &[1]);
    assert_eq!(decode_err(&b), FrameError::Padding("host and source names"));
}

#[test]
fn a_header_lying_about_count_is_refused() {
    let mut b = sample();
    edit(&mut b, COUNT_AT, &4u32.to_le_bytes());
    assert!(matches!(decode_err(&b), FrameError::Records { reason } if reason.starts_with("fewer records")));
    edit(&mut b, COUNT_AT, &u32::MAX.to_le_bytes());
    assert!(matches!(decode_err(&b), FrameError::Records { reason } if reason.starts_with("fewer records")));
    edit(&mut b, COUNT_AT, &2u32.to_le_bytes());
    assert!(matches!(decode_err(&b), FrameError::Records { reason } if reason.starts_with("bytes left")));
}

#[test]
fn record_headers_and_padding_are_checked() {
    let at = records_at(&sample());
    let second = at + 16;
    let mut b = sample();
    edit(&mut b, second + 4, &[2]);
    assert!(matches!(decode_err(&b), FrameError::Records { reason } if reason.contains("flags")));
    // The too-large flag on a record whose length is not 8 (the second holds 5 bytes).
    let mut b = sample();
    edit(&mut b, second + 4, &[1]);
    assert!(matches!(decode_err(&b), FrameError::Records { reason } if reason.contains("marker")));
    let mut b = sample();
    edit(&mut b, second, &1000u32.to_le_bytes());
    assert!(matches!(decode_err(&b), FrameError::Records { reason } if reason.contains("runs past")));
    let mut b = sample();
    edit(&mut b, second, &(1u32 << 30).to_le_bytes());
    assert_eq!(decode_err(&b), FrameError::TooLong { what: "record payload", len: 1 << 30, max: MAX_RECORD_LEN });
    let mut b = sample();
    edit(&mut b, second + 16 + 7, &[1]);
    assert_eq!(decode_err(&b), FrameError::Padding("record payload"));
}

#[test]
fn sequence_numbers_must_not_overflow() {
    let mut w = BatchWriter::new("h", "s", u64::MAX - 1, TimeSource::Tsc, 0).unwrap();
    w.push(1, b"x").unwrap();
    assert_eq!(w.next_seq(), u64::MAX);
    assert_eq!(w.push(2, b"y"), Err(FrameError::SeqOverflow { first_seq: u64::MAX - 1, count: 2 }));
    assert_eq!(w.count(), 1);
    let mut b = w.finish();
    assert_eq!(Batch::decode(&b).unwrap().records().next().unwrap().seq, u64::MAX - 1);
    edit(&mut b, 16, &u64::MAX.to_le_bytes());
    assert_eq!(decode_err(&b), FrameError::SeqOverflow { first_seq: u64::MAX, count: 1 });
}

#[test]
fn the_writer_refuses_long_names() {
    let long = |n| BatchWriter::new(&"h".repeat(n), "s", 0, TimeSource::Tsc, 0).map(|_| ());
    assert_eq!(long(255), Ok(()));
    assert_eq!(long(256), Err(FrameError::TooLong { what: "host", len: 256, max: MAX_HOST_LEN }));
    assert_eq!(long(70_000), Err(FrameError::TooLong { what: "host", len: 70_000, max: MAX_HOST_LEN }));
    let e = BatchWriter::new("h", &"s".repeat(4097), 0, TimeSource::Tsc, 0).unwrap_err();
    assert_eq!(e, FrameError::TooLong { what: "source", len: 4097, max: MAX_SOURCE_LEN });
    assert_eq!(e.to_string(), "source of 4097 bytes, at most 4096 allowed");
}

#[test]
fn every_single_byte_change_of_the_sample_is_refused() {
    let bytes = sample();
    for at in 0..bytes.len() {
        for x in [1, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[at] ^= x;
            assert!(Batch::decode(&b).is_err(), "byte {at} ^ {x:#x}");
        }
    }
}

/// A marker keeps its place, its time and the length it stands for, and no payload.
#[test]
fn too_large_markers_round_trip() {
    let mut w = BatchWriter::new("h", "s", 7, TimeSource::Drained, 0).unwrap();
    w.push(1, b"before").unwrap();
    w.push_too_large(2, 3 << 20).unwrap();
    w.push(3, b"after").unwrap();
    let bytes = w.finish();
    let b = Batch::decode(&bytes).unwrap();
    let got: Vec<_> = b.records().map(|r| (r.seq, r.time_ns, r.payload, r.too_large)).collect();
    assert_eq!(got, [(7, 1, &b"before"[..], None), (8, 2, &b""[..], Some(3 << 20)), (9, 3, &b"after"[..], None)]);
    assert_eq!(reencode(&b), bytes);
    assert_eq!(BatchWriter::alone("h", "s", 6), HEADER_LEN + 8 + RECORD_HEADER_LEN + 8);
}

#[test]
fn content_other_than_records_is_version_2_and_plain_records_stay_version_1() {
    for content in [Content::Records, Content::Events] {
        let mut w = BatchWriter::new("h", "dir#0", 5, TimeSource::Monotonic, 9).unwrap().with_content(content);
        w.push(1, b"event").unwrap();
        let bytes = w.finish();
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        assert_eq!(version, if content == Content::Records { 1 } else { 2 }, "{content:?}");
        let b = Batch::decode(&bytes).unwrap();
        assert_eq!(b.content, content);
        assert_eq!(reencode(&b), bytes);
    }
    // A version 1 batch with a content byte is refused (the byte is reserved there).
    let mut w = BatchWriter::new("h", "s", 0, TimeSource::Drained, 0).unwrap();
    w.push(1, b"x").unwrap();
    let mut bytes = w.finish();
    edit(&mut bytes, 11, &[Content::Events as u8]);
    assert_eq!(decode_err(&bytes), FrameError::Reserved);
}
