//! The C types of typed events and spans: a callsite (`ringtrace_callsite`, one static
//! per macro use), a field (`ringtrace_field`) and their constants, as the header
//! declares them. [`events`](crate::events) records with them, and
//! [`shape`](crate::shape) compares a callsite's records with its first.

use std::ffi::{c_char, c_void};

/// `ringtrace_field.type`: an unsigned integer in `value.u`.
pub const RINGTRACE_FIELD_U64: u32 = 1;
/// A signed integer in `value.i`.
pub const RINGTRACE_FIELD_I64: u32 = 2;
/// A double in `value.f`.
pub const RINGTRACE_FIELD_F64: u32 = 3;
/// A bool: `value.u` nonzero is true.
pub const RINGTRACE_FIELD_BOOL: u32 = 4;
/// A NUL-terminated string at `value.p` (NULL records "(null)").
pub const RINGTRACE_FIELD_STR: u32 = 5;
/// A string of `len` bytes at `value.p` (no NUL needed).
pub const RINGTRACE_FIELD_STRN: u32 = 6;
/// `len` bytes at `value.p`, shown in hexadecimal.
pub const RINGTRACE_FIELD_BYTES: u32 = 7;

/// `ringtrace_callsite.kind`: an event.
pub const RINGTRACE_CALLSITE_EVENT: u8 = 0;
/// A span.
pub const RINGTRACE_CALLSITE_SPAN: u8 = 1;

/// Levels, as `tracing`'s: `ringtrace decode` shows them by name.
pub const RINGTRACE_LEVEL_TRACE: u8 = 0;
pub const RINGTRACE_LEVEL_DEBUG: u8 = 1;
pub const RINGTRACE_LEVEL_INFO: u8 = 2;
pub const RINGTRACE_LEVEL_WARN: u8 = 3;
pub const RINGTRACE_LEVEL_ERROR: u8 = 4;

/// The most fields a callsite has (a value names its field by a byte).
pub const RINGTRACE_MAX_FIELDS: usize = 255;

/// A field's value (which member, `ringtrace_field.type` says).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ringtrace_field_value {
    pub u: u64,
    pub i: i64,
    pub f: f64,
    pub p: *const c_void,
}

impl std::fmt::Debug for ringtrace_field_value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: every member is 8 bytes of plain data: any is a valid read.
        write!(f, "{:#x}", unsafe { self.u })
    }
}

/// One field of an event or span: its name, its type (`RINGTRACE_FIELD_*`) and value.
/// Made by the header's `RINGTRACE_U64`, `RINGTRACE_STR`, ... (its inline
/// `ringtrace_field_*` functions), in C and C++ alike.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ringtrace_field {
    /// The field's name, not NULL: a string that lives as long as the program (a
    /// literal). Kept when the callsite is registered in a recorder; every later record
    /// of the callsite there compares it with the name kept (its address, then its
    /// bytes where the address differs).
    pub name: *const c_char,
    /// `RINGTRACE_FIELD_*`.
    pub r#type: u32,
    /// `RINGTRACE_FIELD_STRN` and `_BYTES`: the length in bytes.
    pub len: u32,
    pub value: ringtrace_field_value,
}

/// A callsite: one per use of the event and span macros, static, made by them. Its
/// strings live as long as the program (literals). `interned` is the library's (the
/// callsite's number in the last recorder it was recorded into), zero at first.
///
/// Its first record in a recorder registers it there: its level, kind and name are
/// checked then (and not read again by later records), and its kind and fields (how
/// many, their names and types) kept as its shape in that recorder.
#[repr(C)]
#[derive(Debug)]
pub struct ringtrace_callsite {
    /// A span's name, not NULL; for an event, NULL (it is named `event FILE:LINE`, as
    /// `tracing` names events).
    pub name: *const c_char,
    /// What `ringtrace decode` shows before the message: a component's name
    /// (`RINGTRACE_TARGET`, "c" unless defined before including the header).
    pub target: *const c_char,
    pub file: *const c_char,
    pub line: u32,
    /// `RINGTRACE_LEVEL_*`.
    pub level: u8,
    /// `RINGTRACE_CALLSITE_EVENT` or `_SPAN`.
    pub kind: u8,
    pub reserved: u16,
    /// The library's cache: (recorder id << 32) | callsite number. Never written by C.
    pub interned: u64,
}

// `interned` is read and written as an `AtomicU64`: 8-aligned in every callsite (the
// library is built for 64-bit targets only, where C aligns a `uint64_t` so).
const _: () = assert!(
    std::mem::offset_of!(ringtrace_callsite, interned) % 8 == 0 && std::mem::align_of::<ringtrace_callsite>() >= 8
);
