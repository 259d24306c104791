//! The agent's Kafka producer: idempotent, `acks=all`, with a count of the
//! acknowledgements its delivery reports bring, so that a round's records go back to
//! their ring only once every message holding them was acknowledged.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;

use super::error::ShipError;

/// What the delivery reports said. Written by the delivery callback, which librdkafka
/// runs inside [`BaseProducer::poll`] on the agent's own thread: Relaxed is enough.
#[derive(Debug, Default)]
struct Reports {
    acked: AtomicU64,
    failed: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// The producer's context: counts delivery reports.
struct Counting(Arc<Reports>);

impl ClientContext for Counting {}

impl ProducerContext for Counting {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.0.acked.fetch_add(1, Relaxed);
            }
            Err((e, _)) => {
                self.0.failed.fetch_add(1, Relaxed);
                if let Ok(mut last) = self.0.last_error.lock() {
                    *last = Some(e.to_string());
                }
            }
        }
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

/// The producer of one agent.
pub(super) struct Sender {
    producer: BaseProducer<Counting>,
    reports: Arc<Reports>,
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
}

impl Sender {
    pub fn new(brokers: &str, topic: &str, compression: Compression, timeout: Duration) -> Result<Sender, ShipError> {
        let reports = Arc::new(Reports::default());
        let producer: BaseProducer<Counting> = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            // Exactly once into the log: retries never duplicate or reorder a message.
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("compression.type", compression.name())
            .set("linger.ms", "5")
            .set("message.timeout.ms", timeout.as_millis().max(1).to_string())
            .create_with_context(Counting(reports.clone()))
            .map_err(|e| ShipError::Kafka(format!("creating the producer for {brokers}: {e}")))?;
        Ok(Sender { producer, reports, topic: topic.to_string(), sent: 0, timeout })
    }

    /// Sends `messages` with `key`, then waits until every message sent so far was
    /// acknowledged or one failed.
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
                        self.producer.poll(Duration::from_millis(5));
                    }
                    Err((e, _)) => return Err(ShipError::Kafka(format!("sending to {}: {e}", self.topic))),
                }
            }
            self.producer.poll(Duration::ZERO);
        }
        Ok(())
    }

    /// Waits for the delivery report of every message sent so far: until all were
    /// acknowledged, or one failed (the others are still waited for, so that the next
    /// round starts with none in flight), or the timeout and a margin passed.
    pub fn settle(&mut self) -> Round {
        let deadline = Instant::now() + self.timeout + Duration::from_secs(5);
        loop {
            let done = self.reports.acked.load(Relaxed) + self.reports.failed.load(Relaxed);
            if done >= self.sent {
                break;
            }
            if Instant::now() >= deadline {
                return Round::Failed(format!(
                    "{} message(s) not acknowledged in {:?}",
                    self.sent - done,
                    self.timeout
                ));
            }
            self.producer.poll(Duration::from_millis(1));
        }
        let failed = self.reports.failed.swap(0, Relaxed);
        self.reports.acked.store(0, Relaxed);
        self.sent = 0;
        if failed == 0 {
            Round::Acked
        } else {
            let last = self.reports.last_error.lock().ok().and_then(|mut l| l.take()).unwrap_or_default();
            Round::Failed(format!("{failed} message(s) failed: {last}"))
        }
    }

    /// Flushes what is queued (at exit).
    pub fn flush(&self) {
        let _ = self.producer.flush(self.timeout);
    }
}
