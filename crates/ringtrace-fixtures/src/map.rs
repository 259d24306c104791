//! BPF maps: the ring buffer map under test, the user ring buffer map a user-space producer
//! writes into, and an ARRAY map for "not a ring buffer" tests.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::sys;

/// A `BPF_MAP_TYPE_RINGBUF` map (type 27).
#[derive(Debug)]
pub struct RingMap {
    fd: OwnedFd,
}

impl RingMap {
    /// Creates a ring buffer map of `size` data bytes (`max_entries`; the kernel requires a
    /// power of 2 and a multiple of the page size, else `EINVAL`).
    pub fn create(size: u32) -> io::Result<RingMap> {
        RingMap::create_with_flags(size, 0)
    }

    /// [`RingMap::create`] with `map_flags` (e.g. `BPF_F_RB_OVERWRITE`, `1 << 19`, Linux 6.19).
    pub fn create_with_flags(size: u32, map_flags: u32) -> io::Result<RingMap> {
        let fd = sys::map_create(sys::MapCreateAttr {
            map_type: sys::BPF_MAP_TYPE_RINGBUF,
            key_size: 0,
            value_size: 0,
            max_entries: size,
            map_flags,
        })?;
        Ok(RingMap { fd })
    }

    /// The map's kernel-wide id (`bpf_map_info.id`, from `BPF_OBJ_GET_INFO_BY_FD`).
    pub fn id(&self) -> io::Result<u32> {
        Ok(sys::map_info(self.fd.as_fd())?.id)
    }

    /// Pins the map at `path`, which must be in a bpffs (see [`crate::BpfFs`]).
    pub fn pin(&self, path: &Path) -> io::Result<()> {
        pin_fd(self.fd.as_fd(), path)
    }
}

/// A `BPF_MAP_TYPE_USER_RINGBUF` map (type 31, Linux 6.1): user space produces, a BPF
/// program consumes with `bpf_user_ringbuf_drain` (see [`crate::EchoProgram`]).
///
/// Its memory is `struct bpf_ringbuf`'s (`kernel/bpf/ringbuf.c`), as for a
/// `BPF_MAP_TYPE_RINGBUF` map, but with the roles swapped (`ringbuf_map_mmap_user`): the
/// consumer page at offset 0 maps read-only (a writable mapping of it is refused with
/// `EPERM`), the producer page and the twice-mapped data area from offset `page_size`
/// map read-write (`page_size + 2 * size` bytes).
#[derive(Debug)]
pub struct UserRingMap {
    fd: OwnedFd,
}

impl UserRingMap {
    /// Creates a user ring buffer map of `size` data bytes (`max_entries`; the kernel
    /// requires a power of 2 and a multiple of the page size, else `EINVAL`).
    pub fn create(size: u32) -> io::Result<UserRingMap> {
        let fd = sys::map_create(sys::MapCreateAttr {
            map_type: sys::BPF_MAP_TYPE_USER_RINGBUF,
            key_size: 0,
            value_size: 0,
            max_entries: size,
            map_flags: 0,
        })?;
        Ok(UserRingMap { fd })
    }

    /// The map's kernel-wide id (`bpf_map_info.id`, from `BPF_OBJ_GET_INFO_BY_FD`).
    pub fn id(&self) -> io::Result<u32> {
        Ok(sys::map_info(self.fd.as_fd())?.id)
    }

    /// Pins the map at `path`, which must be in a bpffs (see [`crate::BpfFs`]).
    pub fn pin(&self, path: &Path) -> io::Result<()> {
        pin_fd(self.fd.as_fd(), path)
    }
}

impl AsFd for UserRingMap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl From<UserRingMap> for OwnedFd {
    fn from(map: UserRingMap) -> OwnedFd {
        map.fd
    }
}

/// Pins any BPF object (a map of any type, a program) at `path` in a bpffs
/// (`BPF_OBJ_PIN`).
pub fn pin_fd(fd: BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pin path contains a NUL byte"))?;
    sys::obj_pin(fd, &path)
}

impl AsFd for RingMap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl From<RingMap> for OwnedFd {
    fn from(map: RingMap) -> OwnedFd {
        map.fd
    }
}

/// Creates a `BPF_MAP_TYPE_ARRAY` map with 4-byte keys, `value_size`-byte values and
/// `entries` entries: any map that is not a ring buffer, for tests that a reader rejects it.
pub fn create_array_map(value_size: u32, entries: u32) -> io::Result<OwnedFd> {
    sys::map_create(sys::MapCreateAttr {
        map_type: sys::BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size,
        max_entries: entries,
        map_flags: 0,
    })
}
