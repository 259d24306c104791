//! Readers of perf event mmap rings: the ring buffer the kernel fills with
//! `PERF_RECORD_*` records for an event opened with `perf_event_open(2)`.
//!
//! * [`PerfEvent`] opens a software event ([`Software`]) with a builder
//!   ([`PerfEvent::software`]).
//! * [`ForwardRing`] maps its ring writable: the kernel never overwrites what the reader
//!   has not consumed (it drops new records instead, and reports them in a
//!   `PERF_RECORD_LOST` record, see [`ForwardRing::lost`]); [`ForwardRing::read`]
//!   delivers records oldest first, from `data_tail` to `data_head`, and then stores the
//!   new `data_tail` once.
//! * [`BackwardRing`] maps it read-only: the kernel then overwrites the oldest records
//!   without limit (a flight recorder). The event must be opened with
//!   [`backward(true)`](EventBuilder::backward) (`write_backward`), so that `data_head`
//!   always points at the start of the newest record: [`BackwardRing::read`] pauses the
//!   output (`PERF_EVENT_IOC_PAUSE_OUTPUT`), walks from the newest record to the oldest
//!   one still whole, and resumes. A ring written forward and overwritten cannot be
//!   decoded at all: neither its head nor the start of its data area is the start of a
//!   record once the oldest record is partly overwritten.
//! * [`walk_forward`] and [`walk_backward`] are the decoding core on their own: they take
//!   a data area as bytes and positions, so a copied image can be decoded too. Ring
//!   content is untrusted: a header that cannot be right is a [`KernelError::Corrupt`]
//!   naming its offset and size, and every walk ends after at most one buffer size.
//! * [`Sample::parse`] decodes the fixed fields of a `PERF_RECORD_SAMPLE`.
//!
//! ```
//! use ringtrace::kernel::perf::{ForwardRing, PerfEvent, Sample, Software, SAMPLE_TID, SAMPLE_TIME};
//! use std::convert::Infallible;
//!
//! let event = match PerfEvent::software(Software::TaskClock)
//!     .sample_period(100_000) // one sample per 100 µs of this thread's CPU time
//!     .sample_type(SAMPLE_TID | SAMPLE_TIME)
//!     .open()
//! {
//!     Ok(e) => e,
//!     Err(e) => {
//!         eprintln!("skipped: {e}");
//!         return Ok(());
//!     }
//! };
//! let mut ring = ForwardRing::new(&event, 8)?;
//! let t = std::time::Instant::now();
//! while t.elapsed().as_millis() < 5 {
//!     std::hint::spin_loop();
//! }
//! let mut samples = 0;
//! ring.read(|rec| {
//!     if let Some(s) = Sample::parse(&rec, event.sample_type()) {
//!         assert_eq!(s.pid, Some(std::process::id()));
//!         samples += 1;
//!     }
//!     Ok::<(), Infallible>(())
//! })?;
//! println!("{samples} samples, {} lost", ring.lost());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod event;
mod map;
mod record;
mod ring;
mod sample;
mod walk;

#[cfg(test)]
mod tests;

pub use crate::error::{CorruptReason, KernelError};
pub use event::{EventBuilder, PerfEvent, Software};
pub use record::{PerfRecord, HEADER_SIZE, RECORD_LOST, RECORD_SAMPLE, RECORD_THROTTLE, RECORD_UNTHROTTLE};
pub use ring::{BackwardRing, ForwardRing, PausedRing};
pub use sample::{
    Sample, SAMPLE_ADDR, SAMPLE_CPU, SAMPLE_ID, SAMPLE_IDENTIFIER, SAMPLE_IP, SAMPLE_PERIOD, SAMPLE_STREAM_ID,
    SAMPLE_TID, SAMPLE_TIME,
};
pub use walk::{walk_backward, walk_forward};
