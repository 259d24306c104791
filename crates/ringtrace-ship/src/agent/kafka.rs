//! The agent's Kafka producer: idempotent, `acks=all`, with a count of the
//! acknowledgements its delivery reports bring, so that a round's records go back to
//! their ring only once every message holding them was acknowledged.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
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
    last_error: Option<String>,
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
            Ok(_) => c.acked += 1,
            Err((e, _)) => {
                c.failed += 1;
                c.last_error = Some(match e.rdkafka_error_code() {
                    // The topic's limit is below the agent's: every retry fails alike.
                    Some(RDKafkaErrorCode::MessageSizeTooLarge) => format!(
                        "{e} (the topic's max.message.bytes is below the agent's largest message: lower --max-message)"
                    ),
                    _ => e.to_string(),
                });
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
    /// At least one message failed (the error of the last), or was not acknowledged
    /// by the deadline.
    Failed(String),
    /// Some messages were neither acknowledged nor failed within the wait given to
    /// [`Sender::settle`]: they are still in flight ([`Sender::abandon`] gives them up).
    Unsettled(String),
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
                return Round::Failed(format!("{missing} message(s) not acknowledged in {:?}", self.timeout));
            }
            if unsettled.is_some_and(|u| now >= u) {
                return Round::Unsettled(format!("{missing} message(s) not acknowledged in {:?}", now - started));
            }
            let left = unsettled.map_or(left, |u| left.min(u.saturating_duration_since(now)));
            c = self.reports.changed.wait_timeout(c, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        let failed = c.failed;
        let last = c.last_error.take().unwrap_or_default();
        *c = Counts::default();
        drop(c);
        self.sent = 0;
        if failed == 0 {
            Round::Acked
        } else {
            Round::Failed(format!("{failed} message(s) failed: {last}"))
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
