//! The boundary: every extern function's body runs in [`call`] (no panic unwinds into
//! C; failures become negative codes and this thread's last error), and handles are
//! checked on entry with [`Handle`].
//!
//! Each handle struct starts with a tag that identifies its type while it is alive and
//! is cleared when it is freed. Checking the tag catches null pointers, handles of the
//! wrong type and *some* uses after free (while the freed memory has not been reused):
//! not all of them, since reading freed memory is itself undefined behaviour that only
//! the allocator's goodwill makes harmless. Use-after-free in C stays the caller's bug.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::error::{set_last_error, Fail};

/// A boxed handle type with its tag.
pub(crate) trait Handle: Sized {
    /// The value of the tag while the handle is alive (a distinct constant per type).
    const TAG: u64;
    /// The tag field.
    fn tag(&self) -> u64;
    /// Clears the tag (the handle is being freed).
    fn clear_tag(&mut self);
    /// The C name of the handle type, for messages.
    const NAME: &'static str;
}

/// Runs `f` as the body of an extern function returning `int`: `Ok(n)` returns `n`, an
/// error returns its negative code (and keeps its message for `ringtrace_last_error`),
/// a panic returns `-ENOTRECOVERABLE`.
pub(crate) fn call(f: impl FnOnce() -> Result<c_int, Fail>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(n)) => n,
        Ok(Err(fail)) => {
            set_last_error(&fail.message);
            fail.code
        }
        Err(_) => {
            set_last_error("internal error: a Rust panic was caught at the C boundary");
            -libc::ENOTRECOVERABLE
        }
    }
}

/// Runs `f` as the body of an extern function returning a value without an error code
/// (`void`, `size_t`, a pointer): a panic returns `fallback`.
pub(crate) fn call_or<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        set_last_error("internal error: a Rust panic was caught at the C boundary");
        fallback
    })
}

/// Checks a handle pointer and borrows it.
///
/// # Safety
///
/// `p` is null or points to a `T` made by this library (alive, or freed: freed handles
/// are detected as long as their memory was not reused; see the module's docs), not
/// borrowed mutably elsewhere for `'a`.
pub(crate) unsafe fn get<'a, T: Handle>(p: *const T) -> Result<&'a T, Fail> {
    if p.is_null() {
        return Err(Fail::inval(format!("null {} handle", T::NAME)));
    }
    // SAFETY: not null; the caller promises it points to a `T` made by this library.
    let h = unsafe { &*p };
    if h.tag() != T::TAG {
        return Err(Fail::inval(format!("invalid {} handle (freed, or of another type)", T::NAME)));
    }
    Ok(h)
}

/// [`get`], mutably.
///
/// # Safety
///
/// As for [`get`], and no other reference to `*p` is alive for `'a` (the C API's "one
/// thread at a time" rule of this handle type).
pub(crate) unsafe fn get_mut<'a, T: Handle>(p: *mut T) -> Result<&'a mut T, Fail> {
    if p.is_null() {
        return Err(Fail::inval(format!("null {} handle", T::NAME)));
    }
    // SAFETY: not null; the caller promises exclusive access to a `T` of this library.
    let h = unsafe { &mut *p };
    if h.tag() != T::TAG {
        return Err(Fail::inval(format!("invalid {} handle (freed, or of another type)", T::NAME)));
    }
    Ok(h)
}

/// Boxes a new handle and stores it in `*out`.
///
/// # Safety
///
/// `out` is null (refused) or valid for a write of a pointer.
pub(crate) unsafe fn put<T: Handle>(out: *mut *mut T, handle: T) -> Result<c_int, Fail> {
    if out.is_null() {
        return Err(Fail::inval("null output pointer"));
    }
    // SAFETY: not null; the caller promises it is valid for a write.
    unsafe { out.write(Box::into_raw(Box::new(handle))) };
    Ok(0)
}

/// Frees a handle: null is ignored, and so is a pointer whose tag is wrong (a second
/// free that the tag detects).
///
/// # Safety
///
/// `p` is null or was made by [`put`] for this `T`, and no other thread uses it.
pub(crate) unsafe fn free<T: Handle>(p: *mut T) {
    // SAFETY: forwarded from the caller.
    let Ok(h) = (unsafe { get_mut(p) }) else { return };
    h.clear_tag();
    // SAFETY: `p` came from `Box::into_raw` in `put` and the tag said it is not freed yet.
    drop(unsafe { Box::from_raw(p) });
}

/// Checks that an output pointer is not null.
pub(crate) fn out_ptr<T>(p: *mut T) -> Result<*mut T, Fail> {
    if p.is_null() {
        Err(Fail::inval("null output pointer"))
    } else {
        Ok(p)
    }
}

/// A C timeout in milliseconds: negative waits forever.
pub(crate) fn timeout(ms: c_int) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// Implements [`Handle`] for a struct with a `tag: u64` field.
macro_rules! handle {
    ($ty:ident, $tag:expr, $name:expr) => {
        impl $crate::guard::Handle for $ty {
            const TAG: u64 = $tag;
            const NAME: &'static str = $name;
            fn tag(&self) -> u64 {
                self.tag
            }
            fn clear_tag(&mut self) {
                self.tag = 0;
            }
        }
    };
}
pub(crate) use handle;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_enotrecoverable() {
        assert_eq!(call(|| panic!("boom")), -libc::ENOTRECOVERABLE);
        assert_eq!(call_or(7usize, || panic!("boom")), 7);
        // SAFETY: the thread's NUL-terminated message, unchanged until the next call.
        let msg = unsafe { std::ffi::CStr::from_ptr(crate::error::last_error_ptr()) };
        assert!(msg.to_str().unwrap().contains("panic"));
    }

    #[test]
    fn errors_keep_their_message() {
        assert_eq!(call(|| Err(Fail::inval("bad thing"))), -libc::EINVAL);
        // SAFETY: the thread's NUL-terminated message, unchanged until the next call.
        let msg = unsafe { std::ffi::CStr::from_ptr(crate::error::last_error_ptr()) };
        assert_eq!(msg.to_str().unwrap(), "bad thing");
    }
}
