//! Why `ship` cannot run.

#[cfg(feature = "kafka")]
use crate::agent::{ConfigError, ShipError};

/// How the `ringtrace` command built without its `kafka` feature gets it.
pub const KAFKA_FEATURE: &str = "Kafka needs the command built with its kafka feature, which links librdkafka \
     (from a checkout of ringtrace: cargo install --path crates/ringtrace-cli --features kafka), or ringtrace-ship";

/// Why `ship` cannot run: each names the option or file at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// Something the agent needs is given nowhere.
    #[error("ship needs {0}, on the command line or in --config")]
    Missing(&'static str),
    /// A Kafka option with an OTLP destination.
    #[error("{0} is Kafka's: ship --to otlp:// delivers to an OTLP endpoint instead")]
    KafkaOnly(&'static str),
    /// An OTLP option with a Kafka destination.
    #[error("{0} is OTLP's: ship --to kafka:// ships into Kafka")]
    OtlpOnly(&'static str),
    /// `--host` with an OTLP destination.
    #[error("--host names this host in Kafka records; OpenTelemetry's host.name is --host-name")]
    HostName,
    /// An OTLP destination and nothing to follow.
    #[error("ship --to otlp:// needs the recorder directories or trace files to follow")]
    NothingToFollow,
    /// A spool limit of zero.
    #[error("--spool-max and --spool-wait must be above 0")]
    SpoolLimits,
    /// A Kafka destination in a build without Kafka.
    #[error("{0}: this build lacks Kafka. {KAFKA_FEATURE}")]
    NoKafka(String),
    /// The configuration file.
    #[cfg(feature = "kafka")]
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The agent stopped on an error.
    #[cfg(feature = "kafka")]
    #[error(transparent)]
    Ship(#[from] ShipError),
    /// `--to` is not an OTLP endpoint this build delivers to (what is wrong with it).
    #[cfg(feature = "otlp")]
    #[error("--to {0}")]
    Endpoint(ringtrace_export::delivery::EndpointError),
    /// The OTLP follower stopped on an error: a source unreadable the first time, or
    /// no client for the endpoint.
    #[cfg(feature = "otlp")]
    #[error(transparent)]
    Follow(#[from] ringtrace_export::delivery::FollowError<ringtrace_tracing::Error>),
}
