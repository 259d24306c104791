//! What every handle of one channel shares: its settings and its producers' rings
//! ([`Inner`], [`Registry`]), and the channel's counters ([`ChannelStats`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::bell::ChannelBell;
use super::lane::{Lane, LaneStats};
use super::staged::HandedOver;
use crate::clock::Clock;
use crate::config::{Mode, Spsc};
use crate::ring::{Builder, RingBuf};

/// The slack of a live reader by default: 20 ms.
pub const DEFAULT_SLACK_NS: u64 = 20_000_000;
/// Exited producers' rings an overwrite channel keeps for snapshots by default.
pub const DEFAULT_RETAIN_EXITED: usize = 64;

/// Producer slots of a channel file by default.
pub const DEFAULT_MAX_PRODUCERS: u32 = 16;

pub(crate) struct Inner<M: Mode, C: Clock> {
    /// Tells channels apart in the thread-local producer table.
    pub(crate) id: u64,
    pub(crate) clock: C,
    pub(crate) capacity: u64,
    pub(super) retire_ahead: Option<u64>,
    pub(crate) slack_ns: u64,
    pub(super) retain_exited: usize,
    /// A channel file's: its rings are fixed slots, shared with other processes.
    pub(crate) shared: bool,
    pub(crate) max_producers: u32,
    pub(super) lanes: Mutex<Registry<M>>,
    /// Bumped (Release) whenever `lanes` changes, so readers refresh their list only
    /// then (Acquire load in `ChannelReader`).
    pub(crate) version: AtomicU64,
    /// One live reader at a time (each ring has one consumer).
    pub(crate) reader_attached: AtomicBool,
    /// Records a dropped reader had copied out of rings and not delivered (held back by
    /// the slack, or left when a callback stopped a pass): the next reader in this
    /// process starts with them. Locked after `lanes` where both are held.
    pub(super) handed_over: Mutex<Vec<HandedOver<M>>>,
    /// A private channel's doorbell (see [`super::bell`]); `None` for a channel file.
    pub(crate) bell: Option<Arc<ChannelBell>>,
}

pub(crate) struct Registry<M: Mode> {
    pub(crate) lanes: Vec<Arc<Lane<M>>>,
    pub(super) next_id: u32,
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
    /// [`crate::channel::Builder::retain_exited`] of them; never read.
    pub freed_unread: u64,
}

/// The builder of one producer's ring.
pub(crate) fn ring_builder<M: Mode>(capacity: u64, ahead: Option<u64>) -> Builder<Spsc, M> {
    let b = RingBuf::<Spsc, M>::builder(capacity);
    match ahead {
        Some(a) => b.retire_ahead(a),
        None => b,
    }
}

impl<M: Mode, C: Clock> Inner<M, C> {
    /// The registry, even if a thread panicked holding it (it holds only counters and
    /// handles, consistent after every statement).
    /// The records dropped readers handed over (see the field).
    pub(super) fn handed_over(&self) -> MutexGuard<'_, Vec<HandedOver<M>>> {
        // Plain data: usable after a panic elsewhere.
        self.handed_over.lock().unwrap_or_else(|e| e.into_inner())
    }

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
    pub(super) fn trim_exited(&self, reg: &mut Registry<M>) {
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

pub(super) fn realtime_ns() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(now.as_nanos()).unwrap_or(u64::MAX)
}

pub(super) fn short() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::WriteZero, "short write")
}
