//! What a read of a topic does when its partitions lose what it was to read: records
//! deleted before they were read (retention, or `DeleteRecords`, moved a partition's
//! start past the reader's position), and the topic deleted under the read. Shared by
//! the whole-topic read ([`read_topic`](super::read_topic)) and the streamed one
//! ([`stream_topic`](super::stream_topic)), which each decide what a partition gone
//! means for them.
//!
//! A reader's consumer has `auto.offset.reset=error`: where the next offset of a
//! partition is no longer in it, librdkafka stops fetching that partition and reports
//! `AUTO_OFFSET_RESET` ([`offset_gone`]; on the consumer's own queue unless the
//! partition's queue was split, naming no partition). The reader then asks for the
//! partition's offsets ([`locate`]) and assigns it again where its records start now
//! ([`assign_at`]), counting the offsets skipped in [`Losses::expired`].
//!
//! A topic deleted gives `UNKNOWN_TOPIC_OR_PARTITION`, which a leader moving gives too
//! (and which is ridden through for that): once no message has come for [`STALL`], the
//! reader asks the cluster whether the topic and its partitions are still there
//! ([`present`]).

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::transient::is_transient;
use crate::topic;

/// How long a read goes without a message before it asks the cluster whether its
/// partitions are still there, and how long it waits between two such questions.
pub(super) const STALL: Duration = Duration::from_secs(10);

/// How long the cluster is asked about the topic before it is called gone: every
/// broker asked in that time said it does not know it.
const ASK: Duration = Duration::from_secs(5);

/// Whether `e` says a partition's next offset is not in it (see the module's
/// documentation).
pub(super) fn offset_gone(e: &KafkaError) -> bool {
    e.rdkafka_error_code() == Some(RDKafkaErrorCode::AutoOffsetReset)
}

/// One partition being read.
#[derive(Debug)]
pub(super) struct Part {
    pub id: i32,
    /// The next offset expected, and the end (the partition's end when the read began,
    /// or its first message sent at or after a bound on the send time).
    pub next: i64,
    pub end: i64,
    pub open: bool,
    /// Whether its next offset is still in it, and where to resume if not, is not known
    /// (the request that would tell failed, or an error named no partition): asked at
    /// the next check, unless a message of it comes first.
    pub lost: bool,
}

/// What a read counted of the errors it rode through and of what it lost.
#[derive(Debug, Default)]
pub(super) struct Losses {
    /// Transient errors ridden through, and the last of them.
    pub ridden: u64,
    pub last: Option<Box<KafkaError>>,
    /// Offsets deleted before they were read, and left unread in partitions gone.
    pub expired: u64,
    pub vanished: u64,
}

/// What became of a partition whose next offset was not in it ([`locate`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Located {
    /// Not known now (its offsets not had in time, or its next offset in it after all
    /// while the error was not surely its own): marked lost, for the next check.
    Lost,
    /// To be assigned again at its next offset ([`assign_at`]): records deleted were
    /// skipped, or its next offset is in it after all.
    Resume,
    /// Nothing of it before the read's end is left: to be closed.
    Done,
    /// It ends now before the read's position (`high`): cut short, or made again (the
    /// topic deleted and created anew); `left` offsets of the read are not in it.
    Vanished { high: i64, left: u64 },
}

/// Where `part` of `topic` is to go on, its next offset having been found gone (`sure`:
/// the error was its own; else it may have been another partition's). Its offsets are
/// asked for until `until` at most; a transient error is counted in `losses` and leaves
/// it lost. Offsets deleted before they were read are skipped, counted in
/// [`Losses::expired`] and told to `warn`; a partition that vanished is left to the
/// caller.
pub(super) fn locate(
    consumer: &BaseConsumer,
    topic: &str,
    part: &mut Part,
    sure: bool,
    until: Instant,
    losses: &mut Losses,
    warn: &mut dyn FnMut(String),
) -> KafkaResult<Located> {
    let (id, next, end) = (part.id, part.next, part.end);
    part.lost = true;
    let left = until.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Ok(Located::Lost);
    }
    let (low, high) = match consumer.fetch_watermarks(topic, id, left.max(Duration::from_millis(100))) {
        Ok(w) => w,
        Err(e) if is_transient(&e) => {
            losses.ridden += 1;
            losses.last = Some(Box::new(e));
            return Ok(Located::Lost);
        }
        Err(e) => return Err(e),
    };
    part.lost = false;
    if low > next {
        // Deleted before they were read.
        let skipped = low.min(end) - next;
        losses.expired += skipped as u64;
        let then = if low >= end {
            "nothing of the partition is left to read".to_string()
        } else {
            format!("reading on from offset {low}")
        };
        warn(format!(
            "{topic} partition {id}: offsets {next} to {} were deleted before they were read (retention, or records \
             deleted): {skipped} skipped, {then}",
            low.min(end) - 1
        ));
        if low >= end {
            return Ok(Located::Done);
        }
        part.next = low;
        Ok(Located::Resume)
    } else if high <= next {
        Ok(Located::Vanished { high, left: u64::try_from(end - next).unwrap_or(0) })
    } else if sure {
        // In the partition again (a leader that had not caught up?): from there.
        losses.ridden += 1;
        Ok(Located::Resume)
    } else {
        part.lost = true;
        Ok(Located::Lost)
    }
}

/// Assigns partition `id` of `topic` to `consumer` again, from `offset`.
pub(super) fn assign_at(consumer: &BaseConsumer, topic: &str, id: i32, offset: i64) -> KafkaResult<()> {
    let mut one = TopicPartitionList::new();
    one.add_partition(topic, id);
    consumer.incremental_unassign(&one)?;
    one.set_all_offsets(Offset::Offset(offset))?;
    consumer.incremental_assign(&one)
}

/// What the cluster says of a topic's partitions ([`present`]).
#[derive(Debug)]
pub(super) enum Present {
    /// The topic is there, with these partitions.
    Partitions(Vec<i32>),
    /// The topic is not in the cluster.
    Missing,
    /// Nothing sure: the question failed (counted in [`Losses::ridden`]), or the
    /// topic is in error as a whole.
    Unknown,
}

impl Present {
    /// The open partitions of `parts` that are not there (indices into `parts`), and
    /// what is gone: the topic, or some of its partitions.
    pub fn gone(&self, parts: &[Part]) -> (Vec<usize>, &'static str) {
        let there = |id: i32| match self {
            Present::Partitions(ids) => ids.contains(&id),
            Present::Missing => false,
            Present::Unknown => true,
        };
        let gone = (0..parts.len()).filter(|&i| parts[i].open && !there(parts[i].id)).collect();
        let what = match self {
            Present::Missing => "the topic is no longer in the cluster (deleted during the read)",
            _ => "partitions of the topic are no longer in the cluster",
        };
        (gone, what)
    }

    /// The offsets the partitions `gone` of `parts` had left before the read's end.
    pub fn left(parts: &[Part], gone: &[usize]) -> u64 {
        gone.iter().map(|&i| u64::try_from(parts[i].end - parts[i].next).unwrap_or(0)).sum()
    }
}

/// Asks the cluster whether `topic` and which of its partitions are there, for [`ASK`]
/// at most; a question that fails is counted in `losses` and answers
/// [`Present::Unknown`].
pub(super) fn present(consumer: &BaseConsumer, topic: &str, losses: &mut Losses) -> Present {
    match topic::ask(consumer.client(), topic, ASK) {
        Ok(topic::Answer::Missing) => Present::Missing,
        Ok(topic::Answer::Known(m)) => match m.topics().iter().find(|t| t.name() == topic) {
            // An error for the whole topic (its partitions not listed) says nothing of them.
            Some(t) if t.error().is_some() => Present::Unknown,
            Some(t) => Present::Partitions(t.partitions().iter().map(|p| p.id()).collect()),
            None => Present::Missing,
        },
        Err(e) => {
            losses.ridden += 1;
            losses.last = Some(Box::new(e));
            Present::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_reset_librdkafka_reports_for_an_offset_gone_is_taken_for_one() {
        let code = RDKafkaErrorCode::AutoOffsetReset;
        assert!(offset_gone(&KafkaError::MessageConsumption(code)));
        for code in [RDKafkaErrorCode::OffsetOutOfRange, RDKafkaErrorCode::UnknownTopicOrPartition] {
            assert!(!offset_gone(&KafkaError::MessageConsumption(code)), "{code:?}");
        }
        assert!(!offset_gone(&KafkaError::PartitionEOF(0)));
    }

    #[test]
    fn a_partition_is_gone_where_the_cluster_does_not_list_it() {
        let part = |id, open| Part { id, next: 10, end: 15, open, lost: false };
        let parts = [part(0, true), part(1, true), part(2, false)];
        assert_eq!(Present::Partitions(vec![0, 2]).gone(&parts).0, [1]);
        assert_eq!(Present::Missing.gone(&parts).0, [0, 1]);
        assert!(Present::Unknown.gone(&parts).0.is_empty());
        assert_eq!(Present::left(&parts, &[0, 1]), 10);
    }
}
