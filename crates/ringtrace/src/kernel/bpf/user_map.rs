//! A BPF user ring buffer map's memory, mapped as the kernel allows: the [`UserMap`]
//! the producer uses in production (the loom models give it a simulated kernel drain
//! instead).
//!
//! The same `struct bpf_ringbuf` as a ring buffer map's (see `map.rs`), with the
//! roles turned round (`ringbuf_map_mmap_user`, `kernel/bpf/ringbuf.c`): the consumer
//! page at offset 0 may only be mapped read-only (the kernel moves `consumer_pos`), the
//! producer page and the doubled data area after it may be mapped writable. The
//! mapping is `map.rs`'s; this module holds the `unsafe` of the words and bytes in it.

use std::io;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

use rustix::mm::ProtFlags;

use super::map::{map_parts, unmap_parts};
use super::user_producer::UserMem;

/// The kernel's mapping of one user ring buffer map. Unmapped on drop.
#[derive(Debug)]
pub(crate) struct UserMap {
    /// The consumer page (read-only).
    consumer: NonNull<u8>,
    /// The producer page and the doubled data area (read-write), `page + 2 * size`.
    producer: NonNull<u8>,
    page: usize,
    size: u64,
}

// SAFETY: plain shared memory: the words every thread reads and writes are accessed
// through atomics, and the payload bytes of a reservation only through the
// reservation that owns them (`UserSample`, one per reserved range).
unsafe impl Send for UserMap {}
// SAFETY: as above.
unsafe impl Sync for UserMap {}

impl UserMap {
    /// Maps the user ring buffer map `fd` whose data area is `size` bytes (its
    /// `max_entries`: a power of two and a multiple of the page size, which the caller
    /// checked).
    pub(crate) fn new(fd: BorrowedFd<'_>, size: u64) -> io::Result<UserMap> {
        // The consumer page read-only: the kernel refuses a writable mapping of it
        // (`ringbuf_map_mmap_user`).
        let (consumer, producer, page) = map_parts(fd, size, ProtFlags::READ, ProtFlags::READ | ProtFlags::WRITE)?;
        Ok(UserMap { consumer, producer, page, size })
    }
}

impl UserMem for UserMap {
    fn size(&self) -> u64 {
        self.size
    }
    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: offset 0 of the live consumer page (page-aligned), which lives as
        // long as `self`; the kernel writes it only with `smp_store_release`, a word
        // store. Read only (the page is mapped read-only).
        unsafe { &*self.consumer.as_ptr().cast::<AtomicU64>() }
    }
    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: offset 0 of the live, writable producer page, as above; the kernel
        // only reads it.
        unsafe { &*self.producer.as_ptr().cast::<AtomicU64>() }
    }
    fn header(&self, pos: u64) -> &AtomicU32 {
        let at = self.page + (pos & (self.size - 1) & !7) as usize;
        // SAFETY: `at` is 8-aligned and below `page + size`, inside the live writable
        // mapping; the kernel reads the length word with `smp_load_acquire`.
        unsafe { &*self.producer.as_ptr().add(at).cast::<AtomicU32>() }
    }
    fn payload(&self, pos: u64, len: usize) -> *mut u8 {
        debug_assert!(len as u64 + 8 <= self.size);
        let at = self.page + ((pos + 8) & (self.size - 1)) as usize;
        // SAFETY: `at + len <= page + 2 * size` (`len + 8 <= size`, and the data area is
        // mapped twice), inside the live mapping: a pointer into it, not yet a reference
        // (the caller's reservation makes the one reference to these bytes).
        unsafe { self.producer.as_ptr().add(at) }
    }
}

impl Drop for UserMap {
    fn drop(&mut self) {
        // No reference into the mappings outlives `self`: every accessor borrows it, and
        // a reservation borrows the handle that owns this map.
        unmap_parts(self.consumer, self.producer, self.page, self.size);
    }
}
