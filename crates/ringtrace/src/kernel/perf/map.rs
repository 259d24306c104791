//! The mapping of a perf event's ring: one metadata page (`struct perf_event_mmap_page`)
//! and a data area of a power of two of pages. One of the two files of this module with
//! `unsafe` code (the other is `event.rs`).
//!
//! The mapping's protection decides the kernel's mode (`ring_buffer_init`): writable, the
//! kernel reads `data_tail` and never overwrites unread records; read-only, it
//! overwrites unconditionally.

use std::io;
use std::marker::PhantomData;
use std::mem::offset_of;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use perf_event_open_sys::bindings::perf_event_mmap_page;
use rustix::mm::{MapFlags, ProtFlags};

use super::walk::Area;
use crate::error::KernelError;

/// The most data pages a ring may have (2 GiB of 4 KiB pages; the kernel's own limit is
/// near there, and its `perf_event_mlock_kb` limit usually far below).
pub(super) const MAX_PAGES: usize = 1 << 19;

const DATA_HEAD: usize = offset_of!(perf_event_mmap_page, data_head);
const DATA_TAIL: usize = offset_of!(perf_event_mmap_page, data_tail);
const DATA_OFFSET: usize = offset_of!(perf_event_mmap_page, data_offset);
const DATA_SIZE: usize = offset_of!(perf_event_mmap_page, data_size);

/// A perf event's ring, mapped; unmapped on drop.
#[derive(Debug)]
pub(super) struct Mapping {
    base: NonNull<u8>,
    len: usize,
    data_off: usize,
    data_len: usize,
}

// SAFETY: the mapping belongs to this value alone (nothing else unmaps it), and every
// access through it is an atomic operation: on the metadata page's words, or a load of
// a word of the data area (`DataArea`), which any thread may do.
unsafe impl Send for Mapping {}
// SAFETY: as for Send: the `&self` methods are atomic accesses.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `1 + data_pages` pages of the perf event `fd`, writable (forward mode: the
    /// kernel respects `data_tail`) or read-only (the kernel overwrites).
    pub(super) fn new(fd: BorrowedFd<'_>, data_pages: usize, writable: bool) -> Result<Mapping, KernelError> {
        if data_pages == 0 || !data_pages.is_power_of_two() || data_pages > MAX_PAGES {
            return Err(KernelError::InvalidPages { pages: data_pages, max: MAX_PAGES });
        }
        let page = rustix::param::page_size();
        let len = (1 + data_pages) * page;
        let prot = if writable { ProtFlags::READ | ProtFlags::WRITE } else { ProtFlags::READ };
        // SAFETY: a new shared mapping at an address the kernel chooses, so it replaces
        // nothing; it is unmapped only in Drop.
        let ptr = unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, fd, 0) };
        let ptr = match ptr {
            Ok(p) => p,
            Err(e) => {
                let source = io::Error::from(e);
                let hint = map_hint(&source);
                return Err(KernelError::Map { bytes: len, source, hint });
            }
        };
        let Some(base) = NonNull::new(ptr.cast::<u8>()) else {
            // Not at address 0 without MAP_FIXED; refuse rather than use it.
            let source = io::Error::from(io::ErrorKind::AddrNotAvailable);
            return Err(KernelError::Map { bytes: len, source, hint: "mmap returned address 0".into() });
        };
        let mut m = Mapping { base, len, data_off: 0, data_len: 0 };
        // The kernel sets these before mmap returns (kernels before 4.1 leave them 0:
        // then the data area is the pages after the first).
        let (off, size) = (m.word(DATA_OFFSET).load(Ordering::Relaxed), m.word(DATA_SIZE).load(Ordering::Relaxed));
        let (off, size) = if size == 0 { (page as u64, (data_pages * page) as u64) } else { (off, size) };
        // 8-aligned (the kernel's is a page), so `DataArea` loads aligned words.
        let fits = off.checked_add(size).is_some_and(|end| end <= len as u64) && off >= page as u64 && off % 8 == 0;
        if !fits || !size.is_power_of_two() || size < 8 {
            // Dropping `m` unmaps.
            return Err(KernelError::Layout { offset: off, size, mapped: len });
        }
        (m.data_off, m.data_len) = (off as usize, size as usize);
        Ok(m)
    }

    /// One of the 8-byte, 8-aligned fields of the metadata page.
    fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset % 8 == 0 && offset + 8 <= self.len);
        // SAFETY: `offset` is one of the `u64` fields of `perf_event_mmap_page` (the
        // constants above), 8-aligned in the page-aligned mapping, which lives as long as
        // `self`. The kernel accesses these words with aligned 8-byte loads and stores,
        // and this module only through this atomic.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    /// The data area's size in bytes (a power of two).
    pub(super) fn data_len(&self) -> usize {
        self.data_len
    }

    /// The data area, which the kernel writes while it is read: read through
    /// [`DataArea`], never as a `&[u8]` (a shared slice promises that its bytes do not
    /// change while it lives).
    pub(super) fn data(&self) -> DataArea<'_> {
        // SAFETY: `data_off + data_len <= len` and `data_off % 8 == 0` (checked in
        // `new`) in the page-aligned mapping, which lives as long as the borrow of
        // `self`; `data_len` is a power of two of at least 8. This program accesses the
        // data area through `DataArea` alone.
        unsafe { DataArea::new(self.base.add(self.data_off), self.data_len) }
    }

    /// `data_head`, the kernel's position.
    pub(super) fn head(&self) -> u64 {
        // Acquire: this is the uapi's smp_rmb() after loading data_head (C in the comment
        // of perf_output_put_handle); it pairs with the kernel's smp_wmb() (B) between its
        // stores of the record and its store of data_head in perf_output_put_handle, so
        // the records up to this head are visible to the loads of `data()` after it.
        self.word(DATA_HEAD).load(Ordering::Acquire)
    }

    /// `data_tail`, the reader's position (only this reader writes it).
    pub(super) fn tail(&self) -> u64 {
        self.word(DATA_TAIL).load(Ordering::Relaxed)
    }

    /// Stores `data_tail` after the records before it were read (forward mode only: the
    /// mapping must be writable).
    pub(super) fn store_tail(&self, tail: u64) {
        // SeqCst fence: the uapi's smp_mb() (D in the comment of perf_output_put_handle)
        // between our loads of the records and the tail store; it pairs with the
        // kernel's control dependency (A) from its READ_ONCE(data_tail) in
        // __perf_output_begin to its stores of new records, so the kernel never
        // overwrites bytes this reader is still loading.
        fence(Ordering::SeqCst);
        self.word(DATA_TAIL).store(tail, Ordering::Relaxed);
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, of `len` bytes, unmapped once; every borrow
        // of it (slices, atomics) is tied to `&self` and over.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A perf data area that another party (the kernel) may write while it is read: every
/// read is a relaxed atomic load of an aligned 8-byte word, copied out, as the BPF ring
/// buffer's `KernelMap::copy` does; no reference to the bytes is ever made. A walk over
/// it copies each record into its scratch buffer before lending it.
///
/// Bytes the kernel writes meanwhile (a forward reader only looks between `data_tail`
/// and `data_head`, which the kernel does not write until the tail moves past them; a
/// backward reader pauses the output first, but an event on another CPU may be
/// mid-write when the pause begins, and a corrupt tail points anywhere) are at worst some
/// mix of old and new bytes, never undefined behaviour; the walks treat all of them as
/// untrusted.
///
/// The loads are relaxed: a walk reads `data_head` first, with Acquire
/// ([`Mapping::head`]), which orders these loads after it.
#[derive(Clone, Copy, Debug)]
pub(super) struct DataArea<'a> {
    start: NonNull<u8>,
    len: usize,
    _memory: PhantomData<&'a [AtomicU64]>,
}

impl<'a> DataArea<'a> {
    /// The `len` bytes at `start`.
    ///
    /// # Safety
    ///
    /// `start` is 8-aligned, `len` a multiple of 8, and the range is readable memory
    /// that stays mapped for `'a`; within this program, nothing accesses it but through
    /// atomic operations (other parties, such as the kernel, may write it with any
    /// stores).
    pub(super) unsafe fn new(start: NonNull<u8>, len: usize) -> DataArea<'a> {
        debug_assert!(start.as_ptr() as usize % 8 == 0 && len % 8 == 0);
        DataArea { start, len, _memory: PhantomData }
    }

    /// The 8-byte word at byte offset `8 * i`.
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        assert!(i < self.len / 8, "word {i} outside a data area of {} bytes", self.len);
        // SAFETY: `8 * i + 8 <= len` (checked above): an 8-aligned word inside the range
        // that `new`'s caller promised readable for `'a` and accessed in this program by
        // atomics only. A word-sized atomic load may race with the kernel's plain stores
        // but yields some mix of old and new bytes, which the walks treat as untrusted.
        let w = unsafe { AtomicU64::from_ptr(self.start.as_ptr().add(8 * i).cast::<u64>()) };
        w.load(Ordering::Relaxed)
    }
}

impl Area for DataArea<'_> {
    fn size(&self) -> usize {
        self.len
    }

    #[inline]
    fn copy_to(&self, off: usize, out: &mut [u8]) {
        let end = off.checked_add(out.len()).filter(|&end| end <= self.len);
        assert!(end.is_some(), "copy of {} bytes at {off} outside a data area of {} bytes", out.len(), self.len);
        let mut done = 0;
        while done < out.len() {
            let at = off + done;
            let skip = at % 8;
            let n = (8 - skip).min(out.len() - done);
            let w = self.word(at / 8).to_ne_bytes();
            out[done..done + n].copy_from_slice(&w[skip..skip + n]);
            done += n;
        }
    }

    fn lend(&self, _off: usize, _len: usize) -> Option<&[u8]> {
        None // never: the kernel may write the bytes while they are borrowed
    }
}

/// What to do about a failed `mmap` of a perf event.
fn map_hint(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::ENOMEM) => {
            let kb = super::record::sysctl("/proc/sys/kernel/perf_event_mlock_kb");
            format!(
                "the ring is larger than a process without CAP_IPC_LOCK may lock: \
                 /proc/sys/kernel/perf_event_mlock_kb is {kb} (per user, plus RLIMIT_MEMLOCK); \
                 use fewer data pages or raise that limit"
            )
        }
        Some(libc::EINVAL) => "the event is already mapped with another size (an event has one ring), or \
                               the page count is not a power of two"
            .into(),
        Some(libc::ENODEV) | Some(libc::EBADF) | Some(libc::EACCES) => {
            "the file descriptor is not a perf event's (or not open for reading)".into()
        }
        _ => "see perf_event_open(2), section \"MMAP layout\"".into(),
    }
}
