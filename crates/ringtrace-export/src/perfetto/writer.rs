//! [`Writer`]: records as Perfetto packets.

use std::fmt;
use std::io::{self, Write};

use foldhash::HashMap;
use prost::Message;

use super::encode::{Encode, Hand, Head, Str, Table as T, Val};
use super::intern::Table;
use super::proto::trace_packet::{Data, OptionalTrustedPacketSequenceId as SeqId};
use super::proto::track_event::Type;
use super::proto::{ProcessDescriptor, ThreadDescriptor, TracePacket, TrackDescriptor};
use crate::record::{Annotations, Record, Typed};
use crate::LOST_NAME;

/// The sequence of the track descriptors.
pub(super) const DESCRIPTORS: u32 = 1;
const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;
/// Bytes gathered before they are written out.
const FLUSH_AT: usize = 64 << 10;

/// A process's track uuid: its pid in the upper 32 bits, with a constant.
pub fn process_uuid(pid: u32) -> u64 {
    (u64::from(pid) << 32) ^ 0x5254_5452_4143_4500
}

/// A thread's track uuid: its process's, plus 1 plus its tid (wrapping).
pub fn thread_uuid(pid: u32, tid: u64) -> u64 {
    process_uuid(pid).wrapping_add(tid.wrapping_add(1))
}

/// A pid or tid as Perfetto's `int32`: above `i32::MAX`, `i32::MAX`.
fn id32(id: u64) -> i32 {
    i32::try_from(id).unwrap_or(i32::MAX)
}

/// Threads remembered in [`Core::sequence`]'s cache.
const RECENT: usize = 32;

/// A thread's place in [`Core::sequence`]'s cache: the low bits of its tid
/// (tids are numbered one after another, by the kernel as by the fleet export).
#[inline]
fn recent(tid: u64) -> usize {
    tid as usize % RECENT
}

/// A thread's packet sequence: its number, its track, and what it has interned.
struct Sequence {
    id: u32,
    track: u64,
    cleared: bool,
    names: Table,
    categories: Table,
    fields: Table,
    /// String values that repeat from record to record (the level).
    strings: Table,
}

/// A lost-event marker's annotation.
struct Count(u64);

impl Annotations for Count {
    fn annotate<F: FnMut(&str, Typed<'_>)>(&self, f: &mut F) {
        f("count", Typed::Uint(self.0));
    }
}

/// What the writer knows of a thread: described; its sequence, once it has one.
type Thread = Option<usize>;

/// The records of a writer as packets, whatever encodes them ([`Hand`], or prost in
/// the tests).
pub(super) struct Core<E> {
    part: u32,
    parts: u32,
    threads: HashMap<(u32, u64), Thread>,
    sequences: Vec<Sequence>,
    /// Recent threads and their sequences, by [`recent`] (`usize::MAX`: none): records
    /// of a few threads interleaved find theirs without hashing.
    recent: [((u32, u64), usize); RECENT],
    pub(super) enc: E,
}

impl<E: Encode> Core<E> {
    pub(super) fn new(part: u32, parts: u32, enc: E) -> Self {
        let parts = parts.max(1);
        Core {
            part: part % parts,
            parts,
            threads: HashMap::default(),
            sequences: Vec::new(),
            recent: [((0, 0), usize::MAX); RECENT],
            enc,
        }
    }

    /// A track descriptor's packet.
    fn descriptor(out: &mut Vec<u8>, desc: TrackDescriptor) -> io::Result<()> {
        let p = TracePacket {
            optional_trusted_packet_sequence_id: Some(SeqId::TrustedPacketSequenceId(DESCRIPTORS)),
            data: Some(Data::TrackDescriptor(desc)),
            ..Default::default()
        };
        out.push(0x0A);
        p.encode_length_delimited(out).map_err(io::Error::other)
    }

    fn describe(&mut self, out: &mut Vec<u8>, pid: u32, tid: u64, name: Option<&str>) -> io::Result<()> {
        self.threads.entry((pid, tid)).or_insert(None);
        Self::descriptor(
            out,
            TrackDescriptor {
                uuid: Some(thread_uuid(pid, tid)),
                name: name.map(str::to_owned),
                thread: Some(ThreadDescriptor {
                    pid: Some(id32(u64::from(pid))),
                    tid: Some(id32(tid)),
                    thread_name: name.map(str::to_owned),
                }),
                parent_uuid: Some(process_uuid(pid)),
                ..Default::default()
            },
        )
    }

    /// The sequence of `(pid, tid)`'s track events, made (and the thread described,
    /// unnamed, if it was not) on its first.
    fn sequence(&mut self, out: &mut Vec<u8>, pid: u32, tid: u64) -> io::Result<usize> {
        let at = recent(tid);
        let (key, i) = self.recent[at];
        if key == (pid, tid) && i != usize::MAX {
            return Ok(i);
        }
        let i = match self.threads.get(&(pid, tid)) {
            Some(Some(i)) => *i,
            known => {
                if known.is_none() {
                    self.describe(out, pid, tid, None)?;
                }
                let n = self.sequences.len() as u32;
                let id = n.saturating_mul(self.parts).saturating_add(DESCRIPTORS + 1 + self.part);
                self.sequences.push(Sequence {
                    id,
                    track: thread_uuid(pid, tid),
                    cleared: false,
                    names: Table::new(),
                    categories: Table::new(),
                    fields: Table::new(),
                    strings: Table::new(),
                });
                let i = self.sequences.len() - 1;
                self.threads.insert((pid, tid), Some(i));
                i
            }
        };
        self.recent[at] = ((pid, tid), i);
        Ok(i)
    }

    /// Appends `r`'s packets to `out`.
    pub(super) fn put<A: Annotations>(&mut self, r: &Record<'_, A>, out: &mut Vec<u8>) -> io::Result<()> {
        match r {
            Record::Process { pid, name, .. } => Self::descriptor(
                out,
                TrackDescriptor {
                    uuid: Some(process_uuid(*pid)),
                    name: Some((*name).to_owned()),
                    process: Some(ProcessDescriptor {
                        pid: Some(id32(u64::from(*pid))),
                        process_name: Some((*name).to_owned()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ),
            Record::Thread { pid, tid, name, .. } => self.describe(out, *pid, *tid, Some(name)),
            Record::Instant { ts_ns, pid, tid, name, category, args } => {
                self.event(out, (*ts_ns, *pid, *tid), Type::Instant, Some(category), args, Some(name))
            }
            Record::Begin { ts_ns, pid, tid, name, category, args, .. } => {
                self.event(out, (*ts_ns, *pid, *tid), Type::SliceBegin, Some(category), args, Some(name))
            }
            Record::End { ts_ns, pid, tid, .. } => {
                self.event(out, (*ts_ns, *pid, *tid), Type::SliceEnd, None, &(), None)
            }
            Record::Lost { ts_ns, pid, tid, count } => {
                let at = (*ts_ns, *pid, *tid);
                self.event(out, at, Type::Instant, Some("ringtrace"), &Count(*count), Some(LOST_NAME))
            }
        }
    }

    /// A track event at `(ts, pid, tid)`.
    fn event<A: Annotations>(
        &mut self,
        out: &mut Vec<u8>,
        (ts, pid, tid): (u64, u32, u64),
        kind: Type,
        category: Option<&str>,
        args: &A,
        name: Option<&str>,
    ) -> io::Result<()> {
        let i = self.sequence(out, pid, tid)?;
        let (seq, enc) = (&mut self.sequences[i], &mut self.enc);
        enc.start();
        if let Some(c) = category {
            let c = intern(enc, &mut seq.categories, T::Categories, c);
            enc.category(c);
        }
        args.annotate(&mut |key, value| {
            let key = intern(enc, &mut seq.fields, T::Fields, key);
            let value = match value {
                Typed::Bool(b) => Val::Bool(b),
                Typed::Uint(v) => Val::Uint(v),
                Typed::Int(v) => Val::Int(v),
                Typed::Double(d) => Val::Double(d),
                Typed::Str(s) => Val::Str(s),
                Typed::Interned(s) => match intern(enc, &mut seq.strings, T::Strings, s) {
                    Str::Iid(iid) => Val::StrIid(iid),
                    Str::Text(s) => Val::Str(s),
                },
            };
            enc.annotation(key, value);
        });
        let name = name.map(|n| intern(enc, &mut seq.names, T::Names, n));
        let (flags, track) = if seq.cleared {
            (SEQ_NEEDS_INCREMENTAL_STATE, None)
        } else {
            seq.cleared = true;
            // Every track event of the sequence goes on its thread's track: said once,
            // as Perfetto's SDK does, rather than in each packet.
            (SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE, Some(seq.track))
        };
        enc.finish(out, &Head { ts, sequence: seq.id, kind, name, flags, track });
        Ok(())
    }
}

/// `s` by its iid in `table` (sent to `enc` if new), or in full once the table is full.
#[inline]
fn intern<'s>(enc: &mut impl Encode, table: &mut Table, which: T, s: &'s str) -> Str<'s> {
    match table.intern(s) {
        Some((iid, new)) => {
            if new {
                enc.interned(which, iid, s);
            }
            Str::Iid(iid)
        }
        None => Str::Text(s),
    }
}

/// Writes [`Record`]s as a Perfetto protobuf trace (a `Trace`'s `packet` fields, one
/// after the other): what the [module docs](super) describe, for any records.
///
/// * A process is a track (`ProcessDescriptor`: pid, name) of uuid
///   [`process_uuid`]`(pid)`; a thread a track (`ThreadDescriptor`: pid, tid, name)
///   of uuid [`thread_uuid`]`(pid, tid)` under its process's. pids and tids are
///   Perfetto's `int32`s: above `i32::MAX` they are written as `i32::MAX` (the tracks
///   stay apart by uuid). Descriptors are written on sequence 1 as the records come;
///   `sort_index` and `category` are not written (Perfetto orders the tracks itself).
/// * Each thread's track events (instants, slices begun and ended, lost-event
///   markers: an instant named [`LOST_NAME`] of category `ringtrace` with a `count`)
///   go on a packet sequence of their own, numbered in the order of each thread's
///   first event: the `n`-th (from 0) is `2 + n` (for a [part](Writer::part),
///   `2 + n * parts + index`). Its first packet clears the sequence's incremental
///   state and sets the thread's track as the sequence's default
///   (`TracePacketDefaults`); event names, categories, annotation names and
///   [`Typed::Interned`] string values are interned per sequence (`InternedData`, at
///   most 4096 of each, then written in full). A thread with no `Thread` record
///   before its first event is described then, unnamed.
/// * Annotations ([`Annotations`]) are debug annotations of their types.
///
/// Packets are encoded by hand (the bytes prost writes for the same message) into a
/// reused buffer, written out in 64 KiB pieces; [`finish`](Writer::finish) writes the
/// rest and flushes.
///
/// ```
/// use prost::Message;
/// use ringtrace_export::perfetto::{proto, Writer};
/// use ringtrace_export::record::{Plain, Record};
///
/// let mut out = Vec::new();
/// let mut w = Writer::new(&mut out);
/// w.put(&Plain::Process { pid: 1, tid: 2, name: "web-1", sort_index: None, category: None })?;
/// w.put(&Plain::Thread { pid: 1, tid: 2, name: "worker", sort_index: None, category: None })?;
/// let mut args = serde_json::Map::new();
/// args.insert("seq".into(), 7.into());
/// w.put(&Record::Instant { ts_ns: 1_500, pid: 1, tid: 2, name: "record", category: "ringtrace", args: &args })?;
/// w.finish()?;
/// let trace = proto::Trace::decode(&out[..])?;
/// assert_eq!(trace.packet.len(), 3);
/// assert_eq!(trace.packet[2].timestamp, Some(1_500));
/// use proto::trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId;
/// assert_eq!(trace.packet[2].optional_trusted_packet_sequence_id, Some(TrustedPacketSequenceId(2)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Writer<'w, W: Write + ?Sized> {
    out: &'w mut W,
    buf: Vec<u8>,
    core: Core<Hand>,
}

impl<W: Write + ?Sized> fmt::Debug for Writer<'_, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("sequences", &self.core.sequences.len())
            .field("buffered", &self.buf.len())
            .finish_non_exhaustive()
    }
}

impl<'w, W: Write + ?Sized> Writer<'w, W> {
    /// A writer of a whole trace.
    pub fn new(out: &'w mut W) -> Self {
        Writer::part(out, 0, 1)
    }

    /// A writer of part `index` (from 0) of `parts` written into one trace, each by a
    /// writer of its own: their sequences are apart (part `index`'s `n`-th sequence is
    /// `2 + n * parts + index`). The track descriptors of all are on sequence 1.
    pub fn part(out: &'w mut W, index: u32, parts: u32) -> Self {
        Writer { out, buf: Vec::with_capacity(FLUSH_AT + 4096), core: Core::new(index, parts, Hand::default()) }
    }

    /// Writes one record.
    pub fn put<A: Annotations>(&mut self, r: &Record<'_, A>) -> io::Result<()> {
        self.core.put(r, &mut self.buf)?;
        if self.buf.len() >= FLUSH_AT {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes what is gathered and flushes the output.
    pub fn finish(self) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.out.flush()
    }
}
