//! Rings: one opaque `ringtrace_ring` over the four `RingBuf<K, M>` combinations.

use std::ffi::{c_char, c_int};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Mutex;

use ringtrace::config::{Discard, Mpsc, Overwrite, Spsc, WakeupPolicy};
use ringtrace::inspect::{RingFile, RingKind, RingMode};
use ringtrace::{Access, Builder, Error, RingBuf, Stats};

use crate::error::Fail;
use crate::guard::{self, call, call_or, handle};
use crate::pause::PauseHold;

mod args;
pub(crate) use args::{dup_fd, path_arg, read_sized};

/// Multi-producer ring (`kind`).
pub const RINGTRACE_MPSC: c_int = 0;
/// Single-producer ring (`kind`).
pub const RINGTRACE_SPSC: c_int = 1;
/// A full ring refuses new records (`mode`).
pub const RINGTRACE_DISCARD: c_int = 0;
/// A full ring overwrites its oldest records: a flight recorder (`mode`).
pub const RINGTRACE_OVERWRITE: c_int = 1;
/// Attach as producer and consumer (`access`).
pub const RINGTRACE_ACCESS_FULL: c_int = 0;
/// Attach for consuming only (`access`).
pub const RINGTRACE_ACCESS_CONSUMER: c_int = 1;

/// Default capacity when `ringtrace_ring_opts.capacity` is 0: 1 MiB.
pub const RINGTRACE_DEFAULT_CAPACITY: u64 = 1 << 20;

/// Options of a new ring. libbpf-style: set `sz` to `sizeof(struct ringtrace_ring_opts)`
/// (lets the struct grow without breaking old callers); zeroed fields take defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ringtrace_ring_opts {
    /// `sizeof(struct ringtrace_ring_opts)`.
    pub sz: usize,
    /// Data area in bytes: a power of two from 4096 (0: 1 MiB).
    pub capacity: u64,
    /// `RINGTRACE_MPSC` or `RINGTRACE_SPSC`.
    pub kind: c_int,
    /// `RINGTRACE_DISCARD` or `RINGTRACE_OVERWRITE`.
    pub mode: c_int,
    /// Wake the consumer once this many bytes are pending (0: the default policy: when it
    /// has caught up in discard mode, only forced wakeups in overwrite mode).
    pub watermark: u64,
    /// Bytes the consumer hands back at a time (0: the default, a quarter ring).
    pub consumer_batch: u64,
}

/// Counters and positions of a ring: mirrors `ringtrace::Stats` (the same fields, by
/// the same names, in the same order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ringtrace_stats {
    /// Records committed by producers.
    pub committed: u64,
    /// Records discarded by producers.
    pub discarded: u64,
    /// Reservations refused for want of room (records lost).
    pub lost: u64,
    /// Of `lost`: refused because the ring was paused.
    pub refused_paused: u64,
    /// Overwrite mode: committed records overwritten.
    pub overwritten: u64,
    /// Overwrite mode: of `overwritten`, those the consumer never read.
    pub overwritten_unread: u64,
    /// Records whose producer process died before finishing them.
    pub dead: u64,
    /// Overwrite mode: position of the oldest record still in the ring.
    pub overwrite_pos: u64,
    /// Reservations refused because the record was larger than the ring takes.
    pub too_large: u64,
    /// Committed records the consumer delivered.
    pub consumed: u64,
    /// Discarded records the consumer stepped over.
    pub skipped: u64,
    /// Consumer position (bytes ever consumed).
    pub consumer_pos: u64,
    /// Producer position (bytes ever reserved).
    pub producer_pos: u64,
    /// Bytes reserved and not yet consumed.
    pub available: u64,
    /// Data area size in bytes.
    pub capacity: u64,
}

impl From<Stats> for ringtrace_stats {
    fn from(s: Stats) -> Self {
        ringtrace_stats {
            committed: s.committed,
            discarded: s.discarded,
            lost: s.lost,
            refused_paused: s.refused_paused,
            overwritten: s.overwritten,
            overwritten_unread: s.overwritten_unread,
            dead: s.dead,
            overwrite_pos: s.overwrite_pos,
            too_large: s.too_large,
            consumed: s.consumed,
            skipped: s.skipped,
            consumer_pos: s.consumer_pos,
            producer_pos: s.producer_pos,
            available: s.available,
            capacity: s.capacity,
        }
    }
}

/// One of the four ring types.
#[derive(Clone, Debug)]
pub(crate) enum AnyRing {
    MpscDiscard(RingBuf<Mpsc, Discard>),
    SpscDiscard(RingBuf<Spsc, Discard>),
    MpscOverwrite(RingBuf<Mpsc, Overwrite>),
    SpscOverwrite(RingBuf<Spsc, Overwrite>),
}

/// Runs `$body` with `$r` bound to the ring inside an [`AnyRing`], whatever its type.
macro_rules! with_ring {
    ($ring:expr, $r:ident => $body:expr) => {
        match $ring {
            $crate::ring::AnyRing::MpscDiscard($r) => $body,
            $crate::ring::AnyRing::SpscDiscard($r) => $body,
            $crate::ring::AnyRing::MpscOverwrite($r) => $body,
            $crate::ring::AnyRing::SpscOverwrite($r) => $body,
        }
    };
}
#[allow(unused_imports)]
pub(crate) use with_ring;

/// A ring handle. Producers, consumers and snapshots made from it hold their own
/// references to the ring, so it may be freed before them.
#[derive(Debug)]
pub struct ringtrace_ring {
    pub(crate) ring: AnyRing,
    /// The pause this handle holds (`ringtrace_pause` .. `ringtrace_resume`).
    pub(crate) pause: Mutex<Option<PauseHold>>,
}
handle!(ringtrace_ring, 0x5254_5249_4e47_0001, "ring");

impl ringtrace_ring {
    pub(crate) fn new(ring: AnyRing) -> Self {
        ringtrace_ring { ring, pause: Mutex::new(None) }
    }
}

/// Reads the caller's options (`NULL`: all defaults), copying no more than `sz` bytes.
///
/// # Safety
///
/// `opts` is null or points to at least `opts->sz` readable bytes.
unsafe fn read_opts(opts: *const ringtrace_ring_opts) -> Result<ringtrace_ring_opts, Fail> {
    // SAFETY: forwarded from the caller.
    let mut o = unsafe { read_sized(opts, "ringtrace_ring_opts") }?.unwrap_or_default();
    if o.capacity == 0 {
        o.capacity = RINGTRACE_DEFAULT_CAPACITY;
    }
    Ok(o)
}

fn configure<K: ringtrace::config::ProducerKind, M: ringtrace::config::Mode>(o: &ringtrace_ring_opts) -> Builder<K, M> {
    let mut b = RingBuf::<K, M>::builder(o.capacity);
    if o.watermark != 0 {
        b = b.wakeup_policy(WakeupPolicy::Watermark(o.watermark));
    }
    if o.consumer_batch != 0 {
        b = b.consumer_batch(o.consumer_batch);
    }
    b
}

/// Builds the ring the options ask for, with `make` (build, build_shared or create).
fn build(o: &ringtrace_ring_opts, make: &dyn Fn(Builders) -> Result<AnyRing, Error>) -> Result<AnyRing, Fail> {
    let b = match (o.kind, o.mode) {
        (RINGTRACE_MPSC, RINGTRACE_DISCARD) => Builders::MpscDiscard(configure(o)),
        (RINGTRACE_SPSC, RINGTRACE_DISCARD) => Builders::SpscDiscard(configure(o)),
        (RINGTRACE_MPSC, RINGTRACE_OVERWRITE) => Builders::MpscOverwrite(configure(o)),
        (RINGTRACE_SPSC, RINGTRACE_OVERWRITE) => Builders::SpscOverwrite(configure(o)),
        (k, m) => return Err(Fail::inval(format!("invalid ring kind {k} or mode {m}"))),
    };
    Ok(make(b)?)
}

/// A configured builder of one of the four ring types.
enum Builders {
    MpscDiscard(Builder<Mpsc, Discard>),
    SpscDiscard(Builder<Spsc, Discard>),
    MpscOverwrite(Builder<Mpsc, Overwrite>),
    SpscOverwrite(Builder<Spsc, Overwrite>),
}

macro_rules! with_builder {
    ($b:expr, $x:ident => $body:expr) => {
        match $b {
            Builders::MpscDiscard($x) => AnyRing::MpscDiscard($body?),
            Builders::SpscDiscard($x) => AnyRing::SpscDiscard($body?),
            Builders::MpscOverwrite($x) => AnyRing::MpscOverwrite($body?),
            Builders::SpscOverwrite($x) => AnyRing::SpscOverwrite($body?),
        }
    };
}

/// Attaches to the ring in `fd` (ring file or memfd), of the kind and mode its header
/// says.
fn attach(fd: OwnedFd, access: c_int) -> Result<AnyRing, Fail> {
    let access = match access {
        RINGTRACE_ACCESS_FULL => Access::Full,
        RINGTRACE_ACCESS_CONSUMER => Access::Consumer,
        a => return Err(Fail::inval(format!("invalid access {a}"))),
    };
    let file = File::from(fd.try_clone()?);
    let header = RingFile::from_source(&file)?.header().clone();
    Ok(match (header.kind, header.mode) {
        (RingKind::Mpsc, RingMode::Discard) => AnyRing::MpscDiscard(RingBuf::from_fd(fd, access)?),
        (RingKind::Spsc, RingMode::Discard) => AnyRing::SpscDiscard(RingBuf::from_fd(fd, access)?),
        (RingKind::Mpsc, RingMode::Overwrite) => AnyRing::MpscOverwrite(RingBuf::from_fd(fd, access)?),
        (RingKind::Spsc, RingMode::Overwrite) => AnyRing::SpscOverwrite(RingBuf::from_fd(fd, access)?),
    })
}

use std::os::unix::fs::OpenOptionsExt;

/// Creates a ring private to this process, in memory.
///
/// `opts` may be NULL (a 1 MiB multi-producer discard ring). Stores the new handle in
/// `*out`; free it with `ringtrace_ring_free`.
///
/// Returns 0, or -EINVAL (bad options, null `out`), -ENOMEM or another -errno.
///
/// Threads: any thread.
///
/// # Safety
///
/// `opts` is NULL or points to `opts->sz` readable bytes; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_ring_new(opts: *const ringtrace_ring_opts, out: *mut *mut ringtrace_ring) -> c_int {
    call(|| {
        let out = guard::out_ptr(out)?;
        // SAFETY: the caller's promise about `opts`.
        let o = unsafe { read_opts(opts) }?;
        let ring = build(&o, &|b| Ok(with_builder!(b, x => x.build())))?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_ring::new(ring)) }
    })
}

/// Creates a ring file at `path` (which must not exist) that other processes attach to
/// with `ringtrace_ring_open`. Every option is checked before the file is made: a call
/// refused with -EINVAL creates no file.
///
/// Returns 0, or -EINVAL (bad options), -EEXIST (the file exists), or another -errno.
///
/// Threads: any thread.
///
/// # Safety
///
/// `path` is a NUL-terminated string; `opts` is NULL or points to `opts->sz` readable
/// bytes; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_ring_create(
    path: *const c_char,
    opts: *const ringtrace_ring_opts,
    out: *mut *mut ringtrace_ring,
) -> c_int {
    call(|| {
        let out = guard::out_ptr(out)?;
        // SAFETY: the caller's promises about `path` and `opts`.
        let (path, o) = unsafe { (path_arg(path)?, read_opts(opts)?) };
        let ring = build(&o, &|b| Ok(with_builder!(b, x => x.create(path)))).map_err(|e| e.about(path))?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_ring::new(ring)) }
    })
}

/// Attaches to the ring file at `path` (made by `ringtrace_ring_create` in this or
/// another process); its kind and mode are read from the file. `access` is
/// `RINGTRACE_ACCESS_FULL` or `RINGTRACE_ACCESS_CONSUMER` (then producers are refused
/// with -EPERM); the file is opened read-write either way (the consumer writes its
/// position in it).
///
/// Returns 0, or -EINVAL, -ENOENT, -EBADMSG (not a valid ring file), or another -errno.
///
/// Threads: any thread.
///
/// # Safety
///
/// `path` is a NUL-terminated string; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_ring_open(
    path: *const c_char,
    access: c_int,
    out: *mut *mut ringtrace_ring,
) -> c_int {
    call(|| {
        let out = guard::out_ptr(out)?;
        // SAFETY: the caller's promise about `path`.
        let path = unsafe { path_arg(path) }?;
        // Read-write whatever the access (the consumer writes its position), and
        // non-blocking so that a FIFO does not hang the open (it is refused later), as
        // the library's own `RingBuf::open` does.
        let opened = File::options().read(true).write(true).custom_flags(libc::O_NONBLOCK).open(path);
        let fd: OwnedFd = opened.map_err(|e| Fail::from(e).about(path))?.into();
        let ring = attach(fd, access).map_err(|e| e.about(path))?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_ring::new(ring)) }
    })
}

/// Creates a ring in a sealed memfd, to share with other processes: pass
/// `ringtrace_ring_memfd(ring)` to them (inherited across fork/exec, or over a Unix
/// socket) and attach there with `ringtrace_ring_from_fd`.
///
/// Returns 0, or -EINVAL, -ENOMEM, or another -errno.
///
/// Threads: any thread.
///
/// # Safety
///
/// `opts` is NULL or points to `opts->sz` readable bytes; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_ring_new_shared(
    opts: *const ringtrace_ring_opts,
    out: *mut *mut ringtrace_ring,
) -> c_int {
    call(|| {
        let out = guard::out_ptr(out)?;
        // SAFETY: the caller's promise about `opts`.
        let o = unsafe { read_opts(opts) }?;
        let ring = build(&o, &|b| Ok(with_builder!(b, x => x.build_shared())))?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_ring::new(ring)) }
    })
}

/// The ring's memfd or file descriptor (>= 0), owned by the ring handle: valid while
/// `ring` is; `dup` it to keep it longer. Close-on-exec is set: clear it (or `dup2`) to
/// hand it to an exec'd child.
///
/// Returns the descriptor, or -EINVAL (null handle, or a private ring made by
/// `ringtrace_ring_new`).
///
/// Threads: any thread.
///
/// # Safety
///
/// `ring` is NULL or a ring handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_ring_memfd(ring: *const ringtrace_ring) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ring`.
        let h = unsafe { guard::get(ring) }?;
        with_ring!(&h.ring, r => {
            if !r.is_shared() {
                return Err(Fail::inval("a private ring has no descriptor to share (use ringtrace_ring_new_shared)"));
            }
            Ok(r.as_fd().as_raw_fd())
        })
    })
}

/// Attaches to the ring in `fd` (a memfd from `ringtrace_ring_new_shared` received from
/// another process, or a ring file's descriptor). The descriptor is duplicated: the
/// caller keeps `fd` and closes it when it likes.
///
/// Returns 0, or -EINVAL, -EBADF, -EBADMSG (not a ring), or another -errno.
///
/// Threads: any thread.
///
/// # Safety
///
/// `out` is valid for a write. `fd` is any integer (an invalid one gives -EBADF).
#[no_mangle]
pub unsafe extern "C" fn ringtrace_ring_from_fd(fd: c_int, access: c_int, out: *mut *mut ringtrace_ring) -> c_int {
    call(|| {
        let out = guard::out_ptr(out)?;
        let owned = dup_fd(fd)?;
        let ring = attach(owned, access)?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_ring::new(ring)) }
    })
}

/// Frees a ring handle (NULL is ignored). Producers, consumers and snapshots made from it
/// stay valid: they hold their own reference to the ring. A pause this handle holds is
/// ended.
///
/// Threads: no other thread may be using this handle.
///
/// # Safety
///
/// `ring` is NULL or a ring handle not used after this call.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_ring_free(ring: *mut ringtrace_ring) {
    // SAFETY: the caller's promise about `ring`.
    call_or((), || unsafe { guard::free(ring) })
}

/// Fills `*out` with the ring's counters and positions.
///
/// Returns 0, or -EINVAL (null argument).
///
/// Threads: any thread, concurrently with any other call on the ring.
///
/// # Safety
///
/// `ring` is NULL or a ring handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_ring_stats(ring: *const ringtrace_ring, out: *mut ringtrace_stats) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ring`.
        let h = unsafe { guard::get(ring) }?;
        let out = guard::out_ptr(out)?;
        let stats = with_ring!(&h.ring, r => r.stats());
        // SAFETY: `out` is valid for a write (caller).
        unsafe { out.write(stats.into()) };
        Ok(0)
    })
}

/// Stores the largest record payload the ring takes in `*out`: the capacity less 16
/// (the header, and the next header word, which producers keep zeroed). A
/// record this long fits whenever the ring is empty; a longer one is refused with
/// -EMSGSIZE, never waited for.
///
/// Returns 0, or -EINVAL (null argument).
///
/// Threads: any thread.
///
/// # Safety
///
/// `ring` is NULL or a ring handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_ring_max_record_len(ring: *const ringtrace_ring, out: *mut usize) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ring`.
        let h = unsafe { guard::get(ring) }?;
        let out = guard::out_ptr(out)?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { out.write(with_ring!(&h.ring, r => r.max_record_len())) };
        Ok(0)
    })
}

#[cfg(test)]
mod tests;
