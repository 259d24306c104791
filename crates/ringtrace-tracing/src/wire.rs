//! The bytes of one record: what the layer writes into a thread's ring, after the
//! ring's own timestamp. Little-endian, unaligned, every length bounded.
//!
//! ```text
//! event       1  callsite u32  span u64  span_callsite u32  value*
//! new span    2  callsite u32  span u64  parent u64         value*
//! record      3  span u64                                   value*
//! enter       4  span u64
//! exit        5  span u64
//! close       6  span u64
//! follows     7  span u64  follows u64
//! lost        8  count u64            (events this thread could not write before this one)
//!
//! value       tag u8  field u8  payload
//!   tag & 0x0f: 1 u64 (8)  2 i64 (8)  3 f64 (8)  4 bool (1)  5 str  6 debug  7 u128 (16)
//!               8 i128 (16)  9 error   (str, debug, error: len u16, then that many UTF-8 bytes)
//!               15 values dropped: count u16 (the record's bound was reached; field is 0)
//!   tag & 0x80: the text was cut at the value bound (on a character boundary)
//! ```
//!
//! `span` is the `tracing` span id (0: none); `span_callsite` names the event's span
//! even where a flight recorder no longer holds the span's `new span` record. `field`
//! indexes the callsite's field names.

use std::fmt::{self, Write as _};

use tracing_core::field::{Field, Visit};

/// Record kinds (the first byte).
pub mod kind {
    pub const EVENT: u8 = 1;
    pub const NEW_SPAN: u8 = 2;
    pub const RECORD: u8 = 3;
    pub const ENTER: u8 = 4;
    pub const EXIT: u8 = 5;
    pub const CLOSE: u8 = 6;
    pub const FOLLOWS: u8 = 7;
    pub const LOST: u8 = 8;
}

mod tag {
    pub const U64: u8 = 1;
    pub const I64: u8 = 2;
    pub const F64: u8 = 3;
    pub const BOOL: u8 = 4;
    pub const STR: u8 = 5;
    pub const DEBUG: u8 = 6;
    pub const U128: u8 = 7;
    pub const I128: u8 = 8;
    pub const ERROR: u8 = 9;
    pub const DROPPED: u8 = 15;
    pub const CUT: u8 = 0x80;
}

/// Bytes kept free at the end of every record for the "values dropped" marker.
const DROPPED_LEN: usize = 4;

/// The largest text value the format can hold (its length is a u16).
pub const MAX_VALUE_LIMIT: usize = u16::MAX as usize;

/// The smallest record bound: the largest fixed header, a marker and a little room.
pub const MIN_RECORD_LIMIT: usize = 64;

/// Encodes one record into a buffer, within the bounds.
pub(crate) struct Encoder<'a> {
    pub buf: &'a mut Vec<u8>,
    /// The record's end may not pass this length of `buf`.
    limit: usize,
    max_value: usize,
    dropped: u16,
    cut: bool,
}

impl<'a> Encoder<'a> {
    /// A record of kind `kind` with the fixed header `head`.
    pub fn new(buf: &'a mut Vec<u8>, kind: u8, head: &[u8], max_record: usize, max_value: usize) -> Self {
        buf.clear();
        buf.push(kind);
        buf.extend_from_slice(head);
        Encoder { buf, limit: max_record - DROPPED_LEN, max_value, dropped: 0, cut: false }
    }

    /// Closes the record: the "values dropped" marker if the bound cut any value off.
    /// Returns whether anything was cut or dropped.
    pub fn finish(self) -> bool {
        if self.dropped > 0 {
            self.buf.extend_from_slice(&[tag::DROPPED, 0]);
            self.buf.extend_from_slice(&self.dropped.to_le_bytes());
        }
        self.cut || self.dropped > 0
    }

    fn room(&self) -> usize {
        self.limit.saturating_sub(self.buf.len())
    }

    fn fixed(&mut self, tag: u8, field: &Field, bytes: &[u8]) {
        let Ok(index) = u8::try_from(field.index()) else {
            return self.drop_one();
        };
        if self.room() < 2 + bytes.len() {
            return self.drop_one();
        }
        self.buf.extend_from_slice(&[tag, index]);
        self.buf.extend_from_slice(bytes);
    }

    fn drop_one(&mut self) {
        self.dropped = self.dropped.saturating_add(1);
    }

    /// A text value: at most `max_value` bytes and what room the record has left; more
    /// is cut on a character boundary and the value marked cut.
    fn text(&mut self, tag: u8, field: &Field, write: impl FnOnce(&mut Bounded<'_>) -> fmt::Result) {
        let Ok(index) = u8::try_from(field.index()) else {
            return self.drop_one();
        };
        // A value needs its tag, index and length, and one byte of text to be worth it.
        if self.room() < 5 {
            return self.drop_one();
        }
        let start = self.buf.len();
        self.buf.extend_from_slice(&[tag, index, 0, 0]);
        let max = self.max_value.min(self.room());
        let mut w = Bounded { buf: self.buf, start: start + 4, max, cut: false };
        let _ = write(&mut w);
        let cut = w.cut;
        let len = (self.buf.len() - start - 4) as u16;
        self.buf[start + 2..start + 4].copy_from_slice(&len.to_le_bytes());
        if cut {
            self.buf[start] |= tag::CUT;
            self.cut = true;
        }
    }
}

/// A `fmt::Write` that keeps at most `max` bytes after `start`, then refuses (so a
/// long `Debug` output stops being formatted, not just being kept).
struct Bounded<'a> {
    buf: &'a mut Vec<u8>,
    start: usize,
    max: usize,
    cut: bool,
}

impl fmt::Write for Bounded<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.max - (self.buf.len() - self.start);
        if s.len() <= room {
            self.buf.extend_from_slice(s.as_bytes());
            return Ok(());
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.buf.extend_from_slice(&s.as_bytes()[..end]);
        self.cut = true;
        Err(fmt::Error)
    }
}

impl Visit for Encoder<'_> {
    fn record_u64(&mut self, field: &Field, v: u64) {
        self.fixed(tag::U64, field, &v.to_le_bytes())
    }
    fn record_i64(&mut self, field: &Field, v: i64) {
        self.fixed(tag::I64, field, &v.to_le_bytes())
    }
    fn record_f64(&mut self, field: &Field, v: f64) {
        self.fixed(tag::F64, field, &v.to_le_bytes())
    }
    fn record_bool(&mut self, field: &Field, v: bool) {
        self.fixed(tag::BOOL, field, &[u8::from(v)])
    }
    fn record_u128(&mut self, field: &Field, v: u128) {
        self.fixed(tag::U128, field, &v.to_le_bytes())
    }
    fn record_i128(&mut self, field: &Field, v: i128) {
        self.fixed(tag::I128, field, &v.to_le_bytes())
    }
    fn record_str(&mut self, field: &Field, v: &str) {
        self.text(tag::STR, field, |w| w.write_str(v))
    }
    fn record_error(&mut self, field: &Field, v: &(dyn std::error::Error + 'static)) {
        self.text(tag::ERROR, field, |w| write!(w, "{v}"))
    }
    fn record_debug(&mut self, field: &Field, v: &dyn fmt::Debug) {
        self.text(tag::DEBUG, field, |w| write!(w, "{v:?}"))
    }
}

/// A field's value, decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    U128(u128),
    I128(i128),
    /// A `&str` field.
    Str(String),
    /// A `Debug` (or `Display`, through `%`) value, formatted when recorded.
    Debug(String),
    /// A `dyn Error` value, formatted with `Display` when recorded.
    Error(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::U128(v) => write!(f, "{v}"),
            Value::I128(v) => write!(f, "{v}"),
            Value::Str(v) | Value::Debug(v) | Value::Error(v) => f.write_str(v),
        }
    }
}

/// A value and the index of its field in the callsite's field names.
#[derive(Clone, Debug, PartialEq)]
pub struct RawValue {
    pub field: u8,
    pub value: Value,
    /// The text was cut at the value bound.
    pub cut: bool,
}

/// One record, decoded (names not yet resolved).
#[derive(Clone, Debug, PartialEq)]
pub enum RawRecord {
    Event { callsite: u32, span: u64, span_callsite: u32, values: Vec<RawValue>, dropped: u16 },
    NewSpan { callsite: u32, span: u64, parent: u64, values: Vec<RawValue>, dropped: u16 },
    Record { span: u64, values: Vec<RawValue>, dropped: u16 },
    Enter { span: u64 },
    Exit { span: u64 },
    Close { span: u64 },
    FollowsFrom { span: u64, follows: u64 },
    Lost { count: u64 },
}

/// Why a record's bytes are not a record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("empty record")]
    Empty,
    #[error("unknown record kind {0}")]
    Kind(u8),
    #[error("record ends inside its {0}")]
    Short(&'static str),
    #[error("unknown value tag {0:#04x}")]
    Tag(u8),
    #[error("a text value is not UTF-8")]
    Utf8,
    #[error("bytes after a record of a kind that holds no values")]
    Trailing,
}

/// A bounds-checked reader over a record's bytes.
pub(crate) struct Cursor<'a> {
    b: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Cursor { b }
    }
    pub fn is_empty(&self) -> bool {
        self.b.is_empty()
    }
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if self.b.len() < n {
            return Err(WireError::Short(what));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], WireError> {
        let b = self.bytes(N, what)?;
        let mut a = [0; N];
        a.copy_from_slice(b);
        Ok(a)
    }
    pub fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
}

fn values(c: &mut Cursor<'_>) -> Result<(Vec<RawValue>, u16), WireError> {
    let mut out = Vec::new();
    let mut dropped = 0;
    // Each value takes at least 3 bytes of a finite record: the loop is bounded.
    while !c.is_empty() {
        let t = c.u8("value tag")?;
        let field = c.u8("value field")?;
        let cut = t & tag::CUT != 0;
        let text = |c: &mut Cursor<'_>| -> Result<String, WireError> {
            let n = c.u16("text length")? as usize;
            let b = c.bytes(n, "text")?;
            String::from_utf8(b.to_vec()).map_err(|_| WireError::Utf8)
        };
        let value = match t & !tag::CUT {
            tag::U64 => Value::U64(c.u64("u64")?),
            tag::I64 => Value::I64(c.u64("i64")? as i64),
            tag::F64 => Value::F64(f64::from_bits(c.u64("f64")?)),
            tag::BOOL => Value::Bool(c.u8("bool")? != 0),
            tag::U128 => Value::U128(u128::from_le_bytes(c.array("u128")?)),
            tag::I128 => Value::I128(i128::from_le_bytes(c.array("i128")?)),
            tag::STR => Value::Str(text(c)?),
            tag::DEBUG => Value::Debug(text(c)?),
            tag::ERROR => Value::Error(text(c)?),
            tag::DROPPED => {
                dropped = c.u16("dropped count")?;
                continue;
            }
            _ => return Err(WireError::Tag(t)),
        };
        out.push(RawValue { field, value, cut });
    }
    Ok((out, dropped))
}

/// Decodes one record's bytes (the ring record's payload after its timestamp).
pub fn decode(b: &[u8]) -> Result<RawRecord, WireError> {
    let mut c = Cursor::new(b);
    let k = c.u8("kind").map_err(|_| WireError::Empty)?;
    let rec = match k {
        kind::EVENT => {
            let (callsite, span, span_callsite) = (c.u32("callsite")?, c.u64("span")?, c.u32("span callsite")?);
            let (values, dropped) = values(&mut c)?;
            return Ok(RawRecord::Event { callsite, span, span_callsite, values, dropped });
        }
        kind::NEW_SPAN => {
            let (callsite, span, parent) = (c.u32("callsite")?, c.u64("span")?, c.u64("parent")?);
            let (values, dropped) = values(&mut c)?;
            return Ok(RawRecord::NewSpan { callsite, span, parent, values, dropped });
        }
        kind::RECORD => {
            let span = c.u64("span")?;
            let (values, dropped) = values(&mut c)?;
            return Ok(RawRecord::Record { span, values, dropped });
        }
        kind::ENTER => RawRecord::Enter { span: c.u64("span")? },
        kind::EXIT => RawRecord::Exit { span: c.u64("span")? },
        kind::CLOSE => RawRecord::Close { span: c.u64("span")? },
        kind::FOLLOWS => RawRecord::FollowsFrom { span: c.u64("span")?, follows: c.u64("follows")? },
        kind::LOST => RawRecord::Lost { count: c.u64("count")? },
        k => return Err(WireError::Kind(k)),
    };
    if !c.is_empty() {
        return Err(WireError::Trailing);
    }
    Ok(rec)
}

/// Encodes a record of a kind without values.
pub(crate) fn simple(buf: &mut Vec<u8>, kind: u8, a: u64, b: Option<u64>) {
    buf.clear();
    buf.push(kind);
    buf.extend_from_slice(&a.to_le_bytes());
    if let Some(b) = b {
        buf.extend_from_slice(&b.to_le_bytes());
    }
}

#[cfg(test)]
mod tests;
