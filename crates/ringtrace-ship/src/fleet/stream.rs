//! Reading a topic back in bounded memory: every partition from its start (or
//! `--since`) to the end it had when the read began, through the streaming
//! [`Merge`], each record handed to the caller as it goes out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::follow::FollowError;
use super::kafka::{first_transient, reader_config, starts, FleetError};
use super::merge::{Item, Merge};
use super::timeline::FleetStats;
use super::transient::is_transient;

/// How a topic is read back ([`stream_topic`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Start at the first message that can hold a record of this time (wall-clock ns)
    /// or later, in each partition (see [`read_topic_since`](super::read_topic_since)).
    pub since_ns: Option<u64>,
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

/// One partition being read.
#[derive(Debug)]
struct Part {
    id: i32,
    /// The next offset expected, and the end (the partition's end when the read began).
    next: i64,
    end: i64,
    open: bool,
}

/// A read in progress: its partitions, the merge, and what it counted.
struct Reading<'t> {
    topic: &'t str,
    parts: Vec<Part>,
    merge: Merge,
    open: usize,
    /// When the last message came.
    seen: Instant,
    ridden: u64,
    last: Option<Box<KafkaError>>,
    /// How long the read rides through errors without a message.
    idle: Duration,
}

impl Reading<'_> {
    /// Takes what a poll gave (a message of partition `parts[i]`, its end, or an error).
    fn take<E>(
        &mut self,
        polled: KafkaResult<BorrowedMessage<'_>>,
        warn: &mut dyn FnMut(String),
    ) -> Result<(), FollowError<E>> {
        let topic = self.topic;
        let m = match polled {
            Ok(m) => m,
            Err(KafkaError::PartitionEOF(id)) => {
                // At the end the partition had when it was last fetched: nothing before
                // the read's end is left to come.
                if let Some(i) = self.parts.iter().position(|p| p.id == id && p.open) {
                    self.close(i);
                }
                return Ok(());
            }
            Err(e) if is_transient(&e) => {
                if self.ridden == 0 {
                    warn(first_transient(topic, &e, self.idle));
                }
                self.ridden += 1;
                self.last = Some(Box::new(e));
                return Ok(());
            }
            Err(e) => return Err(FollowError::Kafka(FleetError::Read { topic: topic.into(), source: Box::new(e) })),
        };
        self.seen = Instant::now();
        let Some(i) = self.parts.iter().position(|p| p.id == m.partition()) else { return Ok(()) };
        let p = &mut self.parts[i];
        if !p.open || m.offset() < p.next || m.offset() >= p.end {
            return Ok(()); // read already, or written after the read began
        }
        p.next = m.offset() + 1;
        let done = p.next >= p.end;
        if let Err(e) = self.merge.push(i, m.payload().unwrap_or_default(), warn) {
            warn(format!("{topic} partition {} offset {}: skipped: {e}", m.partition(), m.offset()));
        }
        if done {
            self.close(i);
        }
        Ok(())
    }

    fn close(&mut self, i: usize) {
        self.parts[i].open = false;
        self.open -= 1;
        self.merge.close(i);
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
        starts(&asking, topic, opts.since_ns, opts.idle, &mut ridden, &mut warn).map_err(|source| {
            FollowError::Kafka(FleetError::Offsets { topic: topic.into(), brokers: brokers.into(), source })
        })?
    };
    let parts: Vec<Part> = (starts.into_iter())
        .filter(|&(_, start, high)| high > start)
        .map(|(id, next, end)| Part { id, next, end, open: true })
        .collect();
    let reorder_ns = u64::try_from(opts.reorder.as_nanos()).unwrap_or(u64::MAX);
    let prefetch = (PREFETCH_KIB / parts.len().max(1)).max(1024);
    let consumer = Arc::new(consumer(brokers, prefetch).map_err(|e| fail("creating the consumer", e))?);
    let mut assignment = TopicPartitionList::new();
    for p in &parts {
        assignment.add_partition_offset(topic, p.id, Offset::Offset(p.next)).map_err(|e| fail("assigning", e))?;
    }
    let mut queues = Vec::with_capacity(parts.len());
    if !parts.is_empty() {
        consumer.assign(&assignment).map_err(|e| fail("assigning", e))?;
        for p in &parts {
            let q = consumer.split_partition_queue(topic, p.id);
            queues
                .push(q.ok_or_else(|| fail("splitting a partition's queue", KafkaError::Subscription(topic.into())))?);
        }
    }
    let mut r = Reading {
        topic,
        open: parts.len(),
        merge: Merge::new(parts.len(), reorder_ns, opts.max_held),
        parts,
        seen: Instant::now(),
        ridden,
        last: None,
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
                ridden: r.ridden,
                last: r.last,
            }));
        }
        // The consumer's own queue: errors, and messages fetched before the split.
        if let Some(polled) = consumer.poll(Duration::ZERO) {
            r.take(polled, &mut warn)?;
        }
        // The partition the merge waits for first; while the merge holds less than half
        // its bound, whatever another partition has ready (rather than wait for the
        // one); else wait for the one.
        let Some(i) = r.merge.ahead().position(|a| a == Some(0)) else { continue };
        let mut polled = queues[i].poll(Duration::ZERO);
        if polled.is_none() && r.merge.held_bytes() < opts.max_held / 2 {
            let n = queues.len();
            polled =
                (1..n).map(|k| (i + k) % n).filter(|&j| r.parts[j].open).find_map(|j| queues[j].poll(Duration::ZERO));
        }
        let polled = match polled {
            Some(p) => Some(p),
            None => queues[i].poll(left.min(Duration::from_millis(10))),
        };
        if let Some(polled) = polled {
            r.take(polled, &mut warn)?;
            r.merge.release(false, &mut each).map_err(FollowError::Output)?;
        }
    }
    r.merge.release(true, &mut each).map_err(FollowError::Output)?;
    let mut stats = r.merge.stats();
    stats.transient += r.ridden;
    Ok(stats)
}
