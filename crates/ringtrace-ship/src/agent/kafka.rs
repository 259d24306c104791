//! The agent's Kafka producer: idempotent, `acks=all`, with a count of the
//! acknowledgements its delivery reports bring, so that a round's records go back to
//! their ring only once every message holding them was acknowledged.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;

use super::error::ShipError;
use crate::topic;

/// What the delivery reports said.
#[derive(Debug, Default)]
struct Counts {
    acked: u64,
    failed: u64,
    /// The last failure's error: set with every failure counted.
    last_error: Option<DeliveryFailure>,
}

/// The delivery reports, written by the callback that librdkafka runs on the
/// producer's polling thread ([`ThreadedProducer`]: it blocks in the event queue, so a
/// waiting agent costs no CPU), and a condition variable the agent waits on.
#[derive(Debug, Default)]
struct Reports {
    counts: Mutex<Counts>,
    changed: Condvar,
}

impl Reports {
    fn lock(&self) -> MutexGuard<'_, Counts> {
        // A panic while holding the lock leaves plain counters: still usable.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The producer's context: counts delivery reports.
struct Counting(Arc<Reports>);

impl ClientContext for Counting {}

impl ProducerContext for Counting {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let mut c = self.0.lock();
        match result {
            // Delivered on an inference of librdkafka's, not on the broker's word: not
            // counted acknowledged ([`DeliveryFailure::NoOffset`]).
            Ok(m) if m.offset() < 0 => {
                c.failed += 1;
                c.last_error = Some(DeliveryFailure::NoOffset { partition: m.partition() });
            }
            Ok(_) => c.acked += 1,
            Err((e, _)) => {
                c.failed += 1;
                c.last_error = Some(DeliveryFailure::from(e.clone()));
            }
        }
        drop(c);
        self.0.changed.notify_all();
    }
}

/// Compression of the batches on the wire (Kafka's record batches, per partition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// None.
    None,
    /// LZ4 (fast; the default).
    #[default]
    Lz4,
    /// Zstandard (smaller, more CPU).
    Zstd,
}

impl Compression {
    fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Room in librdkafka's `message.max.bytes` beyond a batch: the longest key (host,
/// `/`, source: 255 + 1 + 4096 bytes) and the record framing (well under 1 KiB).
const KEY_ROOM: usize = 255 + 1 + 4096 + 1024;

/// The producer of one agent.
pub(super) struct Sender {
    producer: ThreadedProducer<Counting>,
    reports: Arc<Reports>,
    /// The producer's configuration, to make a new one after a fatal error.
    config: ClientConfig,
    topic: String,
    /// Messages sent (handed to librdkafka).
    sent: u64,
    /// How long a message may wait for its acknowledgement (librdkafka's
    /// `message.timeout.ms`, retries included).
    timeout: Duration,
}

/// How a round of messages ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Round {
    /// Every message was acknowledged by the in-sync replicas.
    Acked,
    /// At least one message failed ([`Unacked::Failed`]), or was not acknowledged by
    /// the deadline ([`Unacked::Waiting`]).
    Failed(Unacked),
    /// Some messages were neither acknowledged nor failed within the wait given to
    /// [`Sender::settle`] ([`Unacked::Waiting`]): they are still in flight
    /// ([`Sender::abandon`] gives them up). Or the round was not sent
    /// ([`Unacked::BehindSpool`]).
    Unsettled(Unacked),
}

/// Why a round's messages were not all acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Unacked {
    /// `missing` messages had neither an acknowledgement nor a failure after `waited`.
    #[error("{missing} message(s) not acknowledged in {waited:?}")]
    Waiting {
        /// Messages without a delivery report.
        missing: u64,
        /// How long they were waited for.
        waited: Duration,
    },
    /// `failed` messages' delivery reports were failures; `last` the last one's.
    #[error("{failed} message(s) failed: {last}")]
    Failed {
        /// Messages that failed.
        failed: u64,
        /// The last failure.
        last: DeliveryFailure,
    },
    /// Older rounds wait in the spool: this one joins them unsent, to keep each
    /// source's records in order.
    #[error("older rounds wait in the spool")]
    BehindSpool,
}

/// A delivery report's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum DeliveryFailure {
    /// The topic's limit is below the agent's: every retry fails alike.
    #[error("{0} (the topic's max.message.bytes is below the agent's largest message: lower --max-message)")]
    TooLarge(KafkaError),
    /// Any other.
    #[error("{0}")]
    Other(KafkaError),
    /// Reported delivered without an offset: librdkafka inferred it, from the
    /// acknowledgement of a later batch in flight while this one's request failed
    /// (`rd_kafka_dr_implicit_ack`), or from the broker calling the batch a duplicate
    /// (`DUPLICATE_SEQUENCE_NUMBER`). The first inference assumes the broker refuses a
    /// gap in a producer's sequence numbers, which a partition that holds nothing of the
    /// producer yet does not (Kafka's `ProducerAppendInfo.checkSequence` takes any first
    /// sequence number from a producer it does not know): a new producer's first batch
    /// refused (not enough in-sync replicas, as a restarted cluster's partitions regain
    /// theirs) while its second, in flight, is taken, was never written. Sent again;
    /// readers drop a copy by (host, source, sequence).
    #[error("partition {partition}: reported delivered without an offset (librdkafka's inference, not the broker's acknowledgement)")]
    NoOffset {
        /// The message's partition.
        partition: i32,
    },
}

impl From<KafkaError> for DeliveryFailure {
    fn from(e: KafkaError) -> DeliveryFailure {
        match e.rdkafka_error_code() {
            Some(RDKafkaErrorCode::MessageSizeTooLarge) => DeliveryFailure::TooLarge(e),
            _ => DeliveryFailure::Other(e),
        }
    }
}

impl Sender {
    /// A producer to `topic` whose messages hold at most `max_message` bytes of value.
    pub fn new(
        brokers: &str,
        topic: &str,
        compression: Compression,
        timeout: Duration,
        max_message: usize,
    ) -> Result<Sender, ShipError> {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", brokers)
            // Exactly once into the log: retries never duplicate or reorder a message.
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("compression.type", compression.name())
            // A round's messages wait for one another up to this long, to leave in few
            // large requests: 5 ms cost the agent about 700 ns of CPU a record in the
            // bench, 20 ms about 500 (librdkafka's broker thread polls its sockets in
            // millisecond steps while a batch lingers; fewer, larger requests poll less).
            .set("linger.ms", "20")
            .set("message.timeout.ms", timeout.as_millis().max(1).to_string())
            // The agent keeps each value within `max_message`; librdkafka's limit also
            // counts the key (`host/source`, at most 4,352 bytes) and the message's
            // framing, so it gets that much more room.
            .set("message.max.bytes", (max_message + KEY_ROOM).to_string());
        let reports = Arc::new(Reports::default());
        let producer = Self::producer(&config, &reports)?;
        Ok(Sender { producer, reports, config, topic: topic.to_string(), sent: 0, timeout })
    }

    fn producer(config: &ClientConfig, reports: &Arc<Reports>) -> Result<ThreadedProducer<Counting>, ShipError> {
        let brokers = config.get("bootstrap.servers").unwrap_or_default();
        config
            .create_with_context(Counting(reports.clone()))
            .map_err(|source| ShipError::Producer { brokers: brokers.to_string(), source })
    }

    /// After a failed round: if the producer hit a fatal error (an idempotent
    /// producer that can no longer guarantee order, say after the whole cluster
    /// restarted), a new one replaces it. Returns the error replaced, if any.
    pub fn renew_if_fatal(&mut self) -> Result<Option<String>, ShipError> {
        let Some((code, why)) = self.producer.client().fatal_error() else { return Ok(None) };
        self.abandon()?;
        Ok(Some(format!("{code:?}: {why}")))
    }

    /// Gives up every message in flight: a new producer replaces this one, whose drop
    /// purges its queue and in-flight requests (`rd_kafka_purge`) and joins its
    /// polling thread. A purged message may still have reached the log (its broker
    /// wrote it before the purge): sent again, it is a copy readers drop by (host,
    /// source, sequence). Its records are unread in their rings, or kept in the spool.
    pub fn abandon(&mut self) -> Result<(), ShipError> {
        let reports = Arc::new(Reports::default());
        self.producer = Self::producer(&self.config, &reports)?;
        self.reports = reports;
        self.sent = 0;
        Ok(())
    }

    /// Sends `messages` with `key`. A full local queue is waited out (the delivery
    /// reports free it) until the message timeout.
    pub fn send(&mut self, key: &str, messages: &[Vec<u8>]) -> Result<(), ShipError> {
        for m in messages {
            let deadline = Instant::now() + self.timeout;
            loop {
                match self.producer.send(BaseRecord::to(&self.topic).key(key).payload(m)) {
                    Ok(()) => {
                        self.sent += 1;
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))
                        if Instant::now() < deadline =>
                    {
                        let c = self.reports.lock();
                        // Woken by the next delivery report; 5 ms at most.
                        drop(self.reports.changed.wait_timeout(c, Duration::from_millis(5)));
                    }
                    Err((source, _)) => return Err(ShipError::Send { topic: self.topic.clone(), source }),
                }
            }
        }
        Ok(())
    }

    /// Waits for the delivery report of every message sent so far: until all were
    /// acknowledged, or one failed (the others are still waited for, so that the next
    /// round starts with none in flight), or the timeout and a margin passed (a
    /// failure), or `wait` passed ([`Round::Unsettled`]: then [`Self::abandon`] before
    /// sending more).
    pub fn settle(&mut self, wait: Option<Duration>) -> Round {
        let started = Instant::now();
        let deadline = started + self.timeout + Duration::from_secs(5);
        let unsettled = wait.map(|w| started + w);
        let mut c = self.reports.lock();
        while c.acked + c.failed < self.sent {
            let now = Instant::now();
            let left = deadline.saturating_duration_since(now);
            let missing = self.sent - c.acked - c.failed;
            if left.is_zero() {
                return Round::Failed(Unacked::Waiting { missing, waited: self.timeout });
            }
            if unsettled.is_some_and(|u| now >= u) {
                return Round::Unsettled(Unacked::Waiting { missing, waited: now - started });
            }
            let left = unsettled.map_or(left, |u| left.min(u.saturating_duration_since(now)));
            c = self.reports.changed.wait_timeout(c, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        let failed = c.failed;
        let last = c.last_error.take();
        *c = Counts::default();
        drop(c);
        self.sent = 0;
        // A failure is counted with its error: none, none failed.
        match last {
            None => Round::Acked,
            Some(last) => Round::Failed(Unacked::Failed { failed, last }),
        }
    }

    /// Asks the cluster about the topic: a topic it keeps saying it does not have for
    /// `wait` is an error that names it, since messages to it would wait out the
    /// acknowledgement timeout round after round (clusters that create topics on
    /// first use answer with the new topic). A topic just created may be unknown to
    /// the broker asked for a moment, hence the repeated questions. A cluster that
    /// does not answer is not an error: the agent waits it out as any outage.
    pub fn check_topic(&self, wait: Duration) -> Result<(), ShipError> {
        match topic::ask(self.producer.client(), &self.topic, wait) {
            Ok(topic::Answer::Missing) => {
                let brokers = self.config.get("bootstrap.servers").unwrap_or_default();
                Err(ShipError::NoTopic { topic: self.topic.clone(), brokers: brokers.to_string() })
            }
            // Known, or no answer: an outage the agent waits out.
            Ok(topic::Answer::Known(_)) | Err(_) => Ok(()),
        }
    }

    /// Flushes what is queued (at exit).
    pub fn flush(&self) {
        let _ = self.producer.flush(self.timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The causes read, where the agent logs them, as the text its log lines have
    /// always held.
    #[test]
    fn unacked_rounds_are_said_as_the_log_says_them() {
        let waiting = Unacked::Waiting { missing: 3, waited: Duration::from_secs(5) };
        assert_eq!(waiting.to_string(), "3 message(s) not acknowledged in 5s");
        let too_large = KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge);
        let failed = Unacked::Failed { failed: 2, last: DeliveryFailure::from(too_large.clone()) };
        assert_eq!(
            failed.to_string(),
            format!(
                "2 message(s) failed: {too_large} (the topic's max.message.bytes is below the agent's largest \
                 message: lower --max-message)"
            )
        );
        let other = KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut);
        assert_eq!(DeliveryFailure::from(other.clone()), DeliveryFailure::Other(other.clone()));
        assert_eq!(DeliveryFailure::from(other.clone()).to_string(), other.to_string());
        assert_eq!(Unacked::BehindSpool.to_string(), "older rounds wait in the spool");
    }
}
