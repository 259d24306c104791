//! `ringtrace-ship`: ships a host's ring files into Kafka (`ship`), and reads a
//! fleet's records back as one timeline (`read`).
//!
//! Stopping the agent by any signal at any moment is safe: what Kafka acknowledged is
//! in the state file before the rings get the space back, and what it did not is sent
//! again, under the same sequence numbers, by the next agent on the same state file.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use ringtrace_ship::agent::{self, Compression, Config, FileConfig};
use ringtrace_ship::fleet;

#[derive(Parser)]
#[command(name = "ringtrace-ship", version, about = "Ships ringtrace rings into Apache Kafka and reads a fleet back")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Codec {
    None,
    Lz4,
    Zstd,
}

#[derive(Subcommand)]
enum Command {
    /// Drains ring files and channel files (discard mode) into a topic, exactly once
    /// across restarts; each slot of a channel file is a source of its own, PATH#SLOT.
    Ship {
        /// A configuration file (TOML: brokers, topic, host, state, sources and the
        /// options below); the options given here take precedence, and the sources
        /// given here are added to its.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Kafka's bootstrap servers, host:port,... (here or in --config).
        #[arg(long)]
        brokers: Option<String>,
        /// The topic (here or in --config).
        #[arg(long)]
        topic: Option<String>,
        /// This host's name in every record, at most 255 bytes (here or in --config).
        #[arg(long)]
        host: Option<String>,
        /// The agent's state file: each source's next sequence number, position and
        /// counters (here or in --config).
        #[arg(long)]
        state: Option<PathBuf>,
        /// Compression of the batches on the wire [default: lz4].
        #[arg(long, value_enum)]
        compression: Option<Codec>,
        /// Stop once every ring's producers are gone and its records shipped (a channel
        /// file: every slot that ever had a producer).
        #[arg(long)]
        until_disconnected: bool,
        /// Stop after this many seconds.
        #[arg(long)]
        duration: Option<f64>,
        /// Seconds a message may wait for its acknowledgement before its round fails
        /// [default: 30].
        #[arg(long)]
        ack_timeout: Option<f64>,
        /// The largest message sent, in bytes (at most the topic's max.message.bytes). A
        /// record too large for it is not shipped: a marker keeps its place and length,
        /// and `too_large` counts it [default: 1000000].
        #[arg(long)]
        max_message: Option<usize>,
        /// A spool directory (created 0700 if missing; another user's or a shared one is
        /// refused): a round Kafka did not acknowledge within --spool-wait is kept
        /// there, and the rings get its space back, until Kafka takes it.
        #[arg(long, value_name = "DIR")]
        spool: Option<PathBuf>,
        /// The most bytes the spool holds; past it, records stay in the rings
        /// [default: 1073741824].
        #[arg(long, value_name = "BYTES")]
        spool_max: Option<u64>,
        /// Seconds a round waits for its acknowledgements before it is spooled
        /// [default: 2].
        #[arg(long, value_name = "SECONDS")]
        spool_wait: Option<f64>,
        /// The ring files (discard rings and flight recorders) and channel files, and
        /// directories of them, and BPF ring buffer maps (bpf-pin:PATH, bpf-id:N)
        /// (here or in --config).
        rings: Vec<PathBuf>,
    },
    /// Prints an agent's state file: each source's counters (records shipped, too large
    /// to ship, refused by its ring), its next sequence number and position, the rounds
    /// that failed, and when the file was last stored.
    Stat {
        /// The state file (--state of `ship`).
        state: PathBuf,
    },
    /// Reads a topic to its current end and prints every record once, merged by time:
    /// `TIME_NS HOST SOURCE SEQ HEX`. The counters go to stderr.
    Read {
        /// Kafka's bootstrap servers, host:port,...
        #[arg(long)]
        brokers: String,
        /// The topic.
        #[arg(long)]
        topic: String,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 60.0)]
        timeout: f64,
    },
}

fn seconds(s: f64, what: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|_| format!("{what}: {s} is not a number of seconds"))
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Ship {
            config: file,
            brokers,
            topic,
            host,
            state,
            compression,
            until_disconnected,
            duration,
            ack_timeout,
            max_message,
            spool,
            spool_max,
            spool_wait,
            rings,
        } => {
            let mut config = Config::new("", "", "", PathBuf::new());
            if let Some(file) = file {
                config.apply(&FileConfig::load(&file).map_err(|e| e.to_string())?);
            }
            let or = |given: Option<String>, had: &mut String| {
                if let Some(v) = given {
                    *had = v;
                }
            };
            or(brokers, &mut config.brokers);
            or(topic, &mut config.topic);
            or(host, &mut config.host);
            config.state = state.unwrap_or(std::mem::take(&mut config.state));
            config.sources.extend(rings);
            for (what, missing) in [
                ("--brokers", config.brokers.is_empty()),
                ("--topic", config.topic.is_empty()),
                ("--host", config.host.is_empty()),
                ("--state", config.state.as_os_str().is_empty()),
                ("a ring (or sources in --config)", config.sources.is_empty()),
            ] {
                if missing {
                    return Err(format!("ship needs {what}, on the command line or in --config"));
                }
            }
            if let Some(c) = compression {
                config.compression = match c {
                    Codec::None => Compression::None,
                    Codec::Lz4 => Compression::Lz4,
                    Codec::Zstd => Compression::Zstd,
                };
            }
            config.until_disconnected = until_disconnected;
            config.duration = duration.map(|d| seconds(d, "--duration")).transpose()?;
            if let Some(t) = ack_timeout {
                config.ack_timeout = seconds(t, "--ack-timeout")?;
            }
            config.max_message = max_message.unwrap_or(config.max_message);
            if spool.is_some() {
                config.spool = spool;
            }
            config.spool_max = spool_max.unwrap_or(config.spool_max);
            if let Some(w) = spool_wait {
                config.spool_wait = seconds(w, "--spool-wait")?;
            }
            if config.spool_max == 0 || config.spool_wait.is_zero() {
                return Err("--spool-max and --spool-wait must be above 0".into());
            }
            let s = agent::run(&config, || false).map_err(|e| e.to_string())?;
            println!(
                "shipped={} batches={} failed_rounds={} recovered={} ring_lost={} overwritten={} too_large={} \
                 spooled={} unspooled={} spool_lost={}",
                s.shipped,
                s.batches,
                s.failed_rounds,
                s.recovered,
                s.ring_lost,
                s.overwritten,
                s.too_large,
                s.spooled,
                s.unspooled,
                s.spool_lost
            );
            Ok(())
        }
        Command::Stat { state } => match ringtrace_ship::state::State::load(&state) {
            Ok(Some(s)) => {
                print!("{s}");
                Ok(())
            }
            Ok(None) => Err(format!("{}: no such state file", state.display())),
            Err(e) => Err(e.to_string()),
        },
        Command::Read { brokers, topic, timeout } => {
            let fleet = fleet::read_topic(&brokers, &topic, seconds(timeout, "--timeout")?, |w| {
                eprintln!("ringtrace-ship: {w}")
            })
            .map_err(|e| e.to_string())?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for e in fleet.timeline() {
                let hex: String = e.payload.iter().map(|b| format!("{b:02x}")).collect();
                writeln!(out, "{} {} {} {} {hex}", e.time_ns, e.host, e.source, e.seq).map_err(|e| e.to_string())?;
            }
            out.flush().map_err(|e| e.to_string())?;
            let s = fleet.stats();
            eprintln!(
                "ringtrace-ship: batches={} records={} duplicates={} missing={} damaged={}",
                s.batches, s.records, s.duplicates, s.missing, s.damaged
            );
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ringtrace-ship: {e}");
            ExitCode::FAILURE
        }
    }
}
