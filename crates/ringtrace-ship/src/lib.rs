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
//! * `agent` (the `kafka` feature): drains ring files into a topic, advancing each ring's consumer
//!   position only after Kafka acknowledged the batches that hold its records.
//! * `command`: `ship`'s command line, shared by `ringtrace-ship` and the `ringtrace`
//!   command (the `command` feature).
//! * [`spool`]: an optional bounded directory where rounds Kafka did not take in
//!   time wait on disk, so that an outage longer than the rings hold loses nothing.
//! * [`fleet`]: reads a topic back, drops duplicates by (host, source, sequence),
//!   counts gaps and damaged messages, and merges every host's records by time.

#![forbid(unsafe_code)]

//!
//! Features: `kafka` (on by default) builds the agent and the fleet reader, which link
//! librdkafka; `command` (off by default) builds `ship`'s command line, which the
//! `ringtrace-ship` binary and the `ringtrace` command share. The library prints
//! nothing: what it has to say goes out as `tracing` events.

#[cfg(feature = "kafka")]
pub mod agent;
#[cfg(feature = "command")]
pub mod command;
mod disk;
pub mod fleet;
pub use disk::{Damage, LongName, Versions};
pub mod frame;
pub mod spool;
pub mod state;
#[cfg(feature = "kafka")]
mod topic;
