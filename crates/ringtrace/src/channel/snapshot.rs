//! A snapshot of a whole overwrite channel: every producer's ring captured and merged
//! into one sequence, exactly ordered by timestamp.

use std::fmt;

use super::inner::Inner;
use super::reader::ChannelRecord;
use super::writer::split_stamp;
use crate::clock::Clock;
use crate::config::Overwrite;
use crate::error::ConsumeError;

/// Every producer's records at the time of the snapshot, merged by timestamp (ties in
/// producer order), readable oldest to newest or newest to oldest, as often as wanted.
///
/// ```
/// use ringtrace::{Channel, Wakeup};
/// use ringtrace::clock::Monotonic;
/// use ringtrace::config::Overwrite;
///
/// let channel = Channel::<Overwrite, Monotonic>::builder(4096).build(Monotonic)?;
/// let mut a = channel.producer()?;
/// let mut b = channel.producer()?;
/// for i in 0..1000u32 {
///     a.output(&i.to_le_bytes(), Wakeup::Default)?;
///     b.output(&i.to_le_bytes(), Wakeup::Default)?;
/// }
/// let snap = channel.snapshot()?;
/// let newest = snap.iter().next_back().unwrap();
/// assert_eq!(newest.producer, b.id());
/// assert_eq!(newest.data, 999u32.to_le_bytes());
/// assert!(snap.iter().zip(snap.iter().skip(1)).all(|(x, y)| x.timestamp <= y.timestamp));
/// assert_eq!(snap.len() as u64 + snap.overwritten(), 2000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct ChannelSnapshot {
    /// `(timestamp, producer, start, length)` in merged order.
    index: Vec<(u64, u32, usize, usize)>,
    bytes: Vec<u8>,
    overwritten: u64,
    producers: usize,
    /// Rings that could not be captured, and why.
    failed: Vec<(u32, ConsumeError)>,
}

impl fmt::Debug for ChannelSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelSnapshot")
            .field("records", &self.index.len())
            .field("producers", &self.producers)
            .finish()
    }
}

impl ChannelSnapshot {
    /// The snapshot of a channel ([`Channel::snapshot`](super::Channel::snapshot)).
    pub(super) fn take<C: Clock>(inner: &Inner<Overwrite, C>) -> ChannelSnapshot {
        let lanes: Vec<_> = inner.registry().lanes.clone();
        let mut snap = ChannelSnapshot { producers: lanes.len(), ..Default::default() };
        for lane in &lanes {
            let s = match lane.ring.snapshot() {
                Ok(s) => s,
                // One ring that cannot be captured (a writer stuck mid-update, or a
                // corrupt ring in a shared channel) does not hide the others.
                Err(e) => {
                    snap.failed.push((lane.id, e));
                    continue;
                }
            };
            snap.overwritten += s.overwritten_before();
            for rec in s.iter() {
                let (ts, body) = split_stamp(&inner.clock, rec);
                snap.index.push((ts, lane.id, snap.bytes.len(), body.len()));
                snap.bytes.extend_from_slice(body);
            }
        }
        // Each producer's records are in timestamp order (it stamps at reserve, in
        // order): the stable sort merges these runs (it finds them in linear time),
        // ties staying in producer order.
        snap.index.sort_by_key(|&(ts, ..)| ts);
        snap
    }
}

impl ChannelSnapshot {
    /// Records held.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Committed records the producers' rings no longer held when captured (given up
    /// to make room), summed over the producers.
    pub fn overwritten(&self) -> u64 {
        self.overwritten
    }

    /// Producers' rings looked at (captured or failed).
    pub fn producers(&self) -> usize {
        self.producers
    }

    /// The producers whose rings could not be captured, and why (their records are not
    /// in the snapshot).
    pub fn failed(&self) -> &[(u32, ConsumeError)] {
        &self.failed
    }

    /// The records, oldest first (`.rev()` for newest first).
    pub fn iter(&self) -> ChannelSnapshotIter<'_> {
        ChannelSnapshotIter { snap: self, front: 0, back: self.index.len() }
    }
}

/// Iterator over a [`ChannelSnapshot`], both ways.
#[derive(Debug)]
pub struct ChannelSnapshotIter<'a> {
    snap: &'a ChannelSnapshot,
    front: usize,
    back: usize,
}

impl<'a> ChannelSnapshotIter<'a> {
    fn get(&self, i: usize) -> ChannelRecord<'a> {
        let (timestamp, producer, at, len) = self.snap.index[i];
        ChannelRecord { producer, timestamp, data: &self.snap.bytes[at..at + len] }
    }
}

impl<'a> Iterator for ChannelSnapshotIter<'a> {
    type Item = ChannelRecord<'a>;
    fn next(&mut self) -> Option<Self::Item> {
        (self.front < self.back).then(|| {
            self.front += 1;
            self.get(self.front - 1)
        })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.back - self.front, Some(self.back - self.front))
    }
}

impl DoubleEndedIterator for ChannelSnapshotIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            self.get(self.back)
        })
    }
}

impl ExactSizeIterator for ChannelSnapshotIter<'_> {}
