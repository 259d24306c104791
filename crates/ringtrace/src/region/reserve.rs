//! Backing a ring file's pages before they are mapped. A page of a shared file mapping
//! that the filesystem cannot back when it is first touched (a hole in a sparse file on
//! a full filesystem, a tmpfs at its size limit) is not an error the toucher can see:
//! the kernel stops it with SIGBUS. So every range this crate maps is reserved first,
//! with `fallocate(2)` in mode 0, which allocates without changing a byte (safe on a
//! ring other processes are writing), and a full filesystem is an
//! [`Error::NoSpace`] naming the file and the size.
//!
//! A new file whose filesystem has no `fallocate` is reserved by writing its zeroes
//! (nobody maps it yet). An existing one cannot be, since writing zeroes over a live ring
//! would destroy records: where `fallocate` cannot be used on it, its holes are looked
//! for (`SEEK_HOLE`, and the blocks `fstat` counts) and a file with one in the range is
//! refused ([`Error::Sparse`]).

use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{fallocate, fstat, seek, FallocateFlags, SeekFrom};
use rustix::io::Errno;

use crate::error::Error;

/// How a file is named in messages.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Name<'a> {
    /// A named file.
    Path(&'a Path),
    /// A memfd made here.
    Memfd,
    /// A descriptor whose name is what `/proc/self/fd` says.
    Fd,
}

impl Name<'_> {
    fn path(self, fd: BorrowedFd<'_>) -> PathBuf {
        match self {
            Name::Path(p) => p.to_path_buf(),
            Name::Memfd => PathBuf::from("memfd:ringtrace"),
            Name::Fd => std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                .unwrap_or_else(|_| PathBuf::from(format!("file descriptor {}", fd.as_raw_fd()))),
        }
    }
}

/// Errors of `fallocate` that say it cannot be used on this file, not that space is
/// missing: no `fallocate` in the filesystem, a descriptor not open for writing, a
/// sealed memfd.
fn unsupported(e: Errno) -> bool {
    matches!(e, Errno::OPNOTSUPP | Errno::NOSYS | Errno::BADF | Errno::PERM | Errno::INVAL | Errno::NODEV)
}

/// `fallocate(fd, 0, offset, len)`, retried when a signal interrupts it.
fn allocate(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<(), Errno> {
    loop {
        match fallocate(fd, FallocateFlags::empty(), offset, len) {
            Err(Errno::INTR) => {}
            other => return other,
        }
    }
}

/// Reserves `ranges` (`(offset, len)` pairs) of a new file `fd` of `len` bytes (sized
/// already, mapped by nobody yet): the whole file (`[(0, len)]`), or the parts of a
/// channel file that every process touches ([`slot_head`]). A filesystem without
/// `fallocate` gets the whole file written with zeroes instead, so that the file has no
/// holes for an attacher to find.
pub(crate) fn reserve_new(fd: BorrowedFd<'_>, len: u64, ranges: &[(u64, u64)], name: Name<'_>) -> Result<(), Error> {
    let total = ranges.iter().map(|&(_, n)| n).sum();
    let no_space = |bytes: u64, e: std::io::Error| Error::NoSpace { bytes, path: name.path(fd), source: e };
    for &(offset, n) in ranges {
        match allocate(fd, offset, n) {
            Ok(()) => {}
            Err(e) if unsupported(e) => return write_zeroes(fd, len).map_err(|e| no_space(len, e)),
            Err(e) => return Err(no_space(total, e.into())),
        }
    }
    Ok(())
}

/// Bytes at the start of a channel slot's ring image (its control block ends at
/// `data_offset`) that any process touches before a producer has written the slot: the
/// control block, and the data area's first page, where a reader (a consumer's next
/// record, `ready`, an overwrite capture) loads the header at position 0 to find the
/// ring empty. The rest of the image is reserved by the slot's first producer
/// ([`Deferred`]).
pub(crate) fn slot_head(data_offset: u64, image: u64) -> u64 {
    data_offset.saturating_add(rustix::param::page_size() as u64).min(image)
}

/// A channel slot's ring image, whose data pages are reserved only when a producer is
/// given the ring (`RingBuf::producer`), or when it is attached having been written: a
/// channel file of many slots then takes space for the slots its producers use, not
/// for all of them.
#[derive(Debug)]
pub(crate) struct Deferred {
    /// Where the image starts in the file.
    offset: u64,
    /// The image's bytes (control block and data area).
    len: u64,
    /// The channel file, for messages.
    path: PathBuf,
    /// Whether this process reserved it already: a producer claiming a slot tries the
    /// channel's slots in turn, and each would otherwise pay a `fallocate` of its whole
    /// image (taking the file's lock) before finding the slot taken.
    reserved: AtomicBool,
}

impl Deferred {
    /// The image at `offset`, `len` bytes, of the channel file at `path`, not reserved yet.
    pub(crate) fn new(offset: u64, len: u64, path: &Path) -> Self {
        Deferred { offset, len, path: path.to_path_buf(), reserved: AtomicBool::new(false) }
    }

    /// Reserves the whole image in `fd` (its file), once per process: [`reserve_existing`].
    pub(crate) fn reserve(&self, fd: BorrowedFd<'_>) -> Result<(), Error> {
        // Acquire: pairs with the Release store below, so a thread that skips the call
        // comes after the `fallocate` that reserved the image.
        if self.reserved.load(Ordering::Acquire) {
            return Ok(());
        }
        reserve_existing(fd, self.offset, self.len, Name::Path(&self.path))?;
        // Release: pairs with the Acquire load above.
        self.reserved.store(true, Ordering::Release);
        Ok(())
    }
}

/// Writes zeroes over the first `len` bytes of `fd`: the blocks they take are then the
/// file's.
fn write_zeroes(fd: BorrowedFd<'_>, len: u64) -> std::io::Result<()> {
    let zeroes = vec![0u8; 64 << 10];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(zeroes.len() as u64) as usize;
        match rustix::io::pwrite(fd, &zeroes[..n], at) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(done) => at += done as u64,
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Before an existing file's range `[offset, offset + len)` is mapped: reserves it
/// (`fallocate` changes no byte: ranges that are backed stay as they are, holes get
/// blocks of zeroes, as they read); where `fallocate` cannot be used on `fd`, refuses
/// the file if the range has a hole.
pub(crate) fn reserve_existing(fd: BorrowedFd<'_>, offset: u64, len: u64, name: Name<'_>) -> Result<(), Error> {
    match allocate(fd, offset, len) {
        Ok(()) => Ok(()),
        Err(e) if unsupported(e) => match has_hole(fd, offset, len) {
            false => Ok(()),
            true => Err(Error::Sparse { path: name.path(fd), offset, bytes: len, source: e.into() }),
        },
        Err(e) => Err(Error::NoSpace { bytes: len, path: name.path(fd), source: e.into() }),
    }
}

/// Whether `[offset, offset + len)` of `fd` may hold a hole: the file has fewer blocks
/// than its size needs (tmpfs counts the pages `fallocate` reserved, which `SEEK_HOLE`
/// reports as holes until written) and `SEEK_HOLE` finds one before the range's end. A
/// filesystem without `SEEK_HOLE` reports none (its whole file is data). Moves the
/// descriptor's file offset, which this crate never reads or writes through.
fn has_hole(fd: BorrowedFd<'_>, offset: u64, len: u64) -> bool {
    let Ok(st) = fstat(fd) else { return true };
    let size = u64::try_from(st.st_size).unwrap_or(0);
    let blocks = u64::try_from(st.st_blocks).unwrap_or(0);
    if blocks.saturating_mul(512) >= size {
        return false;
    }
    match seek(fd, SeekFrom::Hole(offset)) {
        Ok(hole) => hole < offset.saturating_add(len),
        // ENXIO: the offset is past the data (the range is inside the file: checked by
        // the caller); any other error: cannot tell, so refuse.
        Err(_) => true,
    }
}
