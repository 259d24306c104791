//! A C callsite's shape: its kind (event or span) and its fields (how many, their
//! names and types) as its first record in a recorder gave them, which is what the
//! recorder's catalog holds. Every later record of the callsite is compared with it
//! and refused (-EINVAL, nothing recorded) where it differs: a value under a name the
//! catalog does not have, or of another type than at first, would decode under the
//! wrong name or as `fieldN`.
//!
//! The comparison is on the hot path, a few comparisons a field: the count, then each
//! field's type and the address of its name. The macros pass names that are string
//! literals, whose address is the same at every call of one callsite, so the address
//! decides almost always; where it differs (a caller that builds its names at run time),
//! the name's bytes are compared with those kept at the first record, so the same name
//! at another address is accepted.

use std::ffi::{c_char, CStr};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::callsite::{ringtrace_callsite, ringtrace_field, RINGTRACE_CALLSITE_SPAN};
use crate::error::Fail;

/// One field of a shape.
#[derive(Debug)]
struct FieldShape {
    /// The address of the name at the first record.
    name_at: usize,
    /// The name's bytes (no NUL).
    name: Box<[u8]>,
    /// `RINGTRACE_FIELD_*`.
    r#type: u32,
}

/// A callsite's kind and fields at its first record in a recorder.
#[derive(Debug)]
pub(crate) struct Shape {
    /// `RINGTRACE_CALLSITE_EVENT` or `_SPAN`.
    kind: u8,
    fields: Box<[FieldShape]>,
}

impl Shape {
    /// The shape of `fields`, refusing a NULL name.
    ///
    /// # Safety
    ///
    /// Every field's name is NULL or a NUL-terminated string.
    pub(crate) unsafe fn new(kind: u8, fields: &[ringtrace_field]) -> Result<Shape, Fail> {
        let mut shapes = Vec::with_capacity(fields.len());
        for (i, f) in fields.iter().enumerate() {
            if f.name.is_null() {
                return Err(Fail::inval(format!("field {i} has a NULL name")));
            }
            // SAFETY: not NULL, so NUL-terminated (the caller's promise).
            let name = unsafe { CStr::from_ptr(f.name) }.to_bytes().into();
            shapes.push(FieldShape { name_at: f.name as usize, name, r#type: f.r#type });
        }
        Ok(Shape { kind, fields: shapes.into() })
    }

    /// Whether a record of callsite `cs` made by the function for `kind`, with
    /// `fields`, has this shape; else why not.
    ///
    /// # Safety
    ///
    /// Every field's name is NULL or a NUL-terminated string; `cs` points to a live
    /// callsite whose `file` is NULL or NUL-terminated (read only for the message).
    #[inline(always)]
    pub(crate) unsafe fn check(
        &self,
        cs: *const ringtrace_callsite,
        kind: u8,
        fields: &[ringtrace_field],
    ) -> Result<(), Fail> {
        if kind != self.kind || fields.len() != self.fields.len() {
            // SAFETY: forwarded from the caller.
            return Err(unsafe { self.mismatch(cs, kind, fields) });
        }
        for (f, s) in fields.iter().zip(self.fields.iter()) {
            // SAFETY: forwarded from the caller.
            if f.r#type != s.r#type || (f.name as usize != s.name_at && !unsafe { same_name(f.name, &s.name) }) {
                // SAFETY: forwarded from the caller.
                return Err(unsafe { self.mismatch(cs, kind, fields) });
            }
        }
        Ok(())
    }

    /// What differs, in words.
    ///
    /// # Safety
    ///
    /// As for [`check`](Self::check).
    #[cold]
    #[inline(never)]
    unsafe fn mismatch(&self, cs: *const ringtrace_callsite, kind: u8, fields: &[ringtrace_field]) -> Fail {
        // SAFETY: a live callsite (the caller's promise); its plain fields are read
        // through the raw pointer, as `events` reads them.
        let (file, line) = unsafe { ((*cs).file, (*cs).line) };
        // SAFETY: NULL or NUL-terminated (the caller's promise).
        let file = (!file.is_null()).then(|| unsafe { CStr::from_ptr(file) }.to_string_lossy().into_owned());
        let site = format!("the callsite at {}:{line}", file.as_deref().unwrap_or("?"));
        let what = |k: u8| if k == RINGTRACE_CALLSITE_SPAN { "span" } else { "event" };
        if kind != self.kind {
            return Fail::inval(format!(
                "{site} is a {} callsite: used to record {} {} (a callsite is used with one macro kind)",
                what(self.kind),
                if kind == RINGTRACE_CALLSITE_SPAN { "a" } else { "an" },
                what(kind),
            ));
        }
        let fixed = "a callsite's fields (count, names and types) are fixed at its first record";
        if fields.len() != self.fields.len() {
            return Fail::inval(format!("{site} has {} fields, not {}: {fixed}", self.fields.len(), fields.len()));
        }
        for (i, (f, s)) in fields.iter().zip(self.fields.iter()).enumerate() {
            // SAFETY: NULL or NUL-terminated (the caller's promise).
            let name = (!f.name.is_null()).then(|| unsafe { CStr::from_ptr(f.name) }.to_string_lossy().into_owned());
            let then = String::from_utf8_lossy(&s.name);
            if name.as_deref() != Some(&*then) || f.r#type != s.r#type {
                return Fail::inval(format!(
                    "{site}: field {i} is `{then}` of type {} at the first record, not {} of type {}: {fixed}",
                    s.r#type,
                    name.map_or_else(|| "a NULL name".to_owned(), |n| format!("`{n}`")),
                    f.r#type
                ));
            }
        }
        Fail::inval(format!("{site} has another shape than at its first record"))
    }
}

/// Whether `name` (NULL or NUL-terminated) is `bytes`.
///
/// # Safety
///
/// `name` is NULL or a NUL-terminated string.
#[cold]
unsafe fn same_name(name: *const c_char, bytes: &[u8]) -> bool {
    // SAFETY: not NULL, so NUL-terminated (the caller's promise).
    !name.is_null() && unsafe { CStr::from_ptr(name) }.to_bytes() == bytes
}

/// Segments of the table: segment `s` holds `FIRST << s` shapes, so 27 of them hold
/// every `u32` callsite number.
const FIRST_BITS: u32 = 6;
const SEGMENTS: usize = 27;

/// A recorder's shapes by callsite number: written once each (under the registration
/// lock), read without a lock.
#[derive(Debug)]
pub(crate) struct Shapes {
    segments: [OnceLock<Box<[OnceLock<Shape>]>>; SEGMENTS],
    /// Held while a callsite is registered and its shape stored: the catalog's names
    /// and the shape come from the same record.
    registering: Mutex<()>,
}

impl Default for Shapes {
    fn default() -> Self {
        Shapes { segments: [const { OnceLock::new() }; SEGMENTS], registering: Mutex::new(()) }
    }
}

/// The segment and the index in it of callsite `number`.
#[inline(always)]
fn slot(number: u32) -> (usize, usize) {
    // Numbers from 0 (the catalog's start at 1) shifted so that segment 0 starts at
    // 1 << FIRST_BITS.
    let i = u64::from(number) + (1 << FIRST_BITS);
    let top = 63 - i.leading_zeros();
    ((top - FIRST_BITS) as usize, (i - (1 << top)) as usize)
}

impl Shapes {
    /// The shape of callsite `number`, if stored.
    #[inline(always)]
    pub(crate) fn get(&self, number: u32) -> Option<&Shape> {
        let (s, i) = slot(number);
        self.segments[s].get()?.get(i)?.get()
    }

    /// Holds the registration lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        self.registering.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores the shape of callsite `number` (the caller holds [`lock`](Self::lock)),
    /// unless one is stored; returns the one stored.
    pub(crate) fn insert(&self, number: u32, shape: Shape) -> &Shape {
        let (s, i) = slot(number);
        let segment = self.segments[s]
            .get_or_init(|| (0..1usize << (s + FIRST_BITS as usize)).map(|_| OnceLock::new()).collect());
        segment[i].get_or_init(|| shape)
    }
}

#[cfg(test)]
mod tests;
