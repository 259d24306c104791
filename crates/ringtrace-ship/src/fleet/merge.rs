//! The streaming merge: a topic's batches, each partition's in its order, out as one
//! timeline in bounded memory ([`Merge`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;

use foldhash::HashMap;

use super::timeline::{Entry, FleetStats};
use crate::frame::{Content, FrameError};

/// What a held record costs beside its payload (its place in its source's queue).
const RECORD_COST: usize = 48;

/// Ranges of sequence numbers taken, per source, at most: past it the lowest gap is
/// given up (a record of it coming later is taken for a copy), and said.
const MAX_RANGES: usize = 1024;

/// One record out of the merge, with what the timeline would say of it.
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    /// The record.
    pub entry: Entry<'a>,
    /// The source's number in this merge (0, 1, 2... in the order sources first came):
    /// the same for every record of a source.
    pub lane: u32,
    /// Whether the source's batches say their payloads are [`Content::Events`].
    pub events: bool,
    /// Sequence numbers just before this record that its source lacks, and how many of
    /// them are markers of records too large to ship (as
    /// [`Fleet::gap_before`](super::Fleet) says, for a source that came in order).
    pub gap: (u64, u64),
}

/// A record held.
#[derive(Debug)]
struct Held {
    seq: u64,
    time_ns: u64,
    gap: (u64, u64),
    message: Rc<[u8]>,
    at: u32,
    len: u32,
    /// A marker of a record too large to ship: held for its place in the order (the
    /// timeline's), never handed out.
    marker: bool,
}

/// One source: its names, what of it was taken, and its records held.
#[derive(Debug)]
struct Lane {
    host: Rc<str>,
    source: Rc<str>,
    events: bool,
    /// Sequence numbers taken (records and markers): sorted, disjoint, inclusive.
    taken: Vec<(u64, u64)>,
    /// How many numbers `taken` holds.
    distinct: u64,
    /// The last record's number, and the markers since it (the first one's number).
    last_record: Option<u64>,
    markers: u64,
    first_marker: Option<u64>,
    held: VecDeque<Held>,
}

impl Lane {
    /// Takes `seq`: false for a copy (taken already).
    fn take(&mut self, seq: u64) -> bool {
        // In order, the common case: the last range grows.
        match self.taken.last_mut() {
            Some(last) if last.1.checked_add(1) == Some(seq) => {
                last.1 = seq;
                self.distinct += 1;
                return true;
            }
            None => {
                self.taken.push((seq, seq));
                self.distinct = 1;
                return true;
            }
            _ => {}
        }
        // The first range starting after `seq`.
        let i = self.taken.partition_point(|r| r.0 <= seq);
        if i > 0 && self.taken[i - 1].1 >= seq {
            return false;
        }
        self.distinct += 1;
        let joins_prev = i > 0 && self.taken[i - 1].1 + 1 == seq;
        let joins_next = i < self.taken.len() && self.taken[i].0 == seq + 1;
        match (joins_prev, joins_next) {
            (true, true) => {
                self.taken[i - 1].1 = self.taken[i].1;
                self.taken.remove(i);
            }
            (true, false) => self.taken[i - 1].1 = seq,
            (false, true) => self.taken[i].0 = seq,
            (false, false) => self.taken.insert(i, (seq, seq)),
        }
        true
    }

    /// The gap since the last record before a record `seq` (see [`Item::gap`]).
    fn gap_before(&mut self, seq: u64) -> (u64, u64) {
        let start = match self.last_record {
            Some(last) if seq <= last => return (0, 0),
            Some(last) => last + 1,
            None => self.first_marker.unwrap_or(seq),
        };
        let gap = (seq.saturating_sub(start), self.markers);
        self.last_record = Some(seq);
        self.markers = 0;
        self.first_marker = None;
        gap
    }

    /// Numbers between the lowest and highest taken that were not.
    fn missing(&self) -> u64 {
        match (self.taken.first(), self.taken.last()) {
            (Some(lo), Some(hi)) => (hi.1 - lo.0 + 1).saturating_sub(self.distinct),
            _ => 0,
        }
    }
}

/// A held source's place in the merge: the time of its first record held, then its
/// names (ties by host, then source), its number and that record's. A record taken
/// into a gap before the first held makes a new head; the old one is stale (its record
/// no longer first) and skipped.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Head {
    time_ns: u64,
    host: Rc<str>,
    source: Rc<str>,
    lane: u32,
    seq: u64,
}

/// The streaming merge: a topic's batches, each partition's in its order, out as one
/// timeline in bounded memory.
///
///
/// [`Timeline`](super::Timeline) holds every record until the end, then sorts. A
/// topic that does not fit in memory is merged as it is read instead:
///
/// * **Copies** are dropped as they come, per source, by the sequence numbers already
///   taken (a set of ranges: one range while a source comes in order). A number not
///   taken yet is taken, whatever its place: a source's batches split over two
///   partitions (after the topic's partition count changed) lose nothing.
/// * **Order.** Each source's records are held in the order they came (sequence order,
///   as its agent sent them), and the held sources merged by the time of their oldest
///   record, ties by host then source: the order of [`Fleet::timeline`](super::Fleet::timeline).
///   A record goes out once no record still to come can be older by the *reorder
///   bound*: each partition's *frontier* is the newest record time read from it, and
///   records older than the oldest frontier of the partitions still being read, less
///   the bound, go out (one exactly the bound behind a frontier can still come, and
///   ties with it). A partition read to its end no longer holds anything
///   back. So where every partition's records come at most the bound out of time
///   order (an agent's rounds, hosts' clocks, the interleaving of hosts in a
///   partition), the merge is exactly the timeline's; a record that comes later still
///   goes out, after newer ones, counted [`late`](super::FleetStats::late).
/// * **Memory.** At most `max_held` bytes of records are held (payloads, and a fixed
///   cost per record): past it the oldest goes out before its time (and what comes
///   older after it is late). Each message's bytes are copied once and shared by its
///   records; a held record costs its message's share and 48 bytes.
/// * **Gaps** are counted as the timeline counts them: the numbers between a source's
///   lowest and highest that none of its records or markers has
///   ([`missing`](super::FleetStats::missing)), and each record says the gap just
///   before it in its source ([`Item::gap`]) when its source comes in order.
#[derive(Debug)]
pub struct Merge {
    reorder_ns: u64,
    max_held: usize,
    lanes: Vec<Lane>,
    /// Sources by host, then by source name.
    by_name: HashMap<Rc<str>, HashMap<Rc<str>, u32>>,
    heap: BinaryHeap<Reverse<Head>>,
    /// Each partition's newest record time (`None`: none yet), and whether it is still
    /// being read.
    partitions: Vec<(Option<u64>, bool)>,
    bytes: usize,
    last_ns: u64,
    stats: FleetStats,
    /// The payload of markers.
    empty: Rc<[u8]>,
}

impl Merge {
    /// A merge of `partitions` partitions, all being read, with the reorder bound
    /// `reorder_ns` and at most `max_held` bytes held.
    pub fn new(partitions: usize, reorder_ns: u64, max_held: usize) -> Merge {
        Merge {
            reorder_ns,
            max_held,
            lanes: Vec::new(),
            by_name: HashMap::default(),
            heap: BinaryHeap::new(),
            partitions: vec![(None, true); partitions],
            bytes: 0,
            last_ns: 0,
            stats: FleetStats::default(),
            empty: Rc::from(&[][..]),
        }
    }

    /// Takes the message `message` read from partition `partition` (an index below the
    /// count given to [`new`](Self::new)); one that is not a batch is counted damaged
    /// and its error returned. `warn` is told of each record too large to ship (a
    /// marker) and of gaps given up.
    pub fn push(&mut self, partition: usize, message: &[u8], warn: &mut dyn FnMut(String)) -> Result<(), FrameError> {
        let batch = self.stats.batch(message)?;
        let lane_at = self.lane(batch.host, batch.source);
        let lane = &mut self.lanes[lane_at as usize];
        lane.events |= batch.content == Content::Events;
        // The message's bytes, copied once for all its records held.
        let mut shared: Option<Rc<[u8]>> = None;
        let mut newest = None::<u64>;
        for r in batch.records() {
            newest = Some(newest.map_or(r.time_ns, |n| n.max(r.time_ns)));
            if !lane.take(r.seq) {
                self.stats.duplicates += 1;
                continue;
            }
            if lane.taken.len() > MAX_RANGES {
                let (a, b) = (lane.taken[0], lane.taken[1]);
                lane.taken[1].0 = a.0;
                lane.taken.remove(0);
                warn(format!(
                    "{} {}: more than {MAX_RANGES} gaps in its sequence numbers: records {}..{} are taken for copies \
                     if they come",
                    batch.host,
                    batch.source,
                    a.1 + 1,
                    b.0
                ));
            }
            if let Some(len) = r.too_large {
                self.stats.too_large += 1;
                if lane.last_record.is_none() && lane.first_marker.is_none() {
                    lane.first_marker = Some(r.seq);
                }
                lane.markers += 1;
                warn(format!(
                    "{} {}: record {} ({len} bytes) was too large for a Kafka message: its agent shipped a marker in \
                     its place",
                    batch.host, batch.source, r.seq
                ));
            } else {
                self.stats.records += 1;
            }
            let marker = r.too_large.is_some();
            let gap = if marker { (0, 0) } else { lane.gap_before(r.seq) };
            let payload = if marker { &[][..] } else { r.payload };
            // The payload's place in the message it was decoded from (it borrows it).
            let within = payload.as_ptr().addr().checked_sub(message.as_ptr().addr());
            let (held, at) = match within.filter(|&at| at + payload.len() <= message.len()) {
                _ if payload.is_empty() => (Rc::clone(&self.empty), 0),
                Some(at) => (Rc::clone(shared.get_or_insert_with(|| Rc::from(message))), at),
                None => (Rc::from(payload), 0),
            };
            self.bytes += payload.len() + RECORD_COST;
            // In sequence order: at the back but for a record that fills a gap.
            let pos = match lane.held.back() {
                Some(b) if b.seq > r.seq => lane.held.partition_point(|h| h.seq < r.seq),
                _ => lane.held.len(),
            };
            lane.held.insert(
                pos,
                Held {
                    seq: r.seq,
                    time_ns: r.time_ns,
                    gap,
                    message: held,
                    at: at as u32,
                    len: payload.len() as u32,
                    marker,
                },
            );
            if pos == 0 {
                self.heap.push(Reverse(Head {
                    time_ns: r.time_ns,
                    host: Rc::clone(&lane.host),
                    source: Rc::clone(&lane.source),
                    lane: lane_at,
                    seq: r.seq,
                }));
            }
        }
        if let (Some(n), Some(p)) = (newest, self.partitions.get_mut(partition)) {
            p.0 = Some(p.0.map_or(n, |f| f.max(n)));
        }
        Ok(())
    }

    /// The number of the source `(host, source)`, made if new.
    fn lane(&mut self, host: &str, source: &str) -> u32 {
        if let Some(&i) = self.by_name.get(host).and_then(|m| m.get(source)) {
            return i;
        }
        let i = self.lanes.len() as u32;
        let host = match self.by_name.get_key_value(host) {
            Some((h, _)) => Rc::clone(h),
            None => Rc::from(host),
        };
        let source: Rc<str> = Rc::from(source);
        self.by_name.entry(Rc::clone(&host)).or_default().insert(Rc::clone(&source), i);
        self.lanes.push(Lane {
            host,
            source,
            events: false,
            taken: Vec::new(),
            distinct: 0,
            last_record: None,
            markers: 0,
            first_marker: None,
            held: VecDeque::new(),
        });
        i
    }

    /// Partition `partition` was read to its end: it holds nothing back any more.
    pub fn close(&mut self, partition: usize) {
        if let Some(p) = self.partitions.get_mut(partition) {
            p.1 = false;
        }
    }

    /// Bytes held now (see [`Merge`]).
    pub fn held_bytes(&self) -> usize {
        self.bytes
    }

    /// How far (ns) each partition's frontier is ahead of the oldest frontier of the
    /// partitions being read (one without a record yet counts as 0): what the merge
    /// waits for is at 0; `None` for a partition read to its end.
    pub fn ahead(&self) -> impl Iterator<Item = Option<u64>> + '_ {
        let oldest = self.partitions.iter().filter(|p| p.1).map(|p| p.0.unwrap_or(0)).min().unwrap_or(0);
        self.partitions.iter().map(move |p| p.1.then(|| p.0.unwrap_or(0) - oldest))
    }

    /// The counters so far; `missing` counts the gaps of what was taken so far.
    pub fn stats(&self) -> FleetStats {
        let mut s = self.stats;
        s.missing = self.lanes.iter().map(Lane::missing).sum::<u64>();
        s
    }

    /// Hands out, in order, the records that can go (see [`Merge`]): with
    /// `all`, every record held (the read is over); how many.
    pub fn release<E>(&mut self, all: bool, each: &mut dyn FnMut(Item<'_>) -> Result<(), E>) -> Result<u64, E> {
        // Records before `due` go out (all of them where `None`): one exactly the bound
        // older than a partition's newest can still come, and its tie with a held
        // record of the same time is the timeline's to break.
        let due = if all {
            None
        } else {
            match self.partitions.iter().filter(|p| p.1).map(|p| p.0).min() {
                None => None,
                Some(None) => Some(0),
                Some(Some(f)) => Some(f.saturating_sub(self.reorder_ns)),
            }
        };
        let mut n = 0;
        // Bounded: each turn takes a record out of a lane.
        while let Some(Reverse(top)) = self.heap.peek() {
            if due.is_some_and(|d| top.time_ns >= d) && self.bytes <= self.max_held {
                break;
            }
            let Some(Reverse(head)) = self.heap.pop() else { break };
            let lane = &mut self.lanes[head.lane as usize];
            if lane.held.front().map(|h| h.seq) != Some(head.seq) {
                continue; // stale
            }
            let Some(h) = lane.held.pop_front() else { continue };
            if let Some(next) = lane.held.front() {
                self.heap.push(Reverse(Head { time_ns: next.time_ns, seq: next.seq, ..head }));
            }
            self.bytes -= h.len as usize + RECORD_COST;
            if h.marker {
                continue;
            }
            if h.time_ns < self.last_ns {
                self.stats.late += 1;
            }
            self.last_ns = self.last_ns.max(h.time_ns);
            n += 1;
            let payload = &h.message[h.at as usize..][..h.len as usize];
            let entry = Entry { host: &lane.host, source: &lane.source, seq: h.seq, time_ns: h.time_ns, payload };
            each(Item { entry, lane: head.lane, events: lane.events, gap: h.gap })?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
