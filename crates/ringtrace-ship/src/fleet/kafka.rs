//! Reading a topic from Kafka into a [`Timeline`]: every partition from its first
//! offset up to the end it had when the read began, riding through the errors of a
//! broker down or a leader moving ([`super::transient`]) until the read's deadline,
//! and reading on past records deleted under it ([`super::gone`]).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::gone::{assign_at, locate, offset_gone, present, Located, Losses, Part, Present, STALL};
use super::timeline::{Fleet, Timeline};
use super::transient::{first_transient, is_transient, retried, REQUEST};
use crate::topic;

/// Why a topic could not be read (or followed): each names the topic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// A call of the Kafka client failed.
    #[error("{doing} ({topic} on {brokers}): {source}")]
    Kafka {
        /// What was being done.
        doing: &'static str,
        /// The topic.
        topic: String,
        /// The bootstrap servers.
        brokers: String,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// The topic's partitions and offsets could not be had.
    #[error("reading the offsets ({topic} on {brokers}): {source}")]
    Offsets {
        /// The topic.
        topic: String,
        /// The bootstrap servers.
        brokers: String,
        /// Why.
        #[source]
        source: OffsetsError,
    },
    /// The read's deadline passed before every partition's end.
    #[error("{topic} on {brokers}: {behind} message(s) not read in {timeout:?}{}", ridden_through(*ridden, last.as_deref()))]
    Deadline {
        /// The topic.
        topic: String,
        /// The bootstrap servers.
        brokers: String,
        /// The messages left.
        behind: i64,
        /// The read's timeout.
        timeout: Duration,
        /// Transient errors ridden through.
        ridden: u64,
        /// The last of them.
        last: Option<Box<KafkaError>>,
    },
    /// Partitions of the topic went during the read (the topic deleted, or deleted and
    /// made again): what was left in them cannot be read.
    #[error("{topic} on {brokers}: {what}: {left} message(s) left unread")]
    Vanished {
        /// The topic.
        topic: String,
        /// The bootstrap servers.
        brokers: String,
        /// What went.
        what: String,
        /// The offsets left unread in the partitions gone.
        left: u64,
    },
    /// A follower's read failed.
    #[error("reading {topic}: {source}")]
    Read {
        /// The topic.
        topic: String,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// A follower had transient errors and no message for longer than its patience.
    #[error(
        "reading {topic}: {source}: Kafka errors for {patience:?} without a message ({ridden} transient errors ridden through)"
    )]
    Stalled {
        /// The topic.
        topic: String,
        /// The last error.
        #[source]
        source: Box<KafkaError>,
        /// How long errors were ridden through.
        patience: Duration,
        /// Transient errors ridden through.
        ridden: u64,
    },
}

/// ` (N transient errors ridden through, the last: E)`, or nothing.
fn ridden_through(ridden: u64, last: Option<&KafkaError>) -> String {
    last.map(|e| format!(" ({ridden} transient errors ridden through, the last: {e})")).unwrap_or_default()
}

/// Why a topic's partitions and their offsets could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OffsetsError {
    /// The cluster does not have it.
    #[error("no topic {0}")]
    NoTopic(String),
    /// The cluster says the topic is in error.
    #[error("topic {topic}: {code}")]
    Topic {
        /// The topic.
        topic: String,
        /// The error.
        code: RDKafkaErrorCode,
    },
    /// A request failed.
    #[error(transparent)]
    Kafka(Box<KafkaError>),
}

impl From<KafkaError> for OffsetsError {
    fn from(e: KafkaError) -> Self {
        OffsetsError::Kafka(Box::new(e))
    }
}

/// Reads `topic` on `brokers` from the start of every partition to the end each had
/// when the read began, within `timeout`; calls `warn` with a message for each
/// message that is not a valid ringtrace batch (skipped and counted) and for each
/// record its agent could not ship (too large for a message). Transient errors (a
/// broker down, a partition's leader moving: the module `fleet::transient` lists them) are ridden through
/// until `timeout` and counted in [`FleetStats::transient`](super::FleetStats::transient).
///
/// Records deleted before the read reached them (retention, or `DeleteRecords`, moved
/// a partition's start past the reader's position) are skipped: the read goes on from
/// the partition's new start, counts the offsets skipped in
/// [`FleetStats::expired`](super::FleetStats::expired) and tells `warn`. A topic
/// deleted during the read is found once no message has come for 10 s (the cluster is
/// asked for up to 5 s, and again every 10 s while none comes).
///
/// # Errors
///
/// [`FleetError::Offsets`] where the topic's offsets cannot be had,
/// [`FleetError::Kafka`] on an error that is not transient, [`FleetError::Vanished`]
/// where partitions went during the read (the topic deleted, or deleted and made
/// again), and [`FleetError::Deadline`] where `timeout` passed first.
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
    let fail = |doing, source| FleetError::Kafka {
        doing,
        topic: topic.into(),
        brokers: brokers.into(),
        source: Box::new(source),
    };
    // An offset gone (records deleted while the read waited) is an error the read
    // hears (`gone`), not a silent jump to the partition's end.
    let consumer: BaseConsumer = (reader_config(brokers).set("enable.partition.eof", "false"))
        .set("auto.offset.reset", "error")
        .create()
        .map_err(|e| fail("creating the consumer", e))?;
    let mut ridden = 0;
    let starts = starts(&consumer, topic, since_ns, None, left(), &mut ridden, &mut warn)
        .map_err(|source| FleetError::Offsets { topic: topic.into(), brokers: brokers.into(), source })?;
    let mut assignment = TopicPartitionList::new();
    let mut parts = Vec::new();
    for Span { id, start, stop, .. } in starts {
        if stop > start {
            assignment.add_partition_offset(topic, id, Offset::Offset(start)).map_err(|e| fail("assigning", e))?;
            parts.push(Part { id, next: start, end: stop, open: true, lost: false });
        }
    }
    let mut timeline = Timeline::new();
    let mut losses = Losses { ridden, ..Losses::default() };
    if parts.is_empty() {
        return Ok(finish(timeline, &losses, &mut warn));
    }
    consumer.assign(&assignment).map_err(|e| fail("assigning", e))?;
    // When the last message came, and when the cluster was last asked whether the
    // partitions are still there.
    let (mut seen, mut checked) = (Instant::now(), Instant::now());
    while parts.iter().any(|p| p.open) {
        if left().is_zero() {
            let behind = parts.iter().filter(|p| p.open).map(|p| (p.end - p.next).max(0)).sum();
            let Losses { ridden, last, .. } = losses;
            return Err(FleetError::Deadline {
                topic: topic.into(),
                brokers: brokers.into(),
                behind,
                timeout,
                ridden,
                last,
            });
        }
        if seen.elapsed().min(checked.elapsed()) >= STALL {
            check(&consumer, topic, brokers, &mut parts, &mut losses, &mut warn)?;
            checked = Instant::now();
            continue;
        }
        let m = match consumer.poll(left().min(Duration::from_millis(100))) {
            None => continue,
            Some(Ok(m)) => m,
            // The error names no partition: each open one is asked about.
            Some(Err(e)) if offset_gone(&e) => {
                let until = Instant::now() + REQUEST;
                for p in parts.iter_mut().filter(|p| p.open) {
                    resume(&consumer, topic, brokers, p, false, until, &mut losses, &mut warn)?;
                }
                continue;
            }
            // librdkafka's consumer recovers by itself: poll on.
            Some(Err(e)) if is_transient(&e) => {
                if losses.ridden == 0 {
                    warn(first_transient(topic, &e, left()));
                }
                losses.ridden += 1;
                losses.last = Some(Box::new(e));
                continue;
            }
            Some(Err(e)) => return Err(fail("reading", e)),
        };
        seen = Instant::now();
        let Some(p) = parts.iter_mut().find(|p| p.id == m.partition()) else { continue };
        p.lost = false; // fetched: where it is is known
        if !p.open || m.offset() < p.next || m.offset() >= p.end {
            continue; // read already, or written after the read began
        }
        if let Err(e) = timeline.push(m.payload().unwrap_or_default()) {
            warn(format!("{topic} partition {} offset {}: skipped: {e}", m.partition(), m.offset()));
        }
        p.next = m.offset() + 1;
        p.open = p.next < p.end;
    }
    Ok(finish(timeline, &losses, &mut warn))
}

/// Where `part` goes on, its next offset gone (see [`locate`]; `sure`: the error
/// was its own): assigned again where its records start now, closed where none is
/// left, or marked lost for the next [`check`]. A partition that ends now before the
/// read's position (the topic deleted and made again) fails the read.
#[allow(clippy::too_many_arguments)]
fn resume(
    consumer: &BaseConsumer,
    topic: &str,
    brokers: &str,
    part: &mut Part,
    sure: bool,
    until: Instant,
    losses: &mut Losses,
    warn: &mut dyn FnMut(String),
) -> Result<(), FleetError> {
    let fail = |doing, source| FleetError::Kafka {
        doing,
        topic: topic.into(),
        brokers: brokers.into(),
        source: Box::new(source),
    };
    match locate(consumer, topic, part, sure, until, losses, warn)
        .map_err(|e| fail("reading a partition's offsets", e))?
    {
        Located::Lost => Ok(()),
        Located::Done => {
            part.open = false;
            Ok(())
        }
        Located::Resume => assign_at(consumer, topic, part.id, part.next).map_err(|e| fail("assigning", e)),
        Located::Vanished { high, left } => Err(FleetError::Vanished {
            topic: topic.into(),
            brokers: brokers.into(),
            what: format!(
                "partition {} ends at offset {high} now, before the read's position {} (the topic deleted and made \
                 again?)",
                part.id, part.next
            ),
            left,
        }),
    }
}

/// No message has come for [`STALL`]: asks the cluster whether the topic and the
/// partitions still being read are there (see [`present`]). One gone fails the
/// read; those lost are resumed. A question that fails is ridden through (the read's
/// deadline still holds).
fn check(
    consumer: &BaseConsumer,
    topic: &str,
    brokers: &str,
    parts: &mut [Part],
    losses: &mut Losses,
    warn: &mut dyn FnMut(String),
) -> Result<(), FleetError> {
    let answer = present(consumer, topic, losses);
    let (gone, what) = answer.gone(parts);
    if !gone.is_empty() {
        let left = Present::left(parts, &gone);
        return Err(FleetError::Vanished { topic: topic.into(), brokers: brokers.into(), what: what.into(), left });
    }
    let until = Instant::now() + REQUEST;
    for p in parts.iter_mut().filter(|p| p.open && p.lost) {
        resume(consumer, topic, brokers, p, true, until, losses, warn)?;
    }
    Ok(())
}

/// The configuration of a reader's consumer: a group of its own (it assigns partitions
/// itself and commits nothing).
pub(super) fn reader_config(brokers: &str) -> ClientConfig {
    let nonce = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", brokers)
        .set("group.id", format!("ringtrace-fleet-{}-{nonce}", std::process::id()))
        .set("enable.auto.commit", "false")
        // A reader that merges a whole topic lets librdkafka's local queue fill past its
        // 64 MiB limit; librdkafka then pauses fetching for `fetch.queue.backoff.ms`
        // (1,000 ms by default): half the bench's reads of 2 M records stalled for a
        // second. 10 ms keeps it fetching as soon as the reader has taken some.
        .set("fetch.queue.backoff.ms", "10");
    c
}

/// A consumer of a group of its own ([`reader_config`]), told no partition's end.
pub(super) fn consumer(brokers: &str) -> Result<BaseConsumer, KafkaError> {
    reader_config(brokers).set("enable.partition.eof", "false").create()
}

/// How long a reader rides through transient errors before any broker has answered
/// its first metadata request: no broker of the list reachable (a mistyped host or
/// port, or the whole cluster down when the read starts) fails after this.
pub(super) const FIRST_ANSWER: Duration = Duration::from_secs(30);

/// A partition of a topic to read: its offsets from `start` to `stop` (not included),
/// and `end`, its end when asked (the offset after its last message then). `stop` is
/// `end` unless a bound on the send time cut it short ([`starts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub id: i32,
    pub start: i64,
    pub stop: i64,
    pub end: i64,
}

impl Span {
    /// The messages from `stop` to `end`: left unread by the bound on the send time.
    pub fn unread(&self) -> u64 {
        u64::try_from(self.end - self.stop).unwrap_or(0)
    }
}

/// Each partition of `topic` ([`Span`]). Its first offset is the partition's first,
/// or with `since_ns` that of its first message timestamped at or after it (the end if
/// none is). Its stop is its end, or with `sent_before_ns` the offset of its first
/// message timestamped at or after that (wall-clock ns; the end if none is): that
/// message is not to be read, nor any after it. Transient errors are ridden through
/// until `timeout`, counted in `ridden`; the first is told to `warn`.
pub(super) fn starts(
    consumer: &BaseConsumer,
    topic: &str,
    since_ns: Option<u64>,
    sent_before_ns: Option<u64>,
    timeout: Duration,
    ridden: &mut u64,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<Span>, OffsetsError> {
    let deadline = Instant::now() + timeout;
    let mut said = false;
    let mut note = |e: &KafkaError| {
        if !std::mem::replace(&mut said, true) {
            warn(first_transient(topic, e, deadline.saturating_duration_since(Instant::now())));
        }
    };
    // A topic created a moment ago may be unknown to the broker asked: ask again for
    // up to 5 s before calling it missing. A topic-wide error that a leader moving
    // explains is asked about again too. Until a broker has answered once, the errors
    // are ridden through for [`FIRST_ANSWER`] at most: a mistyped broker list fails
    // then, not at the read's deadline.
    let first = deadline.min(Instant::now() + FIRST_ANSWER);
    let answer = retried(first, ridden, &mut note, |wait| {
        match topic::ask(consumer.client(), topic, wait.min(Duration::from_secs(5)))? {
            topic::Answer::Known(m) => match m.topics().iter().find(|t| t.name() == topic).and_then(|t| t.error()) {
                Some(e) if is_transient(&KafkaError::MetadataFetch(e.into())) => {
                    Err(KafkaError::MetadataFetch(e.into()))
                }
                _ => Ok(Some(m)),
            },
            topic::Answer::Missing => Ok(None),
        }
    });
    let metadata = match answer {
        Ok(Some(m)) => m,
        Ok(None) => return Err(OffsetsError::NoTopic(topic.into())),
        Err(e) => return Err(e.into()),
    };
    let Some(meta) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Err(OffsetsError::NoTopic(topic.into()));
    };
    if let Some(e) = meta.error() {
        return Err(OffsetsError::Topic { topic: topic.into(), code: RDKafkaErrorCode::from(e) });
    }
    // The partitions' leaders may not serve a topic just created yet either.
    let settle = |wait: Duration| wait.min(Duration::from_secs(5));
    let mut out = Vec::new();
    for p in meta.partitions() {
        let (low, high) = retried(deadline, ridden, &mut note, |wait| {
            topic::settled(settle(wait), || consumer.fetch_watermarks(topic, p.id(), wait.min(REQUEST)))
        })?;
        out.push(Span { id: p.id(), start: low, stop: high, end: high });
    }
    // Kafka's timestamps are milliseconds. The first message at or after a time: from
    // the millisecond that holds `since` (a message of it may have been sent after it),
    // and stopping at the first millisecond wholly at or after `sent_before` (a message
    // of the millisecond that holds it may have been sent before it).
    let floor_ms = |ns: u64| i64::try_from(ns / 1_000_000).unwrap_or(i64::MAX);
    let ceil_ms = |ns: u64| i64::try_from(ns.div_ceil(1_000_000)).unwrap_or(i64::MAX);
    if let Some(since) = since_ns {
        let found = offsets_at(consumer, topic, &out, floor_ms(since), deadline, ridden, &mut note)?;
        for s in out.iter_mut() {
            s.start = found(s.id).map_or(s.end, |o| o.clamp(s.start, s.end));
        }
    }
    if let Some(before) = sent_before_ns {
        let found = offsets_at(consumer, topic, &out, ceil_ms(before), deadline, ridden, &mut note)?;
        for s in out.iter_mut() {
            s.stop = found(s.id).map_or(s.end, |o| o.clamp(s.start, s.end));
        }
    }
    Ok(out)
}

/// Each partition's offset of its first message timestamped at or after `ms` (Kafka's
/// `offsets_for_times`): `None` where none is. Transient errors are ridden through
/// until `deadline`, as [`starts`] does.
fn offsets_at(
    consumer: &BaseConsumer,
    topic: &str,
    parts: &[Span],
    ms: i64,
    deadline: Instant,
    ridden: &mut u64,
    note: &mut dyn FnMut(&KafkaError),
) -> Result<impl Fn(i32) -> Option<i64>, OffsetsError> {
    let mut query = TopicPartitionList::new();
    for s in parts {
        query.add_partition_offset(topic, s.id, Offset::Offset(ms))?;
    }
    let found = retried(deadline, ridden, note, |wait| {
        topic::settled(wait.min(Duration::from_secs(5)), || {
            consumer.offsets_for_times(query.clone(), wait.min(REQUEST))
        })
    })?;
    let topic = topic.to_string();
    Ok(move |id| match found.find_partition(&topic, id).map(|e| e.offset()) {
        Some(Offset::Offset(o)) => Some(o),
        // No message at or after that time (`End`, or -1).
        _ => None,
    })
}

/// Orders the timeline, counts the transient errors ridden through and the offsets
/// deleted before they were read (`losses`), and warns of the records that were too
/// large to ship.
fn finish(timeline: Timeline, losses: &Losses, warn: &mut impl FnMut(String)) -> Fleet {
    let mut fleet = timeline.finish();
    fleet.ridden_through(losses.ridden);
    fleet.expired(losses.expired);
    for (host, source, seq, len) in fleet.too_large() {
        warn(format!(
            "{host} {source}: record {seq} ({len} bytes) was too large for a Kafka message: its agent shipped a marker in its place"
        ));
    }
    fleet
}
