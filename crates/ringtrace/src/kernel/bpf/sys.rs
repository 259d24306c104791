//! The three bpf(2) commands the reader needs: `BPF_OBJ_GET` (a pinned path),
//! `BPF_MAP_GET_FD_BY_ID` and `BPF_OBJ_GET_INFO_BY_FD` (what kind of map a descriptor
//! is). The map's memory comes from mmap(2) on its descriptor ([`super::map`]).
//!
//! This module holds the `unsafe` of the bpf(2) system call. Each command fills a
//! zeroed `union bpf_attr` image ([`Attr`], larger than every member used) at the
//! offsets of `include/uapi/linux/bpf.h`, and passes its full size: the kernel checks
//! that the bytes past the member it reads are zero (`CHECK_ATTR`).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

/// `BPF_MAP_TYPE_RINGBUF`.
pub(crate) const MAP_TYPE_RINGBUF: u32 = 27;
/// `BPF_MAP_TYPE_USER_RINGBUF` (the user-space producer's ring: written by `UserRingBuf`).
pub(crate) const MAP_TYPE_USER_RINGBUF: u32 = 31;
/// `BPF_F_RB_OVERWRITE` (Linux 6.19): the map overwrites its oldest records when full.
pub const BPF_F_RB_OVERWRITE: u32 = 1 << 19;

const BPF_MAP_GET_FD_BY_ID: libc::c_long = 14;
const BPF_OBJ_GET: libc::c_long = 7;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

/// A `union bpf_attr` image: 16 words, zeroed, larger than every member used here.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(&mut self, at: usize, v: u32) -> &mut Attr {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, at: usize, v: u64) -> &mut Attr {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

/// Runs one bpf(2) command; a non-negative result is returned as is.
///
/// # Safety
///
/// Every pointer the command's attr member holds must be valid for what the kernel
/// does with it (a NUL-terminated path; an info buffer of the length given) until the
/// call returns.
unsafe fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, writable buffer of the size passed; the pointers inside
    // it are valid per this function's contract.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Takes ownership of a descriptor bpf(2) just returned.
fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("bpf(2) returned an invalid descriptor"))?;
    // SAFETY: the kernel just returned `fd` as a new descriptor of this process, owned by
    // nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `BPF_OBJ_GET`: the map (or program) pinned at `path` in a bpffs.
pub(crate) fn obj_get(path: &Path) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let mut attr = Attr::new();
    // struct { __aligned_u64 pathname; __u32 bpf_fd; __u32 file_flags; ... }
    attr.u64(0, c.as_ptr() as u64);
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    owned(unsafe { bpf(BPF_OBJ_GET, &mut attr) }?)
}

/// `BPF_MAP_GET_FD_BY_ID`.
pub(crate) fn map_get_fd_by_id(id: u32) -> io::Result<OwnedFd> {
    let mut attr = Attr::new();
    // struct { __u32 start_id / map_id; __u32 next_id; __u32 open_flags; }
    attr.u32(0, id);
    // SAFETY: the member holds no pointer.
    owned(unsafe { bpf(BPF_MAP_GET_FD_BY_ID, &mut attr) }?)
}

/// The fields of `struct bpf_map_info` the reader checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct MapInfo {
    pub(crate) map_type: u32,
    pub(crate) id: u32,
    pub(crate) key_size: u32,
    pub(crate) value_size: u32,
    pub(crate) max_entries: u32,
    pub(crate) map_flags: u32,
    pub(crate) name: String,
}

/// `BPF_OBJ_GET_INFO_BY_FD` on a map descriptor. A descriptor of something else (a
/// program, a link, a plain file) fails with `EINVAL`, or returns a program's info,
/// which the caller tells apart by its fields.
pub(crate) fn map_info(fd: BorrowedFd<'_>) -> io::Result<MapInfo> {
    // struct bpf_map_info { __u32 type; id; key_size; value_size; max_entries;
    //   map_flags; char name[16]; ... }: the first 40 bytes.
    let mut info = [0u8; 40];
    let mut attr = Attr::new();
    // struct { __u32 bpf_fd; __u32 info_len; __aligned_u64 info; }
    attr.u32(0, fd.as_raw_fd() as u32).u32(4, info.len() as u32).u64(8, info.as_mut_ptr() as u64);
    // SAFETY: `info` is a writable buffer of the length given, alive during the call.
    unsafe { bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }?;
    let word = |i: usize| u32::from_ne_bytes([info[4 * i], info[4 * i + 1], info[4 * i + 2], info[4 * i + 3]]);
    let name = &info[24..40];
    let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
    Ok(MapInfo {
        map_type: word(0),
        id: word(1),
        key_size: word(2),
        value_size: word(3),
        max_entries: word(4),
        map_flags: word(5),
        name: String::from_utf8_lossy(name).into_owned(),
    })
}
