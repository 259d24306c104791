//! Perfetto's trace format: a protobuf `Trace` of `TracePacket`s carrying
//! `TrackEvent`s, which Perfetto's UI (ui.perfetto.dev) and `trace_processor` open.
//! The message types are generated at build time from `proto/perfetto_trace.proto`
//! (the part of Perfetto's published schema the export writes) by prost; [`proto`]
//! has them, for programs that read the output back.
//!
//! * A process track (`ProcessDescriptor`: pid, program name) and a thread track per
//!   thread under it (`ThreadDescriptor`: pid, tid, thread name).
//! * Each thread's packets form a sequence of their own (`trusted_packet_sequence_id`),
//!   whose first packet clears the sequence's incremental state; event names,
//!   categories (targets) and field names are interned per sequence (`InternedData`),
//!   as Perfetto's track event documentation describes.
//! * Spans: `TYPE_SLICE_BEGIN` when a thread enters one (its fields as debug
//!   annotations), `TYPE_SLICE_END` when it exits, nested per thread as for Chrome
//!   ([`super::chrome`]).
//! * Events: `TYPE_INSTANT`, named by their message (else their callsite's name), every
//!   field a debug annotation (unsigned, signed, double, bool; text for strings,
//!   `Debug` values, errors and 128-bit integers), and the level as `level`.
//! * Lost events: an instant named `ringtrace: events lost` with a `count` annotation.
//! * Timestamps: the records' `CLOCK_MONOTONIC` nanoseconds, exact, written in the
//!   trace's default clock (no clock conversion is applied).
//!
//! The file is written packet by packet (`Trace.packet` is field 1, so each packet is a
//! `0x0A` tag, its length and its bytes): nothing but the current packet is held.

use std::collections::HashMap;
use std::io::{self, Write};

use prost::Message;

use super::{Exported, Slices, LOST_NAME};
use crate::decode::{EntryKind, Field, Trace, Value};

/// The Perfetto message types the export writes (generated from
/// `proto/perfetto_trace.proto`).
#[allow(missing_docs, missing_debug_implementations, clippy::all, clippy::pedantic)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/perfetto.protos.rs"));
}

use proto::debug_annotation::{NameField as AnnotationName, Value as AnnotationValue};
use proto::trace_packet::{Data, OptionalTrustedPacketSequenceId as SeqId};
use proto::track_event::{NameField, Type};
use proto::{
    DebugAnnotation, DebugAnnotationName, EventCategory, EventName, InternedData, ProcessDescriptor, ThreadDescriptor,
    TracePacket, TrackDescriptor, TrackEvent,
};

const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;
/// The sequence of the track descriptors.
const DESCRIPTORS: u32 = 1;

/// A thread's packet sequence: its number, its track, and what it has interned.
struct Sequence {
    id: u32,
    track: u64,
    cleared: bool,
    names: HashMap<String, u64>,
    categories: HashMap<String, u64>,
    fields: HashMap<String, u64>,
}

/// Interns `s` in `table`: its iid, and whether it is new (to be sent in this packet).
fn intern(table: &mut HashMap<String, u64>, s: &str) -> (u64, bool) {
    if let Some(&iid) = table.get(s) {
        return (iid, false);
    }
    // iids start at 1: 0 means "none".
    let iid = table.len() as u64 + 1;
    table.insert(s.to_owned(), iid);
    (iid, true)
}

impl Sequence {
    /// A track event's packet on this sequence at `ts`, with what it interns.
    fn packet(
        &mut self,
        ts: u64,
        kind: Type,
        name: Option<&str>,
        category: Option<&str>,
        fields: &[(&str, AnnotationValue)],
    ) -> TracePacket {
        let mut interned = InternedData::default();
        let mut event = TrackEvent { r#type: Some(kind as i32), track_uuid: Some(self.track), ..Default::default() };
        if let Some(name) = name {
            let (iid, new) = intern(&mut self.names, name);
            if new {
                interned.event_names.push(EventName { iid: Some(iid), name: Some(name.to_owned()) });
            }
            event.name_field = Some(NameField::NameIid(iid));
        }
        if let Some(cat) = category {
            let (iid, new) = intern(&mut self.categories, cat);
            if new {
                interned.event_categories.push(EventCategory { iid: Some(iid), name: Some(cat.to_owned()) });
            }
            event.category_iids.push(iid);
        }
        for (field, value) in fields {
            let (iid, new) = intern(&mut self.fields, field);
            if new {
                interned
                    .debug_annotation_names
                    .push(DebugAnnotationName { iid: Some(iid), name: Some((*field).to_owned()) });
            }
            event
                .debug_annotations
                .push(DebugAnnotation { name_field: Some(AnnotationName::NameIid(iid)), value: Some(value.clone()) });
        }
        let flags = if self.cleared {
            SEQ_NEEDS_INCREMENTAL_STATE
        } else {
            self.cleared = true;
            SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE
        };
        let has_interned = !(interned.event_names.is_empty()
            && interned.event_categories.is_empty()
            && interned.debug_annotation_names.is_empty());
        TracePacket {
            timestamp: Some(ts),
            optional_trusted_packet_sequence_id: Some(SeqId::TrustedPacketSequenceId(self.id)),
            interned_data: has_interned.then_some(interned),
            sequence_flags: Some(flags),
            data: Some(Data::TrackEvent(event)),
            ..Default::default()
        }
    }
}

fn annotation(v: &Value) -> AnnotationValue {
    match v {
        Value::U64(x) => AnnotationValue::UintValue(*x),
        Value::I64(x) => AnnotationValue::IntValue(*x),
        Value::F64(x) => AnnotationValue::DoubleValue(*x),
        Value::Bool(x) => AnnotationValue::BoolValue(*x),
        Value::U128(x) => AnnotationValue::StringValue(x.to_string()),
        Value::I128(x) => AnnotationValue::StringValue(x.to_string()),
        Value::Str(s) | Value::Debug(s) | Value::Error(s) => AnnotationValue::StringValue(s.clone()),
    }
}

fn annotations(fields: &[Field]) -> Vec<(&str, AnnotationValue)> {
    fields.iter().map(|f| (f.name.as_str(), annotation(&f.value))).collect()
}

/// Writes packets as fields of a `Trace`.
struct Packets<'a, W: Write> {
    out: &'a mut W,
    buf: Vec<u8>,
}

impl<W: Write> Packets<'_, W> {
    fn put(&mut self, p: &TracePacket) -> io::Result<()> {
        self.buf.clear();
        // `Trace.packet`: field 1, length-delimited.
        self.buf.push(0x0A);
        p.encode_length_delimited(&mut self.buf).map_err(io::Error::other)?;
        self.out.write_all(&self.buf)
    }
}

/// A track's uuid: the process's, or a thread's (its tid, above the process's).
fn uuid(pid: u32, tid: Option<u64>) -> u64 {
    let base = (u64::from(pid) << 32) ^ 0x5254_5452_4143_4500;
    tid.map_or(base, |t| base.wrapping_add(t + 1))
}

/// Writes `trace` as a Perfetto protobuf trace to `out`.
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<Exported> {
    let pid = trace.process.as_ref().map_or(1, |p| p.pid);
    let program = trace.process.as_ref().map_or("", |p| p.program.as_str());
    let mut w = Packets { out, buf: Vec::with_capacity(4096) };
    let descriptor = |desc: TrackDescriptor| TracePacket {
        optional_trusted_packet_sequence_id: Some(SeqId::TrustedPacketSequenceId(DESCRIPTORS)),
        data: Some(Data::TrackDescriptor(desc)),
        ..Default::default()
    };
    w.put(&descriptor(TrackDescriptor {
        uuid: Some(uuid(pid, None)),
        name: Some(program.to_owned()),
        process: Some(ProcessDescriptor {
            pid: Some(pid as i32),
            process_name: Some(program.to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    }))?;
    let mut sequences: HashMap<u64, Sequence> = HashMap::new();
    let mut names: HashMap<u64, String> = trace.threads().iter().map(|t| (u64::from(t.tid), t.label())).collect();
    let mut slices = Slices::default();
    let mut x = Exported::default();
    for entry in trace.entries() {
        let tid = Slices::tid(&entry);
        if !sequences.contains_key(&tid) {
            // The thread's track, described before its first event.
            let name = names.remove(&tid).unwrap_or_else(|| format!("lane-{}", entry.lane));
            w.put(&descriptor(TrackDescriptor {
                uuid: Some(uuid(pid, Some(tid))),
                name: Some(name.clone()),
                thread: Some(ThreadDescriptor {
                    pid: Some(pid as i32),
                    tid: Some(tid as i32),
                    thread_name: Some(name),
                }),
                parent_uuid: Some(uuid(pid, None)),
                ..Default::default()
            }))?;
            let seq = Sequence {
                id: DESCRIPTORS + 1 + sequences.len() as u32,
                track: uuid(pid, Some(tid)),
                cleared: false,
                names: HashMap::new(),
                categories: HashMap::new(),
                fields: HashMap::new(),
            };
            sequences.insert(tid, seq);
        }
        let seq = sequences.get_mut(&tid).expect("inserted above");
        let ts = entry.ts_ns;
        match &entry.kind {
            EntryKind::Enter { span } => {
                let (name, cat, fields) = slices.enter(tid, *span, ts);
                let p = seq.packet(ts, Type::SliceBegin, Some(&name), Some(&cat), &annotations(fields));
                w.put(&p)?;
            }
            EntryKind::Exit { span } => {
                if slices.exit(tid, *span, ts) {
                    w.put(&seq.packet(ts, Type::SliceEnd, None, None, &[]))?;
                    x.slices += 1;
                } else {
                    x.unmatched_exits += 1;
                }
            }
            EntryKind::Event(e) => {
                let name = e.message().map(str::to_owned).or_else(|| e.callsite.map(|c| c.name.clone()));
                let mut fields = annotations(&e.fields);
                fields.push(("level", AnnotationValue::StringValue(e.level().as_str().to_owned())));
                let p = seq.packet(ts, Type::Instant, Some(name.as_deref().unwrap_or("?")), Some(e.target()), &fields);
                w.put(&p)?;
                x.events += 1;
            }
            EntryKind::Lost { count } => {
                let fields = [("count", AnnotationValue::UintValue(*count))];
                w.put(&seq.packet(ts, Type::Instant, Some(LOST_NAME), Some("ringtrace"), &fields))?;
                x.lost_markers += 1;
            }
            other => slices.note(other, ts),
        }
    }
    let last = slices.last();
    for tid in slices.open_at_end() {
        if let Some(seq) = sequences.get_mut(&tid) {
            w.put(&seq.packet(last, Type::SliceEnd, None, None, &[]))?;
            x.slices += 1;
        }
    }
    Ok(x)
}
