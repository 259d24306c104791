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
//!   `Debug` values, errors and 128-bit integers), and the level as `level` (an interned
//!   string value: `InternedData.debug_annotation_string_values`).
//! * Lost events: an instant named `ringtrace: events lost` with a `count` annotation.
//! * Timestamps: the records' `CLOCK_MONOTONIC` nanoseconds, exact, written in the
//!   trace's default clock (no clock conversion is applied).
//!
//! The file is written packet by packet (`Trace.packet` is field 1, so each packet is a
//! `0x0A` tag, its length and its bytes): nothing but the current packet is held.

mod sequence;

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::hash_map::Entry;
use std::io::{self, Write};

use foldhash::HashMap;
use prost::Message;

use crate::halves::{self, Half};
use crate::{each_view, Exported, Slices, LOST_NAME};
use ringtrace_tracing::decode::view::{self, ValueIn, View, ViewKind, Views};
use ringtrace_tracing::decode::Trace;
use sequence::{args, Arg, Name, Sequence};

/// The Perfetto message types the export writes (generated from
/// `proto/perfetto_trace.proto`).
#[allow(missing_docs, missing_debug_implementations, clippy::all, clippy::pedantic)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/perfetto.protos.rs"));
}

use proto::trace_packet::{Data, OptionalTrustedPacketSequenceId as SeqId};
use proto::track_event::Type;
use proto::{ProcessDescriptor, ThreadDescriptor, TracePacket, TrackDescriptor};

/// The sequence of the track descriptors.
const DESCRIPTORS: u32 = 1;

/// Writes packets as fields of a `Trace`.
struct Packets<'a, W: Write + ?Sized> {
    out: &'a mut W,
    buf: Vec<u8>,
}

impl<W: Write + ?Sized> Packets<'_, W> {
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

/// A track descriptor's packet.
fn descriptor(desc: TrackDescriptor) -> TracePacket {
    TracePacket {
        optional_trusted_packet_sequence_id: Some(SeqId::TrustedPacketSequenceId(DESCRIPTORS)),
        data: Some(Data::TrackDescriptor(desc)),
        ..Default::default()
    }
}

/// The packets of a run of records: the whole trace, or one of the halves an export
/// splits into ([`halves`]), each with sequences of its own.
struct Part<'t> {
    pid: u32,
    /// This part's number and the parts in all: part `i`'s `n`-th sequence is
    /// `DESCRIPTORS + 1 + n * parts + i`, so that no two parts share a sequence.
    part: u32,
    parts: u32,
    /// Thread names by tid.
    names: &'t HashMap<u64, String>,
    sequences: HashMap<u64, Sequence<'t>>,
    slices: Slices<'t>,
    x: Exported,
    /// The packet each track event is made in, reused.
    p: TracePacket,
}

impl<'t> Part<'t> {
    fn new(pid: u32, part: u32, parts: u32, names: &'t HashMap<u64, String>) -> Self {
        Part {
            pid,
            part,
            parts,
            names,
            sequences: HashMap::default(),
            slices: Slices::default(),
            x: Exported::default(),
            p: TracePacket::default(),
        }
    }

    /// Writes what `view` shows.
    fn take<W: Write + ?Sized>(&mut self, view: &View<'t, '_>, w: &mut Packets<'_, W>) -> io::Result<()> {
        let (pid, p, x) = (self.pid, &mut self.p, &mut self.x);
        let tid = Slices::tid_of(view.thread, view.lane);
        let n = self.sequences.len() as u32;
        let seq = match self.sequences.entry(tid) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                // The thread's track, described before its first event.
                let name = self.names.get(&tid).cloned().unwrap_or_else(|| format!("lane-{}", view.lane));
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
                let id = DESCRIPTORS + 1 + n * self.parts + self.part;
                v.insert(Sequence::new(id, uuid(pid, Some(tid))))
            }
        };
        let ts = view.ts_ns;
        match &view.kind {
            ViewKind::Enter(span) => {
                let (name, cat, fields) = self.slices.enter(tid, *span, ts);
                let cat = Some(Name::Passing(&cat));
                seq.packet(p, ts, Type::SliceBegin, cat, args(fields), || Some(Name::Passing(&name)));
                w.put(p)?;
            }
            ViewKind::Exit(span) => {
                if self.slices.exit(tid, *span, ts) {
                    seq.packet(p, ts, Type::SliceEnd, None, [], || None);
                    w.put(p)?;
                    x.slices += 1;
                } else {
                    x.unmatched_exits += 1;
                }
            }
            ViewKind::Event { callsite, values } => {
                let cs = *callsite;
                // Named by its message (a number's is empty), else by its callsite: the
                // message is found as the fields go by.
                let m = cs.and_then(view::message_index);
                let message = Cell::new(None::<&str>);
                let fields = values.iter().map(|(field, _, v)| {
                    if Some(field) == m && message.get().is_none() {
                        message.set(Some(match v {
                            ValueIn::Str(s) | ValueIn::Debug(s) | ValueIn::Error(s) => s,
                            ValueIn::Number(_) => "",
                        }));
                    }
                    let name = match view::field_name(cs, field) {
                        Cow::Borrowed(n) => Name::Kept(n),
                        Cow::Owned(n) => Name::Made(n),
                    };
                    (name, Arg::In(v))
                });
                let name = || {
                    Some(match (message.get(), cs) {
                        (Some(m), _) => Name::Passing(m),
                        (None, Some(c)) => Name::Kept(&c.name),
                        (None, None) => Name::Kept("?"),
                    })
                };
                let level = cs.map_or(ringtrace_tracing::Level::TRACE, |c| c.level);
                let level = [(Name::Kept("level"), Arg::Kept(level.as_str()))];
                let target = Name::Kept(cs.map_or("?", |c| c.target.as_str()));
                seq.packet(p, ts, Type::Instant, Some(target), fields.chain(level), name);
                w.put(p)?;
                x.events += 1;
            }
            ViewKind::Lost(count) => {
                let fields = [(Name::Kept("count"), Arg::Uint(*count))];
                let cat = Some(Name::Kept("ringtrace"));
                seq.packet(p, ts, Type::Instant, cat, fields, || Some(Name::Kept(LOST_NAME)));
                w.put(p)?;
                x.lost_markers += 1;
            }
            ViewKind::Other(other) => self.slices.note(other, ts),
            ViewKind::Bad => {}
        }
        Ok(())
    }

    /// Takes note of what a span record of an earlier part says (names, slices open),
    /// writing nothing.
    fn replay(&mut self, view: &View<'t, '_>) {
        let tid = Slices::tid_of(view.thread, view.lane);
        match &view.kind {
            ViewKind::Enter(span) => {
                self.slices.enter(tid, *span, view.ts_ns);
            }
            ViewKind::Exit(span) => {
                self.slices.exit(tid, *span, view.ts_ns);
            }
            ViewKind::Other(other) => self.slices.note(other, view.ts_ns),
            _ => {}
        }
    }

    /// Ends the slices still open at the end of the trace.
    fn close_open<W: Write + ?Sized>(&mut self, w: &mut Packets<'_, W>) -> io::Result<()> {
        let last = self.slices.last();
        for tid in self.slices.open_at_end() {
            if let Some(seq) = self.sequences.get_mut(&tid) {
                seq.packet(&mut self.p, last, Type::SliceEnd, None, [], || None);
                w.put(&self.p)?;
                self.x.slices += 1;
            }
        }
        Ok(())
    }
}

/// Writes `trace` as a Perfetto protobuf trace to `out`.
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<Exported> {
    write_with_progress(trace, out, &mut |_, _| {})
}

/// [`write()`], telling `progress` records done and records in all as it goes (see
/// [`PROGRESS_EVERY`](super::PROGRESS_EVERY)).
///
/// A trace file of more than 65,536 records is written by two threads where the
/// machine has two CPUs: the records before a time in the middle and those after, each
/// half on sequences of its own (the packets are the same, but for their sequence
/// numbers, in another order).
pub fn write_with_progress(
    trace: &Trace,
    out: &mut impl Write,
    progress: &mut dyn FnMut(u64, u64),
) -> io::Result<Exported> {
    let pid = trace.process.as_ref().map_or(1, |p| p.pid);
    let program = trace.process.as_ref().map_or("", |p| p.program.as_str());
    let mut w = Packets { out, buf: Vec::with_capacity(4096) };
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
    let names: HashMap<u64, String> = trace.threads().iter().map(|t| (u64::from(t.tid), t.label())).collect();
    let total = trace.len() as u64;
    if let Some(parts) = halves::split(trace) {
        let first = parts[0].clone();
        let x = halves::run(trace, parts, w.out, progress, |half: Half<'_>, blocks| {
            let mut w = Packets { out: blocks, buf: Vec::with_capacity(4096) };
            let mut part = Part::new(pid, half.index as u32, 2, &names);
            if half.index == 1 {
                // The names of the spans the first half made, and the slices it left
                // open, which end in this one.
                let mut spans = Views::new(trace, first.clone(), Some(view::is_span_kind));
                while let Some(v) = spans.next() {
                    part.replay(&v);
                }
            }
            let views = Views::new(trace, half.times, None);
            let unread = each_view(views, &mut |n| half.done.set(n), |v| part.take(v, &mut w))?;
            if half.index == 1 {
                part.close_open(&mut w)?;
            }
            part.x.unread_chunks = unread;
            Ok(part.x)
        })?;
        progress(total, total);
        return Ok(x);
    }
    let mut part = Part::new(pid, 0, 1, &names);
    let all = Views::new(trace, 0..u64::MAX, None);
    let unread = each_view(all, &mut |n| progress(n, total), |v| part.take(v, &mut w))?;
    part.close_open(&mut w)?;
    part.x.unread_chunks = unread;
    Ok(part.x)
}
