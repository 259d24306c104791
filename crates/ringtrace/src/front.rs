//! The names at the crate root: the ones most programs need.

#![cfg(not(loom))]

pub use crate::attach::{Access, Owners};
pub use crate::channel::{Channel, ChannelReader};
pub use crate::config::Wakeup;
pub use crate::consumer::Consumer;
pub use crate::error::{ConsumeError, Error, FormatError, ReserveError};
pub use crate::producer::{Producer, Reservation};
pub use crate::recorder::snapshot::Snapshot;
pub use crate::ring::{Builder, RingBuf};
pub use crate::shared::Stats;

/// A multi-producer ring in discard mode.
pub type MpscRing = RingBuf<crate::config::Mpsc, crate::config::Discard>;
/// A single-producer ring in discard mode.
pub type SpscRing = RingBuf<crate::config::Spsc, crate::config::Discard>;
/// A multi-producer ring in overwrite mode: a flight recorder that always holds the
/// newest records that fit. See [`Overwrite`](crate::config::Overwrite), [`RingBuf::snapshot`],
/// [`RingBuf::pause`].
pub type FlightRecorder = RingBuf<crate::config::Mpsc, crate::config::Overwrite>;
