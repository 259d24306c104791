//! Producing into a BPF user ring buffer map (`BPF_MAP_TYPE_USER_RINGBUF`), generic
//! over the map's memory ([`UserMem`]): the kernel's mapping in use, a simulated
//! kernel drain in the loom models (`user_producer_loom.rs`).
//!
//! The kernel's side is `bpf_user_ringbuf_drain` (`kernel/bpf/ringbuf.c`), which user
//! space cannot be trusted by and so checks every sample (`__bpf_user_ringbuf_peek`):
//! `smp_load_acquire(&rb->producer_pos)`, which must be a multiple of 8; then
//! `smp_load_acquire(&rb->consumer_pos)` (the kernel's own) and, if there is data, the
//! header at it with `smp_load_acquire`; a sample whose footprint runs past
//! `producer_pos` fails the drain with `-EINVAL`, one longer than the data area or a
//! `bpf_dynptr` (`DYNPTR_MAX_SIZE`, 2^24 − 1) with `-E2BIG`; a DISCARD sample is
//! skipped; a BUSY sample ends the drain there (`-ENODATA`: "no more samples"). After
//! the program's callback returns, `__bpf_user_ringbuf_sample_release` moves
//! `consumer_pos` past the sample with `smp_store_release`.
//!
//! So the producer's duties (libbpf's `user_ring_buffer__reserve` and `__submit`):
//!
//! - Reserve: read `consumer_pos` (Acquire: the kernel has finished reading the space
//!   before it), refuse what does not fit, write the header `len | BUSY`, then publish
//!   `producer_pos` past the sample (Release: the kernel sees the header before the
//!   space is published, and stops at it while it is BUSY).
//! - Commit: store the header without BUSY (Release: the payload written before it);
//!   discard: with DISCARD instead.
//! - Never let the kernel see a sample it would fail the drain on: a failed drain moves
//!   nothing, so every later drain fails on the same sample. Lengths are checked here
//!   against the data area and `DYNPTR_MAX_SIZE` before anything is written.
//!
//! Reservations are serialized by a lock held for a few instructions (libbpf's
//! reserve is not thread-safe at all; its callers serialize), commits and discards are
//! lock-free. The lock is a flag taken with one compare-and-swap and given back with a
//! store: with `std::sync::Mutex` (lock and unlock two read-modify-writes) a sample
//! cost 30 ns of the producer's CPU, now 11 (`docs/benchmark.md`,
//! `kernel-user-ringbuf` `fill`). A thread that finds it taken spins a little, then
//! yields: its holder never waits inside. A lock-free reservation cannot be had with this protocol: the kernel
//! trusts every header below `producer_pos`, so `producer_pos` may pass only a header
//! already marked BUSY. Producers that claimed space with a compare-and-swap of
//! `producer_pos` would publish space whose header is not written yet, and the kernel
//! would read a stale header of the previous lap.

use crate::format::record::{footprint, BUSY_BIT, DISCARD_BIT, HDR_SIZE, LEN_MASK};
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// The largest payload a `bpf_dynptr` holds (`DYNPTR_MAX_SIZE`, `include/linux/bpf.h`):
/// a longer sample fails `bpf_user_ringbuf_drain` with `-E2BIG`.
pub(crate) const DYNPTR_MAX_SIZE: u64 = (1 << 24) - 1;

/// What producing into a user ring buffer needs of its memory.
///
/// Positions are byte counts since the map was created, as the kernel keeps them; the
/// data area's size is a power of two.
pub(crate) trait UserMem {
    /// Bytes in the data area.
    fn size(&self) -> u64;
    /// The consumer position (the kernel's drain moves it).
    fn consumer_pos(&self) -> &AtomicU64;
    /// The producer position (this producer moves it).
    fn producer_pos(&self) -> &AtomicU64;
    /// The length word of the sample header at `pos` (8-aligned).
    fn header(&self, pos: u64) -> &AtomicU32;
    /// The `len` payload bytes of the sample whose header is at `pos` (`len + 8` at
    /// most the data area's size), contiguous even where they wrap.
    fn payload(&self, pos: u64, len: usize) -> *mut u8;
}

/// Why a reservation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No room now.
    Full,
    /// Never fits: longer than [`Producer::max_sample`].
    TooLarge,
    /// Zero bytes.
    Empty,
}

/// Counters of one producer handle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserStats {
    /// Samples committed.
    pub committed: u64,
    /// Samples discarded (by [`UserSample::discard`](super::UserSample::discard), or
    /// dropped uncommitted).
    pub discarded: u64,
    /// Reservations refused for want of room (a blocking reserve that found room after
    /// waiting counts none).
    pub full: u64,
    /// Reservations refused as longer than the map takes, or empty.
    pub refused: u64,
    /// Samples left BUSY by a producer that died (or dropped its handle without
    /// committing them, which ringtrace's handles never do), discarded when this handle
    /// opened the map, so that the kernel drains past them.
    pub recovered: u64,
}

/// The counters, updated with Relaxed adds: they order nothing.
#[derive(Debug, Default)]
struct Counters {
    committed: AtomicU64,
    discarded: AtomicU64,
    full: AtomicU64,
    refused: AtomicU64,
    recovered: AtomicU64,
}

/// The reservation lock, held until dropped.
struct Held<'a>(&'a AtomicU32);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Release pairs with the Acquire of the next `Producer::lock`.
        self.0.store(0, Ordering::Release);
    }
}

#[cfg(loom)]
use loom::thread::yield_now;
#[cfg(not(loom))]
use std::thread::yield_now;

/// The producing algorithm over a map's memory.
#[derive(Debug)]
pub(crate) struct Producer<M> {
    mem: M,
    /// 1 while a reservation reads `consumer_pos`, writes its header and publishes
    /// `producer_pos` ([`Producer::lock`]).
    reserving: AtomicU32,
    counters: Counters,
}

impl<M: UserMem> Producer<M> {
    /// A producer of `mem`, whose positions must be a ring's (`Err`: consumer and
    /// producer positions that are not).
    pub(crate) fn new(mem: M) -> Result<Producer<M>, (u64, u64)> {
        // Acquire pairs with the kernel's `smp_store_release(&rb->consumer_pos)` in
        // `__bpf_user_ringbuf_sample_release`, as in `reserve` (here only checked).
        let cons = mem.consumer_pos().load(Ordering::Acquire);
        let prod = mem.producer_pos().load(Ordering::Relaxed);
        if cons % 8 != 0 || prod % 8 != 0 || prod < cons || prod - cons > mem.size() {
            return Err((cons, prod));
        }
        Ok(Producer { mem, reserving: AtomicU32::new(0), counters: Counters::default() })
    }

    /// The memory.
    pub(crate) fn mem(&self) -> &M {
        &self.mem
    }

    /// The longest payload a sample may have: the data area less a header, at most
    /// `DYNPTR_MAX_SIZE`.
    pub(crate) fn max_sample(&self) -> usize {
        (self.mem.size() - HDR_SIZE).min(DYNPTR_MAX_SIZE) as usize
    }

    /// Reserves a sample of `len` payload bytes: its header's position.
    pub(crate) fn reserve(&self, len: usize) -> Result<u64, Refused> {
        if len == 0 || len > self.max_sample() {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            return Err(if len == 0 { Refused::Empty } else { Refused::TooLarge });
        }
        // `len` fits the length bits: `max_sample` is below 2^24.
        let word = len as u32 & LEN_MASK;
        let total = footprint(word);
        let held = self.lock();
        // Only this producer moves `producer_pos`, under the lock.
        let prod = self.mem.producer_pos().load(Ordering::Relaxed);
        // Acquire pairs with the kernel's `smp_store_release(&rb->consumer_pos)` in
        // `__bpf_user_ringbuf_sample_release`: the drain is done with the space it
        // hands back before this producer writes it again.
        let cons = self.mem.consumer_pos().load(Ordering::Acquire);
        // A consumer position the kernel keeps within the published space; anything
        // else (another writer of the page) is refused rather than trusted.
        let used = prod.wrapping_sub(cons);
        if used > self.mem.size() || total > self.mem.size() - used {
            drop(held);
            self.counters.full.fetch_add(1, Ordering::Relaxed);
            return Err(Refused::Full);
        }
        self.mem.header(prod).store(word | BUSY_BIT, Ordering::Relaxed);
        // Release pairs with the kernel's `smp_load_acquire(&rb->producer_pos)` in
        // `__bpf_user_ringbuf_peek`: it sees the BUSY header of every sample it is
        // told of, and stops there until the commit.
        self.mem.producer_pos().store(prod + total, Ordering::Release);
        drop(held);
        Ok(prod)
    }

    /// Takes the reservation lock, until the returned guard drops.
    fn lock(&self) -> Held<'_> {
        let mut spins = 0u32;
        // Acquire pairs with the Release store of `Held::drop`: the previous holder's
        // header and `producer_pos` stores are seen by this one.
        while self.reserving.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            spins = spins.saturating_add(1);
            if cfg!(loom) || spins > 64 {
                yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        Held(&self.reserving)
    }

    /// Commits the sample at `pos` of `len` bytes.
    pub(crate) fn commit(&self, pos: u64, len: usize) {
        // Release pairs with the kernel's `smp_load_acquire(hdr)` in
        // `__bpf_user_ringbuf_peek`: the payload written before is what it reads.
        self.mem.header(pos).store(len as u32 & LEN_MASK, Ordering::Release);
        self.counters.committed.fetch_add(1, Ordering::Relaxed);
    }

    /// Discards the sample at `pos` of `len` bytes: the kernel skips it.
    pub(crate) fn discard(&self, pos: u64, len: usize) {
        // Release: as `commit`; the kernel reads nothing of a discarded sample, but the
        // header is the one word it trusts.
        self.mem.header(pos).store(len as u32 & LEN_MASK | DISCARD_BIT, Ordering::Release);
        self.counters.discarded.fetch_add(1, Ordering::Relaxed);
    }

    /// Discards every sample left BUSY between the consumer and producer positions:
    /// the samples of a producer that died mid-sample, which would stop the kernel's
    /// drain for good (it ends at a BUSY sample, `-ENODATA`). Only for the map's one
    /// producer (no other one may be writing a sample now). Returns how many; `Err`
    /// where the ring holds a header the kernel would fail on (a footprint past the
    /// producer position), with the positions.
    pub(crate) fn recover(&self) -> Result<u64, (u64, u64)> {
        let _held = self.lock();
        let prod = self.mem.producer_pos().load(Ordering::Relaxed);
        // Acquire: as in `reserve`.
        let mut pos = self.mem.consumer_pos().load(Ordering::Acquire);
        let mut found = 0;
        // Each step passes at least 8 bytes of at most `size`: bounded.
        while pos < prod {
            let h = self.mem.header(pos);
            let word = h.load(Ordering::Relaxed);
            let total = footprint(word & LEN_MASK);
            if total > prod - pos {
                return Err((pos, prod));
            }
            if word & BUSY_BIT != 0 {
                // Release: as `discard`.
                h.store(word & LEN_MASK | DISCARD_BIT, Ordering::Release);
                found += 1;
            }
            pos += total;
        }
        self.counters.recovered.fetch_add(found, Ordering::Relaxed);
        Ok(found)
    }

    /// Bytes the kernel has not drained yet (samples reserved included).
    pub(crate) fn pending(&self) -> u64 {
        let prod = self.mem.producer_pos().load(Ordering::Relaxed);
        prod.saturating_sub(self.mem.consumer_pos().load(Ordering::Relaxed))
    }

    pub(crate) fn stats(&self) -> UserStats {
        let c = &self.counters;
        UserStats {
            committed: c.committed.load(Ordering::Relaxed),
            discarded: c.discarded.load(Ordering::Relaxed),
            full: c.full.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            recovered: c.recovered.load(Ordering::Relaxed),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
