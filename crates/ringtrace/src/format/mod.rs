//! Every byte format ringtrace reads or writes, each constant defined here once: the
//! record header ([`record`]), the control block at the start of every ring and the
//! values of its words ([`control`], with the byte offsets of its fields in
//! [`offsets`]), channel files ([`channel`]) and snapshot files ([`snapshot`]).
//!
//! A ring in memory or in a file:
//!
//! ```text
//!  offset 0     control block   8192 bytes (see `control`)
//!  offset 8192  data area       capacity bytes of records (see `record`), mapped twice
//!                               back to back so that every record is contiguous
//! ```
//!
//! Writers, the fast path, the untrusted readers of [`inspect`](crate::inspect) and the
//! kernel ring readers all import their constants from here; this module imports
//! nothing of the rest of the crate but its atomics and error types.
//!
//! Every byte format of the project, with this one, is laid out in one page:
//! `docs/formats.md` in the repository.

pub mod channel;
pub mod control;
#[cfg(not(loom))]
pub mod offsets;
pub mod record;
pub mod snapshot;
