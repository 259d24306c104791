//! Consumers: a discard ring's `Consumer` or an overwrite ring's `OverwriteConsumer`
//! behind one opaque `ringtrace_consumer`, and the record callback.

use std::ffi::{c_int, c_void};
use std::os::fd::{AsFd, AsRawFd};

use ringtrace::config::{Mpsc, Spsc};
use ringtrace::recorder::OverwriteConsumer;
use ringtrace::Consumer;

use crate::error::Stopped;
use crate::guard::{self, call, call_or, handle};
use crate::ring::{ringtrace_ring, AnyRing};

/// A record callback: `data` and `len` are valid only during the call. Returning nonzero
/// stops the call that delivers records, which returns -ECANCELED (the record counts as
/// consumed).
pub type ringtrace_record_fn = Option<unsafe extern "C" fn(ctx: *mut c_void, data: *const c_void, len: usize) -> c_int>;

/// Calls a C record callback for one record (NULL callback: the record is dropped).
pub(crate) fn deliver(f: ringtrace_record_fn, ctx: *mut c_void, rec: &[u8]) -> Result<(), Stopped> {
    let Some(f) = f else { return Ok(()) };
    // SAFETY: the C caller passed `f` and `ctx` to be called this way; `rec` is valid
    // for the duration of the call.
    match unsafe { f(ctx, rec.as_ptr().cast(), rec.len()) } {
        0 => Ok(()),
        n => Err(Stopped(n)),
    }
}

/// A count of records as an `int` result.
pub(crate) fn count(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

#[derive(Debug)]
enum AnyConsumer {
    Mpsc(Consumer<Mpsc>),
    Spsc(Consumer<Spsc>),
    MpscOverwrite(OverwriteConsumer<Mpsc>),
    SpscOverwrite(OverwriteConsumer<Spsc>),
}

macro_rules! with_consumer {
    ($c:expr, $x:ident => $body:expr) => {
        match $c {
            AnyConsumer::Mpsc($x) => $body,
            AnyConsumer::Spsc($x) => $body,
            AnyConsumer::MpscOverwrite($x) => $body,
            AnyConsumer::SpscOverwrite($x) => $body,
        }
    };
}

/// A consumer handle.
#[derive(Debug)]
pub struct ringtrace_consumer {
    consumer: AnyConsumer,
}
handle!(ringtrace_consumer, 0x5254_434f_4e53_0003, "consumer");

/// Attaches the ring's consumer (one per ring at a time, in any process). Free it with
/// `ringtrace_consumer_free`; it holds its own reference to the ring.
///
/// Returns 0, or -EINVAL, -EBUSY (the ring has a consumer).
///
/// Threads: any thread.
///
/// # Safety
///
/// `ring` is NULL or a ring handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_consumer_new(ring: *mut ringtrace_ring, out: *mut *mut ringtrace_consumer) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ring`.
        let h = unsafe { guard::get(ring) }?;
        let consumer = match &h.ring {
            AnyRing::MpscDiscard(r) => AnyConsumer::Mpsc(r.consumer()?),
            AnyRing::SpscDiscard(r) => AnyConsumer::Spsc(r.consumer()?),
            AnyRing::MpscOverwrite(r) => AnyConsumer::MpscOverwrite(r.consumer()?),
            AnyRing::SpscOverwrite(r) => AnyConsumer::SpscOverwrite(r.consumer()?),
        };
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_consumer { consumer }) }
    })
}

/// Frees a consumer handle (NULL is ignored); the ring can then take another consumer.
///
/// Threads: no other thread may be using this handle.
///
/// # Safety
///
/// `c` is NULL or a consumer handle not used after this call.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_consumer_free(c: *mut ringtrace_consumer) {
    // SAFETY: the caller's promise about `c`.
    call_or((), || unsafe { guard::free(c) })
}

/// Calls `fn(ctx, data, len)` for every record available now, in order (`fn` may be
/// NULL: the records are dropped). Returns how many records were delivered.
///
/// Returns the count (>= 0), or -EINVAL, -ECANCELED (`fn` returned nonzero),
/// -EBADMSG (corrupt ring), -EBUSY (overwrite ring: overwritten faster than it could be
/// read; retry).
///
/// Threads: one thread at a time per consumer handle (producers may run
/// concurrently in any threads or processes).
///
/// # Safety
///
/// `c` is NULL or a consumer handle; `fn` is NULL or a function callable with `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_consume(
    c: *mut ringtrace_consumer,
    r#fn: ringtrace_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `c`.
        let h = unsafe { guard::get_mut(c) }?;
        let n = with_consumer!(&mut h.consumer, x => x.consume(|rec| deliver(r#fn, ctx, rec)))?;
        Ok(count(n))
    })
}

/// `ringtrace_consume`, delivering at most `max` records.
///
/// Returns the count (>= 0) or the errors of `ringtrace_consume`.
///
/// Threads: one thread at a time per consumer handle.
///
/// # Safety
///
/// `c` is NULL or a consumer handle; `fn` is NULL or a function callable with `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_consume_n(
    c: *mut ringtrace_consumer,
    max: usize,
    r#fn: ringtrace_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `c`.
        let h = unsafe { guard::get_mut(c) }?;
        let n = with_consumer!(&mut h.consumer, x => x.consume_n(max, |rec| deliver(r#fn, ctx, rec)))?;
        Ok(count(n))
    })
}

/// Waits up to `timeout_ms` (-1: no limit, 0: do not wait) for records, then delivers
/// every record available, as `ringtrace_consume`.
///
/// Returns the count (0 on timeout), -EPIPE once every producer is gone and every record
/// is read, or the errors of `ringtrace_consume`.
///
/// Threads: one thread at a time per consumer handle.
///
/// # Safety
///
/// `c` is NULL or a consumer handle; `fn` is NULL or a function callable with `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_poll(
    c: *mut ringtrace_consumer,
    timeout_ms: c_int,
    r#fn: ringtrace_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `c`.
        let h = unsafe { guard::get_mut(c) }?;
        let t = guard::timeout(timeout_ms);
        let n = with_consumer!(&mut h.consumer, x => x.poll(t, |rec| deliver(r#fn, ctx, rec)))?;
        Ok(count(n))
    })
}

/// The descriptor to wait on with epoll/poll (readable when woken), owned by the
/// consumer: valid while it is. Call `ringtrace_consumer_arm` before each wait.
///
/// Returns the descriptor (>= 0) or -EINVAL.
///
/// Threads: any thread.
///
/// # Safety
///
/// `c` is NULL or a consumer handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_consumer_fd(c: *const ringtrace_consumer) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `c`.
        let h = unsafe { guard::get(c) }?;
        Ok(with_consumer!(&h.consumer, x => x.as_fd().as_raw_fd()))
    })
}

/// Prepares a wait on `ringtrace_consumer_fd`: returns 1 if the caller should wait on
/// the descriptor, 0 if records are ready now (consume them instead of waiting).
///
/// Returns 1, 0, or -EINVAL or another -errno.
///
/// Threads: one thread at a time per consumer handle.
///
/// # Safety
///
/// `c` is NULL or a consumer handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_consumer_arm(c: *mut ringtrace_consumer) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `c`.
        let h = unsafe { guard::get_mut(c) }?;
        let wait = with_consumer!(&mut h.consumer, x => x.arm())?;
        Ok(c_int::from(wait))
    })
}
