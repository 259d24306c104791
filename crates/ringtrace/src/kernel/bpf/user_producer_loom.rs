//! loom models of producing into a BPF user ring buffer: the real [`Producer`] against
//! a model of the kernel's drain (`bpf_user_ringbuf_drain`, `kernel/bpf/ringbuf.c`),
//! exhaustive at `LOOM_MAX_PREEMPTIONS=2`.
//!
//! The kernel's side, as the model writes it (`__bpf_user_ringbuf_peek`, then
//! `__bpf_user_ringbuf_sample_release`): `smp_load_acquire(&rb->producer_pos)`, the
//! consumer position, `smp_load_acquire(hdr)`; every check the kernel makes of a
//! sample (multiple of 8, footprint within the published space and the ring) is an
//! assertion here, since a failed check fails the drain for good; a BUSY sample ends
//! the pass, a DISCARD one is stepped over; the payload is read, then
//! `smp_store_release(&rb->consumer_pos)`. The payload words are loom cells: a
//! producer writing a sample's space while the kernel still reads it (or the kernel
//! reading one the producer has not finished) is a data race loom reports.

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

use super::bpf_user_producer::{Producer, Refused, UserMem};
use crate::format::record::{footprint, BUSY_BIT, DISCARD_BIT, LEN_MASK};
use crate::protocol::commit_loom::model;

/// A 32-byte ring: two samples of 8 payload bytes (16-byte footprints).
const SIZE: u64 = 32;

struct KernelSide {
    /// A word per 8 bytes: the header's length word where a sample starts.
    headers: [AtomicU32; 4],
    /// A word per 8 bytes: a sample's payload where it lies.
    payload: [UnsafeCell<u64>; 4],
    cons: AtomicU64,
    prod: AtomicU64,
}

impl KernelSide {
    fn new() -> Arc<KernelSide> {
        Arc::new(KernelSide {
            headers: std::array::from_fn(|_| AtomicU32::new(0)),
            payload: std::array::from_fn(|_| UnsafeCell::new(0)),
            cons: AtomicU64::new(0),
            prod: AtomicU64::new(0),
        })
    }

    fn word(&self, pos: u64) -> usize {
        ((pos % SIZE) / 8) as usize
    }

    /// One drain pass: every sample available now, each payload handed to `seen`
    /// (discarded ones skipped). Returns how many were taken.
    fn drain(&self, seen: &mut Vec<u64>) -> usize {
        let mut n = 0;
        loop {
            let prod = self.prod.load(Ordering::Acquire);
            assert_eq!(prod % 8, 0, "-EINVAL: producer_pos not a multiple of 8");
            let cons = self.cons.load(Ordering::Relaxed);
            if cons >= prod {
                return n;
            }
            let hdr = self.headers[self.word(cons)].load(Ordering::Acquire);
            let len = hdr & LEN_MASK;
            let total = footprint(len);
            assert!(total <= prod - cons, "-EINVAL: a sample past producer_pos");
            assert!(total <= SIZE, "-E2BIG: a sample longer than the ring");
            if hdr & DISCARD_BIT != 0 {
                self.cons.store(cons + total, Ordering::Release);
                continue;
            }
            if hdr & BUSY_BIT != 0 {
                return n;
            }
            assert_eq!(len, 8, "the model's samples are 8 bytes");
            // SAFETY: (model) a loom cell, whose accesses loom checks for races.
            let v = self.payload[self.word(cons + 8)].with(|p| unsafe { *p });
            seen.push(v);
            n += 1;
            self.cons.store(cons + total, Ordering::Release);
        }
    }
}

impl UserMem for Arc<KernelSide> {
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
        &self.headers[self.word(pos)]
    }
    fn payload(&self, _pos: u64, _len: usize) -> *mut u8 {
        unreachable!("the models write payloads through the loom cells")
    }
}

/// Reserves an 8-byte sample (yielding while full), writes `v`, commits or discards it.
fn produce(p: &Producer<Arc<KernelSide>>, v: u64, discard: bool) {
    let pos = loop {
        match p.reserve(8) {
            Ok(pos) => break pos,
            Err(Refused::Full) => thread::yield_now(),
            Err(e) => panic!("{e:?}"),
        }
    };
    let k = p.mem();
    // SAFETY: (model) a loom cell.
    k.payload[k.word(pos + 8)].with_mut(|w| unsafe { *w = v });
    if discard {
        p.discard(pos, 8);
    } else {
        p.commit(pos, 8);
    }
}

/// Drains until `want` samples were taken, yielding between passes.
fn drain_all(k: &KernelSide, want: usize) -> Vec<u64> {
    let mut seen = Vec::new();
    while seen.len() < want {
        if k.drain(&mut seen) == 0 {
            thread::yield_now();
        }
    }
    seen
}

/// Two threads of one process share a producer, one sample each (the second thread's
/// discarded where `discard`), while the kernel drains: it sees every committed sample
/// once, whole, never a header it would fail on.
fn two_threads(discard: bool) {
    model(move || {
        let k = KernelSide::new();
        let p = Arc::new(Producer::new(k.clone()).unwrap());
        let other = {
            let p = p.clone();
            thread::spawn(move || produce(&p, 2, discard))
        };
        produce(&p, 1, false);
        let want = if discard { 1 } else { 2 };
        let mut seen = drain_all(&k, want);
        other.join().unwrap();
        // Whatever is left (a discard stepped over) drains to the end.
        k.drain(&mut seen);
        seen.sort_unstable();
        assert_eq!(seen, if discard { vec![1] } else { vec![1, 2] });
        assert_eq!(k.cons.load(Ordering::Relaxed), k.prod.load(Ordering::Relaxed));
    });
}

#[test]
fn loom_user_ringbuf_two_threads() {
    two_threads(false);
}

#[test]
fn loom_user_ringbuf_a_commit_and_a_discard() {
    two_threads(true);
}

/// Three samples through a ring of two: the third waits for the kernel to hand space
/// back, and writes it only after the kernel has read it (the Acquire of the consumer
/// position against the kernel's Release).
#[test]
fn loom_user_ringbuf_wraps_after_the_drain() {
    model(|| {
        let k = KernelSide::new();
        let p = Producer::new(k.clone()).unwrap();
        let kernel = {
            let k = k.clone();
            thread::spawn(move || drain_all(&k, 3))
        };
        for v in 1..=3 {
            produce(&p, v, false);
        }
        assert_eq!(kernel.join().unwrap(), [1, 2, 3]);
    });
}

/// A producer that died mid-sample leaves it BUSY: the kernel stops there for good.
/// The next producer's recovery discards it while the kernel drains, and the kernel
/// goes on past it.
#[test]
fn loom_user_ringbuf_recovers_a_dead_producers_sample() {
    model(|| {
        let k = KernelSide::new();
        {
            let dead = Producer::new(k.clone()).unwrap();
            produce(&dead, 1, false);
            // Reserved and never committed.
            dead.reserve(8).unwrap();
        }
        let kernel = {
            let k = k.clone();
            thread::spawn(move || drain_all(&k, 2))
        };
        let p = Producer::new(k.clone()).unwrap();
        assert_eq!(p.recover(), Ok(1));
        produce(&p, 2, false);
        assert_eq!(kernel.join().unwrap(), [1, 2]);
    });
}
