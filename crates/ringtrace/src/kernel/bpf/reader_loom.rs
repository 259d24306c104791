//! loom models of reading a BPF ring buffer map: the real [`Reader`] against a model of
//! the kernel's side (`kernel/bpf/ringbuf.c`), exhaustive at `LOOM_MAX_PREEMPTIONS=2`.
//!
//! The kernel's side, as the model writes it:
//!
//! - reserve: header `len | BUSY`, then `smp_store_release(&rb->producer_pos)`;
//! - commit: `xchg(&hdr->len, len)` (a full barrier: a swap followed by a SeqCst fence
//!   here), then `smp_load_acquire(&rb->consumer_pos)`; if it equals the record's
//!   position, wake the waiters (`irq_work` → `wake_up_all`).
//!
//! The waiters' queue is a [`Notify`]: a wakeup with nobody waiting is kept for the next
//! wait, as an edge-triggered epoll instance keeps the event on its ready list. A reader
//! that sleeps while a committed record waits and no wakeup is coming is a deadlock,
//! which loom reports: the lost wakeup of libbpf's `ringbuf_process_ring` under
//! edge-triggered epoll, whose release store of `consumer_pos` alone allows it.

use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use loom::sync::{Arc, Notify};
use loom::thread;

use super::bpf_reader::{Reader, RingMem};
use crate::format::record::{BUSY_BIT, DISCARD_BIT};
use crate::protocol::commit_loom::model;

/// A kernel ring of 4 records of 0 payload bytes (8-byte footprints), positions and
/// headers only: the payload's ordering is the header's (the Acquire load of a
/// committed header), which the user-space models cover.
struct KernelSide {
    headers: [AtomicU32; 4],
    cons: AtomicU64,
    prod: AtomicU64,
    over: AtomicU64,
    waitq: Notify,
}

const SIZE: u64 = 32;

impl KernelSide {
    fn new() -> Arc<KernelSide> {
        Arc::new(KernelSide {
            headers: std::array::from_fn(|_| AtomicU32::new(0)),
            cons: AtomicU64::new(0),
            prod: AtomicU64::new(0),
            over: AtomicU64::new(0),
            waitq: Notify::new(),
        })
    }

    fn header_at(&self, pos: u64) -> &AtomicU32 {
        &self.headers[((pos % SIZE) / 8) as usize]
    }

    /// One record, reserved (the producer is alone: the kernel's lock) and committed
    /// or discarded, with flags 0 (adaptive wakeup).
    fn output(&self, discard: bool) {
        let pos = self.prod.load(Ordering::Relaxed);
        // The space check (`smp_load_acquire(&rb->consumer_pos)`): spin while full.
        while pos + 8 - self.cons.load(Ordering::Acquire) > SIZE - 1 {
            thread::yield_now();
        }
        self.header_at(pos).store(BUSY_BIT, Ordering::Relaxed);
        self.prod.store(pos + 8, Ordering::Release);
        // bpf_ringbuf_commit.
        self.header_at(pos).swap(if discard { DISCARD_BIT } else { 0 }, Ordering::AcqRel);
        loom::sync::atomic::fence(Ordering::SeqCst); // the rest of xchg's full barrier
        if self.cons.load(Ordering::Acquire) == pos {
            self.waitq.notify();
        }
    }
}

impl RingMem for Arc<KernelSide> {
    fn size(&self) -> u64 {
        SIZE
    }
    fn consumer_pos(&self) -> &AtomicU64 {
        &self.cons
    }
    fn producer_pos(&self) -> &AtomicU64 {
        &self.prod
    }
    fn overwrite_pos(&self) -> &AtomicU64 {
        &self.over
    }
    fn header(&self, pos: u64) -> &AtomicU32 {
        self.header_at(pos)
    }
    fn bytes(&self, _pos: u64, len: usize) -> &[u8] {
        assert_eq!(len, 0, "the model's records have no payload");
        &[]
    }
    fn copy(&self, _pos: u64, _out: &mut [u8]) {
        unreachable!("overwrite mode is not modeled here");
    }
}

/// The kernel writes `records` (discarding those `discard` says); the reader consumes,
/// and sleeps whenever `arm` says it may, until it has seen every committed one.
fn reader_sleeps_only_when_a_wakeup_will_come(records: u64, discard: fn(u64) -> bool) {
    model(move || {
        let k = KernelSide::new();
        let kernel = {
            let k = k.clone();
            thread::spawn(move || {
                for i in 0..records {
                    k.output(discard(i));
                }
            })
        };
        let mut r = Reader::new(k.clone(), false).unwrap();
        let want = (0..records).filter(|&i| !discard(i)).count();
        let mut seen = 0;
        // Bounded: every pass either reads a record or sleeps until the kernel commits
        // one (a deadlock, reported by loom, if that wakeup never comes).
        while seen < want || r.stats.discarded < records - want as u64 {
            seen += r.consume(usize::MAX, |_, _| Ok::<(), ()>(())).unwrap();
            if (seen < want || r.stats.discarded < records - want as u64) && r.arm() {
                k.waitq.wait();
            }
        }
        assert_eq!(r.stats.consumed, want as u64);
        kernel.join().unwrap();
    });
}

#[test]
fn loom_bpf_reader_two_records() {
    reader_sleeps_only_when_a_wakeup_will_come(2, |_| false);
}

#[test]
fn loom_bpf_reader_a_discard_then_a_record() {
    // A discarded record at the reader's position wakes nobody by itself when the
    // reader has not caught up with it (libbpf#968): the record after it must.
    reader_sleeps_only_when_a_wakeup_will_come(2, |i| i == 0);
}

/// A ring that fills: the kernel waits for space the reader hands back in batches
/// (`batch` 8: every record) and all but the last record at the end of a call.
#[test]
fn loom_bpf_reader_fills_the_ring() {
    model(|| {
        let k = KernelSide::new();
        let kernel = {
            let k = k.clone();
            thread::spawn(move || {
                for _ in 0..5 {
                    k.output(false);
                }
            })
        };
        let mut r = Reader::new(k.clone(), false).unwrap();
        r.batch = 8;
        let mut seen = 0;
        while seen < 5 {
            seen += r.consume(usize::MAX, |_, _| Ok::<(), ()>(())).unwrap();
            if seen < 5 && r.arm() {
                k.waitq.wait();
            }
        }
        kernel.join().unwrap();
    });
}
