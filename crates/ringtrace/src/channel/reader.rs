//! The live channel reader: drains every producer's ring and delivers records merged
//! by timestamp, up to the horizon no producer can still undercut (module docs of
//! [`crate::channel`]).

use std::collections::HashSet;
use std::convert::Infallible;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::inner::{Inner, Registry};
use super::lane::Lane;
use super::staged::{stage, HandedOver, Queue, Staged, DRAIN_BATCH, STAGE_LIMIT};
use super::tournament::Tournament;
use crate::callback::{BatchBuf, Outcome};
use crate::clock::Clock;
use crate::config::Mode;
use crate::error::{ConsumeError, Error};

mod wait;

/// One record of a channel, as readers deliver it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelRecord<'a> {
    /// The producer's number in its channel ([`ChannelProducer::id`](crate::channel::ChannelProducer::id)).
    pub producer: u32,
    /// Nanoseconds, `CLOCK_MONOTONIC` time base (0 with [`NoClock`](crate::clock::NoClock)).
    pub timestamp: u64,
    /// The payload, without the timestamp.
    pub data: &'a [u8],
}

/// Reads a whole [`Channel`](crate::Channel) live, merged in timestamp order. Made by
/// [`Channel::reader`](crate::Channel::reader); one at a time per channel.
///
/// A pass copies records out of the rings (handing their space back) before it
/// delivers them, and holds those newer than the horizon (the slack) or left after a
/// callback stopped it. A reader dropped while it holds some hands them to the
/// channel: the next reader made from any handle of it in this process delivers them
/// first. (Another process's reader of a channel file cannot get them: they are lost
/// if this process ends first, which a reader that drains before it goes avoids.)
pub struct ChannelReader<M: Mode, C: Clock> {
    inner: Arc<Inner<M, C>>,
    lanes: Vec<Staged<M>>,
    /// Of each lane (same index): its producer's id and the records delivered since its
    /// counter was last updated; apart, 16 bytes a lane, as the merge touches them for
    /// every record. Rebuilt whenever `refresh` changes the lanes (after publishing).
    counts: Vec<(u32, u64)>,
    version: u64,
    /// The newest timestamp delivered: a record older than it is late.
    last: u64,
    /// Records this reader delivered late, ever ([`Self::late`]).
    late: u64,
    /// Of `late`, those not yet added to the channel's counters.
    late_unpublished: u64,
    /// The records of the last [`iter`](Self::iter) call, and their producers and times.
    batch: BatchBuf,
    batch_meta: Vec<(u32, u64)>,
    /// Records the last pass copied out of the rings.
    pulled: usize,
    /// The merge's loser tree, kept between calls for its allocation.
    tree: Tournament,
    /// The doorbell's flag is set: the next pass withdraws it.
    armed: bool,
}

impl<M: Mode, C: Clock> fmt::Debug for ChannelReader<M, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelReader").field("producers", &self.lanes.len()).field("late", &self.late).finish()
    }
}

impl<M: Mode, C: Clock> ChannelReader<M, C> {
    pub(crate) fn new(inner: Arc<Inner<M, C>>) -> Result<Self, Error> {
        // Acquire: pairs with the Release store in `drop`: the last reader's updates of
        // the lanes' counters happen-before ours.
        if inner.reader_attached.swap(true, Ordering::Acquire) {
            return Err(Error::ReaderAttached { pid: crate::owner::my_pid() });
        }
        let mut reader = ChannelReader {
            inner,
            lanes: Vec::new(),
            counts: Vec::new(),
            version: u64::MAX,
            last: 0,
            late: 0,
            late_unpublished: 0,
            batch: BatchBuf::default(),
            batch_meta: Vec::new(),
            pulled: 0,
            tree: Tournament::default(),
            armed: false,
        };
        if let Err(e) = reader.refresh() {
            drop(reader);
            // A slot's consumer role held elsewhere: another reader of the channel file,
            // or a slot's own consumer (`Channel::slot_ring`).
            return Err(match e {
                Error::ConsumerAttached { pid } => Error::ReaderAttached { pid },
                e => e,
            });
        }
        Ok(reader)
    }

    /// Attaches to rings made since the last look; settles rings of exited producers
    /// that are drained and delivered (counts them; frees them in discard mode).
    fn refresh(&mut self) -> Result<(), Error> {
        // Acquire: pairs with the Release bump in `Inner::bump_version`.
        let version = self.inner.version.load(Ordering::Acquire);
        let settle = |l: &Staged<M>| l.done && l.q.recs.is_empty() && !l.settled;
        if version == self.version && !self.lanes.iter().any(settle) {
            return Ok(());
        }
        // Every count is published first: `counts` is rebuilt below.
        self.publish_lanes();
        let mut reg = self.inner.registry();
        // Lanes by address, so that a refresh costs O(N) for N producers, not O(N^2)
        // (a channel of a thousand threads refreshes as each starts and exits).
        let key = |l: &Arc<Lane<M>>| Arc::as_ptr(l) as usize;
        let mut settled = HashSet::new();
        for l in self.lanes.iter_mut().filter(|l| settle(l)) {
            l.lane.finish();
            l.settled = true;
            if !M::OVERWRITE {
                settled.insert(key(&l.lane));
            }
        }
        let mut freed = false;
        if !settled.is_empty() {
            let Registry { lanes, freed: sums, .. } = &mut *reg;
            lanes.retain(|lane| {
                let keep = !settled.contains(&key(lane));
                if !keep {
                    sums.add(&lane.stats());
                    freed = true;
                }
                keep
            });
        }
        // Forget the rings the registry freed: settled ones (by us above, or in overwrite
        // mode by `trim_exited`, which frees only rings a reader has settled).
        let held: HashSet<usize> = reg.lanes.iter().map(key).collect();
        self.lanes.retain(|l| held.contains(&key(&l.lane)));
        // In step with `lanes` from here on, even if attaching to a ring fails below.
        self.counts = self.lanes.iter().map(|l| (l.lane.id, 0)).collect();
        let ours: HashSet<usize> = self.lanes.iter().map(|l| key(&l.lane)).collect();
        let mut handed = self.inner.handed_over();
        for lane in reg.lanes.iter().filter(|lane| !ours.contains(&key(lane))) {
            let reader = lane.ring.consumer()?;
            // What an earlier reader copied out of this ring and did not deliver.
            let (q, last_staged) = match handed.iter().position(|h| Arc::ptr_eq(&h.lane, lane)) {
                Some(i) => {
                    let h = handed.swap_remove(i);
                    (h.q, h.last_staged)
                }
                None => (Queue::default(), 0),
            };
            self.lanes.push(Staged {
                q,
                lane: lane.clone(),
                reader,
                done: false,
                settled: false,
                broken: false,
                more: false,
                last_staged,
            });
            self.counts.push((lane.id, 0));
        }
        drop(handed);
        drop(reg);
        if freed {
            self.inner.bump_version();
        }
        // The version read before the registry: a lane added since bumps it again, and
        // the next pass looks.
        self.version = version;
        Ok(())
    }

    /// Copies up to a batch of each ring's records into its staging, then delivers, in
    /// timestamp order, every staged record no producer can still undercut. Returns how
    /// many records `f` saw; stops at the first error of `f`.
    ///
    /// Overwrite mode: a ring whose producer overwrote the reader's copy 16 times in a
    /// row ([`ConsumeError::Busy`] for a ring's consumer) is read again on the next
    /// pass, from its oldest record; what it lost is counted in
    /// [`LaneStats::overwritten_unread`](crate::channel::LaneStats::overwritten_unread). A ring
    /// that is corrupt (a channel file another process wrote badly) is reported once,
    /// with the error, and not read again.
    ///
    /// The callback returns `()`, or a `Result` to stop early (see [`Outcome`]).
    pub fn consume<F, R>(&mut self, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(ChannelRecord<'_>) -> R,
        R: Outcome,
    {
        self.consume_with(&mut move |rec| f(rec).into_result())
    }

    /// The records available now, merged by timestamp as [`consume`](Self::consume)
    /// delivers them, copied out: consumed when this returns.
    ///
    /// ```
    /// use ringtrace::clock::Monotonic;
    /// use ringtrace::config::Discard;
    /// use ringtrace::{Channel, Wakeup};
    ///
    /// let channel = Channel::<Discard, Monotonic>::builder(4096).build(Monotonic)?;
    /// let mut reader = channel.reader()?;
    /// channel.output(b"one", Wakeup::Default)?;
    /// channel.output(b"two", Wakeup::Default)?;
    /// let start = std::time::Instant::now();
    /// let mut got = Vec::new();
    /// while got.len() < 2 && start.elapsed() < std::time::Duration::from_secs(10) {
    ///     got.extend(reader.iter()?.map(|r| r.data.to_vec()));
    /// }
    /// assert_eq!(got, [b"one".to_vec(), b"two".to_vec()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter(
        &mut self,
    ) -> Result<impl DoubleEndedIterator<Item = ChannelRecord<'_>> + ExactSizeIterator, ConsumeError<Infallible>> {
        let (mut batch, mut meta) = (std::mem::take(&mut self.batch), std::mem::take(&mut self.batch_meta));
        batch.clear();
        meta.clear();
        let result = self.consume(|r| {
            batch.push(r.data);
            meta.push((r.producer, r.timestamp));
        });
        (self.batch, self.batch_meta) = (batch, meta);
        result?;
        let records = self.batch_meta.iter().zip(self.batch.iter());
        Ok(records.map(|(&(producer, timestamp), data)| ChannelRecord { producer, timestamp, data }))
    }

    fn consume_with<F, E>(&mut self, f: &mut F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(ChannelRecord<'_>) -> Result<(), E>,
    {
        self.disarm();
        self.refresh().map_err(|e| ConsumeError::Io(std::io::Error::other(e)))?;
        // The time of the pass, before anything is drained: an idle producer's next
        // record is stamped after it, less the slack (module docs).
        let now = self.inner.clock.now();
        let floor = now.saturating_sub(self.inner.slack_ns);
        self.pulled = 0;
        let mut failed = None;
        for l in &mut self.lanes {
            if l.done || l.broken {
                continue;
            }
            let exited = !l.lane.slot && l.lane.is_exited();
            l.compact();
            if l.pending_bytes() >= STAGE_LIMIT {
                // Delivered first; its producer may find its ring full (counted).
                l.more = true;
                continue;
            }
            let got = match stage(l, &self.inner.clock) {
                Ok(got) => got,
                // Overwrite mode: the producer overwrote every copy before it could be
                // checked. Nothing is lost silently (the next read counts what was
                // overwritten) and the ring is fine: read it again next pass.
                Err(ConsumeError::Busy) => 0,
                Err(e) => {
                    // One corrupt ring does not stop the others: it is reported once
                    // and not read again.
                    l.broken = true;
                    failed.get_or_insert(e);
                    continue;
                }
            };
            self.pulled += got;
            l.more = got >= DRAIN_BATCH;
            if let Some(&(ts, _)) = l.q.recs.back() {
                l.last_staged = l.last_staged.max(ts);
            }
            // After the producer's exit (Acquire), a drain that finds nothing means
            // nothing more is coming (a shared channel's slot can get a new producer at
            // any time: it is never done).
            l.done = exited && got == 0 && !l.lane.slot;
        }
        if let Some(e) = failed {
            return Err(e.widen());
        }
        self.merge(Some(floor), f)
    }

    /// Consumes until a pass delivers nothing and every ring is empty: for a channel
    /// whose producers are done (or paused), everything in time order, the horizon
    /// notwithstanding (records still staged are delivered oldest first).
    pub fn drain<F, E>(&mut self, mut f: F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(ChannelRecord<'_>) -> Result<(), E>,
    {
        let mut total = 0;
        loop {
            let n = self.consume(&mut f)?;
            total += n;
            if n == 0 && self.pulled == 0 {
                // What is left is staged behind the horizon of idle producers (or a ring
                // at its staging limit): deliver it as if they had exited, then look
                // again until the rings are empty.
                let flushed = self.merge(None, &mut f)?;
                if flushed == 0 {
                    break;
                }
                total += flushed;
            }
        }
        // Settle (and in discard mode free) the rings found done on the last pass.
        self.refresh().map_err(|e| ConsumeError::Io(std::io::Error::other(e)))?;
        Ok(total)
    }

    /// Hands lane `i`'s oldest staged record (timestamp `ts`) to `f`, counting it.
    fn deliver<F, E>(&mut self, i: usize, ts: u64, f: &mut F) -> Result<(), ConsumeError<E>>
    where
        F: FnMut(ChannelRecord<'_>) -> Result<(), E>,
    {
        let q = &mut self.lanes[i].q;
        let Some((_, len)) = q.recs.pop_front() else { return Ok(()) };
        let at = q.head;
        q.head += len as usize;
        let (id, delivered) = &mut self.counts[i];
        *delivered += 1;
        if ts < self.last {
            self.late += 1;
            self.late_unpublished += 1;
        }
        self.last = self.last.max(ts);
        // The bytes stay until the next pass's `compact`.
        f(ChannelRecord { producer: *id, timestamp: ts, data: &q.bytes[at..q.head] }).map_err(ConsumeError::Callback)
    }

    /// Delivers staged records, oldest first, while the oldest is at most the horizon:
    /// the smallest bound any lane puts on records still to come (its oldest staged
    /// record; for a lane whose staged records are all delivered but whose ring held
    /// more than the pass took, its newest staged record, as what is left in its ring
    /// is no older; for an idle lane `floor`). `floor` `None`: idle lanes bound nothing
    /// (`drain`'s flush of what is staged).
    ///
    /// Without the bound of a lane the pass left records in, a busy producer's records
    /// past its batch would come after other producers' newer ones: a stream written by
    /// four busy threads had a third of its records out of order, some by 50 ms.
    ///
    /// Cost: a loser tree of the lanes ([`Tournament`]) keyed by `(oldest staged
    /// timestamp, lane index)`, so a record costs O(log N) for N producers (one
    /// replay from the lane's leaf to the root, without a branch), and a call O(N) to
    /// build the tree. The lanes with nothing staged bound the others by one number,
    /// `idle`: the smallest of their bounds, which only falls as lanes run out during
    /// the call. The tree's order is the linear scan's (smallest timestamp, then
    /// lowest index), so the delivery order is the same as comparing every lane for
    /// every record.
    fn merge<F, E>(&mut self, floor: Option<u64>, f: &mut F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(ChannelRecord<'_>) -> Result<(), E>,
    {
        let mut tree = std::mem::take(&mut self.tree);
        let mut idle =
            self.lanes.iter().filter(|l| l.q.recs.is_empty()).map(|l| l.bound(floor)).min().unwrap_or(u64::MAX);
        tree.build(self.lanes.iter().map(|l| l.q.recs.front().map(|r| r.0)));
        let mut n = 0;
        let mut result = Ok(());
        while let Some((ts, i)) = tree.top() {
            if ts > idle {
                break;
            }
            n += 1;
            if let Err(e) = self.deliver(i, ts, f) {
                result = Err(e);
                break;
            }
            let l = &self.lanes[i];
            let next = l.q.recs.front().map(|r| r.0);
            if next.is_none() {
                idle = idle.min(l.bound(floor));
            }
            tree.replace_top(next);
        }
        self.tree = tree;
        result?;
        self.publish_counts();
        Ok(n)
    }

    /// Records this reader delivered out of timestamp order since it was made (see the
    /// module docs): cumulative, like every counter. [`ChannelStats::late`] is the
    /// channel's total over all its readers.
    ///
    /// [`ChannelStats::late`]: crate::channel::ChannelStats::late
    pub fn late(&self) -> u64 {
        self.late
    }

    /// Adds each lane's delivered records to its counter.
    fn publish_lanes(&mut self) {
        for (l, (_, delivered)) in self.lanes.iter().zip(&mut self.counts) {
            l.lane.add_read(std::mem::take(delivered));
        }
    }

    fn publish_counts(&mut self) {
        self.publish_lanes();
        if self.late_unpublished != 0 {
            let mut reg = self.inner.registry();
            reg.freed.late += std::mem::take(&mut self.late_unpublished);
        }
    }
}

impl<M: Mode, C: Clock> Drop for ChannelReader<M, C> {
    fn drop(&mut self) {
        self.disarm();
        self.publish_counts();
        // Records copied out of the rings (their space handed back) and not delivered
        // go to the next reader: dropped here, they would be lost uncounted.
        let mut handed = self.inner.handed_over();
        for l in &mut self.lanes {
            l.compact();
            if !l.q.recs.is_empty() {
                let q = std::mem::take(&mut l.q);
                handed.push(HandedOver { lane: l.lane.clone(), q, last_staged: l.last_staged });
            }
        }
        drop(handed);
        // The rings' consumers go first, so that a reader made once the flag is clear
        // can attach to them.
        self.lanes.clear();
        // Release: pairs with the Acquire swap in `new`.
        self.inner.reader_attached.store(false, Ordering::Release);
    }
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod merge_tests;
