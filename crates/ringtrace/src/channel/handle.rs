//! [`Channel`] and its [`Builder`].

use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::bell::ChannelBell;
use super::inner::{
    ring_builder, ChannelStats, Inner, Registry, DEFAULT_MAX_PRODUCERS, DEFAULT_RETAIN_EXITED, DEFAULT_SLACK_NS,
};
use super::lane::{Lane, LaneStats};
use super::local::with_local;
use super::reader::ChannelReader;
use super::snapshot::ChannelSnapshot;
use super::writer::{self, ChannelProducer};
use crate::clock::Clock;
use crate::config::{Discard, Mode, Overwrite, Wakeup};
use crate::error::{ConsumeError, Error};

/// A set of single-producer rings, one per producer, read merged in timestamp order.
/// Cheap to clone (a handle to the same channel). See the [module docs](crate::channel).
pub struct Channel<M: Mode = Discard, C: Clock = crate::clock::Monotonic> {
    pub(super) inner: Arc<Inner<M, C>>,
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
    pub(super) capacity: u64,
    pub(super) slack_ns: u64,
    pub(super) retain_exited: usize,
    /// `None`: the ring's default.
    pub(super) retire_ahead: Option<u64>,
    pub(super) max_producers: u32,
    pub(super) _static: PhantomData<fn() -> (M, C)>,
}

impl<M: Mode, C: Clock> Channel<M, C> {
    /// A builder for a channel whose producers each get a ring of `capacity` bytes (a
    /// power of two, as for a [`crate::RingBuf`]).
    pub fn builder(capacity: u64) -> Builder<M, C> {
        Builder {
            capacity,
            slack_ns: DEFAULT_SLACK_NS,
            retain_exited: DEFAULT_RETAIN_EXITED,
            retire_ahead: None,
            max_producers: DEFAULT_MAX_PRODUCERS,
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
            return Ok(ChannelProducer::new(producer, self.inner.clock, lane, self.inner.bell.clone()));
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
        Ok(ChannelProducer::new(producer, self.inner.clock, lane, self.inner.bell.clone()))
    }

    /// A live reader of the whole channel, merging by timestamp. One at a time:
    /// [`Error::ReaderAttached`] while another exists.
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

    /// Calls `f` with this thread's producer of this channel, made (with its ring) on
    /// the thread's first call. The producer lives until the thread exits, even if the
    /// channel is dropped first (its ring's memory with it).
    ///
    /// Errors: making the ring failed. Calling `with_producer` on the same channel from
    /// inside `f` is refused with [`Error::ProducerAttached`] (the thread's producer is
    /// in use).
    pub fn with_producer<R>(&self, f: impl FnOnce(&mut ChannelProducer<M, C>) -> R) -> Result<R, Error> {
        with_local(self.inner.id, || self.producer(), f)
    }
}

impl<C: Clock> Channel<Discard, C> {
    /// Writes one record through this thread's producer (made on the first write).
    ///
    /// ```
    /// use ringtrace::{Channel, Wakeup};
    /// use ringtrace::clock::Monotonic;
    /// use ringtrace::config::Discard;
    ///
    /// let channel = Channel::<Discard, Monotonic>::builder(4096).build(Monotonic)?;
    /// channel.output(b"from this thread", Wakeup::Default)?;
    /// assert_eq!(channel.stats().written, 1);
    /// # Ok::<(), ringtrace::Error>(())
    /// ```
    #[inline]
    pub fn output(&self, data: &[u8], wakeup: Wakeup) -> Result<(), Error> {
        self.with_producer(|p| p.output(data, wakeup))?.map_err(Error::from)
    }
}

impl<C: Clock> Channel<Overwrite, C> {
    /// Snapshots every producer's ring (exited ones kept for snapshots included) and
    /// merges them by timestamp. A ring that cannot be captured is left out and listed
    /// in [`ChannelSnapshot::failed`]; the call itself does not fail. Producers go on writing meanwhile; each ring's
    /// capture is consistent ([`RingBuf::snapshot`](crate::RingBuf::snapshot)), and the
    /// rings are captured one after the other.
    pub fn snapshot(&self) -> Result<ChannelSnapshot, ConsumeError> {
        Ok(ChannelSnapshot::take(&self.inner))
    }

    /// Writes one record through this thread's producer (made on the first write).
    #[inline]
    pub fn output(&self, data: &[u8], wakeup: Wakeup) -> Result<(), Error> {
        self.with_producer(|p| p.output(data, wakeup))?.map_err(Error::from)
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
        Ok(self.finish(clock, Vec::new(), None))
    }

    /// The channel over `lanes`: a shared channel's slots and its file's bell (`None`:
    /// a version 1 file, without one), or none yet.
    pub(super) fn finish(self, clock: C, lanes: Vec<Arc<Lane<M>>>, file_bell: Option<ChannelBell>) -> Channel<M, C> {
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
            handed_over: Mutex::new(Vec::new()),
            // A channel file's doorbell is its bell line (a version 1 file has none: its
            // reader polls). Without an eventfd (the process is out of descriptors), a
            // private channel's reader polls too.
            bell: if shared { file_bell.map(Arc::new) } else { ChannelBell::new().ok().map(Arc::new) },
        };
        Channel { inner: Arc::new(inner) }
    }
}
