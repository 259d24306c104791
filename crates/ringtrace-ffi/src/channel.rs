//! Channels: per-thread rings with timestamps, read merged in time order.

use std::ffi::{c_int, c_void};

use ringtrace::channel::{ChannelProducer, ChannelRecord};
use ringtrace::clock::{BestClock, Monotonic, NoClock, Tsc};
use ringtrace::config::{Discard, Overwrite};
use ringtrace::{Channel, ChannelReader};

use crate::consumer::count;
use crate::error::{Fail, Stopped};
use crate::guard::{self, call, call_or, handle};
use crate::producer::{bytes, wakeup};
use crate::ring::{RINGTRACE_DISCARD, RINGTRACE_OVERWRITE};

/// No timestamps (`clock`).
pub const RINGTRACE_CLOCK_NONE: c_int = 0;
/// The invariant TSC, calibrated once per process (`clock`; -ENOTSUP without one).
pub const RINGTRACE_CLOCK_TSC: c_int = 1;
/// `CLOCK_MONOTONIC` (`clock`).
pub const RINGTRACE_CLOCK_MONOTONIC: c_int = 2;
/// The TSC where it is invariant, `CLOCK_MONOTONIC` elsewhere (`clock`).
pub const RINGTRACE_CLOCK_BEST: c_int = 3;

/// A channel record callback: `producer` is the producer's number in the channel,
/// `timestamp_ns` its timestamp (`CLOCK_MONOTONIC` time base; 0 without a clock);
/// `data` and `len` are valid only during the call. Nonzero stops (-ECANCELED).
pub type ringtrace_channel_record_fn = Option<
    unsafe extern "C" fn(ctx: *mut c_void, producer: u32, timestamp_ns: u64, data: *const c_void, len: usize) -> c_int,
>;

fn deliver(f: ringtrace_channel_record_fn, ctx: *mut c_void, rec: ChannelRecord<'_>) -> Result<(), Stopped> {
    let Some(f) = f else { return Ok(()) };
    // SAFETY: the C caller passed `f` and `ctx` to be called this way; the record's
    // bytes are valid for the duration of the call.
    match unsafe { f(ctx, rec.producer, rec.timestamp, rec.data.as_ptr().cast(), rec.data.len()) } {
        0 => Ok(()),
        n => Err(Stopped(n)),
    }
}

/// Declares an enum over the eight `(mode, clock)` combinations of `$ty`, and a macro
/// `$with` running an expression on whichever is inside.
macro_rules! any_channel {
    ($name:ident, $ty:ident, $with:ident) => {
        #[derive(Debug)]
        pub(crate) enum $name {
            DiscardNone($ty<Discard, NoClock>),
            DiscardTsc($ty<Discard, Tsc>),
            DiscardMonotonic($ty<Discard, Monotonic>),
            DiscardBest($ty<Discard, BestClock>),
            OverwriteNone($ty<Overwrite, NoClock>),
            OverwriteTsc($ty<Overwrite, Tsc>),
            OverwriteMonotonic($ty<Overwrite, Monotonic>),
            OverwriteBest($ty<Overwrite, BestClock>),
        }
        macro_rules! $with {
            ($e:expr, $x:ident => $body:expr) => {
                match $e {
                    $name::DiscardNone($x) => $body,
                    $name::DiscardTsc($x) => $body,
                    $name::DiscardMonotonic($x) => $body,
                    $name::DiscardBest($x) => $body,
                    $name::OverwriteNone($x) => $body,
                    $name::OverwriteTsc($x) => $body,
                    $name::OverwriteMonotonic($x) => $body,
                    $name::OverwriteBest($x) => $body,
                }
            };
        }
    };
}
any_channel!(AnyChannel, Channel, with_channel);
any_channel!(AnyReader, ChannelReader, with_reader);
any_channel!(AnyProducer, ChannelProducer, with_producer);

/// `$to` made from the channel inside `$e`, variant for variant (its reader, or a
/// producer, of the same mode and clock).
macro_rules! map_channel {
    ($e:expr, $to:ident, $c:ident => $make:expr) => {
        match $e {
            AnyChannel::DiscardNone($c) => $to::DiscardNone($make),
            AnyChannel::DiscardTsc($c) => $to::DiscardTsc($make),
            AnyChannel::DiscardMonotonic($c) => $to::DiscardMonotonic($make),
            AnyChannel::DiscardBest($c) => $to::DiscardBest($make),
            AnyChannel::OverwriteNone($c) => $to::OverwriteNone($make),
            AnyChannel::OverwriteTsc($c) => $to::OverwriteTsc($make),
            AnyChannel::OverwriteMonotonic($c) => $to::OverwriteMonotonic($make),
            AnyChannel::OverwriteBest($c) => $to::OverwriteBest($make),
        }
    };
}

/// The channel of `$mode` (`RINGTRACE_DISCARD`/`RINGTRACE_OVERWRITE`) and `$clock`
/// (`RINGTRACE_CLOCK_*`) as an [`AnyChannel`]: `$make` runs with `$b` bound to that
/// channel type's `builder` and `$c` to its clock (an invalid pair is `-EINVAL`). The
/// one place for the eight combinations, for private channels and channel files alike.
macro_rules! make_channel {
    ($mode:expr, $clock:expr, $b:ident, $c:ident => $make:expr) => {
        match ($mode, $clock) {
            (RINGTRACE_DISCARD, RINGTRACE_CLOCK_NONE) => {
                let ($b, $c) = (Channel::<Discard, NoClock>::builder, NoClock);
                AnyChannel::DiscardNone($make)
            }
            (RINGTRACE_DISCARD, RINGTRACE_CLOCK_TSC) => {
                let ($b, $c) = (Channel::<Discard, Tsc>::builder, Tsc::shared()?);
                AnyChannel::DiscardTsc($make)
            }
            (RINGTRACE_DISCARD, RINGTRACE_CLOCK_MONOTONIC) => {
                let ($b, $c) = (Channel::<Discard, Monotonic>::builder, Monotonic);
                AnyChannel::DiscardMonotonic($make)
            }
            (RINGTRACE_DISCARD, RINGTRACE_CLOCK_BEST) => {
                let ($b, $c) = (Channel::<Discard, BestClock>::builder, BestClock::new());
                AnyChannel::DiscardBest($make)
            }
            (RINGTRACE_OVERWRITE, RINGTRACE_CLOCK_NONE) => {
                let ($b, $c) = (Channel::<Overwrite, NoClock>::builder, NoClock);
                AnyChannel::OverwriteNone($make)
            }
            (RINGTRACE_OVERWRITE, RINGTRACE_CLOCK_TSC) => {
                let ($b, $c) = (Channel::<Overwrite, Tsc>::builder, Tsc::shared()?);
                AnyChannel::OverwriteTsc($make)
            }
            (RINGTRACE_OVERWRITE, RINGTRACE_CLOCK_MONOTONIC) => {
                let ($b, $c) = (Channel::<Overwrite, Monotonic>::builder, Monotonic);
                AnyChannel::OverwriteMonotonic($make)
            }
            (RINGTRACE_OVERWRITE, RINGTRACE_CLOCK_BEST) => {
                let ($b, $c) = (Channel::<Overwrite, BestClock>::builder, BestClock::new());
                AnyChannel::OverwriteBest($make)
            }
            (m, c) => return Err(Fail::inval(format!("invalid channel mode {m} or clock {c}"))),
        }
    };
}
pub(crate) use make_channel;

/// A channel handle.
#[derive(Debug)]
pub struct ringtrace_channel {
    pub(crate) channel: AnyChannel,
}
handle!(ringtrace_channel, 0x5254_4348_414e_0005, "channel");

/// A channel reader handle.
#[derive(Debug)]
pub struct ringtrace_channel_reader {
    reader: AnyReader,
}
handle!(ringtrace_channel_reader, 0x5254_4352_4452_0006, "channel reader");

/// Creates a channel private to this process: each thread that writes gets its own
/// single-producer ring of `capacity_per_producer` bytes (a power of two from 4096),
/// in `mode` (`RINGTRACE_DISCARD`/`RINGTRACE_OVERWRITE`), its records stamped with
/// `clock` (`RINGTRACE_CLOCK_*`).
///
/// Returns 0, or -EINVAL (bad capacity, mode or clock), -ENOTSUP (`RINGTRACE_CLOCK_TSC`
/// without an invariant TSC).
///
/// Threads: any thread.
///
/// # Safety
///
/// `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_new(
    capacity_per_producer: u64,
    mode: c_int,
    clock: c_int,
    out: *mut *mut ringtrace_channel,
) -> c_int {
    call(|| {
        let out = guard::out_ptr(out)?;
        let cap = capacity_per_producer;
        let channel = make_channel!(mode, clock, builder, clock => builder(cap).build(clock)?);
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_channel { channel }) }
    })
}

/// Frees a channel handle (NULL is ignored). Readers made from it stay valid.
///
/// Threads: no other thread may be using this handle.
///
/// # Safety
///
/// `ch` is NULL or a channel handle not used after this call.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_free(ch: *mut ringtrace_channel) {
    // SAFETY: the caller's promise about `ch`.
    call_or((), || unsafe { guard::free(ch) })
}

/// Writes one record through the calling thread's ring of the channel (made at the
/// thread's first write; given up when the thread exits).
///
/// Returns 0, or -EINVAL, -ENOSPC (that ring full: counted as lost), -EMSGSIZE.
///
/// Threads: any threads, concurrently.
///
/// # Safety
///
/// `ch` is NULL or a channel handle; `data` is valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_output(
    ch: *mut ringtrace_channel,
    data: *const c_void,
    len: usize,
    wakeup_flag: c_int,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promises about `ch` and `data`.
        let (h, data) = unsafe { (guard::get(ch)?, bytes(data, len)?) };
        let w = wakeup(wakeup_flag)?;
        with_channel!(&h.channel, c => c.output(data, w))?;
        Ok(0)
    })
}

/// A channel producer handle: a ring of the channel held by the caller, for one
/// thread at a time.
#[derive(Debug)]
pub struct ringtrace_channel_producer {
    producer: AnyProducer,
}
handle!(ringtrace_channel_producer, 0x5254_4350_524f_0008, "channel producer");

/// Makes a producer of the channel: a ring of its own, written with
/// `ringtrace_channel_producer_output`. This is the hot path's form: it skips the
/// lookup of the calling thread's ring that `ringtrace_channel_output` makes on every
/// call (keep one handle per thread, as LTTng keeps a buffer per CPU). Free it with
/// `ringtrace_channel_producer_free`; its ring stays readable, as an exited thread's.
///
/// Returns 0, or -EINVAL, -EBUSY (the channel has as many producers as it takes).
///
/// Threads: any thread; the handle is then used by one thread at a time.
///
/// # Safety
///
/// `ch` is NULL or a channel handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_producer_new(
    ch: *mut ringtrace_channel,
    out: *mut *mut ringtrace_channel_producer,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ch`.
        let h = unsafe { guard::get(ch) }?;
        let out = guard::out_ptr(out)?;
        let producer = map_channel!(&h.channel, AnyProducer, c => c.producer()?);
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_channel_producer { producer }) }
    })
}

/// Frees a channel producer handle (NULL is ignored).
///
/// Threads: no other thread may be using this handle.
///
/// # Safety
///
/// `p` is NULL or a channel producer handle not used after this call.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_producer_free(p: *mut ringtrace_channel_producer) {
    // SAFETY: the caller's promise about `p`.
    call_or((), || unsafe { guard::free(p) })
}

/// Writes one record into the producer's ring, stamped with the channel's clock: the
/// same as `ringtrace_channel_output`, through the handle.
///
/// Returns 0, or -EINVAL, -ENOSPC (discard channel full, or an overwrite channel
/// that could not make room: counted as lost), -EMSGSIZE.
///
/// Threads: one thread at a time per handle; different handles: any threads.
///
/// # Safety
///
/// `p` is NULL or a channel producer handle; `data` is valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_producer_output(
    p: *mut ringtrace_channel_producer,
    data: *const c_void,
    len: usize,
    wakeup_flag: c_int,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promises about `p` and `data`.
        let (h, data) = unsafe { (guard::get_mut(p)?, bytes(data, len)?) };
        let w = wakeup(wakeup_flag)?;
        with_producer!(&mut h.producer, x => x.output(data, w))?;
        Ok(0)
    })
}

/// Makes the channel's reader (one at a time per channel); free it with
/// `ringtrace_channel_reader_free`.
///
/// Returns 0, or -EINVAL, -EBUSY (the channel has a reader).
///
/// Threads: any thread.
///
/// # Safety
///
/// `ch` is NULL or a channel handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_reader_new(
    ch: *mut ringtrace_channel,
    out: *mut *mut ringtrace_channel_reader,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ch`.
        let h = unsafe { guard::get(ch) }?;
        let out = guard::out_ptr(out)?;
        let reader = map_channel!(&h.channel, AnyReader, c => c.reader()?);
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_channel_reader { reader }) }
    })
}

/// Frees a channel reader (NULL is ignored).
///
/// Threads: no other thread may be using this handle.
///
/// # Safety
///
/// `r` is NULL or a channel reader handle not used after this call.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_reader_free(r: *mut ringtrace_channel_reader) {
    // SAFETY: the caller's promise about `r`.
    call_or((), || unsafe { guard::free(r) })
}

/// Waits up to `timeout_ms` (-1: no limit) for records (sleeping on the channel's
/// doorbell, which writers ring when they commit: a channel file's is a futex word in
/// the file, which writers in any process wake; a version 1 channel file's reader, whose
/// writers never ring, looks every millisecond), then delivers those due, merged in
/// timestamp order.
///
/// Returns the number delivered (0 on timeout), or -EINVAL, -ECANCELED.
///
/// Threads: one thread at a time per reader (writers: any threads).
///
/// # Safety
///
/// `r` is NULL or a channel reader handle; `fn` is NULL or a function callable with
/// `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_poll(
    r: *mut ringtrace_channel_reader,
    timeout_ms: c_int,
    r#fn: ringtrace_channel_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `r`.
        let h = unsafe { guard::get_mut(r) }?;
        let t = guard::timeout(timeout_ms);
        let n = with_reader!(&mut h.reader, x => x.poll(t, |rec| deliver(r#fn, ctx, rec)))?;
        Ok(count(n))
    })
}

/// Delivers every record in the channel's rings in timestamp order, until they are
/// empty (for a channel whose writers are done or quiet).
///
/// Returns the number delivered, or -EINVAL, -ECANCELED.
///
/// Threads: one thread at a time per reader.
///
/// # Safety
///
/// `r` is NULL or a channel reader handle; `fn` is NULL or a function callable with
/// `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_drain(
    r: *mut ringtrace_channel_reader,
    r#fn: ringtrace_channel_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `r`.
        let h = unsafe { guard::get_mut(r) }?;
        let n = with_reader!(&mut h.reader, x => x.drain(|rec| deliver(r#fn, ctx, rec)))?;
        Ok(count(n))
    })
}

/// Snapshots every writer's ring of an overwrite channel and calls `fn` for each
/// record in timestamp order (newest first if `newest_first` is nonzero).
///
/// Returns the number delivered, or -EINVAL (null argument, or a discard channel),
/// -ECANCELED.
///
/// Threads: any thread, concurrently with the writers.
///
/// # Safety
///
/// `ch` is NULL or a channel handle; `fn` is NULL or a function callable with `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_snapshot_foreach(
    ch: *mut ringtrace_channel,
    newest_first: c_int,
    r#fn: ringtrace_channel_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ch`.
        let h = unsafe { guard::get(ch) }?;
        let snap = match &h.channel {
            AnyChannel::OverwriteNone(c) => c.snapshot()?,
            AnyChannel::OverwriteTsc(c) => c.snapshot()?,
            AnyChannel::OverwriteMonotonic(c) => c.snapshot()?,
            AnyChannel::OverwriteBest(c) => c.snapshot()?,
            _ => return Err(Fail::inval("snapshots need an overwrite channel (RINGTRACE_OVERWRITE)")),
        };
        let mut n = 0usize;
        let mut visit = |rec| {
            n += 1;
            deliver(r#fn, ctx, rec).map_err(|s| Fail::new(libc::ECANCELED, s.to_string()))
        };
        if newest_first != 0 {
            snap.iter().rev().try_for_each(&mut visit)?;
        } else {
            snap.iter().try_for_each(&mut visit)?;
        }
        Ok(count(n))
    })
}
