//! A trace as lines, the way `ringtrace decode` prints it: one event a line in the
//! spirit of `tracing-subscriber`'s `fmt` (time, level, thread, span context, target,
//! message, fields), or one JSON object a line; lost events as lines of their own.
//!
//! # JSON and 64-bit integers
//!
//! A JSON number above 2^53 - 1 (JavaScript's `Number.MAX_SAFE_INTEGER`) is rounded by
//! every reader that holds numbers as doubles (JavaScript; `jq` in arithmetic, and
//! before 1.7 in its output too). So, as the protobuf JSON mapping writes its 64-bit
//! integers as strings:
//!
//! * identifiers and absolute times are decimal strings, whatever their value:
//!   `ts_ns` (`CLOCK_MONOTONIC` nanoseconds, past 2^53 after 104 days of uptime) and a
//!   span's `id`;
//! * recorded integer values (`fields`, and a span's `fields`) of 64 bits are JSON
//!   numbers from -(2^53 - 1) to 2^53 - 1 and decimal strings beyond; 128-bit ones are
//!   decimal strings whatever their value (mostly identifiers);
//! * recorded doubles are JSON numbers, and NaN and the infinities, which JSON has no
//!   number for, the strings `"NaN"`, `"Infinity"` and `"-Infinity"` (protobuf's JSON
//!   mapping's spelling: [`non_finite_text`]);
//! * counts (`lost`, `dropped`) and the thread id `tid` (32 bits) are numbers: a count
//!   reaches 2^53 only after 9 * 10^15 events.
//!
//! A reader that needs a field's exact value takes a string or a number alike.

use std::fmt::Write as _;
use std::io::{self, Write};

use serde_json::{json, Map, Value as Json};

use super::records::{Rec, Records};
use super::trace::{Entry, EntryKind, Event, Field, SpanContext, Trace};
use crate::wire::{RawRecord, Value};

/// How lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` of nanoseconds since the epoch (UTC).
pub fn rfc3339(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z", rem / 3600, rem / 60 % 60, rem % 60, ns % 1_000_000_000)
}

fn value_text(f: &Field) -> String {
    let mut s = match &f.value {
        Value::Str(v) => format!("{v:?}"),
        v => v.to_string(),
    };
    if f.cut {
        s.push_str("…[cut]");
    }
    s
}

fn fields_text(out: &mut String, fields: &[Field], skip_message: bool) {
    let mut first = true;
    for f in fields.iter().filter(|f| !(skip_message && f.name == "message")) {
        if !first {
            out.push(' ');
        }
        first = false;
        let _ = write!(out, "{}={}", f.name, value_text(f));
    }
}

fn spans_text(out: &mut String, spans: &[SpanContext]) {
    for (i, s) in spans.iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        out.push_str(&s.name);
        match &s.fields {
            Some(f) if !f.is_empty() => {
                out.push('{');
                fields_text(out, f, false);
                out.push('}');
            }
            Some(_) => {}
            None => out.push_str("{?}"),
        }
    }
}

/// The largest integer every JSON reader reads exactly: JavaScript's
/// `Number.MAX_SAFE_INTEGER` (2^53 - 1; past it, a double cannot tell `n` from `n + 1`).
pub(crate) const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// An identifier or an absolute time: a decimal string, whatever its value.
pub fn json_id(x: u64) -> Json {
    Json::String(x.to_string())
}

/// The text of a double JSON cannot hold as a number: `NaN`, `Infinity` or
/// `-Infinity` (the spelling of protobuf's JSON mapping, which OTLP/JSON follows, and
/// which JavaScript's `Number()` and Python's `float()` read back); `None` for a finite
/// one. Every JSON output of ringtrace and the OTLP export's attributes write these.
pub fn non_finite_text(x: f64) -> Option<&'static str> {
    if x.is_nan() {
        Some("NaN")
    } else if x.is_infinite() {
        Some(if x > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        None
    }
}

/// A double in JSON: a number, or where JSON has none for it (NaN, the infinities) the
/// string [`non_finite_text`] gives.
pub fn json_f64(x: f64) -> Json {
    non_finite_text(x).map_or_else(|| json!(x), |t| json!(t))
}

/// An integer in JSON (see the module's docs): a number from -(2^53 - 1) to 2^53 - 1,
/// where every reader reads it exactly; a decimal string beyond.
pub fn json_int(x: i128) -> Json {
    if x.unsigned_abs() <= u128::from(MAX_SAFE_INTEGER) {
        json!(x as i64)
    } else {
        json!(x.to_string())
    }
}

/// A recorded value in a JSON line and in the Chrome export's `args` (see the module's
/// docs): a 64-bit integer as [`json_int`] has it; a 128-bit one a string; a double as
/// [`json_f64`] has it; bytes in hex.
pub fn json_line_value(v: &Value) -> Json {
    match v {
        Value::U64(x) => json_int(i128::from(*x)),
        Value::I64(x) => json_int(i128::from(*x)),
        Value::F64(x) => json_f64(*x),
        Value::Bool(x) => json!(x),
        // Mostly identifiers: text whatever their value.
        Value::U128(x) => json!(x.to_string()),
        Value::I128(x) => json!(x.to_string()),
        Value::Str(s) | Value::Debug(s) | Value::Error(s) => json!(s),
        Value::Bytes(b) => json!(crate::wire::hex(b)),
    }
}

/// Fields as a JSON object ([`json_line_value`]).
pub fn json_line_fields(fields: &[Field]) -> Map<String, Json> {
    fields.iter().map(|f| (f.name.to_string(), json_line_value(&f.value))).collect()
}

/// An event as one line (no newline).
pub fn event_line(trace: &Trace, e: &Event<'_>, format: Format) -> String {
    let wall = trace.process.as_ref().map_or(e.ts_ns, |p| p.wall_ns(e.ts_ns));
    let thread = e.thread.map_or_else(|| format!("lane-{}", e.lane), |t| t.label());
    match format {
        Format::Text => {
            let mut s = format!("{} {:>5} {thread}: ", rfc3339(wall), e.level());
            if !e.spans.is_empty() {
                spans_text(&mut s, &e.spans);
                s.push_str(": ");
            }
            s.push_str(e.target());
            s.push(':');
            if let Some(m) = e.message() {
                s.push(' ');
                s.push_str(m);
            }
            if e.fields.iter().any(|f| f.name != "message") {
                s.push(' ');
                fields_text(&mut s, &e.fields, true);
            }
            if e.dropped > 0 {
                let _ = write!(s, " [{} values dropped]", e.dropped);
            }
            s
        }
        Format::Json => Json::Object(event_object(trace, e)).to_string(),
    }
}

/// An event's JSON object, as [`event_line`] writes it.
fn event_object(trace: &Trace, e: &Event<'_>) -> Map<String, Json> {
    let wall = trace.process.as_ref().map_or(e.ts_ns, |p| p.wall_ns(e.ts_ns));
    let thread = e.thread.map_or_else(|| format!("lane-{}", e.lane), |t| t.label());
    let cut: Vec<&str> = e.fields.iter().filter(|f| f.cut).map(|f| f.name.as_ref()).collect();
    let mut o = Map::new();
    o.insert("time".into(), json!(rfc3339(wall)));
    o.insert("ts_ns".into(), json_id(e.ts_ns));
    o.insert("level".into(), json!(e.level().as_str()));
    o.insert("thread".into(), json!(thread));
    if let Some(t) = e.thread {
        o.insert("tid".into(), json!(t.tid));
    }
    o.insert("target".into(), json!(e.target()));
    if let Some(c) = e.callsite {
        o.insert("name".into(), json!(c.name));
    }
    let spans: Vec<Json> = e
        .spans
        .iter()
        .map(|s| json!({"name": s.name, "id": json_id(s.id), "fields": s.fields.as_deref().map(json_line_fields)}))
        .collect();
    o.insert("spans".into(), Json::Array(spans));
    o.insert("fields".into(), Json::Object(json_line_fields(&e.fields)));
    if !cut.is_empty() {
        o.insert("cut".into(), json!(cut));
    }
    if e.dropped > 0 {
        o.insert("dropped".into(), json!(e.dropped));
    }
    o
}

/// Writes every event (and every `lost` record) of `trace`, one a line. Returns the
/// number of events written.
pub fn write(trace: &Trace, format: Format, out: &mut impl Write) -> io::Result<u64> {
    let mut n = 0;
    for entry in trace.entries() {
        if let Some(line) = entry_line(trace, &entry, format) {
            writeln!(out, "{line}")?;
            n += u64::from(matches!(entry.kind, EntryKind::Event(_)));
        }
    }
    Ok(n)
}

/// The line [`write()`] prints for an entry, without its newline: an event's
/// ([`event_line`]), or a line that says how many events were lost there; `None` for
/// the entries it does not print (spans entered, exited, ...).
pub fn entry_line(trace: &Trace, entry: &Entry<'_>, format: Format) -> Option<String> {
    match &entry.kind {
        EntryKind::Event(e) => Some(event_line(trace, e, format)),
        EntryKind::Lost { count } => {
            let wall = trace.process.as_ref().map_or(entry.ts_ns, |p| p.wall_ns(entry.ts_ns));
            let thread = entry.thread.map_or_else(|| format!("lane-{}", entry.lane), |t| t.label());
            Some(match format {
                Format::Text => {
                    format!("{}  WARN {thread}: ringtrace: {count} events lost here (ring full)", rfc3339(wall))
                }
                Format::Json => {
                    json!({"time": rfc3339(wall), "ts_ns": json_id(entry.ts_ns), "thread": thread, "lost": count})
                        .to_string()
                }
            })
        }
        _ => None,
    }
}

/// Any entry as one JSON object (no newline): an event's or a lost count's as
/// [`entry_line`] writes them; a span record's with the time, `ts_ns` and thread an
/// event's has, then `span` (`new`, `record`, `enter`, `exit`, `close` or `follows`;
/// `open` and `done` in [`Trace::decode_json`]) and `id`, and what the record says: a
/// new span's `name`, `target`, `file` and `line` (where its callsite has them),
/// `parent` (absent at the root) and `fields`, a record's
/// `fields`, a follows' `follows`. What an agent ships of a recorder's records, one
/// each, so that none is left out.
///
/// Beyond what [`entry_line`] writes, every object of a known thread has its `tid`,
/// and every object with `fields` has `kinds`: one letter per field, in their order,
/// naming the type its value was recorded with ([`kinds`]), which the JSON text alone
/// does not always say (an integer written as a decimal string, a NaN as `"NaN"`).
pub fn entry_json(trace: &Trace, entry: &Entry<'_>) -> String {
    entry_json_as(trace, entry, None)
}

/// One letter for each field, in order, naming its value's type: `u` (`u64`), `i`
/// (`i64`), `f` (`f64`), `b` (`bool`), `U` (`u128`), `I` (`i128`), `s` (`&str`), `d`
/// (`Debug`/`Display`), `e` (an error), `x` (bytes).
pub fn kinds(fields: &[Field]) -> String {
    fields
        .iter()
        .map(|f| match f.value {
            Value::U64(_) => 'u',
            Value::I64(_) => 'i',
            Value::F64(_) => 'f',
            Value::Bool(_) => 'b',
            Value::U128(_) => 'U',
            Value::I128(_) => 'I',
            Value::Str(_) => 's',
            Value::Debug(_) => 'd',
            Value::Error(_) => 'e',
            Value::Bytes(_) => 'x',
        })
        .collect()
}

/// `fields` and their [`kinds`] into `o`.
fn put_fields(o: &mut Map<String, Json>, fields: &[Field]) {
    o.insert("fields".into(), Json::Object(json_line_fields(fields)));
    o.insert("kinds".into(), json!(kinds(fields)));
}

/// [`entry_json`], a span record's `span` given as `kind` if some: the object of an
/// `open` record (its `new span` entry's object) or a `done` record (its `exit`'s).
fn entry_json_as(trace: &Trace, entry: &Entry<'_>, kind: Option<&'static str>) -> String {
    if let EntryKind::Event(e) = &entry.kind {
        let mut o = event_object(trace, e);
        o.insert("kinds".into(), json!(kinds(&e.fields)));
        return Json::Object(o).to_string();
    }
    let wall = trace.process.as_ref().map_or(entry.ts_ns, |p| p.wall_ns(entry.ts_ns));
    let thread = entry.thread.map_or_else(|| format!("lane-{}", entry.lane), |t| t.label());
    let mut o = Map::new();
    o.insert("time".into(), json!(rfc3339(wall)));
    o.insert("ts_ns".into(), json_id(entry.ts_ns));
    o.insert("thread".into(), json!(thread));
    if let Some(t) = entry.thread {
        o.insert("tid".into(), json!(t.tid));
    }
    let (named, span) = match &entry.kind {
        EntryKind::NewSpan { span, parent, callsite, fields } => {
            if let Some(c) = callsite {
                o.insert("name".into(), json!(c.name));
                o.insert("target".into(), json!(c.target));
                if let Some(f) = &c.file {
                    o.insert("file".into(), json!(f));
                }
                if let Some(l) = c.line {
                    o.insert("line".into(), json!(l));
                }
            }
            if *parent != 0 {
                o.insert("parent".into(), json_id(*parent));
            }
            put_fields(&mut o, fields);
            ("new", *span)
        }
        EntryKind::Record { span, fields } => {
            put_fields(&mut o, fields);
            ("record", *span)
        }
        EntryKind::Enter { span } => ("enter", *span),
        EntryKind::Exit { span } => ("exit", *span),
        EntryKind::Close { span } => ("close", *span),
        EntryKind::FollowsFrom { span, follows } => {
            o.insert("follows".into(), json_id(*follows));
            ("follows", *span)
        }
        EntryKind::Lost { count } => {
            o.insert("lost".into(), json!(count));
            return Json::Object(o).to_string();
        }
        // Written above.
        EntryKind::Event(_) => ("?", 0),
    };
    let kind = kind.unwrap_or(named);
    o.insert("span".into(), json!(kind));
    o.insert("id".into(), json_id(span));
    Json::Object(o).to_string()
}

/// Damaged chunks [`summary`] names one by one; the rest it sums up.
const DAMAGED_SHOWN: usize = 3;

/// A one-paragraph account of what the trace lost or could not read, for stderr
/// (empty if nothing).
pub fn summary(trace: &Trace) -> String {
    let mut s = String::new();
    let lost = trace.lost();
    if lost > 0 {
        let _ = write!(s, "{lost} events lost; ");
    }
    if let Some(n) = trace.stat("overwritten").filter(|&n| n > 0) {
        let _ = write!(s, "{n} older records overwritten (flight recorder); ");
    }
    if let Some(n) = trace.stat("cut").filter(|&n| n > 0) {
        let _ = write!(s, "{n} records with values cut at the size bounds; ");
    }
    if let Some(n) = trace.stat("held").filter(|&n| n > 0) {
        let _ = write!(s, "{n} span records (a new span or an exit) held back by threads that had not recorded since, not in the file; ");
    }
    let p = &trace.problems;
    for d in p.damaged.iter().take(DAMAGED_SHOWN) {
        let _ = write!(s, "damaged {} at byte {} ({}): ", d.what, d.offset, d.reason);
        match (d.records, d.events) {
            _ if d.stopped => _ = write!(s, "the rest of the file, {} bytes, not read; ", d.bytes),
            (Some(r), Some(e)) => _ = write!(s, "its {r} records ({e} events) not read; "),
            _ => _ = write!(s, "its {} bytes not read; ", d.bytes),
        }
    }
    if let Some(first) = p.damaged.get(DAMAGED_SHOWN) {
        let rest = &p.damaged[DAMAGED_SHOWN..];
        let bytes: u64 = rest.iter().map(|d| d.bytes).sum();
        let _ = write!(s, "{} more damaged chunks from byte {}: {bytes} bytes not read; ", rest.len(), first.offset);
    }
    if let Some(d) = &p.cut {
        let _ = write!(
            s,
            "cut short inside a {} at byte {} ({}): {} bytes not read; ",
            d.what, d.offset, d.reason, d.bytes
        );
    }
    if p.incomplete {
        s.push_str("the file has no end chunk (its writer did not finish, or the file was cut short); ");
    }
    for (what, n) in [
        ("records skipped as unreadable", p.bad_records),
        ("chunks skipped as unreadable", p.bad_chunks),
        ("chunks of unknown kind skipped", p.unknown_chunks),
        ("records being written stepped over", p.unfinished),
    ] {
        if n > 0 {
            let _ = write!(s, "{n} {what}; ");
        }
    }
    for (slot, why) in &p.unreadable_rings {
        let _ = write!(s, "ring {slot} unreadable: {why}; ");
    }
    if let Some(e) = &p.first_error {
        let _ = write!(s, "first error: {e}; ");
    }
    s.trim_end_matches("; ").to_owned()
}

impl Trace {
    /// Decodes `records`, each `(lane, CLOCK_MONOTONIC ns, record bytes without the
    /// stamp)`, in the order given (a span's `new span` record before the events in it),
    /// with this trace's callsites, threads and process: for each, the JSON object
    /// [`entry_json`] writes, or why its bytes do not
    /// decode. The trace's own records are left as they were.
    pub fn decode_json(&mut self, records: &[(u32, u64, &[u8])]) -> Vec<Result<String, String>> {
        let mut out: Vec<Result<String, String>> = vec![Err(String::new()); records.len()];
        let (mut held, mut at) = (Vec::with_capacity(records.len()), Vec::with_capacity(records.len()));
        for (i, &(lane, ts, bytes)) in records.iter().enumerate() {
            match crate::wire::decode(bytes) {
                Ok(raw) => {
                    // A record that stands for two entries is one object: the first
                    // entry's, named for the record.
                    let folded = match raw {
                        RawRecord::Open { .. } => Some("open"),
                        RawRecord::Done { .. } => Some("done"),
                        _ => None,
                    };
                    held.push(Rec { ts, lane, raw });
                    at.push((i, folded));
                }
                Err(e) => out[i] = Err(e.to_string()),
            }
        }
        let own = std::mem::replace(&mut self.records, Records::Held(held));
        // One entry for each held record, in their order, and a second for a folded one.
        let mut entries = self.entries();
        for &(i, folded) in &at {
            let Some(entry) = entries.next() else { break };
            out[i] = Ok(entry_json_as(self, &entry, folded));
            if folded.is_some() {
                entries.next();
            }
        }
        drop(entries);
        self.records = own;
        out
    }
}

#[cfg(test)]
mod tests;
