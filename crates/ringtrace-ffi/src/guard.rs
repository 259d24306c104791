//! The boundary: every extern function's body runs in [`call`] (no panic unwinds into
//! C; failures become negative codes and this thread's last error), and handles are
//! checked on entry with [`Handle`].
//!
//! A handle is a [`Tagged`] box: a `#[repr(C)]` struct whose first field, at offset 0
//! whatever the handle type, is a tag that identifies its type while it is alive and is
//! cleared when it is freed. The tag is read through a raw pointer before any reference
//! to the handle is made, so a handle of another type (of any size: every handle starts
//! with its 8-byte tag) is refused after reading only its own first 8 bytes. Checking the
//! tag catches null pointers, handles of the wrong type and *some* uses after free (while
//! the freed memory has not been reused): not all of them, since reading freed memory is
//! itself undefined behaviour that only the allocator's goodwill makes harmless.
//! Use-after-free in C stays the caller's bug.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::error::{set_last_error, Fail};

/// A handle type: what a [`Tagged`] box holds behind a pointer of this type.
pub(crate) trait Handle: Sized {
    /// The value of the tag while the handle is alive (a distinct nonzero constant per
    /// type).
    const TAG: u64;
    /// The C name of the handle type, for messages.
    const NAME: &'static str;
}

/// The allocation behind every handle pointer: the tag first, then the handle. The
/// pointer C holds points to this struct, typed `*T` in the extern functions (opaque to
/// C); only this module turns one into a reference, after checking the tag.
///
/// `#[repr(C)]` puts `tag` at offset 0 for every `T` (the handle structs themselves stay
/// without `#[repr(C)]`, so that cbindgen declares them opaque in the header).
#[repr(C)]
pub(crate) struct Tagged<T> {
    tag: u64,
    value: T,
}

/// Checks a handle pointer's tag, reading nothing else of it.
///
/// # Safety
///
/// `p` is null or points to a live handle of this library of any type (a [`Tagged`] box
/// made by [`put`], so 8-aligned and starting with its 8-byte tag), or to one freed
/// whose memory was not reused (see the module's docs).
unsafe fn check<T: Handle>(p: *const T) -> Result<*mut Tagged<T>, Fail> {
    if p.is_null() {
        return Err(Fail::inval(format!("null {} handle", T::NAME)));
    }
    let p = p.cast::<Tagged<T>>().cast_mut();
    // SAFETY: no reference is made: `&raw const (*p).tag` is `p` itself (offset 0, as
    // `#[repr(C)]` lays `Tagged` out), and every handle, whatever its type, has an
    // initialized, 8-aligned `u64` tag there (the caller's promise), so the read stays
    // inside the handle's allocation even when `T` is a larger handle type.
    let tag = unsafe { std::ptr::read(&raw const (*p).tag) };
    if tag != T::TAG {
        return Err(Fail::inval(format!("invalid {} handle (freed, or of another type)", T::NAME)));
    }
    Ok(p)
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
/// `p` is null or points to a handle made by this library, of any type (alive, or freed:
/// freed handles are detected as long as their memory was not reused; see the module's
/// docs); if it is a `T`, it is not borrowed mutably elsewhere for `'a`.
pub(crate) unsafe fn get<'a, T: Handle>(p: *const T) -> Result<&'a T, Fail> {
    // SAFETY: forwarded from the caller.
    let p = unsafe { check(p) }?;
    // SAFETY: the tag says `p` is a live `Tagged<T>` made by `put`; the caller promises
    // no `&mut` to it for `'a`.
    Ok(unsafe { &(*p).value })
}

/// [`get`], mutably.
///
/// # Safety
///
/// As for [`get`], and no other reference to the handle is alive for `'a` (the C API's
/// "one thread at a time" rule of this handle type).
pub(crate) unsafe fn get_mut<'a, T: Handle>(p: *mut T) -> Result<&'a mut T, Fail> {
    // SAFETY: forwarded from the caller.
    let p = unsafe { check(p) }?;
    // SAFETY: the tag says `p` is a live `Tagged<T>` made by `put`; the caller promises
    // that no other reference to it is alive for `'a`.
    Ok(unsafe { &mut (*p).value })
}

/// Boxes a new handle, with its tag, and stores it in `*out`.
///
/// # Safety
///
/// `out` is null (refused) or valid for a write of a pointer.
pub(crate) unsafe fn put<T: Handle>(out: *mut *mut T, handle: T) -> Result<c_int, Fail> {
    if out.is_null() {
        return Err(Fail::inval("null output pointer"));
    }
    let boxed = Box::into_raw(Box::new(Tagged { tag: T::TAG, value: handle }));
    // SAFETY: not null; the caller promises it is valid for a write.
    unsafe { out.write(boxed.cast::<T>()) };
    Ok(0)
}

/// Frees a handle: null is ignored, and so is a pointer whose tag is wrong (a handle of
/// another type, or a second free that the tag detects).
///
/// # Safety
///
/// `p` is null or points to a handle made by [`put`] (of any type, or freed as
/// [`get`] allows), and no other thread uses it.
pub(crate) unsafe fn free<T: Handle>(p: *mut T) {
    // SAFETY: forwarded from the caller.
    let Ok(p) = (unsafe { check(p) }) else { return };
    // SAFETY: the tag says `p` is a live `Tagged<T>`, which no other thread uses. The
    // store is volatile: the memory is freed right after it, and an ordinary store
    // before a deallocation may be removed as dead.
    unsafe { std::ptr::write_volatile(&raw mut (*p).tag, 0) };
    // SAFETY: `p` came from `Box::into_raw` in `put` and the tag said it is not freed yet.
    drop(unsafe { Box::from_raw(p) });
}

/// Frees a handle's allocation and returns the handle, for a function that consumes it.
///
/// # Safety
///
/// As for [`free`]; `p` null or of another type is refused.
pub(crate) unsafe fn take<T: Handle>(p: *mut T) -> Result<T, Fail> {
    // SAFETY: forwarded from the caller.
    let p = unsafe { check(p) }?;
    // SAFETY: as in `free`.
    unsafe { std::ptr::write_volatile(&raw mut (*p).tag, 0) };
    // SAFETY: `p` came from `Box::into_raw` in `put` and the tag said it is not freed yet.
    Ok(unsafe { Box::from_raw(p) }.value)
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

/// Implements [`Handle`] for a handle struct.
macro_rules! handle {
    ($ty:ident, $tag:expr, $name:expr) => {
        impl $crate::guard::Handle for $ty {
            const TAG: u64 = $tag;
            const NAME: &'static str = $name;
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

    /// A handle of 1 byte (8 with its tag).
    #[derive(Debug)]
    struct Small(u8);
    handle!(Small, 0x5254_5445_5354_0001, "small");

    /// A handle of 256 bytes, whose fields lie past a `Small` handle's end.
    #[derive(Debug)]
    struct Large([u64; 32]);
    handle!(Large, 0x5254_5445_5354_0002, "large");

    #[test]
    fn a_handle_of_another_type_is_refused_by_its_tag_alone() {
        let (mut small, mut large) = (std::ptr::null_mut::<Small>(), std::ptr::null_mut::<Large>());
        // SAFETY: both output pointers are valid for a write.
        unsafe {
            put(&mut small, Small(7)).unwrap();
            put(&mut large, Large([9; 32])).unwrap();
        }
        // SAFETY: each pointer is a live handle of this module, of one type or the other;
        // nothing else borrows them.
        unsafe {
            let e = get::<Large>(small.cast()).unwrap_err();
            assert_eq!(e.code, -libc::EINVAL);
            assert!(e.message.contains("invalid large handle"), "{}", e.message);
            assert!(get_mut::<Large>(small.cast()).is_err());
            assert!(get::<Small>(large.cast()).is_err());
            // The wrong free function leaves them alone.
            free::<Large>(small.cast());
            free::<Small>(large.cast());
            assert_eq!(get::<Small>(small).unwrap().0, 7);
            assert_eq!(get_mut::<Large>(large).unwrap().0[31], 9);
            free(small);
            free(large);
        }
    }

    #[test]
    fn errors_keep_their_message() {
        assert_eq!(call(|| Err(Fail::inval("bad thing"))), -libc::EINVAL);
        // SAFETY: the thread's NUL-terminated message, unchanged until the next call.
        let msg = unsafe { std::ffi::CStr::from_ptr(crate::error::last_error_ptr()) };
        assert_eq!(msg.to_str().unwrap(), "bad thing");
    }
}
