//! Error types. Every misuse the type system cannot rule out is one of these, with a
//! message that says what was wrong and what is allowed; nothing panics on input.
//!
//! Five types, each an enum to match on, each message one line:
//!
//! * [`Error`]: setting up, attaching, pausing, clocks, files and system calls of the
//!   user-space rings and channels;
//! * [`ReserveError`]: a producer's refusals;
//! * [`ConsumeError`]: reading records and taking snapshots;
//! * [`FormatError`]: bytes of a file or of shared memory that are not a valid ringtrace
//!   format (ring and channel files, snapshot files), and the I/O of reading them;
//! * [`KernelError`]: attaching to and reading the Linux kernel's rings (BPF ring buffer
//!   maps, perf events).

mod consume;
mod format;
mod kernel;
mod reserve;
mod setup;

#[cfg(test)]
mod tests;

pub use consume::ConsumeError;
pub use format::FormatError;
pub use kernel::{CorruptReason, KernelError};
pub use reserve::ReserveError;
pub use setup::Error;
