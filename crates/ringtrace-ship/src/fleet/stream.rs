//! Reading a topic back in bounded memory: every partition from its start (or
//! `--since`) to the end it had when the read began (or its first message sent at or
//! after a bound), through the streaming [`Merge`], each record handed to the caller
//! as it goes out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::base_consumer::PartitionQueue;
use rdkafka::consumer::{BaseConsumer, Consumer, DefaultConsumerContext};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::follow::FollowError;
use super::gone::{offset_gone, Losses, Part, STALL};
use super::kafka::{reader_config, starts, FleetError, Span};
use super::merge::{Item, Merge};
use super::timeline::FleetStats;
use super::transient::{first_transient, is_transient};

mod recover;

/// How a topic is read back ([`stream_topic`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Start at the first message that can hold a record of this time (wall-clock ns)
    /// or later, in each partition (see [`read_topic_since`](super::read_topic_since)).
    pub since_ns: Option<u64>,
    /// Stop each partition before its first message sent at or after this time
    /// (wall-clock ns, the Kafka timestamp of the message: its agent's clock when it
    /// sent it), if given; none: at the end it had when the read began. The messages
    /// left unread past it are counted in [`FleetStats::unread`]. See
    /// [`sent_before`](Self::sent_before).
    pub sent_before_ns: Option<u64>,
    /// The reorder bound (see [`Merge`]): how far out of time order a partition's
    /// records may come and still go out in order.
    pub reorder: Duration,
    /// The most bytes of records held in the merge (see [`Merge`]), past which the
    /// oldest go out early.
    pub max_held: usize,
    /// How long the read may go without a message (transient errors ridden through
    /// meanwhile) before it fails: a bound on a stall, not on the read.
    pub idle: Duration,
}

impl Default for ReadOptions {
    /// From the start, a bound of 1 s, 64 MiB held, 300 s without a message.
    fn default() -> Self {
        ReadOptions {
            since_ns: None,
            sent_before_ns: None,
            reorder: Duration::from_secs(1),
            max_held: 64 << 20,
            idle: Duration::from_secs(300),
        }
    }
}

impl ReadOptions {
    /// From the first message that can hold a record of `since_ns` or later.
    pub fn since(mut self, since_ns: Option<u64>) -> Self {
        self.since_ns = since_ns;
        self
    }

    /// Stopping each partition before its first message sent at or after
    /// `sent_before_ns` (wall-clock ns), if given: that message is not read, nor any
    /// after it in the partition, and the messages so left unread (up to the end the
    /// partition had when the read began) are counted in [`FleetStats::unread`].
    ///
    /// A record is always sent after its time, but an agent that could not reach Kafka
    /// sends the records it held later: a record of a time `t` can be in a message sent
    /// long after `t`. To read the records before `t`, give `t` plus a slack: the
    /// records of `t` or before sent more than the slack after `t` are not read (and
    /// their messages counted unread). Kafka's timestamps are milliseconds: the bound
    /// is rounded up to the next whole millisecond, so a message that may have been
    /// sent before it is read.
    pub fn sent_before(mut self, sent_before_ns: Option<u64>) -> Self {
        self.sent_before_ns = sent_before_ns;
        self
    }

    /// With the reorder bound `reorder`.
    pub fn reorder(mut self, reorder: Duration) -> Self {
        self.reorder = reorder;
        self
    }

    /// With at most `bytes` of records held.
    pub fn max_held(mut self, bytes: usize) -> Self {
        self.max_held = bytes;
        self
    }

    /// Failing after `idle` without a message.
    pub fn idle(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }
}

/// Messages librdkafka prefetches for the reader, at most (KiB, over all partitions;
/// each partition's queue at least 1 MiB): its default, 64 MiB a partition's queue
/// once split, would be most of a read's memory.
const PREFETCH_KIB: usize = 16 << 10;

/// A consumer for a read back: a group of its own, no commits, `prefetch_kib` of
/// prefetch for each partition.
fn consumer(brokers: &str, prefetch_kib: usize) -> Result<BaseConsumer, KafkaError> {
    reader_config(brokers)
        // A partition's end is told (`PartitionEOF`): one whose last offsets are not
        // messages (a transaction's markers) ends there, not at the idle bound.
        .set("enable.partition.eof", "true")
        // An offset gone (retention deleted it while the read waited) is an error the
        // read reports, not a silent jump to the partition's end.
        .set("auto.offset.reset", "error")
        .set("queued.max.messages.kbytes", prefetch_kib.to_string())
        // A fetch's response, in bytes at most (one message larger still comes whole).
        .set("fetch.max.bytes", "4194304")
        .set("max.partition.fetch.bytes", "1048576")
        .create()
}

/// The consumer of a read, and each partition's queue (in the order of
/// [`Reading::parts`]).
struct Fetch {
    consumer: Arc<BaseConsumer>,
    queues: Vec<PartitionQueue<DefaultConsumerContext>>,
}

/// A partition whose next offset is not in it any more: that of `parts[i]`, or (`None`,
/// an error on the consumer's own queue, which names no partition) any.
struct Gone(Option<usize>);

/// A read in progress: its partitions, the merge, and what it counted.
struct Reading<'t> {
    topic: &'t str,
    brokers: &'t str,
    parts: Vec<Part>,
    merge: Merge,
    open: usize,
    /// When the last message came, and when the cluster was last asked about the
    /// partitions (see [`STALL`]).
    seen: Instant,
    checked: Instant,
    /// Transient errors ridden through, offsets deleted before they were read, and
    /// left unread in partitions gone.
    losses: Losses,
    /// How long the read rides through errors without a message.
    idle: Duration,
}

impl Reading<'_> {
    /// Takes what a poll gave (a message, a partition's end, or an error): from the queue
    /// of `parts[i]` (`from`: `Some(i)`), or from the consumer's own. A partition whose
    /// next offset is gone is returned, for [`resume`](Self::resume).
    fn take<E>(
        &mut self,
        polled: KafkaResult<BorrowedMessage<'_>>,
        from: Option<usize>,
        warn: &mut dyn FnMut(String),
    ) -> Result<Option<Gone>, FollowError<E>> {
        let topic = self.topic;
        let m = match polled {
            Ok(m) => m,
            Err(KafkaError::PartitionEOF(id)) => {
                // At the end the partition had when it was last fetched: nothing before
                // the read's end is left to come.
                if let Some(i) = self.parts.iter().position(|p| p.id == id && p.open) {
                    self.close(i);
                }
                return Ok(None);
            }
            // librdkafka stopped fetching the partition (`auto.offset.reset=error`).
            Err(e) if offset_gone(&e) => return Ok(Some(Gone(from))),
            Err(e) if is_transient(&e) => {
                if self.losses.ridden == 0 {
                    warn(first_transient(topic, &e, self.idle));
                }
                self.losses.ridden += 1;
                self.losses.last = Some(Box::new(e));
                return Ok(None);
            }
            Err(e) => return Err(FollowError::Kafka(FleetError::Read { topic: topic.into(), source: Box::new(e) })),
        };
        self.seen = Instant::now();
        let Some(i) = self.parts.iter().position(|p| p.id == m.partition()) else { return Ok(None) };
        let p = &mut self.parts[i];
        p.lost = false; // fetched: where it is is known
        if !p.open || m.offset() < p.next || m.offset() >= p.end {
            return Ok(None); // read already, or written after the read began
        }
        p.next = m.offset() + 1;
        let done = p.next >= p.end;
        if let Err(e) = self.merge.push(i, m.payload().unwrap_or_default(), warn) {
            warn(format!("{topic} partition {} offset {}: skipped: {e}", m.partition(), m.offset()));
        }
        if done {
            self.close(i);
        }
        Ok(None)
    }

    fn close(&mut self, i: usize) {
        if std::mem::replace(&mut self.parts[i].open, false) {
            self.open -= 1;
            self.merge.close(i);
        }
    }
}

/// Reads `topic` on `brokers` back in time order through the streaming merge (see
/// [`Merge`] for the order, the reorder bound and what is held), handing each record
/// to `each` as it goes out; `warn` is told of damaged messages, records too large to
/// ship and the first transient error of a run. Returns the counters.
///
/// Each partition's messages come through a queue of its own (librdkafka's partition
/// queues), and the reader takes first from the partition the merge waits for: the one
/// whose newest record is the oldest. While the merge holds less than half its bound
/// (`opts.max_held`), it takes what any partition has ready rather than wait; past
/// that, a partition read ahead is left in librdkafka's queue, whose prefetch is
/// bounded (16 MiB over all partitions, at least 1 MiB each). So memory stays bounded
/// whatever the topic's length and however the partitions are fetched.
///
/// With [`ReadOptions::sent_before_ns`], each partition ends before its first message
/// sent at or after it (Kafka's `offsets_for_times`): a short window of a long topic
/// reads that window's messages, not the rest. The messages left past it are counted in
/// [`FleetStats::unread`].
///
/// What was to be read can go during the read; `warn` is told of each, and the read
/// goes on with what is left:
///
/// * **Records deleted** before they were read (retention, or `DeleteRecords`, moved a
///   partition's start past the reader's position): the reader asks for the
///   partition's offsets again and reads on from its new start; the offsets skipped
///   are counted in [`FleetStats::expired`], and the gap they leave in each source in
///   [`FleetStats::missing`].
/// * **The topic deleted**: its partitions give errors that a leader moving gives too
///   (ridden through, counted in [`FleetStats::transient`]). Once no message has come
///   for 10 s, the reader asks the cluster whether the topic and its partitions are
///   still there (for up to 5 s), and again every 10 s while none comes; the partitions
///   gone are closed and the offsets they had left before the read's end counted in
///   [`FleetStats::vanished`]. With the whole topic gone the read ends there, about
///   15 s after its last message, returning what it read: what the topic held and
///   could still be read, as with records deleted.
///
/// # Errors
///
/// [`FollowError::Output`] with the first error of `each`; [`FollowError::Kafka`]
/// where the topic cannot be read: its offsets, an error that is not transient, no
/// message for `opts.idle` ([`FleetError::Deadline`], saying how much was left).
pub fn stream_topic<E>(
    brokers: &str,
    topic: &str,
    opts: &ReadOptions,
    mut each: impl FnMut(Item<'_>) -> Result<(), E>,
    mut warn: impl FnMut(String),
) -> Result<FleetStats, FollowError<E>> {
    let fail = |doing, source| {
        FollowError::Kafka(FleetError::Kafka {
            doing,
            topic: topic.into(),
            brokers: brokers.into(),
            source: Box::new(source),
        })
    };
    let mut ridden = 0;
    let starts = {
        let asking = consumer(brokers, 1024).map_err(|e| fail("creating the consumer", e))?;
        starts(&asking, topic, opts.since_ns, opts.sent_before_ns, opts.idle, &mut ridden, &mut warn).map_err(
            |source| FollowError::Kafka(FleetError::Offsets { topic: topic.into(), brokers: brokers.into(), source }),
        )?
    };
    let unread = starts.iter().map(Span::unread).sum();
    let parts: Vec<Part> = (starts.into_iter())
        .filter(|s| s.stop > s.start)
        .map(|s| Part { id: s.id, next: s.start, end: s.stop, open: true, lost: false })
        .collect();
    let reorder_ns = u64::try_from(opts.reorder.as_nanos()).unwrap_or(u64::MAX);
    let prefetch = (PREFETCH_KIB / parts.len().max(1)).max(1024);
    let consumer = Arc::new(consumer(brokers, prefetch).map_err(|e| fail("creating the consumer", e))?);
    let mut assignment = TopicPartitionList::new();
    for p in &parts {
        assignment.add_partition_offset(topic, p.id, Offset::Offset(p.next)).map_err(|e| fail("assigning", e))?;
    }
    let mut fetch = Fetch { consumer, queues: Vec::with_capacity(parts.len()) };
    if !parts.is_empty() {
        fetch.consumer.assign(&assignment).map_err(|e| fail("assigning", e))?;
        for p in &parts {
            let q = fetch.split(topic, p.id).map_err(FollowError::Kafka)?;
            fetch.queues.push(q);
        }
    }
    let mut r = Reading {
        topic,
        brokers,
        open: parts.len(),
        merge: Merge::new(parts.len(), reorder_ns, opts.max_held),
        parts,
        seen: Instant::now(),
        checked: Instant::now(),
        losses: Losses { ridden, ..Losses::default() },
        idle: opts.idle,
    };
    while r.open > 0 {
        let left = opts.idle.saturating_sub(r.seen.elapsed());
        if left.is_zero() {
            let behind = r.parts.iter().filter(|p| p.open).map(|p| (p.end - p.next).max(0)).sum();
            return Err(FollowError::Kafka(FleetError::Deadline {
                topic: topic.into(),
                brokers: brokers.into(),
                behind,
                timeout: opts.idle,
                ridden: r.losses.ridden,
                last: r.losses.last,
            }));
        }
        // No message for a while: whether the partitions are still there.
        if r.seen.elapsed().min(r.checked.elapsed()) >= STALL {
            r.check(&mut fetch, &mut warn).map_err(FollowError::Kafka)?;
            continue;
        }
        // The consumer's own queue: errors, and messages fetched before the split.
        if let Some(polled) = fetch.consumer.poll(Duration::ZERO) {
            if let Some(gone) = r.take(polled, None, &mut warn)? {
                r.resume(&mut fetch, gone, &mut warn).map_err(FollowError::Kafka)?;
            }
        }
        // The partition the merge waits for first; while the merge holds less than half
        // its bound, whatever another partition has ready (rather than wait for the
        // one); else wait for the one.
        let Some(i) = r.merge.ahead().position(|a| a == Some(0)) else { continue };
        let queues = &fetch.queues;
        let mut polled = queues[i].poll(Duration::ZERO).map(|m| (m, i));
        if polled.is_none() && r.merge.held_bytes() < opts.max_held / 2 {
            let n = queues.len();
            polled = (1..n)
                .map(|k| (i + k) % n)
                .filter(|&j| r.parts[j].open)
                .find_map(|j| queues[j].poll(Duration::ZERO).map(|m| (m, j)));
        }
        let polled = match polled {
            Some(p) => Some(p),
            None => queues[i].poll(left.min(Duration::from_millis(10))).map(|m| (m, i)),
        };
        if let Some((polled, j)) = polled {
            let gone = r.take(polled, Some(j), &mut warn)?;
            if let Some(gone) = gone {
                r.resume(&mut fetch, gone, &mut warn).map_err(FollowError::Kafka)?;
            }
            r.merge.release(false, &mut each).map_err(FollowError::Output)?;
        }
    }
    r.merge.release(true, &mut each).map_err(FollowError::Output)?;
    let mut stats = r.merge.stats();
    stats.transient += r.losses.ridden;
    stats.expired = r.losses.expired;
    stats.vanished = r.losses.vanished;
    stats.unread = unread;
    Ok(stats)
}
