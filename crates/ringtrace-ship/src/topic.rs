//! Asking the cluster whether a topic exists.
//!
//! A topic just created is known to the controller first; the other brokers learn of it
//! from the controller's metadata update a moment later, so a client that asks one of
//! them may hear `UNKNOWN_TOPIC_OR_PARTITION` for a topic that exists (Kafka's
//! `CreateTopics` answers once the controller has it, not once every broker does). An
//! unknown topic is therefore asked about again until a deadline before it is called
//! missing.

use std::time::{Duration, Instant};

use rdkafka::client::Client;
use rdkafka::error::KafkaError;
use rdkafka::metadata::Metadata;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;

/// The longest one metadata request may take.
const ASK: Duration = Duration::from_secs(2);
/// The pause between two requests about a topic not yet known.
const AGAIN: Duration = Duration::from_millis(200);

/// What the cluster said about a topic.
pub(crate) enum Answer {
    /// The topic exists; its metadata (partitions, or an error other than unknown).
    Known(Metadata),
    /// Every broker asked until the deadline said the topic is unknown.
    Missing,
}

/// Asks about `topic` until it is known and every partition has a leader, or `wait`
/// has passed (at least one request is made, of at most 2 s): a partition just created
/// may have no leader elected yet for a moment too. `Err` is a request that failed: no
/// broker answered.
pub(crate) fn ask<C: ClientContext>(client: &Client<C>, topic: &str, wait: Duration) -> Result<Answer, KafkaError> {
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now()).clamp(Duration::from_millis(100), ASK);
        let meta = client.fetch_metadata(Some(topic), left)?;
        let (unknown, settled) = match meta.topics().iter().find(|t| t.name() == topic) {
            None => (true, false),
            Some(t) => (
                t.error().is_some_and(|e| RDKafkaErrorCode::from(e) == RDKafkaErrorCode::UnknownTopicOrPartition),
                t.partitions().iter().all(|p| p.error().is_none() && p.leader() >= 0),
            ),
        };
        let last = Instant::now() + AGAIN >= deadline;
        if !unknown && (settled || last) {
            return Ok(Answer::Known(meta));
        }
        if last {
            return Ok(Answer::Missing);
        }
        std::thread::sleep(AGAIN);
    }
}

/// Runs `request` (about a topic [`ask`] found) again while a broker answers that it
/// does not know the topic's partition or its leader yet, `AGAIN` apart, for up to
/// `wait`: the metadata that names a partition's leader can reach a client before the
/// leader itself serves the partition, so a request to it just after the topic was
/// created may still hear `UNKNOWN_TOPIC_OR_PARTITION`.
pub(crate) fn settled<T>(wait: Duration, mut request: impl FnMut() -> Result<T, KafkaError>) -> Result<T, KafkaError> {
    let deadline = Instant::now() + wait;
    loop {
        match request() {
            Err(e) if not_yet(&e) && Instant::now() + AGAIN < deadline => std::thread::sleep(AGAIN),
            answer => return answer,
        }
    }
}

/// Whether an error is a broker not serving a partition of a new topic yet.
fn not_yet(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::UnknownTopicOrPartition
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::NotLeaderForPartition
        )
    )
}
