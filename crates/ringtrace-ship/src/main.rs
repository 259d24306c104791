//! `ringtrace-ship`: ships a host's ring files into Kafka (`ship`), or follows
//! recorders into an OpenTelemetry endpoint (`ship --to otlp://`), and reads a fleet's
//! records back as one timeline (`read`).
//!
//! A first SIGINT, SIGTERM or SIGHUP ends the agent's round in flight: it prints its
//! counters and exits 128 + the signal's number, as `ringtrace ship` does (one code
//! path: [`command::KafkaShip::run_until_signalled`]); into an OTLP endpoint, a last round
//! sends the spans still open, then it prints what was delivered and exits likewise
//! ([`command::OtlpShip::run_until_signalled`]). Stopping it by any signal at any moment is
//! safe all the same: what Kafka acknowledged is in the state file before the rings get
//! the space back, and what it did not is sent again, under the same sequence numbers,
//! by the next agent on the same state file.

#![forbid(unsafe_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use ringtrace_ship::command::{self, parse_duration, Ship, ShipArgs};
use ringtrace_ship::fleet;

#[derive(Parser)]
#[command(
    name = "ringtrace-ship",
    version,
    about = "Ships ringtrace rings into Apache Kafka or an OTLP endpoint and reads a fleet back"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Drains a host's rings into a topic (--to kafka://BROKERS/TOPIC), exactly once
    /// across restarts: ring files (discard rings and flight recorders), channel files
    /// (a source per slot, PATH#SLOT), ringtrace-tracing recorder directories (a source
    /// per ring, its records decoded), BPF ring buffer maps (bpf-pin:PATH, bpf-id:N).
    /// Or follows recorder directories and stream trace files into an OpenTelemetry
    /// endpoint (--to otlp://HOST:PORT or otlp+http://HOST:PORT/PREFIX), their spans
    /// delivered as they close. `ringtrace ship` is the same command.
    Ship(Box<ShipArgs>),
    /// Prints an agent's state file: each source's counters (records shipped, too large
    /// to ship, refused by its ring), its next sequence number and position, the rounds
    /// that failed, and when the file was last stored.
    Stat {
        /// The state file (--state of `ship`).
        state: PathBuf,
        /// text: a line per source; json: one object, as `ringtrace stat --format json`
        /// prints it.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Reads a topic to its current end and prints every record once, merged by time:
    /// `TIME_NS HOST SOURCE SEQ HEX`. The counters go to stderr: batches, records
    /// (delivered whole), duplicates (dropped), missing, damaged (messages skipped),
    /// too_large (markers of records their agents could not ship) and transient (Kafka
    /// errors ridden through).
    Read {
        /// Kafka's bootstrap servers, host:port,...
        #[arg(long)]
        brokers: String,
        /// The topic.
        #[arg(long)]
        topic: String,
        /// Give up after this long (30s, 2m).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
        timeout: Duration,
    },
}

/// `stat`'s output.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

/// How the command ended, short of a failure.
enum Ended {
    Done,
    /// A signal stopped `ship`: exit 128 + its number.
    Signalled(i32),
}

fn run(cli: Cli) -> Result<Ended, String> {
    match cli.command {
        Command::Ship(args) => match (*args).resolve().map_err(|e| e.to_string())? {
            Ship::Kafka(agent) => {
                let shipped = agent.run_until_signalled(command::stop_signals()).map_err(|e| e.to_string())?;
                println!("{}", shipped.report);
                Ok(shipped.signal.map_or(Ended::Done, Ended::Signalled))
            }
            Ship::Otlp(o) => {
                let delivered = o.run_until_signalled(command::stop_signals()).map_err(|e| e.to_string())?;
                eprintln!("{}", delivered.summary);
                match (delivered.failure, delivered.signal) {
                    (Some(why), _) => Err(why),
                    (None, signal) => Ok(signal.map_or(Ended::Done, Ended::Signalled)),
                }
            }
        },
        Command::Stat { state, format } => match ringtrace_ship::state::State::load(&state) {
            Ok(Some(s)) if format == Format::Text => {
                print!("{s}");
                Ok(Ended::Done)
            }
            Ok(Some(s)) => {
                println!("{}", s.to_json());
                Ok(Ended::Done)
            }
            Ok(None) => Err(format!("{}: no such state file", state.display())),
            Err(e) => Err(e.to_string()),
        },
        Command::Read { brokers, topic, timeout } => {
            let fleet = fleet::read_topic(&brokers, &topic, timeout, |w| eprintln!("ringtrace-ship: {w}"))
                .map_err(|e| e.to_string())?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for e in fleet.timeline() {
                let hex: String = e.payload.iter().map(|b| format!("{b:02x}")).collect();
                writeln!(out, "{} {} {} {} {hex}", e.time_ns, e.host, e.source, e.seq).map_err(|e| e.to_string())?;
            }
            out.flush().map_err(|e| e.to_string())?;
            let s = fleet.stats();
            eprintln!(
                "ringtrace-ship: batches={} records={} duplicates={} missing={} damaged={} too_large={} transient={} \
                 expired={}",
                s.batches, s.records, s.duplicates, s.missing, s.damaged, s.too_large, s.transient, s.expired
            );
            Ok(Ended::Done)
        }
    }
}

fn main() -> ExitCode {
    command::log_to_stderr();
    match run(Cli::parse()) {
        Ok(Ended::Done) => ExitCode::SUCCESS,
        Ok(Ended::Signalled(signal)) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(1)),
        Err(e) => {
            eprintln!("ringtrace-ship: {e}");
            ExitCode::FAILURE
        }
    }
}
