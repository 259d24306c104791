//! [`RingBuf`], its [`Builder`], and [`Stats`].

#![cfg(not(loom))]

use std::fmt;
use std::marker::PhantomData;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::config::{Discard, Mode, Mpsc, ProducerKind, WakeupPolicy};
use crate::error::Error;
use crate::format::control::{MetaInit, FLAG_FUTEX};
use crate::format::control::{HALF_RING, MAX_CAPACITY, NEVER_WAKE};
use crate::protocol::core::Core;
use crate::region::file::{self, Backing};
use crate::region::mmap::{Mapping, MmapRegion};
use crate::region::Region;
use crate::shared::{Shared, Stats};
use crate::{barrier, Producer};

/// A ring buffer of variable-length records: many producers ([`Mpsc`]) or one
/// ([`Spsc`](crate::config::Spsc)), one consumer, [`Discard`] mode.
///
/// `RingBuf` is a cheap handle (`Clone` shares the same ring); producers and the
/// consumer are attached from it and keep the ring alive.
///
/// # Examples
///
/// ```
/// use ringtrace::{MpscRing, Wakeup};
///
/// let ring = MpscRing::new(64 * 1024)?;          // Mpsc, Discard
/// let mut producer = ring.producer()?;
/// let mut consumer = ring.consumer()?;
///
/// let mut rec = producer.reserve(5)?;           // zero copy: write in place
/// rec.copy_from_slice(b"hello");
/// rec.commit();
/// producer.output(b"world", Wakeup::Default)?;  // reserve + copy + commit
///
/// let mut seen = Vec::new();
/// consumer.consume(|data| {
///     seen.push(data.to_vec());
///     Ok::<(), std::convert::Infallible>(())
/// })?;
/// assert_eq!(seen, [b"hello".to_vec(), b"world".to_vec()]);
/// assert_eq!(ring.stats().committed, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RingBuf<K: ProducerKind = Mpsc, M: Mode = Discard> {
    pub(crate) shared: Arc<Shared>,
    _static: PhantomData<fn() -> (K, M)>,
}

impl<K: ProducerKind, M: Mode> Clone for RingBuf<K, M> {
    fn clone(&self) -> Self {
        RingBuf { shared: self.shared.clone(), _static: PhantomData }
    }
}

impl<K: ProducerKind, M: Mode> fmt::Debug for RingBuf<K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingBuf")
            .field("kind", &K::NAME)
            .field("mode", &M::NAME)
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl<K: ProducerKind, M: Mode> RingBuf<K, M> {
    pub(crate) fn from_shared(shared: Shared) -> Self {
        RingBuf { shared: Arc::new(shared), _static: PhantomData }
    }

    /// A ring of `capacity` bytes with the default wakeup policy
    /// ([`WakeupPolicy::CaughtUp`]) and consumer batch (a quarter of the capacity).
    ///
    /// `capacity` must be a power of two from one page to [`MAX_CAPACITY`]; anything
    /// else is [`Error::InvalidCapacity`].
    ///
    /// ```
    /// let err = ringtrace::RingBuf::<ringtrace::config::Mpsc>::new(1000).unwrap_err();
    /// assert!(err.to_string().contains("power of two"));
    /// ```
    pub fn new(capacity: u64) -> Result<Self, Error> {
        Self::builder(capacity).build()
    }

    /// A [`Builder`] for a ring of `capacity` bytes.
    pub fn builder(capacity: u64) -> Builder<K, M> {
        Builder { capacity, policy: None, batch: None, ahead: None, _static: PhantomData }
    }

    /// Data area size in bytes.
    pub fn capacity(&self) -> u64 {
        self.shared.core.capacity()
    }

    /// The largest payload one record can have: the capacity minus 16 (the 8-byte
    /// header, and the word after the record, the next header, which producers keep
    /// zeroed: [`Mpsc`] producers under a shared zeroed frontier, a single producer and
    /// overwrite mode's as they go). A record of this size fits whenever
    /// the ring is empty; a longer one never does ([`ReserveError::TooLarge`](crate::ReserveError::TooLarge)).
    ///
    /// ```
    /// use ringtrace::{MpscRing, SpscRing, FlightRecorder};
    /// assert_eq!(MpscRing::new(4096)?.max_record_len(), 4096 - 16);
    /// assert_eq!(SpscRing::new(4096)?.max_record_len(), 4096 - 16);
    /// assert_eq!(FlightRecorder::new(4096)?.max_record_len(), 4096 - 16);
    /// # Ok::<(), ringtrace::Error>(())
    /// ```
    pub fn max_record_len(&self) -> usize {
        self.shared.core.max_len() as usize
    }

    /// Attaches a producer. [`Mpsc`] rings take any number (and `Producer` is `Clone`);
    /// a [`Spsc`](crate::config::Spsc) ring takes one at a time, else [`Error::ProducerAttached`].
    ///
    /// A slot's ring of a channel file ([`Channel::slot_ring`](crate::Channel::slot_ring))
    /// has its data pages reserved here first, before the role is taken: a filesystem
    /// without room for them is [`Error::NoSpace`] and the slot stays free.
    pub fn producer(&self) -> Result<Producer<K, M>, Error> {
        if let Some(d) = self.shared.deferred.get() {
            d.reserve(self.shared.region.file())?;
        }
        Producer::attach(self.shared.clone())
    }

    /// Attaches the consumer: one at a time, else [`Error::ConsumerAttached`]. A
    /// [`Consumer`](crate::Consumer) in discard mode; in overwrite mode an
    /// [`OverwriteConsumer`](crate::recorder::OverwriteConsumer), which follows the ring
    /// and copies records out.
    pub fn consumer(&self) -> Result<M::Consumer<K>, Error> {
        M::attach(self.shared.clone())
    }

    /// The process holding a single-producer ring's producer role, if it is alive
    /// (channels' slots).
    pub(crate) fn producer_pid(&self) -> Option<u32> {
        // Acquire: pairs with the Release in `owner::take`/`give_back`.
        let pid = self.shared.core.control().producer.0.attached.load(crate::sync::Ordering::Acquire);
        (pid != 0 && crate::owner::alive(pid)).then_some(pid)
    }

    /// The ring's counters and positions, read without stopping anyone.
    ///
    /// Each counter is exact once the producers and the consumer are idle; while they
    /// run, each is a value it had at some moment during the call.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }
}

/// Builds a [`RingBuf`] with non-default settings.
///
/// ```
/// use ringtrace::RingBuf;
/// use ringtrace::config::{Spsc, WakeupPolicy};
///
/// let ring = RingBuf::<Spsc>::builder(1 << 20)
///     .wakeup_policy(WakeupPolicy::Watermark(64 * 1024))
///     .consumer_batch(16 * 1024)
///     .build()?;
/// assert_eq!(ring.capacity(), 1 << 20);
/// # Ok::<(), ringtrace::Error>(())
/// ```
#[derive(Debug)]
pub struct Builder<K: ProducerKind = Mpsc, M: Mode = Discard> {
    capacity: u64,
    policy: Option<WakeupPolicy>,
    batch: Option<u64>,
    ahead: Option<u64>,
    _static: PhantomData<fn() -> (K, M)>,
}

impl<K: ProducerKind, M: Mode> Builder<K, M> {
    /// When a commit with [`Wakeup::Default`](crate::Wakeup::Default) wakes a sleeping
    /// consumer. Default: [`WakeupPolicy::CaughtUp`] in discard mode,
    /// [`WakeupPolicy::Never`] in overwrite mode.
    pub fn wakeup_policy(mut self, policy: WakeupPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Overwrite mode: how many bytes beyond its own need a producer that overwrites
    /// gives up at once (rounded up to whole records). 0 overwrites exactly the records
    /// each new one covers, as the kernel's BPF overwrite mode does; more lets the other
    /// producers keep writing while one zeroes the space given up, at the price of up to
    /// that many bytes less history. Default: 1 KiB or a sixteenth of the capacity,
    /// whichever is smaller. At most half the capacity. Ignored in discard mode.
    pub fn retire_ahead(mut self, bytes: u64) -> Self {
        self.ahead = Some(bytes);
        self
    }

    /// How many consumed bytes the consumer hands back to producers (zeroed, in a
    /// multi-producer ring) at a time (at the latest when a consume call returns). Default: a quarter of the
    /// capacity. Smaller returns space sooner; larger costs fewer shared-line writes.
    /// In overwrite mode: how many bytes the consumer copies and checks at a time.
    pub fn consumer_batch(mut self, bytes: u64) -> Self {
        self.batch = Some(bytes);
        self
    }

    /// Creates the ring: a sealed memfd mapped twice, and its eventfd, for this process
    /// only. [`create`](Self::create) and [`build_shared`](Self::build_shared) make
    /// rings other processes attach to.
    pub fn build(self) -> Result<RingBuf<K, M>, Error> {
        self.build_in(Backing::Private)
    }

    pub(crate) fn build_in(self, backing: Backing<'_>) -> Result<RingBuf<K, M>, Error> {
        let settings = self.settings()?;
        let shared_ring = !matches!(backing, Backing::Private);
        let new = file::create(settings.capacity, backing)?;
        let ring = Self::init_image(settings, new.fd, 0, shared_ring)?;
        if let Some(path) = &new.link {
            file::link(ring.shared.region.file(), path)?;
        }
        Ok(ring)
    }

    /// The builder's settings, checked.
    pub(crate) fn settings(&self) -> Result<Settings, Error> {
        let page = rustix::param::page_size() as u64;
        let capacity = self.capacity;
        if !capacity.is_power_of_two() || !(page..=MAX_CAPACITY).contains(&capacity) {
            return Err(Error::InvalidCapacity { capacity, min: page, max: MAX_CAPACITY });
        }
        let default = if M::OVERWRITE { WakeupPolicy::Never } else { WakeupPolicy::CaughtUp };
        let watermark = match self.policy.unwrap_or(default) {
            WakeupPolicy::CaughtUp => 0,
            WakeupPolicy::Never => NEVER_WAKE,
            WakeupPolicy::HalfRing => HALF_RING,
            // A ring holds at most `capacity - 8` bytes of records (the word after the
            // newest is kept zeroed): a larger watermark would never be reached.
            WakeupPolicy::Watermark(w) if (1..=capacity - 8).contains(&w) => w,
            WakeupPolicy::Watermark(watermark) => return Err(Error::InvalidWatermark { watermark, capacity }),
        };
        let ahead = self.ahead.unwrap_or((capacity / 16).min(1024));
        if M::OVERWRITE && ahead > capacity / 2 {
            return Err(Error::InvalidRetireAhead { ahead, capacity });
        }
        let ahead = if M::OVERWRITE { ahead.next_multiple_of(8) } else { 0 };
        let batch = self.batch.unwrap_or(capacity / 4);
        if !(8..=capacity).contains(&batch) {
            return Err(Error::InvalidBatch { batch, capacity });
        }
        Ok(Settings { capacity, watermark, ahead, batch: batch & !7 })
    }

    /// Maps the ring image at `file_offset` of `fd` (a file long enough for it, zeroes
    /// there) and initializes a new ring in it with `settings`: the positions, then the
    /// header, whose magic, stored last, says the ring is ready to attach to. `futex`:
    /// the doorbell is the futex word (a ring other processes attach to).
    pub(crate) fn init_image(
        settings: Settings,
        fd: OwnedFd,
        file_offset: u64,
        futex: bool,
    ) -> Result<RingBuf<K, M>, Error> {
        let Settings { capacity, watermark, ahead, batch } = settings;
        // Fix the barrier pair before any producer of this ring exists.
        barrier::init();
        let data_offset = file::data_offset();
        let mapping = Mapping { file_offset, capacity, data_offset, data_writable: true, futex };
        let region = MmapRegion::map(fd, mapping)?;
        let core = if M::OVERWRITE {
            Core::new_overwrite(region.view(), watermark, ahead)
        } else {
            Core::new(region.view(), watermark)
        };
        core.init_zeroed();
        let flags = if futex { FLAG_FUTEX } else { 0 };
        // Last: the header's magic says the ring is ready to attach to.
        let init = MetaInit { kind: K::CODE, mode: M::CODE, capacity, data_offset, watermark, flags, clock: 0, ahead };
        region.view().control().init_meta(&init);
        let shared = Shared {
            core,
            region,
            batch,
            writable: true,
            last_snapshot: std::sync::Mutex::new(0),
            deferred: Default::default(),
        };
        Ok(RingBuf::from_shared(shared))
    }
}

/// A new ring's settings, checked against each other ([`Builder::settings`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    /// Bytes of the data area.
    pub(crate) capacity: u64,
    watermark: u64,
    /// Overwrite mode: the retire look-ahead (0 in discard mode).
    ahead: u64,
    /// Consumer publication batch, a multiple of 8.
    batch: u64,
}
