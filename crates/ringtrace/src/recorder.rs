//! The flight recorder's readers: a consumer that follows an overwrite ring
//! ([`OverwriteConsumer`]), a paused ring read in place ([`Paused`]), and the iterator
//! over a [`Snapshot`](crate::Snapshot) ([`SnapshotIter`]). Made by
//! [`FlightRecorder::consumer`](crate::RingBuf::consumer),
//! [`pause`](crate::RingBuf::pause) and [`Snapshot::iter`](crate::Snapshot::iter).

pub use crate::overwrite::consumer::OverwriteConsumer;
pub use crate::overwrite::paused::Paused;
pub use crate::overwrite::snapshot::SnapshotIter;
