//! loom models of the protocol in [`crate::protocol`], run over [`HeapRegion`] with
//! `RUSTFLAGS="--cfg loom" cargo test -p ringtrace --lib --release loom` at
//! `LOOM_MAX_PREEMPTIONS=2` (the test command) or more. Each is small enough to be
//! exhaustive at that bound. loom checks every payload access for races (the payload
//! words are loom cells), and reports a deadlock if a consumer sleeps forever: a lost
//! wakeup.

use std::ops::RangeInclusive;

use loom::sync::Arc;
use loom::thread;

use crate::config::Wakeup;
use crate::protocol::core::{Core, ProducerCursor, ReadCursor, Refused, Step};
use crate::region::heap::HeapRegion;

type Ring = Arc<Core<HeapRegion>>;

/// `loom::model` with room for the consumers' spin loops (tokio uses 10 000 too);
/// `LOOM_MAX_PREEMPTIONS` and `LOOM_MAX_BRANCHES` still override.
pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if std::env::var("LOOM_MAX_BRANCHES").is_err() {
        b.max_branches = 10_000;
    }
    b.check(f);
}

/// A multi-producer ring (`MULTI`: producers zero ahead under the zeroing lock) or a
/// single-producer one (the producer zeroes ahead of itself).
fn ring<const MULTI: bool>(capacity: u64, watermark: u64) -> Ring {
    Arc::new(Core::fresh(HeapRegion::new(capacity), watermark))
}

/// Reserves an 8-byte record (spinning while full), writes `v`, commits or discards.
fn produce<const MULTI: bool>(r: &Ring, cur: &mut ProducerCursor, v: u64, discard: bool, wakeup: Wakeup) -> u64 {
    let pos = loop {
        match r.reserve::<MULTI>(8, cur) {
            Ok(pos) => break pos,
            // Pending: another producer holds the zeroing lock and has not finished.
            Err(Refused::Full | Refused::Pending) => thread::yield_now(),
            Err(other) => unreachable!("{other:?}"),
        }
    };
    // SAFETY: we hold the reservation at `pos`; its one payload word is word 0.
    unsafe { r.region.write_payload(pos, 0, v) };
    r.commit(pos, 8, discard, wakeup);
    pos
}

/// One producer handle on its own thread, committing `values` in order.
fn one_producer<const MULTI: bool>(r: &Ring, values: RangeInclusive<u64>) -> thread::JoinHandle<()> {
    let r = r.clone();
    thread::spawn(move || {
        let mut cur = r.producer_cursor();
        for v in values {
            produce::<MULTI>(&r, &mut cur, v, false, Wakeup::Default);
        }
    })
}

/// Two multi-producer handles on their own threads: one commits 1, the other commits
/// 2 (or discards it, if `discard_second`). Each joins to its record's position.
fn two_producers(r: &Ring, discard_second: bool) -> (thread::JoinHandle<u64>, thread::JoinHandle<u64>) {
    let (r1, r2) = (r.clone(), r.clone());
    let p1 = thread::spawn(move || produce::<true>(&r1, &mut r1.producer_cursor(), 1, false, Wakeup::Default));
    let p2 = thread::spawn(move || produce::<true>(&r2, &mut r2.producer_cursor(), 2, discard_second, Wakeup::Default));
    (p1, p2)
}

/// The consumer side as `Consumer` drives it, with the real reading step
/// ([`Core::next`]) and release.
struct ModelConsumer<const MULTI: bool> {
    r: Ring,
    rd: ReadCursor,
    seen: Vec<u64>,
}

impl<const MULTI: bool> ModelConsumer<MULTI> {
    fn new(r: &Ring) -> Self {
        ModelConsumer { r: r.clone(), rd: r.cursor(0, 0, 0), seen: Vec::new() }
    }

    fn skipped(&self) -> usize {
        self.rd.skipped as usize
    }

    /// Reads everything ready; returns how many records (of any kind) it passed.
    fn drain(&mut self) -> usize {
        let before = self.rd.consumed + self.rd.skipped;
        loop {
            match self.r.next(&mut self.rd) {
                Step::Record { pos, len } => {
                    assert_eq!(len, 8);
                    // SAFETY: committed, not yet released, we are the consumer.
                    self.seen.push(unsafe { self.r.region.read_payload(pos, 0) });
                }
                Step::Empty => break,
                Step::Full => {
                    let to = self.rd.pos;
                    // SAFETY: we are the consumer and hold no reference into the range.
                    unsafe { self.r.release(&mut self.rd, to) }
                }
                Step::Corrupt { pos, header } => panic!("corrupt header {header:#x} at {pos}"),
            }
        }
        let to = self.rd.pos;
        // SAFETY: we are the consumer and hold no reference into [published, pos).
        unsafe { self.r.release(&mut self.rd, to) };
        (self.rd.consumed + self.rd.skipped - before) as usize
    }

    /// Consumes until `total` records (committed or discarded) have passed, spinning.
    fn spin_until(&mut self, total: usize) {
        while self.seen.len() + self.skipped() < total {
            if self.drain() == 0 {
                thread::yield_now();
            }
        }
    }

    /// Consumes until `total` records have passed, sleeping on the futex doorbell of a
    /// shared ring between drains as `Consumer::wait` does there: the futex value is
    /// read before the wait is armed. A lost wakeup deadlocks, which loom reports.
    fn futex_sleep_until(&mut self, total: usize) {
        while self.seen.len() + self.skipped() < total {
            if self.drain() > 0 {
                continue;
            }
            let token = self.r.region.futex_token();
            if self.r.arm(self.rd.pos).unwrap() {
                self.r.region.futex_wait(token);
                self.r.disarm(self.rd.pos);
            }
        }
    }

    /// Consumes until `total` records have passed, sleeping on the doorbell between
    /// drains as `Consumer::wait` does. A lost wakeup deadlocks, which loom reports.
    fn sleep_until(&mut self, total: usize) {
        while self.seen.len() + self.skipped() < total {
            if self.drain() > 0 {
                continue;
            }
            if self.r.arm(self.rd.pos).unwrap() {
                self.r.region.wait();
                self.r.disarm(self.rd.pos);
            }
        }
    }
}

/// M1: two producers, commits in any order (including the later reservation first),
/// one discarding. The consumer delivers in reservation order and never passes a
/// reservation that is not finished.
#[test]
fn loom_two_producers_out_of_order() {
    model(|| {
        let r = ring::<true>(64, 0);
        let (p1, p2) = two_producers(&r, true);
        let mut c = ModelConsumer::<true>::new(&r);
        c.spin_until(2);
        let (pos1, pos2) = (p1.join().unwrap(), p2.join().unwrap());
        assert_ne!(pos1, pos2, "reservations overlap");
        assert_eq!(c.seen, vec![1]);
        assert_eq!(c.skipped(), 1);
        assert_eq!(c.rd.pos, 32);
    });
}

/// One producer writes three records into a ring that holds one at a time (a producer
/// needs 8 bytes past its record, the next header); later records reuse earlier ones'
/// space, so this is only correct if the producers' zeroing (under the zeroing lock, or
/// the single producer's ahead of itself) happens-before the consumer reads there, and
/// a stale header is never read as new.
fn wrap_around<const MULTI: bool>() {
    model(|| {
        let r = ring::<MULTI>(32, 0);
        let p = one_producer::<MULTI>(&r, 1..=3);
        let mut c = ModelConsumer::<MULTI>::new(&r);
        c.spin_until(3);
        p.join().unwrap();
        assert_eq!(c.seen, vec![1, 2, 3]);
    });
}

/// M2: wrap-around with the multi-producer claim (CAS, BUSY mark).
#[test]
fn loom_wrap_around_multi_producer_claim() {
    wrap_around::<true>();
}

/// M2b: wrap-around with the single-producer claim (plain stores, no BUSY mark: the
/// header stays zero until commit).
#[test]
fn loom_wrap_around_single_producer() {
    wrap_around::<false>();
}

/// M2c: two producers race for the zeroing lock. The ring starts with its zeroed
/// frontier at 8 (a state the ring reaches whenever producers have claimed up to it:
/// only the next header is zeroed), so both producers must move it before they claim,
/// one under the lock while the other waits for it (or finds its record already fits
/// below the new frontier). Both records arrive once, whole: a zeroing that did not
/// happen-before a claim, or that ran over a claimed record, would show as a stale or
/// lost record, and a lock never dropped as a deadlock.
#[test]
fn loom_producers_race_to_zero() {
    model(|| {
        let r = ring::<true>(64, 0);
        // Relaxed: before the threads start.
        r.control().overwrite.0.zeroed.store(8, crate::sync::Ordering::Relaxed);
        let (p1, p2) = two_producers(&r, false);
        let mut c = ModelConsumer::<true>::new(&r);
        c.sleep_until(2);
        let (pos1, pos2) = (p1.join().unwrap(), p2.join().unwrap());
        assert_eq!(pos1.abs_diff(pos2), 16, "the records follow each other");
        let mut seen = c.seen.clone();
        seen.sort_unstable();
        assert_eq!(seen, vec![1, 2]);
    });
}

/// M3: the wakeup protocol, policy CaughtUp. A consumer that sleeps while a producer
/// commits is always woken (a lost wakeup is a deadlock here).
#[test]
fn loom_no_lost_wakeup_caught_up() {
    model(|| {
        let r = ring::<true>(64, 0);
        let rp = r.clone();
        let p = thread::spawn(move || produce::<true>(&rp, &mut rp.producer_cursor(), 7, false, Wakeup::Default));
        let mut c = ModelConsumer::<true>::new(&r);
        c.sleep_until(1);
        p.join().unwrap();
        assert_eq!(c.seen, vec![7]);
    });
}

/// M3': the same with the single-producer claim, two records: the second commit
/// happens while the consumer may be asleep at it.
#[test]
fn loom_no_lost_wakeup_single_producer() {
    model(|| {
        let r = ring::<false>(32, 0);
        let p = one_producer::<false>(&r, 7..=8);
        let mut c = ModelConsumer::<false>::new(&r);
        c.sleep_until(2);
        p.join().unwrap();
        assert_eq!(c.seen, vec![7, 8]);
    });
}

/// M3b: two producers committing out of order while the consumer sleeps; the one that
/// commits the record the consumer waits at must wake it.
#[test]
fn loom_no_lost_wakeup_out_of_order() {
    model(|| {
        let r = ring::<true>(64, 0);
        let (p1, p2) = two_producers(&r, true);
        let mut c = ModelConsumer::<true>::new(&r);
        c.sleep_until(2);
        p1.join().unwrap();
        p2.join().unwrap();
        assert_eq!(c.seen.len() + c.skipped(), 2);
    });
}

/// M3c: watermark policy (both records' worth), two producers in any order. While
/// the consumer has consumed nothing it sleeps (possibly twice: woken by the later
/// record, it finds the earlier one unfinished and sleeps `BLOCKED`), and it is never
/// left asleep once the watermark is committed. Once it has consumed a record, less
/// than the watermark remains, which by the policy's definition may wait for a
/// timeout, so from there it spins.
#[test]
fn loom_no_lost_wakeup_watermark() {
    model(|| {
        let r = ring::<true>(64, 32);
        let (p1, p2) = two_producers(&r, false);
        let mut c = ModelConsumer::<true>::new(&r);
        while c.rd.pos == 0 {
            if c.drain() == 0 && r.arm(0).unwrap() {
                r.region.wait();
                r.disarm(0);
            }
        }
        c.spin_until(2);
        p1.join().unwrap();
        p2.join().unwrap();
        let mut sorted = c.seen.clone();
        sorted.sort();
        assert_eq!(sorted, vec![1, 2]);
    });
}

/// M3d: a discard wakes the consumer blocked at it (the kernel's discard caveat,
/// libbpf#968, does not apply here), and Force wakes whatever the policy.
#[test]
fn loom_discard_and_force_wake() {
    model(|| {
        let r = ring::<false>(32, 32);
        let rp = r.clone();
        let p = thread::spawn(move || produce::<false>(&rp, &mut rp.producer_cursor(), 5, true, Wakeup::Force));
        let mut c = ModelConsumer::<false>::new(&r);
        c.sleep_until(1);
        p.join().unwrap();
        assert_eq!(c.skipped(), 1);
    });
}

/// M4: a single producer's handle dropped and a new one attached while the consumer
/// reads and releases. The new handle's cursor (`Core::producer_cursor`) must acquire
/// the consumer position, or its zeroing ahead races with the consumer's reads of the
/// same bytes (found in review: with a Relaxed load loom reports that race).
#[test]
fn loom_single_producer_reattach() {
    model(|| {
        let r = ring::<false>(32, 0);
        let rc = r.clone();
        let consumer = thread::spawn(move || {
            let mut c = ModelConsumer::<false>::new(&rc);
            c.spin_until(2);
            c.seen
        });
        one_producer::<false>(&r, 1..=1).join().unwrap();
        // The second handle's zeroing ahead wraps onto the first record's bytes.
        one_producer::<false>(&r, 2..=2).join().unwrap();
        assert_eq!(consumer.join().unwrap(), vec![1, 2]);
    });
}

/// The claim marks ([`crate::protocol::repair`]): a reader looking for dead claims while a live
/// producer claims and commits never takes its record for dead, whatever it sees (the
/// claim before the mark, the zero header, the BUSY one). Under loom every process is
/// alive, so a `Some` here is a live claim taken for dead: the claim CAS's Release and
/// the reader's Acquire load of `P` are what rule it out.
#[test]
fn loom_a_live_claim_is_never_taken_for_dead() {
    use crate::sync::Ordering::Relaxed;
    model(|| {
        let r = ring::<true>(64, 0);
        r.control().slots[0].0.owner.store(1, Relaxed);
        let rp = r.clone();
        let p = thread::spawn(move || {
            // As `Producer::claim` does, with slot 0.
            let mut cur = rp.producer_cursor();
            cur.slot = 0;
            let word = &rp.control().slots[0].0.claiming;
            crate::protocol::repair::mark_claim(word, false);
            let pos = rp.reserve::<true>(8, &mut cur).unwrap();
            crate::protocol::repair::unmark_claim(word, false);
            rp.commit(pos, 8, false, Wakeup::NoWakeup);
        });
        let rr = r.clone();
        let reader = thread::spawn(move || {
            assert_eq!(rr.dead_claim(0, usize::MAX), None);
            assert_eq!(rr.dead_claim(0, usize::MAX), None);
        });
        p.join().unwrap();
        reader.join().unwrap();
    });
}

/// A ring shared between processes wakes its consumer through a futex: two producers
/// commit, the consumer sleeps on the futex value it read before arming. No lost
/// wakeup (loom reports the deadlock of one).
#[test]
fn loom_no_lost_wakeup_futex() {
    model(|| {
        let r = Arc::new(Core::fresh(HeapRegion::with_futex(64), 0));
        let (p1, p2) = two_producers(&r, false);
        let mut c = ModelConsumer::<true>::new(&r);
        c.futex_sleep_until(2);
        p1.join().unwrap();
        p2.join().unwrap();
        let mut seen = c.seen.clone();
        seen.sort_unstable();
        assert_eq!(seen, vec![1, 2]);
    });
}
