//! Traces in the formats other tools read. [`chrome`]: Chrome's Trace Event Format
//! (JSON), which `chrome://tracing`, Perfetto's UI (ui.perfetto.dev) and
//! `trace_processor` open. [`perfetto`]: Perfetto's protobuf trace of `TrackEvent`
//! packets. `ringtrace export` runs these.
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
//! let done = ringtrace_tracing::export::chrome::write(&trace, &mut json)?;
//! assert_eq!((done.events, done.slices), (1, 1));
//! let v: serde_json::Value = serde_json::from_slice(&json)?;
//! assert!(v["traceEvents"].as_array().unwrap().iter().any(|e| e["ph"] == "i" && e["name"] == "step"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod chrome;
pub mod ctf;
pub mod perfetto;

use std::collections::HashMap;

use crate::decode::{Entry, EntryKind, Field};

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
}

/// Span slices as the formats draw them: a slice per span entry on the entering thread,
/// nested per thread (Chrome's `B`/`E`, Perfetto's slice begin/end).
#[derive(Default)]
pub(crate) struct Slices {
    /// Each span's name, category (its target) and fields, as known so far.
    spans: HashMap<u64, (String, String, Vec<Field>)>,
    /// Each thread's open slices, innermost last.
    open: HashMap<u64, Vec<u64>>,
    last: u64,
}

impl Slices {
    /// The thread id an entry's slices and events go on: its thread's, or for a lane no
    /// thread entry names, one of its own above every real thread id.
    pub fn tid(entry: &Entry<'_>) -> u64 {
        entry.thread.map_or(u64::from(u32::MAX) + u64::from(entry.lane), |t| u64::from(t.tid))
    }

    /// Takes note of what a span record says (new, recorded fields, closed).
    pub fn note(&mut self, kind: &EntryKind<'_>, ts: u64) {
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
    pub fn enter(&mut self, tid: u64, span: u64, ts: u64) -> (String, String, &[Field]) {
        self.last = self.last.max(ts);
        self.open.entry(tid).or_default().push(span);
        match self.spans.get(&span) {
            Some((name, cat, fields)) => (name.clone(), cat.clone(), fields),
            None => ("?".into(), String::new(), &[]),
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
