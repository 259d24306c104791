//! A [`tracing`](https://docs.rs/tracing) layer that records spans and events into
//! per-thread ringtrace rings: a **flight recorder** of each thread's newest events,
//! dumped on demand, on a panic, or from outside the process; or a **stream** that a
//! background thread drains into a trace file, every lost event counted in it.
//!
//! ```
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! let dir = std::env::temp_dir().join(format!("ringtrace-doc-{}", std::process::id()));
//! let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder()
//!     .per_thread_bytes(256 << 10)
//!     .directory(&dir) // `ringtrace decode DIR` reads it from outside, live or after a crash
//!     .replace_existing(true)
//!     .build()?;
//! let subscriber = tracing_subscriber::registry().with(layer);
//! tracing::subscriber::with_default(subscriber, || {
//!     let span = tracing::info_span!("request", id = 7);
//!     let _entered = span.enter();
//!     tracing::warn!(bytes = 512u64, path = "/a", "slow write");
//! });
//! recorder.dump(dir.join("dump.rtt"))?;
//!
//! let trace = ringtrace_tracing::decode::Trace::open(dir.join("dump.rtt"))?;
//! let event = &trace.events()[0];
//! assert_eq!(event.message(), Some("slow write"));
//! assert_eq!(event.spans[0].name, "request");
//! assert_eq!(trace.lost(), 0);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What a record costs and holds
//!
//! The calling thread encodes the event into its own ring: no lock, no allocation, no
//! cache line shared with another thread, one TSC read (where the TSC is invariant;
//! else `CLOCK_MONOTONIC`). A callsite's metadata (name, target, level, module, file,
//! line, field names) is written once, to the catalog, when `tracing` registers it; an
//! event record carries the callsite's number, the span it is in, and its field values
//! in binary: integers, floats and bools as such, `&str` as text, `Debug`, `Display`
//! and error values formatted into the record. Spans are records too: new (with
//! fields), enter, exit, record, follows-from, close.
//!
//! # Bounds, and nothing lost silently
//!
//! * A text value is cut at [`Builder::max_value_bytes`] (1 KiB) on a character
//!   boundary and marked cut; a record stops at [`Builder::max_record_bytes`] (4 KiB),
//!   and the values past it are dropped and counted in the record.
//! * An event its thread's ring refuses (a full ring, in a stream) is counted; the
//!   thread writes the count into its ring before its next record, and decoding shows
//!   it where it happened ([`decode::EntryKind::Lost`]). [`Recorder::stats`] counts
//!   every cause: refused, from a thread that found no ring, during a thread's exit.
//! * A flight recorder overwrites its oldest records by design: a dump says how many
//!   (`overwritten`), and an event whose span's `new span` record was overwritten still
//!   names the span.
//!
//! # Layout
//!
//! `wire` (a record's bytes) and `file` (the trace file's chunks) are the formats;
//! `catalog` holds callsites and threads; `shared` and `local` the recorder's and each
//! thread's state; `layer` the `Layer`, `emitter` its counterpart for events given as
//! data (the C API's); `builder`, `recorder` and `stream` the user's
//! handles and the stream's drain; [`files`] creates the files and directories they
//! write (new, never through a symlink, mode 0600 and 0700); `decode` reads it all back.

#![forbid(unsafe_code)]

mod builder;
mod catalog;
pub mod decode;
mod directory;
mod emitter;
mod error;
mod file;
pub mod files;
mod layer;
mod local;
mod recorder;
mod shared;
mod stream;
mod wire;

pub use builder::{Builder, DEFAULT_MAX_RECORD, DEFAULT_MAX_THREADS, DEFAULT_MAX_VALUE, DEFAULT_PER_THREAD};
pub use directory::{snapshot, Snapshotted};
pub use emitter::{CallsiteInfo, CallsiteKind, Emitter};
pub use error::Error;
pub use file::{CATALOG_FILE, MAGIC as TRACE_MAGIC, RINGS_FILE, VERSION as TRACE_VERSION};
pub use layer::RingLayer;
pub use recorder::{Dumped, Recorder, Stats};
/// A callsite's level, as [`CallsiteInfo`] takes it.
pub use tracing_core::Level;
pub use wire::FieldValue;
