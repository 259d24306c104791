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
//! - No Rust panic crosses the boundary: each body runs under `catch_unwind` and a panic
//!   returns `-ENOTRECOVERABLE` (or 0/NULL where there is no error code).
//! - Null pointers and misuse that C cannot prevent (a second commit, a reserve while
//!   one is open, lengths out of range) return `-EINVAL`. Handles carry a tag checked on
//!   entry and cleared on free, which detects some uses after free (not all: see
//!   [`guard`]).

#![allow(non_camel_case_types)]

mod bpf;
mod channel;
pub mod consumer;
mod error;
mod guard;
pub mod producer;
pub mod ring;
pub mod snapshot;

use std::ffi::{c_char, c_int};

#[allow(unused_imports)]
pub use bpf::*;
#[allow(unused_imports)]
pub use channel::*;

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
