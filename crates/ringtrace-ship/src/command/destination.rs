//! `ship --to DESTINATION`: where the records go.

use std::fmt;

/// Where `ship` delivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// `kafka://BROKERS/TOPIC`: the agent, into a Kafka topic.
    Kafka {
        /// The bootstrap servers, `host:port,...`.
        brokers: String,
        /// The topic.
        topic: String,
    },
    /// `otlp://HOST:PORT` (OTLP/gRPC) or `otlp+http://HOST:PORT/PREFIX` (OTLP/HTTP): an
    /// OpenTelemetry endpoint, as written (the exporter parses the rest).
    Otlp(String),
}

impl Destination {
    /// Parses `--to`'s value; the error says what a destination is.
    pub fn parse(s: &str) -> Result<Destination, DestinationError> {
        if let Some(rest) = s.strip_prefix("kafka://") {
            return match rest.split_once('/') {
                Some((brokers, topic)) if !brokers.is_empty() && !topic.is_empty() && !topic.contains('/') => {
                    Ok(Destination::Kafka { brokers: brokers.into(), topic: topic.into() })
                }
                _ => Err(DestinationError::Kafka(s.into())),
            };
        }
        if s.starts_with("otlp://") || s.starts_with("otlp+http://") {
            return Ok(Destination::Otlp(s.into()));
        }
        Err(DestinationError::Unknown(s.into()))
    }
}

/// Why `--to`'s value is not a destination (each quotes it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DestinationError {
    /// A `kafka://` URL without its brokers or its one topic.
    #[error("`{0}`: {USAGE} (the brokers host:port,..., then one topic)")]
    Kafka(String),
    /// Another scheme.
    #[error("`{0}`: {USAGE}")]
    Unknown(String),
}

/// What a destination is.
const USAGE: &str = "a destination is kafka://BROKERS/TOPIC, otlp://HOST:PORT or otlp+http://HOST:PORT";

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::Kafka { brokers, topic } => write!(f, "kafka://{brokers}/{topic}"),
            Destination::Otlp(url) => f.write_str(url),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_parse() {
        assert_eq!(
            Destination::parse("kafka://k1:9092,k2:9092/traces"),
            Ok(Destination::Kafka { brokers: "k1:9092,k2:9092".into(), topic: "traces".into() })
        );
        assert_eq!(Destination::parse("otlp://c:4317"), Ok(Destination::Otlp("otlp://c:4317".into())));
        assert_eq!(Destination::parse("otlp+http://c/p"), Ok(Destination::Otlp("otlp+http://c/p".into())));
        for bad in ["kafka://k1:9092", "kafka:///t", "kafka://k/", "kafka://k/a/b", "http://c", "k1:9092"] {
            let e = Destination::parse(bad).unwrap_err().to_string();
            assert!(e.contains("kafka://BROKERS/TOPIC"), "{bad}: {e}");
        }
        let d = Destination::parse("kafka://k:1/t").unwrap();
        assert_eq!(Destination::parse(&d.to_string()), Ok(d));
    }
}
