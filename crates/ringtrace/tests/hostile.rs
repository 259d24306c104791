//! Real ring files, made by the library, then broken by a "hostile process" (random
//! words of the control block and the data area overwritten, positions set to extreme
//! values) and attached to again: `RingBuf::open`, a consumer's whole drain, a snapshot,
//! a pause and a producer must each return a value or an error, never crash, hang or
//! read out of bounds (a fault would kill this test binary). The same images go to the
//! untrusted reader ([`ringtrace::inspect`]).
//!
//! Default: 256 cases per property; `PROPTEST_CASES` sets another count.
#![cfg(not(loom))]

use std::convert::Infallible;
use std::path::PathBuf;

use proptest::prelude::*;
use ringtrace::inspect::RingFile;
use ringtrace::{FlightRecorder, MpscRing, SpscRing, Wakeup};

const CAP: u64 = 4096;

fn path(tag: &str) -> PathBuf {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    dir.join(format!("ringtrace-hostile-{}-{tag}.ring", std::process::id()))
}

/// A valid ring file image of each mode, with records that wrapped.
fn image(mode: u8) -> Vec<u8> {
    let p = path(&format!("make-{mode}-{:?}", std::thread::current().id()));
    let _ = std::fs::remove_file(&p);
    match mode {
        0 => {
            let ring = MpscRing::builder(CAP).create(&p).unwrap();
            let (mut prod, mut c) = (ring.producer().unwrap(), ring.consumer().unwrap());
            for i in 0..300u64 {
                prod.output(&i.to_le_bytes().repeat((i % 5) as usize), Wakeup::Default).unwrap();
                if i % 3 == 0 {
                    c.consume(|_| Ok::<(), Infallible>(())).unwrap();
                }
            }
        }
        1 => {
            let ring = SpscRing::builder(CAP).create(&p).unwrap();
            let mut prod = ring.producer().unwrap();
            for i in 0..100u64 {
                prod.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
            }
        }
        _ => {
            let ring = FlightRecorder::builder(CAP).create(&p).unwrap();
            let mut prod = ring.producer().unwrap();
            for i in 0..1000u64 {
                prod.output(&i.to_le_bytes().repeat((i % 4) as usize), Wakeup::Default).unwrap();
            }
        }
    }
    let bytes = std::fs::read(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    bytes
}

/// What the hostile process writes.
#[derive(Clone, Debug)]
enum Edit {
    /// A random 8-byte word at a random 8-aligned offset.
    Word(usize, u64),
    /// An extreme value at one of the position words (offsets in the control block).
    Position(usize, u64),
}

fn edit() -> impl Strategy<Value = Edit> {
    let extreme = prop_oneof![Just(0u64), Just(u64::MAX), Just(u64::MAX - 7), Just(1 << 40), Just(CAP), any::<u64>()];
    prop_oneof![
        (0usize..(8192 + CAP as usize) / 8, any::<u64>()).prop_map(|(i, v)| Edit::Word(i * 8, v)),
        // producer pos, consumer pos, read, overwrite seq/over_pos/retired/zeroed.
        (prop::sample::select(vec![128usize, 256, 272, 512, 520, 528, 536]), extreme)
            .prop_map(|(o, v)| Edit::Position(o, v)),
    ]
}

fn apply(bytes: &mut [u8], edits: &[Edit]) {
    for e in edits {
        let (at, v) = match *e {
            Edit::Word(at, v) | Edit::Position(at, v) => (at, v),
        };
        if at + 8 <= bytes.len() {
            bytes[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        }
    }
}

/// Attaches to the broken file and uses it every way a process would.
fn exercise(mode: u8, bytes: &[u8], tag: &str) {
    let p = path(tag);
    let _ = std::fs::remove_file(&p);
    std::fs::write(&p, bytes).unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    if let Ok(ring) = RingFile::open(&p) {
        let _ = ring.state();
        let _ = ring.records();
    }
    match mode {
        0 => {
            if let Ok(ring) = MpscRing::open(&p) {
                if let Ok(mut c) = ring.consumer() {
                    // Bounded: a hostile file may hold a record forever "unfinished".
                    for _ in 0..4 {
                        let _ = c.consume(|d| {
                            std::hint::black_box(d.iter().map(|&b| b as u64).sum::<u64>());
                            Ok::<(), Infallible>(())
                        });
                    }
                    let _ = ring.stats();
                }
                if let Ok(mut prod) = ring.producer() {
                    let _ = prod.output(b"after", Wakeup::NoWakeup);
                }
            }
        }
        1 => {
            if let Ok(ring) = SpscRing::open(&p) {
                if let Ok(mut c) = ring.consumer() {
                    for _ in 0..4 {
                        let _ = c.consume(|d| {
                            std::hint::black_box(d.len());
                            Ok::<(), Infallible>(())
                        });
                    }
                }
            }
        }
        _ => {
            if let Ok(ring) = FlightRecorder::open(&p) {
                let _ = ring.snapshot();
                if let Ok(mut c) = ring.consumer() {
                    for _ in 0..4 {
                        let _ = c.consume(|d| {
                            std::hint::black_box(d.len());
                            Ok::<(), Infallible>(())
                        });
                    }
                }
                if let Ok(paused) = ring.pause() {
                    std::hint::black_box(paused.iter().count());
                }
                if let Ok(mut prod) = ring.producer() {
                    for i in 0..20u64 {
                        let _ = prod.output(&i.to_le_bytes(), Wakeup::NoWakeup);
                    }
                }
                let _ = ring.snapshot();
            }
        }
    }
    std::fs::remove_file(&p).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn broken_ring_files_are_errors_not_crashes(mode in 0u8..3, edits in prop::collection::vec(edit(), 1..6)) {
        let mut bytes = image(mode);
        apply(&mut bytes, &edits);
        exercise(mode, &bytes, &format!("case-{mode}-{:?}", std::thread::current().id()));
    }
}
