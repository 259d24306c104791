//! The caller's arguments: options structs that grow by version (libbpf's `sz`
//! convention), paths and file descriptors, checked and converted.

use std::ffi::CStr;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::raw::{c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::Fail;

/// Reads a libbpf-style options struct whose first field is `size_t sz` (`None` for
/// NULL), copying no more than `sz` bytes: a caller built against an older header
/// passes a shorter struct (its missing fields stay zero), and one built against a
/// newer header a longer one, refused unless its unknown bytes are all zero (libbpf's
/// `OPTS_VALID` does the same).
///
/// # Safety
///
/// `opts` is null or points to at least `opts->sz` readable bytes; `T` is a
/// `#[repr(C)]` struct of integers (every bit pattern valid) starting with a `usize`.
pub(crate) unsafe fn read_sized<T: Copy + Default>(opts: *const T, name: &str) -> Result<Option<T>, Fail> {
    if opts.is_null() {
        return Ok(None);
    }
    let mut o = T::default();
    // SAFETY: not null; the caller promises `sz` readable bytes, which include `sz`.
    let sz = unsafe { opts.cast::<usize>().read_unaligned() };
    if sz < std::mem::size_of::<usize>() {
        return Err(Fail::inval(format!("{name}.sz must be sizeof(struct {name})")));
    }
    let known = std::mem::size_of::<T>();
    if sz > 4096 {
        return Err(Fail::inval(format!("{name}.sz is {sz}: set it to sizeof(struct {name})")));
    }
    if sz > known {
        // SAFETY: the caller promises `sz` readable bytes at `opts`.
        let extra = unsafe { std::slice::from_raw_parts(opts.cast::<u8>().add(known), sz - known) };
        if let Some(at) = extra.iter().position(|&b| b != 0) {
            return Err(Fail::inval(format!(
                "{name}: byte {} is set, past the {known} bytes of the fields this library knows \
                 (sz is {sz}: built against a newer ringtrace.h?)",
                known + at
            )));
        }
    }
    let n = sz.min(known);
    // SAFETY: `n` <= `sz` bytes are readable at `opts` (caller) and writable at `o`;
    // every bit pattern is valid for `T` (caller).
    unsafe { std::ptr::copy_nonoverlapping(opts.cast::<u8>(), (&raw mut o).cast::<u8>(), n) };
    Ok(Some(o))
}

/// A C path argument.
///
/// # Safety
///
/// `path` is null (refused) or a NUL-terminated string.
pub(crate) unsafe fn path_arg<'a>(path: *const c_char) -> Result<&'a Path, Fail> {
    if path.is_null() {
        return Err(Fail::inval("null path"));
    }
    // SAFETY: not null; the caller promises a NUL-terminated string.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    Ok(Path::new(std::ffi::OsStr::from_bytes(bytes)))
}

/// Duplicates a caller's descriptor (close-on-exec), checking it is open first.
pub(crate) fn dup_fd(fd: c_int) -> Result<OwnedFd, Fail> {
    if fd < 0 {
        return Err(Fail::new(libc::EBADF, format!("invalid file descriptor {fd}")));
    }
    // SAFETY: F_GETFD only reads the descriptor table; `fd` need not be open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: `fd` is open (checked above) and only borrowed for the duplication.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    Ok(borrowed.try_clone_to_owned()?)
}
