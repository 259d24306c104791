//! A reader of a `BPF_MAP_TYPE_RINGBUF` map for the tests, as small as a test can use:
//! the kernel's `struct bpf_ringbuf` layout (`kernel/bpf/ringbuf.c`) mapped by hand.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// `BPF_RINGBUF_BUSY_BIT`.
pub const BUSY: u32 = 1 << 31;
/// `BPF_RINGBUF_DISCARD_BIT`.
pub const DISCARD: u32 = 1 << 30;
/// `BPF_RINGBUF_HDR_SZ`.
pub const HDR: u64 = 8;

/// A ring buffer map mapped as libbpf maps it: the consumer page read-write at offset 0,
/// the producer page and the twice-mapped data read-only from offset `page`.
pub struct Mapped {
    consumer: *mut u8,
    producer: *mut u8,
    page: usize,
    size: usize,
}

impl Mapped {
    pub fn new(map: BorrowedFd<'_>, size: u32) -> io::Result<Mapped> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let size = size as usize;
        let fd = map.as_raw_fd();
        // SAFETY: a fresh shared mapping of the map's first page (the kernel allows it
        // writable); no Rust object aliases it.
        let consumer = unsafe {
            libc::mmap(std::ptr::null_mut(), page, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if consumer == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above, read-only, from offset `page`.
        let producer = unsafe {
            libc::mmap(std::ptr::null_mut(), page + 2 * size, libc::PROT_READ, libc::MAP_SHARED, fd, page as i64)
        };
        if producer == libc::MAP_FAILED {
            let err = io::Error::last_os_error();
            // SAFETY: `consumer` is the mapping made above, unused from here on.
            unsafe { libc::munmap(consumer, page) };
            return Err(err);
        }
        Ok(Mapped { consumer: consumer.cast(), producer: producer.cast(), page, size })
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the consumer page is mapped for the life of `self`, page-aligned, and
        // only ever accessed atomically (by the kernel too).
        unsafe { &*self.consumer.cast::<AtomicU64>() }
    }

    fn producer_pos(&self) -> u64 {
        // SAFETY: as for `consumer_pos`; the kernel publishes it with a release store.
        unsafe { &*self.producer.cast::<AtomicU64>() }.load(Ordering::Acquire)
    }

    /// The header word of the record at `pos` (acquire: pairs with the kernel's xchg).
    fn header(&self, pos: u64) -> u32 {
        let off = self.page + (pos as usize & (self.size - 1));
        // SAFETY: `off` is 8-aligned (positions are) and within the first data copy.
        unsafe { &*self.producer.add(off).cast::<AtomicU32>() }.load(Ordering::Acquire)
    }

    /// `len` bytes of the record at `pos` (contiguous even across the end, as the data
    /// pages are mapped twice).
    fn sample(&self, pos: u64, len: usize) -> &[u8] {
        let off = self.page + (pos as usize & (self.size - 1)) + HDR as usize;
        assert!(len <= self.size);
        // SAFETY: `off + len` stays within the two data copies; the committed record is no
        // longer written by the kernel until the consumer position passes it.
        unsafe { std::slice::from_raw_parts(self.producer.add(off), len) }
    }

    /// Walks the records from the consumer position to the producer position, calls `f`
    /// with each (header, payload), and releases the new consumer position.
    pub fn drain(&self, mut f: impl FnMut(u32, &[u8])) -> usize {
        let mut pos = self.consumer_pos().load(Ordering::Relaxed);
        let prod = self.producer_pos();
        let mut n = 0;
        while pos < prod {
            let hdr = self.header(pos);
            assert_eq!(hdr & BUSY, 0, "BUSY record at {pos} after the run returned");
            let len = (hdr & !(BUSY | DISCARD)) as usize;
            f(hdr, self.sample(pos, len));
            pos += (len as u64 + HDR).next_multiple_of(8);
            n += 1;
        }
        assert_eq!(pos, prod);
        self.consumer_pos().store(pos, Ordering::Release);
        n
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the two mappings made in `new`; no reference into them outlives `self`.
        unsafe {
            libc::munmap(self.consumer.cast(), self.page);
            libc::munmap(self.producer.cast(), self.page + 2 * self.size);
        }
    }
}
