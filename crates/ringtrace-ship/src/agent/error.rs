//! The agent's error.

/// Why the agent stopped.
#[derive(Debug)]
pub enum ShipError {
    /// A source could not be opened or read.
    Source(String),
    /// The Kafka client could not be created or refused a message outright.
    Kafka(String),
    /// The state file could not be read or written (the message names it).
    State(String),
    /// The configuration cannot work (the message says why).
    Config(String),
}

impl std::fmt::Display for ShipError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShipError::Source(m) => write!(f, "source {m}"),
            ShipError::Kafka(m) => write!(f, "kafka: {m}"),
            ShipError::State(m) | ShipError::Config(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ShipError {}
