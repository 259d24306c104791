//! Channels: one single-producer ring per producer thread, merged by timestamp when
//! read. The user-space form of the kernel tracers' per-CPU buffers (of which Mathieu
//! Desnoyers' LTTng-derived "Generic Ring Buffer Library (v2)", LKML, August 2010, says
//! "the write-side scales almost linearly with the number of cores"): writers never
//! share a cache line, and a write is a single producer's claim (plain stores, no
//! atomic read-modify-write, no lock, no syscall) plus, if the channel's [`Clock`]
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
//! byte order) when the clock stamps records ([`Clock::STAMPED`]): the clock's
//! [`raw`](Clock::raw) reading, TSC ticks for [`Tsc`](crate::clock::Tsc) (the writer pays one
//! `rdtsc`, no conversion) and nanoseconds for the others. Readers hand the caller the
//! timestamp converted to nanoseconds in `CLOCK_MONOTONIC`'s time base
//! ([`Clock::raw_to_ns`]; a channel file stores the calibration, and
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

mod file;
mod lane;
mod local;
mod reader;
mod snapshot;
mod writer;

use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub use file::DEFAULT_MAX_PRODUCERS;
pub use lane::LaneStats;
pub use reader::{ChannelReader, ChannelRecord};
pub use snapshot::{ChannelSnapshot, ChannelSnapshotIter};
pub use writer::{ChannelProducer, ChannelReservation};

use crate::clock::Clock;
use crate::config::{Discard, Mode, Spsc};
use crate::error::Error;
use crate::ring::RingBuf;
use lane::Lane;

/// The slack of a live reader by default: 20 ms.
pub const DEFAULT_SLACK_NS: u64 = 20_000_000;
/// Exited producers' rings an overwrite channel keeps for snapshots by default.
pub const DEFAULT_RETAIN_EXITED: usize = 64;

/// A set of single-producer rings, one per producer, read merged in timestamp order.
/// Cheap to clone (a handle to the same channel). See the [module docs](self).
pub struct Channel<M: Mode = Discard, C: Clock = crate::clock::Monotonic> {
    inner: Arc<Inner<M, C>>,
}

impl<M: Mode, C: Clock> Clone for Channel<M, C> {
    fn clone(&self) -> Self {
        Channel { inner: self.inner.clone() }
    }
}

impl<M: Mode, C: Clock> fmt::Debug for Channel<M, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel")
            .field("mode", &M::NAME)
            .field("clock", &self.inner.clock)
            .field("capacity", &self.inner.capacity)
            .finish()
    }
}

/// Configures a [`Channel`].
#[derive(Debug, Clone)]
pub struct Builder<M: Mode, C: Clock> {
    capacity: u64,
    slack_ns: u64,
    retain_exited: usize,
    /// `None`: the ring's default.
    retire_ahead: Option<u64>,
    max_producers: u32,
    _static: PhantomData<fn() -> (M, C)>,
}

pub(crate) struct Inner<M: Mode, C: Clock> {
    /// Tells channels apart in the thread-local producer table.
    pub(crate) id: u64,
    pub(crate) clock: C,
    pub(crate) capacity: u64,
    retire_ahead: Option<u64>,
    pub(crate) slack_ns: u64,
    retain_exited: usize,
    /// A channel file's: its rings are fixed slots, shared with other processes.
    pub(crate) shared: bool,
    pub(crate) max_producers: u32,
    lanes: Mutex<Registry<M>>,
    /// Bumped (Release) whenever `lanes` changes, so readers refresh their list only
    /// then (Acquire load in `ChannelReader`).
    pub(crate) version: AtomicU64,
    /// One live reader at a time (each ring has one consumer).
    pub(crate) reader_attached: AtomicBool,
}

pub(crate) struct Registry<M: Mode> {
    pub(crate) lanes: Vec<Arc<Lane<M>>>,
    next_id: u32,
    /// Sums over freed rings (all exited).
    pub(crate) freed: ChannelStats,
}

/// Counters of a whole channel: the sums of every producer's [`LaneStats`] (those
/// still held and those freed), plus the reader's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    /// Producers ever attached (a shared channel: its slots).
    pub producers: u64,
    /// Of them, those whose handle was dropped, threads exited (a shared channel: the
    /// slots no live process produces into).
    pub exited: u64,
    /// Records committed.
    pub written: u64,
    /// Reserves refused: records that never entered a ring.
    pub lost: u64,
    /// Overwrite mode: committed records given up to make room.
    pub overwritten: u64,
    /// Overwrite mode: of `overwritten`, the records the live reader never got.
    pub overwritten_unread: u64,
    /// Records the live reader delivered.
    pub read: u64,
    /// Records the live reader delivered out of timestamp order: their producer took
    /// longer than the slack to commit them (see the module docs). Included in `read`.
    pub late: u64,
    /// Records still held in exited producers' rings freed to keep at most
    /// [`Builder::retain_exited`] of them; never read.
    pub freed_unread: u64,
}

impl<M: Mode, C: Clock> Channel<M, C> {
    /// A builder for a channel whose producers each get a ring of `capacity` bytes (a
    /// power of two, as for a [`RingBuf`]).
    pub fn builder(capacity: u64) -> Builder<M, C> {
        Builder {
            capacity,
            slack_ns: DEFAULT_SLACK_NS,
            retain_exited: DEFAULT_RETAIN_EXITED,
            retire_ahead: None,
            max_producers: file::DEFAULT_MAX_PRODUCERS,
            _static: PhantomData,
        }
    }

    /// The clock that stamps this channel's records.
    pub fn clock(&self) -> C {
        self.inner.clock
    }

    /// Each producer's ring size in bytes.
    pub fn capacity(&self) -> u64 {
        self.inner.capacity
    }

    /// The largest payload a record can have (the ring's, less the timestamp).
    pub fn max_record_len(&self) -> usize {
        let ring = crate::format::record::HDR_SIZE as usize * 2;
        (self.inner.capacity as usize - ring).min(crate::format::record::MAX_RECORD_LEN as usize)
            - writer::stamp_len::<C>()
    }

    /// A new producer with a ring of its own. Use one per thread (it is `Send`, not
    /// `Clone`); [`output`](Self::output) and [`with_producer`](Self::with_producer)
    /// keep one per thread for you.
    pub fn producer(&self) -> Result<ChannelProducer<M, C>, Error> {
        if self.inner.shared {
            let (producer, lane) = self.inner.claim_slot()?;
            return Ok(ChannelProducer::new(producer, self.inner.clock, lane));
        }
        let ring = ring_builder::<M>(self.inner.capacity, self.inner.retire_ahead).build()?;
        let producer = ring.producer()?;
        let name = std::thread::current().name().unwrap_or("").to_owned();
        let lane = {
            let mut reg = self.inner.registry();
            let id = reg.next_id;
            reg.next_id += 1;
            let lane = Arc::new(Lane::new(id, name, ring));
            reg.lanes.push(lane.clone());
            self.inner.trim_exited(&mut reg);
            lane
        };
        self.inner.bump_version();
        Ok(ChannelProducer::new(producer, self.inner.clock, lane))
    }

    /// A live reader of the whole channel, merging by timestamp. One at a time:
    /// [`Error::ConsumerAttached`] while another exists.
    pub fn reader(&self) -> Result<ChannelReader<M, C>, Error> {
        ChannelReader::new(self.inner.clone())
    }

    /// Counters of every producer, oldest first.
    pub fn producer_stats(&self) -> Vec<LaneStats> {
        self.inner.registry().lanes.iter().map(|l| l.stats()).collect()
    }

    /// Counters of the whole channel.
    pub fn stats(&self) -> ChannelStats {
        let reg = self.inner.registry();
        let mut totals = reg.freed;
        for lane in &reg.lanes {
            totals.add(&lane.stats());
        }
        totals
    }
}

impl<M: Mode, C: Clock> Builder<M, C> {
    /// How long a live reader trusts an idle producer not to commit a record older than
    /// the time of its pass (module docs). Default [`DEFAULT_SLACK_NS`].
    pub fn slack(mut self, slack: std::time::Duration) -> Self {
        self.slack_ns = slack.as_nanos().min(u128::from(u64::MAX)) as u64;
        self
    }

    /// How many exited producers' rings are kept (default [`DEFAULT_RETAIN_EXITED`]):
    /// for snapshots in overwrite mode, for a reader still to come in discard mode. The
    /// oldest beyond it are freed when a producer is made, their unread records counted.
    pub fn retain_exited(mut self, rings: usize) -> Self {
        self.retain_exited = rings;
        self
    }

    /// Overwrite mode: each ring's retire look-ahead ([`crate::Builder::retire_ahead`];
    /// the same default: 1 KiB or a sixteenth of the capacity).
    pub fn retire_ahead(mut self, bytes: u64) -> Self {
        self.retire_ahead = Some(bytes);
        self
    }

    /// Makes the channel, stamping records with `clock` (for example
    /// [`Tsc::shared()?`](crate::clock::Tsc::shared), [`Monotonic`](crate::clock::Monotonic)).
    /// Checks the configuration by making (and dropping) one ring.
    pub fn build(self, clock: C) -> Result<Channel<M, C>, Error> {
        ring_builder::<M>(self.capacity, self.retire_ahead).build()?;
        Ok(self.finish(clock, Vec::new()))
    }

    /// The channel over `lanes`: a shared channel's slots, or none yet.
    fn finish(self, clock: C, lanes: Vec<Arc<Lane<M>>>) -> Channel<M, C> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let shared = !lanes.is_empty();
        let next_id = lanes.len() as u32;
        let inner = Inner {
            // Relaxed: a unique number, nothing else.
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            clock,
            capacity: self.capacity,
            retire_ahead: self.retire_ahead,
            slack_ns: self.slack_ns,
            retain_exited: self.retain_exited,
            shared,
            max_producers: self.max_producers,
            lanes: Mutex::new(Registry { lanes, next_id, freed: ChannelStats::default() }),
            version: AtomicU64::new(0),
            reader_attached: AtomicBool::new(false),
        };
        Channel { inner: Arc::new(inner) }
    }
}

/// The builder of one producer's ring.
pub(crate) fn ring_builder<M: Mode>(capacity: u64, ahead: Option<u64>) -> crate::Builder<Spsc, M> {
    let b = RingBuf::<Spsc, M>::builder(capacity);
    match ahead {
        Some(a) => b.retire_ahead(a),
        None => b,
    }
}

impl<M: Mode, C: Clock> Inner<M, C> {
    /// The registry, even if a thread panicked holding it (it holds only counters and
    /// handles, consistent after every statement).
    pub(crate) fn registry(&self) -> MutexGuard<'_, Registry<M>> {
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn bump_version(&self) {
        // Release: pairs with the reader's Acquire load: a reader that sees the new
        // version finds the registry changed (it locks it anyway; this only spares the
        // lock on passes where nothing changed).
        self.version.fetch_add(1, Ordering::Release);
    }

    /// Frees the oldest exited rings beyond `retain_exited` (not a shared channel's
    /// slots, nor rings a live reader has not delivered).
    fn trim_exited(&self, reg: &mut Registry<M>) {
        if self.shared {
            return;
        }
        // A ring whose records a live reader may still be delivering is not freed until
        // that reader has them all (`Lane::finish`).
        // Acquire: pairs with the Release store of `ChannelReader::drop`.
        let reader = self.reader_attached.load(Ordering::Acquire);
        let freeable = |l: &Arc<Lane<M>>| l.is_exited() && (!reader || l.is_finished());
        let exited = reg.lanes.iter().filter(|l| l.is_exited()).count();
        let mut extra = exited.saturating_sub(self.retain_exited);
        while extra > 0 {
            let Some(i) = reg.lanes.iter().position(freeable) else { break };
            let lane = reg.lanes.remove(i);
            reg.freed.freed_unread += lane.unread();
            reg.freed.add(&lane.stats());
            extra -= 1;
        }
    }
}

impl ChannelStats {
    /// Adds one producer's counters.
    pub(crate) fn add(&mut self, s: &LaneStats) {
        self.producers += 1;
        self.exited += u64::from(s.exited);
        self.written += s.written;
        self.lost += s.lost;
        self.overwritten += s.overwritten;
        self.overwritten_unread += s.overwritten_unread;
        self.read += s.read;
    }
}
