//! A streamed read whose partitions lose what it was to read (see [`crate::fleet::gone`]
//! for how it is noticed): records deleted before they were read are skipped and
//! counted ([`FleetStats::expired`](crate::fleet::FleetStats::expired)); a partition
//! gone (the topic deleted, or made again shorter) is closed, the offsets it had left
//! unread counted ([`FleetStats::vanished`](crate::fleet::FleetStats::vanished)), and
//! the read goes on with the rest.

use std::time::Instant;

use rdkafka::consumer::base_consumer::PartitionQueue;
use rdkafka::consumer::DefaultConsumerContext;
use rdkafka::error::KafkaError;

use super::{Fetch, Gone, Reading};
use crate::fleet::gone::{assign_at, locate, present, Located, Present};
use crate::fleet::kafka::FleetError;
use crate::fleet::transient::REQUEST;

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

    /// Resumes `parts[i]` (see [`resume`](Self::resume) and [`locate`]): assigned again
    /// where it goes on, closed where nothing of it is left, or closed and counted where
    /// it ends now before the read's position (the topic deleted and made again).
    fn resume_one(
        &mut self,
        fetch: &mut Fetch,
        i: usize,
        sure: bool,
        until: Instant,
        warn: &mut dyn FnMut(String),
    ) -> Result<(), FleetError> {
        let topic = self.topic;
        let located = locate(&fetch.consumer, topic, &mut self.parts[i], sure, until, &mut self.losses, warn)
            .map_err(|e| self.fail("reading a partition's offsets", e))?;
        let (id, next) = (self.parts[i].id, self.parts[i].next);
        match located {
            Located::Lost => {}
            Located::Done => self.close(i),
            Located::Vanished { high, left } => {
                self.losses.vanished += left;
                warn(format!(
                    "{topic} partition {id}: ends at offset {high} now, before the read's position {next} (the topic \
                     deleted and made again?): {left} offsets left unread"
                ));
                self.close(i);
            }
            Located::Resume => {
                assign_at(&fetch.consumer, topic, id, next).map_err(|e| self.fail("assigning", e))?;
                // Assigning a partition again makes its messages come to the consumer's
                // queue: split it off again.
                fetch.queues[i] = fetch.split(topic, id)?;
            }
        }
        Ok(())
    }

    /// No message has come for [`STALL`](crate::fleet::gone::STALL): asks the cluster
    /// whether the topic and the partitions still being read are there. Those gone are
    /// closed and what they had left counted and said; those lost are resumed. A
    /// question that fails is ridden through (the read's idle bound still holds).
    pub(super) fn check(&mut self, fetch: &mut Fetch, warn: &mut dyn FnMut(String)) -> Result<(), FleetError> {
        let topic = self.topic;
        let answer = present(&fetch.consumer, topic, &mut self.losses);
        self.checked = Instant::now();
        if matches!(answer, Present::Unknown) {
            return Ok(());
        }
        let (gone, what) = answer.gone(&self.parts);
        if !gone.is_empty() {
            let left = Present::left(&self.parts, &gone);
            self.losses.vanished += left;
            let then = match answer {
                Present::Missing => "the read ends with what it read",
                _ => "the read goes on without them",
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
