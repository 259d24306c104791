//! `ship --to otlp://`'s options: what the OpenTelemetry exporter is told.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::duration::parse_duration;

/// What `ship --to otlp://` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Signals {
    /// Spans and log records.
    All,
    /// Spans only.
    Traces,
    /// Log records only.
    Logs,
}

/// `ship`'s options for an OTLP destination (refused with a Kafka one).
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "With --to otlp://")]
pub struct OtlpOptions {
    /// OpenTelemetry's service.name of the spans and log records: by default the traced
    /// program's name.
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// OpenTelemetry's host.name: left out by default.
    #[arg(long, value_name = "NAME")]
    pub host_name: Option<String>,
    /// What is sent: spans (with their events), log records (events outside any span),
    /// or both. Jaeger takes spans only. [default: all]
    #[arg(long, value_enum)]
    pub signals: Option<Signals>,
    /// The longest wait for the endpoint's answer to one batch. [default: 10s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// How long a batch the endpoint cannot take now is retried before the delivery
    /// gives up. [default: 60s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub retry_for: Option<Duration>,
    /// The pause between rounds. [default: 1s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// A header sent with every request (gRPC metadata), NAME=VALUE: an API key, a
    /// tenant. Repeatable.
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_header)]
    pub header: Vec<(String, String)>,
}

impl OtlpOptions {
    /// The first option given, by its name: refused with a Kafka destination.
    pub(super) fn given(&self) -> Option<&'static str> {
        [
            ("--service", self.service.is_some()),
            ("--host-name", self.host_name.is_some()),
            ("--signals", self.signals.is_some()),
            ("--timeout", self.timeout.is_some()),
            ("--retry-for", self.retry_for.is_some()),
            ("--interval", self.interval.is_some()),
            ("--header", !self.header.is_empty()),
        ]
        .into_iter()
        .find_map(|(name, given)| given.then_some(name))
    }
}

/// `NAME=VALUE`: a name of letters, digits, `-`, `_` and `.` (lowercased: gRPC
/// metadata keys are), not one the protocols set themselves; a value of printable ASCII.
pub fn parse_header(s: &str) -> Result<(String, String), HeaderError> {
    const RESERVED: [&str; 8] =
        ["content-type", "content-length", "host", "te", "connection", "transfer-encoding", "upgrade", "user-agent"];
    let Some((k, v)) = s.split_once('=') else { return Err(HeaderError::NoValue(s.into())) };
    let k = k.trim().to_ascii_lowercase();
    if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
        return Err(HeaderError::Name(s.into()));
    }
    if RESERVED.contains(&k.as_str()) || k.starts_with("grpc-") || k.ends_with("-bin") {
        return Err(HeaderError::Reserved(k));
    }
    if !v.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(HeaderError::Value(k));
    }
    Ok((k, v.to_owned()))
}

/// Why a `--header` was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// No `=` (the argument given).
    #[error("{0:?}: a header is NAME=VALUE")]
    NoValue(String),
    /// A name of other characters (the argument given).
    #[error("{0:?}: a header's name is letters, digits, '-', '_' and '.'")]
    Name(String),
    /// A name the protocols set (the name).
    #[error("{0}: a header the protocol sets itself")]
    Reserved(String),
    /// A value that is not printable ASCII (the name).
    #[error("{0}: a header's value is printable ASCII")]
    Value(String),
}

/// `ship --to otlp://...`: what to follow, and where to.
#[derive(Debug)]
pub struct OtlpShip {
    /// The endpoint as written (`otlp://HOST:PORT`, `otlp+http://HOST:PORT/PREFIX`).
    pub endpoint: String,
    /// The recorder directories and stream trace files.
    pub sources: Vec<PathBuf>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// The exporter's options.
    pub options: OtlpOptions,
}
