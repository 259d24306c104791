//! Every exporter of ringtrace's traces, in the formats other tools read:
//!
//! * [`chrome`] (feature `chrome`): Chrome's Trace Event Format (JSON), which
//!   `chrome://tracing`, Perfetto's UI (ui.perfetto.dev) and `trace_processor` open.
//! * [`perfetto`] (feature `perfetto`): Perfetto's protobuf trace of `TrackEvent`
//!   packets.
//! * [`ctf`] (feature `ctf`): a Common Trace Format 1.8 directory that babeltrace2 and
//!   Trace Compass read.
//! * [`otlp`] (feature `otlp`): OpenTelemetry's data model (spans, span events, log
//!   records), as OTLP requests or OTLP/JSON lines.
//! * `delivery` (feature `otlp-delivery`, off by default): those requests delivered to
//!   an OTLP/gRPC or OTLP/HTTP endpoint in bounded batches, with retries and partial
//!   success, as `ringtrace export --to` does.
//!
//! A trace's entries and a fleet's records (`ringtrace-ship`'s) reach Chrome's format,
//! CTF and Perfetto's through one writer each, over one [record model](record);
//! OpenTelemetry's log records through one mapping (`otlp::model`)
//! and one OTLP/JSON writer (`otlp::JsonLines`).
//!
//! They read a trace the `ringtrace-tracing` crate's [`decode`](ringtrace_tracing::decode)
//! opens (a dump, a stream's trace file, a recorder directory); `ringtrace export` runs
//! them. The tracing layer itself builds no protobuf crate: the Perfetto and OTLP message
//! types are built here, and only with the features that need them.
//!
//! ```
//! # use tracing_subscriber::layer::SubscriberExt;
//! let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).build()?;
//! tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
//!     let _s = tracing::info_span!("work").entered();
//!     tracing::info!(n = 1u64, "step");
//! });
//! let mut dump = Vec::new();
//! recorder.dump_to(&mut dump)?;
//! let trace = ringtrace_tracing::decode::Trace::from_bytes(&dump, "dump".as_ref())?;
//! let mut json = Vec::new();
//! # #[cfg(feature = "chrome")] {
//! let done = ringtrace_export::chrome::write(&trace, &mut json)?;
//! assert_eq!((done.events, done.slices), (1, 1));
//! let v: serde_json::Value = serde_json::from_slice(&json)?;
//! assert!(v["traceEvents"].as_array().unwrap().iter().any(|e| e["ph"] == "i" && e["name"] == "step"));
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
// The helpers below serve several formats: with some of them left out, some go unused.
#![cfg_attr(not(all(feature = "chrome", feature = "ctf", feature = "perfetto")), allow(dead_code, unused_imports))]

#[cfg(feature = "chrome")]
pub mod chrome;
#[cfg(feature = "ctf")]
pub mod ctf;
#[cfg(feature = "otlp-delivery")]
pub mod delivery;
#[cfg(feature = "perfetto")]
mod halves;
#[cfg(feature = "otlp")]
pub mod otlp;
#[cfg(feature = "perfetto")]
pub mod perfetto;
pub mod record;

use std::io;

use foldhash::HashMap;

use ringtrace_tracing::decode::view::{View, Views};
use ringtrace_tracing::decode::{Entry, EntryKind, Field, ThreadInfo, Trace};

/// The name of the instant event that marks events lost.
pub const LOST_NAME: &str = "ringtrace: events lost";

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exported {
    /// Events (instants) written.
    pub events: u64,
    /// Span slices written (a `B` and its `E`).
    pub slices: u64,
    /// Exits left out because their enter was not in the trace.
    pub unmatched_exits: u64,
    /// Lost-event markers written.
    pub lost_markers: u64,
    /// Records chunks of a trace file skipped because the file changed on disk after the
    /// trace was opened ([`Entries::unread_chunks`](ringtrace_tracing::decode::Entries::unread_chunks)).
    pub unread_chunks: u64,
}

impl Exported {
    /// Adds another part's counts.
    pub(crate) fn add(&mut self, o: &Exported) {
        self.events += o.events;
        self.slices += o.slices;
        self.unmatched_exits += o.unmatched_exits;
        self.lost_markers += o.lost_markers;
        self.unread_chunks += o.unread_chunks;
    }
}

/// Records between two calls of an export's progress function.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// Goes through `trace`'s records for an exporter, in time order: `f` takes each;
/// `progress` hears records done and records in all every [`PROGRESS_EVERY`] records
/// and at the end. Returns the chunks that could not be read again.
///
/// One thread does it all: reading and decoding on a second thread, handing entries
/// over in batches, made exports slower here (1.1 to 1.6 times the time for a million
/// events), as each entry's heap blocks then move between CPUs.
pub(crate) fn each_entry<'a>(
    trace: &'a Trace,
    progress: &mut dyn FnMut(u64, u64),
    mut f: impl FnMut(&Entry<'a>) -> io::Result<()>,
) -> io::Result<u64> {
    let total = trace.len() as u64;
    let mut entries = trace.entries_without_context();
    let mut done = 0u64;
    for entry in entries.by_ref() {
        f(&entry)?;
        done += 1;
        if done % PROGRESS_EVERY == 0 {
            progress(done, total);
        }
    }
    progress(done, total);
    Ok(entries.unread_chunks().0)
}

/// [`each_entry`], with the records seen in place ([`Views`]): no value is copied out
/// of a trace file's chunks. `done` hears records done every [`PROGRESS_EVERY`] records
/// and at the end.
pub(crate) fn each_view<'a>(
    mut views: Views<'a>,
    done: &mut dyn FnMut(u64),
    mut f: impl FnMut(&View<'a, '_>) -> io::Result<()>,
) -> io::Result<u64> {
    let mut n = 0u64;
    while let Some(view) = views.next() {
        f(&view)?;
        n += 1;
        if n % PROGRESS_EVERY == 0 {
            done(n);
        }
    }
    done(n);
    Ok(views.unread_chunks())
}

/// Span slices as the formats draw them: a slice per span entry on the entering thread,
/// nested per thread (Chrome's `B`/`E`, Perfetto's slice begin/end).
#[derive(Default)]
pub(crate) struct Slices<'a> {
    /// Each span's name, category (its target) and fields, as known so far.
    spans: HashMap<u64, (String, String, Vec<Field<'a>>)>,
    /// Each thread's open slices, innermost last.
    open: HashMap<u64, Vec<u64>>,
    last: u64,
}

impl<'a> Slices<'a> {
    /// The thread id an entry's slices and events go on: its thread's, or for a lane no
    /// thread entry names, one of its own above every real thread id.
    pub fn tid(entry: &Entry<'_>) -> u64 {
        Slices::tid_of(entry.thread, entry.lane)
    }

    /// [`tid`](Slices::tid) of a record of `lane` written by `thread`.
    pub fn tid_of(thread: Option<&ThreadInfo>, lane: u32) -> u64 {
        thread.map_or(u64::from(u32::MAX) + u64::from(lane), |t| u64::from(t.tid))
    }

    /// Takes note of what a span record says (new, recorded fields, closed).
    pub fn note(&mut self, kind: &EntryKind<'a>, ts: u64) {
        self.last = self.last.max(ts);
        match kind {
            EntryKind::NewSpan { span, callsite, fields, .. } => {
                let (name, cat) = callsite.map_or(("?".into(), String::new()), |c| (c.name.clone(), c.target.clone()));
                self.spans.insert(*span, (name, cat, fields.clone()));
            }
            EntryKind::Record { span, fields } => {
                if let Some(s) = self.spans.get_mut(span) {
                    for f in fields {
                        match s.2.iter_mut().find(|old| old.name == f.name) {
                            Some(old) => *old = f.clone(),
                            None => s.2.push(f.clone()),
                        }
                    }
                }
            }
            EntryKind::Close { span } => {
                self.spans.remove(span);
            }
            _ => {}
        }
    }

    /// A thread enters `span`: a slice opens. Its name, category and fields (`?` for a
    /// span whose `new span` record the trace no longer holds).
    pub fn enter(&mut self, tid: u64, span: u64, ts: u64) -> (&str, &str, &[Field<'a>]) {
        self.last = self.last.max(ts);
        self.open.entry(tid).or_default().push(span);
        match self.spans.get(&span) {
            Some((name, cat, fields)) => (name, cat, fields),
            None => ("?", "", &[]),
        }
    }

    /// A thread exits `span`: whether a slice closes (only the innermost open one can).
    pub fn exit(&mut self, tid: u64, span: u64, ts: u64) -> bool {
        self.last = self.last.max(ts);
        let stack = self.open.entry(tid).or_default();
        if stack.last() == Some(&span) {
            stack.pop();
            true
        } else {
            false
        }
    }

    /// The latest time seen.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// The threads of the slices still open at the end, one entry per slice, innermost
    /// first per thread, threads in order.
    pub fn open_at_end(&mut self) -> Vec<u64> {
        let mut tids: Vec<_> = self.open.drain().collect();
        tids.sort();
        tids.into_iter().flat_map(|(tid, stack)| std::iter::repeat_n(tid, stack.len())).collect()
    }
}
