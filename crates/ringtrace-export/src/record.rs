//! The record model the exporters draw, whatever the records came from: a process
//! (a host of a fleet), its threads (a fleet's sources), and on a thread instants
//! (events, a fleet's records, lost-event markers) and slices (spans entered and
//! exited). A trace's entries and a fleet's records (`ringtrace-ship` turns its
//! timeline into these) reach a format through the same writer: [`crate::chrome::Writer`],
//! `ctf::Writer`, `perfetto::Writer`. A record's arguments are [`Args`] for the JSON
//! formats and [`Annotations`] for those that keep each value's type (Perfetto's debug
//! annotations).
//!
//! ```
//! # #[cfg(feature = "chrome")] {
//! use ringtrace_export::chrome::Writer;
//! use ringtrace_export::record::{Plain, Record};
//!
//! let mut out = Vec::new();
//! let mut w = Writer::new(&mut out);
//! w.put(&Plain::Process { pid: 1, tid: 2, name: "web-1", sort_index: Some(1), category: None })?;
//! let mut args = serde_json::Map::new();
//! args.insert("seq".into(), 7.into());
//! w.put(&Record::Instant { ts_ns: 1_500, pid: 1, tid: 2, name: "record", category: "ringtrace", args: &args })?;
//! w.finish()?;
//! let v: serde_json::Value = serde_json::from_slice(&out)?;
//! assert_eq!(v["traceEvents"][2]["ts"], 1.5);
//! assert_eq!(v["traceEvents"][2]["args"]["seq"], 7);
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io;

use serde_json::{Map, Value as Json};

/// A record's arguments (Chrome's `args`), written as a JSON object.
pub trait Args {
    /// Writes the object, braces included, into `out`.
    fn write_json(&self, out: &mut Vec<u8>) -> io::Result<()>;
}

impl Args for Map<String, Json> {
    fn write_json(&self, out: &mut Vec<u8>) -> io::Result<()> {
        serde_json::to_writer(out, self).map_err(io::Error::other)
    }
}

/// No arguments: `{}`.
impl Args for () {
    fn write_json(&self, out: &mut Vec<u8>) -> io::Result<()> {
        out.extend_from_slice(b"{}");
        Ok(())
    }
}

impl<A: Args + ?Sized> Args for &A {
    fn write_json(&self, out: &mut Vec<u8>) -> io::Result<()> {
        (**self).write_json(out)
    }
}

/// A typed value of a record's argument, for the formats that keep types.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Typed<'v> {
    /// An unsigned integer.
    Uint(u64),
    /// A signed integer.
    Int(i64),
    /// A double (NaN and the infinities included).
    Double(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(&'v str),
    /// A string that recurs from record to record (a level's name): a format that
    /// interns string values (Perfetto's `debug_annotation_string_values`) writes it
    /// once per sequence, then by number.
    Interned(&'v str),
}

/// A record's arguments as names and [`Typed`] values (Perfetto's debug annotations).
///
/// The names are interned by the writers that intern (Perfetto's, per sequence): a
/// name handed again at the same address with the same text (a `&'static str`, a
/// callsite's field name) is found without hashing its text.
pub trait Annotations {
    /// Hands each argument to `f`, in order: its name and its value.
    fn annotate<F: FnMut(&str, Typed<'_>)>(&self, f: &mut F);
}

/// No arguments.
impl Annotations for () {
    fn annotate<F: FnMut(&str, Typed<'_>)>(&self, _: &mut F) {}
}

impl<A: Annotations + ?Sized> Annotations for &A {
    fn annotate<F: FnMut(&str, Typed<'_>)>(&self, f: &mut F) {
        (**self).annotate(f);
    }
}

/// A JSON object's members: integers as `Uint` (else `Int`, else `Double`), booleans,
/// strings; `null`, arrays and objects as their JSON text.
impl Annotations for Map<String, Json> {
    fn annotate<F: FnMut(&str, Typed<'_>)>(&self, f: &mut F) {
        for (k, v) in self {
            match v {
                Json::Bool(b) => f(k, Typed::Bool(*b)),
                Json::String(s) => f(k, Typed::Str(s)),
                Json::Number(n) => match (n.as_u64(), n.as_i64()) {
                    (Some(u), _) => f(k, Typed::Uint(u)),
                    (None, Some(i)) => f(k, Typed::Int(i)),
                    (None, None) => f(k, Typed::Double(n.as_f64().unwrap_or(f64::NAN))),
                },
                other => f(k, Typed::Str(&other.to_string())),
            }
        }
    }
}

/// A record without arguments (a process, a thread, a slice's end).
pub type Plain<'a> = Record<'a, ()>;

/// One thing an exporter draws. `pid` names a process, `tid` a thread of it; times are
/// nanoseconds (a trace's clock, or a fleet's Unix times).
#[derive(Debug)]
pub enum Record<'a, A> {
    /// A process, described once before its first thread's records: its name, and its
    /// place among the processes (`sort_index`) where given. `tid`: one of its threads,
    /// which the description is given on (so that readers make no thread of it).
    Process {
        /// The process.
        pid: u32,
        /// A thread of it.
        tid: u64,
        /// Its name.
        name: &'a str,
        /// Its place among the processes.
        sort_index: Option<u64>,
        /// A category to write with the description, for readers that want one on
        /// every event (the trace export gives `""`).
        category: Option<&'a str>,
    },
    /// A thread, described once before its first record: its name and its place.
    Thread {
        /// Its process.
        pid: u32,
        /// The thread.
        tid: u64,
        /// Its name.
        name: &'a str,
        /// Its place among the threads.
        sort_index: Option<u64>,
        /// A category to write with the description, as for a process.
        category: Option<&'a str>,
    },
    /// An instant on a thread: an event, a fleet's record, events lost.
    Instant {
        /// Its time.
        ts_ns: u64,
        /// Its process.
        pid: u32,
        /// Its thread.
        tid: u64,
        /// Its name.
        name: &'a str,
        /// Its category (a `tracing` target).
        category: &'a str,
        /// Its arguments.
        args: A,
    },
    /// A slice opens on a thread: a span entered.
    Begin {
        /// Its time.
        ts_ns: u64,
        /// Its process.
        pid: u32,
        /// Its thread.
        tid: u64,
        /// The span's id.
        span: u64,
        /// Its name.
        name: &'a str,
        /// Its category.
        category: &'a str,
        /// Its arguments.
        args: A,
    },
    /// The thread's innermost open slice closes; `unfinished`: closed at the end of the
    /// records, not by an exit.
    End {
        /// Its time.
        ts_ns: u64,
        /// Its process.
        pid: u32,
        /// Its thread.
        tid: u64,
        /// The span's id, where known.
        span: Option<u64>,
        /// Closed at the end of the records.
        unfinished: bool,
    },
    /// Events the thread lost, `count` of them (drawn as an instant named
    /// [`LOST_NAME`](crate::LOST_NAME) where the format has no count of its own).
    Lost {
        /// Its time.
        ts_ns: u64,
        /// Its process.
        pid: u32,
        /// Its thread.
        tid: u64,
        /// Events lost.
        count: u64,
    },
}
