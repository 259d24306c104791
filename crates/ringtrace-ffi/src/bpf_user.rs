//! Producers into kernel BPF user ring buffer maps (`BPF_MAP_TYPE_USER_RINGBUF`), named
//! after libbpf's `user_ring_buffer__*` calls: `ringtrace::kernel::bpf::UserRingBuf`.
//!
//! As libbpf's, the reserve calls return the sample's address, or NULL with `errno`
//! set; submit and discard return nothing. Every failure also leaves its message for
//! `ringtrace_last_error`.

use std::ffi::{c_char, c_int, c_void};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use ringtrace::kernel::bpf::{UserReserveError, UserRingBuf, UserSample};

use crate::error::Fail;
use crate::guard::{self, call, call_or, handle};
use crate::ring::{dup_fd, path_arg};

/// A BPF user ring buffer producer handle.
#[derive(Debug)]
pub struct ringtrace_bpf_user_ringbuf {
    rb: UserRingBuf,
}
handle!(ringtrace_bpf_user_ringbuf, 0x5254_4255_5352_000b, "BPF user ring buffer");

/// Sets this thread's `errno`.
fn set_errno(errno: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno, valid for a write.
    unsafe { *libc::__errno_location() = errno };
}

/// Runs `f` as the body of a call that returns a pointer, or NULL with `errno` set to
/// the failure's code (and its message kept for `ringtrace_last_error`).
fn call_ptr(f: impl FnOnce() -> Result<*mut c_void, Fail>) -> *mut c_void {
    let mut ptr = std::ptr::null_mut();
    let code = call(|| {
        ptr = f()?;
        Ok(0)
    });
    if code < 0 {
        // Last: nothing after it may change errno.
        set_errno(-code);
        return std::ptr::null_mut();
    }
    ptr
}

/// Boxes a producer into `*out`.
///
/// # Safety
///
/// `out` is NULL (refused) or valid for a write.
unsafe fn put(out: *mut *mut ringtrace_bpf_user_ringbuf, rb: UserRingBuf) -> Result<c_int, Fail> {
    // SAFETY: forwarded from the caller.
    unsafe { guard::put(out, ringtrace_bpf_user_ringbuf { rb }) }
}

/// Attaches a producer to the BPF user ring buffer map `map_fd` (duplicated: the
/// caller keeps `map_fd`; libbpf's `user_ring_buffer__new`). Free it with
/// `ringtrace_bpf_user_ringbuf_free`.
///
/// One process produces into a map at a time: the handle holds the map's producer lock
/// until it is freed (or its process dies), and samples a dead producer left reserved
/// are discarded here, so that the BPF program's drain goes past them.
///
/// Returns 0, or -EINVAL (not a user ring buffer map: a ring buffer map, which the
/// kernel writes, is read with `ringtrace_bpf_ringbuf_*`), -EBUSY (another handle, in
/// this process or another, produces into the map), -EBADF, -EPERM, or another -errno.
///
/// Threads: any thread.
///
/// # Safety
///
/// `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_user_ringbuf_from_fd(
    map_fd: c_int,
    out: *mut *mut ringtrace_bpf_user_ringbuf,
) -> c_int {
    call(|| {
        guard::out_ptr(out)?;
        let fd = dup_fd(map_fd)?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { put(out, UserRingBuf::from_fd(fd)?) }
    })
}

/// Attaches a producer to the BPF user ring buffer map pinned at `path` (in a bpffs
/// mount), as `ringtrace_bpf_user_ringbuf_from_fd` does.
///
/// Returns 0, or -ENOENT (nothing pinned there), and the errors of
/// `ringtrace_bpf_user_ringbuf_from_fd`.
///
/// Threads: any thread.
///
/// # Safety
///
/// `path` is a NUL-terminated string; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_user_ringbuf_open_pinned(
    path: *const c_char,
    out: *mut *mut ringtrace_bpf_user_ringbuf,
) -> c_int {
    call(|| {
        guard::out_ptr(out)?;
        // SAFETY: the caller's promise about `path`.
        let path = unsafe { path_arg(path) }?;
        let rb = UserRingBuf::open_pinned(path).map_err(|e| Fail::from(e).about(path))?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { put(out, rb) }
    })
}

/// Frees a BPF user ring buffer producer (NULL is ignored; libbpf's
/// `user_ring_buffer__free`). Samples reserved and neither submitted nor discarded are
/// discarded; the map's producer lock is released.
///
/// Threads: no other thread may be using this handle.
///
/// # Safety
///
/// `rb` is NULL or a BPF user ring buffer handle not used after this call; no sample
/// of it is used after this call.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_user_ringbuf_free(rb: *mut ringtrace_bpf_user_ringbuf) {
    // SAFETY: the caller's promise about `rb`.
    call_or((), || unsafe { guard::free(rb) })
}

/// The sample's address, left reserved for C to submit, or why there is none.
fn reserved(r: Result<UserSample<'_>, UserReserveError>) -> Result<*mut c_void, Fail> {
    Ok(r?.into_raw().cast())
}

/// Reserves a sample of `size` bytes in the map (libbpf's `user_ring_buffer__reserve`):
/// its address, 8-byte aligned, to write the `size` bytes at, then to hand to
/// `ringtrace_bpf_user_ringbuf_submit` (or `_discard`). The BPF program's drain stops at
/// a reserved sample until it is submitted or discarded.
///
/// Returns the sample, or NULL with `errno` set: E2BIG (the sample can never fit: larger
/// than the map's data area less the 8-byte header, or than a `bpf_dynptr` holds,
/// 2^24 - 1 bytes), ENOSPC (no room now: the BPF program has not drained enough yet),
/// EINVAL (`size` 0, or `rb` NULL or not a handle).
///
/// Threads: any thread (libbpf's reserve is not thread-safe; this one is: reservations
/// are serialized by a lock of the handle).
///
/// # Safety
///
/// `rb` is NULL or a BPF user ring buffer handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_user_ringbuf_reserve(
    rb: *mut ringtrace_bpf_user_ringbuf,
    size: u32,
) -> *mut c_void {
    call_ptr(|| {
        // SAFETY: the caller's promise about `rb`.
        let h = unsafe { guard::get(rb) }?;
        reserved(h.rb.reserve(size as usize))
    })
}

/// `ringtrace_bpf_user_ringbuf_reserve`, waiting up to `timeout_ms` for the BPF program
/// to drain room (libbpf's `user_ring_buffer__reserve_blocking`): the kernel wakes the
/// map's descriptor after a drain that took samples; a program that drains with
/// `BPF_RB_NO_WAKEUP` wakes nobody, and the wait then looks again every 10 ms. 0 tries
/// once. A negative `timeout_ms` is refused (EINVAL): libbpf's -1 waits without a
/// limit, and every wait here has one (INT_MAX ms is about 24.8 days).
///
/// Returns the sample, or NULL with `errno` set: ETIMEDOUT (no room before the
/// timeout; libbpf's header documents ENOSPC for this case: a caller that checks for
/// either is portable), EINVAL (a negative `timeout_ms`), and the errors of
/// `ringtrace_bpf_user_ringbuf_reserve` but ENOSPC.
///
/// Threads: any thread.
///
/// # Safety
///
/// `rb` is NULL or a BPF user ring buffer handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_user_ringbuf_reserve_blocking(
    rb: *mut ringtrace_bpf_user_ringbuf,
    size: u32,
    timeout_ms: c_int,
) -> *mut c_void {
    call_ptr(|| {
        // SAFETY: the caller's promise about `rb`.
        let h = unsafe { guard::get(rb) }?;
        let Ok(ms) = u64::try_from(timeout_ms) else {
            return Err(Fail::inval(format!(
                "a negative timeout ({timeout_ms} ms): the wait for room is bounded, give it in milliseconds"
            )));
        };
        reserved(h.rb.reserve_blocking(size as usize, Duration::from_millis(ms)))
    })
}

/// Submits or discards the sample at `sample`; misuse is said as a failure is, with
/// `errno` EINVAL.
///
/// # Safety
///
/// `rb` is NULL or a BPF user ring buffer handle.
unsafe fn finish(rb: *mut ringtrace_bpf_user_ringbuf, sample: *mut c_void, submit: bool) {
    let code = call(|| {
        // SAFETY: the caller's promise about `rb`.
        let h = unsafe { guard::get(rb) }?;
        let done = if submit { h.rb.commit_raw(sample.cast()) } else { h.rb.discard_raw(sample.cast()) };
        done.map_err(|e| Fail::inval(format!("{sample:p}: {e}")))?;
        Ok(0)
    });
    if code < 0 {
        set_errno(-code);
    }
}

/// Hands the sample at `sample`, as a reserve call of this handle returned it, to the
/// BPF program (libbpf's `user_ring_buffer__submit`).
///
/// A pointer that is not a sample of this handle still reserved (submitted or
/// discarded already, never reserved, NULL), or a NULL or invalid `rb`, is misuse: the
/// map is left as it was, `errno` is set to EINVAL and `ringtrace_last_error()` says
/// what was wrong.
///
/// Threads: any thread.
///
/// # Safety
///
/// `rb` is NULL or a BPF user ring buffer handle. `sample` is only compared with the
/// handle's samples, never read.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_user_ringbuf_submit(rb: *mut ringtrace_bpf_user_ringbuf, sample: *mut c_void) {
    // SAFETY: the caller's promise about `rb`.
    unsafe { finish(rb, sample, true) }
}

/// Gives the sample at `sample` up: the BPF program's drain skips it (libbpf's
/// `user_ring_buffer__discard`). Misuse as for `ringtrace_bpf_user_ringbuf_submit`.
///
/// Threads: any thread.
///
/// # Safety
///
/// As for `ringtrace_bpf_user_ringbuf_submit`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_user_ringbuf_discard(rb: *mut ringtrace_bpf_user_ringbuf, sample: *mut c_void) {
    // SAFETY: the caller's promise about `rb`.
    unsafe { finish(rb, sample, false) }
}

/// The map's descriptor, owned by the handle, for epoll: the kernel makes it writable
/// (EPOLLOUT; edge-triggered is fine) after a drain that took samples, unless the
/// program drained with `BPF_RB_NO_WAKEUP`. Reserve again then.
///
/// Returns the descriptor (>= 0) or -EINVAL.
///
/// Threads: any thread.
///
/// # Safety
///
/// `rb` is NULL or a BPF user ring buffer handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_user_ringbuf_fd(rb: *const ringtrace_bpf_user_ringbuf) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `rb`.
        let h = unsafe { guard::get(rb) }?;
        Ok(h.rb.as_fd().as_raw_fd())
    })
}
