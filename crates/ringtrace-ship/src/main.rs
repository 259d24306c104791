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

use clap::{Parser, Subcommand};
use ringtrace_ship::command::ShipArgs;
use ringtrace_ship::fleet;

#[derive(Parser)]
#[command(name = "ringtrace-ship", version, about = "Ships ringtrace rings into Apache Kafka and reads a fleet back")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Drains a host's rings into a topic, exactly once across restarts: ring files
    /// (discard rings and flight recorders), channel files (a source per slot,
    /// PATH#SLOT), ringtrace-tracing recorder directories (a source per ring, its
    /// records decoded), BPF ring buffer maps (bpf-pin:PATH, bpf-id:N).
    Ship(ShipArgs),
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
        // Stopping by any signal is safe (see the crate's docs): no need to ask.
        Command::Ship(args) => args.run(|| false).map(drop),
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
