//! Channel files as sources: one sub-source per slot, each drained as a ring file is.
//!
//! A channel file ([`ringtrace::Channel::create`]) holds one single-producer ring per
//! slot, one per writer thread. The agent attaches every slot's consumer
//! ([`Channel::slot_ring`]) when it starts, so no other reader takes a slot while it
//! runs (nor a channel reader the whole channel), and a slot that gets its first writer
//! later is read from its first record: a slot without records costs a look per round.
//! Each slot is a source of its own, named `PATH#SLOT`, with its own sequence numbers
//! and state entry.
//!
//! Stamped channels: a record's stamp, converted to `CLOCK_MONOTONIC` nanoseconds by
//! the library (a TSC stamp with the file's calibration), becomes its wall-clock time
//! by adding the batch's `offset_ns`, `CLOCK_REALTIME − CLOCK_MONOTONIC` measured when
//! the batch is made ([`realtime_offset`]); batches say [`TimeSource::Monotonic`]
//! whatever the clock, as their offset is against `CLOCK_MONOTONIC`. The stamp is not
//! shipped. A slot's times never step back by less than [`JITTER`] (the offset's
//! measurement noise): such a time is held at the slot's previous one. A record
//! shorter than a stamp (not a channel producer's) is shipped whole at the time it is
//! drained. Unstamped channels ([`NoClock`](ringtrace::clock::NoClock)) are shipped as
//! ring files are ([`TimeSource::Drained`]).
//!
//! `--until-disconnected`: a channel is finished when every slot that ever had a
//! producer is disconnected and drained, and at least one ever had one
//! ([`Slots::finished`]).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringtrace::clock::{BestClock, Clock, Monotonic, NoClock, Tsc};
use ringtrace::config::{Discard, Mode, Overwrite, Spsc};
use ringtrace::inspect::channel::ChannelFile;
use ringtrace::inspect::RingMode;
use ringtrace::{Channel, Consumer, RingBuf, SpscRing};
use rustix::time::{clock_gettime, ClockId};

use super::super::error::ShipError;
use super::error::{opening, SourceError, SourceErrorKind};
use crate::frame::TimeSource;

/// A slot's times do not step back by less than this: such a step is the offset's
/// measurement noise (a few tens of ns), not the wall clock set back.
pub(super) const JITTER: u64 = 1_000_000;

/// How long the slots' producer liveness ([`Slots::finished`]) is trusted.
const LIVENESS_TTL: Duration = Duration::from_millis(5);

/// A channel of mode `M` and any clock.
trait AnyChannel<M: Mode>: Send + Sync {
    fn split<'a>(&self, rec: &'a [u8]) -> (Option<u64>, &'a [u8]);
    fn stamped(&self) -> bool;
    fn slots(&self) -> u32;
    fn slot_ring(&self, slot: u32) -> Result<RingBuf<Spsc, M>, ringtrace::Error>;
    /// Of each slot: whether no live process holds its producer role.
    fn exited(&self) -> Vec<bool>;
}

impl<M: Mode, C: Clock> AnyChannel<M> for Channel<M, C> {
    fn split<'a>(&self, rec: &'a [u8]) -> (Option<u64>, &'a [u8]) {
        self.split_stamp(rec)
    }
    fn stamped(&self) -> bool {
        C::STAMPED
    }
    fn slots(&self) -> u32 {
        Channel::slots(self)
    }
    fn slot_ring(&self, slot: u32) -> Result<RingBuf<Spsc, M>, ringtrace::Error> {
        Channel::slot_ring(self, slot)
    }
    fn exited(&self) -> Vec<bool> {
        // A channel file's lanes are its slots, in order.
        self.producer_stats().iter().map(|s| s.exited).collect()
    }
}

/// How a channel's records carry their times: what [`Stamps`] needs of [`Slots`].
pub(super) trait Stamping: Send + Sync {
    /// Whether records carry a stamp.
    fn stamped(&self) -> bool;
    /// A record's stamp in `CLOCK_MONOTONIC` ns (if it has one) and its payload.
    fn split<'a>(&self, rec: &'a [u8]) -> (Option<u64>, &'a [u8]);
}

/// What the sub-sources of one channel file of mode `M` share.
pub(super) struct Slots<M: Mode = Discard> {
    channel: Box<dyn AnyChannel<M>>,
    /// Every slot's ring (handles, for their positions).
    rings: Vec<RingBuf<Spsc, M>>,
    /// Each slot's producer liveness, and when it was read.
    liveness: Mutex<Option<(Instant, Vec<bool>)>>,
}

/// One slot of a channel: its ring and consumer, and the channel's shared part.
pub(super) struct Slot {
    pub slots: Arc<Slots>,
    pub slot: u32,
    pub ring: SpscRing,
    pub consumer: Consumer<Spsc>,
}

/// The mode of the channel file at `path`.
pub(super) fn mode(path: &Path) -> Result<RingMode, ShipError> {
    let open = ChannelFile::open(path).map_err(|e| SourceError::new(path.display(), SourceErrorKind::open(e)))?;
    let header = *open.header();
    Ok(header.mode)
}

/// Opens the channel file at `path`, of mode `M`, and every slot's ring.
fn open_mode<M: Mode>(path: &Path) -> Result<Arc<Slots<M>>, ShipError> {
    let header = *ChannelFile::open(path).map_err(opening(path.display()))?.header();
    let channel: Box<dyn AnyChannel<M>> = match header.clock_name() {
        "none" => Box::new(Channel::<M, NoClock>::open(path).map_err(opening(path.display()))?),
        "mono" => Box::new(Channel::<M, Monotonic>::open(path).map_err(opening(path.display()))?),
        "tsc" => Box::new(Channel::<M, Tsc>::open(path).map_err(opening(path.display()))?),
        _ => Box::new(Channel::<M, BestClock>::open(path).map_err(opening(path.display()))?),
    };
    let rings = (0..channel.slots()).map(|i| channel.slot_ring(i)).collect::<Result<Vec<_>, _>>();
    let rings = rings.map_err(opening(path.display()))?;
    Ok(Arc::new(Slots { channel, rings, liveness: Mutex::new(None) }))
}

/// Attaches to every slot of the discard-mode channel file at `path` as its consumer.
pub(super) fn open(path: &Path) -> Result<Vec<Slot>, ShipError> {
    let slots = open_mode::<Discard>(path)?;
    let mut all = Vec::with_capacity(slots.rings.len());
    for (i, ring) in slots.rings.iter().enumerate() {
        let consumer =
            ring.consumer().map_err(|e| SourceError::new(path.display(), SourceErrorKind::open(e).slot(i as u32)))?;
        all.push(Slot { slots: slots.clone(), slot: i as u32, ring: ring.clone(), consumer });
    }
    Ok(all)
}

/// The slots of the overwrite-mode channel file at `path` (a flight recorder's, such
/// as a recorder directory's): their rings, each followed as a flight recorder is
/// (`flight`), its consumer attached there.
pub(super) fn open_overwrite(path: &Path) -> Result<Arc<Slots<Overwrite>>, ShipError> {
    open_mode::<Overwrite>(path)
}

impl<M: Mode> Stamping for Slots<M> {
    fn stamped(&self) -> bool {
        self.channel.stamped()
    }

    fn split<'a>(&self, rec: &'a [u8]) -> (Option<u64>, &'a [u8]) {
        self.channel.split(rec)
    }
}

impl<M: Mode> Slots<M> {
    /// Every slot's ring.
    pub fn rings(&self) -> &[RingBuf<Spsc, M>] {
        &self.rings
    }

    /// `--until-disconnected` for slot `slot`, whose consumer says `disconnected`
    /// ([`Consumer::is_disconnected`]): true if its producer left, or if it never had
    /// one while another slot did. So the channel's slots are all done (with their
    /// rings drained, which the agent checks) exactly when every slot that ever had a
    /// producer is disconnected, and at least one ever had one.
    ///
    /// A slot whose consumer is not disconnected either has a live producer or never
    /// had one: the slot's producer role tells them apart (read at most every
    /// [`LIVENESS_TTL`] for the whole channel, which is a `kill(pid, 0)` a slot). A
    /// slot "ever had a producer" if a producer holds it or it holds a record ever
    /// reserved; a producer that left having reserved nothing counts only for its own
    /// slot (its consumer says disconnected).
    pub fn finished(&self, slot: u32, disconnected: bool) -> bool {
        if disconnected {
            return true;
        }
        let mut liveness = self.liveness.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = liveness.as_ref().is_some_and(|(at, _)| at.elapsed() < LIVENESS_TTL);
        if !fresh {
            *liveness = Some((Instant::now(), self.channel.exited()));
        }
        let exited = &liveness.as_ref().expect("just read").1;
        if !exited.get(slot as usize).copied().unwrap_or(true) {
            return false; // a live producer
        }
        if self.rings[slot as usize].stats().producer_pos > 0 {
            // It had a producer that is gone, though its consumer did not see it yet.
            return false;
        }
        // Never had a producer: done if another slot had one.
        (self.rings.iter().zip(exited)).any(|(r, &exited)| !exited || r.stats().producer_pos > 0)
    }
}

/// `CLOCK_REALTIME − CLOCK_MONOTONIC` now, in ns: of a few (realtime, monotonic,
/// realtime) reads, the one whose realtime reads were closest, with the realtime at
/// their middle. Both clocks advance together (the wall clock's steps and slewing
/// aside), so this is the offset to add to a monotonic stamp for its wall-clock time.
pub(super) fn realtime_offset() -> i64 {
    let ns = |id| {
        let t = clock_gettime(id);
        i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
    };
    let mut best = (i128::MAX, 0i128);
    for _ in 0..5 {
        let a = ns(ClockId::Realtime);
        let m = ns(ClockId::Monotonic);
        let b = ns(ClockId::Realtime);
        let gap = b - a;
        if gap >= 0 && gap < best.0 {
            best = (gap, a + gap / 2 - m);
        }
    }
    i64::try_from(best.1).unwrap_or(0)
}

/// How the records of a slot get their times.
pub(super) struct Stamps<'a> {
    pub slots: &'a dyn Stamping,
    /// The agent's wall clock at the round: for records without a stamp.
    pub drained_ns: u64,
    /// The slot's latest time shipped (its times do not step back within [`JITTER`]).
    pub last_ns: &'a mut u64,
    /// The open batch's offset.
    pub offset: i64,
}

impl Stamps<'_> {
    /// A new batch's time source and offset (measured now for a stamped channel).
    pub fn batch(&mut self) -> (TimeSource, i64) {
        if !self.slots.stamped() {
            return (TimeSource::Drained, 0);
        }
        self.offset = realtime_offset();
        (TimeSource::Monotonic, self.offset)
    }

    /// The wall-clock time of a record whose stamp is `stamp` (monotonic ns;
    /// [`Slots::split`]) in the open batch: the stamp plus the batch's offset, or the
    /// drain time for a record without a stamp.
    pub fn time(&mut self, stamp: Option<u64>) -> u64 {
        let Some(mono) = stamp else { return self.drained_ns };
        let t = mono.saturating_add_signed(self.offset);
        let t = if t < *self.last_ns && *self.last_ns - t < JITTER { *self.last_ns } else { t };
        *self.last_ns = t;
        t
    }
}

#[cfg(test)]
mod tests;
