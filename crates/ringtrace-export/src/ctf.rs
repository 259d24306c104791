//! CTF 1.8, the Common Trace Format that babeltrace2 and Trace Compass read (the
//! specification: "Common Trace Format (CTF) v1.8.3", EfficiOS / DiaMon workgroup).
//!
//! A trace is a directory: `metadata` (TSDL text) and one binary stream file per
//! thread (`stream-TID`), all of one stream class. A trace's entries and a fleet's
//! records (`ringtrace-ship`'s) are written by one [`Writer`], over the
//! [record model](crate::record): a trace's with [`Tracks::Threads`], a fleet's with
//! [`Tracks::Named`] (see [`Layout`]).
//!
//! * Event classes come from the callsites: one per callsite and per sequence of value
//!   types it was recorded with (a `tracing` field's type is fixed at almost every
//!   callsite; where it is not, each shape is a class of its own, so no value is
//!   converted). A class is named `TARGET:NAME` after its callsite and its fields are
//!   named after the callsite's (characters a TSDL identifier cannot hold become `_`).
//!   Integers, doubles and bools (as `uint8_t` 0 or 1) keep their type; `&str`,
//!   `Debug` and error values and 128-bit integers are strings. A CTF string ends at
//!   its first NUL, so text is escaped where it must be ([`put_string`]): a NUL inside
//!   it is written as the two characters `\0` and a backslash as the two characters
//!   `\\`; all other text is written as it is.
//! * Spans: `ringtrace:span_enter { id, name }` and `ringtrace:span_exit { id }` (`?` as
//!   the name of a span whose `new span` record the trace no longer holds).
//! * Lost events: the packet context's `events_discarded`, the free-running count of
//!   events the thread lost, which babeltrace2 reports ("Tracer discarded N events");
//!   a loss ends the packet, so the count lands between the right events.
//! * Time: the `mono` clock, in nanoseconds, its offset the wall-clock time of the
//!   trace's `CLOCK_MONOTONIC` origin (from the process chunk), so readers print
//!   wall-clock times; values are exact.
//! * Packets: at most 1 MiB of events, every field byte-aligned, `content_size` and
//!   `packet_size` (in bits) the packet's exact length.

use std::io;
use std::path::Path;

use crate::record::{Plain, Record};
use crate::{each_view, Exported, Slices};
use ringtrace_tracing::decode::view::{self, ValueIn, ViewKind, ViewValues, Views};
use ringtrace_tracing::decode::{Callsite, Trace, Value};

mod class;
mod text;
mod writer;

pub use class::{Class, CtfArgs, Event, Kind, Shape};
pub use text::put_string;
pub use writer::{Files, Layout, Tracks, Writer, METADATA_HEAD};

/// A value's CTF type.
fn kind_of(v: &Value) -> Kind {
    match v {
        Value::U64(_) => Kind::U64,
        Value::I64(_) => Kind::I64,
        Value::F64(_) => Kind::F64,
        Value::Bool(_) => Kind::Bool,
        _ => Kind::Text,
    }
}

fn kind_of_in(v: &ValueIn<'_>) -> Kind {
    match v {
        ValueIn::Number(v) => kind_of(v),
        _ => Kind::Text,
    }
}

/// The syslog-style log level LTTng gives `tracing`'s levels (ERR 3, WARNING 4, INFO
/// 6, DEBUG 7 for `DEBUG` and `TRACE`): an event class's `loglevel`.
pub fn loglevel(level: ringtrace_tracing::Level) -> u8 {
    match level {
        ringtrace_tracing::Level::ERROR => 3,
        ringtrace_tracing::Level::WARN => 4,
        ringtrace_tracing::Level::INFO => 6,
        _ => 7,
    }
}

/// A trace event's values, seen in place: one class per callsite and shape.
#[derive(Clone, Copy)]
struct Values<'t, 'b> {
    callsite: Option<&'t Callsite>,
    values: ViewValues<'b>,
}

impl CtfArgs for Values<'_, '_> {
    fn write_ctf(&self, ev: &mut Event<'_>) -> io::Result<()> {
        // The event's values first, its class from their kinds.
        let kinds = self.values.iter().map(|(_, _, v)| {
            let kind = kind_of_in(&v);
            match v {
                ValueIn::Number(Value::U64(v)) => ev.u64(v),
                ValueIn::Number(Value::I64(v)) => ev.i64(v),
                ValueIn::Number(Value::F64(v)) => ev.f64(v),
                ValueIn::Number(Value::Bool(v)) => ev.bool(v),
                ValueIn::Number(Value::U128(v)) => ev.text(&v.to_string()),
                ValueIn::Number(Value::I128(v)) => ev.text(&v.to_string()),
                ValueIn::Number(Value::Str(v) | Value::Debug(v) | Value::Error(v)) => ev.text(&v),
                ValueIn::Number(Value::Bytes(b)) => ev.text(&view::hex(&b)),
                ValueIn::Str(v) | ValueIn::Debug(v) | ValueIn::Error(v) => ev.text(v),
            }
            kind
        });
        let shape = Shape::of(kinds);
        let (callsite, values) = (self.callsite, self.values);
        let number = callsite.map_or(0, |c| c.id);
        ev.class(u64::from(number), shape, || Class {
            name: callsite.map_or_else(|| format!("callsite{number}"), |c| format!("{}:{}", c.target, c.name)),
            loglevel: Some(loglevel(callsite.map_or(ringtrace_tracing::Level::TRACE, |c| c.level))),
            fields: values
                .iter()
                .map(|(f, _, v)| (view::field_name(callsite, f).to_string(), kind_of_in(&v)))
                .collect(),
        });
        Ok(())
    }
}

/// Writes `trace` as a CTF 1.8 trace into the directory `dir` (made mode 0700 if
/// missing; its `metadata` and `stream-*` files are replaced). Each file is written
/// beside its name as `NAME.partial.PID.N`, created new with `O_CREAT | O_EXCL |
/// O_NOFOLLOW` and mode 0600, and renamed into place once all are written (`metadata`
/// last): no file or symlink planted in `dir` is written through or truncated.
pub fn write(trace: &Trace, dir: &Path) -> io::Result<Exported> {
    write_with_progress(trace, dir, &mut |_, _| {})
}

/// [`write()`], telling `progress` records done and records in all as it goes (see
/// [`PROGRESS_EVERY`](super::PROGRESS_EVERY)).
pub fn write_with_progress(trace: &Trace, dir: &Path, progress: &mut dyn FnMut(u64, u64)) -> io::Result<Exported> {
    let process = trace.process.clone().unwrap_or(ringtrace_tracing::decode::Process {
        pid: 0,
        realtime_ns: 0,
        monotonic_ns: 0,
        program: String::new(),
    });
    // The trace's UUID: from the process and its clock anchor (a trace exported twice
    // is the same trace).
    let mut uuid = [0u8; 16];
    uuid[..8].copy_from_slice(&(u64::from(process.pid) ^ process.realtime_ns).to_le_bytes());
    uuid[8..].copy_from_slice(&process.monotonic_ns.to_le_bytes());
    let layout = Layout {
        tracks: Tracks::Threads,
        files: Files::Replace,
        uuid: Some(uuid),
        tracer: "ringtrace",
        clock: "mono",
        clock_description: "CLOCK_MONOTONIC",
        clock_offset_ns: process.realtime_ns.saturating_sub(process.monotonic_ns),
        clock_absolute: false,
    };
    let mut w = Writer::new(dir, layout)?;
    let pid = process.pid;
    w.put(&Plain::Process { pid, tid: 0, name: &process.program, sort_index: None, category: None })?;
    let mut x = Exported::default();
    // Span names, from their `new span` records.
    let mut slices = Slices::default();
    let (all, total) = (Views::new(trace, 0..u64::MAX, None), trace.len() as u64);
    x.unread_chunks = each_view(all, &mut |n| progress(n, total), |entry| {
        let tid = entry.thread.map_or(u32::MAX - entry.lane, |t| t.tid);
        let (ts_ns, tid64) = (entry.ts_ns, u64::from(tid));
        match &entry.kind {
            ViewKind::Event { callsite, values } => {
                let args = Values { callsite: *callsite, values: *values };
                w.put(&Record::Instant { ts_ns, pid, tid: tid64, name: "", category: "", args })?;
                x.events += 1;
            }
            ViewKind::Enter(span) => {
                let (name, _, _) = slices.enter(tid64, *span, ts_ns);
                w.put(&Plain::Begin { ts_ns, pid, tid: tid64, span: *span, name, category: "", args: () })?;
                x.slices += 1;
            }
            ViewKind::Exit(span) => {
                slices.exit(tid64, *span, ts_ns);
                w.put(&Plain::End { ts_ns, pid, tid: tid64, span: Some(*span), unfinished: false })?;
            }
            ViewKind::Lost(count) => {
                w.put(&Plain::Lost { ts_ns, pid, tid: tid64, count: *count })?;
                x.lost_markers += 1;
            }
            ViewKind::Other(other) => slices.note(other, ts_ns),
            ViewKind::Bad => {}
        }
        Ok(())
    })?;
    w.finish()?;
    Ok(x)
}
