//! A BPF ring buffer map's memory, mapped as the kernel allows: the [`RingMem`] the
//! reader uses in production (tests and the loom models give it a simulated kernel
//! ring instead).
//!
//! The kernel's `struct bpf_ringbuf` as user space sees it (`kernel/bpf/ringbuf.c`):
//!
//! ```text
//! offset 0          consumer page: consumer_pos            (mapped read-write)
//! offset P          producer page: producer_pos, then      (mapped read-only)
//!                   pending_pos, then overwrite_pos (Linux 6.19: added after
//!                   pending_pos when the patch was applied, "didn't want to
//!                   unnecessarily shift pending_pos"; the series as first posted,
//!                   August 2025, had it before)
//! offset 2P         data, size bytes, then the same pages again (the kernel maps them
//!                   twice, so a record that wraps is contiguous here too)
//! ```
//!
//! The kernel refuses a writable mapping of anything but the consumer page (`EPERM`),
//! so the two parts are two mappings. This module holds the `unsafe` of the mapping.

use std::io;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};

use super::reader::RingMem;

/// Offset of `overwrite_pos` in the producer page (after `producer_pos` and
/// `pending_pos`).
const OVERWRITE_POS: usize = 16;

/// The kernel's mapping of one ring buffer map. Unmapped on drop.
#[derive(Debug)]
pub(crate) struct KernelMap {
    /// The consumer page (read-write).
    consumer: NonNull<u8>,
    /// The producer page and the doubled data area (read-only), `page + 2 * size` bytes.
    producer: NonNull<u8>,
    page: usize,
    size: u64,
}

// SAFETY: the mapping is plain shared memory that every thread may read (and whose
// consumer page any may write through atomics); nothing in it is tied to a thread.
unsafe impl Send for KernelMap {}
// SAFETY: as above: shared access goes through atomics, or reads of committed record
// bytes that the kernel does not write while the consumer position is short of them.
unsafe impl Sync for KernelMap {}

impl KernelMap {
    /// Maps the ring buffer map `fd` whose data area is `size` bytes (its
    /// `max_entries`: a power of two and a multiple of the page size, which the caller
    /// checked).
    pub(crate) fn new(fd: BorrowedFd<'_>, size: u64) -> io::Result<KernelMap> {
        // The kernel allows exactly this writable mapping: one page at offset 0
        // (`ringbuf_map_mmap_kern`).
        let (consumer, producer, page) = map_parts(fd, size, ProtFlags::READ | ProtFlags::WRITE, ProtFlags::READ)?;
        Ok(KernelMap { consumer, producer, page, size })
    }

    fn word64(&self, base: NonNull<u8>, at: usize) -> &AtomicU64 {
        // SAFETY: callers pass offsets of 8-aligned words inside the first page of a live
        // mapping (page-aligned), which lives as long as `self`; the kernel writes these
        // words only with atomic (word) stores.
        unsafe { &*base.as_ptr().add(at).cast::<AtomicU64>() }
    }
}

impl RingMem for KernelMap {
    fn size(&self) -> u64 {
        self.size
    }
    fn consumer_pos(&self) -> &AtomicU64 {
        self.word64(self.consumer, 0)
    }
    fn producer_pos(&self) -> &AtomicU64 {
        self.word64(self.producer, 0)
    }
    fn overwrite_pos(&self) -> &AtomicU64 {
        self.word64(self.producer, OVERWRITE_POS)
    }
    fn header(&self, pos: u64) -> &AtomicU32 {
        let at = self.page + (pos & (self.size - 1) & !7) as usize;
        // SAFETY: `at` is 8-aligned and below `page + size`, inside the live read-only
        // mapping; the kernel writes the length word with atomic stores (`xchg`).
        unsafe { &*self.producer.as_ptr().add(at).cast::<AtomicU32>() }
    }
    fn bytes(&self, pos: u64, len: usize) -> &[u8] {
        let len = len.min(self.size as usize);
        let at = self.page + (pos & (self.size - 1)) as usize;
        // SAFETY: `at + len <= page + 2 * size`, inside the mapping (the data area mapped
        // twice), which lives as long as the borrow of `self`. Only discard-mode maps
        // lend bytes (overwrite mode copies with `copy` and checks `overwrite_pos`
        // after). In discard mode the kernel writes a record only in space it reserved,
        // and `__bpf_ringbuf_reserve` (kernel/bpf/ringbuf.c) reserves only while
        // `new_prod_pos - smp_load_acquire(&rb->consumer_pos) <= rb->mask`: the bytes of
        // a record committed between `consumer_pos` and `producer_pos` are not written
        // again until `consumer_pos` passes them. This reader moves `consumer_pos` past
        // a record only after the borrow of its bytes ended (`Reader::publish_to`, a
        // Release store, after the callback returned), and no other ringtrace reader
        // moves it: every consuming `BpfRingBuf` holds the map's reader lock
        // (`super::lock`), in this process and in every other one in this network
        // namespace. What the lock cannot keep out is a reader outside ringtrace
        // (libbpf's `ring_buffer__poll` in another process, or a ringtrace reader in
        // another network namespace) storing `consumer_pos` past a lent record: the
        // kernel may then rewrite bytes while they are read, which is running two
        // consumers on one map, a misuse the kernel itself does not guard against.
        unsafe { std::slice::from_raw_parts(self.producer.as_ptr().add(at), len) }
    }
    fn copy(&self, pos: u64, out: &mut [u8]) {
        debug_assert!(pos % 8 == 0 && out.len() % 8 == 0 && out.len() as u64 <= self.size);
        let start = self.page + (pos & (self.size - 1)) as usize;
        for (i, dst) in out.chunks_exact_mut(8).enumerate() {
            // SAFETY: `start + 8 * i + 8 <= page + 2 * size` (`out` is at most `size`
            // bytes), 8-aligned, inside the live mapping; the kernel writes this memory
            // with plain stores, which a word-sized atomic load may race with but never
            // tears into anything but some mix of old and new bytes, which the caller's
            // check after the copy throws away.
            let w = unsafe { &*self.producer.as_ptr().add(start + 8 * i).cast::<AtomicU64>() };
            dst.copy_from_slice(&w.load(std::sync::atomic::Ordering::Relaxed).to_ne_bytes());
        }
    }
}

impl Drop for KernelMap {
    fn drop(&mut self) {
        // No reference into the mappings outlives `self` (every accessor borrows it).
        unmap_parts(self.consumer, self.producer, self.page, self.size);
    }
}

/// Maps a ring map's two parts (a ring buffer map's or a user ring buffer map's, whose
/// data area is `size` bytes, a power of two and a multiple of the page size that the
/// caller checked): the consumer page at offset 0 with `consumer` protection, and the
/// producer page and the data area mapped twice after it with `producer`. Returns them
/// and the page size.
pub(super) fn map_parts(
    fd: BorrowedFd<'_>,
    size: u64,
    consumer: ProtFlags,
    producer: ProtFlags,
) -> io::Result<(NonNull<u8>, NonNull<u8>, usize)> {
    let page = rustix::param::page_size();
    let rest_len = usize::try_from(size)
        .ok()
        .and_then(|s| s.checked_mul(2))
        .and_then(|s| s.checked_add(page))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "ring too large to map"))?;
    // SAFETY: a new shared mapping at an address the kernel chooses; no existing memory
    // is affected. The kernel refuses the protections it does not allow (`EPERM`).
    let c = unsafe { mmap(std::ptr::null_mut(), page, consumer, MapFlags::SHARED, fd, 0) }?;
    // SAFETY: as above, from the producer page on.
    let p = match unsafe { mmap(std::ptr::null_mut(), rest_len, producer, MapFlags::SHARED, fd, page as u64) } {
        Ok(p) => p,
        Err(e) => {
            // SAFETY: the mapping just made above, used by nothing else.
            let _ = unsafe { munmap(c, page) };
            return Err(e.into());
        }
    };
    // mmap never returns null on success.
    Ok((NonNull::new(c.cast()).expect("mmap returned null"), NonNull::new(p.cast()).expect("mmap returned null"), page))
}

/// Unmaps what [`map_parts`] mapped. The caller holds no reference into them.
pub(super) fn unmap_parts(consumer: NonNull<u8>, producer: NonNull<u8>, page: usize, size: u64) {
    // SAFETY: the two mappings `map_parts` made, with their lengths; the caller holds no
    // reference into them.
    unsafe {
        let _ = munmap(consumer.as_ptr().cast(), page);
        let _ = munmap(producer.as_ptr().cast(), page + 2 * size as usize);
    }
}
