//! Channel files from C: a channel whose per-producer rings live in one file that
//! writers in other processes attach to (`ringtrace::Channel::create` and `open`), as
//! LTTng's per-CPU buffers are shared, and every channel's counters.

use std::ffi::{c_char, c_int};
use std::path::Path;

use ringtrace::clock::{BestClock, Monotonic, NoClock, Tsc};
use ringtrace::config::{Discard, Overwrite};
use ringtrace::inspect::channel::ChannelFile;
use ringtrace::inspect::RingMode;
use ringtrace::Channel;

use crate::channel::{
    make_channel, ringtrace_channel, AnyChannel, RINGTRACE_CLOCK_BEST, RINGTRACE_CLOCK_MONOTONIC, RINGTRACE_CLOCK_NONE,
    RINGTRACE_CLOCK_TSC,
};
use crate::error::Fail;
use crate::guard::{self, call};
use crate::ring::{path_arg, RINGTRACE_DISCARD, RINGTRACE_OVERWRITE};

/// A channel's counters: mirrors `ringtrace::channel::ChannelStats` (the same fields,
/// by the same names, in the same order). Fields are only ever added at its end.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct ringtrace_channel_stats {
    /// Producers ever attached (a channel file: its slots, `max_producers`).
    pub producers: u64,
    /// Of them, those gone (a channel file: the slots no live process produces into,
    /// those never used included).
    pub exited: u64,
    /// Records committed.
    pub written: u64,
    /// Reserves refused: records that never entered a ring.
    pub lost: u64,
    /// Overwrite mode: committed records given up to make room.
    pub overwritten: u64,
    /// Overwrite mode: of `overwritten`, the records the live reader never got.
    pub overwritten_unread: u64,
    /// Records the live reader delivered.
    pub read: u64,
    /// Of `read`, records delivered out of timestamp order (committed later than the
    /// reader's slack).
    pub late: u64,
    /// Records of exited producers' rings freed unread to bound what is kept.
    pub freed_unread: u64,
}

/// Creates a channel file at `path` (which must not exist; mode 0600): up to
/// `max_producers` writers, in this process or others that open it with
/// `ringtrace_channel_open`, each get a single-producer ring of
/// `capacity_per_producer` bytes (a power of two from 4096), in `mode`
/// (`RINGTRACE_DISCARD`/`RINGTRACE_OVERWRITE`), their records stamped with `clock`
/// (`RINGTRACE_CLOCK_*`). `ringtrace stat`, `tail` and `snapshot` read it from outside.
/// Every argument is checked before the file is made: a call refused with -EINVAL
/// creates no file.
///
/// Returns 0, or -EINVAL (bad capacity, mode or clock, or `max_producers` not from 1
/// to 4096), -EEXIST, -ENOTSUP
/// (`RINGTRACE_CLOCK_TSC` without an invariant TSC), or another -errno; the message
/// names the file.
///
/// Threads: any thread.
///
/// # Safety
///
/// `path` is a NUL-terminated string; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_create(
    path: *const c_char,
    capacity_per_producer: u64,
    max_producers: u32,
    mode: c_int,
    clock: c_int,
    out: *mut *mut ringtrace_channel,
) -> c_int {
    call(|| {
        let out = guard::out_ptr(out)?;
        // SAFETY: the caller's promise about `path`.
        let path = unsafe { path_arg(path) }?;
        let channel = create(path, capacity_per_producer, max_producers, mode, clock).map_err(|e| e.about(path))?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_channel { channel }) }
    })
}

fn create(path: &Path, cap: u64, max: u32, mode: c_int, clock: c_int) -> Result<AnyChannel, Fail> {
    if !(1..=4096).contains(&max) {
        return Err(Fail::inval(format!("max_producers {max}: a channel file holds 1 to 4096")));
    }
    Ok(make_channel!(mode, clock, builder, clock => builder(cap).max_producers(max).create(path, clock)?))
}

/// Attaches to the channel file at `path` (made by `ringtrace_channel_create` or
/// `ringtrace::Channel::create`, in this or another process); its mode and clock are
/// read from the file. Writers take a free slot each (`ringtrace_channel_output`,
/// `ringtrace_channel_producer_new`); one reader in all processes
/// (`ringtrace_channel_reader_new`) reads every slot merged by time. Only files of
/// this process's user, writable by no other, are opened.
///
/// Returns 0, or -EINVAL, -ENOENT, -EBADMSG (not a channel file, damaged, or another
/// user's or a group- or world-writable file: the message says which), or another
/// -errno; the message names the file.
///
/// Threads: any thread.
///
/// # Safety
///
/// `path` is a NUL-terminated string; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_open(path: *const c_char, out: *mut *mut ringtrace_channel) -> c_int {
    call(|| {
        let out = guard::out_ptr(out)?;
        // SAFETY: the caller's promise about `path`.
        let path = unsafe { path_arg(path) }?;
        let channel = open(path).map_err(|e| e.about(path))?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_channel { channel }) }
    })
}

fn open(path: &Path) -> Result<AnyChannel, Fail> {
    let header = *ChannelFile::open(path)?.header();
    Ok(match (header.mode, header.clock_name()) {
        (RingMode::Discard, "none") => AnyChannel::DiscardNone(Channel::open(path)?),
        (RingMode::Discard, "tsc") => AnyChannel::DiscardTsc(Channel::open(path)?),
        (RingMode::Discard, "mono") => AnyChannel::DiscardMonotonic(Channel::open(path)?),
        (RingMode::Discard, _) => AnyChannel::DiscardBest(Channel::open(path)?),
        (RingMode::Overwrite, "none") => AnyChannel::OverwriteNone(Channel::open(path)?),
        (RingMode::Overwrite, "tsc") => AnyChannel::OverwriteTsc(Channel::open(path)?),
        (RingMode::Overwrite, "mono") => AnyChannel::OverwriteMonotonic(Channel::open(path)?),
        (RingMode::Overwrite, _) => AnyChannel::OverwriteBest(Channel::open(path)?),
    })
}

/// The channel's counters into `*out` (in a channel file, of every process's writers;
/// `read` and `late` of this process's reader).
///
/// Returns 0, or -EINVAL.
///
/// Threads: any thread, concurrently with writers and the reader (each counter is a
/// value it had during the call).
///
/// # Safety
///
/// `ch` is NULL or a channel handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_channel_get_stats(
    ch: *const ringtrace_channel,
    out: *mut ringtrace_channel_stats,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ch`.
        let h = unsafe { guard::get(ch) }?;
        let out = guard::out_ptr(out)?;
        let s = match &h.channel {
            AnyChannel::DiscardNone(c) => c.stats(),
            AnyChannel::DiscardTsc(c) => c.stats(),
            AnyChannel::DiscardMonotonic(c) => c.stats(),
            AnyChannel::DiscardBest(c) => c.stats(),
            AnyChannel::OverwriteNone(c) => c.stats(),
            AnyChannel::OverwriteTsc(c) => c.stats(),
            AnyChannel::OverwriteMonotonic(c) => c.stats(),
            AnyChannel::OverwriteBest(c) => c.stats(),
        };
        let stats = ringtrace_channel_stats {
            producers: s.producers,
            exited: s.exited,
            written: s.written,
            lost: s.lost,
            overwritten: s.overwritten,
            overwritten_unread: s.overwritten_unread,
            read: s.read,
            late: s.late,
            freed_unread: s.freed_unread,
        };
        // SAFETY: `out` is valid for a write (caller).
        unsafe { out.write(stats) };
        Ok(0)
    })
}
