//! The producer against a simple model of what its docs promise, over drawn sequences
//! of reservations (lengths from 1 byte to the whole ring), commits, discards, samples
//! held open, and drains by a simulated kernel that makes every check the kernel's
//! `__bpf_user_ringbuf_peek` makes: a sample is refused exactly when the model has no
//! room for it, the kernel never meets a sample it would fail the drain on, and it
//! takes the committed samples, whole, in reservation order.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use proptest::prelude::*;

use super::{Producer, Refused, UserMem};
use crate::format::record::{footprint, BUSY_BIT, DISCARD_BIT, LEN_MASK};

/// A ring of `SIZE` bytes in the heap, its data area mapped twice as the kernel maps it
/// (here: a buffer twice as long, the second half kept equal to the first).
struct Sim {
    cons: AtomicU64,
    prod: AtomicU64,
    words: Vec<AtomicU32>,
    bytes: UnsafeCell<Vec<u8>>,
}

const SIZE: u64 = 256;

impl Sim {
    fn new() -> Sim {
        Sim {
            cons: AtomicU64::new(0),
            prod: AtomicU64::new(0),
            words: (0..SIZE / 8).map(|_| AtomicU32::new(0)).collect(),
            bytes: UnsafeCell::new(vec![0; 2 * SIZE as usize]),
        }
    }

    /// The payload bytes at ring offset `at`, `len` of them, as the kernel reads them.
    fn read(&self, at: u64, len: usize) -> Vec<u8> {
        // SAFETY: (test) single-threaded; no reference into the buffer is live.
        let b = unsafe { &*self.bytes.get() };
        (0..len).map(|i| b[((at + i as u64) % SIZE) as usize]).collect()
    }

    /// The payload written through `payload`'s pointer into the doubled buffer,
    /// folded back into the first copy (the second is the same memory in the kernel).
    fn fold(&self) {
        // SAFETY: (test) as above.
        let b = unsafe { &mut *self.bytes.get() };
        let (first, second) = b.split_at_mut(SIZE as usize);
        for (f, s) in first.iter_mut().zip(second.iter_mut()) {
            if *s != 0 {
                *f = std::mem::take(s);
            }
        }
    }

    /// One drain by the kernel's rules: the committed samples up to the first BUSY one,
    /// at most `max`; panics where the kernel would fail the drain.
    fn drain(&self, max: usize) -> Vec<Vec<u8>> {
        self.fold();
        let mut out = Vec::new();
        while out.len() < max {
            let prod = self.prod.load(Ordering::Acquire);
            assert_eq!(prod % 8, 0, "-EINVAL: producer_pos");
            let cons = self.cons.load(Ordering::Relaxed);
            if cons >= prod {
                break;
            }
            let hdr = self.words[((cons % SIZE) / 8) as usize].load(Ordering::Acquire);
            let len = hdr & LEN_MASK;
            let total = footprint(len);
            assert!(total <= prod - cons, "-EINVAL: sample past producer_pos");
            assert!(total <= SIZE, "-E2BIG");
            if hdr & DISCARD_BIT != 0 {
                self.cons.store(cons + total, Ordering::Release);
                continue;
            }
            if hdr & BUSY_BIT != 0 {
                break;
            }
            out.push(self.read(cons + 8, len as usize));
            self.cons.store(cons + total, Ordering::Release);
        }
        out
    }
}

impl UserMem for Sim {
    fn size(&self) -> u64 {
        SIZE
    }
    fn consumer_pos(&self) -> &AtomicU64 {
        &self.cons
    }
    fn producer_pos(&self) -> &AtomicU64 {
        &self.prod
    }
    fn header(&self, pos: u64) -> &AtomicU32 {
        &self.words[((pos % SIZE) / 8) as usize]
    }
    fn payload(&self, pos: u64, len: usize) -> *mut u8 {
        assert!(len as u64 + 8 <= SIZE);
        // SAFETY: (test) inside the doubled buffer (`(pos + 8) % SIZE + len < 2 * SIZE`).
        unsafe { (*self.bytes.get()).as_mut_ptr().add(((pos + 8) % SIZE) as usize) }
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Reserve `len` bytes and commit, discard or hold the sample.
    Reserve(usize, u8),
    /// Commit (or discard, if odd) the oldest held sample.
    Finish(bool),
    /// The kernel drains at most this many.
    Drain(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (prop_oneof![1usize..=24, 1usize..=(SIZE as usize)], 0u8..4).prop_map(|(l, h)| Op::Reserve(l, h)),
        2 => any::<bool>().prop_map(Op::Finish),
        3 => (1usize..6).prop_map(Op::Drain),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_kernel_takes_the_committed_samples_in_order_and_fails_on_none(ops in proptest::collection::vec(op(), 1..80)) {
        let p = Producer::new(Sim::new()).unwrap();
        // The model: every sample not yet drained, in order: (footprint, payload, state).
        // State: 0 held, 1 committed, 2 discarded.
        let mut model: VecDeque<(u64, Vec<u8>, u8)> = VecDeque::new();
        let mut held: VecDeque<(u64, usize, u8)> = VecDeque::new();
        let mut tag = 1u8;
        for op in ops {
            match op {
                Op::Reserve(len, how) => {
                    let used: u64 = model.iter().map(|m| m.0).sum();
                    let total = footprint(len as u32);
                    let fits = len + 8 <= SIZE as usize && total <= SIZE - used;
                    match p.reserve(len) {
                        Ok(pos) => {
                            prop_assert!(fits, "reserved {} with {} used", len, used);
                            let ptr = p.mem().payload(pos, len);
                            let bytes = vec![tag; len];
                            // SAFETY: (test) the reservation's `len` bytes.
                            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, len) };
                            tag = tag.wrapping_add(1).max(1);
                            match how {
                                0 => { p.discard(pos, len); model.push_back((total, bytes, 2)); }
                                1 => { held.push_back((pos, len, bytes[0])); model.push_back((total, bytes, 0)); }
                                _ => { p.commit(pos, len); model.push_back((total, bytes, 1)); }
                            }
                        }
                        Err(Refused::Full) => prop_assert!(!fits && len + 8 <= SIZE as usize),
                        Err(Refused::TooLarge) => prop_assert!(len + 8 > SIZE as usize),
                        Err(Refused::Empty) => prop_assert!(false),
                    }
                }
                Op::Finish(discard) => {
                    if let Some((pos, len, first)) = held.pop_front() {
                        if discard { p.discard(pos, len) } else { p.commit(pos, len) }
                        let m = model.iter_mut().find(|m| m.2 == 0 && m.1[0] == first).unwrap();
                        m.2 = if discard { 2 } else { 1 };
                    }
                }
                Op::Drain(max) => {
                    let got = p.mem().drain(max);
                    // The model's drain: committed samples up to the first held one.
                    let mut want = Vec::new();
                    while want.len() < max {
                        match model.front() {
                            Some((_, _, 0)) | None => break,
                            Some((_, _, 2)) => { model.pop_front(); }
                            Some(_) => want.push(model.pop_front().unwrap().1),
                        }
                    }
                    // Discards after the last taken sample are stepped over too.
                    while let Some((_, _, 2)) = model.front() {
                        if want.len() < max { model.pop_front(); } else { break; }
                    }
                    prop_assert_eq!(got, want);
                }
            }
        }
    }
}
