//! Chrome's Trace Event Format (the JSON that `chrome://tracing`, Perfetto's UI and
//! `trace_processor` read; specification: "Trace Event Format", Google, the document
//! linked from the Catapult project's trace-viewer pages).
//!
//! * `{"traceEvents": [...], "displayTimeUnit": "ns"}`, one event a line.
//! * `M` metadata: the process's name, each thread's name and sort order.
//! * Spans: `B` when a thread enters one and `E` when it exits, on that thread, with the
//!   span's fields (as known when entered) in `args`. An `E` whose `B` the trace no
//!   longer holds (a flight recorder overwrote it) is left out, since the format nests
//!   `B`/`E` per thread; a `B` still open at the end of the trace is closed at the last
//!   timestamp, marked `"unfinished": true`.
//! * Events: `i` (thread scope), named by their message (else their callsite's name),
//!   `cat` their target; `args` holds every field, the level, and `cut`/`dropped` where
//!   values were bounded.
//! * Values in `args` are written as `ringtrace decode --format json` writes them
//!   ([`ringtrace_tracing::decode::text`]): integers beyond ±(2^53 - 1), which the viewers (all
//!   JavaScript, reading numbers as doubles) would round, and 128-bit ones as decimal
//!   strings; NaN and the infinities as the strings `"NaN"`, `"Infinity"` and
//!   `"-Infinity"`.
//! * Lost events: an `i` event named `ringtrace: events lost` with `args.count`, where
//!   the thread lost them.
//! * `ts` in microseconds, written as decimal text with three fraction digits: exact to
//!   the nanosecond (a JSON double would round past 2^53 ns).

use std::io::{self, Write};

use serde_json::{json, Map, Value as Json};

use crate::record::{Args, Plain, Record};
use crate::{each_entry, Exported, Slices, LOST_NAME};
use ringtrace_tracing::decode::text::{json_id, json_int, json_line_fields};
use ringtrace_tracing::decode::{EntryKind, Event, Trace};

/// Bytes gathered before they are written out.
const FLUSH_AT: usize = 64 << 10;

/// Writes [`Record`]s as Chrome's trace events: `{"displayTimeUnit":"ns",
/// "traceEvents":[...]}`, one event a line. Processes and threads are `M` metadata
/// events (`process_name`, `process_sort_index`, `thread_name`, `thread_sort_index`),
/// without a `ts`, with a `cat` where the record gives one; instants are `i` events of
/// thread scope (`"s":"t"`), slices `B` and `E` (every one with a `name` and a `cat`);
/// `ts` in microseconds as decimal text with three fraction digits, exact to the
/// nanosecond. [`finish`](Writer::finish) ends the document.
#[derive(Debug)]
pub struct Writer<'w, W: Write + ?Sized> {
    out: &'w mut W,
    buf: Vec<u8>,
    first: bool,
}

impl<'w, W: Write + ?Sized> Writer<'w, W> {
    /// Starts the document.
    pub fn new(out: &'w mut W) -> Self {
        let mut buf = Vec::with_capacity(FLUSH_AT + 4096);
        buf.extend_from_slice(br#"{"displayTimeUnit":"ns","traceEvents":["#);
        Writer { out, buf, first: true }
    }

    /// Starts an event's line.
    fn start(&mut self) {
        self.buf.extend_from_slice(if self.first { b"\n" } else { b",\n" });
        self.first = false;
    }

    /// A metadata event: `name` with `args: {key: value}`, and `cat` where given.
    fn meta(&mut self, name: &str, pid: u32, tid: u64, cat: Option<&str>, arg: (&str, &Json)) -> io::Result<()> {
        self.start();
        write!(self.buf, r#"{{"ph":"M","name":"{name}""#)?;
        if let Some(cat) = cat {
            self.buf.extend_from_slice(br#","cat":"#);
            serde_json::to_writer(&mut self.buf, cat)?;
        }
        write!(self.buf, r#","pid":{pid},"tid":{tid},"args":{{"{}":{}}}}}"#, arg.0, arg.1)
    }

    /// The members every event of a thread starts with, after `ph`.
    fn head(&mut self, name: &str, category: &str, ts_ns: u64, pid: u32, tid: u64) -> io::Result<()> {
        let b = &mut self.buf;
        b.extend_from_slice(br#","name":"#);
        serde_json::to_writer(&mut *b, name)?;
        b.extend_from_slice(br#","cat":"#);
        serde_json::to_writer(&mut *b, category)?;
        write!(b, r#","ts":{}.{:03},"pid":{pid},"tid":{tid}"#, ts_ns / 1000, ts_ns % 1000)
    }

    /// Writes one record.
    pub fn put<A: Args>(&mut self, r: &Record<'_, A>) -> io::Result<()> {
        match r {
            Record::Process { pid, tid, name, sort_index, category } => {
                self.meta("process_name", *pid, *tid, *category, ("name", &Json::from(*name)))?;
                if let Some(i) = sort_index {
                    self.meta("process_sort_index", *pid, *tid, *category, ("sort_index", &Json::from(*i)))?;
                }
            }
            Record::Thread { pid, tid, name, sort_index, category } => {
                self.meta("thread_name", *pid, *tid, *category, ("name", &Json::from(*name)))?;
                if let Some(i) = sort_index {
                    self.meta("thread_sort_index", *pid, *tid, *category, ("sort_index", &Json::from(*i)))?;
                }
            }
            Record::Instant { ts_ns, pid, tid, name, category, args } => {
                self.start();
                self.buf.extend_from_slice(br#"{"ph":"i","s":"t""#);
                self.head(name, category, *ts_ns, *pid, *tid)?;
                self.buf.extend_from_slice(br#","args":"#);
                args.write_json(&mut self.buf)?;
                self.buf.push(b'}');
            }
            Record::Begin { ts_ns, pid, tid, name, category, args, .. } => {
                self.start();
                self.buf.extend_from_slice(br#"{"ph":"B""#);
                self.head(name, category, *ts_ns, *pid, *tid)?;
                self.buf.extend_from_slice(br#","args":"#);
                args.write_json(&mut self.buf)?;
                self.buf.push(b'}');
            }
            Record::Lost { ts_ns, pid, tid, count } => {
                self.start();
                self.buf.extend_from_slice(br#"{"ph":"i","s":"t""#);
                self.head(LOST_NAME, "ringtrace", *ts_ns, *pid, *tid)?;
                write!(self.buf, r#","args":{{"count":{}}}}}"#, json_int(i128::from(*count)))?;
            }
            Record::End { ts_ns, pid, tid, unfinished, .. } => {
                self.start();
                self.buf.extend_from_slice(br#"{"ph":"E""#);
                self.head("", "", *ts_ns, *pid, *tid)?;
                self.buf.extend_from_slice(if *unfinished { br#","args":{"unfinished":true}}"# } else { b"}" });
            }
        }
        if self.buf.len() >= FLUSH_AT {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Ends the document and flushes the writer.
    pub fn finish(mut self) -> io::Result<()> {
        self.buf.extend_from_slice(b"\n]}\n");
        self.out.write_all(&self.buf)?;
        self.out.flush()
    }
}

fn event_args(e: &Event<'_>) -> Map<String, Json> {
    let mut args = json_line_fields(&e.fields);
    args.insert("level".into(), json!(e.level().as_str()));
    let cut: Vec<&str> = e.fields.iter().filter(|f| f.cut).map(|f| f.name.as_ref()).collect();
    if !cut.is_empty() {
        args.insert("cut".into(), json!(cut));
    }
    if e.dropped > 0 {
        args.insert("dropped".into(), json!(e.dropped));
    }
    args
}

/// Writes `trace` as Chrome trace JSON to `out`.
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<Exported> {
    write_with_progress(trace, out, &mut |_, _| {})
}

/// [`write()`], telling `progress` records done and records in all as it goes (see
/// [`PROGRESS_EVERY`](super::PROGRESS_EVERY)).
pub fn write_with_progress(
    trace: &Trace,
    out: &mut impl Write,
    progress: &mut dyn FnMut(u64, u64),
) -> io::Result<Exported> {
    let pid = trace.process.as_ref().map_or(1, |p| p.pid);
    let program = trace.process.as_ref().map_or("", |p| p.program.as_str());
    let mut x = Exported::default();
    let mut w = Writer::new(out);
    w.put(&Plain::Process { pid, tid: 0, name: program, sort_index: None, category: Some("") })?;
    for (i, t) in trace.threads().iter().enumerate() {
        let label = t.label();
        w.put(&Plain::Thread {
            pid,
            tid: u64::from(t.tid),
            name: &label,
            sort_index: Some(i as u64),
            category: Some(""),
        })?;
    }
    let mut slices = Slices::default();
    x.unread_chunks = each_entry(trace, progress, |entry| {
        let tid = Slices::tid(entry);
        let ts_ns = entry.ts_ns;
        match &entry.kind {
            EntryKind::Enter { span } => {
                let (name, cat, fields) = slices.enter(tid, *span, ts_ns);
                let mut args = json_line_fields(fields);
                // A decimal string: span ids reach past 2^53 (those made through an
                // `Emitter` have bit 63 set), where a JSON number loses digits.
                args.insert("span_id".into(), json_id(*span));
                w.put(&Record::Begin { ts_ns, pid, tid, span: *span, name, category: cat, args })?;
            }
            EntryKind::Exit { span } => {
                if slices.exit(tid, *span, ts_ns) {
                    w.put(&Plain::End { ts_ns, pid, tid, span: Some(*span), unfinished: false })?;
                    x.slices += 1;
                } else {
                    x.unmatched_exits += 1;
                }
            }
            EntryKind::Event(e) => {
                let name = e.message().map(str::to_owned).or_else(|| e.callsite.map(|c| c.name.clone()));
                let name = name.as_deref().unwrap_or("?");
                let (ts_ns, category, args) = (e.ts_ns, e.target(), event_args(e));
                w.put(&Record::Instant { ts_ns, pid, tid, name, category, args })?;
                x.events += 1;
            }
            EntryKind::Lost { count } => {
                w.put(&Plain::Lost { ts_ns, pid, tid, count: *count })?;
                x.lost_markers += 1;
            }
            other => slices.note(other, ts_ns),
        }
        Ok(())
    })?;
    // Slices still open: closed at the end of the trace, marked.
    let last = slices.last();
    for tid in slices.open_at_end() {
        w.put(&Plain::End { ts_ns: last, pid, tid, span: None, unfinished: true })?;
        x.slices += 1;
    }
    w.finish()?;
    Ok(x)
}
