//! Following a topic live: each batch's records as it arrives, copies dropped, or in
//! time order after a window ([`reorder`]).

mod reorder;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::kafka::{consumer, starts, FleetError};
use super::timeline::{Entry, FleetStats};
use super::transient::is_transient;
use crate::frame::Batch;
use reorder::Reorder;

/// A topic followed from its end (or from a time): [`Follow::poll`] hands out each
/// record once, in the order its batches arrive, or in time order after a window
/// ([`Follow::reorder`]).
///
/// A source's records come in sequence order (its batches share a partition); records
/// of different sources come as their batches arrive, which is time order only
/// roughly (each agent sends a round at a time): [`Follow::reorder`] holds each record
/// a while to hand them out in time order. A copy (a sequence number at or
/// below one handed out, which an agent restarted after a crash sends again) is
/// dropped and counted; a jump counts the numbers skipped as missing. Partitions added
/// to the topic after the start are not read.
///
/// Transient errors (a broker down, a partition's leader moving: the module
/// `fleet::transient` lists them) are ridden through and counted in
/// [`FleetStats::transient`]: the consumer recovers by itself. Only errors that go on,
/// without a batch between them, for longer than the `timeout` given to
/// [`start`](Self::start) end the follow.
pub struct Follow {
    consumer: BaseConsumer,
    topic: String,
    /// Each source's next sequence number.
    next: HashMap<(String, String), u64>,
    stats: FleetStats,
    /// Records held to go out in time order.
    held: Option<Reorder>,
    /// How long transient errors may go on before the follow fails.
    patience: Duration,
    /// The errors going on: when the first and the last came.
    trouble: Option<(Instant, Instant)>,
}

/// A pause this long without an error ends a run of transient errors (librdkafka
/// tries a broker's connection again at least every `reconnect.backoff.max.ms`, 10 s
/// by default).
const QUIET: Duration = Duration::from_secs(30);

impl std::fmt::Debug for Follow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follow").field("topic", &self.topic).field("stats", &self.stats).finish_non_exhaustive()
    }
}

impl Follow {
    /// Starts following `topic` on `brokers` at its end, or at the first message that
    /// can hold a record of `since_ns` or later (see
    /// [`read_topic_since`](super::read_topic_since)), within `timeout`; transient
    /// errors are ridden through for up to `timeout` at the start, and for up to
    /// `timeout` without a batch while following.
    pub fn start(brokers: &str, topic: &str, since_ns: Option<u64>, timeout: Duration) -> Result<Follow, FleetError> {
        let fail = |doing, source| FleetError::Kafka {
            doing,
            topic: topic.into(),
            brokers: brokers.into(),
            source: Box::new(source),
        };
        let consumer = consumer(brokers).map_err(|e| fail("creating the consumer", e))?;
        let mut ridden = 0;
        // Counted; the follow's own errors are told as they come (`poll`'s `warn`).
        let starts = starts(&consumer, topic, since_ns, None, timeout, &mut ridden, &mut |_| {})
            .map_err(|source| FleetError::Offsets { topic: topic.into(), brokers: brokers.into(), source })?;
        let mut assignment = TopicPartitionList::new();
        for s in starts {
            let at = if since_ns.is_some() { s.start } else { s.end };
            assignment.add_partition_offset(topic, s.id, Offset::Offset(at)).map_err(|e| fail("assigning", e))?;
        }
        consumer.assign(&assignment).map_err(|e| fail("assigning", e))?;
        Ok(Follow {
            consumer,
            topic: topic.to_string(),
            next: HashMap::new(),
            stats: FleetStats { transient: ridden, ..FleetStats::default() },
            held: None,
            patience: timeout,
            trouble: None,
        })
    }

    /// Hands records out in time order: each is held `window` after it arrived (zero:
    /// none is, they go out as their batches arrive), then goes out if no record held
    /// is older; one that arrives older than a record already handed out (more than
    /// `window` late) goes out when its window passes, counted in
    /// [`FleetStats::late`]. A window longer than the agents' rounds (about 40 ms; a
    /// second is safe) puts the records of every host in order, at that much latency.
    /// At most 256 MiB of records are held: past it the oldest goes out early. Call
    /// [`drain`](Self::drain) at the end for the records still held.
    pub fn reorder(&mut self, window: Duration) {
        self.held = (!window.is_zero()).then(|| Reorder::new(window));
    }

    /// Hands out the records still held ([`reorder`](Self::reorder)), oldest first;
    /// how many.
    pub fn drain<E>(&mut self, mut each: impl FnMut(Entry<'_>) -> Result<(), E>) -> Result<u64, E> {
        match &mut self.held {
            Some(held) => held.release(Instant::now(), true, &mut each),
            None => Ok(0),
        }
    }

    /// Hands each new record to `each` for up to `wait` (returning sooner once a batch
    /// arrived, or held records are due: see [`reorder`](Self::reorder)), and returns
    /// how many it handed out. Damaged messages and records too
    /// large to ship are counted and told to `warn`, and so is the first transient error
    /// of a run of them. Stops at the first error of `each`, and at an error that is
    /// not transient or that went on too long (see [`Follow`]).
    pub fn poll<E>(
        &mut self,
        wait: Duration,
        mut each: impl FnMut(Entry<'_>) -> Result<(), E>,
        mut warn: impl FnMut(String),
    ) -> Result<u64, FollowError<E>> {
        let deadline = Instant::now() + wait;
        let mut handed = 0;
        loop {
            if let Some(held) = &mut self.held {
                let n = held.release(Instant::now(), false, &mut each).map_err(FollowError::Output)?;
                self.stats.late = held.late;
                handed += n;
                if handed > 0 {
                    return Ok(handed);
                }
            }
            let due = self.held.as_ref().and_then(Reorder::next_due).map_or(deadline, |d| d.min(deadline));
            let left = due.saturating_duration_since(Instant::now());
            let Some(m) = self.consumer.poll(left) else {
                if Instant::now() >= deadline {
                    return Ok(handed);
                }
                continue;
            };
            let m = match m {
                Ok(m) => m,
                Err(e) if is_transient(&e) => {
                    self.ride_through(&e, &mut warn).map_err(FollowError::Kafka)?;
                    if Instant::now() >= deadline {
                        return Ok(handed);
                    }
                    continue;
                }
                Err(source) => {
                    return Err(FollowError::Kafka(FleetError::Read {
                        topic: self.topic.clone(),
                        source: Box::new(source),
                    }))
                }
            };
            self.trouble = None;
            let batch = match Batch::decode(m.payload().unwrap_or_default()) {
                Ok(b) => b,
                Err(e) => {
                    self.stats.damaged += 1;
                    warn(format!("{} partition {} offset {}: skipped: {e}", self.topic, m.partition(), m.offset()));
                    continue;
                }
            };
            self.stats.batches += 1;
            let next = self.next.entry((batch.host.to_string(), batch.source.to_string())).or_insert(batch.first_seq);
            for r in batch.records() {
                if r.seq < *next {
                    self.stats.duplicates += 1;
                    continue;
                }
                self.stats.missing += r.seq - *next;
                *next = r.seq + 1;
                if let Some(len) = r.too_large {
                    self.stats.too_large += 1;
                    warn(format!(
                        "{} {}: record {} ({len} bytes) was too large for a Kafka message: its agent shipped a \
                         marker in its place",
                        batch.host, batch.source, r.seq
                    ));
                    continue;
                }
                self.stats.records += 1;
                let entry = Entry {
                    host: batch.host,
                    source: batch.source,
                    seq: r.seq,
                    time_ns: r.time_ns,
                    payload: r.payload,
                };
                match &mut self.held {
                    Some(held) => held.push(&entry, Instant::now()),
                    None => {
                        handed += 1;
                        each(entry).map_err(FollowError::Output)?;
                    }
                }
            }
            if handed > 0 || Instant::now() >= deadline {
                return Ok(handed);
            }
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> FleetStats {
        self.stats
    }

    /// Counts transient error `e`, says it if it starts a run of errors, and fails if
    /// the run has gone on longer than the follow's patience.
    fn ride_through(
        &mut self,
        e: &rdkafka::error::KafkaError,
        warn: &mut impl FnMut(String),
    ) -> Result<(), FleetError> {
        let now = Instant::now();
        self.stats.transient += 1;
        let first = match self.trouble {
            Some((first, last)) if now.duration_since(last) < QUIET => first,
            _ => {
                warn(format!(
                    "{}: {e}: a transient Kafka error, ridden through (the client recovers by itself)",
                    self.topic
                ));
                now
            }
        };
        self.trouble = Some((first, now));
        if now.duration_since(first) > self.patience {
            return Err(FleetError::Stalled {
                topic: self.topic.clone(),
                source: Box::new(e.clone()),
                patience: self.patience,
                ridden: self.stats.transient,
            });
        }
        Ok(())
    }
}

/// Why [`Follow::poll`] stopped.
#[derive(Debug)]
pub enum FollowError<E> {
    /// Reading the topic failed.
    Kafka(FleetError),
    /// The caller's `each` failed.
    Output(E),
}
