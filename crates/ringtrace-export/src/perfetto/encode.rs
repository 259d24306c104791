//! A track event's packet encoded by hand: the bytes prost writes for the same
//! `TracePacket` (fields in tag order, a oneof at its lowest tag, proto2's unpacked
//! repeated integers), without building the message. The tests encode every packet
//! both ways ([`super::reference`]) and compare.
//!
//! ```text
//! Trace.packet (1, len) {
//!   timestamp (8), trusted_packet_sequence_id (10),
//!   track_event (11, len) {
//!     category_iids (3) ...,
//!     debug_annotations (4, len) { name_iid (1) | name (10, len),
//!       bool (2) | uint (3) | int (4) | double (5, fixed64) | string (6, len) | string_value_iid (17) } ...,
//!     type (9), name_iid (10) | name (23, len), categories (22, len) ...,
//!   },
//!   interned_data (12, len) { event_categories (1), event_names (2),
//!     debug_annotation_names (3), debug_annotation_string_values (29) },
//!   sequence_flags (13),
//!   trace_packet_defaults (59, len) { track_event_defaults (11, len) { track_uuid (11) } },
//! }
//! ```

use super::proto::track_event::Type;

/// A name or category as a packet gives it: by iid, or in full (its table is full).
#[derive(Clone, Copy, Debug)]
pub(super) enum Str<'a> {
    Iid(u64),
    Text(&'a str),
}

/// An annotation's value as written.
#[derive(Clone, Copy, Debug)]
pub(super) enum Val<'a> {
    Bool(bool),
    Uint(u64),
    Int(i64),
    Double(f64),
    Str(&'a str),
    /// An interned string value.
    StrIid(u64),
}

/// The intern tables of a sequence, in `InternedData`'s field order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Table {
    Categories = 0,
    Names = 1,
    Fields = 2,
    Strings = 3,
}

/// What a track event's packet says besides its category and annotations.
#[derive(Debug)]
pub(super) struct Head<'a> {
    pub ts: u64,
    pub sequence: u32,
    pub kind: Type,
    pub name: Option<Str<'a>>,
    pub flags: u32,
    /// The track set as the sequence's default (its first packet).
    pub track: Option<u64>,
}

/// Encodes a track event's packet, told its parts in this order: `start`, `interned`
/// (any time before `finish`), `category` (at most once, before the annotations),
/// `annotation` for each, `finish`.
pub(super) trait Encode {
    fn start(&mut self);
    fn interned(&mut self, table: Table, iid: u64, text: &str);
    fn category(&mut self, c: Str<'_>);
    fn annotation(&mut self, name: Str<'_>, value: Val<'_>);
    /// Appends the packet, as a `Trace.packet` field, to `out`.
    fn finish(&mut self, out: &mut Vec<u8>, head: &Head<'_>);
}

/// Bytes of `v` as a varint.
#[inline]
fn varint_len(v: u64) -> usize {
    // 7 bits a byte; 0 takes one.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline]
fn varint(buf: &mut Vec<u8>, v: u64) {
    if v < 0x80 {
        buf.push(v as u8);
    } else {
        varint_long(buf, v);
    }
}

fn varint_long(buf: &mut Vec<u8>, mut v: u64) {
    let mut b = [0u8; 10];
    let mut n = 0;
    while v >= 0x80 {
        b[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    b[n] = v as u8;
    buf.extend_from_slice(&b[..=n]);
}

/// A length-delimited field: its key (one or two bytes), length and bytes.
#[inline]
fn bytes_field(buf: &mut Vec<u8>, key: &[u8], b: &[u8]) {
    buf.extend_from_slice(key);
    varint(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

/// Bytes of a length-delimited field of `body` bytes with a one-byte key.
#[inline]
fn field_len(body: usize) -> usize {
    1 + varint_len(body as u64) + body
}

/// The hand encoder: the event's fields and the interned entries gathered in reused
/// buffers, then the packet written with its lengths.
#[derive(Debug, Default)]
pub(super) struct Hand {
    /// The `TrackEvent`'s bytes so far.
    event: Vec<u8>,
    /// Categories given in full (`categories`, field 22): written after the name.
    categories: Vec<u8>,
    /// Each table's new entries, encoded as `InternedData` fields.
    interned: [Vec<u8>; 4],
}

impl Encode for Hand {
    #[inline]
    fn start(&mut self) {
        self.event.clear();
        self.categories.clear();
        for i in &mut self.interned {
            i.clear();
        }
    }

    #[inline]
    fn interned(&mut self, table: Table, iid: u64, text: &str) {
        // Each entry: iid (1), then the name (2, a string; `bytes` for a string value).
        let body = 1 + varint_len(iid) + field_len(text.len());
        let buf = &mut self.interned[table as usize];
        buf.extend_from_slice(match table {
            Table::Categories => &[(1 << 3) | 2],
            Table::Names => &[(2 << 3) | 2],
            Table::Fields => &[(3 << 3) | 2],
            // Field 29: a two-byte key.
            Table::Strings => &[0xEA, 0x01],
        });
        varint(buf, body as u64);
        buf.push(1 << 3);
        varint(buf, iid);
        bytes_field(buf, &[(2 << 3) | 2], text.as_bytes());
    }

    #[inline]
    fn category(&mut self, c: Str<'_>) {
        match c {
            Str::Iid(iid) => {
                self.event.push(3 << 3);
                varint(&mut self.event, iid);
            }
            Str::Text(t) => bytes_field(&mut self.categories, &[0xB2, 0x01], t.as_bytes()),
        }
    }

    #[inline]
    fn annotation(&mut self, name: Str<'_>, value: Val<'_>) {
        let name_len = match name {
            Str::Iid(iid) => 1 + varint_len(iid),
            Str::Text(t) => field_len(t.len()),
        };
        let value_len = match value {
            Val::Bool(_) => 2,
            Val::Uint(v) => 1 + varint_len(v),
            // int64: two's complement, ten bytes when negative.
            Val::Int(v) => 1 + varint_len(v as u64),
            Val::Double(_) => 9,
            Val::Str(s) => field_len(s.len()),
            Val::StrIid(iid) => 2 + varint_len(iid),
        };
        let e = &mut self.event;
        e.push((4 << 3) | 2);
        varint(e, (name_len + value_len) as u64);
        match name {
            Str::Iid(iid) => {
                e.push(1 << 3);
                varint(e, iid);
            }
            Str::Text(t) => bytes_field(e, &[(10 << 3) | 2], t.as_bytes()),
        }
        match value {
            Val::Bool(b) => e.extend_from_slice(&[2 << 3, u8::from(b)]),
            Val::Uint(v) => {
                e.push(3 << 3);
                varint(e, v);
            }
            Val::Int(v) => {
                e.push(4 << 3);
                varint(e, v as u64);
            }
            Val::Double(d) => {
                e.push((5 << 3) | 1);
                e.extend_from_slice(&d.to_le_bytes());
            }
            Val::Str(s) => bytes_field(e, &[(6 << 3) | 2], s.as_bytes()),
            Val::StrIid(iid) => {
                e.extend_from_slice(&[0x88, 0x01]);
                varint(e, iid);
            }
        }
    }

    #[inline]
    fn finish(&mut self, out: &mut Vec<u8>, h: &Head<'_>) {
        let e = &mut self.event;
        e.push(9 << 3);
        varint(e, h.kind as u64);
        match h.name {
            Some(Str::Iid(iid)) => {
                e.push(10 << 3);
                varint(e, iid);
            }
            Some(Str::Text(t)) => bytes_field(e, &[0xBA, 0x01], t.as_bytes()),
            None => {}
        }
        e.extend_from_slice(&self.categories);
        let interned: usize = self.interned.iter().map(Vec::len).sum();
        // trace_packet_defaults (59, a two-byte key) { track_event_defaults (11) { track_uuid (11) } }.
        let defaults = h.track.map(|t| field_len(1 + varint_len(t)));
        let packet = 1
            + varint_len(h.ts)
            + 1
            + varint_len(u64::from(h.sequence))
            + field_len(e.len())
            + if interned > 0 { field_len(interned) } else { 0 }
            + 1
            + varint_len(u64::from(h.flags))
            + defaults.map_or(0, |d| 1 + field_len(d));
        out.reserve(field_len(packet));
        out.push((1 << 3) | 2);
        varint(out, packet as u64);
        out.push(8 << 3);
        varint(out, h.ts);
        out.push(10 << 3);
        varint(out, u64::from(h.sequence));
        bytes_field(out, &[(11 << 3) | 2], e);
        if interned > 0 {
            out.push((12 << 3) | 2);
            varint(out, interned as u64);
            for i in &self.interned {
                out.extend_from_slice(i);
            }
        }
        out.push(13 << 3);
        varint(out, u64::from(h.flags));
        if let (Some(track), Some(d)) = (h.track, defaults) {
            out.extend_from_slice(&[0xDA, 0x03]);
            varint(out, d as u64);
            out.push((11 << 3) | 2);
            varint(out, 1 + varint_len(track) as u64);
            out.push(11 << 3);
            varint(out, track);
        }
    }
}
