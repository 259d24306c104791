//! libbpf's own `ring_buffer` consumer (`ring_buffer__new/poll/consume/free`), loaded from
//! the system's `libbpf.so.1` at run time with `libloading`, so that building needs no
//! libbpf headers and the `kernel-bpf` bench leaves its libbpf rows out where libbpf is not
//! installed.
//!
//! The C API (`libbpf.h`, symbol version `LIBBPF_0.0.9`, `ring_buffer__epoll_fd` 0.3.0):
//!
//! ```c
//! typedef int (*ring_buffer_sample_fn)(void *ctx, void *data, size_t size);
//! struct ring_buffer *ring_buffer__new(int map_fd, ring_buffer_sample_fn sample_cb, void *ctx,
//!                                      const struct ring_buffer_opts *opts);
//! int ring_buffer__poll(struct ring_buffer *rb, int timeout_ms);
//! int ring_buffer__consume(struct ring_buffer *rb);
//! void ring_buffer__free(struct ring_buffer *rb);
//! int ring_buffer__epoll_fd(const struct ring_buffer *rb);
//! ```

use std::any::Any;
use std::ffi::{c_int, c_void};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use libloading::Library;

/// `struct ring_buffer` (opaque).
#[repr(C)]
struct RingBufferC {
    _opaque: [u8; 0],
}

type SampleFn = unsafe extern "C" fn(ctx: *mut c_void, data: *mut c_void, size: usize) -> c_int;
type NewFn =
    unsafe extern "C" fn(map_fd: c_int, sample_cb: SampleFn, ctx: *mut c_void, opts: *const c_void) -> *mut RingBufferC;
type PollFn = unsafe extern "C" fn(rb: *mut RingBufferC, timeout_ms: c_int) -> c_int;
type ConsumeFn = unsafe extern "C" fn(rb: *mut RingBufferC) -> c_int;
type FreeFn = unsafe extern "C" fn(rb: *mut RingBufferC);
type EpollFdFn = unsafe extern "C" fn(rb: *const RingBufferC) -> c_int;

/// The callback of [`Libbpf::ring_buffer`]: gets each record's payload; a negative return
/// stops consumption with that error, as in C.
pub type SampleCallback<'a> = Box<dyn FnMut(&[u8]) -> i32 + 'a>;

/// The libbpf shared library and the `ring_buffer__*` functions.
pub struct Libbpf {
    new: NewFn,
    poll: PollFn,
    consume: ConsumeFn,
    free: FreeFn,
    epoll_fd: EpollFdFn,
    /// Which file was opened (for reports).
    name: &'static str,
    /// Keeps the function pointers above valid.
    _lib: Library,
}

impl fmt::Debug for Libbpf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Libbpf").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Libbpf {
    /// Opens `libbpf.so.1` (else `libbpf.so`) and resolves the `ring_buffer__*` functions.
    ///
    /// Err: a one-line reason ("libbpf.so.1 not found: ...") the bench prints when it
    /// leaves out the libbpf rows.
    pub fn load() -> Result<Libbpf, String> {
        let (lib, name) = open()?;
        let missing = |sym: &str, e: libloading::Error| format!("{name} lacks {sym}: {e}");
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the field's type is the symbol's C prototype in libbpf.h (quoted in
                // the module docs), and the pointer is used only while `_lib` keeps it loaded.
                *unsafe { lib.get($name) }.map_err(|e| missing($name, e))?
            };
        }
        Ok(Libbpf {
            new: sym!("ring_buffer__new"),
            poll: sym!("ring_buffer__poll"),
            consume: sym!("ring_buffer__consume"),
            free: sym!("ring_buffer__free"),
            epoll_fd: sym!("ring_buffer__epoll_fd"),
            name,
            _lib: lib,
        })
    }

    /// The file opened: `libbpf.so.1` or `libbpf.so`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// libbpf's consumer of the ring buffer map `map_fd`, calling `cb` with each record's
    /// payload. As in C, a negative return from `cb` stops consumption, and
    /// [`LibbpfRing::poll`]/[`LibbpfRing::consume`] return it as an error (`-ret` as the
    /// errno; libbpf has already moved the consumer position past that record).
    pub fn ring_buffer<'a>(&'a self, map_fd: BorrowedFd<'a>, cb: SampleCallback<'a>) -> Result<LibbpfRing<'a>, String> {
        let ctx = Box::into_raw(Box::new(Ctx { cb, panic: None }));
        // SAFETY: `sample` matches `ring_buffer_sample_fn` and gets `ctx`, a valid
        // `*mut Ctx` until `LibbpfRing` frees it after `ring_buffer__free`; opts may be NULL.
        let rb = unsafe { (self.new)(map_fd.as_raw_fd(), sample, ctx.cast(), std::ptr::null()) };
        if rb.is_null() {
            let err = io::Error::last_os_error();
            // SAFETY: `ctx` came from `Box::into_raw` above and libbpf kept no copy.
            drop(unsafe { Box::from_raw(ctx) });
            return Err(format!("ring_buffer__new: {err}"));
        }
        Ok(LibbpfRing { lib: self, rb, ctx })
    }
}

/// Opens `libbpf.so.1` (else `libbpf.so`): the library and the file's name, or a
/// one-line reason.
pub(crate) fn open() -> Result<(Library, &'static str), String> {
    // SAFETY: libbpf is a plain C library whose load runs no initializer with
    // preconditions; it is loaded under its own soname, not in place of another.
    match unsafe { Library::new("libbpf.so.1") } {
        Ok(lib) => Ok((lib, "libbpf.so.1")),
        // SAFETY: as above.
        Err(e1) => match unsafe { Library::new("libbpf.so") } {
            Ok(lib) => Ok((lib, "libbpf.so")),
            Err(e2) => Err(format!("libbpf.so.1 not found: {e1}; nor libbpf.so: {e2}")),
        },
    }
}

/// The callback and a panic it raised, behind the `ctx` pointer libbpf passes back.
struct Ctx<'a> {
    cb: SampleCallback<'a>,
    panic: Option<Box<dyn Any + Send>>,
}

/// `ring_buffer_sample_fn`: runs the callback; a panic is caught (unwinding through C is
/// undefined), kept for [`LibbpfRing`] to resume, and stops consumption with -1.
///
/// # Safety
///
/// `ctx` is the `*mut Ctx` given to `ring_buffer__new`, with no other reference to it live;
/// `data` is readable for `size` bytes.
unsafe extern "C" fn sample(ctx: *mut c_void, data: *mut c_void, size: usize) -> c_int {
    // SAFETY: per this function's contract; libbpf calls back only from within
    // `poll`/`consume`, which hold `&mut LibbpfRing` and no reference into the `Ctx`.
    let ctx = unsafe { &mut *ctx.cast::<Ctx<'_>>() };
    // SAFETY: libbpf passes the record's payload, `size` bytes inside the mapped ring.
    let data = unsafe { std::slice::from_raw_parts(data.cast::<u8>().cast_const(), size) };
    match catch_unwind(AssertUnwindSafe(|| (ctx.cb)(data))) {
        Ok(ret) => ret,
        Err(panic) => {
            ctx.panic = Some(panic);
            -1
        }
    }
}

/// libbpf's `struct ring_buffer` over one map, with its callback.
pub struct LibbpfRing<'a> {
    lib: &'a Libbpf,
    rb: *mut RingBufferC,
    /// From `Box::into_raw`: a stable address for libbpf's `ctx`, freed in `Drop`.
    ctx: *mut Ctx<'a>,
}

impl fmt::Debug for LibbpfRing<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LibbpfRing").field("rb", &self.rb).finish_non_exhaustive()
    }
}

impl LibbpfRing<'_> {
    /// `ring_buffer__poll`: waits up to `timeout_ms` (-1: forever) for data
    /// (level-triggered `epoll_wait`), then consumes every record available. Returns the
    /// records consumed (0 on timeout). A panic in the callback is resumed here.
    pub fn poll(&mut self, timeout_ms: i32) -> Result<usize, io::Error> {
        // SAFETY: `rb` is live until `Drop`; the callback's contract holds (see `sample`).
        let ret = unsafe { (self.lib.poll)(self.rb, timeout_ms) };
        self.result(ret)
    }

    /// `ring_buffer__consume`: consumes every record available without waiting. Returns
    /// the records consumed. A panic in the callback is resumed here.
    pub fn consume(&mut self) -> Result<usize, io::Error> {
        // SAFETY: as in `poll`.
        let ret = unsafe { (self.lib.consume)(self.rb) };
        self.result(ret)
    }

    /// `ring_buffer__epoll_fd`: the epoll instance `poll` waits on (readable when a record
    /// is available), for a caller's own event loop.
    pub fn epoll_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `rb` is live until `Drop`.
        let fd = unsafe { (self.lib.epoll_fd)(self.rb) };
        // SAFETY: libbpf owns this epoll fd until `ring_buffer__free`, which needs `&mut
        // self` (drop), so it outlives the borrow of `self`.
        unsafe { BorrowedFd::borrow_raw(fd) }
    }

    fn result(&mut self, ret: c_int) -> Result<usize, io::Error> {
        // SAFETY: `ctx` is live until `Drop`, and libbpf has returned: no other reference.
        if let Some(panic) = unsafe { (*self.ctx).panic.take() } {
            resume_unwind(panic);
        }
        usize::try_from(ret).map_err(|_| io::Error::from_raw_os_error(-ret))
    }
}

impl Drop for LibbpfRing<'_> {
    fn drop(&mut self) {
        // SAFETY: `rb` came from `ring_buffer__new` and is freed once; it unmaps the ring
        // and closes its epoll fd, after which libbpf holds no copy of `ctx`.
        unsafe { (self.lib.free)(self.rb) };
        // SAFETY: `ctx` came from `Box::into_raw` and nothing references it any more.
        drop(unsafe { Box::from_raw(self.ctx) });
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::os::fd::AsFd;
    use std::time::{Duration, Instant};

    use ringtrace_fixtures::{expected_payload, have_bpf, skip, Feature, Method, ProgSpec, RingMap, SeqProgram};
    use rustix::event::{PollFd, PollFlags, Timespec};

    use super::*;

    /// libbpf, or `None` after [`have_bpf`] or [`skip`] said why (each fails the test
    /// instead where `RINGTRACE_REQUIRE` lists `bpf` or `libbpf`).
    fn setup() -> Option<Libbpf> {
        if !have_bpf() {
            return None;
        }
        Libbpf::load().map_err(|reason| skip(Feature::Libbpf, reason)).ok()
    }

    /// Whether `fd` is readable (`POLLIN`) within `wait`.
    fn readable_within(fd: BorrowedFd<'_>, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            let left = Timespec::try_from(deadline.saturating_duration_since(Instant::now())).unwrap();
            let mut fds = [PollFd::new(&fd, PollFlags::IN)];
            match rustix::event::poll(&mut fds, Some(&left)) {
                Ok(_) => return fds[0].revents().contains(PollFlags::IN),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => panic!("poll of libbpf's epoll fd: {e}"),
            }
        }
    }

    /// A callback checking that records arrive in order with the expected payloads.
    fn checker(next: &Cell<u64>, payload: u32) -> SampleCallback<'_> {
        Box::new(move |data| {
            assert_eq!(data, expected_payload(next.get(), payload), "record {}", next.get());
            next.set(next.get() + 1);
            0
        })
    }

    #[test]
    fn consumes_seq_program_records_in_order() {
        let Some(lib) = setup() else { return };
        for method in [Method::Output, Method::ReserveSubmit] {
            let ring = RingMap::create(1 << 20).unwrap();
            let prog = SeqProgram::load(ring.as_fd(), ProgSpec { payload: 64, method, ..Default::default() }).unwrap();
            prog.run(10_000).unwrap();
            let next = Cell::new(0);
            let mut rb = lib.ring_buffer(ring.as_fd(), checker(&next, 64)).unwrap();
            assert_eq!(rb.consume().unwrap(), 10_000);
            assert_eq!(rb.consume().unwrap(), 0);
            drop(rb);
            assert_eq!(next.get(), 10_000);
            assert_eq!(prog.counters().unwrap().drops, 0);
        }
    }

    #[test]
    fn poll_skips_discards_and_times_out() {
        let Some(lib) = setup() else { return };
        let ring = RingMap::create(1 << 16).unwrap();
        let spec = ProgSpec { payload: 8, method: Method::ReserveSubmit, discard_every: 2, ..Default::default() };
        let prog = SeqProgram::load(ring.as_fd(), spec).unwrap();
        let seqs = std::cell::RefCell::new(Vec::new());
        let mut rb = lib
            .ring_buffer(
                ring.as_fd(),
                Box::new(|data| {
                    seqs.borrow_mut().push(u64::from_ne_bytes(data.try_into().unwrap()));
                    0
                }),
            )
            .unwrap();
        assert_eq!(rb.poll(0).unwrap(), 0);
        // The epoll fd, for a caller's own loop: readable once a record is written (the
        // kernel's wakeup comes from an irq_work, soon after the program returns), not
        // before, and not once it is consumed.
        assert!(!readable_within(rb.epoll_fd(), Duration::ZERO), "readable with the ring empty");
        prog.run(2).unwrap(); // seq 0 submitted, seq 1 discarded
        assert!(readable_within(rb.epoll_fd(), Duration::from_secs(10)), "not readable with a record in the ring");
        assert_eq!(rb.consume().unwrap(), 1);
        assert!(!readable_within(rb.epoll_fd(), Duration::ZERO), "readable with every record consumed");
        let mut seen = 1;
        for _ in 0..20 {
            prog.run(100).unwrap();
            seen += rb.poll(1000).unwrap();
        }
        drop(rb);
        assert_eq!(seen, 1001);
        assert_eq!(*seqs.borrow(), (0..2002).step_by(2).collect::<Vec<u64>>());
    }

    const EIO: i32 = 5;

    #[test]
    fn callback_errors_and_panics() {
        let Some(lib) = setup() else { return };
        let ring = RingMap::create(1 << 16).unwrap();
        let prog = SeqProgram::load(ring.as_fd(), ProgSpec::default()).unwrap();
        prog.run(10).unwrap();
        let calls = Cell::new(0);
        let mut rb = lib
            .ring_buffer(
                ring.as_fd(),
                Box::new(|_| {
                    calls.set(calls.get() + 1);
                    match calls.get() {
                        3 => -EIO,
                        5 => panic!("from the callback"),
                        _ => 0,
                    }
                }),
            )
            .unwrap();
        assert_eq!(rb.consume().unwrap_err().raw_os_error(), Some(EIO));
        let panic = catch_unwind(AssertUnwindSafe(|| rb.consume())).unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"from the callback"));
        // The records that failed were consumed; the rest are still there.
        assert_eq!(rb.consume().unwrap(), 5);
        assert_eq!(calls.get(), 10);
    }
}
