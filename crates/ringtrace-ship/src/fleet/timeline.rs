//! The timeline: batches in any order in, each (host, source, sequence) once out,
//! merged by time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use crate::frame::{Batch, Content, FrameError};

/// The reader's counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FleetStats {
    /// Messages read that were ringtrace batches.
    pub batches: u64,
    /// Records delivered (each (host, source, sequence) once).
    pub records: u64,
    /// Copies dropped: records whose (host, source, sequence) was delivered already
    /// (a batch an agent sent again after a crash or a failed round).
    pub duplicates: u64,
    /// Sequence numbers missing between two records of a source.
    pub missing: u64,
    /// Messages skipped: not a ringtrace batch, or damaged (see the warnings).
    pub damaged: u64,
    /// Records their agents could not ship, too large for a message: markers in their
    /// place ([`crate::frame::TOO_LARGE`]), each once; not in [`records`](Self::records)
    /// nor among the entries, listed by [`Fleet::too_large`].
    pub too_large: u64,
    /// A followed topic put in time order ([`Follow::reorder`](super::Follow::reorder)):
    /// records handed out after a newer one, having arrived later than the window.
    pub late: u64,
    /// Transient Kafka errors ridden through (a broker down, a partition's leader
    /// moving: see [`read_topic`](super::read_topic)): requests made again, and the
    /// consumer's errors it recovered from.
    pub transient: u64,
    /// A topic read ([`read_topic`](super::read_topic)) or streamed back
    /// ([`stream_topic`](super::stream_topic)): offsets deleted before they were read
    /// (retention, or `DeleteRecords`, moved a partition's start past the reader),
    /// skipped: the read goes on from the partition's new start.
    pub expired: u64,
    /// A topic streamed back ([`stream_topic`](super::stream_topic)): offsets left
    /// unread in partitions that vanished (the topic deleted) during the read, which
    /// ends with what it read.
    pub vanished: u64,
    /// A topic streamed back with a bound on the send time
    /// ([`ReadOptions::sent_before`](super::ReadOptions::sent_before)): messages left
    /// unread past it, from each partition's first message sent at or after the bound
    /// to the end the partition had when the read began.
    pub unread: u64,
}

impl FleetStats {
    /// `message` decoded as a batch, counted in `batches`, or counted in `damaged`.
    pub(super) fn batch<'m>(&mut self, message: &'m [u8]) -> Result<Batch<'m>, FrameError> {
        let decoded = Batch::decode(message);
        match decoded {
            Ok(_) => self.batches += 1,
            Err(_) => self.damaged += 1,
        }
        decoded
    }
}

/// `Lane::recs` length of a marker: payloads are at most
/// [`MAX_RECORD_LEN`](crate::frame::MAX_RECORD_LEN), below it.
const MARKER: u32 = u32::MAX;

/// One source's records as read, before sorting.
#[derive(Debug, Default)]
struct Lane {
    /// `(sequence, time, offset of the payload in bytes, its length)`; a marker of a
    /// record too large to ship has length [`MARKER`] and the record's length as offset.
    recs: Vec<(u64, u64, usize, u32)>,
    bytes: Vec<u8>,
    /// A batch of it said its payloads are [`Content::Events`].
    events: bool,
}

/// Collects batches; [`finish`](Self::finish) orders them.
#[derive(Debug, Default)]
pub struct Timeline {
    lanes: BTreeMap<(String, String), Lane>,
    stats: FleetStats,
}

/// One record of the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The host whose agent shipped it.
    pub host: &'a str,
    /// Its source on that host (a ring file's path).
    pub source: &'a str,
    /// Its sequence number in the source.
    pub seq: u64,
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub time_ns: u64,
    /// The record's bytes.
    pub payload: &'a [u8],
}

impl Timeline {
    /// An empty timeline.
    pub fn new() -> Timeline {
        Timeline::default()
    }

    /// Adds the records of one message; a message that is not a valid batch is
    /// counted in [`FleetStats::damaged`] and its error returned (nothing of it kept).
    pub fn push(&mut self, message: &[u8]) -> Result<(), FrameError> {
        let batch = self.stats.batch(message)?;
        let lane = self.lanes.entry((batch.host.to_string(), batch.source.to_string())).or_default();
        lane.events |= batch.content == Content::Events;
        lane.recs.reserve(batch.count as usize);
        for r in batch.records() {
            match r.too_large {
                Some(len) => lane.recs.push((r.seq, r.time_ns, usize::try_from(len).unwrap_or(usize::MAX), MARKER)),
                None => {
                    lane.recs.push((r.seq, r.time_ns, lane.bytes.len(), r.payload.len() as u32));
                    lane.bytes.extend_from_slice(r.payload);
                }
            }
        }
        Ok(())
    }

    /// The counters so far (copies and gaps are counted by [`finish`](Self::finish)).
    pub fn stats(&self) -> FleetStats {
        self.stats
    }

    /// Sorts each source by sequence, drops copies, counts gaps.
    pub fn finish(mut self) -> Fleet {
        let mut lanes = Vec::with_capacity(self.lanes.len());
        for ((host, source), mut lane) in std::mem::take(&mut self.lanes) {
            // Stable, and nearly sorted already: copies keep their first arrival.
            lane.recs.sort_by_key(|r| r.0);
            let before = lane.recs.len();
            lane.recs.dedup_by_key(|r| r.0);
            self.stats.duplicates += (before - lane.recs.len()) as u64;
            self.stats.missing += lane.recs.windows(2).map(|w| w[1].0 - w[0].0 - 1).sum::<u64>();
            let markers = lane.recs.iter().filter(|r| r.3 == MARKER).count() as u64;
            self.stats.too_large += markers;
            self.stats.records += lane.recs.len() as u64 - markers;
            lanes.push((host, source, lane));
        }
        Fleet { lanes, stats: self.stats }
    }
}

/// A fleet's records, each source in sequence order.
#[derive(Debug)]
pub struct Fleet {
    lanes: Vec<(String, String, Lane)>,
    stats: FleetStats,
}

impl Fleet {
    /// The counters: batches, records, copies dropped, gaps, damaged messages.
    pub fn stats(&self) -> FleetStats {
        self.stats
    }

    /// Counts `n` transient errors the read rode through.
    pub(super) fn ridden_through(&mut self, n: u64) {
        self.stats.transient += n;
    }

    /// Counts `n` offsets deleted before the read could read them.
    pub(super) fn expired(&mut self, n: u64) {
        self.stats.expired += n;
    }

    /// The `(host, source)` pairs, sorted.
    pub fn sources(&self) -> impl Iterator<Item = (&str, &str)> {
        self.lanes.iter().map(|(h, s, _)| (h.as_str(), s.as_str()))
    }

    /// One source's records in sequence order.
    pub fn source<'a>(&'a self, host: &'a str, source: &'a str) -> impl Iterator<Item = Entry<'a>> + 'a {
        self.lanes.iter().filter(move |(h, s, _)| h == host && s == source).flat_map(|(h, s, lane)| {
            lane.recs.iter().filter(|r| r.3 != MARKER).map(move |&(seq, time_ns, at, len)| Entry {
                host: h,
                source: s,
                seq,
                time_ns,
                payload: &lane.bytes[at..at + len as usize],
            })
        })
    }

    /// The records their agents could not ship, too large for a message: `(host,
    /// source, sequence, length)`, by source and sequence.
    pub fn too_large(&self) -> impl Iterator<Item = (&str, &str, u64, u64)> {
        self.lanes.iter().flat_map(|(h, s, lane)| {
            (lane.recs.iter().filter(|r| r.3 == MARKER)).map(move |r| (h.as_str(), s.as_str(), r.0, r.2 as u64))
        })
    }

    /// Whether a batch of the `lane`th source (in the order of [`sources`](Self::sources))
    /// said its payloads are [`Content::Events`].
    pub(crate) fn lane_events(&self, lane: usize) -> bool {
        self.lanes.get(lane).is_some_and(|(_, _, l)| l.events)
    }

    /// What the `lane`th source lacks just before its record `seq`: the sequence
    /// numbers from its previous record (or from its first marker, where no record
    /// precedes) to `seq` that are not records, and how many of them are too-large
    /// markers. `(0, 0)` where `seq` is not a record of that source.
    pub(crate) fn gap_before(&self, lane: usize, seq: u64) -> (u64, u64) {
        let Some((_, _, lane)) = self.lanes.get(lane) else { return (0, 0) };
        let recs = &lane.recs;
        let Ok(i) = recs.binary_search_by_key(&seq, |r| r.0) else { return (0, 0) };
        if recs[i].3 == MARKER {
            return (0, 0);
        }
        // Each record walks back over the markers just before it only: a marker is
        // walked over by the one record after it.
        let mut j = i;
        while j > 0 && recs[j - 1].3 == MARKER {
            j -= 1;
        }
        let start = match j.checked_sub(1) {
            Some(prev) => recs[prev].0.saturating_add(1),
            None => recs[0].0,
        };
        (seq.saturating_sub(start), (i - j) as u64)
    }

    /// Every record, merged by time (ties by host, source, then sequence); each
    /// source's records keep their sequence order even if its times step back.
    pub fn timeline(&self) -> Merged<'_> {
        let heap = (self.lanes.iter().enumerate())
            .filter_map(|(i, (_, _, lane))| lane.recs.first().map(|r| Reverse((r.1, i, 0usize))))
            .collect();
        Merged { fleet: self, heap }
    }
}

/// The iterator of [`Fleet::timeline`]: a k-way merge of the sources.
#[derive(Debug)]
pub struct Merged<'a> {
    fleet: &'a Fleet,
    /// `(time, lane, index)` of each source's next record.
    heap: BinaryHeap<Reverse<(u64, usize, usize)>>,
}

impl<'a> Iterator for Merged<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        // Markers are stepped over: each step pops one record, so this ends.
        loop {
            let Reverse((_, lane_at, i)) = self.heap.pop()?;
            let (host, source, lane) = &self.fleet.lanes[lane_at];
            let (seq, time_ns, at, len) = lane.recs[i];
            if let Some(next) = lane.recs.get(i + 1) {
                self.heap.push(Reverse((next.1, lane_at, i + 1)));
            }
            if len != MARKER {
                return Some(Entry { host, source, seq, time_ns, payload: &lane.bytes[at..at + len as usize] });
            }
        }
    }
}

#[cfg(test)]
mod tests;
