//! Reading a fleet back: every host's batches from a topic, copies dropped by
//! (host, source, sequence), gaps and damaged messages counted, every record merged
//! by time into one timeline.
//!
//! [`stream_topic`] reads a topic back in bounded memory: each partition in its order,
//! through the streaming [`Merge`] (copies dropped as they come, records merged by time
//! within a reorder bound), each record handed out as it goes.
//!
//! [`Timeline`] takes message payloads in any order (a source's batches normally come
//! in order from one partition; after a change of the topic's partition count they
//! may not) and [`Timeline::finish`] sorts each source by sequence. [`read_topic`]
//! feeds it a topic from its start up to the end it had when the read began; it and
//! [`Follow`] ride through what Kafka rides through, a broker down or a partition's
//! leadership moving, until their deadlines.
//!
//! [`export`] writes a fleet's records as one Perfetto, Chrome JSON or CTF trace, a
//! process per host and a thread per source, or as OpenTelemetry log records (OTLP).

pub mod export;
#[cfg(feature = "kafka")]
mod follow;
#[cfg(feature = "kafka")]
mod gone;
#[cfg(feature = "kafka")]
mod kafka;
mod merge;
#[cfg(feature = "kafka")]
mod stream;
mod timeline;
#[cfg(feature = "kafka")]
mod transient;

#[cfg(feature = "kafka")]
pub use follow::{Follow, FollowError};
#[cfg(feature = "kafka")]
pub use kafka::{read_topic, read_topic_since, FleetError, OffsetsError};
pub use merge::{Item, Merge};
#[cfg(feature = "kafka")]
pub use stream::{stream_topic, ReadOptions};
pub use timeline::{Entry, Fleet, FleetStats, Merged, Timeline};
