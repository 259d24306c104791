//! A ring drained into batches: message sizes, markers, and records kept in the ring
//! by a source dropped mid-round.

use std::path::PathBuf;

use proptest::prelude::*;
use ringtrace::{MpscRing, Wakeup};

use super::*;
use crate::frame::{Batch, BatchWriter};

/// A ring file of its own in the temporary directory, removed when dropped.
struct TempRing(PathBuf);

impl TempRing {
    fn new(what: &str) -> TempRing {
        use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Relaxed);
        let p = std::env::temp_dir().join(format!("ringtrace-ship-{what}-{}-{n}.ring", std::process::id()));
        let _ = std::fs::remove_file(&p);
        TempRing(p)
    }
}

impl Drop for TempRing {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Record `i` of `n` bytes.
fn body(i: usize, n: usize) -> Vec<u8> {
    (0..n).map(|j| (i * 131 + j) as u8).collect()
}

/// Writes records of `sizes` to a new ring at `at`; returns the ring (kept open).
fn ring_with(at: &TempRing, sizes: &[usize]) -> MpscRing {
    let ring = MpscRing::builder(1 << 20).create(&at.0).unwrap();
    let mut p = ring.producer().unwrap();
    for (i, &n) in sizes.iter().enumerate() {
        p.output(&body(i, n), Wakeup::Default).unwrap();
    }
    ring
}

/// The records of `messages` as (seq, payload or marker length).
fn decoded(messages: &[Vec<u8>]) -> Vec<(u64, Result<Vec<u8>, u64>)> {
    let mut out = Vec::new();
    for m in messages {
        let b = Batch::decode(m).unwrap();
        for r in b.records() {
            out.push((r.seq, r.too_large.map_or_else(|| Ok(r.payload.to_vec()), Err)));
        }
    }
    out
}

/// A source dropped with a round in flight (its agent stopped on an error) leaves the
/// round's records in the ring: the next agent reads them again.
#[test]
fn a_source_dropped_mid_round_leaves_its_records_in_the_ring() {
    let at = TempRing::new("dropped");
    let _ring = ring_with(&at, &[10, 20, 30]);
    let limits = Limits { batch: 1 << 16, max: 1 << 20, round: 1 << 20 };
    let mut s = Source::open(&at.0).unwrap();
    let mut first = Vec::new();
    assert_eq!(s.fill("h", 1, limits, &mut first).unwrap().records, 3);
    drop(s);
    let mut s = Source::open(&at.0).unwrap();
    let mut again = Vec::new();
    assert_eq!(s.fill("h", 1, limits, &mut again).unwrap().records, 3, "the records are still in the ring");
    assert_eq!(decoded(&first), decoded(&again));
    // Once acknowledged, they are gone.
    s.acknowledged();
    drop(s);
    let mut s = Source::open(&at.0).unwrap();
    assert_eq!(s.fill("h", 1, limits, &mut Vec::new()).unwrap(), Filled::default());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the sizes and limits: no message passes the largest, the records come
    /// in order with consecutive sequence numbers, each whole exactly when its batch
    /// alone fits the largest message, else a marker of its length.
    #[test]
    fn messages_never_pass_the_limit_and_markers_stand_exactly_for_what_does_not_fit(
        sizes in prop::collection::vec(prop_oneof![0usize..64, 8000usize..8300, 0usize..20_000], 1..40),
        max in 8192usize..12_000,
        batch in 1usize..16_000,
        round in 1usize..100_000,
    ) {
        let at = TempRing::new("limits");
        let _ring = ring_with(&at, &sizes);
        let limits = Limits { batch: batch.min(max), max, round };
        let mut s = Source::open(&at.0).unwrap();
        let name = s.name.clone();
        let mut seen = Vec::new();
        let mut next = 0u64;
        // Rounds until the ring is empty: each reads at least one record.
        for _ in 0..=sizes.len() {
            let mut messages = Vec::new();
            let filled = s.fill("host", 5, limits, &mut messages).unwrap();
            if filled.records == 0 {
                break;
            }
            for m in &messages {
                prop_assert!(m.len() <= max, "a message of {} bytes, the largest is {max}", m.len());
            }
            let recs = decoded(&messages);
            prop_assert_eq!(recs.len() as u64, filled.records);
            prop_assert_eq!(recs.iter().filter(|r| r.1.is_err()).count() as u64, filled.too_large);
            seen.extend(recs);
            s.acknowledged();
            next += filled.records;
        }
        prop_assert_eq!(next, sizes.len() as u64);
        for (i, (seq, got)) in seen.into_iter().enumerate() {
            prop_assert_eq!(seq, i as u64);
            let fits = BatchWriter::alone("host", &name, sizes[i]) <= max;
            let expect = if fits { Ok(body(i, sizes[i])) } else { Err(sizes[i] as u64) };
            prop_assert_eq!(got, expect);
        }
    }
}

/// A directory stands for its ring and channel files and flight recorders, by name;
/// other files and subdirectories are skipped.
#[test]
fn a_directory_expands_to_its_ring_and_channel_files() {
    use ringtrace::clock::Monotonic;
    use ringtrace::config::Discard;
    let dir = std::env::temp_dir().join(format!("ringtrace-ship-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let _b = MpscRing::builder(4096).create(dir.join("b.ring")).unwrap();
    let _a = ringtrace::SpscRing::builder(4096).create(dir.join("a.ring")).unwrap();
    let _c = ringtrace::Channel::<Discard, Monotonic>::builder(4096)
        .max_producers(2)
        .create(dir.join("c.chan"), Monotonic)
        .unwrap();
    let _flight = ringtrace::FlightRecorder::builder(4096).create(dir.join("d.ring")).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a ring").unwrap();
    let _sub = MpscRing::builder(4096).create(dir.join("sub/e.ring")).unwrap();
    let sources = Source::expand(std::slice::from_ref(&dir)).unwrap();
    let names: Vec<String> = sources.iter().map(|s| s.name.clone()).collect();
    let at = |f: &str| dir.join(f).display().to_string();
    let chan = |slot: u32| format!("{}#{slot}", at("c.chan"));
    assert_eq!(names, [at("a.ring"), at("b.ring"), chan(0), chan(1), at("d.ring")]);
    drop(sources);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A SOURCE argument the library's grammar refuses is said once, naming it; a map that
/// does not exist names its id.
#[test]
fn bad_map_sources_are_refused_naming_them_once() {
    let refused = |arg: &str| match Source::expand(&[PathBuf::from(arg)]) {
        Ok(_) => panic!("{arg} was taken"),
        Err(e) => e.to_string(),
    };
    assert_eq!(refused("bpf-id:x"), "source bpf-id:x: a map id is a number from 0 to 4294967295, as in bpf-id:42");
    assert_eq!(refused("bpf-pin:"), "source bpf-pin: needs a path, as in bpf-pin:/sys/fs/bpf/events");
    let e = refused("bpf-id:4294967295");
    assert!(e.starts_with("source bpf-id:4294967295: "), "{e}");
}
