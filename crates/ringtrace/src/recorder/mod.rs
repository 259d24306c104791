//! The flight recorder's readers: a consumer that follows an overwrite ring
//! ([`OverwriteConsumer`]), a paused ring read in place ([`Paused`]), the checked copy of
//! its records ([`Snapshot`](crate::Snapshot), walked with a
//! [`consumer::Iter`](crate::consumer::Iter)). Made
//! by [`FlightRecorder::consumer`](crate::RingBuf::consumer),
//! [`pause`](crate::RingBuf::pause) and [`snapshot`](crate::RingBuf::snapshot). The
//! overwrite protocol itself is the crate's `protocol::retire`.

#![cfg(not(loom))]

pub(crate) mod consumer;
pub(crate) mod mark;
pub(crate) mod paused;
mod ring;
pub(crate) mod snapshot;

pub use consumer::OverwriteConsumer;
pub use mark::ReadMark;
pub use paused::Paused;
