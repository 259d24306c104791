//! Fuzzing the ring-file reader (`ringtrace::inspect`) with proptest: random bytes, and
//! valid images broken on purpose (bytes flipped, words overwritten, positions and header
//! fields set to extreme values, the file cut short). Whatever the bytes, every call must
//! return (an error or a value) without panicking, within a bounded number of reads, and
//! what it returns must be consistent.
//!
//! Default: 4096 cases per property (about a second in release mode); `PROPTEST_CASES`
//! sets another count. Longer run:
//!
//! ```text
//! PROPTEST_CASES=200000 cargo test --release -p ringtrace --test inspect_fuzz
//! ```

#![cfg(not(loom))]

use std::cell::Cell;
use std::io;

use proptest::prelude::*;
use ringtrace::format::record::footprint;
use ringtrace::inspect::image::{self, ImageBuilder};
use ringtrace::inspect::{RingFile, RingKind, RingMode, Source};

/// A byte image that counts the reads made of it and the bytes they asked for.
struct Counting {
    bytes: Vec<u8>,
    reads: Cell<u64>,
    read_bytes: Cell<u64>,
}

impl Source for Counting {
    fn size(&self) -> io::Result<u64> {
        self.bytes.size()
    }
    fn read_at(&self, off: u64, buf: &mut [u8]) -> io::Result<()> {
        self.reads.set(self.reads.get() + 1);
        self.read_bytes.set(self.read_bytes.get() + buf.len() as u64);
        self.bytes.read_at(off, buf)
    }
}

/// Reads allowed per call: the state is read at most 8 times (2 reads each), twice per
/// `records` call, plus 2 reads of data.
const MAX_READS: u64 = 2 * 8 * 2 + 2 + 1;

/// Runs everything a reader does on `bytes` and checks the bounds and the results.
fn exercise(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    let len = bytes.len() as u64;
    let src = Counting { bytes, reads: Cell::new(0), read_bytes: Cell::new(0) };
    let Ok(ring) = RingFile::from_source(&src) else { return Ok(()) };
    let h = ring.header().clone();
    prop_assert!(h.capacity.is_power_of_two() && h.data_offset + h.capacity <= len);
    for call in 0..4 {
        src.reads.set(0);
        src.read_bytes.set(0);
        let result = match call {
            0 => ring.state().map(|_| None),
            1 => ring.records().map(Some),
            2 => ring.records_from(0, true).map(Some),
            _ => {
                let from = ring.state().map(|s| s.window(h.mode).0.saturating_add(8)).unwrap_or(8);
                ring.records_from(from, false).map(Some)
            }
        };
        prop_assert!(src.reads.get() <= MAX_READS, "{} reads", src.reads.get());
        // The control block read at most 16 times per state, twice, plus the data once.
        prop_assert!(src.read_bytes.get() <= 2 * 8 * 8192 * 2 + h.capacity);
        let Ok(Some(records)) = result else { continue };
        // Every message is one line.
        let (lo, hi) = records.window();
        prop_assert!(lo <= hi && hi - lo <= h.capacity);
        let mut total = 0u64;
        let mut last_end = lo;
        for r in records.iter() {
            prop_assert!(r.pos >= last_end && r.pos % 8 == 0);
            prop_assert!(r.end() <= hi && r.end() <= records.end());
            prop_assert!(r.pid != 0);
            total += r.payload.len() as u64;
            last_end = r.end();
        }
        prop_assert!(total <= h.capacity);
        prop_assert!(records.end() <= hi && records.resume_at() <= records.end());
        prop_assert_eq!(records.iter().rev().count(), records.len());
    }
    // Errors print as one line.
    if let Err(e) = ring.records() {
        prop_assert!(!e.to_string().contains('\n'));
    }
    Ok(())
}

#[derive(Clone, Debug)]
enum Entry {
    Record(usize),
    Discarded(usize),
    Busy(u32),
    Zero(u32),
}

fn entry() -> impl Strategy<Value = Entry> {
    prop_oneof![
        6 => (0usize..300).prop_map(Entry::Record),
        1 => (0usize..100).prop_map(Entry::Discarded),
        1 => (0u32..100).prop_map(Entry::Busy),
        1 => (0u32..100).prop_map(Entry::Zero),
    ]
}

/// A valid image: its builder's parameters, and the payloads of its committed records.
fn valid_image() -> impl Strategy<Value = (Vec<u8>, Vec<Vec<u8>>)> {
    (
        prop_oneof![Just(4096u64), Just(8192), Just(16384)],
        any::<bool>(),
        any::<bool>(),
        (0u64..1 << 40).prop_map(|p| p * 8),
        prop::collection::vec(entry(), 0..40),
        1u32..,
    )
        .prop_map(|(capacity, overwrite, spsc, start, entries, pid)| {
            let mode = if overwrite { RingMode::Overwrite } else { RingMode::Discard };
            let kind = if spsc { RingKind::Spsc } else { RingKind::Mpsc };
            let mut b = ImageBuilder::new(capacity, mode).kind(kind).start(start).pid(pid);
            let mut used = 0;
            let mut payloads = Vec::new();
            for (i, e) in entries.into_iter().enumerate() {
                let len = match e {
                    Entry::Record(n) | Entry::Discarded(n) => n as u32,
                    Entry::Busy(n) | Entry::Zero(n) => n,
                };
                if used + footprint(len) + 8 > capacity {
                    break;
                }
                used += footprint(len);
                let payload: Vec<u8> = (0..len).map(|j| (i as u32 * 31 + j) as u8 | 1).collect();
                b = match e {
                    Entry::Record(_) => {
                        payloads.push(payload.clone());
                        b.record(&payload)
                    }
                    Entry::Discarded(_) => b.discarded(&payload),
                    Entry::Busy(n) => b.busy(n),
                    Entry::Zero(n) => b.zero_claim(n),
                };
                if matches!(e, Entry::Zero(_)) && spsc && !overwrite {
                    break; // a single producer's unwritten header is its last record
                }
            }
            (b.build(), payloads)
        })
}

#[derive(Clone, Debug)]
enum Mutation {
    /// Flips one bit of the byte at this index (modulo the length).
    Flip(usize, u8),
    /// Overwrites the aligned word at this index (modulo the word count).
    Word(usize, u64),
    /// Sets a position field (index into `POSITION_FIELDS`).
    Position(usize, u64),
    /// Sets a header field (capacity, data offset; version, kind, mode, flags as u32).
    Field(usize, u64),
    /// Cuts the image to this many bytes (modulo its length + 1).
    Truncate(usize),
}

fn extreme() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        Just(u64::MAX - 7),
        Just(1u64 << 63),
        Just(1u64 << 32),
        (0u64..1 << 16).prop_map(|v| v * 8),
        (0u64..1 << 16),
        any::<u64>(),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        3 => (any::<usize>(), extreme()).prop_map(|(i, v)| Mutation::Word(i, v)),
        3 => (0usize..image::POSITION_FIELDS.len(), extreme()).prop_map(|(i, v)| Mutation::Position(i, v)),
        2 => (0usize..6, extreme()).prop_map(|(i, v)| Mutation::Field(i, v)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(img: &mut Vec<u8>, m: &Mutation) {
    match *m {
        Mutation::Flip(i, bit) if !img.is_empty() => {
            let n = img.len();
            img[i % n] ^= 1 << bit;
        }
        Mutation::Word(i, v) if img.len() >= 8 => {
            let at = (i % (img.len() / 8)) * 8;
            image::set_u64(img, at, v);
        }
        Mutation::Position(i, v) => image::set_u64(img, image::POSITION_FIELDS[i], v),
        Mutation::Field(i, v) => match i {
            0 => image::set_u64(img, image::CAPACITY_AT, v),
            1 => image::set_u64(img, image::DATA_OFFSET_AT, v),
            2 => image::set_u32(img, image::VERSION_AT, v as u32),
            3 => image::set_u32(img, image::KIND_AT, v as u32),
            4 => image::set_u32(img, image::MODE_AT, v as u32),
            _ => image::set_u32(img, image::FLAGS_AT, v as u32),
        },
        Mutation::Truncate(n) => {
            let keep = n % (img.len() + 1);
            img.truncate(keep);
        }
        _ => {}
    }
}

/// `PROPTEST_CASES`, or 4096.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(4096)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Random bytes, often with a valid magic and version so that the reader gets past
    /// the first checks.
    #[test]
    fn random_bytes(mut bytes in prop::collection::vec(any::<u8>(), 0..20_000), header in any::<bool>()) {
        if header && bytes.len() >= 16 {
            bytes[..8].copy_from_slice(b"RINGTRC\0");
            bytes[8..12].copy_from_slice(&4u32.to_ne_bytes());
        }
        exercise(bytes)?;
    }

    /// Valid images read back exactly: every committed record, in order.
    #[test]
    fn valid_images_round_trip((img, payloads) in valid_image()) {
        let ring = RingFile::from_source(img).expect("a valid image opens");
        let records = ring.records().expect("a valid image reads");
        let got: Vec<Vec<u8>> = records.iter().map(|r| r.payload.to_vec()).collect();
        prop_assert_eq!(got, payloads);
        prop_assert!(records.corrupt().is_none());
    }

    /// Valid images, mutated.
    #[test]
    fn mutated_images((img, _) in valid_image(), mutations in prop::collection::vec(mutation(), 1..6)) {
        let mut img = img;
        for m in &mutations {
            apply(&mut img, m);
        }
        exercise(img)?;
    }
}
