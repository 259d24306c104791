//! Snapshots of overwrite (flight-recorder) rings through the public API: what they
//! hold, snapshot files written and read back, and bad files (flipped bits, crafted
//! lengths and positions) refused as errors.
#![cfg(not(loom))]

mod common;

use common::exact;
use ringtrace::format::snapshot::SNAPSHOT_MAGIC;
use ringtrace::{FormatError, Snapshot, Wakeup};

#[test]
fn discarded_and_unfinished_records_are_not_in_snapshots() {
    let ring = exact(4096);
    let mut a = ring.producer().unwrap();
    let mut b = ring.producer().unwrap();
    a.output(b"first", Wakeup::Default).unwrap();
    let held = b.reserve(3).unwrap();
    a.reserve(4).unwrap().discard();
    a.output(b"last", Wakeup::Default).unwrap();
    let snap = ring.snapshot().unwrap();
    assert_eq!(snap.iter().collect::<Vec<_>>(), [&b"first"[..], &b"last"[..]]);
    assert_eq!(snap.unfinished(), 1);
    // A snapshot file keeps them marked, and reading it back skips them again.
    let mut file = Vec::new();
    snap.write_to(&mut file).unwrap();
    let back = Snapshot::read_from(&file[..]).unwrap();
    assert!(back.iter().eq(snap.iter()));
    assert_eq!(back.unfinished(), 1);
    drop(held);
}

#[test]
fn snapshot_files_round_trip_and_bad_files_are_errors() {
    let ring = exact(8192);
    let mut p = ring.producer().unwrap();
    for i in 0..2000u32 {
        p.output(&i.to_le_bytes()[..(i % 4 + 1) as usize], Wakeup::Default).unwrap();
    }
    let snap = ring.snapshot().unwrap();
    let mut file = Vec::new();
    let n = snap.write_to(&mut file).unwrap();
    assert_eq!(n, file.len() as u64);
    assert_eq!(file[..8], SNAPSHOT_MAGIC);
    let back = Snapshot::read_from(&file[..]).unwrap();
    assert!(back.iter().eq(snap.iter()));
    assert!(back.iter().rev().eq(snap.iter().rev()));
    assert_eq!(back.entries().collect::<Vec<_>>(), snap.entries().collect::<Vec<_>>());
    assert_eq!(
        (back.oldest_position(), back.end_position(), back.overwritten_before(), back.capacity()),
        (snap.oldest_position(), snap.end_position(), snap.overwritten_before(), 8192)
    );

    let format = |bytes: &[u8]| match Snapshot::read_from(bytes) {
        Err(FormatError::InvalidSnapshot(msg)) => msg,
        other => panic!("expected a format error, got {other:?}"),
    };
    assert!(format(&file[..40]).contains("truncated"));
    assert!(format(&file[..file.len() - 3]).contains("truncated"));
    assert!(format(b"").contains("truncated"));
    let mut long = file.clone();
    long.extend_from_slice(&[0; 8]);
    assert!(format(&long).contains(&format!("bytes follow the records at offset {}", file.len())));
    let mut bad = file.clone();
    bad[0] = b'X';
    assert!(format(&bad).contains("magic"));
    let mut bad = file.clone();
    bad[8] = 9;
    assert!(format(&bad).contains("version"));
    let mut bad = file.clone();
    bad[8] = 1;
    assert!(format(&bad).contains("version 1 has no checksums"));
    // Fields that contradict each other, in a file whose checksums were made to match
    // them (as a buggy writer would): the field checks still refuse them.
    let mut bad = file.clone();
    bad[40] ^= 1; // record count
    assert!(format(&reseal(bad)).contains("records"));
    let mut bad = file.clone();
    bad[96..100].copy_from_slice(&0x7fff_0000u32.to_ne_bytes()); // first record's length
    assert!(format(&reseal(bad)).contains("runs past"));
    let mut bad = file.clone();
    bad[16..24].copy_from_slice(&1000u64.to_le_bytes()); // capacity
    assert!(format(&reseal(bad)).contains("capacity"));
    // Random bytes after a valid magic, and random bytes: errors, never a panic.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..2000 {
        let mut junk = if round % 2 == 0 { file.clone() } else { vec![0; 96 + round % 300] };
        for _ in 0..(1 + round % 8) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed as usize) % junk.len();
            junk[at] = (seed >> 32) as u8;
        }
        if round % 4 == 1 {
            junk[..8].copy_from_slice(&SNAPSHOT_MAGIC);
        }
        if round % 8 == 3 {
            junk = reseal(junk); // past the checksums, to the field and record checks
        }
        if let Ok(s) = Snapshot::read_from(&junk[..]) {
            assert!(s.iter().map(|r| r.len() as u64).sum::<u64>() <= s.capacity());
        }
    }
}

/// Recomputes a snapshot file's checksums (format version 2) over what it holds now.
fn reseal(mut file: Vec<u8>) -> Vec<u8> {
    if file.len() >= 96 {
        let data = crc32c::crc32c(&file[96..]);
        file[80..84].copy_from_slice(&data.to_le_bytes());
        let header = crc32c::crc32c(&file[..88]);
        file[88..92].copy_from_slice(&header.to_le_bytes());
    }
    file
}

/// Every single flipped bit of a snapshot file is caught: by the checksums, or (in the
/// magic and version, read first) by those checks. None is read as a valid snapshot.
#[test]
fn every_flipped_bit_of_a_snapshot_file_is_refused() {
    let ring = exact(4096);
    let mut p = ring.producer().unwrap();
    for i in 0..300u32 {
        p.output(&i.to_le_bytes()[..(i % 4 + 1) as usize], Wakeup::Default).unwrap();
    }
    let mut file = Vec::new();
    ring.snapshot().unwrap().write_to(&mut file).unwrap();
    Snapshot::read_from(&file[..]).unwrap();
    let (mut header, mut data, mut other) = (0, 0, 0);
    for bit in 0..file.len() * 8 {
        let mut bad = file.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        match Snapshot::read_from(&bad[..]) {
            Ok(_) => panic!("bit {bit} (byte {}) flipped: read as a valid snapshot", bit / 8),
            // A checksum error is a real mismatch, never "x computed, x stored".
            Err(FormatError::Checksum { stored, computed, .. }) if stored == computed => {
                panic!("bit {bit}: a checksum error whose checksums agree ({stored:#x})")
            }
            Err(FormatError::Checksum { part: "header", start: 0, end: 88, .. }) => header += 1,
            Err(FormatError::Checksum { part: "ring bytes", start, end, .. }) => {
                assert_eq!((start, end), (96, file.len() as u64));
                data += 1;
            }
            Err(FormatError::InvalidSnapshot(_)) if bit < 128 => other += 1, // magic, version, flags
            // The padding after the header's checksum lies outside every checksum.
            Err(FormatError::InvalidSnapshot(m)) if (92 * 8..96 * 8).contains(&bit) => {
                assert!(m.contains("padding after the header's checksum (bytes 92..96)"), "bit {bit}: {m}");
                other += 1;
            }
            Err(e) => panic!("bit {bit}: {e}"),
        }
    }
    assert_eq!(header + data + other, file.len() * 8);
    assert!(header > 0 && data > 0 && other > 0, "{header} {data} {other}");
    // The message names the part and where it is.
    let mut bad = file.clone();
    bad[200] ^= 4;
    let msg = Snapshot::read_from(&bad[..]).unwrap_err().to_string();
    assert!(msg.contains("ring bytes (bytes 96..") && msg.contains("CRC32C"), "{msg}");
}

/// Crafted snapshot files (review findings): lengths that are not whole words, positions
/// that would overflow, and a header that claims more data than the file holds.
#[test]
fn crafted_snapshot_files_are_errors_not_panics() {
    let header = |capacity: u64, first: u64, end: u64, count: u64, data_len: u64| {
        let mut h = Vec::from(SNAPSHOT_MAGIC);
        h.extend_from_slice(&2u32.to_le_bytes());
        h.extend_from_slice(&u32::from(cfg!(target_endian = "little")).to_le_bytes());
        for v in [capacity, first, end, count, 0, 0, 0, data_len, 0, 0] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        h
    };
    let record = |len: u32| {
        let mut r = Vec::new();
        r.extend_from_slice(&len.to_ne_bytes());
        r.extend_from_slice(&1u32.to_ne_bytes());
        r
    };
    // Not a whole word of data.
    let mut f = header(4096, 0, 4, 0, 4);
    f.extend_from_slice(&[1, 0, 0, 0]);
    assert!(matches!(Snapshot::read_from(&reseal(f)[..]), Err(FormatError::InvalidSnapshot(_))));
    // Positions at the top of the range: a record length that would wrap them.
    let first = u64::MAX - 23;
    let mut f = header(4096, first & !7, (first & !7) + 16, 1, 16);
    f.extend_from_slice(&record(100));
    f.extend_from_slice(&[0; 8]);
    assert!(matches!(Snapshot::read_from(&reseal(f)[..]), Err(FormatError::InvalidSnapshot(_))));
    // 4 GiB of data announced, 16 bytes present.
    let mut f = header(1 << 32, 0, 1 << 32, 1, 1 << 32);
    f.extend_from_slice(&record(8));
    f.extend_from_slice(&[0; 8]);
    match Snapshot::read_from(&reseal(f)[..]) {
        Err(FormatError::InvalidSnapshot(msg)) => assert!(msg.contains("truncated"), "{msg}"),
        other => panic!("{other:?}"),
    }
}
