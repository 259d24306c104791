//! Recorders from C: the per-thread flight recorder or stream of `ringtrace-tracing`,
//! made, dumped, counted and finished from C. Events and spans go into them through
//! [`events`](crate::events); a dump on a signal through [`signal`](crate::signal).

use std::ffi::{c_char, c_int};
use std::path::Path;
use std::sync::{Arc, Mutex};

use ringtrace_tracing::{Builder, Emitter, Recorder};

use crate::error::Fail;
use crate::guard::{self, call, handle};
use crate::ring::{path_arg, read_sized};
use crate::shape::Shapes;
use crate::signal::{self, SignalDump};

/// Options of a new recorder. libbpf-style: set `sz` to
/// `sizeof(struct ringtrace_recorder_opts)`; zeroed fields take defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ringtrace_recorder_opts {
    /// `sizeof(struct ringtrace_recorder_opts)`.
    pub sz: usize,
    /// Each thread's ring in bytes: a power of two from 4096 (0: 1 MiB). A flight
    /// recorder keeps about this much of each thread's newest records.
    pub per_thread_bytes: u64,
    /// Flight recorder in a directory: threads that can hold a ring at once, 1 to 4096
    /// (0: 256; past 4096 refused whatever the recorder). A thread that finds every
    /// ring taken records nothing, counted in `no_ring`; a thread's ring is free again
    /// when it exits.
    pub max_threads: u32,
    /// A record's largest size in bytes, at least 64 (0: 4096, or what a smaller ring
    /// holds): values past it are dropped, and the record says how many.
    pub max_record_bytes: u32,
    /// A text or bytes value's largest size, 1 to 65535 (0: 1024): longer ones are cut
    /// (text on a UTF-8 character boundary) and marked cut.
    pub max_value_bytes: u32,
    /// Nonzero: a recorder directory's files left by an earlier run are removed first
    /// (else making the recorder fails with -EEXIST).
    pub replace_existing: u32,
}

/// A recorder's counters: mirrors `ringtrace_tracing::Stats` (the same fields, by the
/// same names, in the same order). Fields are only ever added at its end.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ringtrace_recorder_stats {
    /// Threads that wrote.
    pub threads: u64,
    /// Records committed into the rings (span records included).
    pub written: u64,
    /// Records a thread's ring refused (full, in a stream); each thread writes the count
    /// into its ring before its next record.
    pub lost: u64,
    /// Of `lost`, those whose count no ring holds yet.
    pub unreported: u64,
    /// Records of threads that found no free ring (recorder directory full).
    pub no_ring: u64,
    /// Records emitted while a thread was exiting.
    pub teardown: u64,
    /// Records emitted while the thread's state was in use (never expected).
    pub busy: u64,
    /// Records written with a value cut or dropped at the size bounds.
    pub cut: u64,
    /// Flight recorder: records given up to make room for newer ones.
    pub overwritten: u64,
    /// Stream: records written into the trace file.
    pub drained: u64,
}

impl From<ringtrace_tracing::Stats> for ringtrace_recorder_stats {
    fn from(s: ringtrace_tracing::Stats) -> Self {
        ringtrace_recorder_stats {
            threads: s.threads,
            written: s.written,
            lost: s.lost,
            unreported: s.unreported,
            no_ring: s.no_ring,
            teardown: s.teardown,
            busy: s.busy,
            cut: s.cut,
            overwritten: s.overwritten,
            drained: s.drained,
        }
    }
}

/// A recorder handle: events, spans, dumps and stats from any thread.
pub struct ringtrace_recorder {
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) emitter: Emitter,
    /// Where each thread's callsite cache says which recorder it holds numbers for.
    pub(crate) id: u64,
    /// Each callsite's kind and fields at its first record.
    pub(crate) shapes: Shapes,
    pub(crate) signal: Mutex<Option<SignalDump>>,
}
handle!(ringtrace_recorder, 0x5254_5245_4344_000a, "recorder");

impl std::fmt::Debug for ringtrace_recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ringtrace_recorder").field("recorder", &self.recorder).finish()
    }
}

/// A `ringtrace_tracing` error, mapped to a code: a file's failure by its errno, a
/// bad option `-EINVAL`, an existing file `-EEXIST`, an unsafe directory `-EPERM`.
pub(crate) fn fail(e: ringtrace_tracing::Error) -> Fail {
    use ringtrace_tracing::Error as E;
    let code = match e {
        E::Ring(r) => return Fail::from(r),
        E::Config(_) | E::NotFlight => libc::EINVAL,
        E::Exists(_) => libc::EEXIST,
        E::UnsafeDirectory { .. } => libc::EPERM,
        E::Io { ref source, .. } => crate::error::io_errno(source),
        _ => libc::EIO,
    };
    Fail::new(code, ringtrace::error::with_causes(&e))
}

fn configure(mut b: Builder, o: &ringtrace_recorder_opts) -> Builder {
    if o.per_thread_bytes != 0 {
        b = b.per_thread_bytes(o.per_thread_bytes);
    }
    if o.max_threads != 0 {
        b = b.max_threads(o.max_threads);
    }
    if o.max_record_bytes != 0 {
        b = b.max_record_bytes(o.max_record_bytes as usize);
    }
    if o.max_value_bytes != 0 {
        b = b.max_value_bytes(o.max_value_bytes as usize);
    }
    b.replace_existing(o.replace_existing != 0)
}

/// Builds the recorder and boxes its handle into `out`.
///
/// # Safety
///
/// `opts` as [`read_sized`] takes it; `out` is valid for a write.
unsafe fn make(
    builder: Builder,
    opts: *const ringtrace_recorder_opts,
    out: *mut *mut ringtrace_recorder,
    path: Option<&Path>,
) -> Result<c_int, Fail> {
    let out = guard::out_ptr(out)?;
    // SAFETY: the caller's promise about `opts`.
    let o = unsafe { read_sized(opts, "ringtrace_recorder_opts") }?.unwrap_or_default();
    let (_layer, recorder) = configure(builder, &o).build().map_err(|e| {
        let f = fail(e);
        match path {
            Some(p) => f.about(p),
            None => f,
        }
    })?;
    let emitter = recorder.emitter();
    let id = emitter.recorder_id();
    let handle = ringtrace_recorder {
        recorder: Arc::new(recorder),
        emitter,
        id,
        shapes: Shapes::default(),
        signal: Mutex::new(None),
    };
    // SAFETY: `out` is valid for a write (caller).
    unsafe { guard::put(out, handle) }
}

/// Makes a flight recorder: each thread that records an event (`RINGTRACE_EVENT`,
/// `RINGTRACE_SPAN_ENTER`) gets a ring of its own on its first one, which keeps its
/// newest records, overwriting the oldest; `ringtrace_recorder_dump` writes every
/// thread's into a trace file that `ringtrace decode`, `export` and `stat` read.
///
/// `directory` NULL: the rings are in this process's memory. Else they are in files
/// in `directory` (made mode 0700 if missing; an existing one must be this user's and
/// writable by no other), which `ringtrace decode DIR` and `ringtrace snapshot DIR`
/// read from outside while the program runs, and after it crashed or was killed: the
/// crash dump a C program needs no signal handler for.
///
/// `opts` may be NULL (1 MiB a thread, 256 threads). Free with
/// `ringtrace_recorder_free` once no thread records into it any more.
///
/// Every option is checked before anything is made: a call refused with -EINVAL
/// creates no file and no directory. A call that fails later removes what it made (its
/// catalog file, and `directory` and its parents where it made them and they are
/// empty); the earlier run's files that `replace_existing` removed are not restored.
///
/// Returns 0, or -EINVAL (bad options: a `per_thread_bytes` that is not a power of two
/// from 4096, `max_threads` past 4096, `max_record_bytes` under 64 or over what a ring
/// holds, `max_value_bytes` past 65535, unknown bytes set past the struct), -EEXIST (an
/// earlier run's files, and `replace_existing` not set), -EPERM (a directory another
/// user could change), or another -errno; the message names the directory.
///
/// Threads: any thread.
///
/// # Safety
///
/// `directory` is NULL or a NUL-terminated string; `opts` is NULL or points to
/// `opts->sz` readable bytes; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_recorder_flight(
    directory: *const c_char,
    opts: *const ringtrace_recorder_opts,
    out: *mut *mut ringtrace_recorder,
) -> c_int {
    call(|| {
        let mut b = Builder::flight_recorder();
        let mut dir = None;
        if !directory.is_null() {
            // SAFETY: not null; the caller promises a NUL-terminated string.
            let d = unsafe { path_arg(directory) }?;
            b = b.directory(d);
            dir = Some(d);
        }
        // SAFETY: the caller's promises about `opts` and `out`.
        unsafe { make(b, opts, out, dir) }
    })
}

/// Makes a stream: a background thread drains every thread's ring into the trace file
/// `path` (made new, mode 0600: an existing file or symlink there fails with
/// -EEXIST); an event that finds its thread's ring full is lost, counted, and the count
/// written into the trace. `ringtrace_recorder_finish` (or `_free`) drains the rest and
/// closes the file.
///
/// Every option is checked, as `ringtrace_recorder_flight` checks them, before the file
/// is made: a call refused with -EINVAL creates no file; one that fails after making it
/// removes it.
///
/// Returns 0, or -EINVAL (bad options), -EEXIST, or another -errno; the message names
/// the file.
///
/// Threads: any thread.
///
/// # Safety
///
/// `path` is a NUL-terminated string; `opts` is NULL or points to `opts->sz` readable
/// bytes; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_recorder_stream(
    path: *const c_char,
    opts: *const ringtrace_recorder_opts,
    out: *mut *mut ringtrace_recorder,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `path`.
        let path = unsafe { path_arg(path) }?;
        // SAFETY: the caller's promises about `opts` and `out`.
        unsafe { make(Builder::stream(path), opts, out, Some(path)) }
    })
}

/// Writes a flight recorder's newest records, every thread's, to a new trace file at
/// `path` while threads go on recording: written beside it as `PATH.partial.PID.N`
/// (made new, mode 0600, never through a symlink), synced, then renamed over `path`.
/// The number of records written goes to `*records` where `records` is not NULL.
///
/// Not async-signal-safe (it allocates and takes the catalog's lock): from a signal
/// handler, use `ringtrace_recorder_dump_on_signal`; for a crash, a recorder in a
/// directory, which `ringtrace decode DIR` reads after the process died.
///
/// Returns 0, or -EINVAL (a stream: its file is the record), or another -errno; the
/// message names the file.
///
/// Threads: any thread.
///
/// # Safety
///
/// `rec` is a recorder handle; `path` is a NUL-terminated string; `records` is NULL or
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_recorder_dump(
    rec: *const ringtrace_recorder,
    path: *const c_char,
    records: *mut u64,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise: a handle of this library.
        let r = unsafe { guard::get(rec) }?;
        // SAFETY: the caller's promise about `path`.
        let path = unsafe { path_arg(path) }?;
        let d = r.recorder.dump(path).map_err(|e| fail(e).about(path))?;
        if !records.is_null() {
            // SAFETY: not null; the caller promises it is valid for a write.
            unsafe { records.write(d.records as u64) };
        }
        Ok(0)
    })
}

/// Copies the recorder's counters into `*out`.
///
/// Returns 0, or -EINVAL.
///
/// Threads: any thread.
///
/// # Safety
///
/// `rec` is a recorder handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_recorder_get_stats(
    rec: *const ringtrace_recorder,
    out: *mut ringtrace_recorder_stats,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise: a handle of this library.
        let r = unsafe { guard::get(rec) }?;
        let out = guard::out_ptr(out)?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { out.write(r.recorder.stats().into()) };
        Ok(0)
    })
}

/// Finishes and frees a recorder: a stream drains what its rings still hold, writes the
/// final counts and closes its file; a flight recorder stops its signal dump, if any.
/// The final counters go to `*out` where `out` is not NULL. The handle is freed
/// whatever the result.
///
/// Returns 0, or -EINVAL, or the -errno of finishing the stream's file.
///
/// Threads: no other thread may use the handle, and none may record into it any more.
///
/// # Safety
///
/// `rec` is a recorder handle (NULL is refused); `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_recorder_finish(
    rec: *mut ringtrace_recorder,
    out: *mut ringtrace_recorder_stats,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise: a handle of this library, which no other thread
        // uses; it is freed here.
        let r = unsafe { guard::take(rec) }?;
        // The signal dump's thread holds the recorder until it is stopped and joined.
        drop(r.signal.into_inner().unwrap_or_else(|e| e.into_inner()));
        // Every thread drops its state for it (its ring) at its next record.
        r.recorder.retire();
        let stats = match Arc::try_unwrap(r.recorder) {
            Ok(recorder) => recorder.finish().map_err(fail)?,
            Err(shared) => shared.stats(),
        };
        if !out.is_null() {
            // SAFETY: not null; the caller promises it is valid for a write.
            unsafe { out.write(stats.into()) };
        }
        Ok(0)
    })
}

/// Frees a recorder as `ringtrace_recorder_finish` does, ignoring its result (a
/// stream's failure to finish is reported on stderr). NULL is ignored.
///
/// Threads: no other thread may use the handle, and none may record into it any more.
///
/// # Safety
///
/// `rec` is NULL or a recorder handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_recorder_free(rec: *mut ringtrace_recorder) {
    guard::call_or((), || {
        // SAFETY: the caller's promise: NULL or a handle of this library, which no
        // other thread uses. A wrong or freed handle is ignored.
        if let Ok(r) = unsafe { guard::take(rec) } {
            // The signal dump first: its thread holds the recorder until joined. The
            // recorder's own drop then finishes a stream; every thread drops its state
            // for it (its ring) at its next record.
            drop(r.signal.into_inner().unwrap_or_else(|e| e.into_inner()));
            r.recorder.retire();
        }
    })
}

/// Dumps the flight recorder each time the process receives signal `signo` (such as
/// `SIGUSR1`): a handler installed for it writes one byte to a pipe (all it does:
/// async-signal-safe), and a thread of the library, named `ringtrace-dump`, writes the
/// dump to a new file, `path` or the first of `path.1`, `path.2`, ... that names
/// nothing, as `ringtrace_recorder_dump` writes (mode 0600, renamed into place), and
/// says so on stderr. Signals that arrive before a dump started make one dump. The
/// signal no longer has its default action; the handler in place before is restored
/// when the recorder is freed.
///
/// One signal dump at a time in a process. Fault signals (SIGSEGV, SIGBUS, SIGFPE,
/// SIGILL, SIGABRT, SIGTRAP, SIGSYS) are refused: a handler must not return from them.
/// For a dump after a crash, make the recorder in a directory and run `ringtrace decode
/// DIR` after the process died.
///
/// Returns 0, or -EINVAL (a stream, a refused signal), -EBUSY (a signal dump is
/// installed already), or another -errno.
///
/// Threads: any thread.
///
/// # Safety
///
/// `rec` is a recorder handle; `path` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_recorder_dump_on_signal(
    rec: *const ringtrace_recorder,
    signo: c_int,
    path: *const c_char,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise: a handle of this library.
        let r = unsafe { guard::get(rec) }?;
        // SAFETY: the caller's promise about `path`.
        let path = unsafe { path_arg(path) }?.to_path_buf();
        if !r.recorder.is_flight() {
            return Err(Fail::inval("a stream recorder has no rings to dump: its trace file holds the events"));
        }
        let mut slot = r.signal.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return Err(Fail::new(libc::EBUSY, "this recorder has a signal dump already"));
        }
        *slot = Some(signal::install(&r.recorder, signo, path)?);
        Ok(0)
    })
}
