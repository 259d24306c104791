//! Differential property test of the protocol core over the heap region: random
//! sequences of reserve/commit/discard/consume against a `VecDeque` model, one thread.

use std::collections::VecDeque;

use proptest::prelude::*;

use crate::config::Wakeup;
use crate::core::{Core, ProducerCursor, Refused};
use crate::layout::{footprint, Slot};
use crate::region::heap::HeapRegion;

#[derive(Clone, Debug)]
enum Op {
    /// Reserve `words` payload words; commit (or discard) at once.
    Put { words: u8, discard: bool },
    /// Consume up to `n` records.
    Take(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..12, any::<bool>()).prop_map(|(words, discard)| Op::Put { words, discard }),
        (0u8..6).prop_map(Op::Take),
    ]
}

proptest! {
    #[test]
    fn core_matches_a_fifo_model(ops in proptest::collection::vec(op(), 1..200), multi: bool) {
        let core = Core::new(HeapRegion::new(128), 0);
        let mut cur = ProducerCursor::default();
        let (mut model, mut used) = (VecDeque::<(u64, bool, u64)>::new(), 0u64);
        let (mut cons, mut seq) = (0u64, 0u64);
        for op in ops {
            match op {
                Op::Put { words, discard } => {
                    let len = words as usize * 8;
                    let fp = footprint(len as u32);
                    let r = if multi { core.reserve::<true>(len, &mut cur) } else { core.reserve::<false>(len, &mut cur) };
                    match r {
                        Ok(pos) => {
                            prop_assert!(used + fp <= 128);
                            for i in 0..words as usize {
                                // SAFETY: we hold the reservation; `i` is within it.
                                unsafe { core.region.write_payload(pos, i, seq) };
                            }
                            core.commit(pos, len as u32, discard, Wakeup::NoWakeup);
                            model.push_back((seq, discard, words as u64));
                            used += fp;
                            seq += 1;
                        }
                        Err(Refused::Full) => prop_assert!(used + fp > 128, "refused with room"),
                        Err(Refused::TooLarge) => prop_assert!(len > 120),
                    }
                }
                Op::Take(n) => {
                    let start = cons;
                    for _ in 0..n {
                        if cons - start >= 128 {
                            break; // a whole ring read: release before reading on
                        }
                        match core.peek(cons) {
                            Slot::Empty | Slot::Busy => {
                                prop_assert!(model.is_empty());
                                break;
                            }
                            Slot::Committed(len) | Slot::Discarded(len) => {
                                let (s, discard, words) = model.pop_front().expect("record the model lacks");
                                prop_assert_eq!(len as u64, words * 8);
                                prop_assert_eq!(matches!(core.peek(cons), Slot::Discarded(_)), discard);
                                for i in 0..words as usize {
                                    // SAFETY: committed and not released; we are the consumer.
                                    prop_assert_eq!(unsafe { core.region.read_payload(cons, i) }, s);
                                }
                                cons += footprint(len);
                                used -= footprint(len);
                            }
                        }
                    }
                    // SAFETY: single-threaded consumer; nothing borrows [start, cons).
                    unsafe { core.release(start, cons) };
                }
            }
        }
    }
}
