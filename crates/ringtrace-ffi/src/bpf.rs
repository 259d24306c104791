//! Readers of kernel BPF ring buffer maps (`BPF_MAP_TYPE_RINGBUF`).

use std::ffi::{c_char, c_int, c_void};
use std::os::fd::{AsFd, AsRawFd};

use ringtrace::kernel::bpf::BpfRingBuf;

use crate::consumer::{count, deliver, ringtrace_record_fn};
use crate::error::Fail;
use crate::guard::{self, call, call_or, handle};
use crate::ring::{dup_fd, path_arg};

/// A BPF ring buffer reader handle.
#[derive(Debug)]
pub struct ringtrace_bpf_ringbuf {
    rb: BpfRingBuf,
}
handle!(ringtrace_bpf_ringbuf, 0x5254_4250_4652_0007, "BPF ring buffer");

/// Boxes a reader into `*out`.
///
/// # Safety
///
/// `out` is NULL (refused) or valid for a write.
unsafe fn put(out: *mut *mut ringtrace_bpf_ringbuf, rb: BpfRingBuf) -> Result<c_int, crate::error::Fail> {
    // SAFETY: forwarded from the caller.
    unsafe { guard::put(out, ringtrace_bpf_ringbuf { rb }) }
}

/// Attaches a reader to the BPF ring buffer map `map_fd` (duplicated: the caller keeps
/// `map_fd`). Free it with `ringtrace_bpf_ringbuf_free`.
///
/// Returns 0, or -EINVAL (not a ring buffer map), -EBADF, -EPERM, or another -errno.
///
/// Threads: any thread.
///
/// # Safety
///
/// `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringbuf_from_fd(map_fd: c_int, out: *mut *mut ringtrace_bpf_ringbuf) -> c_int {
    call(|| {
        guard::out_ptr(out)?;
        let fd = dup_fd(map_fd)?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { put(out, BpfRingBuf::from_fd(fd)?) }
    })
}

/// Attaches a reader to the BPF ring buffer map pinned at `path` (in a bpffs mount).
///
/// Returns 0, or -EINVAL, -ENOENT (nothing pinned there), -EPERM, or another -errno.
///
/// Threads: any thread.
///
/// # Safety
///
/// `path` is a NUL-terminated string; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringbuf_open_pinned(
    path: *const c_char,
    out: *mut *mut ringtrace_bpf_ringbuf,
) -> c_int {
    call(|| {
        guard::out_ptr(out)?;
        // SAFETY: the caller's promise about `path`.
        let path = unsafe { path_arg(path) }?;
        let rb = BpfRingBuf::open_pinned(path).map_err(|e| Fail::from(e).about(path))?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { put(out, rb) }
    })
}

/// Frees a BPF ring buffer reader (NULL is ignored).
///
/// Threads: no other thread may be using this handle.
///
/// # Safety
///
/// `rb` is NULL or a BPF ring buffer handle not used after this call.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringbuf_free(rb: *mut ringtrace_bpf_ringbuf) {
    // SAFETY: the caller's promise about `rb`.
    call_or((), || unsafe { guard::free(rb) })
}

/// Calls `fn(ctx, data, len)` for every record available now, in order.
///
/// Returns the number delivered, or -EINVAL, -ECANCELED, -EBADMSG, or -EBUSY (another
/// reader, in this process or another, holds the map: its first consuming call takes
/// the map's reader lock, held until the handle is freed).
///
/// Threads: one thread at a time per handle (one reader per map, as with libbpf).
///
/// # Safety
///
/// `rb` is NULL or a BPF ring buffer handle; `fn` is NULL or a function callable with
/// `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringbuf_consume(
    rb: *mut ringtrace_bpf_ringbuf,
    r#fn: ringtrace_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `rb`.
        let h = unsafe { guard::get_mut(rb) }?;
        Ok(count(h.rb.consume(|rec| deliver(r#fn, ctx, rec))?))
    })
}

/// Waits up to `timeout_ms` (-1: no limit) for records, then delivers them as
/// `ringtrace_bpf_ringbuf_consume`.
///
/// Returns the number delivered (0 on timeout), or the errors of
/// `ringtrace_bpf_ringbuf_consume`.
///
/// Threads: one thread at a time per handle.
///
/// # Safety
///
/// `rb` is NULL or a BPF ring buffer handle; `fn` is NULL or a function callable with
/// `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringbuf_poll(
    rb: *mut ringtrace_bpf_ringbuf,
    timeout_ms: c_int,
    r#fn: ringtrace_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `rb`.
        let h = unsafe { guard::get_mut(rb) }?;
        Ok(count(h.rb.poll(guard::timeout(timeout_ms), |rec| deliver(r#fn, ctx, rec))?))
    })
}

/// The map's descriptor, readable while records are available (for epoll), owned by
/// the handle.
///
/// Returns the descriptor (>= 0) or -EINVAL.
///
/// Threads: any thread.
///
/// # Safety
///
/// `rb` is NULL or a BPF ring buffer handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringbuf_fd(rb: *const ringtrace_bpf_ringbuf) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `rb`.
        let h = unsafe { guard::get(rb) }?;
        Ok(h.rb.as_fd().as_raw_fd())
    })
}
