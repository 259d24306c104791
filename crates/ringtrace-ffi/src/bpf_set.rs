//! Several BPF ring buffer maps behind one descriptor (libbpf's `ring_buffer__add` and
//! `ring_buffer__poll`): `ringtrace::kernel::bpf::RingSet`.

use std::ffi::{c_int, c_void};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use ringtrace::kernel::bpf::{BpfRingBuf, RingSet};

use crate::consumer::count;
use crate::error::{Fail, Stopped};
use crate::guard::{self, call, call_or, handle};
use crate::ring::dup_fd;

/// A set of BPF ring buffer readers handle.
#[derive(Debug)]
pub struct ringtrace_bpf_ringset {
    set: RingSet,
}
handle!(ringtrace_bpf_ringset, 0x5254_4253_4554_0009, "BPF ring buffer set");

/// Called for each record of a set: `index` is its map's, as `ringtrace_bpf_ringset_add`
/// returned it. Return 0 to go on, nonzero to stop (that record counts as consumed, and
/// the call returns -ECANCELED; libbpf's callbacks stop on a negative value only, and
/// its call returns that value).
pub type ringtrace_set_record_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, index: usize, data: *const c_void, len: usize) -> c_int>;

fn deliver(f: ringtrace_set_record_fn, ctx: *mut c_void, index: usize, rec: &[u8]) -> Result<(), Stopped> {
    let Some(f) = f else { return Ok(()) };
    // SAFETY: the C caller passed `f` and `ctx` to be called this way; `rec` is valid
    // for the duration of the call.
    match unsafe { f(ctx, index, rec.as_ptr().cast(), rec.len()) } {
        0 => Ok(()),
        n => Err(Stopped(n)),
    }
}

/// An empty set (an epoll instance); free it with `ringtrace_bpf_ringset_free`.
///
/// Returns 0, or -EINVAL, or the -errno of `epoll_create1`.
///
/// Threads: any thread.
///
/// # Safety
///
/// `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringset_new(out: *mut *mut ringtrace_bpf_ringset) -> c_int {
    call(|| {
        let out = guard::out_ptr(out)?;
        let set = RingSet::new().map_err(Fail::from)?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_bpf_ringset { set }) }
    })
}

/// Adds the BPF ring buffer map `map_fd` (duplicated: the caller keeps `map_fd`) to the
/// set, registered edge-triggered; records written before are read on the next poll.
///
/// Returns the map's index in the set (0, 1, ... in the order added), or -EINVAL (not
/// a ring buffer map), -EBADF, -EPERM, or another -errno.
///
/// Threads: one thread at a time per set.
///
/// # Safety
///
/// `set` is NULL or a set handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringset_add(set: *mut ringtrace_bpf_ringset, map_fd: c_int) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `set`.
        let h = unsafe { guard::get_mut(set) }?;
        let rb = BpfRingBuf::from_fd(dup_fd(map_fd)?)?;
        Ok(count(h.set.add(rb).map_err(Fail::from)?))
    })
}

/// Consumes every map that may hold records (those added since the last call, those
/// the set's descriptor reports, those not yet drained), each fully, calling `fn(ctx,
/// index, data, len)` for each record, and arms the maps it found empty (the set's
/// descriptor then wakes on their next record). libbpf's `ring_buffer__consume`: call
/// it when the descriptor is readable.
///
/// Returns the records seen, or -EINVAL, -ECANCELED (`fn` returned nonzero), -EBADMSG.
///
/// Threads: one thread at a time per set.
///
/// # Safety
///
/// `set` is NULL or a set handle; `fn` is NULL or a function callable with `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringset_consume(
    set: *mut ringtrace_bpf_ringset,
    r#fn: ringtrace_set_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `set`.
        let h = unsafe { guard::get_mut(set) }?;
        // The maps the descriptor reports, onto the ready list (no wait).
        h.set.wait(Some(Duration::ZERO))?;
        Ok(count(h.set.consume(|i, rec| deliver(r#fn, ctx, i, rec))?))
    })
}

/// Waits up to `timeout_ms` (-1: no limit; 0: no wait) for records in any map of the
/// set, then consumes what is there, as `ringtrace_bpf_ringset_consume` does. libbpf's
/// `ring_buffer__poll`.
///
/// Returns the records seen (0 when the timeout passed), or the errors of
/// `ringtrace_bpf_ringset_consume`, or the -errno of `epoll_wait`.
///
/// Threads: one thread at a time per set.
///
/// # Safety
///
/// `set` is NULL or a set handle; `fn` is NULL or a function callable with `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringset_poll(
    set: *mut ringtrace_bpf_ringset,
    timeout_ms: c_int,
    r#fn: ringtrace_set_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `set`.
        let h = unsafe { guard::get_mut(set) }?;
        Ok(count(h.set.poll(guard::timeout(timeout_ms), |i, rec| deliver(r#fn, ctx, i, rec))?))
    })
}

/// The set's epoll descriptor (nest it in an event loop), owned by the handle: it
/// becomes readable when a map that was armed receives a record. Maps just added, and
/// maps `ringtrace_bpf_ringset_poll` read (it leaves them unarmed while it reads), are
/// not armed: before waiting on the descriptor, call `ringtrace_bpf_ringset_arm`, and
/// consume first if it returns 0.
///
/// Returns the descriptor (>= 0) or -EINVAL.
///
/// Threads: any thread.
///
/// # Safety
///
/// `set` is NULL or a set handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringset_fd(set: *const ringtrace_bpf_ringset) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `set`.
        let h = unsafe { guard::get(set) }?;
        Ok(h.set.as_fd().as_raw_fd())
    })
}

/// Arms every map of the set that may hold records: 1 if all were found empty (waiting
/// on `ringtrace_bpf_ringset_fd` is then safe: a record wakes it), 0 if one holds
/// records (consume first).
///
/// Returns 1, 0, or -EINVAL, or the -errno of `epoll_wait`.
///
/// Threads: one thread at a time per set.
///
/// # Safety
///
/// `set` is NULL or a set handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringset_arm(set: *mut ringtrace_bpf_ringset) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `set`.
        let h = unsafe { guard::get_mut(set) }?;
        Ok(c_int::from(h.set.arm()?))
    })
}

/// Frees a set and its readers (NULL is ignored); the maps' descriptors the caller
/// passed stay the caller's.
///
/// Threads: no other thread may be using this handle.
///
/// # Safety
///
/// `set` is NULL or a set handle not used after this call.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_bpf_ringset_free(set: *mut ringtrace_bpf_ringset) {
    // SAFETY: the caller's promise about `set`.
    call_or((), || unsafe { guard::free(set) })
}
