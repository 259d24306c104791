//! Reading a topic from Kafka into a [`Timeline`]: every partition from its first
//! offset up to the end it had when the read began.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::timeline::{Fleet, Timeline};

/// Why a topic could not be read.
#[derive(Debug)]
pub struct FleetError(String);

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
    mut warn: impl FnMut(String),
) -> Result<Fleet, FleetError> {
    let deadline = Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    let fail = |what: &str, e: &dyn std::fmt::Display| FleetError(format!("{what} ({topic} on {brokers}): {e}"));
    // A group of its own: this reader assigns partitions itself and commits nothing.
    let nonce = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("ringtrace-fleet-{}-{nonce}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .map_err(|e| fail("creating the consumer", &e))?;
    let metadata = consumer.fetch_metadata(Some(topic), left()).map_err(|e| fail("reading the metadata", &e))?;
    let Some(meta) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Err(FleetError(format!("no topic {topic} on {brokers}")));
    };
    if let Some(e) = meta.error() {
        return Err(FleetError(format!("topic {topic} on {brokers}: {e:?}")));
    }
    let mut ends = Vec::new();
    let mut assignment = TopicPartitionList::new();
    for p in meta.partitions() {
        let (low, high) =
            consumer.fetch_watermarks(topic, p.id(), left()).map_err(|e| fail("reading the offsets", &e))?;
        if high > low {
            assignment.add_partition_offset(topic, p.id(), Offset::Offset(low)).map_err(|e| fail("assigning", &e))?;
            ends.push((p.id(), high, low));
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
