//! The real region: a file (a memfd, or a named ring file, see [`super::file`]) holding
//! the control block and the data area, with the data area mapped twice back to back,
//! as the kernel maps a BPF ring buffer's pages:
//!
//! ```text
//!  virtual:  [ control | data (copy 1)        | data (copy 2)        ]
//!  file:     [ control | data                 ]
//!                        ^ offset data_offset   mapped again right after copy 1
//! ```
//!
//! The ring image need not start the file: [`Mapping::file_offset`] (page-aligned)
//! says where its control block is, for files holding several rings.
//!
//! So a record that starts near the end of the data area continues, in virtual memory,
//! into the second copy, which is the same physical memory as the start: every record
//! is one contiguous slice, and producers and the consumer use it in place. All
//! accesses to one record use the same virtual address (`data + (pos & mask)`); two
//! virtual addresses of one byte are only ever used at times ordered by the protocol's
//! acquire/release pairs, and caches are physically tagged, so aliasing is harmless.
//!
//! A handle that only reads the data area (the consumer of a single-producer or
//! overwrite ring opened with [`Access::Consumer`](crate::Access)) maps it read-only.
//!
//! # Doorbells
//!
//! A ring private to one process wakes its consumer through an eventfd, which event
//! loops can wait on. A ring shared between processes (`FLAG_FUTEX`) wakes it through
//! a futex on [`WaitLine::futex`](crate::format::control::WaitLine): a producer in any process
//! adds one to the word and calls `FUTEX_WAKE`; the consumer reads the word before it
//! arms its wait and sleeps in `FUTEX_WAIT` only while the word still holds that value,
//! so a wake between its check and its sleep is never lost.
//!
//! A channel file's bell line lives in its header page, which [`BellPage`] maps on its
//! own (shared, read-write), for the two words of the line.
//!
//! This module and `producer`/`consumer` (which build slices from [`MmapView::data_ptr`])
//! hold the crate's `unsafe`.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::ptr::{self, NonNull};
use std::time::Duration;

use rustix::event::{eventfd, EventfdFlags};
use rustix::fs::fstat;
use rustix::mm::{mmap, mmap_anonymous, munmap, MapFlags, ProtFlags};

use super::Region;
use crate::error::Error;
use crate::format::control::{Control, CONTROL_SIZE};
use crate::sync::Ordering::Relaxed;
use crate::sync::{AtomicU32, AtomicU64};
use crate::wait::doorbell::{self, Bell, BellToken};

/// A ring file mapped into this process, and its doorbell: the owner of the mapping and
/// the descriptors. Handles use it through [`MmapView`]s.
pub(crate) struct MmapRegion {
    view: MmapView,
    /// Bytes mapped from the view's `base`: `data_offset + 2 * capacity` (whatever the
    /// image's offset in the file).
    map_len: usize,
    /// The memfd or ring file (shared with other processes through it).
    fd: OwnedFd,
    /// The descriptor a consumer in an event loop waits on: the nonblocking eventfd of
    /// a private ring; the socket doorbell of a futex ring ([`doorbell::bind_socket`]),
    /// or, where no socket could be made, an eventfd never rung (so that `AsFd` always
    /// has a descriptor to lend; `arm` then says why it cannot be used).
    eventfd: OwnedFd,
    /// See [`Self::room_socket`].
    room_socket: std::sync::OnceLock<Option<(OwnedFd, u64)>>,
    /// The async producers of this process that wait for room: the one that finds the
    /// room socket readable drains it and wakes the others (see `tokio::producer`).
    #[cfg(feature = "tokio")]
    pub(crate) room_notify: ::tokio::sync::Notify,
}

/// What the protocol needs of a mapped ring, as plain values, so that every producer and
/// consumer handle keeps its own copy (in its own cache line, in registers in a loop)
/// instead of chasing a shared pointer on every record.
///
/// Invariant: a view is used only while the [`MmapRegion`] it came from is alive. Views
/// live inside [`Core`](crate::protocol::core::Core)s held by `Shared` (next to the region) and by
/// handles, each of which also holds an `Arc<Shared>`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MmapView {
    /// Start of the mapping: the control block.
    base: NonNull<u8>,
    /// Start of the first copy of the data area.
    data: NonNull<u8>,
    /// `capacity - 1`.
    mask: u64,
    /// The eventfd (or socket doorbell), owned by the region.
    eventfd: RawFd,
    /// Whether the doorbell is the futex word (rings shared between processes).
    futex: bool,
    /// Futex rings: the id of this mapping's socket doorbell, 0 if none could be made.
    socket_id: u64,
}

// SAFETY: a view is a set of addresses into a mapping that every thread of the process
// sees; all shared access through it goes through atomics (control block, headers) or
// through the protocol's ownership rules (payload), which `core` enforces.
unsafe impl Send for MmapView {}
// SAFETY: as above; `&MmapView` hands out only `&AtomicU64`, `&Control` and raw
// pointers whose use is governed by the protocol.
unsafe impl Sync for MmapView {}

/// How to map a ring file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mapping {
    /// Where the ring image (its control block) starts in the file: a multiple of the
    /// page size; 0 for a ring file of its own.
    pub(crate) file_offset: u64,
    pub(crate) capacity: u64,
    /// Offset of the data area in the file: a multiple of the page size.
    pub(crate) data_offset: u64,
    /// Map the data area writable (producers; the consumer of a multi-producer discard
    /// ring, which zeroes what it consumes).
    pub(crate) data_writable: bool,
    /// The doorbell is the futex word.
    pub(crate) futex: bool,
}

impl MmapRegion {
    /// Maps the ring image at `m.file_offset` of `fd` (the caller checked its header:
    /// the file is sealed against shrinking, or its size was checked just before), and
    /// makes its eventfd. A file too short for the image (`file_offset + data_offset +
    /// capacity` bytes) or an unaligned offset is [`Error::InvalidRing`], never a
    /// mapping past the end of the file.
    pub(crate) fn map(fd: OwnedFd, m: Mapping) -> Result<Self, Error> {
        let too_big = || Error::io("mapping the ring")(rustix::io::Errno::NOMEM);
        let cap = usize::try_from(m.capacity).map_err(|_| too_big())?;
        let data_offset = usize::try_from(m.data_offset).map_err(|_| too_big())?;
        let page = rustix::param::page_size();
        debug_assert!(data_offset >= CONTROL_SIZE && data_offset % page == 0);
        if m.file_offset % page as u64 != 0 {
            return Err(Error::invalid(format!("ring image offset {} is not page-aligned", m.file_offset)));
        }
        let file_end = m.file_offset.checked_add(m.data_offset).and_then(|o| o.checked_add(m.capacity));
        let file_len = u64::try_from(fstat(&fd).map_err(Error::io("fstat of the ring file"))?.st_size).unwrap_or(0);
        if file_end.is_none_or(|end| file_len < end) {
            return Err(Error::invalid(format!(
                "the file is {file_len} bytes, too short for a ring image of {} bytes at offset {}",
                m.data_offset.saturating_add(m.capacity),
                m.file_offset
            )));
        }
        // Virtual offsets from `base`: the second copy of the data area, the end.
        let second = data_offset.checked_add(cap).ok_or_else(too_big)?;
        let map_len = second.checked_add(cap).ok_or_else(too_big)?;
        // Within the file (checked above), so no overflow.
        let data_at = m.file_offset + m.data_offset;
        let new_eventfd = || eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(Error::io("eventfd"));
        let (eventfd, socket_id) = match m.futex {
            false => (new_eventfd()?, 0),
            true => match doorbell::bind_socket() {
                Ok(bound) => bound,
                Err(_) => (new_eventfd()?, 0),
            },
        };
        let rw = ProtFlags::READ | ProtFlags::WRITE;
        let data_prot = if m.data_writable { rw } else { ProtFlags::READ };

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
        // length fits in it), replacing only pages we reserved above; `file_offset` is
        // page-aligned (checked above), as mmap requires.
        unsafe { mmap(base, data_offset, rw, MapFlags::SHARED | MapFlags::FIXED, &fd, m.file_offset) }
            .map_err(Error::io("mapping the ring's control block"))
            .map_err(unmap_on_err)?;
        for (at, what) in [(data_offset, "mapping the ring's data area"), (second, "mapping the data area again")] {
            // SAFETY: as above: both copies of the data area lie inside the reservation
            // (`at + cap <= map_len`), and `data_at` (`file_offset + data_offset`) is
            // page-aligned.
            unsafe {
                mmap(base.cast::<u8>().add(at).cast(), cap, data_prot, MapFlags::SHARED | MapFlags::FIXED, &fd, data_at)
            }
            .map_err(Error::io(what))
            .map_err(unmap_on_err)?;
        }

        let base = NonNull::new(base.cast::<u8>()).expect("mmap never returns null on success");
        // SAFETY: data_offset < map_len, so the result is inside the mapping.
        let data = unsafe { base.add(data_offset) };
        let view =
            MmapView { base, data, mask: m.capacity - 1, eventfd: eventfd.as_raw_fd(), futex: m.futex, socket_id };
        Ok(MmapRegion {
            view,
            map_len,
            fd,
            eventfd,
            room_socket: std::sync::OnceLock::new(),
            #[cfg(feature = "tokio")]
            room_notify: ::tokio::sync::Notify::new(),
        })
    }

    /// A view of this region for a [`Core`](crate::protocol::core::Core).
    pub(crate) fn view(&self) -> MmapView {
        self.view
    }

    /// The eventfd a private ring's consumer sleeps on.
    pub(crate) fn doorbell(&self) -> BorrowedFd<'_> {
        self.eventfd.as_fd()
    }

    /// This process's socket doorbell for producers that wait for room in an event
    /// loop (bound at the first call; `None` if no socket could be made), and its id.
    pub(crate) fn room_socket(&self) -> Option<(BorrowedFd<'_>, u64)> {
        self.room_socket.get_or_init(|| doorbell::bind_socket().ok()).as_ref().map(|(fd, id)| (fd.as_fd(), *id))
    }

    /// The ring's file: a memfd or a named ring file.
    pub(crate) fn file(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
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

    /// Whether the doorbell is the futex word (a ring shared between processes).
    pub(crate) fn is_futex(&self) -> bool {
        self.futex
    }

    /// The eventfd.
    pub(crate) fn eventfd(&self) -> BorrowedFd<'_> {
        // SAFETY: the region owns this descriptor and outlives the view (type invariant).
        unsafe { BorrowedFd::borrow_raw(self.eventfd) }
    }

    /// The ring's doorbell, as its consumer sleeps on it: in a futex ring, the socket
    /// doorbell once the consumer named it in the control block ([`Self::use_socket`]).
    fn bell(&self) -> Bell<'_> {
        if !self.futex {
            Bell::Eventfd(self.eventfd())
        } else if self.socket_id != 0 && self.control().wait.0.socket.load(Relaxed) == self.socket_id {
            // Relaxed: the consumer reads its own store.
            Bell::Socket(self.eventfd())
        } else {
            Bell::Futex(&self.control().wait.0.futex)
        }
    }

    /// The consumer of a futex ring will wait through a descriptor: names this
    /// mapping's socket doorbell in the control block, so that producers ring it
    /// instead of the futex. The consumer calls it before it arms: the Release store of
    /// the wait word in `arm` publishes this store to the producer that wins the wakeup
    /// CAS (Acquire), which then reads the name in `notify`.
    pub(crate) fn use_socket(&self) -> io::Result<()> {
        if self.socket_id == 0 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this process could not make a socket doorbell for the ring (socket(AF_UNIX) or bind failed): \
                 use poll or wait",
            ));
        }
        // Relaxed: published by the wait word's Release store in `arm` (see above).
        self.control().wait.0.socket.store(self.socket_id, Relaxed);
        Ok(())
    }

    /// Names socket doorbell `id` (a process's [`MmapRegion::room_socket`]) among the
    /// ones the consumer rings when it makes room, unless it is there already. False
    /// if every entry is taken (other processes wait in event loops).
    pub(crate) fn register_room_socket(&self, id: u64) -> bool {
        let entries = &self.control().wait.0.room_sockets;
        // Relaxed: the producer arms (a Release store of the room flag) after this, and
        // the consumer reads the entries after its Acquire swap of that flag.
        entries.iter().any(|e| e.load(Relaxed) == id)
            || entries.iter().any(|e| e.compare_exchange(0, id, Relaxed, Relaxed).is_ok())
    }

    /// A consumer attaches or detaches: producers go back to the futex doorbell.
    pub(crate) fn forget_socket(&self) {
        // Relaxed: as in `use_socket`; a producer that still sends to the old name
        // wakes nobody, and the consumer arms again (with the futex) before it sleeps.
        self.control().wait.0.socket.store(0, Relaxed);
    }

    /// Resets the doorbell before the consumer arms its wait ([`Bell::token`]).
    pub(crate) fn prepare_sleep(&self) -> io::Result<BellToken> {
        self.bell().token()
    }

    /// Sleeps until the doorbell rings, `timeout` passes or a signal arrives
    /// ([`Bell::sleep`]).
    pub(crate) fn sleep(&self, token: BellToken, timeout: Option<Duration>) -> io::Result<()> {
        self.bell().sleep(token, timeout)
    }

    /// A producer's sleep until the consumer makes room: while the producers' doorbell
    /// (`room_futex`) holds `token` (read with `Core::room_token` before arming), at
    /// most `timeout`.
    pub(crate) fn sleep_for_room(&self, token: u32, timeout: Option<Duration>) -> io::Result<()> {
        Bell::Futex(&self.control().wait.0.room_futex).sleep(BellToken(token), timeout)
    }
}

impl Drop for MmapRegion {
    fn drop(&mut self) {
        // SAFETY: the whole reservation made in `map`; every handle that could use it
        // holds an `Arc` to this region, so none is left.
        let _ = unsafe { munmap(self.view.base.as_ptr().cast(), self.map_len) };
    }
}

// SAFETY: `capacity` is a power of two >= one page (checked by the builder, or by
// `file::validate` for an attached ring) and fixed; `header` is the 8-aligned word at
// `data + (pos & mask)` (data is page-aligned, pos a multiple of 8); `zero` writes
// exactly `[pos, pos + len)` through the double mapping. The view's region is alive
// whenever these run (type invariant).
unsafe impl Region for MmapView {
    /// One 4 KiB page, the smallest page of any Linux target (the builder requires at
    /// least one page).
    const MIN_CAPACITY: u64 = crate::format::control::MIN_CAPACITY;
    #[inline(always)]
    fn control(&self) -> &Control {
        // SAFETY: the control block is the first CONTROL_SIZE bytes of a page-aligned,
        // writable mapping that lives as long as `self`; a file starts as zeroes, a
        // valid value for a struct of atomics, and is only ever accessed through those
        // atomics (by every process that maps it).
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
        // caller owns it exclusively (see the trait's contract), and only handles with
        // a writable data area zero (producers).
        unsafe { ptr::write_bytes(self.data_ptr(pos), 0, len as usize) };
    }

    #[inline]
    fn zero_atomic(&self, pos: u64, len: u64) {
        debug_assert!(len <= self.capacity() && len % 8 == 0 && pos % 8 == 0);
        // Aligned and bounded whatever the caller passes (a hostile process may have
        // written the positions it comes from): never a misaligned atomic.
        let (pos, len) = (pos & !7, len.min(self.capacity()) & !7);
        // SAFETY: `[pos, pos + len)` with `len <= capacity` lies in the two copies of
        // the data area, contiguous (the double mapping), 8-aligned, valid for the
        // region's life; it is accessed as `AtomicU64`s only, as every overwrite-mode
        // access to ring bytes is, so sharing it with concurrent readers is sound.
        let words = unsafe { std::slice::from_raw_parts(self.data_ptr(pos).cast::<AtomicU64>(), len as usize / 8) };
        for w in words {
            // Relaxed: as in the trait's default.
            w.store(0, crate::sync::Ordering::Relaxed);
        }
    }

    fn cross_process(&self) -> bool {
        self.futex
    }

    #[inline]
    fn notify(&self) {
        if !self.futex {
            return Bell::Eventfd(self.eventfd()).ring();
        }
        // Relaxed: the caller won the wakeup CAS on the wait word (Acquire), which
        // pairs with the consumer's Release store of it in `arm`, made after the
        // consumer named its socket (`use_socket`).
        match self.control().wait.0.socket.load(Relaxed) {
            0 => Bell::Futex(&self.control().wait.0.futex).ring(),
            id => {
                doorbell::ring_socket(id);
            }
        }
    }

    fn notify_room(&self) {
        let wait = &self.control().wait.0;
        doorbell::ring_all(&wait.room_futex);
        for entry in &wait.room_sockets {
            // Relaxed: the caller's Acquire swap of the room flag (or, detaching, its
            // store) follows the producer's registration (`register_room_socket`),
            // ordered before its Release store of the flag.
            let id = entry.load(Relaxed);
            if id != 0 && !doorbell::ring_socket(id) {
                // Nobody holds the name: its process closed it or died. Free the entry
                // (Relaxed: a process that registers again stores its own id).
                let _ = entry.compare_exchange(id, 0, Relaxed, Relaxed);
            }
        }
    }
}

/// The header page of a channel file (version 2), mapped shared and read-write for its
/// bell line ([`crate::format::channel`]): the reader's wait flag and the futex word,
/// which every process that maps the file reads and writes with atomics only.
pub(crate) struct BellPage {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is shared memory every thread of the process sees, accessed only
// through the `AtomicU32`s `words` hands out.
unsafe impl Send for BellPage {}
// SAFETY: as above.
unsafe impl Sync for BellPage {}

impl BellPage {
    /// Maps the first page of `fd`, a channel file whose header was checked: it is at
    /// least its first ring's offset long, a nonzero multiple of the page size, so the
    /// page lies inside the file.
    pub(crate) fn map(fd: BorrowedFd<'_>) -> io::Result<Self> {
        use crate::format::channel::{BELL_FUTEX, BELL_LINE};
        let len = rustix::param::page_size();
        const _: () = assert!(BELL_FUTEX + 4 <= 4096);
        debug_assert!(BELL_LINE + 128 <= len);
        let file_len = u64::try_from(fstat(fd)?.st_size).unwrap_or(0);
        if file_len < len as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "the channel file is shorter than its header page"));
        }
        // SAFETY: a new shared mapping of the file's first page (offset 0: aligned) at an
        // address the kernel picks: it overlaps nothing of ours.
        let base = unsafe { mmap(ptr::null_mut(), len, ProtFlags::READ | ProtFlags::WRITE, MapFlags::SHARED, fd, 0) }?;
        let base = NonNull::new(base.cast::<u8>()).expect("mmap never returns null on success");
        Ok(BellPage { base, len })
    }

    /// The bell line's words: the wait flag and the futex word.
    pub(crate) fn words(&self) -> (&AtomicU32, &AtomicU32) {
        use crate::format::channel::{BELL_FLAG, BELL_FUTEX};
        // SAFETY: both offsets are 4-aligned and inside the page (asserted in `map`), a
        // page-aligned read-write mapping alive as long as `self`; a file's bytes are a
        // valid `u32` whatever they hold, and every process accesses these words with
        // atomics only (a writer of the file that does not may write any value, which
        // the protocol tolerates: `wait::flag`).
        unsafe {
            (
                &*self.base.as_ptr().add(BELL_FLAG).cast::<AtomicU32>(),
                &*self.base.as_ptr().add(BELL_FUTEX).cast::<AtomicU32>(),
            )
        }
    }
}

impl Drop for BellPage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`; the words it lent borrow `self`, so none is
        // left.
        let _ = unsafe { munmap(self.base.as_ptr().cast(), self.len) };
    }
}
