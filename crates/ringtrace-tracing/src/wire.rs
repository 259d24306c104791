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
//! open        9  callsite u32  span u64  parent u64         value*
//! done       10  span u64
//!
//! value       tag u8  field u8  payload
//!   tag & 0x0f: 1 u64 (8)  2 i64 (8)  3 f64 (8)  4 bool (1)  5 str  6 debug  7 u128 (16)
//!               8 i128 (16)  9 error   (str, debug, error: len u16, then that many UTF-8 bytes)
//!               10 bytes (len u16, then that many bytes: a C program's byte string)
//!               15 values dropped: count u16 (the record's bound was reached; field is 0)
//!   tag & 0x80: the text was cut at the value bound (on a character boundary)
//! ```
//!
//! `open` is a `new span` and an `enter` of that span at the same time, in one record;
//! `done` an `exit` and a `close` at the same time (trace file format 2). A thread
//! writes them where nothing happened between the two on that thread; decoding gives
//! back the two records each stands for.
//!
//! `span` is the `tracing` span id (0: none); `span_callsite` names the event's span
//! even where a flight recorder no longer holds the span's `new span` record. `field`
//! indexes the callsite's field names.
//!
//! Every byte format of the project, with this one, is laid out in one page:
//! `docs/formats.md` in the repository.

use std::fmt::{self, Write as _};

mod encode;

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
    pub const OPEN: u8 = 9;
    pub const DONE: u8 = 10;
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
    pub const BYTES: u8 = 10;
    pub const DROPPED: u8 = 15;
    pub const CUT: u8 = 0x80;
}

pub(crate) use encode::Encoder;
pub use encode::{FieldValue, MAX_VALUE_LIMIT, MIN_RECORD_LIMIT};

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
    /// A byte string (from the C API's `RINGTRACE_BYTES`, or text that was not
    /// UTF-8): shown as lowercase hexadecimal.
    Bytes(Vec<u8>),
}

/// `b` as lowercase hexadecimal, two digits a byte.
pub fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 * b.len());
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
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
            Value::Bytes(b) => f.write_str(&hex(b)),
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
    Event {
        callsite: u32,
        span: u64,
        span_callsite: u32,
        values: Vec<RawValue>,
        dropped: u16,
    },
    NewSpan {
        callsite: u32,
        span: u64,
        parent: u64,
        values: Vec<RawValue>,
        dropped: u16,
    },
    Record {
        span: u64,
        values: Vec<RawValue>,
        dropped: u16,
    },
    Enter {
        span: u64,
    },
    Exit {
        span: u64,
    },
    Close {
        span: u64,
    },
    FollowsFrom {
        span: u64,
        follows: u64,
    },
    Lost {
        count: u64,
    },
    /// A `new span` and an `enter` of it, at one time.
    Open {
        callsite: u32,
        span: u64,
        parent: u64,
        values: Vec<RawValue>,
        dropped: u16,
    },
    /// An `exit` and a `close` of a span, at one time.
    Done {
        span: u64,
    },
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
    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.b
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

/// A value as it lies in a record's bytes: a number (or a byte string) decoded, a text
/// borrowed.
#[derive(Clone, Debug)]
pub enum ValueIn<'a> {
    Number(Value),
    Str(&'a str),
    Debug(&'a str),
    Error(&'a str),
}

impl<'a> ValueIn<'a> {
    /// A held value, borrowed.
    pub fn of(v: &'a Value) -> Self {
        match v {
            Value::Str(s) => ValueIn::Str(s),
            Value::Debug(s) => ValueIn::Debug(s),
            Value::Error(s) => ValueIn::Error(s),
            number => ValueIn::Number(number.clone()),
        }
    }

    /// The value, owned.
    #[inline(always)]
    pub fn into_value(self) -> Value {
        match self {
            ValueIn::Number(v) => v,
            ValueIn::Str(s) => Value::Str(s.to_owned()),
            ValueIn::Debug(s) => Value::Debug(s.to_owned()),
            ValueIn::Error(s) => Value::Error(s.to_owned()),
        }
    }
}

/// A value as the record holds it: its field's index in the callsite, whether its text
/// was cut, and the value.
pub type ValueAt<'a> = (u8, bool, ValueIn<'a>);

/// The values of a record's value bytes ([`split`]), text borrowed; the "values
/// dropped" marker is not a value: its count is kept in `dropped`. Ends after an error.
pub(crate) struct Values<'a> {
    c: Cursor<'a>,
    pub dropped: u16,
}

impl<'a> Values<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Values { c: Cursor::new(b), dropped: 0 }
    }
}

/// One value of tag `t` (not the "values dropped" marker), its tag and field read.
#[inline(always)]
fn value_of<'a>(c: &mut Cursor<'a>, t: u8) -> Result<ValueIn<'a>, WireError> {
    let text = |c: &mut Cursor<'a>| -> Result<&'a str, WireError> {
        let n = c.u16("text length")? as usize;
        std::str::from_utf8(c.bytes(n, "text")?).map_err(|_| WireError::Utf8)
    };
    Ok(match t & !tag::CUT {
        tag::U64 => ValueIn::Number(Value::U64(c.u64("u64")?)),
        tag::I64 => ValueIn::Number(Value::I64(c.u64("i64")? as i64)),
        tag::F64 => ValueIn::Number(Value::F64(f64::from_bits(c.u64("f64")?))),
        tag::BOOL => ValueIn::Number(Value::Bool(c.u8("bool")? != 0)),
        tag::U128 => ValueIn::Number(Value::U128(u128::from_le_bytes(c.array("u128")?))),
        tag::I128 => ValueIn::Number(Value::I128(i128::from_le_bytes(c.array("i128")?))),
        tag::STR => ValueIn::Str(text(c)?),
        tag::DEBUG => ValueIn::Debug(text(c)?),
        tag::ERROR => ValueIn::Error(text(c)?),
        tag::BYTES => {
            let n = c.u16("bytes length")? as usize;
            ValueIn::Number(Value::Bytes(c.bytes(n, "bytes")?.to_vec()))
        }
        _ => return Err(WireError::Tag(t)),
    })
}

/// Walks value bytes, handing each value to `each`; the count of values dropped.
#[inline(always)]
fn walk_values<'a>(c: &mut Cursor<'a>, mut each: impl FnMut(ValueAt<'a>)) -> Result<u16, WireError> {
    let mut dropped = 0;
    // Each value takes at least 3 bytes of a finite record: the loop is bounded.
    while !c.is_empty() {
        let t = c.u8("value tag")?;
        let field = c.u8("value field")?;
        if t & !tag::CUT == tag::DROPPED {
            dropped = c.u16("dropped count")?;
            continue;
        }
        each((field, t & tag::CUT != 0, value_of(c, t)?));
    }
    Ok(dropped)
}

impl<'a> Iterator for Values<'a> {
    type Item = Result<ValueAt<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let c = &mut self.c;
        let r = (|| {
            // Each value takes at least 3 bytes of a finite record: the loop is bounded.
            while !c.is_empty() {
                let t = c.u8("value tag")?;
                let field = c.u8("value field")?;
                if t & !tag::CUT == tag::DROPPED {
                    self.dropped = c.u16("dropped count")?;
                    continue;
                }
                return Ok(Some((field, t & tag::CUT != 0, value_of(c, t)?)));
            }
            Ok(None)
        })();
        if r.is_err() {
            *c = Cursor::new(&[]);
        }
        r.transpose()
    }
}

/// A record's fixed part, decoded (with no values, and `dropped` 0), and the bytes of
/// its values (empty for a kind that holds none).
#[inline]
pub(crate) fn split(b: &[u8]) -> Result<(RawRecord, &[u8]), WireError> {
    let mut c = Cursor::new(b);
    let k = c.u8("kind").map_err(|_| WireError::Empty)?;
    let (values, dropped) = (Vec::new(), 0);
    let rec = match k {
        kind::EVENT => {
            let (callsite, span, span_callsite) = (c.u32("callsite")?, c.u64("span")?, c.u32("span callsite")?);
            return Ok((RawRecord::Event { callsite, span, span_callsite, values, dropped }, c.rest()));
        }
        kind::NEW_SPAN | kind::OPEN => {
            let (callsite, span, parent) = (c.u32("callsite")?, c.u64("span")?, c.u64("parent")?);
            let rec = if k == kind::OPEN {
                RawRecord::Open { callsite, span, parent, values, dropped }
            } else {
                RawRecord::NewSpan { callsite, span, parent, values, dropped }
            };
            return Ok((rec, c.rest()));
        }
        kind::RECORD => {
            let span = c.u64("span")?;
            return Ok((RawRecord::Record { span, values, dropped }, c.rest()));
        }
        kind::ENTER => RawRecord::Enter { span: c.u64("span")? },
        kind::EXIT => RawRecord::Exit { span: c.u64("span")? },
        kind::CLOSE => RawRecord::Close { span: c.u64("span")? },
        kind::FOLLOWS => RawRecord::FollowsFrom { span: c.u64("span")?, follows: c.u64("follows")? },
        kind::LOST => RawRecord::Lost { count: c.u64("count")? },
        kind::DONE => RawRecord::Done { span: c.u64("span")? },
        k => return Err(WireError::Kind(k)),
    };
    if !c.is_empty() {
        return Err(WireError::Trailing);
    }
    Ok((rec, &[]))
}

/// Decodes a record's bytes, handing its values to `each`; the record returned has no
/// values (but its `dropped` count).
#[inline]
fn decode_with<'a>(b: &'a [u8], each: impl FnMut(ValueAt<'a>)) -> Result<RawRecord, WireError> {
    let (mut rec, rest) = split(b)?;
    let n = walk_values(&mut Cursor::new(rest), each)?;
    if let RawRecord::Event { dropped, .. }
    | RawRecord::NewSpan { dropped, .. }
    | RawRecord::Open { dropped, .. }
    | RawRecord::Record { dropped, .. } = &mut rec
    {
        *dropped = n;
    }
    Ok(rec)
}

/// Decodes one record's bytes (the ring record's payload after its timestamp).
pub fn decode(b: &[u8]) -> Result<RawRecord, WireError> {
    let mut out = Vec::new();
    let mut rec = decode_with(b, |(field, cut, v)| out.push(RawValue { field, value: v.into_value(), cut }))?;
    if let RawRecord::Event { values, .. }
    | RawRecord::NewSpan { values, .. }
    | RawRecord::Open { values, .. }
    | RawRecord::Record { values, .. } = &mut rec
    {
        *values = out;
    }
    Ok(rec)
}

/// Whether a record's kind byte names a span record (new, record, enter, exit, close,
/// open, done).
pub fn is_span_kind(k: u8) -> bool {
    matches!(k, kind::NEW_SPAN | kind::RECORD | kind::ENTER | kind::EXIT | kind::CLOSE | kind::OPEN | kind::DONE)
}

/// Checks one record's bytes as [`decode`] would, without copying a value: the count of
/// a `lost` record (`Some`), or `None` for a record of another kind.
pub fn check(b: &[u8]) -> Result<Option<u64>, WireError> {
    match decode_with(b, |_| {})? {
        RawRecord::Lost { count } => Ok(Some(count)),
        _ => Ok(None),
    }
}

/// A record of a kind without values, on the stack: the bytes and how many are used.
#[inline(always)]
pub(crate) fn simple_bytes(kind: u8, a: u64, b: Option<u64>) -> ([u8; 17], usize) {
    let mut r = [0u8; 17];
    r[0] = kind;
    r[1..9].copy_from_slice(&a.to_le_bytes());
    match b {
        Some(b) => {
            r[9..].copy_from_slice(&b.to_le_bytes());
            (r, 17)
        }
        None => (r, 9),
    }
}

#[cfg(test)]
mod tests;
