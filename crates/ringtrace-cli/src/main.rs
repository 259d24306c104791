//! The `ringtrace` command.
//!
//! Exit status: 0 on success (and when the reader of stdout goes away, `| head`); 1 with
//! one line `ringtrace: error: <message>` on stderr for any error; 2 for usage errors.

mod channel;
mod demo;
mod format;
mod kernel;
mod snapfile;
mod snapshot;
mod stat;
mod tail;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use format::{Failure, Format};

/// ringtrace: ring buffers for trace and event data.
#[derive(Debug, Parser)]
#[command(name = "ringtrace", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show a ring file's header, positions, counters and attached processes; or a
    /// channel file's header and, per producer slot, its producer and counters; or a
    /// snapshot file's header (its checksums checked); or a kernel BPF ring buffer map's
    /// size, mode, positions and records held.
    Stat {
        /// A ring file, a channel file or a snapshot file (for example /dev/shm/app.ring),
        /// or a BPF ring buffer map: bpf-pin:PATH (pinned in a bpffs) or bpf-id:N (a map id).
        source: PathBuf,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the newest records of a ring file or a channel file, oldest first, one per
    /// line.
    ///
    /// Discard mode: the records not consumed yet. Overwrite mode: the records held.
    /// Channel files: the newest across all slots, merged by timestamp, each line with
    /// its slot and timestamp (channels without timestamps: slot by slot); with
    /// --follow, each poll's new records sorted by timestamp (exact within a poll).
    ///
    /// BPF ring buffer maps (bpf-pin:PATH, bpf-id:N): consumes and prints the next N
    /// records in order, waiting for them (with --follow, every record from then on),
    /// handing their space back to the kernel as the map's reader would.
    Tail {
        /// A ring file, a channel file, or a BPF ring buffer map (bpf-pin:PATH, bpf-id:N).
        source: PathBuf,
        /// How many of the newest records to print.
        #[arg(short = 'n', long, default_value_t = 10, value_name = "N")]
        count: usize,
        /// Keep reading and print records as they are committed (every 50 ms); records
        /// overwritten or consumed before they could be printed are counted on stderr.
        #[arg(short, long)]
        follow: bool,
        /// text: the payload with escapes; hex: the payload in hex; json: one object per
        /// line with pos, pid, len and data (UTF-8) or hex. Channel files: text and hex
        /// lines start with "SLOT TS " (TS "-" without timestamps), json objects with slot
        /// and ts; the payload is shown without its timestamp.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Print every record a ring file, a channel file or a snapshot file holds, oldest
    /// first (a snapshot file's checksums are checked first).
    ///
    /// Channel files: every slot's records merged by timestamp (ties in slot order);
    /// channels without timestamps are listed slot by slot. BPF ring buffer maps: the
    /// records not consumed yet (overwrite maps: those not overwritten), without
    /// consuming them.
    Snapshot {
        /// A ring file, a channel file, a snapshot file, or a BPF ring buffer map
        /// (bpf-pin:PATH, bpf-id:N).
        source: PathBuf,
        /// Newest first.
        #[arg(short, long)]
        reverse: bool,
        /// Record format (as for tail).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Write to this file instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// The flight recorder demo: producer processes write events into an overwrite
    /// ring file while a live display shows rates; then the newest events, newest
    /// first, and the counts.
    Demo {
        /// The ring file to create (default: a new file in /dev/shm, removed at the end).
        #[arg(long, value_name = "PATH")]
        file: Option<PathBuf>,
        /// How long the producers write.
        #[arg(long, default_value_t = 3, value_name = "N")]
        seconds: u64,
        /// Producer processes.
        #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=32))]
        producers: u32,
        /// Ring capacity in bytes (a power of two).
        #[arg(long, default_value_t = 1 << 20, value_name = "BYTES")]
        capacity: u64,
    },
    /// A producer process of `demo` (internal).
    #[command(name = "__demo-producer", hide = true)]
    DemoProducer { file: PathBuf, id: u32, millis: u64 },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Stat { source, json } => stat::run(&source, json).map_err(|e| e.about(&source)),
        Command::Tail { source, count, follow, format } => {
            tail::run(&source, count, follow, format).map_err(|e| e.about(&source))
        }
        Command::Snapshot { source, reverse, format, output } => {
            snapshot::run(&source, reverse, format, output.as_deref()).map_err(|e| e.about(&source))
        }
        Command::Demo { file, seconds, producers, capacity } => demo::run(file, seconds, producers, capacity),
        Command::DemoProducer { file, id, millis } => demo::producer(&file, id, millis),
    };
    match result {
        Ok(()) | Err(Failure::BrokenPipe) => ExitCode::SUCCESS,
        Err(Failure::Message(e)) => {
            // One line, whatever the message holds.
            let e = e.replace(['\n', '\r'], " ");
            format::eprint_line(format_args!("ringtrace: error: {e}"));
            ExitCode::FAILURE
        }
    }
}
