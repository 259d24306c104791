//! The Perfetto export: track descriptors on sequence 1, each source's instants on a
//! sequence of its own, made in one reused packet.

use std::io::{self, Write};

use prost::Message;
use ringtrace_export::perfetto::proto;

use proto::debug_annotation::{NameField as AnnotationName, Value};
use proto::trace_packet::{Data, OptionalTrustedPacketSequenceId as SeqId};
use proto::track_event::{NameField, Type};
use proto::{
    DebugAnnotation, DebugAnnotationName, EventCategory, EventName, InternedData, ProcessDescriptor, ThreadDescriptor,
    TracePacket, TracePacketDefaults, TrackDescriptor, TrackEvent, TrackEventDefaults,
};

use super::{spill, text_of, Entry, Exported, Fleet, Head, Tracks, Use, CATEGORY, FLUSH_AT, NAME};

/// The sequence of the track descriptors; track `i`'s events are on `FIRST_SEQUENCE + i`.
const DESCRIPTORS: u32 = 1;
const FIRST_SEQUENCE: u32 = 2;
const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;
// `put_instant` writes these as one byte each.
const _: () = assert!(TEXT_IID < 0x80 && NAME_IID < 0x80 && CATEGORY_IID < 0x80 && SEQ_NEEDS_INCREMENTAL_STATE < 0x80);
/// The interned ids each sequence gives its names (iids start at 1: 0 is "none").
const NAME_IID: u64 = 1;
const CATEGORY_IID: u64 = 1;
const SEQ_IID: u64 = 1;
const LEN_IID: u64 = 2;
const HEAD_IID: u64 = 3;
const TEXT_IID: u64 = 4;
/// Track uuids: a process's is this plus its pid shifted up 32 bits, a thread's its
/// process's plus 1 plus its tid.
const UUID_BASE: u64 = 0x5254_5348_0000_0000;

fn process_uuid(pid: u32) -> u64 {
    UUID_BASE ^ (u64::from(pid) << 32)
}

fn thread_uuid(pid: u32, tid: u32) -> u64 {
    process_uuid(pid).wrapping_add(1 + u64::from(tid))
}

/// A pid or tid as Perfetto's `int32`.
fn id32(id: u32) -> i32 {
    i32::try_from(id).unwrap_or(i32::MAX)
}

/// Packets gathered into `buf` as fields of a `Trace` (`Trace.packet` is field 1,
/// length-delimited: `0x0A`, the length, the bytes), written out in 64 KiB pieces.
struct Packets<'w, W: Write> {
    out: &'w mut W,
    buf: Vec<u8>,
}

impl<W: Write> Packets<'_, W> {
    fn put(&mut self, p: &TracePacket) -> io::Result<()> {
        self.buf.push(0x0A);
        p.encode_length_delimited(&mut self.buf).map_err(io::Error::other)?;
        spill(&mut self.buf, self.out)
    }

    fn finish(self) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.out.flush()
    }
}

fn descriptor(desc: TrackDescriptor) -> TracePacket {
    TracePacket {
        optional_trusted_packet_sequence_id: Some(SeqId::TrustedPacketSequenceId(DESCRIPTORS)),
        data: Some(Data::TrackDescriptor(desc)),
        ..Default::default()
    }
}

fn annotation(iid: u64, value: Value) -> DebugAnnotation {
    DebugAnnotation { name_field: Some(AnnotationName::NameIid(iid)), value: Some(value) }
}

/// Sets a string value, reusing the string already there.
fn set_str(slot: &mut Option<Value>, s: &str) {
    if let Some(Value::StringValue(old)) = slot {
        old.clear();
        old.push_str(s);
    } else {
        *slot = Some(Value::StringValue(s.to_owned()));
    }
}

/// The packet every record's instant is made in, reused: only its timestamp,
/// sequence, flags and annotation values change from record to record.
pub(super) struct Instant {
    pub(super) p: TracePacket,
    /// The `text` annotation while the packet has none (kept with its string's room).
    spare_text: Option<DebugAnnotation>,
}

impl Instant {
    fn event() -> TrackEvent {
        TrackEvent {
            r#type: Some(Type::Instant as i32),
            name_field: Some(NameField::NameIid(NAME_IID)),
            category_iids: vec![CATEGORY_IID],
            debug_annotations: vec![
                annotation(SEQ_IID, Value::UintValue(0)),
                annotation(LEN_IID, Value::UintValue(0)),
                annotation(HEAD_IID, Value::StringValue(String::with_capacity(2 * super::HEAD_BYTES))),
            ],
            ..Default::default()
        }
    }

    pub(super) fn new() -> Self {
        let text = annotation(TEXT_IID, Value::StringValue(String::with_capacity(4 * super::TEXT_CHARS)));
        Instant {
            p: TracePacket { data: Some(Data::TrackEvent(Self::event())), ..Default::default() },
            spare_text: Some(text),
        }
    }

    /// What the first packet of a source's sequence says once: the names it interns.
    fn interned() -> InternedData {
        let name = |iid: u64, name: &str| DebugAnnotationName { iid: Some(iid), name: Some(name.to_owned()) };
        InternedData {
            event_categories: vec![EventCategory { iid: Some(CATEGORY_IID), name: Some(CATEGORY.to_owned()) }],
            event_names: vec![EventName { iid: Some(NAME_IID), name: Some(NAME.to_owned()) }],
            debug_annotation_names: vec![
                name(SEQ_IID, "seq"),
                name(LEN_IID, "len"),
                name(HEAD_IID, "head"),
                name(TEXT_IID, "text"),
            ],
            ..Default::default()
        }
    }

    /// Makes the packet `e`'s instant on `sequence`; `first` for the sequence's first
    /// packet, which clears its state, interns the names and sets its track.
    pub(super) fn set(&mut self, e: &Entry<'_>, sequence: u32, first: Option<u64>) {
        let p = &mut self.p;
        p.timestamp = Some(e.time_ns);
        p.optional_trusted_packet_sequence_id = Some(SeqId::TrustedPacketSequenceId(sequence));
        if let Some(track) = first {
            p.sequence_flags = Some(SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE);
            p.interned_data = Some(Self::interned());
            // Every event of the sequence goes on its source's track: said once, as
            // Perfetto's SDK does, rather than in each packet.
            p.trace_packet_defaults = Some(TracePacketDefaults {
                track_event_defaults: Some(TrackEventDefaults { track_uuid: Some(track) }),
            });
        } else {
            p.sequence_flags = Some(SEQ_NEEDS_INCREMENTAL_STATE);
            p.interned_data = None;
            p.trace_packet_defaults = None;
        }
        if !matches!(p.data, Some(Data::TrackEvent(_))) {
            p.data = Some(Data::TrackEvent(Self::event()));
        }
        let Some(Data::TrackEvent(event)) = &mut p.data else { return };
        let list = &mut event.debug_annotations;
        let text = text_of(e.payload);
        match (text.is_some(), list.len()) {
            (true, 3) => list.extend(self.spare_text.take()),
            (false, 4) => self.spare_text = list.pop(),
            _ => {}
        }
        if let [seq, len, head, rest @ ..] = &mut list[..] {
            seq.value = Some(Value::UintValue(e.seq));
            len.value = Some(Value::UintValue(e.payload.len() as u64));
            set_str(&mut head.value, Head::of(e.payload).as_str());
            if let (Some(t), Some(text)) = (rest.first_mut(), text) {
                set_str(&mut t.value, text);
            }
        }
    }
}

/// Bytes of `v` as a varint.
fn varint_len(v: u64) -> usize {
    // 7 bits a byte; 0 takes one.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[allow(clippy::cast_possible_truncation)] // 7 bits at a time
fn varint(buf: &mut Vec<u8>, mut v: u64) {
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

/// Bytes of a length-delimited field's key, length and body.
fn field_len(body: usize) -> usize {
    1 + varint_len(body as u64) + body
}

/// Bytes of a `DebugAnnotation` of `name_iid` and a `uint_value`.
fn uint_annotation_len(v: u64) -> usize {
    2 + 1 + varint_len(v)
}

/// Bytes of a `DebugAnnotation` of `name_iid` and a `string_value` of `len` bytes.
fn str_annotation_len(len: usize) -> usize {
    2 + field_len(len)
}

/// Appends `e`'s instant as the packet [`Instant::set`] makes on a sequence past its
/// first packet, encoded by hand: this packet is the export's hot path, and the
/// fields it holds are few and fixed. The bytes are the ones prost writes for that
/// packet, in its order (fields by tag), which the tests check.
///
/// ```text
/// Trace.packet (1, len) {
///   timestamp (8) = time_ns, trusted_packet_sequence_id (10) = sequence,
///   track_event (11, len) {
///     category_iids (3) = CATEGORY_IID,
///     debug_annotations (4, len) { name_iid (1), uint_value (3) | string_value (6, len) } ...,
///     type (9) = TYPE_INSTANT, name_iid (10) = NAME_IID,
///   },
///   sequence_flags (13) = SEQ_NEEDS_INCREMENTAL_STATE,
/// }
/// ```
#[allow(clippy::cast_possible_truncation)] // the iids, type and flags are below 0x80: one byte each
pub(super) fn put_instant(buf: &mut Vec<u8>, e: &Entry<'_>, sequence: u32) {
    let head = Head::of(e.payload);
    let (head, text) = (head.as_bytes(), text_of(e.payload).map(str::as_bytes));
    let len = e.payload.len() as u64;
    let annotations = [uint_annotation_len(e.seq), uint_annotation_len(len), str_annotation_len(head.len())];
    let text_len = text.map(|t| str_annotation_len(t.len()));
    let event = 2 + annotations.iter().chain(&text_len).map(|&a| field_len(a)).sum::<usize>() + 2 + 2;
    let packet = 1 + varint_len(e.time_ns) + 1 + varint_len(u64::from(sequence)) + field_len(event) + 2;
    buf.reserve(field_len(packet));
    buf.push(0x0A);
    varint(buf, packet as u64);
    buf.push(8 << 3);
    varint(buf, e.time_ns);
    buf.push(10 << 3);
    varint(buf, u64::from(sequence));
    buf.extend_from_slice(&[(11 << 3) | 2]);
    varint(buf, event as u64);
    buf.extend_from_slice(&[3 << 3, CATEGORY_IID as u8]);
    for (iid, v, a) in [(SEQ_IID, e.seq, annotations[0]), (LEN_IID, len, annotations[1])] {
        buf.push((4 << 3) | 2);
        varint(buf, a as u64);
        buf.extend_from_slice(&[1 << 3, iid as u8, 3 << 3]);
        varint(buf, v);
    }
    for (iid, s, a) in
        [(HEAD_IID, head, annotations[2])].into_iter().chain(text.zip(text_len).map(|(t, a)| (TEXT_IID, t, a)))
    {
        buf.push((4 << 3) | 2);
        varint(buf, a as u64);
        buf.extend_from_slice(&[1 << 3, iid as u8, (6 << 3) | 2]);
        varint(buf, s.len() as u64);
        buf.extend_from_slice(s);
    }
    buf.extend_from_slice(&[
        9 << 3,
        Type::Instant as u8,
        10 << 3,
        NAME_IID as u8,
        13 << 3,
        SEQ_NEEDS_INCREMENTAL_STATE as u8,
    ]);
}

pub(super) fn write<'a, W: Write>(
    fleet: &'a Fleet,
    entries: impl IntoIterator<Item = Entry<'a>>,
    out: &mut W,
) -> io::Result<Exported> {
    let mut tracks = Tracks::new(fleet);
    let mut w = Packets { out, buf: Vec::with_capacity(FLUSH_AT + 4096) };
    let mut instant = Instant::new();
    let mut records = 0u64;
    for e in entries {
        let i = tracks.find(&e);
        let (host, pid, source, tid) = tracks.ids(i);
        let first = match tracks.first_use(i) {
            Use::Again => None,
            u => {
                if u == Use::NewHost {
                    w.put(&descriptor(TrackDescriptor {
                        uuid: Some(process_uuid(pid)),
                        name: Some(host.to_owned()),
                        process: Some(ProcessDescriptor {
                            pid: Some(id32(pid)),
                            process_name: Some(host.to_owned()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }))?;
                }
                w.put(&descriptor(TrackDescriptor {
                    uuid: Some(thread_uuid(pid, tid)),
                    name: Some(source.to_owned()),
                    thread: Some(ThreadDescriptor {
                        pid: Some(id32(pid)),
                        tid: Some(id32(tid)),
                        thread_name: Some(source.to_owned()),
                    }),
                    parent_uuid: Some(process_uuid(pid)),
                    ..Default::default()
                }))?;
                Some(thread_uuid(pid, tid))
            }
        };
        let sequence = FIRST_SEQUENCE.saturating_add(u32::try_from(i).unwrap_or(u32::MAX));
        if first.is_some() {
            instant.set(&e, sequence, first);
            w.put(&instant.p)?;
        } else {
            put_instant(&mut w.buf, &e, sequence);
            spill(&mut w.buf, w.out)?;
        }
        records += 1;
    }
    w.finish()?;
    Ok(tracks.exported(records))
}
