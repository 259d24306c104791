//! libbpf's own producer into BPF user ring buffer maps (`user_ring_buffer__*`), loaded
//! from the system's `libbpf.so.1` at run time with `libloading`, as [`crate::libbpf`]
//! loads its consumer: the `kernel-user-ringbuf` bench leaves its libbpf rows out where
//! libbpf is not installed or lacks these functions.
//!
//! The C API (`libbpf.h`, symbol version `LIBBPF_1.1.0`):
//!
//! ```c
//! struct user_ring_buffer *user_ring_buffer__new(int map_fd, const struct user_ring_buffer_opts *opts);
//! void *user_ring_buffer__reserve(struct user_ring_buffer *rb, __u32 size);
//! void *user_ring_buffer__reserve_blocking(struct user_ring_buffer *rb, __u32 size, int timeout_ms);
//! void user_ring_buffer__submit(struct user_ring_buffer *rb, void *sample);
//! void user_ring_buffer__discard(struct user_ring_buffer *rb, void *sample);
//! void user_ring_buffer__free(struct user_ring_buffer *rb);
//! ```
//!
//! What libbpf does (libbpf 1.1's `ringbuf.c`): `reserve` loads both positions, refuses
//! with `ENOSPC` what does not fit, writes the BUSY header and stores `producer_pos`;
//! it is not thread-safe. `reserve_blocking` tries `reserve`, then waits in
//! `epoll_wait` on its own epoll instance, where the map's descriptor is registered
//! level-triggered for `EPOLLOUT`; the kernel reports `EPOLLOUT` whenever the ring is
//! not entirely full (`ringbuf_map_poll_user`), so while any space is free, if too
//! little for the sample, the wait returns at once and libbpf tries again: it spins in
//! system calls until the drain frees enough.

use std::ffi::{c_int, c_void};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::time::Duration;

use libloading::Library;

/// `struct user_ring_buffer` (opaque).
#[repr(C)]
struct UserRingBufferC {
    _opaque: [u8; 0],
}

type NewFn = unsafe extern "C" fn(map_fd: c_int, opts: *const c_void) -> *mut UserRingBufferC;
type ReserveFn = unsafe extern "C" fn(rb: *mut UserRingBufferC, size: u32) -> *mut c_void;
type ReserveBlockingFn = unsafe extern "C" fn(rb: *mut UserRingBufferC, size: u32, timeout_ms: c_int) -> *mut c_void;
type SubmitFn = unsafe extern "C" fn(rb: *mut UserRingBufferC, sample: *mut c_void);
type FreeFn = unsafe extern "C" fn(rb: *mut UserRingBufferC);

/// The libbpf shared library and the `user_ring_buffer__*` functions.
pub struct LibbpfUser {
    new: NewFn,
    reserve: ReserveFn,
    reserve_blocking: ReserveBlockingFn,
    submit: SubmitFn,
    discard: SubmitFn,
    free: FreeFn,
    /// Keeps the function pointers above valid.
    _lib: Library,
}

impl fmt::Debug for LibbpfUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LibbpfUser").finish_non_exhaustive()
    }
}

impl LibbpfUser {
    /// Opens `libbpf.so.1` (else `libbpf.so`) and resolves the `user_ring_buffer__*`
    /// functions. Err: a one-line reason the bench prints when it leaves out the libbpf
    /// rows (no libbpf, or one older than 1.1 without these functions).
    pub fn load() -> Result<LibbpfUser, String> {
        let (lib, name) = crate::libbpf::open()?;
        let missing = |sym: &str, e: libloading::Error| format!("{name} lacks {sym} (libbpf 1.1): {e}");
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the field's type is the symbol's C prototype in libbpf.h (quoted in
                // the module docs), and the pointer is used only while `_lib` keeps it loaded.
                *unsafe { lib.get($name) }.map_err(|e| missing($name, e))?
            };
        }
        Ok(LibbpfUser {
            new: sym!("user_ring_buffer__new"),
            reserve: sym!("user_ring_buffer__reserve"),
            reserve_blocking: sym!("user_ring_buffer__reserve_blocking"),
            submit: sym!("user_ring_buffer__submit"),
            discard: sym!("user_ring_buffer__discard"),
            free: sym!("user_ring_buffer__free"),
            _lib: lib,
        })
    }

    /// libbpf's producer into the user ring buffer map `map_fd` (`opts` NULL). libbpf
    /// maps the ring and makes its own epoll instance; the map's descriptor is only
    /// borrowed for the call.
    pub fn producer<'a>(&'a self, map_fd: BorrowedFd<'_>) -> Result<LibbpfUserRing<'a>, String> {
        // SAFETY: `map_fd` is a live descriptor for the call; opts may be NULL.
        let rb = unsafe { (self.new)(map_fd.as_raw_fd(), std::ptr::null()) };
        match NonNull::new(rb) {
            Some(rb) => Ok(LibbpfUserRing { lib: self, rb }),
            None => Err(format!("user_ring_buffer__new: {}", io::Error::last_os_error())),
        }
    }
}

/// libbpf's `struct user_ring_buffer` over one map. Not `Send`: libbpf's producer is
/// not thread-safe, so it stays on the thread that made it.
pub struct LibbpfUserRing<'a> {
    lib: &'a LibbpfUser,
    rb: NonNull<UserRingBufferC>,
}

impl fmt::Debug for LibbpfUserRing<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LibbpfUserRing").field("rb", &self.rb).finish_non_exhaustive()
    }
}

/// A sample reserved by libbpf: `len` writable bytes at `ptr`, to be submitted or
/// discarded with the ring that reserved it.
#[derive(Debug)]
pub struct LibbpfSample {
    ptr: NonNull<u8>,
    len: usize,
}

impl LibbpfSample {
    /// The sample's payload.
    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: libbpf reserved `len` bytes at `ptr` inside its mapping of the data area
        // (mapped twice in a row, so a sample that wraps is contiguous); nothing else
        // writes them until this sample is submitted or discarded, which consumes it.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl LibbpfUserRing<'_> {
    /// `user_ring_buffer__reserve`: a sample of `len` bytes, `Ok(None)` when the ring
    /// has no room (`ENOSPC`).
    pub fn reserve(&mut self, len: u32) -> io::Result<Option<LibbpfSample>> {
        // SAFETY: `rb` is live until `Drop`; `&mut self` keeps calls on one thread at a time.
        let p = unsafe { (self.lib.reserve)(self.rb.as_ptr(), len) };
        sample(p, len)
    }

    /// `user_ring_buffer__reserve_blocking`: as [`reserve`](Self::reserve), waiting up
    /// to `timeout` for room; `Ok(None)` on timeout.
    pub fn reserve_blocking(&mut self, len: u32, timeout: Duration) -> io::Result<Option<LibbpfSample>> {
        let ms = c_int::try_from(timeout.as_millis()).unwrap_or(c_int::MAX);
        // SAFETY: as in `reserve`.
        let p = unsafe { (self.lib.reserve_blocking)(self.rb.as_ptr(), len, ms) };
        sample(p, len)
    }

    /// `user_ring_buffer__submit`: hands the sample to the BPF program.
    pub fn submit(&mut self, s: LibbpfSample) {
        // SAFETY: `s` came from this ring's reserve (only this ring makes them here and
        // submitting consumes it), so libbpf finds its header 8 bytes before it.
        unsafe { (self.lib.submit)(self.rb.as_ptr(), s.ptr.as_ptr().cast()) }
    }

    /// `user_ring_buffer__discard`: gives the sample up.
    pub fn discard(&mut self, s: LibbpfSample) {
        // SAFETY: as in `submit`.
        unsafe { (self.lib.discard)(self.rb.as_ptr(), s.ptr.as_ptr().cast()) }
    }
}

/// A reserve's result: the sample, `None` for `ENOSPC` (and for `ETIMEDOUT`, which
/// libbpf does not set: a timed-out blocking reserve returns `ENOSPC` from its last
/// try), or the error.
fn sample(p: *mut c_void, len: u32) -> io::Result<Option<LibbpfSample>> {
    match NonNull::new(p.cast::<u8>()) {
        Some(ptr) => Ok(Some(LibbpfSample { ptr, len: len as usize })),
        None => {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOSPC) | Some(libc::ETIMEDOUT) => Ok(None),
                _ => Err(e),
            }
        }
    }
}

impl Drop for LibbpfUserRing<'_> {
    fn drop(&mut self) {
        // SAFETY: `rb` came from `user_ring_buffer__new` and is freed once; it unmaps the
        // ring and closes libbpf's epoll instance. Samples still reserved borrow nothing
        // from it (they would stop the kernel's drain, which the bench never leaves).
        unsafe { (self.lib.free)(self.rb.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::os::fd::AsFd;

    use ringtrace::kernel::bpf::BpfRingBuf;
    use ringtrace_fixtures::{have_bpf, skip, EchoProgram, Feature, RingMap, UserRingMap};

    use super::*;

    /// libbpf's producer, or `None` after [`have_bpf`] or [`skip`] said why.
    fn setup() -> Option<LibbpfUser> {
        if !have_bpf() {
            return None;
        }
        LibbpfUser::load().map_err(|reason| skip(Feature::Libbpf, reason)).ok()
    }

    #[test]
    fn samples_reach_the_bpf_program_in_order_and_a_full_ring_refuses() {
        let Some(lib) = setup() else { return };
        let user = UserRingMap::create(4096).unwrap();
        let out = RingMap::create(1 << 16).unwrap();
        let prog = EchoProgram::load(user.as_fd(), out.as_fd()).unwrap();
        let mut rb = lib.producer(user.as_fd()).unwrap();
        // 4096 bytes hold 56 samples of 64 bytes (72 with the header).
        let mut n = 0u64;
        while let Some(mut s) = rb.reserve(64).unwrap() {
            s.bytes().copy_from_slice(&[n as u8; 64]);
            rb.submit(s);
            n += 1;
        }
        assert_eq!(n, 56);
        assert!(rb.reserve_blocking(64, Duration::from_millis(20)).unwrap().is_none(), "no room: timed out");
        let discarded = {
            assert_eq!(prog.run().unwrap(), 56);
            let s = rb.reserve(64).unwrap().expect("room after the drain");
            rb.discard(s);
            prog.run().unwrap()
        };
        assert_eq!(discarded, 0, "a discarded sample is not handed to the program");
        let mut reader = BpfRingBuf::from_fd(out.as_fd().try_clone_to_owned().unwrap()).unwrap();
        let mut next = 0u8;
        reader
            .consume(|data: &[u8]| {
                assert_eq!(data, [next; 64]);
                next += 1;
                Ok::<(), Infallible>(())
            })
            .unwrap();
        assert_eq!(next, 56);
    }
}
