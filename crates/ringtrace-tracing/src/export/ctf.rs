//! CTF 1.8, the Common Trace Format that babeltrace2 and Trace Compass read (the
//! specification: "Common Trace Format (CTF) v1.8.3", EfficiOS / DiaMon workgroup).
//!
//! A trace is a directory: `metadata` (TSDL text) and one binary stream file per
//! thread (`stream-TID`), all of one stream class.
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

use std::collections::hash_map::Entry;
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use foldhash::HashMap;

use super::{each_view, Exported, Slices};
use crate::catalog;
use crate::decode::view::{ViewKind, ViewValues, Views};
use crate::decode::{Callsite, Trace, Value};
use crate::private::{self, Partial};
use crate::wire::ValueIn;

/// A packet is ended once its events reach this many bytes.
const PACKET_EVENTS: usize = 1 << 20;
/// CTF's packet magic.
const MAGIC: u32 = 0xC1FC_1FC1;
/// Packet header and context bytes: magic, uuid, stream id; timestamp begin and end,
/// content size, packet size, events discarded, thread id.
const HEAD: usize = 4 + 16 + 4 + 8 * 5 + 4;
const SPAN_ENTER: u32 = 0;
const SPAN_EXIT: u32 = 1;

/// The head of the metadata: the version, and how strings are written ([`put_string`]).
pub const METADATA_HEAD: &str =
    "/* CTF 1.8 */\n\n/* In strings, the two characters \\\\ are a backslash and \\0 a NUL. */\n\n";

/// A value's CTF type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    U64,
    I64,
    F64,
    Bool,
    Text,
}

impl Kind {
    fn of(v: &Value) -> Kind {
        match v {
            Value::U64(_) => Kind::U64,
            Value::I64(_) => Kind::I64,
            Value::F64(_) => Kind::F64,
            Value::Bool(_) => Kind::Bool,
            _ => Kind::Text,
        }
    }

    fn of_in(v: &ValueIn<'_>) -> Kind {
        match v {
            ValueIn::Number(v) => Kind::of(v),
            _ => Kind::Text,
        }
    }

    fn tsdl(self) -> &'static str {
        match self {
            Kind::U64 => "uint64_t",
            Kind::I64 => "int64_t",
            Kind::F64 => "double",
            Kind::Bool => "uint8_t",
            Kind::Text => "string",
        }
    }
}

/// `s` as a TSDL identifier.
fn ident(s: &str) -> String {
    let mut out: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// `s` as a TSDL string literal.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Appends `s` as a CTF string. A CTF 1.8 string ends at its first NUL, so a NUL
/// cannot be carried inside one: it is written as the two characters `\0`, and so that
/// this cannot be mistaken for a backslash followed by a `0`, a backslash is written as
/// the two characters `\\`. Every other byte is written as it is, then the terminating
/// NUL. A reader gets the text back by reading `\\` as a backslash and `\0` as a NUL.
pub fn put_string(buf: &mut Vec<u8>, s: &str) {
    if !s.bytes().any(|b| b == b'\\' || b == 0) {
        buf.extend_from_slice(s.as_bytes());
    } else {
        for b in s.bytes() {
            match b {
                b'\\' => buf.extend_from_slice(b"\\\\"),
                0 => buf.extend_from_slice(b"\\0"),
                b => buf.push(b),
            }
        }
    }
    buf.push(0);
}

/// One thread's stream file and its open packet.
struct Stream {
    out: BufWriter<Partial>,
    tid: u32,
    events: Vec<u8>,
    begin: u64,
    end: u64,
    discarded: u64,
}

impl Stream {
    /// Writes the open packet (if it holds events, or `force`).
    fn flush(&mut self, uuid: &[u8; 16], force: bool) -> io::Result<()> {
        if self.events.is_empty() && !force {
            return Ok(());
        }
        let bits = ((HEAD + self.events.len()) * 8) as u64;
        let mut h = Vec::with_capacity(HEAD);
        h.extend_from_slice(&MAGIC.to_le_bytes());
        h.extend_from_slice(uuid);
        h.extend_from_slice(&0u32.to_le_bytes());
        for v in [self.begin, self.end.max(self.begin), bits, bits, self.discarded] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        h.extend_from_slice(&self.tid.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&self.events)?;
        self.events.clear();
        self.begin = self.end;
        Ok(())
    }

    /// Starts an event of class `id` at `ts`.
    fn event(&mut self, id: u32, ts: u64) {
        if self.events.is_empty() {
            self.begin = ts;
        }
        self.end = ts;
        self.events.extend_from_slice(&id.to_le_bytes());
        self.events.extend_from_slice(&ts.to_le_bytes());
    }

    fn text(&mut self, s: &str) {
        put_string(&mut self.events, s);
    }
}

/// An event's value kinds in order: packed 3 bits a value with their count where
/// they fit (no allocation per event), listed where they do not.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Shape {
    Packed(usize, u64),
    Listed(Vec<Kind>),
}

impl Shape {
    /// The shape of the kinds `kinds` gives.
    fn of(kinds: impl Iterator<Item = Kind>) -> Shape {
        let mut kinds = kinds.peekable();
        let (mut n, mut bits) = (0, 0u64);
        while n < 21 {
            let Some(k) = kinds.next() else { return Shape::Packed(n, bits) };
            bits = (bits << 3) | k as u64;
            n += 1;
        }
        if kinds.peek().is_none() {
            return Shape::Packed(n, bits);
        }
        let mut listed: Vec<Kind> = (0..n).rev().map(|i| Kind::from_bits((bits >> (3 * i)) & 7)).collect();
        listed.extend(kinds);
        Shape::Listed(listed)
    }
}

impl Kind {
    fn from_bits(b: u64) -> Kind {
        [Kind::U64, Kind::I64, Kind::F64, Kind::Bool, Kind::Text][b as usize]
    }
}

/// The classes made so far: `(callsite, value kinds)` to id, and each class's TSDL.
#[derive(Default)]
struct Classes {
    ids: HashMap<(u32, Shape), u32>,
    tsdl: String,
}

impl Classes {
    /// The class of an event of `callsite` whose values have `shape`.
    fn class(&mut self, callsite: Option<&Callsite>, values: ViewValues<'_>, shape: Shape) -> u32 {
        let number = callsite.map_or(0, |c| c.id);
        let key = (number, shape);
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = 2 + self.ids.len() as u32;
        let name = callsite.map_or_else(|| format!("callsite{number}"), |c| format!("{}:{}", c.target, c.name));
        let _ = write!(self.tsdl, "event {{\n    name = {};\n    id = {id};\n    stream_id = 0;\n", quoted(&name));
        let _ = writeln!(self.tsdl, "    loglevel = {};", loglevel(callsite));
        self.tsdl.push_str("    fields := struct {\n");
        let mut seen = HashMap::default();
        for (field, _, v) in values.iter() {
            let kind = Kind::of_in(&v);
            let mut name = ident(&catalog::field_name(callsite, field));
            // Names that sanitize alike stay distinct.
            let n = seen.entry(name.clone()).or_insert(0);
            *n += 1;
            if *n > 1 {
                let _ = write!(name, "_{n}");
            }
            let _ = writeln!(self.tsdl, "        {} {name};", kind.tsdl());
        }
        self.tsdl.push_str("    };\n};\n\n");
        self.ids.insert(key, id);
        id
    }
}

/// The syslog-style log level LTTng gives `tracing`'s levels (ERR 3 ... DEBUG 7).
fn loglevel(callsite: Option<&Callsite>) -> u8 {
    match callsite.map_or(tracing_core::Level::TRACE, |c| c.level) {
        tracing_core::Level::ERROR => 3,
        tracing_core::Level::WARN => 4,
        tracing_core::Level::INFO => 6,
        _ => 7,
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
    private::make_dir(dir)?;
    let process = trace.process.clone().unwrap_or(crate::file::Process {
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
    let mut streams: HashMap<u32, Stream> = HashMap::default();
    let mut classes = Classes::default();
    let mut x = Exported::default();
    // Span names, from their `new span` records.
    let mut slices = Slices::default();
    let (all, total) = (Views::new(trace, 0..u64::MAX, None), trace.len() as u64);
    x.unread_chunks = each_view(all, &mut |n| progress(n, total), |entry| {
        let tid = entry.thread.map_or(u32::MAX - entry.lane, |t| t.tid);
        let s = match streams.entry(tid) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                let f = Partial::create(&dir.join(format!("stream-{tid}")))?;
                v.insert(Stream {
                    out: BufWriter::new(f),
                    tid,
                    events: Vec::new(),
                    begin: entry.ts_ns,
                    end: entry.ts_ns,
                    discarded: 0,
                })
            }
        };
        let ts = entry.ts_ns;
        match &entry.kind {
            ViewKind::Event { callsite, values } => {
                // The event's values first, its class from their kinds, then written in
                // front of them.
                let at = s.events.len();
                s.event(0, ts);
                let kinds = values.iter().map(|(_, _, v)| {
                    let kind = Kind::of_in(&v);
                    match v {
                        ValueIn::Number(Value::U64(v)) => s.events.extend_from_slice(&v.to_le_bytes()),
                        ValueIn::Number(Value::I64(v)) => s.events.extend_from_slice(&v.to_le_bytes()),
                        ValueIn::Number(Value::F64(v)) => s.events.extend_from_slice(&v.to_le_bytes()),
                        ValueIn::Number(Value::Bool(v)) => s.events.push(u8::from(v)),
                        ValueIn::Number(Value::U128(v)) => s.text(&v.to_string()),
                        ValueIn::Number(Value::I128(v)) => s.text(&v.to_string()),
                        ValueIn::Number(Value::Str(v) | Value::Debug(v) | Value::Error(v)) => s.text(&v),
                        ValueIn::Number(Value::Bytes(b)) => s.text(&crate::wire::hex(&b)),
                        ValueIn::Str(v) | ValueIn::Debug(v) | ValueIn::Error(v) => s.text(v),
                    }
                    kind
                });
                let id = classes.class(*callsite, *values, Shape::of(kinds));
                s.events[at..at + 4].copy_from_slice(&id.to_le_bytes());
                x.events += 1;
            }
            ViewKind::Enter(span) => {
                s.event(SPAN_ENTER, ts);
                s.events.extend_from_slice(&span.to_le_bytes());
                let (name, _, _) = slices.enter(u64::from(tid), *span, ts);
                s.text(&name);
                x.slices += 1;
            }
            ViewKind::Exit(span) => {
                slices.exit(u64::from(tid), *span, ts);
                s.event(SPAN_EXIT, ts);
                s.events.extend_from_slice(&span.to_le_bytes());
            }
            ViewKind::Lost(count) => {
                // The packet so far, then the count: it falls between the two packets.
                s.flush(&uuid, false)?;
                s.discarded += count;
                s.begin = ts;
                s.end = ts;
                x.lost_markers += 1;
            }
            ViewKind::Other(other) => slices.note(other, ts),
            ViewKind::Bad => {}
        }
        if s.events.len() >= PACKET_EVENTS {
            s.flush(&uuid, false)?;
        }
        Ok(())
    })?;
    for s in streams.values_mut() {
        // A stream whose last packet holds only a count of losses still carries it.
        let pending = s.events.is_empty() && s.discarded > 0;
        s.flush(&uuid, pending)?;
        s.out.flush()?;
    }
    let mut files = Vec::with_capacity(streams.len() + 1);
    for (_, s) in streams {
        files.push(s.out.into_inner()?);
    }
    let mut meta = Partial::create(&dir.join("metadata"))?;
    meta.write_all(metadata(&process, &uuid, &classes).as_bytes())?;
    files.push(meta);
    for f in files {
        f.commit()?;
    }
    Ok(x)
}

fn metadata(p: &crate::file::Process, uuid: &[u8; 16], classes: &Classes) -> String {
    let u = uuid;
    let uuid_text = format!(
        "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]
    );
    let origin = p.realtime_ns.saturating_sub(p.monotonic_ns);
    let mut m = String::from(METADATA_HEAD);
    m.push_str(
        "typealias integer { size = 8; align = 8; signed = false; } := uint8_t;\n\
         typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n\
         typealias integer { size = 64; align = 8; signed = false; } := uint64_t;\n\
         typealias integer { size = 64; align = 8; signed = true; } := int64_t;\n\
         typealias floating_point { exp_dig = 11; mant_dig = 53; align = 8; } := double;\n\n",
    );
    let _ = write!(
        m,
        "trace {{\n    major = 1;\n    minor = 8;\n    byte_order = le;\n    uuid = \"{uuid_text}\";\n    \
         packet.header := struct {{ uint32_t magic; uint8_t uuid[16]; uint32_t stream_id; }};\n}};\n\n"
    );
    let _ = write!(
        m,
        "env {{\n    tracer_name = \"ringtrace\";\n    procname = {};\n    vpid = {};\n}};\n\n",
        quoted(&p.program),
        p.pid
    );
    let _ = write!(
        m,
        "clock {{\n    name = mono;\n    description = \"CLOCK_MONOTONIC\";\n    freq = 1000000000;\n    \
         offset_s = {};\n    offset = {};\n}};\n\n",
        origin / 1_000_000_000,
        origin % 1_000_000_000
    );
    m.push_str(
        "typealias integer { size = 64; align = 8; signed = false; map = clock.mono.value; } := clk64_t;\n\n\
         stream {\n    id = 0;\n    packet.context := struct {\n        clk64_t timestamp_begin;\n        \
         clk64_t timestamp_end;\n        uint64_t content_size;\n        uint64_t packet_size;\n        \
         uint64_t events_discarded;\n        uint32_t tid;\n    };\n    \
         event.header := struct { uint32_t id; clk64_t timestamp; };\n};\n\n",
    );
    let _ = write!(
        m,
        "event {{\n    name = \"ringtrace:span_enter\";\n    id = {SPAN_ENTER};\n    stream_id = 0;\n    \
         fields := struct {{ uint64_t id; string name; }};\n}};\n\n\
         event {{\n    name = \"ringtrace:span_exit\";\n    id = {SPAN_EXIT};\n    stream_id = 0;\n    \
         fields := struct {{ uint64_t id; }};\n}};\n\n"
    );
    m.push_str(&classes.tsdl);
    m
}
