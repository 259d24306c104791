//! # ringtrace
//!
//! A ring buffer for trace and event data: many producers, one consumer, records of
//! any length written and read in place. It is the Linux BPF ring buffer's design in
//! user space (one ring shared by all producers, records in reservation order, 8-byte
//! headers with BUSY and DISCARD bits, a data area mapped twice so every record is
//! contiguous, BPF wakeup flags), without the kernel's reservation lock: a producer
//! preempted between reserve and commit stops no other producer.
//!
//! ```
//! use ringtrace::{MpscRing, Wakeup};
//!
//! let ring = MpscRing::new(1 << 16)?;                 // 64 KiB, multi-producer
//! let mut producer = ring.producer()?;
//! let mut consumer = ring.consumer()?;
//!
//! let mut rec = producer.reserve(8)?;                // zero-copy reservation
//! rec.copy_from_slice(&42u64.to_le_bytes());
//! rec.commit();                                      // or .discard(), or drop it
//!
//! for rec in consumer.iter() {
//!     assert_eq!(u64::from_le_bytes(rec.try_into()?), 42);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Static configuration
//!
//! [`RingBuf<K, M>`](RingBuf) takes the producer kind ([`crate::config::Mpsc`] or [`crate::config::Spsc`]) and the
//! mode ([`crate::config::Discard`] or [`crate::config::Overwrite`]) as type parameters, so each combination compiles
//! to its own fast path with no runtime branch on them.
//!
//! ## Flight recorder
//!
//! An [`crate::config::Overwrite`] ring ([`FlightRecorder`]) always holds the newest records that fit:
//! producers give up the oldest whole records (never one still being written) and never
//! wait for a reader. Read it with [`RingBuf::snapshot`] (records copied out and checked,
//! walked both ways, written to a file with [`Snapshot::write_to`]), follow it with
//! [`crate::recorder::OverwriteConsumer`], or [`pause`](RingBuf::pause) it and read it in place.
//!
//! ```
//! use ringtrace::{FlightRecorder, Wakeup};
//!
//! let ring = FlightRecorder::new(1 << 16)?;          // the newest ~64 KiB of records
//! let mut producer = ring.producer()?;
//! for i in 0..100_000u64 {
//!     producer.output(&i.to_le_bytes(), Wakeup::Default)?;
//! }
//! let snap = ring.snapshot()?;
//! let newest = snap.iter().next_back().unwrap();
//! assert_eq!(newest, 99_999u64.to_le_bytes());
//! assert_eq!(snap.overwritten_before() + snap.len() as u64, 100_000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Between processes
//!
//! A ring made in a file ([`Builder::create`]) or a sealed memfd
//! ([`Builder::build_shared`], handed over with [`RingBuf::send`]) is attached to by
//! other processes ([`RingBuf::open`], [`RingBuf::receive`]) with the same API. Attaching
//! checks the file as untrusted input; a process killed at any instruction leaves
//! nothing stuck (its roles are taken over, its unfinished records stepped over and
//! counted in [`Stats::dead`]); [`inspect`] reads ring files without mapping them, for
//! tools and for recovery after a crash.
//!
//! ```
//! use ringtrace::{Access, MpscRing, Wakeup};
//!
//! let path = std::env::temp_dir().join(format!("lib-doc-{}.ring", std::process::id()));
//! let ring = MpscRing::builder(1 << 16).create(&path)?;   // in the traced program
//! let mut producer = ring.producer()?;
//!
//! // In another process: attach by name, consume.
//! let other = MpscRing::open_with(&path, Access::Consumer)?;
//! let mut consumer = other.consumer()?;
//! producer.output(b"across processes", Wakeup::Default)?;
//! let n = consumer.consume(|rec| {
//!     assert_eq!(rec, b"across processes");
//! })?;
//! assert_eq!(n, 1);
//! std::fs::remove_file(&path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Channels
//!
//! A [`Channel`] gives each producer thread its own single-producer ring (no shared
//! cache line, no atomic read-modify-write on the write path), stamps records with a
//! static [`crate::clock::Clock`] ([`crate::clock::Tsc`], [`crate::clock::Monotonic`], [`crate::clock::BestClock`], [`crate::clock::NoClock`]), and reads them
//! merged in timestamp order: exactly in a [`crate::channel::ChannelSnapshot`], live (with a documented
//! bound) in a [`ChannelReader`]. A channel file holds one ring per producer slot for
//! producers in several processes. See [`channel`].
//!
//! ## Guarantees
//!
//! * Records reach the consumer in reservation order, each exactly once.
//! * A record that does not fit is refused at once and counted ([`Stats::lost`]); one
//!   that never could is refused with [`ReserveError::TooLarge`]. Nothing is lost
//!   without being counted: in overwrite mode, records given up are counted
//!   ([`Stats::overwritten`]), and readers count those they never saw.
//! * Overwrite-mode readers never deliver a record torn or overwritten while they read
//!   it, and reading while producers write is not a data race (every access to the
//!   ring's bytes in that mode is atomic).
//! * No lost wakeup: a consumer in [`Consumer::poll`] never sleeps past a commit that
//!   the wakeup policy says should wake it (see `core` and `barrier` in the source).
//!
//! ## Limits
//!
//! Capacity: a power of two from one page to 4 GiB. Record payload: at most
//! `capacity - 16` bytes (the header, and the next record's header word, which producers
//! keep zeroed), and at most 2^30 - 1: a record of
//! [`RingBuf::max_record_len`] bytes fits whenever the ring is empty. Little- and
//! big-endian 64-bit Linux.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(loom, allow(dead_code, unused_imports))]

mod attach;
mod barrier;
mod callback;
pub mod channel;
pub mod clock;
pub mod config;
pub mod consumer;
mod disconnect;
pub mod error;
pub mod format;
mod front;
pub mod inspect;
pub mod kernel;
mod owner;
mod producer;
mod protocol;
pub mod recorder;
mod region;
mod ring;
mod ringfile;
mod shared;
#[cfg(not(loom))]
pub mod source;
mod sync;
#[cfg(all(feature = "tokio", not(loom)))]
pub mod tokio;
mod wait;

// The crate root: the names most programs need (all in `front`, which the loom models,
// checking the protocol core alone, leave out). Everything else is in the modules above.
#[cfg(not(loom))]
pub use front::*;
