//! Writing a record: [`Encoder`] lays out a record's head and its values (the
//! `tracing` field visitor, or [`FieldValue`]s from the C library), within the record
//! and value bounds, with the "values dropped" marker where they were reached.

use std::fmt::{self, Write as _};

use tracing_core::field::{Field, Visit};

use super::tag;

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
    /// A record of kind `kind` with the fixed header `head[..len]` (`len` at most 20).
    #[inline(always)]
    pub fn new(
        buf: &'a mut Vec<u8>,
        kind: u8,
        head: &[u8; 20],
        len: usize,
        max_record: usize,
        max_value: usize,
    ) -> Self {
        buf.clear();
        buf.push(kind);
        // Copied whole and cut back: a copy of constant size is a few register moves,
        // where one of the head's own length is a call to `memcpy`.
        buf.extend_from_slice(head);
        buf.truncate(1 + len.min(20));
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
        self.fixed_at(tag, field.index(), bytes)
    }

    /// A value of fixed size, of the callsite's field `index`.
    #[inline(always)]
    fn fixed_at(&mut self, tag: u8, index: usize, bytes: &[u8]) {
        let Ok(index) = u8::try_from(index) else {
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
        self.text_at(tag, field.index(), write)
    }

    fn text_at(&mut self, tag: u8, index: usize, write: impl FnOnce(&mut Bounded<'_>) -> fmt::Result) {
        let Ok(index) = u8::try_from(index) else {
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

impl Encoder<'_> {
    /// A value given as data, not through a `tracing` visitor: field `index` of the
    /// callsite. Text and bytes are cut at the value bound as the visitor's are (bytes
    /// anywhere, text on a character boundary).
    #[inline(always)]
    pub fn value_at(&mut self, index: usize, v: &FieldValue<'_>) {
        match *v {
            FieldValue::U64(x) => self.word_at(tag::U64, index, x),
            FieldValue::I64(x) => self.word_at(tag::I64, index, x as u64),
            FieldValue::F64(x) => self.word_at(tag::F64, index, x.to_bits()),
            FieldValue::Bool(x) => self.fixed_at(tag::BOOL, index, &[u8::from(x)]),
            FieldValue::Str(s) => self.str_at(index, s),
            FieldValue::Bytes(b) => self.bytes_at(index, b),
        }
    }

    /// An 8-byte value, written with its tag and index in one copy of constant size.
    #[inline(always)]
    fn word_at(&mut self, tag: u8, index: usize, x: u64) {
        let Ok(index) = u8::try_from(index) else {
            return self.drop_one();
        };
        if self.room() < 10 {
            return self.drop_one();
        }
        let mut v = [0u8; 10];
        v[0] = tag;
        v[1] = index;
        v[2..].copy_from_slice(&x.to_le_bytes());
        self.buf.extend_from_slice(&v);
    }

    /// Text given whole: as [`text`](Self::text) writes it (at least one byte of room
    /// past its head, cut on a character boundary), without a formatter.
    #[inline(always)]
    fn str_at(&mut self, index: usize, s: &str) {
        let Ok(index) = u8::try_from(index) else {
            return self.drop_one();
        };
        let room = self.room();
        if room < 5 {
            return self.drop_one();
        }
        let mut n = s.len().min(self.max_value).min(room - 4);
        let cut = n < s.len();
        if cut {
            while !s.is_char_boundary(n) {
                n -= 1;
            }
            self.cut = true;
        }
        let len = (n as u16).to_le_bytes();
        self.buf.extend_from_slice(&[tag::STR | if cut { tag::CUT } else { 0 }, index, len[0], len[1]]);
        self.buf.extend_from_slice(&s.as_bytes()[..n]);
    }

    fn bytes_at(&mut self, index: usize, b: &[u8]) {
        let Ok(index) = u8::try_from(index) else {
            return self.drop_one();
        };
        if self.room() < 4 + usize::from(!b.is_empty()) {
            return self.drop_one();
        }
        let n = b.len().min(self.max_value).min(self.room() - 4);
        self.buf.extend_from_slice(&[tag::BYTES | if n < b.len() { tag::CUT } else { 0 }, index]);
        self.buf.extend_from_slice(&(n as u16).to_le_bytes());
        self.buf.extend_from_slice(&b[..n]);
        self.cut |= n < b.len();
    }
}

/// A field's value given as data (by a caller other than `tracing`'s visitors: the C
/// API), borrowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FieldValue<'a> {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    /// Text, cut at the value bound on a character boundary.
    Str(&'a str),
    /// A byte string (decoded as [`Value::Bytes`](super::Value::Bytes)), cut at the value bound.
    Bytes(&'a [u8]),
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
