//! # ringtrace-ship
//!
//! Ships a host's ringtrace records into Apache Kafka and reads a fleet's records back.
//!
//! * [`frame`]: the batch framing, one Kafka message holding many records of one
//!   source, each with its (host, source, sequence) and a wall-clock time; versioned
//!   and checksummed.
//! * [`state`]: the agent's small state file (each source's next sequence and last
//!   acknowledged position), written atomically, so that an agent killed at any
//!   instruction resends at most what Kafka had not acknowledged.
//! * [`agent`]: drains ring files into a topic, advancing each ring's consumer
//!   position only after Kafka acknowledged the batches that hold its records.
//! * [`command`]: the agent's command line, `ship`, shared by `ringtrace-ship` and the
//!   `ringtrace` command.
//! * [`spool`]: an optional bounded directory where rounds Kafka did not take in
//!   time wait on disk, so that an outage longer than the rings hold loses nothing.
//! * [`fleet`]: reads a topic back, drops duplicates by (host, source, sequence),
//!   counts gaps and damaged messages, and merges every host's records by time.

pub mod agent;
pub mod command;
mod disk;
pub mod fleet;
pub mod frame;
pub mod spool;
pub mod state;
mod topic;
