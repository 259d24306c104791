//! What the layer, every thread's state and the recorder handle share: the channel of
//! per-thread rings, the catalog, the callsite numbers and the loss counters.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use ringtrace::channel::{Channel, ChannelProducer, Stamp};
use ringtrace::clock::{BestClock, Clock};
use ringtrace::config::{Discard, Overwrite};
use ringtrace::{ReserveError, Wakeup};
use tracing_core::Metadata;

use crate::catalog::{Callsite, Catalog};
use crate::file::{chunk, Process};

/// The per-thread rings: overwrite (flight recorder) or discard (stream) mode.
pub(crate) enum Sink {
    Flight(Channel<Overwrite, BestClock>),
    Stream(Channel<Discard, BestClock>),
}

/// A thread's producer into the sink.
pub(crate) enum LaneProducer {
    Flight(ChannelProducer<Overwrite, BestClock>),
    Stream(ChannelProducer<Discard, BestClock>),
}

impl LaneProducer {
    /// Writes one record. Readers poll the rings: no wakeup is asked for.
    #[inline]
    pub fn output(&mut self, bytes: &[u8]) -> Result<(), ReserveError> {
        match self {
            LaneProducer::Flight(p) => p.output(bytes, Wakeup::NoWakeup),
            LaneProducer::Stream(p) => p.output(bytes, Wakeup::NoWakeup),
        }
    }

    /// The rings' clock now.
    #[inline]
    pub fn stamp(&self) -> Stamp {
        match self {
            LaneProducer::Flight(p) => p.stamp(),
            LaneProducer::Stream(p) => p.stamp(),
        }
    }

    /// Writes one record stamped `stamp` (taken by [`stamp`](Self::stamp), no older than
    /// the ring's last record).
    #[inline]
    pub fn output_stamped(&mut self, bytes: &[u8], stamp: Stamp) -> Result<(), ReserveError> {
        match self {
            LaneProducer::Flight(p) => p.output_stamped(bytes, stamp, Wakeup::NoWakeup),
            LaneProducer::Stream(p) => p.output_stamped(bytes, stamp, Wakeup::NoWakeup),
        }
    }

    /// Whether a drain reads this ring (a stream).
    pub fn is_stream(&self) -> bool {
        matches!(self, LaneProducer::Stream(_))
    }

    /// The lane (the channel's producer number).
    pub fn lane(&self) -> u32 {
        match self {
            LaneProducer::Flight(p) => p.id(),
            LaneProducer::Stream(p) => p.id(),
        }
    }
}

impl Sink {
    pub fn producer(&self) -> Result<LaneProducer, ringtrace::Error> {
        Ok(match self {
            Sink::Flight(c) => LaneProducer::Flight(c.producer()?),
            Sink::Stream(c) => LaneProducer::Stream(c.producer()?),
        })
    }

    /// `CLOCK_MONOTONIC` nanoseconds now, by the rings' clock (the records' time base).
    pub fn now_ns(&self) -> u64 {
        let clock = match self {
            Sink::Flight(c) => c.clock(),
            Sink::Stream(c) => c.clock(),
        };
        clock.raw_to_ns(clock.raw())
    }

    pub fn max_record_len(&self) -> usize {
        match self {
            Sink::Flight(c) => c.max_record_len(),
            Sink::Stream(c) => c.max_record_len(),
        }
    }
}

/// Events that never reached a ring, by cause. Touched only when an event is lost or
/// cut, never on the path of an event that is written whole.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Refused by a thread's ring (full in stream mode; a reservation refused in a
    /// flight recorder); also written into the trace as `lost` records.
    pub lost: AtomicU64,
    /// Of `lost`, those whose count no ring holds: not written yet by their thread (it
    /// goes before the thread's next record), or never (the thread exited with its ring
    /// still full, or a stream finished first).
    pub unreported: AtomicU64,
    /// Emitted by a thread that had no ring: every slot of a recorder directory taken.
    pub no_ring: AtomicU64,
    /// Emitted while the thread's state was being torn down (thread exit).
    pub teardown: AtomicU64,
    /// Emitted while this thread's state was in use further up its stack.
    pub busy: AtomicU64,
    /// Stream: records the drain wrote into the trace file.
    pub drained: AtomicU64,
    /// Records with a value cut or dropped at the size bounds (written, and marked).
    pub cut: AtomicU64,
}

impl Counters {
    /// Relaxed: counters, read for reports; no other memory is published through them.
    pub fn bump(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Relaxed, as `bump`.
    pub fn take(c: &AtomicU64, n: u64) {
        c.fetch_sub(n, Ordering::Relaxed);
    }

    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    /// The loss counters by the names a trace file's stats chunk gives them.
    pub fn named(&self) -> [(&'static str, u64); 6] {
        [
            ("lost", Counters::get(&self.lost)),
            ("unreported", Counters::get(&self.unreported)),
            ("no_ring", Counters::get(&self.no_ring)),
            ("teardown", Counters::get(&self.teardown)),
            ("busy", Counters::get(&self.busy)),
            ("cut", Counters::get(&self.cut)),
        ]
    }
}

/// Size bounds of records and text values.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub max_record: usize,
    pub max_value: usize,
}

/// What a callsite is known by: its `tracing` metadata's address, or the key an
/// [`Emitter`](crate::Emitter)'s caller gave it (two kinds, so that they never collide).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Metadata(usize),
    Foreign(usize),
}

/// Whether a thread holds a record back, to write it as one with the record that
/// follows (a span's `new` with its `enter`, its `exit` with its `close`): on a cache
/// line of its own, written by its thread only.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct HeldFlag(AtomicBool);

impl HeldFlag {
    /// Relaxed: a count for reports; the held record itself stays with its thread.
    #[inline]
    pub fn set(&self, held: bool) {
        self.0.store(held, Ordering::Relaxed);
    }
}

pub(crate) struct Shared {
    /// Tells this recorder's thread states apart from other recorders' on a thread.
    pub id: u64,
    pub sink: Sink,
    pub catalog: Catalog,
    pub process: Process,
    pub limits: Limits,
    pub counters: Counters,
    /// Callsite key to its number.
    callsites: RwLock<HashMap<Key, u32>>,
    /// Spans made through an [`Emitter`](crate::Emitter): numbered from 1, with bit 63
    /// set (the `tracing` registry's ids are a slab index plus one, far below it).
    next_span: AtomicU64,
    next_thread: AtomicU64,
    /// A stream's file is being finished: threads write nothing more.
    closed: AtomicBool,
    /// Retired ([`Recorder::retire`](crate::Recorder::retire)): threads drop their
    /// state for it and make no new one.
    retired: AtomicBool,
    /// Every live thread state's [`HeldFlag`].
    holders: Mutex<Vec<Arc<HeldFlag>>>,
}

impl Shared {
    pub fn new(sink: Sink, catalog: Catalog, limits: Limits, process: Process) -> Shared {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Shared {
            // Relaxed: a unique number, nothing else.
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            sink,
            catalog,
            process,
            limits,
            counters: Counters::default(),
            callsites: RwLock::new(HashMap::new()),
            next_span: AtomicU64::new(1),
            next_thread: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            holders: Mutex::new(Vec::new()),
        }
    }

    /// A new thread state's flag, counted by [`held`](Self::held).
    pub fn holder(&self) -> Arc<HeldFlag> {
        let flag = Arc::new(HeldFlag::default());
        let mut all = self.holders.lock().unwrap_or_else(|e| e.into_inner());
        // The flags of states gone (their threads exited) go.
        all.retain(|f| Arc::strong_count(f) > 1);
        all.push(flag.clone());
        flag
    }

    /// Records threads hold back now (see [`HeldFlag`]).
    pub fn held(&self) -> u64 {
        let all = self.holders.lock().unwrap_or_else(|e| e.into_inner());
        // Relaxed: as `HeldFlag::set`.
        all.iter().filter(|f| Arc::strong_count(f) > 1 && f.0.load(Ordering::Relaxed)).count() as u64
    }

    /// The number of `meta`'s callsite; the first call for a callsite adds it to the
    /// catalog. `tracing` registers a callsite again for every new dispatcher: the
    /// number is kept by the metadata's address (static, one per callsite).
    pub fn callsite_id(&self, meta: &'static Metadata<'static>) -> u32 {
        let key = Key::Metadata(meta as *const Metadata<'static> as usize);
        self.intern(key, |id| Callsite::encode(id, meta))
    }

    /// The number of the callsite `key` names; the first call for a key adds the
    /// callsite to the catalog, as `entry(id)` encodes it.
    pub fn intern(&self, key: Key, entry: impl FnOnce(u32) -> Vec<u8>) -> u32 {
        if let Some(&id) = self.callsites.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return id;
        }
        let mut map = self.callsites.write().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = map.get(&key) {
            return id;
        }
        let id = map.len() as u32 + 1;
        // Into the catalog before any record can name it: a thread learns the number
        // from this map, which it reads after this insertion (the write lock).
        self.catalog.add(chunk::CALLSITE, entry(id));
        map.insert(key, id);
        id
    }

    /// A new span id for a span made through an `Emitter`.
    pub fn span_id(&self) -> u64 {
        // Relaxed: a unique number, nothing else.
        self.next_span.fetch_add(1, Ordering::Relaxed) | 1 << 63
    }

    /// Whether the stream is finishing.
    #[inline]
    pub fn is_closed(&self) -> bool {
        // Acquire: pairs with the Release store in `close`. A thread that sees it writes
        // no more records; one that read it just before may still commit one, which the
        // drain's last pass waits for (it drains until every commit is read).
        self.closed.load(Ordering::Acquire)
    }

    /// Stops threads from writing (a stream finishing).
    pub fn close(&self) {
        // Release: pairs with the Acquire load in `is_closed`.
        self.closed.store(true, Ordering::Release);
    }

    /// Retires the recorder: see `Recorder::retire`.
    pub fn retire(&self) {
        // Relaxed: a hint for other threads to drop their state, which publishes no
        // memory; each thread's state stays correct to use until it sees it.
        self.retired.store(true, Ordering::Relaxed);
    }

    /// Whether the recorder was retired.
    #[inline]
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// Threads numbered so far.
    pub fn thread_count(&self) -> u64 {
        self.next_thread.load(Ordering::Relaxed) - 1
    }

    /// A new thread's number, from 1.
    pub fn thread_number(&self) -> u64 {
        // Relaxed: a unique number, nothing else.
        self.next_thread.fetch_add(1, Ordering::Relaxed)
    }
}
