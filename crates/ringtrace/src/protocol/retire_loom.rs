//! loom models of overwrite mode ([`super`]): the real claim, retire, copy-and-check and
//! pause code over a heap region whose every word is a loom atomic. The claims they check
//! are the module's rules: a reader never accepts a torn or overwritten record, nobody
//! overwrites a record still being written, accounting is exact, and a pause stops
//! every later reserve and waits for the earlier ones.

use loom::sync::Arc;
use loom::thread;

use super::capture::{Capture, Walk};
use crate::config::Wakeup;
use crate::format::control::NEVER_WAKE;
use crate::format::control::PAUSED;
use crate::format::record::{footprint, HDR_SIZE};
use crate::protocol::commit_loom::model;
use crate::protocol::core::{Core, ProducerCursor, Refused};
use crate::region::heap::HeapRegion;
use crate::region::Region;
use crate::sync::Ordering::Relaxed;

type Ring = Arc<Core<HeapRegion>>;

/// A 32-byte overwrite ring (one 8-byte record fits with the free word after it; the
/// next overwrites it) that retires exactly what each record needs.
fn ring() -> Ring {
    let core = Core::new_overwrite(HeapRegion::new(32), NEVER_WAKE, 0);
    core.init_zeroed();
    Arc::new(core)
}

/// [`ring`], made a single-producer ring (its header says so: pauses and repair read
/// the kind there).
fn ring_single() -> Ring {
    let r = ring();
    let spsc = <crate::config::Spsc as crate::config::ProducerKind>::CODE;
    r.control().meta.0.kind.store(spsc, Relaxed);
    r
}

/// [`produce`] with the single-producer claim (plain stores, no CAS).
fn produce_single(r: &Ring, cur: &mut ProducerCursor, v: u64) -> bool {
    write_claimed(r, r.reserve_overwrite_single(8, cur), v)
}

/// Writes `v` tagged with its position into a claimed record and commits it; `false`
/// if the claim was refused (a record being written was in the way, or a pause).
fn write_claimed(r: &Ring, claim: Result<u64, Refused>, v: u64) -> bool {
    match claim {
        Ok(pos) => {
            r.write_payload(pos, 0, &(v << 16 | pos).to_ne_bytes());
            r.commit(pos, 8, false, Wakeup::NoWakeup);
            true
        }
        Err(Refused::Pending | Refused::Paused) => false,
        Err(other) => unreachable!("{other:?}"),
    }
}

/// The single producer's thread: commits `values` in order; joins to how many went in.
fn single_producer(r: &Ring, values: &'static [u64]) -> thread::JoinHandle<u64> {
    producer_with(r, values, produce_single)
}

/// Reserves, writes `v` tagged with the record's position (`v << 16 | pos`, so a payload
/// found under another record's header is caught), commits; `false` if refused (a
/// record being written was in the way, or the ring is paused).
fn produce(r: &Ring, cur: &mut ProducerCursor, v: u64) -> bool {
    write_claimed(r, r.reserve_overwrite(8, cur), v)
}

/// A producer thread committing `values` in order; joins to how many went in.
fn producer(r: &Ring, values: &'static [u64]) -> thread::JoinHandle<u64> {
    producer_with(r, values, produce)
}

/// A thread committing `values` in order with `produce`; joins to how many went in.
fn producer_with(
    r: &Ring,
    values: &'static [u64],
    produce: fn(&Ring, &mut ProducerCursor, u64) -> bool,
) -> thread::JoinHandle<u64> {
    let r = r.clone();
    thread::spawn(move || {
        let mut cur = r.producer_cursor();
        values.iter().map(|&v| produce(&r, &mut cur, v) as u64).sum()
    })
}

/// The values of the records held, each checked to carry its own position.
fn payloads(cap: &Capture) -> Vec<u64> {
    let value = |f: super::capture::Found| {
        let w = u64::from_ne_bytes(cap.payload(f).try_into().unwrap());
        assert_eq!(w & 0xffff, f.pos, "payload {w:#x} under the header at {}: torn", f.pos);
        w >> 16
    };
    cap.found.iter().map(|&f| value(f)).collect()
}

/// Each value belongs to a producer by its tens digit and only grows within it; no
/// value is zero (zeroed space read as a record) or repeated (a record read through
/// another's header).
fn check_views(seen: &[u64]) {
    for (i, &v) in seen.iter().enumerate() {
        assert!([11, 12, 21, 22].contains(&v), "torn or foreign record {v} in {seen:?}");
        assert!(!seen[i + 1..].contains(&v), "repeated record in {seen:?}");
        assert!(!seen[i + 1..].iter().any(|&w| w / 10 == v / 10 && w < v), "out of order: {seen:?}");
    }
}

/// The ring's invariants once everyone is idle.
fn check_idle(r: &Ring) {
    let (o, _) = r.over_state().expect("no retirer left mid-update");
    let p = r.prod();
    let z = r.control().overwrite.0.zeroed.load(Relaxed);
    assert_eq!(z, o + r.capacity(), "unlocked, and Z = O + capacity");
    assert!(o <= p && p + HDR_SIZE <= z, "O {o} <= P {p}, P + 8 <= Z {z}");
}

/// A snapshot taken on another thread than `main` (loom then interleaves it with the
/// producers from its first step), copying `chunk` bytes at a time (8: every record
/// straddles two chunks); joins to the payloads it held, or `None` for `Busy`.
fn snapshot_thread(r: &Ring, chunk: u64) -> thread::JoinHandle<Option<Vec<u64>>> {
    let r = r.clone();
    thread::spawn(move || {
        let mut cap = Capture::default();
        r.capture_newest(chunk, &mut cap)?;
        Some(payloads(&cap))
    })
}

/// The snapshot after everyone is idle: the invariants hold, and `retired` plus the
/// records held is everything committed.
fn check_end(r: &Ring, committed: u64) {
    check_idle(r);
    let mut cap = Capture::default();
    r.capture_newest(8, &mut cap).expect("idle ring");
    let last = payloads(&cap);
    check_views(&last);
    let (_, retired) = r.over_state().unwrap();
    assert_eq!(retired + last.len() as u64, committed, "held {last:?}");
}

/// OW1: a producer writes 11 then 12 (which overwrites 11: retire, zero, claim, write)
/// while a snapshot copies and checks, in 8-byte chunks, so that each record's payload
/// is copied before its header and must be copied again. The snapshot holds only
/// intact records.
#[test]
fn loom_overwrite_snapshot_races_an_overwrite() {
    model(|| {
        let r = ring();
        let a = producer(&r, &[11, 12]);
        let s = snapshot_thread(&r, 8);
        if let Some(seen) = s.join().unwrap() {
            check_views(&seen);
        }
        let committed = a.join().unwrap();
        assert_eq!(committed, 2, "nothing else writes: nothing is refused");
        check_end(&r, committed);
    });
}

/// OW1c: the model: two producers (11; 21) and a concurrent snapshot (whole-
/// record chunks, to keep the model small; OW1 covers straddling). The second record to
/// be claimed overwrites the first (or is refused while the first is unfinished); the
/// snapshot holds only intact records.
#[test]
fn loom_overwrite_two_producers_and_a_snapshot() {
    model(|| {
        let r = ring();
        let a = producer(&r, &[11]);
        let b = producer(&r, &[21]);
        let s = snapshot_thread(&r, 16);
        if let Some(seen) = s.join().unwrap() {
            check_views(&seen);
        }
        let committed = a.join().unwrap() + b.join().unwrap();
        check_end(&r, committed);
    });
}

/// OW1b: two producers race for the claim and the retire lock: one writes 11, the
/// other 21 then 22, each record overwriting the one before. Whatever the interleaving, a
/// record still being written is never overwritten (a reserve that would is refused),
/// and the ring ends consistent with exact counts.
#[test]
fn loom_overwrite_two_producers() {
    model(|| {
        let r = ring();
        let a = producer(&r, &[11]);
        let b = producer(&r, &[21, 22]);
        let committed = a.join().unwrap() + b.join().unwrap();
        assert!(committed >= 1);
        check_end(&r, committed);
    });
}

/// The reading side of `OverwriteConsumer`: the copy-and-check reader in consumer walk
/// and its accounting (records before `O` are counted from `retired`).
#[derive(Default)]
struct ModelConsumer {
    pos: u64,
    passed: u64,
    overwritten: u64,
    seen: Vec<u64>,
}

impl ModelConsumer {
    fn read(&mut self, r: &Ring) {
        let mut cap = Capture::default();
        if r.capture(self.pos, r.capacity(), Walk::Consumer, &mut cap).is_none() {
            return;
        }
        if cap.first > self.pos {
            let before = cap.retired_at_first.expect("moved to O");
            self.overwritten += before - self.passed;
            self.passed = before;
            self.pos = cap.first;
        }
        for v in payloads(&cap) {
            self.seen.push(v);
            self.passed += 1;
        }
        self.pos = cap.end;
    }
}

/// OW2: a consumer reads once while a producer writes 11 then 12 (overwriting 11), and
/// once more after. What it delivers is intact and in order, and delivered +
/// overwritten = committed.
#[test]
fn loom_overwrite_consumer_accounting() {
    model(|| {
        let r = ring();
        let a = producer(&r, &[11, 12]);
        let r2 = r.clone();
        let c = thread::spawn(move || {
            let mut c = ModelConsumer::default();
            c.read(&r2);
            c
        });
        let committed = a.join().unwrap();
        let mut c = c.join().unwrap();
        c.read(&r);
        check_views(&c.seen);
        assert_eq!(c.seen.len() as u64 + c.overwritten, committed, "seen {:?}, overwritten {}", c.seen, c.overwritten);
    });
}

/// OW3: a pause (on its own thread) races a producer that commits two records. Once
/// `pause` returns, every record before the frozen producer position is finished and
/// intact, and the producer position does not move until resume; afterwards reserves
/// succeed again.
#[test]
fn loom_overwrite_pause_races_a_producer() {
    model(|| {
        let r = ring();
        let a = producer(&r, &[11, 12]);
        let r2 = r.clone();
        let pauser = thread::spawn(move || {
            let token = r2.pause(true, std::time::Duration::ZERO).ok()?;
            let mut x = token.over_pos;
            while x < token.prod {
                let h = r2.region.header(x).load(Relaxed);
                assert!(h != 0 && crate::format::record::len_word(h) == 8, "unfinished record {h:#x} at {x}, paused");
                let v = r2.region.header(x + HDR_SIZE).load(Relaxed);
                assert!(v == 11 << 16 | x || v == 12 << 16 | x, "torn record {v:#x} at {x} in a paused ring");
                x += footprint(8);
            }
            Some(token)
        });
        let token = pauser.join().unwrap();
        a.join().unwrap();
        if let Some(token) = token {
            assert_eq!(r.control().producer.0.pos.load(Relaxed), token.prod | PAUSED, "P frozen while paused");
            r.resume(token);
        }
        let mut cur = r.producer_cursor();
        assert!(produce(&r, &mut cur, 21), "reserves succeed after resume");
        check_idle(&r);
    });
}

/// SP1: the single-producer claim (a plain store of `P`, no CAS) against a snapshot
/// copying in 8-byte chunks while the producer writes 11 then 12, which overwrites it:
/// the snapshot holds only intact records, and nothing is refused (the producer
/// retires its own records; nothing else holds the lock).
#[test]
fn loom_single_producer_overwrite_snapshot() {
    model(|| {
        let r = ring_single();
        let a = single_producer(&r, &[11, 12]);
        let s = snapshot_thread(&r, 8);
        if let Some(seen) = s.join().unwrap() {
            check_views(&seen);
        }
        let committed = a.join().unwrap();
        assert_eq!(committed, 2, "a single producer is refused only by a pause");
        check_idle(&r);
        let mut cap = Capture::default();
        r.capture_newest(8, &mut cap).expect("idle ring");
        let (_, retired) = r.over_state().unwrap();
        assert_eq!(payloads(&cap), [12], "the newest record");
        assert_eq!(retired + 1, committed);
    });
}

/// SP2: a pause races the single producer writing 11 then 12. A single-producer pause
/// sets no flag in `P` (the producer's plain store would erase it): it freezes the
/// view `[O, P)` it read under the retire lock. While paused, every record in that view
/// stays finished and intact however the producer goes on (it may write into zeroed
/// space past the view, and is refused once it must retire); after resume, reserves
/// succeed and the ring is consistent.
#[test]
fn loom_single_producer_pause_races_the_producer() {
    model(|| {
        let r = ring_single();
        let a = single_producer(&r, &[11, 12]);
        let r2 = r.clone();
        let pauser = thread::spawn(move || {
            let token = r2.pause(true, std::time::Duration::ZERO).ok()?;
            let check = |r: &Ring| {
                let mut x = token.over_pos;
                while x < token.prod {
                    let h = r.region.header(x).load(Relaxed);
                    assert!(
                        h != 0 && crate::format::record::len_word(h) == 8,
                        "unfinished record {h:#x} at {x}, paused"
                    );
                    let v = r.region.header(x + HDR_SIZE).load(Relaxed);
                    assert!(v == 11 << 16 | x || v == 12 << 16 | x, "torn record {v:#x} at {x} in a paused ring");
                    x += footprint(8);
                }
            };
            check(&r2);
            thread::yield_now();
            check(&r2); // still intact after the producer ran on
            Some(token)
        });
        let token = pauser.join().unwrap();
        a.join().unwrap();
        if let Some(token) = token {
            r.resume(token);
        }
        let mut cur = r.producer_cursor();
        assert!(produce_single(&r, &mut cur, 13), "reserves succeed after resume");
        check_idle(&r);
    });
}
