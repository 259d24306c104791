//! Reading a topic from Kafka into a [`Timeline`]: every partition from its first
//! offset up to the end it had when the read began.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::timeline::{Fleet, Timeline};
use crate::topic;

/// Why a topic could not be read.
#[derive(Debug)]
pub struct FleetError(pub(super) String);

impl std::fmt::Display for FleetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FleetError {}

/// Reads `topic` on `brokers` from the start of every partition to the end each had
/// when the read began, within `timeout`; calls `warn` with a message for each
/// message that is not a valid ringtrace batch (skipped and counted) and for each
/// record its agent could not ship (too large for a message).
pub fn read_topic(
    brokers: &str,
    topic: &str,
    timeout: Duration,
    warn: impl FnMut(String),
) -> Result<Fleet, FleetError> {
    read_topic_since(brokers, topic, None, timeout, warn)
}

/// [`read_topic`] from the first message that can hold a record of `since_ns` (wall
/// clock ns) or later, if given: the first whose Kafka timestamp is at or after it.
/// Exact, since an agent sends a record after the time it gives it (the record's
/// stamp, or the moment it drained it), and the message's timestamp is taken when it
/// is sent, on the same host's clock. The records before `since_ns` that such messages
/// hold are kept (the caller filters by time).
pub fn read_topic_since(
    brokers: &str,
    topic: &str,
    since_ns: Option<u64>,
    timeout: Duration,
    mut warn: impl FnMut(String),
) -> Result<Fleet, FleetError> {
    let deadline = Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    let fail = |what: &str, e: &dyn std::fmt::Display| FleetError(format!("{what} ({topic} on {brokers}): {e}"));
    let consumer = consumer(brokers).map_err(|e| fail("creating the consumer", &e))?;
    let starts = starts(&consumer, topic, since_ns, left()).map_err(|e| fail("reading the offsets", &e))?;
    let mut ends = Vec::new();
    let mut assignment = TopicPartitionList::new();
    for (p, start, high) in starts {
        if high > start {
            assignment.add_partition_offset(topic, p, Offset::Offset(start)).map_err(|e| fail("assigning", &e))?;
            ends.push((p, high, start));
        }
    }
    let mut timeline = Timeline::new();
    if ends.is_empty() {
        return Ok(finish(timeline, &mut warn));
    }
    consumer.assign(&assignment).map_err(|e| fail("assigning", &e))?;
    // `ends[i].2`: the next offset expected of partition `ends[i].0`.
    let mut open = ends.len();
    while open > 0 {
        if left().is_zero() {
            let behind: i64 = ends.iter().map(|&(_, high, next)| (high - next).max(0)).sum();
            return Err(FleetError(format!("{topic} on {brokers}: {behind} message(s) not read in {timeout:?}")));
        }
        let Some(m) = consumer.poll(left().min(Duration::from_millis(100))) else { continue };
        let m = m.map_err(|e| fail("reading", &e))?;
        let Some(end) = ends.iter_mut().find(|e| e.0 == m.partition()) else { continue };
        if m.offset() >= end.1 {
            continue; // written after the read began
        }
        if let Err(e) = timeline.push(m.payload().unwrap_or_default()) {
            warn(format!("{topic} partition {} offset {}: skipped: {e}", m.partition(), m.offset()));
        }
        let was_open = end.2 < end.1;
        end.2 = m.offset() + 1;
        if was_open && end.2 >= end.1 {
            open -= 1;
        }
    }
    Ok(finish(timeline, &mut warn))
}

/// A consumer of a group of its own: it assigns partitions itself and commits nothing.
pub(super) fn consumer(brokers: &str) -> Result<BaseConsumer, KafkaError> {
    let nonce = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("ringtrace-fleet-{}-{nonce}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        // A reader that merges a whole topic lets librdkafka's local queue fill past its
        // 64 MiB limit; librdkafka then pauses fetching for `fetch.queue.backoff.ms`
        // (1,000 ms by default): half the bench's reads of 2 M records stalled for a
        // second. 10 ms keeps it fetching as soon as the reader has taken some.
        .set("fetch.queue.backoff.ms", "10")
        .create()
}

/// Each partition of `topic`: `(id, first offset to read, end offset now)`. The first
/// offset is the partition's first, or with `since_ns` that of its first message
/// timestamped at or after it (the end if none is).
pub(super) fn starts(
    consumer: &BaseConsumer,
    topic: &str,
    since_ns: Option<u64>,
    timeout: Duration,
) -> Result<Vec<(i32, i64, i64)>, String> {
    let deadline = Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    // A topic created a moment ago may be unknown to the broker asked: ask again for
    // up to 5 s before calling it missing.
    let metadata = match topic::ask(consumer.client(), topic, left().min(Duration::from_secs(5))) {
        Ok(topic::Answer::Known(m)) => m,
        Ok(topic::Answer::Missing) => return Err(format!("no topic {topic}")),
        Err(e) => return Err(e.to_string()),
    };
    let Some(meta) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Err(format!("no topic {topic}"));
    };
    if let Some(e) = meta.error() {
        return Err(format!("topic {topic}: {}", RDKafkaErrorCode::from(e)));
    }
    // The partitions' leaders may not serve a topic just created yet either.
    let settle = || left().min(Duration::from_secs(5));
    let mut out = Vec::new();
    for p in meta.partitions() {
        let (low, high) =
            topic::settled(settle(), || consumer.fetch_watermarks(topic, p.id(), left())).map_err(|e| e.to_string())?;
        out.push((p.id(), low, high));
    }
    if let Some(since) = since_ns {
        // Kafka's timestamps are milliseconds: the millisecond that holds `since`.
        let ms = i64::try_from(since / 1_000_000).unwrap_or(i64::MAX);
        let mut query = TopicPartitionList::new();
        for &(p, _, _) in &out {
            query.add_partition_offset(topic, p, Offset::Offset(ms)).map_err(|e| e.to_string())?;
        }
        let found = topic::settled(settle(), || consumer.offsets_for_times(query.clone(), left()))
            .map_err(|e| e.to_string())?;
        for (p, low, high) in out.iter_mut() {
            *low = match found.find_partition(topic, *p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => o.clamp(*low, *high),
                // No message at or after that time.
                _ => *high,
            };
        }
    }
    Ok(out)
}

/// Orders the timeline, and warns of the records that were too large to ship.
fn finish(timeline: Timeline, warn: &mut impl FnMut(String)) -> Fleet {
    let fleet = timeline.finish();
    for (host, source, seq, len) in fleet.too_large() {
        warn(format!(
            "{host} {source}: record {seq} ({len} bytes) was too large for a Kafka message: its agent shipped a marker in its place"
        ));
    }
    fleet
}
