//! Differential property test of the protocol core over the heap region: random
//! sequences of reserve/commit/discard/consume against a `VecDeque` model, one thread,
//! for both producer kinds. The consumer side is the real reading step
//! ([`Core::next`]) and release.

use std::collections::VecDeque;

use proptest::prelude::*;

use crate::config::Wakeup;
use crate::format::record::footprint;
use crate::protocol::core::{Core, Refused, Step};
use crate::region::heap::HeapRegion;

#[derive(Clone, Debug)]
enum Op {
    /// Reserve `words` payload words; commit (or discard) at once.
    Put { words: u8, discard: bool },
    /// Consume up to `n` records (committed ones; discarded ones are stepped over),
    /// then hand back `quarters`/4 of what is read and not yet handed back (rounded down
    /// to 8 bytes, so possibly part of a record), as the consumer does at cache lines.
    Take(u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..12, any::<bool>()).prop_map(|(words, discard)| Op::Put { words, discard }),
        (0u8..6, 0u8..=4).prop_map(|(n, q)| Op::Take(n, q)),
    ]
}

const CAP: u64 = 128;

fn run<const MULTI: bool>(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let core = Core::fresh(HeapRegion::new(CAP), 0);
    let mut cur = core.producer_cursor();
    // Either kind needs 8 bytes of room past its record (the next header, kept zero).
    let slack = 8;
    let mut rd = core.cursor(0, 0, 0);
    // (sequence number, discarded, payload words) of every record not yet consumed.
    // `prod`: bytes reserved so far; the ring has room for `fp` more iff
    // `prod + fp - published <= CAP`.
    let (mut model, mut prod) = (VecDeque::<(u64, bool, u64)>::new(), 0u64);
    // Position of the model's front record.
    let (mut seq, mut front) = (0u64, 0u64);
    for op in ops {
        match op {
            Op::Put { words, discard } => {
                let len = words as usize * 8;
                let fp = footprint(len as u32);
                match core.reserve::<MULTI>(len, &mut cur) {
                    Ok(pos) => {
                        prop_assert!(prod + fp + slack - rd.published <= CAP);
                        for i in 0..words as usize {
                            // SAFETY: we hold the reservation; `i` is within it.
                            unsafe { core.region.write_payload(pos, i, seq) };
                        }
                        core.commit(pos, len as u32, discard, Wakeup::NoWakeup);
                        model.push_back((seq, discard, words as u64));
                        prod += fp;
                        seq += 1;
                    }
                    Err(Refused::Full) => prop_assert!(prod + fp + slack - rd.published > CAP, "refused with room"),
                    Err(Refused::TooLarge) => prop_assert!(len as u64 + slack > CAP - 8),
                    Err(other) => prop_assert!(false, "discard mode refused with {:?}", other),
                }
            }
            Op::Take(n, quarters) => {
                let mut taken = 0;
                while taken < n {
                    match core.next(&mut rd) {
                        Step::Record { pos, len } => {
                            // Discarded records the model holds ahead of this one were
                            // stepped over.
                            while let Some(&(_, true, words)) = model.front() {
                                model.pop_front();
                                front += footprint(words as u32 * 8);
                            }
                            prop_assert_eq!(front, pos);
                            front += footprint(len);
                            let (s, discard, words) = model.pop_front().expect("record the model lacks");
                            prop_assert!(!discard);
                            prop_assert_eq!(len as u64, words * 8);
                            for i in 0..words as usize {
                                // SAFETY: committed and not released; we are the consumer.
                                prop_assert_eq!(unsafe { core.region.read_payload(pos, i) }, s);
                            }
                            taken += 1;
                        }
                        Step::Empty => {
                            // Only discarded records may be left, and they were skipped.
                            prop_assert!(model.iter().all(|r| r.1));
                            for (_, _, words) in model.drain(..) {
                                front += footprint(words as u32 * 8);
                            }
                            prop_assert_eq!(front, rd.pos);
                            break;
                        }
                        Step::Full => {
                            prop_assert_eq!(rd.pos - rd.published, CAP);
                            let to = rd.pos;
                            // SAFETY: single-threaded consumer; nothing borrows the range.
                            unsafe { core.release(&mut rd, to) };
                        }
                        Step::Corrupt { pos, header } => {
                            prop_assert!(false, "corrupt header {header:#x} at {pos}")
                        }
                    }
                }
                let to = rd.published + (((rd.pos - rd.published) * quarters as u64 / 4) & !7);
                // SAFETY: single-threaded consumer; nothing borrows [published, to).
                unsafe { core.release(&mut rd, to) };
                let (cons, _) = core.positions();
                prop_assert_eq!(cons, to);
            }
        }
    }
    prop_assert_eq!(rd.consumed + rd.skipped + model.len() as u64, seq);
    Ok(())
}

proptest! {
    #[test]
    fn multi_producer_core_matches_a_fifo_model(ops in proptest::collection::vec(op(), 1..200)) {
        run::<true>(ops)?;
    }

    #[test]
    fn single_producer_core_matches_a_fifo_model(ops in proptest::collection::vec(op(), 1..200)) {
        run::<false>(ops)?;
    }
}

/// The `ringbuf_should_wakeup` overwrite rule (the BPF overwrite series as first
/// posted, August 2025) on a 4096-byte ring: wake when the record covers the consumer
/// position modulo half the ring.
#[test]
fn half_ring_rule_matches_the_kernel_cases() {
    use crate::protocol::core::half_ring_due;
    let due = |at, pos, end| half_ring_due(at, pos, end, 4096);
    assert!(due(0, 2048, 2064), "record starts at the consumer position, a half ring on");
    assert!(due(100, 2100, 2200), "covers it");
    assert!(!due(100, 0, 50), "before it");
    assert!(!due(100, 2200, 2300), "after it");
    assert!(!due(10, 2040, 2056), "wraps the half ring, ends before it");
    assert!(due(4, 2040, 2056), "wraps the half ring and covers it");
    assert!(due(2044, 2040, 2056), "wraps the half ring, covers it before the wrap");
}
