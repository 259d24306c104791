//! Channels: one single-producer ring per producer thread, merged by timestamp when
//! read. The user-space form of the kernel tracers' per-CPU buffers (of which Mathieu
//! Desnoyers' LTTng-derived "Generic Ring Buffer Library (v2)", LKML, August 2010, says
//! "the write-side scales almost linearly with the number of cores"): writers never
//! share a cache line, and a write is a single producer's claim (plain stores, no
//! atomic read-modify-write, no lock, no syscall) plus, if the channel's [`crate::clock::Clock`]
//! stamps records, one clock read.
//!
//! ```
//! use ringtrace::{Channel, Wakeup};
//! use ringtrace::clock::Monotonic;
//! use ringtrace::config::Discard;
//!
//! let channel = Channel::<Discard, Monotonic>::builder(1 << 16).build(Monotonic)?;
//! let mut reader = channel.reader()?;
//! std::thread::scope(|s| {
//!     for t in 0..2u8 {
//!         let channel = &channel;
//!         s.spawn(move || {
//!             // This thread's ring is made on its first write.
//!             for i in 0..100u8 {
//!                 channel.output(&[t, i], Wakeup::Default).unwrap();
//!             }
//!         });
//!     }
//! });
//! let mut last = 0;
//! let n = reader.drain(|rec| {
//!     assert!(rec.timestamp >= last, "merged in time order");
//!     last = rec.timestamp;
//!     Ok::<(), std::convert::Infallible>(())
//! })?;
//! assert_eq!(n, 200);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Records
//!
//! A channel record is a ring record whose payload starts with an 8-byte stamp (native
//! byte order) when the clock stamps records ([`crate::clock::Clock::STAMPED`]): the clock's
//! [`raw`](crate::clock::Clock::raw) reading, TSC ticks for [`Tsc`](crate::clock::Tsc) (the writer pays one
//! `rdtsc`, no conversion) and nanoseconds for the others. Readers hand the caller the
//! timestamp converted to nanoseconds in `CLOCK_MONOTONIC`'s time base
//! ([`crate::clock::Clock::raw_to_ns`]; a channel file stores the calibration, and
//! [`ChannelHeader::to_ns`](crate::inspect::channel::ChannelHeader::to_ns) converts
//! for tools), and the rest. The stamp is taken at reserve, before the claim, so each
//! producer's records are in timestamp order in its ring.
//!
//! # Reading in time order
//!
//! * A [`ChannelSnapshot`] (overwrite mode) merges a snapshot of every producer's ring:
//!   exactly ordered by timestamp (ties in producer order), readable both ways.
//! * A [`ChannelReader`] follows the channel live. It delivers a record once no
//!   producer can still commit an older one, as far as it can tell: a producer whose
//!   ring holds records bounds the others by its oldest, an exited producer with an
//!   empty ring bounds nothing, and an idle one bounds them by the time of the pass
//!   minus the channel's *slack* ([`Builder::slack`], 20 ms by default). So an idle
//!   producer delays the others by at most the slack, never forever. The bound fails
//!   only for a record whose producer spent longer than the slack between taking its
//!   timestamp and committing (preempted, or a slow writer): it is delivered when it
//!   shows up, out of order, and counted in [`ChannelStats::late`], never dropped.
//!   (LTTng's channel-wide iterator makes the same trade with a 250 ms wait.)
//!
//! # Lifecycle
//!
//! A thread's ring lives as long as its producer handle (the thread-local one made by
//! [`Channel::output`] lives until the thread exits: its thread-local destructors
//! run, which may be just after a `join` of the thread returns), then stays readable: in discard
//! mode the live reader frees it once it has drained it; in overwrite mode it is kept
//! for snapshots. Either way at most [`Builder::retain_exited`] exited rings are kept
//! that no live reader is still delivering (in discard mode: while no reader is
//! attached); past that, the oldest is freed and its unread records counted
//! ([`ChannelStats::freed_unread`]), so a program that starts threads without end
//! does not grow without end.

#![cfg(not(loom))]

mod bell;
mod file;
mod handle;
mod inner;
mod lane;
mod local;
mod reader;
mod snapshot;
mod staged;
mod tournament;
mod writer;

pub use handle::{Builder, Channel};
pub use inner::{ChannelStats, DEFAULT_MAX_PRODUCERS, DEFAULT_RETAIN_EXITED, DEFAULT_SLACK_NS};
pub use lane::LaneStats;
pub use reader::{ChannelReader, ChannelRecord};
pub use snapshot::{ChannelSnapshot, ChannelSnapshotIter};
pub use writer::{ChannelProducer, ChannelReservation, Stamp};
