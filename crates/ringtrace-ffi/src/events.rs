//! Typed events and spans from C: what the header's `RINGTRACE_EVENT` and
//! `RINGTRACE_SPAN_ENTER` macros call. Each macro use has a static
//! [`ringtrace_callsite`]; its first record registers it in the recorder's catalog
//! (name, level, file, line, field names) and caches the number in the static, so that
//! every later record carries only that number and the values, as the Rust layer's
//! records do.

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicU64, Ordering};

use ringtrace_tracing::{CallsiteInfo, CallsiteKind, FieldValue, Level};

use crate::callsite::*;
use crate::error::Fail;
use crate::guard::{self, call};
use crate::recorder::ringtrace_recorder;
use crate::shape::Shape;

/// A C string as text (`None` for NULL), invalid UTF-8 replaced.
///
/// # Safety
///
/// `p` is NULL or a NUL-terminated string.
unsafe fn text<'a>(p: *const c_char) -> Option<std::borrow::Cow<'a, str>> {
    // SAFETY: the caller's promise.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy())
}

/// The value of one field, or why it is not one.
///
/// # Safety
///
/// `f`'s pointer, for the string and bytes types, is NULL or valid for its length (a
/// NUL-terminated string for `RINGTRACE_FIELD_STR`) for `'a`.
#[inline(always)]
unsafe fn value<'a>(f: &ringtrace_field) -> Result<FieldValue<'a>, Fail> {
    // SAFETY: each union member is read under the type that says it was written; every
    // member is 8 bytes of plain data, so any of them is a valid read.
    let v = unsafe {
        match f.r#type {
            RINGTRACE_FIELD_U64 => FieldValue::U64(f.value.u),
            RINGTRACE_FIELD_I64 => FieldValue::I64(f.value.i),
            RINGTRACE_FIELD_F64 => FieldValue::F64(f.value.f),
            RINGTRACE_FIELD_BOOL => FieldValue::Bool(f.value.u != 0),
            RINGTRACE_FIELD_STR if f.value.p.is_null() => FieldValue::Str("(null)"),
            // SAFETY: a NUL-terminated string (the caller's promise).
            RINGTRACE_FIELD_STR => text_value(CStr::from_ptr(f.value.p.cast()).to_bytes()),
            RINGTRACE_FIELD_STRN | RINGTRACE_FIELD_BYTES if f.len == 0 => {
                if f.r#type == RINGTRACE_FIELD_STRN {
                    FieldValue::Str("")
                } else {
                    FieldValue::Bytes(&[])
                }
            }
            RINGTRACE_FIELD_STRN | RINGTRACE_FIELD_BYTES if f.value.p.is_null() => {
                return Err(Fail::inval(format!("a field of {} bytes at NULL", f.len)))
            }
            // SAFETY: `len` readable bytes at `p` (the caller's promise).
            RINGTRACE_FIELD_STRN => text_value(std::slice::from_raw_parts(f.value.p.cast(), f.len as usize)),
            // SAFETY: as above.
            RINGTRACE_FIELD_BYTES => FieldValue::Bytes(std::slice::from_raw_parts(f.value.p.cast(), f.len as usize)),
            t => return Err(Fail::inval(format!("unknown field type {t} (RINGTRACE_FIELD_*)"))),
        }
    };
    Ok(v)
}

/// Text as text if it is UTF-8, else as bytes: a record never holds text a reader
/// cannot decode.
#[inline(always)]
fn text_value(b: &[u8]) -> FieldValue<'_> {
    match std::str::from_utf8(b) {
        Ok(s) => FieldValue::Str(s),
        Err(_) => FieldValue::Bytes(b),
    }
}

/// The callsite's number in `r`: from its cache, else registered (and cached); either
/// way, the record's kind and fields checked against the callsite's shape in `r`.
///
/// # Safety
///
/// `cs` points to a live callsite whose strings are NUL-terminated (or NULL);
/// `fields` are fields whose names are.
#[inline(always)]
unsafe fn callsite_number(
    r: &ringtrace_recorder,
    cs: *mut ringtrace_callsite,
    kind: u8,
    fields: &[ringtrace_field],
) -> Result<u32, Fail> {
    // SAFETY: `interned` is an 8-aligned u64 of a live callsite (the caller's promise)
    // that only this library writes, only through atomics.
    let cache = unsafe { AtomicU64::from_ptr(&raw mut (*cs).interned) };
    // Acquire: pairs with the Release store in `register`: a number seen here was
    // registered (in the catalog), and its shape stored, before it was stored.
    let cached = cache.load(Ordering::Acquire);
    if cached != 0 && cached >> 32 == r.id {
        let number = cached as u32;
        if let Some(shape) = r.shapes.get(number) {
            // SAFETY: forwarded from the caller.
            unsafe { shape.check(cs, kind, fields) }?;
            return Ok(number);
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { register(r, cs, cache, kind, fields) }
}

/// The callsite's number in `r`, registered in its catalog (with its shape) at its
/// first record there, and cached in the callsite.
///
/// # Safety
///
/// As for [`callsite_number`]; `cache` is the callsite's `interned`.
#[cold]
#[inline(never)]
unsafe fn register(
    r: &ringtrace_recorder,
    cs: *mut ringtrace_callsite,
    cache: &AtomicU64,
    kind: u8,
    fields: &[ringtrace_field],
) -> Result<u32, Fail> {
    // SAFETY: a live callsite (the caller's promise). Its plain fields are read through
    // the raw pointer, one by one: no reference to the struct is made, since other
    // threads may be storing into its `interned` (atomically) meanwhile.
    let (c_level, c_kind, c_line, c_file, c_target, c_name) =
        unsafe { ((*cs).level, (*cs).kind, (*cs).line, (*cs).file, (*cs).target, (*cs).name) };
    let level = match c_level {
        RINGTRACE_LEVEL_TRACE => Level::TRACE,
        RINGTRACE_LEVEL_DEBUG => Level::DEBUG,
        RINGTRACE_LEVEL_INFO => Level::INFO,
        RINGTRACE_LEVEL_WARN => Level::WARN,
        RINGTRACE_LEVEL_ERROR => Level::ERROR,
        l => return Err(Fail::inval(format!("callsite level {l}: RINGTRACE_LEVEL_TRACE to _ERROR"))),
    };
    let callsite_kind = match c_kind {
        RINGTRACE_CALLSITE_EVENT => CallsiteKind::Event,
        RINGTRACE_CALLSITE_SPAN => CallsiteKind::Span,
        k => return Err(Fail::inval(format!("callsite kind {k}: RINGTRACE_CALLSITE_EVENT or _SPAN"))),
    };
    if c_kind != kind {
        return Err(Fail::inval(match callsite_kind {
            CallsiteKind::Span => "a span callsite (RINGTRACE_CALLSITE_SPAN) used to record an event",
            CallsiteKind::Event => "an event callsite (RINGTRACE_CALLSITE_EVENT) used to make a span",
        }));
    }
    if callsite_kind == CallsiteKind::Span && c_name.is_null() {
        return Err(Fail::inval("a span callsite with a NULL name"));
    }
    // SAFETY: field names NULL or NUL-terminated (the caller's promise); NULL refused.
    let shape = unsafe { Shape::new(kind, fields) }?;
    // SAFETY: NUL-terminated or NULL (the caller's promise), for each string below.
    let (file, target) = unsafe { (text(c_file), text(c_target)) };
    // SAFETY: as above; none is NULL (`Shape::new` refused it).
    let names: Vec<String> =
        fields.iter().map(|f| unsafe { text(f.name) }.map_or_else(String::new, |s| s.into_owned())).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let name = match callsite_kind {
        // SAFETY: as above; not NULL (checked).
        CallsiteKind::Span => unsafe { text(c_name) }.map_or_else(String::new, |s| s.into_owned()),
        CallsiteKind::Event => format!("event {}:{}", file.as_deref().unwrap_or("?"), c_line),
    };
    let info = CallsiteInfo {
        kind: callsite_kind,
        level,
        name: &name,
        target: target.as_deref().unwrap_or("c"),
        file: file.as_deref(),
        line: Some(c_line),
        fields: &names,
    };
    // The catalog's entry and the shape from the same record: a callsite registered
    // already (its number cached for another recorder meanwhile) keeps its shape, and
    // this record is checked against it.
    let number = {
        let _registering = r.shapes.lock();
        let number = r.emitter.register(cs as usize, &info);
        let stored = r.shapes.insert(number, shape);
        // SAFETY: forwarded from the caller.
        unsafe { stored.check(cs, kind, fields) }?;
        number
    };
    if r.id < 1 << 32 {
        // Release: pairs with the Acquire load in `callsite_number`. Two threads
        // registering at once store the same value.
        cache.store(r.id << 32 | u64::from(number), Ordering::Release);
    }
    Ok(number)
}

/// The checked arguments of a record made by the function for `kind`
/// (`RINGTRACE_CALLSITE_*`): its recorder, callsite number and fields.
///
/// # Safety
///
/// As for `ringtrace_event`.
#[inline(always)]
unsafe fn args<'a>(
    rec: *const ringtrace_recorder,
    cs: *mut ringtrace_callsite,
    kind: u8,
    fields: *const ringtrace_field,
    n: usize,
) -> Result<(&'a ringtrace_recorder, u32, &'a [ringtrace_field]), Fail> {
    // SAFETY: the caller's promise: a handle of this library.
    let r = unsafe { guard::get(rec) }?;
    if cs.is_null() {
        return Err(Fail::inval("null callsite"));
    }
    if n > RINGTRACE_MAX_FIELDS || (n > 0 && fields.is_null()) {
        return Err(Fail::inval(format!("{n} fields at {fields:?}: at most {RINGTRACE_MAX_FIELDS}, not at NULL")));
    }
    let fields = if n == 0 {
        &[][..]
    } else {
        // SAFETY: `n` fields at `fields` (the caller's promise), not NULL.
        unsafe { std::slice::from_raw_parts(fields, n) }
    };
    // Checked before the callsite is registered: a call refused records nothing, not
    // even its callsite's field names.
    check(fields)?;
    // SAFETY: forwarded from the caller.
    let number = unsafe { callsite_number(r, cs, kind, fields) }?;
    Ok((r, number, fields))
}

/// Checks every field's type and pointers, so that a record is written whole or not
/// at all: after it, [`value`] cannot fail. Reads no string (the values are read once,
/// as they are written).
#[inline(always)]
fn check(fields: &[ringtrace_field]) -> Result<(), Fail> {
    for f in fields {
        match f.r#type {
            RINGTRACE_FIELD_U64 | RINGTRACE_FIELD_I64 | RINGTRACE_FIELD_F64 | RINGTRACE_FIELD_BOOL => {}
            RINGTRACE_FIELD_STR => {}
            RINGTRACE_FIELD_STRN | RINGTRACE_FIELD_BYTES => {
                // SAFETY: every member is 8 bytes of plain data: any is a valid read.
                if f.len > 0 && unsafe { f.value.p }.is_null() {
                    return Err(Fail::inval(format!("a field of {} bytes at NULL", f.len)));
                }
            }
            t => return Err(Fail::inval(format!("unknown field type {t} (RINGTRACE_FIELD_*)"))),
        }
    }
    Ok(())
}

/// Records an event of callsite `cs` with `n` fields into the calling thread's ring of
/// `rec` (made on the thread's first record), inside the thread's innermost span
/// entered with `RINGTRACE_SPAN_ENTER`. What the `RINGTRACE_EVENT` macro calls.
///
/// A callsite's kind and fields are fixed at its first record in `rec`, which
/// registers it (`RINGTRACE_EVENT` keeps them so: they are written at the macro's
/// use). Refused with -EINVAL, nothing recorded:
/// - at every call: a callsite whose first record in `rec` was a span's; `n` other
///   than at the first record; a field whose type (`RINGTRACE_FIELD_*`, compared
///   exactly: `_STR` and `_STRN` differ) or name differs from field `i` of the first
///   record. Names are compared by address first (the macros' names are string
///   literals, at the same address at every call: one comparison), then, where the
///   address differs, by their bytes: the same name in another string (one built at
///   run time) is accepted. A NULL name never matches.
/// - at the first record: a callsite of kind `RINGTRACE_CALLSITE_SPAN` or an unknown
///   kind or level; a field with a NULL name.
/// - each field's own value: an unknown type; `_STRN` or `_BYTES` with a NULL pointer
///   and a nonzero length.
///
/// Not checked: the callsite's level, target, file, line and name after its first
/// record (they are not read again); the strings' lifetime; a callsite changed by the
/// program. A callsite used with another recorder is registered there afresh, with the
/// fields of its first record there.
///
/// Text that is not UTF-8 is recorded as bytes. Text and bytes longer than the
/// recorder's `max_value_bytes` are cut and marked; values past `max_record_bytes`
/// are dropped and counted in the record; a record a full stream ring refuses is
/// counted lost (`ringtrace_recorder_get_stats`).
///
/// Returns 0, or -EINVAL (a bad handle, callsite or field, or fields other than the
/// callsite's first record's: nothing is recorded; `ringtrace_last_error` names the
/// callsite's file and line and the field that differs).
///
/// Threads: any thread, concurrently.
///
/// # Safety
///
/// `rec` is a recorder handle; `cs` points to a callsite that lives as long as the
/// program, used only through this library; `fields` points to `n` fields whose
/// strings are NUL-terminated (or, `RINGTRACE_FIELD_STRN` and `_BYTES`, `len` bytes
/// long).
#[no_mangle]
pub unsafe extern "C" fn ringtrace_event(
    rec: *const ringtrace_recorder,
    cs: *mut ringtrace_callsite,
    fields: *const ringtrace_field,
    n: usize,
) -> c_int {
    call(|| {
        // SAFETY: forwarded from the caller.
        let (r, number, fields) = unsafe { args(rec, cs, RINGTRACE_CALLSITE_EVENT, fields, n) }?;
        // SAFETY: checked by `args`; the fields do not change meanwhile (the caller's).
        r.emitter.event(number, fields.iter().map(|f| unsafe { value(f) }.unwrap_or(FieldValue::Bool(false))));
        Ok(0)
    })
}

/// Makes a span of callsite `cs` with `n` fields, child of the calling thread's
/// innermost entered span, and enters it: events the thread records until
/// `ringtrace_span_exit` are in it, and Perfetto shows it as a slice. What
/// `RINGTRACE_SPAN_ENTER` calls.
///
/// The callsite's fields are checked as `ringtrace_event` checks them; refused too: a
/// callsite whose first record in `rec` was an event's, or, at the first record, one
/// of kind `RINGTRACE_CALLSITE_EVENT`, or with a NULL `name`.
///
/// Returns the span's id (nonzero), or 0 where nothing was recorded (bad arguments,
/// each refusal of `ringtrace_event`'s above: `ringtrace_last_error` says why; or the
/// thread is exiting).
///
/// Threads: any thread, concurrently; the span is exited on the thread that entered it.
///
/// # Safety
///
/// As for `ringtrace_event`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_span_enter(
    rec: *const ringtrace_recorder,
    cs: *mut ringtrace_callsite,
    fields: *const ringtrace_field,
    n: usize,
) -> u64 {
    guard::call_or(0, || {
        let r = (|| {
            // SAFETY: forwarded from the caller.
            let (r, number, fields) = unsafe { args(rec, cs, RINGTRACE_CALLSITE_SPAN, fields, n) }?;
            // SAFETY: checked by `args`, as in `ringtrace_event`.
            let values = fields.iter().map(|f| unsafe { value(f) }.unwrap_or(FieldValue::Bool(false)));
            Ok::<_, Fail>(r.emitter.enter_span(number, values))
        })();
        r.unwrap_or_else(|f| {
            crate::error::set_last_error(&f.message);
            0
        })
    })
}

/// Exits and closes span `span`, entered on this thread by `ringtrace_span_enter`
/// (spans exit innermost first, as a rule; one exited out of order leaves the others
/// entered). A span id of 0 is ignored (returns 0).
///
/// Returns 0, or -EINVAL (a bad handle; a span this thread has not entered, or exited
/// already: nothing is recorded).
///
/// Threads: the thread that entered the span.
///
/// # Safety
///
/// `rec` is a recorder handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_span_exit(rec: *const ringtrace_recorder, span: u64) -> c_int {
    call(|| {
        // SAFETY: the caller's promise: a handle of this library.
        let r = unsafe { guard::get(rec) }?;
        if span == 0 {
            return Ok(0);
        }
        if !r.emitter.exit_span(span) {
            return Err(Fail::inval(format!("span {span:#x} is not entered on this thread")));
        }
        Ok(0)
    })
}
