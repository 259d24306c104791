//! The C API of ringtrace: `libringtrace.so` / `libringtrace.a` and `include/ringtrace.h`
//! (generated from this crate by cbindgen; `tests/header.rs` keeps it current).
//!
//! Conventions, for every function:
//!
//! - Handles are opaque pointers to boxed Rust values, made by `*_new`/`*_create`/`*_open`
//!   functions and released by their `*_free` function (NULL is ignored).
//! - Functions that can fail return 0 (or a count >= 0) on success and a negative errno
//!   code on failure ([`error`] maps every Rust error to one); the message of the last
//!   failure on the calling thread is `ringtrace_last_error()`.
//!   The BPF user ring buffer's reserve calls follow libbpf's instead (its
//!   `user_ring_buffer__reserve`): the sample, or NULL with `errno` set ([`bpf_user`]).
//! - No Rust panic crosses the boundary: each body runs under `catch_unwind` and a panic
//!   returns `-ENOTRECOVERABLE` (or 0/NULL where there is no error code).
//! - Null pointers and misuse that C cannot prevent (a second commit, a reserve while
//!   one is open, lengths out of range) return `-EINVAL`. Handles carry a tag checked on
//!   entry and cleared on free, which detects some uses after free (not all: see
//!   [`guard`]).

#![allow(non_camel_case_types)]

mod bpf;
mod bpf_set;
mod bpf_user;
mod callsite;
mod channel;
mod channel_file;
pub mod consumer;
mod error;
mod events;
mod guard;
mod pause;
pub mod producer;
mod recorder;
pub mod ring;
mod shape;
mod signal;
pub mod snapshot;

use std::ffi::{c_char, c_int};

#[allow(unused_imports)]
pub use bpf::*;
#[allow(unused_imports)]
pub use bpf_set::*;
#[allow(unused_imports)]
pub use bpf_user::*;
#[allow(unused_imports)]
pub use callsite::*;
#[allow(unused_imports)]
pub use channel::*;
#[allow(unused_imports)]
pub use channel_file::*;
#[allow(unused_imports)]
pub use events::*;
#[allow(unused_imports)]
pub use recorder::*;
#[allow(unused_imports)]
pub use signal::*;

/// The major version of this header (`ringtrace_version()` gives the library's). Kept
/// equal to the crate's version by a test (cbindgen writes literals only).
pub const RINGTRACE_VERSION_MAJOR: c_int = 0;
/// The minor version of this header.
pub const RINGTRACE_VERSION_MINOR: c_int = 1;
/// The patch version of this header.
pub const RINGTRACE_VERSION_PATCH: c_int = 0;

/// The version of the library loaded, `MAJOR * 10000 + MINOR * 100 + PATCH` (each part
/// below 100), with its parts written through `major`, `minor` and `patch` where not
/// NULL. A program checks the library it loaded against the header it was built with
/// (`RINGTRACE_VERSION_MAJOR` and the others): within one major version (from 1.0 on;
/// within one minor before it) the ABI only grows.
///
/// Threads: any thread.
///
/// # Safety
///
/// Each of `major`, `minor` and `patch` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_version(major: *mut c_int, minor: *mut c_int, patch: *mut c_int) -> c_int {
    for (out, v) in
        [(major, RINGTRACE_VERSION_MAJOR), (minor, RINGTRACE_VERSION_MINOR), (patch, RINGTRACE_VERSION_PATCH)]
    {
        if !out.is_null() {
            // SAFETY: not null, and the caller promises it is valid for a write.
            unsafe { out.write(v) };
        }
    }
    RINGTRACE_VERSION_MAJOR * 10_000 + RINGTRACE_VERSION_MINOR * 100 + RINGTRACE_VERSION_PATCH
}

/// A static description of an error code (negative, as returned, or positive).
///
/// Threads: any thread; the string is static.
#[no_mangle]
pub extern "C" fn ringtrace_strerror(err: c_int) -> *const c_char {
    guard::call_or(c"internal error".as_ptr(), || error::describe(err).as_ptr())
}

/// The message of the last failure of a ringtrace function on the calling thread
/// ("" if none). Valid until the next ringtrace call on this thread.
///
/// Threads: any thread; each thread has its own message.
#[no_mangle]
pub extern "C" fn ringtrace_last_error() -> *const c_char {
    guard::call_or(c"".as_ptr(), error::last_error_ptr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_version_is_the_crates() {
        let parts = [RINGTRACE_VERSION_MAJOR, RINGTRACE_VERSION_MINOR, RINGTRACE_VERSION_PATCH].map(|v| v.to_string());
        assert_eq!(
            parts,
            [env!("CARGO_PKG_VERSION_MAJOR"), env!("CARGO_PKG_VERSION_MINOR"), env!("CARGO_PKG_VERSION_PATCH")],
            "update RINGTRACE_VERSION_* with the crate's version"
        );
        let (mut a, mut b, mut c) = (-1, -1, -1);
        // SAFETY: three valid places to write.
        let v = unsafe { ringtrace_version(&mut a, &mut b, &mut c) };
        assert_eq!((a, b, c), (RINGTRACE_VERSION_MAJOR, RINGTRACE_VERSION_MINOR, RINGTRACE_VERSION_PATCH));
        assert_eq!(v, a * 10_000 + b * 100 + c);
    }
}
