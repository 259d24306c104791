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
//!   ([`crate::decode::text`]): integers beyond ±(2^53 - 1), which the viewers (all
//!   JavaScript, reading numbers as doubles) would round, and 128-bit ones as decimal
//!   strings; NaN and the infinities as the strings `"NaN"`, `"Infinity"` and
//!   `"-Infinity"`.
//! * Lost events: an `i` event named `ringtrace: events lost` with `args.count`, where
//!   the thread lost them.
//! * `ts` in microseconds, written as decimal text with three fraction digits: exact to
//!   the nanosecond (a JSON double would round past 2^53 ns).

use std::io::{self, Write};

use serde_json::{json, Value as Json};

use super::{each_entry, Exported, Slices, LOST_NAME};
use crate::decode::text::{json_id, json_int, json_line_fields};
use crate::decode::{EntryKind, Event, Trace};

/// Microseconds of a nanosecond time, as JSON number text with three fraction digits.
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// Writes trace events, one a line, comma-separated.
struct Events<'a, W: Write> {
    out: &'a mut W,
    first: bool,
    pid: u32,
}

impl<W: Write> Events<'_, W> {
    /// One trace event: the fixed members, then `args` (if not null).
    fn put(&mut self, ph: &str, name: &str, cat: &str, ts: u64, tid: u64, args: &Json) -> io::Result<()> {
        self.out.write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        write!(
            self.out,
            r#"{{"ph":"{ph}","name":{},"cat":{},"ts":{},"pid":{},"tid":{tid}"#,
            Json::from(name),
            Json::from(cat),
            micros(ts),
            self.pid
        )?;
        if ph == "i" {
            self.out.write_all(br#","s":"t""#)?;
        }
        if !args.is_null() {
            write!(self.out, r#","args":{args}"#)?;
        }
        self.out.write_all(b"}")
    }
}

fn event_args(e: &Event<'_>) -> Json {
    let mut args = json_line_fields(&e.fields);
    args.insert("level".into(), json!(e.level().as_str()));
    let cut: Vec<&str> = e.fields.iter().filter(|f| f.cut).map(|f| f.name.as_ref()).collect();
    if !cut.is_empty() {
        args.insert("cut".into(), json!(cut));
    }
    if e.dropped > 0 {
        args.insert("dropped".into(), json!(e.dropped));
    }
    Json::Object(args)
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
    out.write_all(br#"{"displayTimeUnit":"ns","traceEvents":["#)?;
    let mut ev = Events { out, first: true, pid };
    ev.put("M", "process_name", "", 0, 0, &json!({ "name": program }))?;
    for (i, t) in trace.threads().iter().enumerate() {
        let tid = u64::from(t.tid);
        ev.put("M", "thread_name", "", 0, tid, &json!({ "name": t.label() }))?;
        ev.put("M", "thread_sort_index", "", 0, tid, &json!({ "sort_index": i }))?;
    }
    let mut slices = Slices::default();
    x.unread_chunks = each_entry(trace, progress, |entry| {
        let tid = Slices::tid(entry);
        match &entry.kind {
            EntryKind::Enter { span } => {
                let (name, cat, fields) = slices.enter(tid, *span, entry.ts_ns);
                let mut args = json_line_fields(fields);
                // A decimal string: span ids reach past 2^53 (those made through an
                // `Emitter` have bit 63 set), where a JSON number loses digits.
                args.insert("span_id".into(), json_id(*span));
                ev.put("B", &name, &cat, entry.ts_ns, tid, &Json::Object(args))?;
            }
            EntryKind::Exit { span } => {
                if slices.exit(tid, *span, entry.ts_ns) {
                    ev.put("E", "", "", entry.ts_ns, tid, &Json::Null)?;
                    x.slices += 1;
                } else {
                    x.unmatched_exits += 1;
                }
            }
            EntryKind::Event(e) => {
                let name = e.message().map(str::to_owned).or_else(|| e.callsite.map(|c| c.name.clone()));
                ev.put("i", name.as_deref().unwrap_or("?"), e.target(), e.ts_ns, tid, &event_args(e))?;
                x.events += 1;
            }
            EntryKind::Lost { count } => {
                ev.put(
                    "i",
                    LOST_NAME,
                    "ringtrace",
                    entry.ts_ns,
                    tid,
                    &json!({ "count": json_int(i128::from(*count)) }),
                )?;
                x.lost_markers += 1;
            }
            other => slices.note(other, entry.ts_ns),
        }
        Ok(())
    })?;
    // Slices still open: closed at the end of the trace, marked.
    let last = slices.last();
    for tid in slices.open_at_end() {
        ev.put("E", "", "", last, tid, &json!({ "unfinished": true }))?;
        x.slices += 1;
    }
    ev.out.write_all(b"\n]}\n")?;
    Ok(x)
}
