//! A streamed read whose partitions lose what it was to read: records deleted before
//! they were read (retention, or `DeleteRecords`, moved a partition's start past the
//! reader's position), and the topic deleted under the read.
//!
//! The reader's consumer has `auto.offset.reset=error`: where the next offset of a
//! partition is no longer in it, librdkafka stops fetching that partition and reports
//! `AUTO_OFFSET_RESET` on its queue (on the consumer's own queue before the partition's
//! queue was split, naming no partition). The reader then asks for the partition's
//! offsets and assigns it again where its records start now, counting the offsets
//! skipped ([`FleetStats::expired`](crate::fleet::FleetStats::expired)).
//!
//! A topic deleted gives `UNKNOWN_TOPIC_OR_PARTITION`, which a leader moving gives too
//! (and which is ridden through for that): once no message has come for [`STALL`], the
//! reader asks the cluster whether the topic and its partitions are still there; those
//! gone are closed, the offsets left unread counted
//! ([`FleetStats::vanished`](crate::fleet::FleetStats::vanished)).

use std::time::{Duration, Instant};

use rdkafka::consumer::base_consumer::PartitionQueue;
use rdkafka::consumer::{Consumer, DefaultConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::{Fetch, Gone, Reading};
use crate::fleet::kafka::FleetError;
use crate::fleet::transient::{is_transient, REQUEST};
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

impl Fetch {
    /// The queue of partition `partition` of `topic`, split from the consumer's.
    pub(super) fn split(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<PartitionQueue<DefaultConsumerContext>, FleetError> {
        self.consumer.split_partition_queue(topic, partition).ok_or_else(|| FleetError::Read {
            topic: topic.into(),
            source: Box::new(KafkaError::Subscription(format!("no queue of partition {partition}"))),
        })
    }
}

impl Reading<'_> {
    fn fail(&self, doing: &'static str, source: KafkaError) -> FleetError {
        FleetError::Kafka { doing, topic: self.topic.into(), brokers: self.brokers.into(), source: Box::new(source) }
    }

    /// Resumes the partitions whose next offset is gone (`gone`; each open one where it
    /// names none): each where its records start now, or closed where none of those
    /// before the read's end is left. Their offsets are asked for 10 s at most in all
    /// (a partition not answered by then is lost, for the next check).
    pub(super) fn resume(
        &mut self,
        fetch: &mut Fetch,
        gone: Gone,
        warn: &mut dyn FnMut(String),
    ) -> Result<(), FleetError> {
        let which: Vec<usize> = match gone.0 {
            Some(i) => vec![i],
            None => (0..self.parts.len()).collect(),
        };
        let until = Instant::now() + REQUEST;
        for i in which {
            if self.parts[i].open {
                self.resume_one(fetch, i, gone.0.is_some(), until, warn)?;
            }
        }
        Ok(())
    }

    /// Resumes `parts[i]` (see [`resume`](Self::resume)); where its offsets cannot be
    /// had by `until` (a transient error, or no time left), marks it lost, for the next
    /// [`check`](Self::check).
    ///
    /// Where its next offset is in it after all, assigns it there again if `sure` (the
    /// error was its own), else marks it lost: assigned again at the next check unless
    /// a message of it comes first.
    fn resume_one(
        &mut self,
        fetch: &mut Fetch,
        i: usize,
        sure: bool,
        until: Instant,
        warn: &mut dyn FnMut(String),
    ) -> Result<(), FleetError> {
        let (topic, id, next, end) = (self.topic, self.parts[i].id, self.parts[i].next, self.parts[i].end);
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            self.parts[i].lost = true;
            return Ok(());
        }
        let (low, high) = match fetch.consumer.fetch_watermarks(topic, id, left.max(Duration::from_millis(100))) {
            Ok(w) => w,
            Err(e) if is_transient(&e) => {
                self.parts[i].lost = true;
                self.ridden += 1;
                self.last = Some(Box::new(e));
                return Ok(());
            }
            Err(e) => return Err(self.fail("reading a partition's offsets", e)),
        };
        self.parts[i].lost = false;
        if low > next {
            // Deleted before they were read.
            let skipped = low.min(end) - next;
            self.expired += skipped as u64;
            let then = if low >= end {
                "nothing of the partition is left to read".to_string()
            } else {
                format!("reading on from offset {low}")
            };
            warn(format!(
                "{topic} partition {id}: offsets {next} to {} were deleted before they were read (retention, or \
                 records deleted): {skipped} skipped, {then}",
                low.min(end) - 1
            ));
            if low >= end {
                self.close(i);
                return Ok(());
            }
            self.parts[i].next = low;
        } else if high <= next {
            // The partition now ends before the read's position: cut short, or made
            // again (the topic deleted and created anew).
            let left = (end - next).max(0);
            self.vanished += left as u64;
            warn(format!(
                "{topic} partition {id}: ends at offset {high} now, before the read's position {next} (the topic \
                 deleted and made again?): {left} offsets left unread"
            ));
            self.close(i);
            return Ok(());
        } else if sure {
            // In the partition again (a leader that had not caught up?): from there.
            self.ridden += 1;
        } else {
            self.parts[i].lost = true;
            return Ok(());
        }
        let offset = self.parts[i].next;
        let mut one = TopicPartitionList::new();
        one.add_partition(topic, id);
        fetch.consumer.incremental_unassign(&one).map_err(|e| self.fail("assigning", e))?;
        one.set_all_offsets(Offset::Offset(offset)).map_err(|e| self.fail("assigning", e))?;
        fetch.consumer.incremental_assign(&one).map_err(|e| self.fail("assigning", e))?;
        // Assigning a partition again makes its messages come to the consumer's queue:
        // split it off again.
        fetch.queues[i] = fetch.split(topic, id)?;
        Ok(())
    }

    /// No message has come for [`STALL`]: asks the cluster whether the topic and the
    /// partitions still being read are there. Those gone are closed and what they had
    /// left counted and said; those lost are resumed. A question that fails is ridden
    /// through (the read's idle bound still holds).
    pub(super) fn check(&mut self, fetch: &mut Fetch, warn: &mut dyn FnMut(String)) -> Result<(), FleetError> {
        let topic = self.topic;
        let answer = topic::ask(fetch.consumer.client(), topic, ASK);
        self.checked = Instant::now();
        let present: Option<Vec<i32>> = match answer {
            Ok(topic::Answer::Missing) => None,
            Ok(topic::Answer::Known(m)) => match m.topics().iter().find(|t| t.name() == topic) {
                // An error for the whole topic (its partitions not listed) says nothing of them.
                Some(t) if t.error().is_some() => return Ok(()),
                Some(t) => Some(t.partitions().iter().map(|p| p.id()).collect()),
                None => None,
            },
            Err(e) => {
                self.ridden += 1;
                self.last = Some(Box::new(e));
                return Ok(());
            }
        };
        let gone: Vec<usize> = (0..self.parts.len())
            .filter(|&i| self.parts[i].open)
            .filter(|&i| present.as_ref().is_none_or(|ids| !ids.contains(&self.parts[i].id)))
            .collect();
        if !gone.is_empty() {
            let left: i64 = gone.iter().map(|&i| (self.parts[i].end - self.parts[i].next).max(0)).sum();
            self.vanished += left as u64;
            let (what, then) = match present {
                None => (
                    "the topic is no longer in the cluster (deleted during the read)",
                    "the read ends with what it read",
                ),
                Some(_) => ("partitions of the topic are no longer in the cluster", "the read goes on without them"),
            };
            warn(format!("{topic}: {what}: {left} offsets of {} partitions left unread; {then}", gone.len()));
            for i in gone {
                self.close(i);
            }
        }
        let until = Instant::now() + REQUEST;
        for i in 0..self.parts.len() {
            if self.parts[i].open && self.parts[i].lost {
                self.resume_one(fetch, i, true, until, warn)?;
            }
        }
        Ok(())
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
}
