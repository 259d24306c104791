//! Producers and zero-copy reservations across the boundary.
//!
//! A Rust `Reservation` borrows its producer mutably, and C holds a reservation between
//! `ringtrace_reserve` and `ringtrace_commit`. The producer handle therefore owns its
//! producer through a raw pointer to a box that is never moved or touched while a
//! reservation is open, and keeps the open reservation (with its lifetime erased to
//! `'static`) next to it:
//!
//! - the reservation is the only path to the producer while it lives: every entry
//!   point that would use the producer directly first checks that none is open
//!   (`-EINVAL` otherwise);
//! - the reservation is always dropped (committed, discarded, or discarded by `Drop`)
//!   before the box is freed (`Drop for ProducerState`).

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use ringtrace::config::{Discard, Mpsc, Overwrite, Spsc, Wakeup};
use ringtrace::{Producer, Reservation};

use crate::error::Fail;
use crate::guard::{self, call, call_or, handle};
use crate::ring::{ringtrace_ring, AnyRing};

/// Commit or discard with the ring's wakeup policy.
pub const RINGTRACE_WAKEUP_DEFAULT: c_int = 0;
/// Do not wake the consumer for this record.
pub const RINGTRACE_WAKEUP_NONE: c_int = 1;
/// Wake the consumer whatever the policy.
pub const RINGTRACE_WAKEUP_FORCE: c_int = 2;

pub(crate) fn wakeup(flag: c_int) -> Result<Wakeup, Fail> {
    match flag {
        RINGTRACE_WAKEUP_DEFAULT => Ok(Wakeup::Default),
        RINGTRACE_WAKEUP_NONE => Ok(Wakeup::NoWakeup),
        RINGTRACE_WAKEUP_FORCE => Ok(Wakeup::Force),
        f => Err(Fail::inval(format!("invalid wakeup flag {f}"))),
    }
}

#[derive(Debug)]
enum AnyProducer {
    MpscDiscard(Producer<Mpsc, Discard>),
    SpscDiscard(Producer<Spsc, Discard>),
    MpscOverwrite(Producer<Mpsc, Overwrite>),
    SpscOverwrite(Producer<Spsc, Overwrite>),
}

#[derive(Debug)]
enum AnyReservation {
    MpscDiscard(Reservation<'static, Mpsc, Discard>),
    SpscDiscard(Reservation<'static, Spsc, Discard>),
    MpscOverwrite(Reservation<'static, Mpsc, Overwrite>),
    SpscOverwrite(Reservation<'static, Spsc, Overwrite>),
}

macro_rules! with_res {
    ($res:expr, $r:ident => $body:expr) => {
        match $res {
            AnyReservation::MpscDiscard($r) => $body,
            AnyReservation::SpscDiscard($r) => $body,
            AnyReservation::MpscOverwrite($r) => $body,
            AnyReservation::SpscOverwrite($r) => $body,
        }
    };
}

/// The producer and its open reservation (see the module docs for the invariant).
#[derive(Debug)]
struct ProducerState {
    // Declared first, so that it is also dropped first by the compiler's drop glue; the
    // explicit `Drop` below takes it out before freeing `producer` anyway.
    open: Option<AnyReservation>,
    /// From `Box::into_raw`; freed in `Drop`.
    producer: NonNull<AnyProducer>,
}

// SAFETY: `ProducerState` owns its producer (and a reservation borrowing only that
// producer) exactly as a `Box<AnyProducer>` plus a borrow would; `Producer` and
// `Reservation` are `Send` (producers move to their threads).
unsafe impl Send for ProducerState {}

impl Drop for ProducerState {
    fn drop(&mut self) {
        // An open reservation is discarded (its `Drop`) while the producer still lives.
        drop(self.open.take());
        // SAFETY: `producer` came from `Box::into_raw` and nothing borrows it any more.
        drop(unsafe { Box::from_raw(self.producer.as_ptr()) });
    }
}

impl ProducerState {
    /// The producer, when no reservation is open.
    fn producer(&mut self) -> Result<&mut AnyProducer, Fail> {
        if self.open.is_some() {
            return Err(Fail::inval("this producer has an open reservation: commit or discard it first"));
        }
        // SAFETY: the box lives until `Drop`; no reservation borrows it (checked above),
        // and `&mut self` makes this the only borrow.
        Ok(unsafe { &mut *self.producer.as_ptr() })
    }
}

/// A producer handle.
#[derive(Debug)]
pub struct ringtrace_producer {
    state: ProducerState,
}
handle!(ringtrace_producer, 0x5254_5052_4f44_0002, "producer");

/// Attaches a new producer to `ring` (its own reference to the ring: it outlives
/// `ringtrace_ring_free`). Free it with `ringtrace_producer_free`.
///
/// Returns 0, or -EINVAL, -EBUSY (a single-producer ring that has its producer),
/// -EPERM (a ring opened with `RINGTRACE_ACCESS_CONSUMER`).
///
/// Threads: any thread; several producers of one multi-producer ring may be
/// made and used concurrently, each by one thread at a time.
///
/// # Safety
///
/// `ring` is NULL or a ring handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_producer_new(ring: *mut ringtrace_ring, out: *mut *mut ringtrace_producer) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ring`.
        let h = unsafe { guard::get(ring) }?;
        let p = match &h.ring {
            AnyRing::MpscDiscard(r) => AnyProducer::MpscDiscard(r.producer()?),
            AnyRing::SpscDiscard(r) => AnyProducer::SpscDiscard(r.producer()?),
            AnyRing::MpscOverwrite(r) => AnyProducer::MpscOverwrite(r.producer()?),
            AnyRing::SpscOverwrite(r) => AnyProducer::SpscOverwrite(r.producer()?),
        };
        let producer = NonNull::from(Box::leak(Box::new(p)));
        let handle = ringtrace_producer { state: ProducerState { open: None, producer } };
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, handle) }
    })
}

/// Frees a producer handle (NULL is ignored); an open reservation is discarded.
///
/// Threads: no other thread may be using this handle.
///
/// # Safety
///
/// `p` is NULL or a producer handle not used after this call.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_producer_free(p: *mut ringtrace_producer) {
    // SAFETY: the caller's promise about `p`.
    call_or((), || unsafe { guard::free(p) })
}

/// Reserves `len` bytes for one record, in place. In a discard ring `*data` receives
/// the record's bytes, to write directly (valid until `ringtrace_commit` or
/// `ringtrace_discard`); in an overwrite ring `*data` is set to NULL and the payload
/// is written with `ringtrace_reservation_write` (its bytes may be read while they are
/// written). One open reservation per producer handle: to hold several at once, as
/// `bpf_ringbuf_reserve` allows (reserve, reserve, then commit or discard in any order),
/// take a producer handle for each (`ringtrace_producer_new` on a multi-producer ring:
/// an allocation and a slot claimed in the ring's memory). Records reach the consumer in
/// reservation order whatever the commit order, as the BPF ring buffer's do: the
/// consumer waits at the oldest record still open.
///
/// `*data` is aligned to 8 bytes: a record is an 8-byte header and its payload, padded
/// to 8 bytes (the Linux BPF ring buffer's layout), in a page-aligned data area. A
/// record of 0 bytes is a record: it takes the 8 bytes of its header and reaches the
/// consumer with length 0 (`*data` then points at no byte the caller may write).
///
/// Returns 0, or -EINVAL (null argument, or a reservation already open), -ENOSPC (ring
/// full or, overwrite mode, paused or blocked by a record being written: counted as
/// lost), -EMSGSIZE (larger than `ringtrace_ring_max_record_len`: counted as too_large).
///
/// Threads: one thread at a time per producer handle; different producer handles
/// of one ring: any threads.
///
/// # Safety
///
/// `p` is NULL or a producer handle; `data` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_reserve(p: *mut ringtrace_producer, len: usize, data: *mut *mut c_void) -> c_int {
    // SAFETY: the caller's promises, forwarded.
    unsafe { reserve(p, len, data, None) }
}

/// `ringtrace_reserve`, waiting up to `timeout_ms` (-1: no limit) for room in a discard
/// ring (an overwrite ring never waits: it makes room): the zero-copy form of
/// `ringtrace_output_wait`. The wait sleeps on the ring's doorbell, woken as the
/// consumer hands space back. While a reservation is open on the ring (on this thread's
/// other producer handles too), wait with a finite timeout: the consumer stops at the
/// oldest open record, so the room it waits for may come only once that one is
/// committed.
///
/// Returns 0, or -ETIMEDOUT (no room in time: counted as lost), -EPIPE (the ring is
/// full and its consumer is gone), and the errors of `ringtrace_reserve`.
///
/// Threads: one thread at a time per producer handle; different producer handles
/// of one ring: any threads.
///
/// # Safety
///
/// `p` is NULL or a producer handle; `data` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_reserve_wait(
    p: *mut ringtrace_producer,
    len: usize,
    timeout_ms: c_int,
    data: *mut *mut c_void,
) -> c_int {
    // SAFETY: the caller's promises, forwarded.
    unsafe { reserve(p, len, data, Some(timeout_ms)) }
}

/// `ringtrace_reserve` and `ringtrace_reserve_wait`.
///
/// # Safety
///
/// As theirs: `p` is NULL or a producer handle; `data` is valid for a write.
unsafe fn reserve(p: *mut ringtrace_producer, len: usize, data: *mut *mut c_void, wait: Option<c_int>) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `p`.
        let h = unsafe { guard::get_mut(p) }?;
        let data = guard::out_ptr(data)?;
        let producer = h.state.producer()?;
        // SAFETY: the box outlives the reservation, and nothing else touches the producer
        // while the reservation is open (module docs), so erasing the borrow's lifetime
        // is sound.
        let producer: &'static mut AnyProducer = unsafe { &mut *(producer as *mut AnyProducer) };
        let (res, ptr) = match producer {
            AnyProducer::MpscDiscard(x) => {
                let mut r = match wait {
                    Some(ms) => x.reserve_wait(len, guard::timeout(ms))?,
                    None => x.reserve(len)?,
                };
                let ptr = r.as_mut_ptr();
                (AnyReservation::MpscDiscard(r), ptr)
            }
            AnyProducer::SpscDiscard(x) => {
                let mut r = match wait {
                    Some(ms) => x.reserve_wait(len, guard::timeout(ms))?,
                    None => x.reserve(len)?,
                };
                let ptr = r.as_mut_ptr();
                (AnyReservation::SpscDiscard(r), ptr)
            }
            AnyProducer::MpscOverwrite(x) => (AnyReservation::MpscOverwrite(x.reserve(len)?), std::ptr::null_mut()),
            AnyProducer::SpscOverwrite(x) => (AnyReservation::SpscOverwrite(x.reserve(len)?), std::ptr::null_mut()),
        };
        h.state.open = Some(res);
        // SAFETY: `data` is valid for a write (caller).
        unsafe { data.write(ptr.cast()) };
        Ok(0)
    })
}

/// Copies `len` bytes from `src` to byte `offset` of the open reservation's payload
/// (either mode; the only way to write an overwrite ring's reservation).
///
/// Returns 0, or -EINVAL (null argument, no open reservation, or `offset + len` past
/// the record's length).
///
/// Threads: one thread at a time per producer handle.
///
/// # Safety
///
/// `p` is NULL or a producer handle; `src` is valid for reads of `len` bytes (it may be
/// NULL when `len` is 0).
#[no_mangle]
pub unsafe extern "C" fn ringtrace_reservation_write(
    p: *mut ringtrace_producer,
    offset: usize,
    src: *const c_void,
    len: usize,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `p`.
        let h = unsafe { guard::get_mut(p) }?;
        // SAFETY: the caller's promise about `src`.
        let src = unsafe { bytes(src, len) }?;
        let res = h.state.open.as_mut().ok_or_else(|| Fail::inval("no open reservation"))?;
        with_res!(res, r => r.write(offset, src)).map_err(|e| Fail::inval(e.to_string()))?;
        Ok(0)
    })
}

/// A C buffer as a slice (an empty one for `len == 0`, whatever `ptr`).
///
/// # Safety
///
/// `ptr` is valid for reads of `len` bytes, unchanged for `'a`, when `len > 0`.
pub(crate) unsafe fn bytes<'a>(ptr: *const c_void, len: usize) -> Result<&'a [u8], Fail> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Fail::inval("null data pointer"));
    }
    // SAFETY: not null; the caller promises `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

fn finish(p: *mut ringtrace_producer, flag: c_int, commit: bool) -> c_int {
    call(|| {
        // SAFETY: the extern callers forward their callers' promise about `p`.
        let h = unsafe { guard::get_mut(p) }?;
        let w = wakeup(flag)?;
        let res =
            h.state.open.take().ok_or_else(|| Fail::inval("no open reservation (committed or discarded already?)"))?;
        if commit {
            with_res!(res, r => r.commit_with(w));
        } else {
            with_res!(res, r => r.discard_with(w));
        }
        Ok(0)
    })
}

/// Publishes the open reservation's record. `wakeup` is one of `RINGTRACE_WAKEUP_*`.
///
/// Returns 0, or -EINVAL (null handle, bad flag, or no open reservation: a second
/// commit).
///
/// Threads: one thread at a time per producer handle.
///
/// # Safety
///
/// `p` is NULL or a producer handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_commit(p: *mut ringtrace_producer, wakeup: c_int) -> c_int {
    finish(p, wakeup, true)
}

/// Gives the open reservation's space up: the consumer skips it.
///
/// Returns 0, or -EINVAL (null handle, bad flag, or no open reservation).
///
/// Threads: one thread at a time per producer handle.
///
/// # Safety
///
/// `p` is NULL or a producer handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_discard(p: *mut ringtrace_producer, wakeup: c_int) -> c_int {
    finish(p, wakeup, false)
}

fn output(p: *mut ringtrace_producer, data: *const c_void, len: usize, flag: c_int, wait: Option<c_int>) -> c_int {
    call(|| {
        // SAFETY: the extern callers forward their callers' promise about `p`.
        let h = unsafe { guard::get_mut(p) }?;
        // SAFETY: the extern callers forward their callers' promise about `data`.
        let data = unsafe { bytes(data, len) }?;
        let w = wakeup(flag)?;
        match (h.state.producer()?, wait) {
            (AnyProducer::MpscDiscard(x), None) => x.output(data, w)?,
            (AnyProducer::SpscDiscard(x), None) => x.output(data, w)?,
            (AnyProducer::MpscDiscard(x), Some(ms)) => x.output_wait(data, w, guard::timeout(ms))?,
            (AnyProducer::SpscDiscard(x), Some(ms)) => x.output_wait(data, w, guard::timeout(ms))?,
            (AnyProducer::MpscOverwrite(x), _) => x.output(data, w)?,
            (AnyProducer::SpscOverwrite(x), _) => x.output(data, w)?,
        }
        Ok(0)
    })
}

/// Reserves, copies `len` bytes from `data` and commits: one call.
///
/// Returns 0, or -EINVAL (null argument, bad flag, a reservation open), -ENOSPC,
/// -EMSGSIZE (as `ringtrace_reserve`).
///
/// Threads: one thread at a time per producer handle; different producer handles
/// of one ring: any threads.
///
/// # Safety
///
/// `p` is NULL or a producer handle; `data` is valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_output(
    p: *mut ringtrace_producer,
    data: *const c_void,
    len: usize,
    wakeup: c_int,
) -> c_int {
    output(p, data, len, wakeup, None)
}

/// `ringtrace_output`, waiting up to `timeout_ms` (-1: no limit) for room in a discard
/// ring (an overwrite ring never waits: it makes room).
///
/// Returns 0, or -ETIMEDOUT (no room in time: counted as lost), -EPIPE (the ring is
/// full and its consumer is gone), and the errors of `ringtrace_output`.
///
/// Threads: one thread at a time per producer handle; different producer handles
/// of one ring: any threads.
///
/// # Safety
///
/// `p` is NULL or a producer handle; `data` is valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_output_wait(
    p: *mut ringtrace_producer,
    data: *const c_void,
    len: usize,
    wakeup: c_int,
    timeout_ms: c_int,
) -> c_int {
    output(p, data, len, wakeup, Some(timeout_ms))
}
