//! Reading what a recorder wrote: a dump, a stream's trace file, or a recorder
//! directory (live, or after its process died). [`Trace::open`] reads and checks it;
//! [`Trace::entries`] gives every record with its names resolved, in timestamp order;
//! [`Trace::events`] the events alone, each with its span context; [`text`] prints
//! them as `ringtrace decode` does.
//!
//! ```no_run
//! let trace = ringtrace_tracing::decode::Trace::open("crash.rtt")?;
//! for event in trace.events() {
//!     println!("{} {} {:?}", event.ts_ns, event.level(), event.message());
//! }
//! eprintln!("{} events lost", trace.lost());
//! # Ok::<(), ringtrace_tracing::Error>(())
//! ```

mod load;
pub mod raw;
mod records;
mod ring_read;
mod ring_scan;
mod rings;
pub mod text;
mod trace;
pub mod view;

pub use crate::catalog::{Callsite, ThreadInfo};
pub use crate::file::{Damage, Process};
pub use crate::wire::Value;
pub use load::Problems;
pub use trace::{Entries, Entry, EntryKind, Event, Field, HeldRing, SpanContext, Trace};
