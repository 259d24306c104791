//! loom models of producers that wait for room ([`super::room`]), with the consumer
//! also asleep between records ([`super::wakeup`]): both wakeup directions at once.
//! Each ring holds one record, so every producer after the first waits for the
//! consumer, and the consumer for every producer. A lost wakeup in either direction
//! leaves a thread asleep for good: loom reports the deadlock.

use loom::sync::Arc;
use loom::thread;

use super::commit_loom::model;
use crate::config::Wakeup;
use crate::protocol::core::{Core, ProducerCursor, Refused, Step};
use crate::region::heap::HeapRegion;

type Ring = Arc<Core<HeapRegion>>;

fn ring<const MULTI: bool>(capacity: u64) -> Ring {
    Arc::new(Core::fresh(HeapRegion::new(capacity), 0))
}

/// Reserves an 8-byte record, waiting for room as `Producer::reserve_wait` does (token,
/// arm, look again, sleep), writes `v` and commits.
fn produce_waiting<const MULTI: bool>(r: &Ring, cur: &mut ProducerCursor, v: u64) {
    let pos = loop {
        match r.reserve::<MULTI>(8, cur) {
            Ok(pos) => break pos,
            Err(Refused::Full) => {
                let seen = cur.cons;
                let token = r.room_token();
                if r.arm_room(seen).unwrap() {
                    r.region.room_wait(token);
                }
            }
            // Pending: another producer holds the zeroing lock and has not finished.
            Err(Refused::Pending) => thread::yield_now(),
            Err(other) => unreachable!("{other:?}"),
        }
    };
    // SAFETY: we hold the reservation at `pos`; its one payload word is word 0.
    unsafe { r.region.write_payload(pos, 0, v) };
    r.commit(pos, 8, false, Wakeup::Default);
}

/// The consumer: reads and hands back each record at once (the publication is what
/// wakes producers), and sleeps on its doorbell when nothing is ready, until `total`
/// records came. Returns them in order.
fn consume_sleeping<const MULTI: bool>(r: &Ring, total: usize) -> Vec<u64> {
    let mut rd = r.cursor(0, 0, 0);
    let mut seen = Vec::new();
    while seen.len() < total {
        match r.next(&mut rd) {
            Step::Record { pos, len } => {
                assert_eq!(len, 8);
                // SAFETY: committed, not yet released, we are the consumer.
                seen.push(unsafe { r.region.read_payload(pos, 0) });
                let to = rd.pos;
                // SAFETY: we are the consumer and hold no reference into the range.
                unsafe { r.release(&mut rd, to) };
            }
            Step::Empty => {
                if r.arm(rd.published).unwrap() {
                    r.region.wait();
                    r.disarm(rd.published);
                }
            }
            Step::Full | Step::Corrupt { .. } => panic!("unexpected step at {}", rd.pos),
        }
    }
    seen
}

/// R1: one multi-producer handle writes three records through a ring that holds one
/// (and the zeroed header after it), so that each record's space is zeroed by the
/// producer under the zeroing lock after the consumer handed it back:
/// it waits for room twice, and the consumer sleeps between records.
#[test]
fn loom_room_one_producer_waits() {
    model(|| {
        let r = ring::<true>(32);
        let rp = r.clone();
        let p = thread::spawn(move || {
            let mut cur = rp.producer_cursor();
            (1..=3).for_each(|v| produce_waiting::<true>(&rp, &mut cur, v));
        });
        assert_eq!(consume_sleeping::<true>(&r, 3), vec![1, 2, 3]);
        p.join().unwrap();
    });
}

/// R2: two producers, one record each, through a ring that holds one (with the zeroed
/// header after it): one of them
/// waits for room (the single flag word is shared by every waiter).
#[test]
fn loom_room_two_producers_wait() {
    model(|| {
        let r = ring::<true>(32);
        let ps: Vec<_> = (1..=2u64)
            .map(|v| {
                let rp = r.clone();
                thread::spawn(move || produce_waiting::<true>(&rp, &mut rp.producer_cursor(), v))
            })
            .collect();
        let mut got = consume_sleeping::<true>(&r, 2);
        ps.into_iter().for_each(|p| p.join().unwrap());
        got.sort_unstable();
        assert_eq!(got, vec![1, 2]);
    });
}

/// R3: a single producer (which zeroes ahead of itself, and finds the ring full in
/// that refill) writes three records through a ring that holds one.
#[test]
fn loom_room_single_producer_waits() {
    model(|| {
        let r = ring::<false>(32);
        let rp = r.clone();
        let p = thread::spawn(move || {
            let mut cur = rp.producer_cursor();
            (1..=3).for_each(|v| produce_waiting::<false>(&rp, &mut cur, v));
        });
        assert_eq!(consume_sleeping::<false>(&r, 3), vec![1, 2, 3]);
        p.join().unwrap();
    });
}
