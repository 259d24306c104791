//! Reading ring files as untrusted input: `ringtrace stat`, `tail` and `snapshot`.
//!
//! A ring file is the control block (8192 bytes, see the crate's layout: meta, positions,
//! counters) followed by the data area at `data_offset`. Any process that can write the
//! file can put anything in it, so this reader trusts none of it: it never maps the file
//! (a process that truncates it cannot make us fault), it reads with positioned reads
//! through [`Source`], checks every header field before using it, and every position
//! against the others. Whatever the bytes, the result is a value or a [`FormatError`]
//! with a one-line message; records that make no sense are skipped and counted, and the
//! walk stops at the first header that cannot be one a producer wrote. Work and memory
//! are bounded by the file's size: at most one copy of the data area is read per call.
//!
//! This module has no `unsafe` code.
//!
//! ```
//! use ringtrace::inspect::{image::ImageBuilder, RingFile, RingMode};
//!
//! // A byte image of a ring file (the test-image builder; a real ring file is read
//! // with `RingFile::open(path)`).
//! let image = ImageBuilder::new(4096, RingMode::Overwrite).record(b"hello").record(b"world").build();
//! let ring = RingFile::from_source(image)?;
//! assert_eq!(ring.header().capacity, 4096);
//! let state = ring.state()?;
//! assert_eq!(state.committed, 2);
//! let records = ring.records()?;
//! let payloads: Vec<&[u8]> = records.iter().map(|r| r.payload).collect();
//! assert_eq!(payloads, [&b"hello"[..], &b"world"[..]]);
//! # Ok::<(), ringtrace::inspect::FormatError>(())
//! ```
//!
//! A ring image inside a larger file (one of several rings in one file, at some
//! offset) is read through [`At`]: [`RingFile::open_at`], [`RingFile::from_source_at`].
//!
//! Reading a live ring: [`RingFile::records`] reads the positions, then the records,
//! then the positions again, and drops (and counts in
//! [`Records::gone_during_read`]) the records that the consumer or overwriting
//! producers reclaimed meanwhile, whose bytes may have changed under the copy.

#![cfg(not(loom))]
#![forbid(unsafe_code)]

pub mod channel;
mod file;
mod header;
#[doc(hidden)]
pub mod image;
mod records;
mod source;
mod state;

pub use crate::error::FormatError;
pub use file::RingFile;
pub use header::{Header, RingKind, RingMode};
pub use records::{Corrupt, Record, Records, RecordsIter, Unfinished, MAX_LISTED_UNFINISHED};
pub use source::{At, Source};
pub use state::{SlotInfo, State};

#[cfg(test)]
mod tests;

/// Whether the process `pid` a ring file names (a creator, an attached producer or
/// consumer, a lock holder) still runs: false when the kernel knows no such process
/// (`kill(pid, 0)` fails with `ESRCH`) or it is a zombie (exited, not yet reaped); a
/// process this one may not signal exists. The test ringtrace itself uses to take over
/// the roles of processes that died. A pid the kernel has since given to another
/// process counts as alive: pids are what ring files record.
///
/// ```
/// assert!(ringtrace::inspect::process_alive(std::process::id()));
/// assert!(!ringtrace::inspect::process_alive(0));
/// ```
pub fn process_alive(pid: u32) -> bool {
    crate::owner::alive(pid)
}
