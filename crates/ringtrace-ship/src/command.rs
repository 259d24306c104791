//! `ship`, defined once: the subcommand of `ringtrace-ship ship` and of `ringtrace
//! ship`, which take [`ShipArgs`] and [`ShipArgs::resolve`] it into what to run:
//!
//! * `--to kafka://BROKERS/TOPIC` (or brokers and topic in `--config`): the agent
//!   ([`KafkaShip::run_until_signalled`]). A first SIGINT, SIGTERM or SIGHUP ends the
//!   round in flight, the counters are printed, and the command exits 128 + the
//!   signal's number (130 for Ctrl-C, 143 for SIGTERM); a second signal kills it at once
//!   (safe too: see the `agent` module). In a build without the `kafka` feature it is
//!   refused, saying so ([`CommandError::NoKafka`]).
//! * `--to otlp://HOST:PORT` or `otlp+http://HOST:PORT/PREFIX`: recorder directories
//!   and stream trace files followed and delivered to an OpenTelemetry endpoint
//!   ([`OtlpShip::run_until_signalled`], with the `otlp` feature; both binaries run it).
//!
//! Every duration option is written with its unit ([`parse_duration`]); the binaries
//! print the library's log lines with [`log_to_stderr`].

mod destination;
mod duration;
mod error;
#[cfg(feature = "otlp")]
mod follow;
mod log;
mod otlp;
mod signals;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

pub use destination::{Destination, DestinationError};
pub use duration::{parse_duration, parse_duration_or_zero, DurationError, MAX_DURATION};
pub use error::{CommandError, KAFKA_FEATURE};
#[cfg(feature = "otlp")]
pub use follow::Delivered;
pub use log::{log_to_stderr, StderrLines};
pub use otlp::{parse_header, HeaderError, OtlpOptions, OtlpShip, Signals};
pub use signals::{die_of, on_stop_signals, stop_signals};

#[cfg(feature = "kafka")]
use crate::agent::{self, Compression, Config, FileConfig, ShipStats};

/// Compression of the batches on the wire.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Codec {
    None,
    Lz4,
    Zstd,
}

/// `ship`'s arguments: drains a host's rings into a Kafka topic, exactly once across
/// restarts (each slot of a channel file, and each ring of a recorder directory, a
/// source of its own, PATH#SLOT); or follows recorders into an OTLP endpoint.
#[derive(Debug, Args)]
pub struct ShipArgs {
    /// Where the records go: kafka://BROKERS/TOPIC (the brokers host:port,...; or
    /// brokers and topic in --config), or an OpenTelemetry endpoint, otlp://HOST:PORT
    /// (gRPC; without a port, 4317) or otlp+http://HOST:PORT/PREFIX (HTTP; 4318).
    #[arg(long, value_name = "DESTINATION", value_parser = Destination::parse)]
    pub to: Option<Destination>,
    /// Kafka: a configuration file (TOML: brokers, topic, host, state, sources and the
    /// options below); the options given here take precedence, and the sources given
    /// here are added to its.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Kafka: this host's name in every record, at most 255 bytes (here or in
    /// --config). OpenTelemetry's host.name is --host-name.
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Kafka: the agent's state file: each source's next sequence number, position and
    /// counters (here or in --config).
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Kafka: compression of the batches on the wire [default: lz4].
    #[arg(long, value_enum)]
    pub compression: Option<Codec>,
    /// Kafka: stop once every ring's producers are gone and its records shipped (a
    /// channel file: every slot that ever had a producer).
    #[arg(long)]
    pub until_disconnected: bool,
    /// Stop after this long (500ms, 30s, 1h30m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Kafka: how long a message may wait for its acknowledgement before its round
    /// fails [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub ack_timeout: Option<Duration>,
    /// Kafka: the largest message sent, in bytes (at most the topic's
    /// max.message.bytes). A record too large for it is not shipped: a marker keeps
    /// its place and length, and `too_large` counts it [default: 1000000].
    #[arg(long)]
    pub max_message: Option<usize>,
    /// Kafka: a spool directory (created 0700 if missing; another user's or a shared
    /// one is refused): a round Kafka did not acknowledge within --spool-wait is kept
    /// there, and the rings get its space back, until Kafka takes it.
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// Kafka: the most bytes the spool holds; past it, records stay in the rings
    /// [default: 1073741824].
    #[arg(long, value_name = "BYTES")]
    pub spool_max: Option<u64>,
    /// Kafka: how long a round waits for its acknowledgements before it is spooled
    /// [default: 2s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub spool_wait: Option<Duration>,
    /// Refused: --to kafka://BROKERS/TOPIC names the brokers.
    #[arg(long, hide = true, value_parser = gone_brokers)]
    pub brokers: Option<String>,
    /// Refused: --to kafka://BROKERS/TOPIC names the topic.
    #[arg(long, hide = true, value_parser = gone_topic)]
    pub topic: Option<String>,
    /// Kafka: the ring files (discard rings and flight recorders) and channel files,
    /// and directories of them, ringtrace-tracing recorder directories, and BPF ring
    /// buffer maps (bpf-pin:PATH, bpf-id:N) (here or in --config). OTLP: the
    /// recorder directories and stream trace files to follow.
    #[arg(value_name = "SOURCE")]
    pub rings: Vec<PathBuf>,
    #[command(flatten)]
    pub otlp: OtlpOptions,
}

fn gone_brokers(_: &str) -> Result<String, Gone> {
    Err(Gone("--brokers"))
}

fn gone_topic(_: &str) -> Result<String, Gone> {
    Err(Gone("--topic"))
}

/// An option of earlier versions, refused with the spelling that replaced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0} is gone: write the destination as --to kafka://BROKERS/TOPIC")]
pub struct Gone(&'static str);

/// What `ship` runs.
#[derive(Debug)]
pub enum Ship {
    /// The agent, into Kafka.
    Kafka(KafkaShip),
    /// The recorders followed into an OTLP endpoint.
    Otlp(OtlpShip),
}

/// `ship --to kafka://...`: the agent's configuration.
#[derive(Debug)]
pub struct KafkaShip {
    #[cfg(feature = "kafka")]
    config: Config,
    /// None can be made without Kafka.
    #[cfg(not(feature = "kafka"))]
    never: std::convert::Infallible,
}

/// How the agent ended.
#[derive(Debug)]
pub struct Shipped {
    /// Its counters, one line of `name=value` (what `ship` prints on stdout).
    pub report: String,
    /// The signal that stopped it, if one did: the command exits 128 + its number.
    pub signal: Option<i32>,
    /// Its counters.
    #[cfg(feature = "kafka")]
    pub stats: ShipStats,
}

impl ShipArgs {
    /// What to run: the destination `--to` (or `--config`) names, with its options;
    /// errs naming an option that does not go with it, or what is missing.
    pub fn resolve(self) -> Result<Ship, CommandError> {
        if let Some(Destination::Otlp(endpoint)) = &self.to {
            let kafka = [
                ("--config", self.config.is_some()),
                ("--state", self.state.is_some()),
                ("--compression", self.compression.is_some()),
                ("--spool", self.spool.is_some()),
                ("--until-disconnected", self.until_disconnected),
                ("--ack-timeout", self.ack_timeout.is_some()),
                ("--max-message", self.max_message.is_some()),
                ("--spool-max", self.spool_max.is_some()),
                ("--spool-wait", self.spool_wait.is_some()),
            ];
            if self.host.is_some() {
                return Err(CommandError::HostName);
            }
            if let Some((name, _)) = kafka.iter().find(|(_, given)| *given) {
                return Err(CommandError::KafkaOnly(name));
            }
            if self.rings.is_empty() {
                return Err(CommandError::NothingToFollow);
            }
            let endpoint = endpoint.clone();
            return Ok(Ship::Otlp(OtlpShip {
                endpoint,
                sources: self.rings,
                duration: self.duration,
                options: self.otlp,
            }));
        }
        if let Some(name) = self.otlp.given() {
            return Err(CommandError::OtlpOnly(name));
        }
        self.kafka().map(Ship::Kafka)
    }

    #[cfg(not(feature = "kafka"))]
    fn kafka(self) -> Result<KafkaShip, CommandError> {
        Err(CommandError::NoKafka(
            self.to.map_or_else(|| "ship --to kafka://BROKERS/TOPIC".into(), |to| to.to_string()),
        ))
    }

    /// The agent's configuration: `--config`'s file, then the options given here over
    /// it, the sources given here added to its.
    #[cfg(feature = "kafka")]
    fn kafka(self) -> Result<KafkaShip, CommandError> {
        let mut config = Config::new("", "", "", PathBuf::new());
        if let Some(file) = &self.config {
            config.apply(&FileConfig::load(file)?);
        }
        if let Some(Destination::Kafka { brokers, topic }) = self.to {
            (config.brokers, config.topic) = (brokers, topic);
        }
        if let Some(host) = self.host {
            config.host = host;
        }
        config.state = self.state.unwrap_or(std::mem::take(&mut config.state));
        config.sources.extend(self.rings);
        for (what, missing) in [
            ("--to kafka://BROKERS/TOPIC", config.brokers.is_empty() || config.topic.is_empty()),
            ("--host", config.host.is_empty()),
            ("--state", config.state.as_os_str().is_empty()),
            ("a ring (or sources in --config)", config.sources.is_empty()),
        ] {
            if missing {
                return Err(CommandError::Missing(what));
            }
        }
        if let Some(c) = self.compression {
            config.compression = match c {
                Codec::None => Compression::None,
                Codec::Lz4 => Compression::Lz4,
                Codec::Zstd => Compression::Zstd,
            };
        }
        config.until_disconnected = self.until_disconnected;
        config.duration = self.duration;
        config.ack_timeout = self.ack_timeout.unwrap_or(config.ack_timeout);
        config.max_message = self.max_message.unwrap_or(config.max_message);
        if self.spool.is_some() {
            config.spool = self.spool;
        }
        config.spool_max = self.spool_max.unwrap_or(config.spool_max);
        config.spool_wait = self.spool_wait.unwrap_or(config.spool_wait);
        if config.spool_max == 0 || config.spool_wait.is_zero() {
            return Err(CommandError::SpoolLimits);
        }
        Ok(KafkaShip { config })
    }
}

impl KafkaShip {
    /// The agent's configuration.
    #[cfg(feature = "kafka")]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Runs the agent until `signalled` returns the number of a signal that asked it to
    /// stop (or `--duration`, `--until-disconnected`); returns its counters and that
    /// signal, if one stopped it. `signalled` is [`stop_signals`]'s in `ringtrace-ship`,
    /// and the `ringtrace` command's own signal thread's in `ringtrace ship`.
    pub fn run_until_signalled(self, signalled: impl Fn() -> Option<i32>) -> Result<Shipped, CommandError> {
        #[cfg(feature = "kafka")]
        {
            let stats = agent::run(&self.config, || signalled().is_some())?;
            Ok(Shipped { report: stats.to_string(), signal: signalled(), stats })
        }
        #[cfg(not(feature = "kafka"))]
        {
            let _ = signalled;
            match self.never {}
        }
    }
}
