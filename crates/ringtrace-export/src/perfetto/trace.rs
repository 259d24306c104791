//! The trace export: a trace's records, seen in place, as [`Record`]s for the
//! [`Writer`], whole or in [`halves`].

use std::io::{self, Write};

use foldhash::{HashMap, HashSet};

use super::Writer;
use crate::halves::{self, Half};
use crate::record::{Annotations, Plain, Record, Typed};
use crate::{each_view, Exported, Slices};
use ringtrace_tracing::decode::view::{self, ValueIn, View, ViewKind, ViewValues, Views};
use ringtrace_tracing::decode::{Callsite, Field, Trace, Value};

/// Hands `v` to `f` as its typed value: 128-bit integers and bytes as text.
fn typed<F: FnMut(&str, Typed<'_>)>(f: &mut F, name: &str, v: &Value) {
    match v {
        Value::U64(x) => f(name, Typed::Uint(*x)),
        Value::I64(x) => f(name, Typed::Int(*x)),
        Value::F64(x) => f(name, Typed::Double(*x)),
        Value::Bool(x) => f(name, Typed::Bool(*x)),
        Value::U128(x) => f(name, Typed::Str(&x.to_string())),
        Value::I128(x) => f(name, Typed::Str(&x.to_string())),
        Value::Str(s) | Value::Debug(s) | Value::Error(s) => f(name, Typed::Str(s)),
        Value::Bytes(b) => f(name, Typed::Str(&view::hex(b))),
    }
}

/// A span's fields.
struct SpanArgs<'f, 't>(&'f [Field<'t>]);

impl Annotations for SpanArgs<'_, '_> {
    fn annotate<F: FnMut(&str, Typed<'_>)>(&self, f: &mut F) {
        for field in self.0 {
            typed(f, &field.name, &field.value);
        }
    }
}

/// An event's fields, read in place, and its level (interned).
struct EventArgs<'t, 'b> {
    callsite: Option<&'t Callsite>,
    values: ViewValues<'b>,
}

impl Annotations for EventArgs<'_, '_> {
    fn annotate<F: FnMut(&str, Typed<'_>)>(&self, f: &mut F) {
        let cs = self.callsite;
        for (field, _, v) in self.values.iter() {
            let name = view::field_name(cs, field);
            match v {
                ValueIn::Str(s) | ValueIn::Debug(s) | ValueIn::Error(s) => f(&name, Typed::Str(s)),
                ValueIn::Number(v) => typed(f, &name, &v),
            }
        }
        let level = cs.map_or(ringtrace_tracing::Level::TRACE, |c| c.level);
        f("level", Typed::Interned(level.as_str()));
    }
}

/// An event's name: its message (a number's is empty), else its callsite's name. The
/// values are read up to the message (`tracing`'s macros put it first).
fn event_name<'b>(cs: Option<&'b Callsite>, values: ViewValues<'b>) -> &'b str {
    let m = cs.and_then(view::message_index);
    let message = m.and_then(|m| values.iter().find(|v| v.0 == m)).map(|(_, _, v)| match v {
        ValueIn::Str(s) | ValueIn::Debug(s) | ValueIn::Error(s) => s,
        ValueIn::Number(_) => "",
    });
    match (message, cs) {
        (Some(m), _) => m,
        (None, Some(c)) => c.name.as_str(),
        (None, None) => "?",
    }
}

/// The records of a run of records: the whole trace, or one of the halves an export
/// splits into ([`halves`]), each by a writer of its own.
struct Part<'t> {
    pid: u32,
    /// Thread names by tid.
    names: &'t HashMap<u64, String>,
    described: HashSet<u64>,
    /// The thread of the last record (described).
    last_tid: Option<u64>,
    slices: Slices<'t>,
    x: Exported,
}

impl<'t> Part<'t> {
    fn new(pid: u32, names: &'t HashMap<u64, String>) -> Self {
        Part {
            pid,
            names,
            described: HashSet::default(),
            last_tid: None,
            slices: Slices::default(),
            x: Exported::default(),
        }
    }

    /// Writes what `view` shows.
    fn take<W: Write + ?Sized>(&mut self, view: &View<'t, '_>, w: &mut Writer<'_, W>) -> io::Result<()> {
        let (pid, x) = (self.pid, &mut self.x);
        let tid = Slices::tid_of(view.thread, view.lane);
        if self.last_tid != Some(tid) && self.described.insert(tid) {
            // The thread's track, described before its first record.
            let lane;
            let name = match self.names.get(&tid) {
                Some(n) => n.as_str(),
                None => {
                    lane = format!("lane-{}", view.lane);
                    &lane
                }
            };
            w.put(&Plain::Thread { pid, tid, name, sort_index: None, category: None })?;
        }
        self.last_tid = Some(tid);
        let ts_ns = view.ts_ns;
        match &view.kind {
            ViewKind::Enter(span) => {
                let (name, category, fields) = self.slices.enter(tid, *span, ts_ns);
                let args = SpanArgs(fields);
                w.put(&Record::Begin { ts_ns, pid, tid, span: *span, name, category, args })?;
            }
            ViewKind::Exit(span) => {
                if self.slices.exit(tid, *span, ts_ns) {
                    w.put(&Plain::End { ts_ns, pid, tid, span: Some(*span), unfinished: false })?;
                    x.slices += 1;
                } else {
                    x.unmatched_exits += 1;
                }
            }
            ViewKind::Event { callsite, values } => {
                let cs = *callsite;
                let name = event_name(cs, *values);
                let args = EventArgs { callsite: cs, values: *values };
                let category = cs.map_or("?", |c| c.target.as_str());
                w.put(&Record::Instant { ts_ns, pid, tid, name, category, args })?;
                x.events += 1;
            }
            ViewKind::Lost(count) => {
                w.put(&Plain::Lost { ts_ns, pid, tid, count: *count })?;
                x.lost_markers += 1;
            }
            ViewKind::Other(other) => self.slices.note(other, ts_ns),
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

    /// Ends the slices still open at the end of the trace (on the threads this part
    /// wrote).
    fn close_open<W: Write + ?Sized>(&mut self, w: &mut Writer<'_, W>) -> io::Result<()> {
        let last = self.slices.last();
        for tid in self.slices.open_at_end() {
            if self.described.contains(&tid) {
                w.put(&Plain::End { ts_ns: last, pid: self.pid, tid, span: None, unfinished: true })?;
                self.x.slices += 1;
            }
        }
        Ok(())
    }
}

pub(super) fn write(trace: &Trace, out: &mut impl Write, progress: &mut dyn FnMut(u64, u64)) -> io::Result<Exported> {
    let pid = trace.process.as_ref().map_or(1, |p| p.pid);
    let program = trace.process.as_ref().map_or("", |p| p.program.as_str());
    let names: HashMap<u64, String> = trace.threads().iter().map(|t| (u64::from(t.tid), t.label())).collect();
    let process = Plain::Process { pid, tid: 0, name: program, sort_index: None, category: None };
    let total = trace.len() as u64;
    if let Some(parts) = halves::split(trace) {
        // The process, before the halves' blocks.
        let mut w = Writer::new(&mut *out);
        w.put(&process)?;
        w.finish()?;
        let first = parts[0].clone();
        let x = halves::run(trace, parts, out, progress, |half: Half<'_>, blocks| {
            let mut w = Writer::part(blocks, half.index as u32, 2);
            let mut part = Part::new(pid, &names);
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
            w.finish()?;
            part.x.unread_chunks = unread;
            Ok(part.x)
        })?;
        progress(total, total);
        return Ok(x);
    }
    let mut w = Writer::new(out);
    w.put(&process)?;
    let mut part = Part::new(pid, &names);
    let all = Views::new(trace, 0..u64::MAX, None);
    let unread = each_view(all, &mut |n| progress(n, total), |v| part.take(v, &mut w))?;
    part.close_open(&mut w)?;
    w.finish()?;
    part.x.unread_chunks = unread;
    Ok(part.x)
}
