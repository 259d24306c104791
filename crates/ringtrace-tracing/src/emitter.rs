//! [`Emitter`]: records events and spans that do not come through `tracing`, from
//! another language's instrumentation (the C API's `RINGTRACE_EVENT` and
//! `RINGTRACE_SPAN_ENTER`), into the same per-thread rings and catalog as the layer,
//! in the same record format: `ringtrace decode`, `export` and `snapshot` read them as
//! they read the layer's.
//!
//! A callsite is registered once, under a key its caller keeps unique (the C API uses
//! the address of the callsite's static), and events then carry only its number and
//! their values.

use std::sync::Arc;

use tracing_core::Level;

use crate::catalog::{Callsite, Parts};
use crate::local::{self, Local, Naming};
use crate::shared::{Counters, Key, Shared};
use crate::wire::{kind, Encoder, FieldValue};

/// Whether a callsite makes events or spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallsiteKind {
    Event,
    Span,
}

/// A callsite's metadata, as [`Emitter::register`] records it in the catalog.
#[derive(Clone, Copy, Debug)]
pub struct CallsiteInfo<'a> {
    pub kind: CallsiteKind,
    pub level: Level,
    /// A span's name; an event's name (`tracing` names events `event FILE:LINE`).
    pub name: &'a str,
    /// What `ringtrace decode` shows as the event's target (a module, a component).
    pub target: &'a str,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    /// The names of the fields, in the order values are given (at most 255).
    pub fields: &'a [&'a str],
}

/// Records events and spans given as data into a recorder's rings; made by
/// [`Recorder::emitter`](crate::Recorder::emitter). Cheap to clone; every thread that
/// records through it gets a ring of its own on its first record, as with the layer.
///
/// ```
/// use ringtrace_tracing::{CallsiteInfo, CallsiteKind, FieldValue};
///
/// let (_layer, recorder) = ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).build()?;
/// let emitter = recorder.emitter();
/// static SITE: u8 = 0; // any address unique to the callsite
/// let site = emitter.register(&SITE as *const u8 as usize, &CallsiteInfo {
///     kind: CallsiteKind::Event,
///     level: tracing_core::Level::WARN,
///     name: "event app.c:12",
///     target: "app",
///     file: Some("app.c"),
///     line: Some(12),
///     fields: &["message", "bytes"],
/// });
/// emitter.event(site, [FieldValue::Str("slow write"), FieldValue::U64(512)]);
///
/// let path = std::env::temp_dir().join(format!("emitter-doc-{}.rtt", std::process::id()));
/// recorder.dump(&path)?;
/// let trace = ringtrace_tracing::decode::Trace::open(&path)?;
/// let event = &trace.events()[0];
/// assert_eq!(event.message(), Some("slow write"));
/// assert_eq!(event.field("bytes"), Some(&ringtrace_tracing::decode::Value::U64(512)));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Emitter {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Emitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter").field("recorder", &self.shared.id).finish()
    }
}

impl Emitter {
    pub(crate) fn new(shared: Arc<Shared>) -> Emitter {
        Emitter { shared }
    }

    /// A number unique to this emitter's recorder in the process: a caller that caches
    /// callsite numbers keeps them per recorder by it.
    pub fn recorder_id(&self) -> u64 {
        self.shared.id
    }

    /// The number of the callsite `key` names, for [`event`](Self::event) and
    /// [`enter_span`](Self::enter_span); the first call for a key writes `info` into
    /// the catalog, later calls return the same number (and ignore `info`).
    pub fn register(&self, key: usize, info: &CallsiteInfo<'_>) -> u32 {
        self.shared.intern(Key::Foreign(key), |id| {
            Callsite::encode_parts(
                id,
                &Parts {
                    is_span: info.kind == CallsiteKind::Span,
                    level: info.level,
                    name: info.name,
                    target: info.target,
                    module_path: None,
                    file: info.file,
                    line: info.line,
                    fields: info.fields,
                },
            )
        })
    }

    /// Records an event of callsite `callsite` in the calling thread's innermost span
    /// entered through this emitter; the `i`th value is that of the callsite's field
    /// `i`. Values past the record bound are dropped and counted in the record, text and
    /// bytes past the value bound cut (as the layer's).
    #[inline]
    pub fn event<'v>(&self, callsite: u32, values: impl IntoIterator<Item = FieldValue<'v>>) {
        local::with_named(&self.shared, Naming::Kernel, |l| {
            let (span, span_callsite) = l.current();
            let mut head = [0u8; 20];
            head[..4].copy_from_slice(&callsite.to_le_bytes());
            head[4..12].copy_from_slice(&span.to_le_bytes());
            head[12..16].copy_from_slice(&span_callsite.to_le_bytes());
            self.write(l, kind::EVENT, &head, 16, values);
        });
    }

    /// Makes a span of callsite `callsite` with `values`, child of the calling thread's
    /// innermost span entered through this emitter, and enters it; returns its id
    /// (never 0), which [`exit_span`](Self::exit_span) takes on the same thread.
    /// Returns 0 (and records nothing) where the thread cannot record: while it exits.
    pub fn enter_span<'v>(&self, callsite: u32, values: impl IntoIterator<Item = FieldValue<'v>>) -> u64 {
        let id = self.shared.span_id();
        let entered = local::with_named(&self.shared, Naming::Kernel, |l| {
            let mut head = [0u8; 20];
            head[..4].copy_from_slice(&callsite.to_le_bytes());
            head[4..12].copy_from_slice(&id.to_le_bytes());
            head[12..].copy_from_slice(&l.current().0.to_le_bytes());
            // Made and entered at once: one `open` record.
            self.write(l, kind::OPEN, &head, 20, values);
            l.stack.push((id, callsite));
        });
        if entered.is_some() {
            id
        } else {
            0
        }
    }

    /// Exits and closes span `span`, entered on this thread by
    /// [`enter_span`](Self::enter_span). Returns false, and records nothing, for a
    /// span this thread has not entered (or has exited already).
    pub fn exit_span(&self, span: u64) -> bool {
        local::with_named(&self.shared, Naming::Kernel, |l| {
            // Spans exit in reverse order of entering, almost always; else the
            // innermost entry of this span goes.
            let Some(i) = l.stack.iter().rposition(|&(s, _)| s == span) else { return false };
            l.stack.remove(i);
            // Exited and closed at once: one `done` record.
            l.write_simple(kind::DONE, span, None);
            true
        })
        .unwrap_or(false)
    }

    /// Encodes a record with values into the thread's scratch buffer and writes it.
    #[inline]
    fn write<'v>(
        &self,
        l: &mut Local,
        k: u8,
        head: &[u8; 20],
        len: usize,
        values: impl IntoIterator<Item = FieldValue<'v>>,
    ) {
        let mut buf = std::mem::take(&mut l.scratch);
        let limits = self.shared.limits;
        let mut enc = Encoder::new(&mut buf, k, head, len, limits.max_record, limits.max_value);
        for (i, v) in values.into_iter().enumerate() {
            enc.value_at(i, &v);
        }
        if enc.finish() {
            Counters::bump(&self.shared.counters.cut, 1);
        }
        l.write(&buf);
        l.scratch = buf;
    }
}
