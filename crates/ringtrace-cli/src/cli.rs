//! The command line: subcommands, their arguments and help text (clap). Nothing here
//! runs a command; `main` hands each to its module in `commands`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use clap_complete::Shell;

use crate::commands::create::{ModeArg, ProducersArg};
use crate::output::ReportFormat;
use crate::records::Format;
use crate::units::parse_capacity;

/// Ring buffers for trace and event data: inspect, read, create and write them.
///
/// SOURCE is a ring file, a channel file or a snapshot file (told apart by their first
/// bytes), or a kernel BPF ring buffer map: bpf-pin:PATH (pinned in a bpffs) or
/// bpf-id:N (a map id).
#[derive(Debug, Parser)]
#[command(name = "ringtrace", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show what a source is and holds.
    ///
    /// A ring file's header, positions, counters and attached processes; a channel file's header and, per producer slot, its
    /// producer and counters; a snapshot file's header (its checksums checked); a
    /// kernel BPF ring buffer map's size, mode, positions and records held.
    Stat {
        /// A ring, channel, snapshot or trace file (for example /dev/shm/app.ring), a recorder directory, or
        /// bpf-pin:PATH or bpf-id:N.
        source: PathBuf,
        /// text: aligned lines, sizes in KiB/MiB; json: one object, exact numbers, the
        /// library's counter names.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        /// The same as --format json.
        #[arg(long, hide = true)]
        json: bool,
    },
    /// Print the newest records, oldest first, one per line.
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
        /// A ring, channel, snapshot or trace file, a recorder directory, or bpf-pin:PATH or bpf-id:N.
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
    /// Print every record a source holds, oldest first, without consuming any.
    ///
    /// Channel files: every slot's records merged by timestamp (ties in slot order);
    /// channels without timestamps are listed slot by slot. Snapshot files: their
    /// checksums are checked first. BPF ring buffer maps: the records not consumed yet
    /// (overwrite maps: those not overwritten).
    Snapshot {
        /// A ring, channel, snapshot or trace file, a recorder directory, or bpf-pin:PATH or bpf-id:N.
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
    /// Print a ringtrace-tracing trace, one event a line, merged across threads by time.
    ///
    /// SOURCE: a trace file (a flight recorder's dump, a stream) or a recorder directory,
    /// read live without stopping its process, or after the process died. Text lines
    /// are in the spirit of tracing-subscriber's fmt: time (UTC), level, thread, span
    /// context, target, message, fields. Lost events print as lines of their own; what
    /// was lost, overwritten or unreadable is summed up on stderr.
    Decode {
        /// A trace file or a recorder directory.
        source: PathBuf,
        /// text: one event a line; json: one JSON object a line (time, ts_ns, level,
        /// thread, tid, target, name, spans, fields).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// The same as --format json.
        #[arg(long)]
        json: bool,
    },
    /// Write a ringtrace-tracing trace in a format other tools open.
    ///
    /// chrome: Chrome's Trace Event Format (JSON), for chrome://tracing and
    /// ui.perfetto.dev: a track per thread, spans as slices (B/E when entered and
    /// exited), events as instants with every field in args, lost events as instants
    /// named "ringtrace: events lost"; times exact to the nanosecond. perfetto: the
    /// same as Perfetto's protobuf TrackEvent packets (a track per thread under the
    /// process, names interned per thread), for ui.perfetto.dev and trace_processor.
    /// ctf: CTF 1.8 for babeltrace2 and Trace Compass. A channel file of raw records
    /// exports too: each record an event on its slot's track, with its length and its
    /// first 16 bytes in hex.
    Export {
        /// A trace file, a recorder directory, or a channel file.
        source: PathBuf,
        /// The output format.
        #[arg(long, value_enum)]
        format: crate::commands::export::ExportFormat,
        /// Write to this file instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Create a ring file for producers and a consumer to attach to.
    Create {
        /// The file to create (on tmpfs, such as /dev/shm, for speed); mode 0600.
        path: PathBuf,
        /// Bytes of the data area: a power of two from 4 KiB to 4 GiB, as bytes (65536)
        /// or with k, M or G (64k, 1MiB; powers of 1024).
        #[arg(long, value_name = "SIZE", value_parser = parse_capacity)]
        capacity: u64,
        /// What a full ring does with a new record.
        #[arg(long, value_enum, default_value_t = ModeArg::Discard)]
        mode: ModeArg,
        /// Multi-producer (mpsc) or single-producer (spsc).
        #[arg(long, value_enum, default_value_t = ProducersArg::Mpsc)]
        producers: ProducersArg,
        /// Replace the file if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Append records to a ring file: one per input line (or per input with --whole).
    ///
    /// Attaches as one more producer and writes one record per line of each INPUT
    /// (stdin if none, or "-"), the newline not included. Prints how many records were written and refused. A record the ring refuses
    /// (discard mode: the ring is full; overwrite mode: paused, or making room would
    /// overwrite a record still being written) is an error, exit status 1, unless
    /// --drop is given.
    Write {
        /// The ring file (made by `ringtrace create` or a program using the library).
        path: PathBuf,
        /// Files to read (stdin if none; "-" is stdin).
        #[arg(value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// Write each input whole as one record, instead of one record per line.
        #[arg(long)]
        whole: bool,
        /// Records the ring refuses are counted and reported but are not an error.
        #[arg(long)]
        drop: bool,
    },
    /// The flight recorder demo: producer processes, an overwrite ring, a live display.
    ///
    /// Producer processes write events into an overwrite ring file while a live
    /// display shows their rates; then the newest events, newest first (producer,
    /// sequence number, age), and what each producer wrote and lost.
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
        /// Ring capacity: a power of two, as bytes or with k, M or G (64k, 1MiB).
        #[arg(long, default_value = "1MiB", value_name = "SIZE", value_parser = parse_capacity)]
        capacity: u64,
    },
    /// Print a shell completion script: `ringtrace completions bash > ringtrace.bash`.
    Completions {
        /// The shell.
        shell: Shell,
    },
    /// Print the man page (roff): `ringtrace man | man -l -`.
    Man,
}

/// The arguments of a `demo` producer process (internal): `ringtrace __demo-producer
/// FILE ID MILLIS`. Parsed apart from [`Cli`], so that help, completions and the man
/// page do not show it.
#[derive(Debug, Parser)]
#[command(name = "ringtrace __demo-producer")]
pub struct DemoProducer {
    /// The demo's ring file.
    pub file: PathBuf,
    /// The producer's number.
    pub id: u32,
    /// How long it writes.
    pub millis: u64,
}
