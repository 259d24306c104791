//! The real region: a memfd holding the control block and the data area, with the data
//! area mapped twice back to back, as the kernel maps a BPF ring buffer's pages:
//!
//! ```text
//!  virtual:  [ control | data (copy 1)        | data (copy 2)        ]
//!  memfd:    [ control | data                 ]
//!                        ^ offset data_offset   mapped again right after copy 1
//! ```
//!
//! So a record that starts near the end of the data area continues, in virtual memory,
//! into the second copy, which is the same physical memory as the start: every record
//! is one contiguous slice, and producers and the consumer use it in place. All
//! accesses to one record use the same virtual address (`data + (pos & mask)`); two
//! virtual addresses of one byte are only ever used at times ordered by the protocol's
//! acquire/release pairs, and caches are physically tagged, so aliasing is harmless.
//!
//! This module and `producer`/`consumer` (which build slices from [`MmapView::data_ptr`])
//! hold the crate's `unsafe`.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::ptr::{self, NonNull};

use rustix::event::{eventfd, EventfdFlags};
use rustix::fs::{fcntl_add_seals, ftruncate, memfd_create, MemfdFlags, SealFlags};
use rustix::mm::{mmap, mmap_anonymous, munmap, MapFlags, ProtFlags};

use super::Region;
use crate::error::Error;
use crate::layout::{Control, CONTROL_SIZE};
use crate::sync::AtomicU64;

/// A memfd ring mapped into this process, and its doorbell eventfd: the owner of the
/// mapping and the descriptors. Handles use it through [`MmapView`]s.
pub(crate) struct MmapRegion {
    view: MmapView,
    /// Bytes mapped from the view's `base`: `data_offset + 2 * capacity`.
    map_len: usize,
    /// Kept so the memory can later be shared with another process.
    _memfd: OwnedFd,
    /// Nonblocking eventfd the consumer sleeps on; producers write 1 to wake it.
    doorbell: OwnedFd,
}

/// What the protocol needs of a mapped ring, as plain values, so that every producer and
/// consumer handle keeps its own copy (in its own cache line, in registers in a loop)
/// instead of chasing a shared pointer on every record.
///
/// Invariant: a view is used only while the [`MmapRegion`] it came from is alive. Views
/// live inside [`Core`](crate::core::Core)s held by `Shared` (next to the region) and by
/// handles, each of which also holds an `Arc<Shared>`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MmapView {
    /// Start of the mapping: the control block.
    base: NonNull<u8>,
    /// Start of the first copy of the data area.
    data: NonNull<u8>,
    /// `capacity - 1`.
    mask: u64,
    /// The doorbell eventfd, owned by the region.
    doorbell: RawFd,
}

// SAFETY: a view is a set of addresses into a mapping that every thread of the process
// sees; all shared access through it goes through atomics (control block, headers) or
// through the protocol's ownership rules (payload), which `core` enforces.
unsafe impl Send for MmapView {}
// SAFETY: as above; `&MmapView` hands out only `&AtomicU64`, `&Control` and raw
// pointers whose use is governed by the protocol.
unsafe impl Sync for MmapView {}

impl MmapRegion {
    /// Creates a memfd ring of `capacity` data bytes (a power of two, a multiple of the
    /// page size: the caller checked) and maps it.
    pub(crate) fn create(capacity: u64) -> Result<Self, Error> {
        let page = rustix::param::page_size();
        let data_offset = CONTROL_SIZE.next_multiple_of(page);
        let cap = usize::try_from(capacity).map_err(|_| Error::io("capacity")(rustix::io::Errno::NOMEM))?;
        let file_len = data_offset + cap;
        let map_len = data_offset + 2 * cap;

        let memfd = memfd_create("ringtrace", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
            .map_err(Error::io("memfd_create"))?;
        ftruncate(&memfd, file_len as u64).map_err(Error::io("ftruncate of the ring's memfd"))?;
        // No process that later gets this memfd can shrink it under a mapping (SIGBUS)
        // or grow it.
        fcntl_add_seals(&memfd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
            .map_err(Error::io("sealing the ring's memfd"))?;
        let doorbell = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(Error::io("eventfd"))?;

        // SAFETY: a fresh PROT_NONE reservation at an address the kernel picks; it
        // overlaps nothing of ours.
        let base = unsafe {
            mmap_anonymous(ptr::null_mut(), map_len, ProtFlags::empty(), MapFlags::PRIVATE | MapFlags::NORESERVE)
        }
        .map_err(Error::io("reserving address space for the ring"))?;
        let unmap_on_err = |e| {
            // SAFETY: `base..base+map_len` is the reservation made above, unused so far.
            let _ = unsafe { munmap(base, map_len) };
            e
        };
        // SAFETY: MAP_FIXED inside our own reservation (`base` is page-aligned, the
        // length fits in it), replacing only pages we reserved above.
        unsafe {
            mmap(base, file_len, ProtFlags::READ | ProtFlags::WRITE, MapFlags::SHARED | MapFlags::FIXED, &memfd, 0)
        }
        .map_err(Error::io("mapping the ring"))
        .map_err(unmap_on_err)?;
        // SAFETY: as above; the second copy of the data area lies at
        // `base + file_len .. base + map_len`, inside the reservation.
        unsafe {
            mmap(
                base.cast::<u8>().add(file_len).cast(),
                cap,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                &memfd,
                data_offset as u64,
            )
        }
        .map_err(Error::io("mapping the ring's data area a second time"))
        .map_err(unmap_on_err)?;

        let base = NonNull::new(base.cast::<u8>()).expect("mmap never returns null on success");
        // SAFETY: data_offset < map_len, so the result is inside the mapping.
        let data = unsafe { base.add(data_offset) };
        let view = MmapView { base, data, mask: capacity - 1, doorbell: doorbell.as_raw_fd() };
        Ok(MmapRegion { view, map_len, _memfd: memfd, doorbell })
    }

    /// A view of this region for a [`Core`](crate::core::Core).
    pub(crate) fn view(&self) -> MmapView {
        self.view
    }

    /// The eventfd the consumer sleeps on.
    pub(crate) fn doorbell(&self) -> BorrowedFd<'_> {
        self.doorbell.as_fd()
    }
}

impl MmapView {
    /// Address of position `pos` in the first copy; a record there extends contiguously
    /// up to `capacity` bytes (into the second copy).
    #[inline(always)]
    pub(crate) fn data_ptr(&self, pos: u64) -> *mut u8 {
        // SAFETY: the offset is below `capacity`, inside the first copy of the data area
        // (the view's region is alive: type invariant).
        unsafe { self.data.as_ptr().add((pos & self.mask) as usize) }
    }

    /// The doorbell eventfd.
    pub(crate) fn doorbell(&self) -> BorrowedFd<'_> {
        // SAFETY: the region owns this descriptor and outlives the view (type invariant).
        unsafe { BorrowedFd::borrow_raw(self.doorbell) }
    }

    /// Resets the doorbell (reads the eventfd's counter); true if it had been rung.
    pub(crate) fn drain_doorbell(&self) -> io::Result<bool> {
        let mut buf = [0u8; 8];
        match rustix::io::read(self.doorbell(), &mut buf) {
            Ok(_) => Ok(true),
            Err(rustix::io::Errno::AGAIN) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

impl Drop for MmapRegion {
    fn drop(&mut self) {
        // SAFETY: the whole reservation made in `create`; every handle that could use it
        // holds an `Arc` to this region, so none is left.
        let _ = unsafe { munmap(self.view.base.as_ptr().cast(), self.map_len) };
    }
}

// SAFETY: `capacity` is a power of two >= one page (checked by the builder) and fixed;
// `header` is the 8-aligned word at `data + (pos & mask)` (data is page-aligned, pos a
// multiple of 8); `zero` writes exactly `[pos, pos + len)` through the double mapping.
// The view's region is alive whenever these run (type invariant).
unsafe impl Region for MmapView {
    /// One 4 KiB page, the smallest page of any Linux target (the builder requires at
    /// least one page).
    const MIN_CAPACITY: u64 = 4096;
    #[inline(always)]
    fn control(&self) -> &Control {
        // SAFETY: the control block is the first CONTROL_SIZE bytes of a page-aligned
        // mapping that lives as long as `self`; it started as zeroes, a valid value for
        // a struct of atomics, and is only ever accessed through those atomics.
        unsafe { self.base.cast::<Control>().as_ref() }
    }

    #[inline(always)]
    fn capacity(&self) -> u64 {
        self.mask + 1
    }

    #[inline(always)]
    fn header(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: 8-aligned, inside the data area, valid for the region's life; the
        // protocol accesses header words of live records only atomically.
        unsafe { &*self.data_ptr(pos).cast::<AtomicU64>() }
    }

    #[inline]
    unsafe fn zero(&self, pos: u64, len: u64) {
        // SAFETY: `len <= capacity`, so the range ends inside the second copy; the
        // caller owns it exclusively (see the trait's contract).
        unsafe { ptr::write_bytes(self.data_ptr(pos), 0, len as usize) };
    }

    #[inline]
    fn notify(&self) {
        // A full counter (2^64 - 2 unread wakeups) cannot happen: the consumer resets it
        // before every sleep. Any error leaves the consumer to its timeout; there is no
        // caller to report it to on the commit path.
        let _ = rustix::io::write(self.doorbell(), &1u64.to_ne_bytes());
    }
}
