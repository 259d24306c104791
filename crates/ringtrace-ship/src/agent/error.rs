//! The agent's error.

use std::path::PathBuf;

use rdkafka::error::KafkaError;

use crate::spool::SpoolError;
use crate::state::StateError;

/// Why the agent stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShipError {
    /// A source could not be opened or read (the error names it).
    #[error("source {0}")]
    Source(#[from] super::source::error::SourceError),
    /// The Kafka producer could not be created.
    #[error("kafka: creating the producer for {brokers}: {source}")]
    Producer {
        /// The bootstrap servers.
        brokers: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
    /// The producer refused a message outright.
    #[error("kafka: sending to {topic}: {source}")]
    Send {
        /// The topic.
        topic: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
    /// The cluster says the topic does not exist.
    #[error("kafka: topic {topic} does not exist on {brokers} (create it first, e.g. kafka-topics.sh --create --topic {topic})")]
    NoTopic {
        /// The topic.
        topic: String,
        /// The bootstrap servers.
        brokers: String,
    },
    /// The state file could not be read or written (the error names it).
    #[error(transparent)]
    State(#[from] StateError),
    /// The state file is another host's.
    #[error("state file {} belongs to host {found:?}, not {host:?}", path.display())]
    OtherHost {
        /// The state file.
        path: PathBuf,
        /// The host it names.
        found: String,
        /// The agent's host.
        host: String,
    },
    /// The state file says rounds wait in a spool, and none was given.
    #[error("state file {} says {rounds} round(s) wait in a spool directory: give it (--spool)", path.display())]
    SpoolNeeded {
        /// The state file.
        path: PathBuf,
        /// The rounds waiting.
        rounds: u64,
    },
    /// The spool directory could not be opened (the error says why).
    #[error(transparent)]
    Spool(#[from] SpoolError),
    /// [`Config::max_message`](super::Config::max_message) is out of its range.
    #[error("the largest message is {0} bytes; it must be from {min} to {max}", min = super::MIN_MAX_MESSAGE, max = super::MAX_MAX_MESSAGE)]
    MaxMessage(usize),
}
