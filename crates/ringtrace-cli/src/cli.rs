//! The command line: subcommands, their arguments and help text (clap). Nothing here
//! runs a command; `main` hands each to its module in `commands`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use clap_complete::Shell;
// `--header NAME=VALUE`: read as `ship --header` reads it.
use ringtrace_ship::command::parse_header;

use crate::commands::create::{ModeArg, ProducersArg};
use crate::output::ReportFormat;
use crate::pipeline::output::Format;
use crate::units::{parse_capacity, parse_duration, parse_duration_or_zero};

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
        /// A ring, channel, snapshot or trace file (for example /dev/shm/app.ring), a recorder directory,
        /// bpf-pin:PATH or bpf-id:N, or kafka://BROKERS/TOPIC.
        source: PathBuf,
        #[command(flatten)]
        window: TimeWindow,
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
    /// Ring, channel, snapshot and trace files are only read: tail never consumes them,
    /// so producers of a full discard ring stay refused (use `consume` to drain one).
    /// Discard mode: the records not consumed yet. Overwrite mode: the records held.
    /// Channel files: the newest across all slots, merged by timestamp, each line with
    /// its slot and timestamp (channels without timestamps: slot by slot); with
    /// --follow, each poll's new records sorted by timestamp (exact within a poll).
    ///
    /// BPF ring buffer maps (bpf-pin:PATH, bpf-id:N) are consumed: tail prints the
    /// next N records in order, waiting for them (with --follow, every record from then
    /// on), handing their space back to the kernel as the map's reader would. A map
    /// has one reader: a second `tail` or `consume` of the same map is refused.
    Tail {
        /// A ring, channel, snapshot or trace file, a recorder directory, bpf-pin:PATH or bpf-id:N, or
        /// kafka://BROKERS/TOPIC.
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
        /// and ts; the payload is shown without its timestamp. kafka:// topics: text
        /// lines are "TIME HOST SOURCE SEQ PAYLOAD" (TIME in RFC 3339, UTC), json objects
        /// have time, ts_ns (wall-clock ns since the epoch, a string), host, source, seq,
        /// len and data or hex.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// The same as --format json.
        #[arg(long, hide = true)]
        json: bool,
        /// BPF maps: stop waiting for records after this long without one (250ms, 2s,
        /// 5m); with --follow on any source, stop after this long without a new record.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        timeout: Option<Duration>,
        /// kafka:// sources: only records from this time on (see decode --since); with
        /// --follow, start there rather than at the topic's end.
        #[arg(long, value_name = "TIME", value_parser = crate::fleet::parse_time)]
        since: Option<u64>,
        /// kafka:// sources with --follow: hold each record this long after it arrived,
        /// so that the records of every host go out in time order (agents send a round
        /// at a time); 0: print them as their batches arrive. Records that arrive later
        /// than this, older than one printed, are printed then and counted late.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration_or_zero, default_value = "1s")]
        reorder: Duration,
    },
    /// Consume records: print each and hand its space back, so that producers never
    /// stop for want of room.
    ///
    /// The source's consumer: a ring file (the ring's one consumer role, taken as the
    /// library's consumer takes it; refused while another consumer is attached,
    /// recovered from a consumer that died) or a kernel BPF ring buffer map (a map has
    /// one reader: a second is refused). Each record is printed before its space is
    /// handed back: an interrupted consume (Ctrl-C) loses none. Overwrite rings: what
    /// the producers overwrote before it was read is counted on stderr.
    ///
    /// Stops when every producer of the ring has gone and all is read (as a pipe's
    /// reader sees end of file); with --follow, goes on waiting for new producers.
    /// -n stops after N records, --timeout after a wait that long without a record.
    Consume {
        /// A ring file, or bpf-pin:PATH or bpf-id:N.
        source: PathBuf,
        /// Stop after this many records.
        #[arg(short = 'n', long, value_name = "N")]
        count: Option<u64>,
        /// Keep consuming when every producer has gone (until Ctrl-C, -n or --timeout).
        #[arg(short, long)]
        follow: bool,
        /// Stop after this long without a record (250ms, 2s, 5m).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        timeout: Option<Duration>,
        /// Record format (as for tail; JSON objects have len and data or hex).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// The same as --format json.
        #[arg(long, hide = true)]
        json: bool,
        /// Attach to a ring file of another user, or one its group may write (refused
        /// otherwise: its owner could kill this command with SIGBUS by truncating it).
        #[arg(long)]
        any_owner: bool,
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
        /// The same as --format json.
        #[arg(long, hide = true)]
        json: bool,
        /// Write to this file instead of stdout: written whole under a temporary name,
        /// then renamed over FILE; never the source itself.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Print a ringtrace-tracing trace, one event a line, merged across threads by time.
    ///
    /// SOURCE: a trace file (a flight recorder's dump, a stream) or a recorder directory
    /// (or its rings.chan, read with the catalog.rtt beside it), read live without
    /// stopping its process, or after the process died. A channel file of raw records
    /// prints each record as an event on its slot's track. Text lines
    /// are in the spirit of tracing-subscriber's fmt: time (UTC), level, thread, span
    /// context, target, message, fields. Lost events print as lines of their own; what
    /// was lost, overwritten or unreadable is summed up on stderr.
    Decode {
        /// A trace file, a recorder directory (or its rings.chan), a channel file, or
        /// kafka://BROKERS/TOPIC.
        source: PathBuf,
        /// text: one event a line; json: one JSON object a line (time, ts_ns, level,
        /// thread, tid, target, name, spans, fields). kafka:// sources: one record a line,
        /// "TIME HOST SOURCE SEQ PAYLOAD" or an object of time, ts_ns, host, source, seq,
        /// len and data (or hex).
        #[arg(long, value_enum, default_value_t = EventFormat::Text)]
        format: EventFormat,
        /// The same as --format json.
        #[arg(long, hide = true)]
        json: bool,
        #[command(flatten)]
        window: TimeWindow,
    },
    /// Write a ringtrace-tracing trace in a format other tools open.
    ///
    /// chrome: Chrome's Trace Event Format (JSON), for chrome://tracing and
    /// ui.perfetto.dev: a track per thread, spans as slices (B/E when entered and
    /// exited), events as instants with every field in args, lost events as instants
    /// named "ringtrace: events lost"; times exact to the nanosecond. perfetto: the
    /// same as Perfetto's protobuf TrackEvent packets (a track per thread under the
    /// process, names interned per thread), for ui.perfetto.dev and trace_processor.
    /// ctf: CTF 1.8 for babeltrace2 and Trace Compass. A recorder directory's rings.chan
    /// is read as the directory, with the catalog.rtt beside it. A channel file of raw
    /// records exports too: each record an event on its slot's track, with its length
    /// and its first 16 bytes in hex.
    ///
    /// kafka://BROKERS/TOPIC: the records a fleet's agents shipped, merged by time, a
    /// process per host and a thread per source, each record an instant with its
    /// sequence number, length and first bytes.
    ///
    /// otlp-json: OpenTelemetry's model (spans, span events, log records) as OTLP/JSON
    /// lines. --to otlp://HOST:PORT (gRPC) or otlp+http://HOST:PORT (HTTP/protobuf)
    /// delivers the same to an OpenTelemetry Collector, Jaeger or a vendor, in bounded
    /// batches, retried while the endpoint is unavailable; it exits 1 unless every span
    /// and log record was acknowledged, and says what was not.
    Export {
        /// A trace file, a recorder directory (or its rings.chan), a channel file, or
        /// kafka://BROKERS/TOPIC.
        source: PathBuf,
        /// The output format (not with --to).
        #[arg(long, value_enum, required_unless_present = "to", conflicts_with = "to")]
        format: Option<crate::output::ExportFormat>,
        /// Write to this file (CTF: this directory) instead of stdout: written whole
        /// under a temporary name, then renamed into place; never the source itself.
        #[arg(short, long, value_name = "FILE", conflicts_with = "to")]
        output: Option<PathBuf>,
        #[command(flatten)]
        otlp: OtlpArgs,
        #[command(flatten)]
        window: TimeWindow,
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
        /// Replace PATH if it is a regular file (never a device, FIFO, socket, link or
        /// directory).
        #[arg(long)]
        force: bool,
    },
    /// Append records to a ring file or a BPF user ring buffer map: one per input line
    /// (or per input with --whole).
    ///
    /// Attaches as one more producer and writes one record per line of each INPUT
    /// (stdin if none, or "-"), the newline not included; says on stderr how many
    /// records were written and refused, however it ends (the inputs' end, an input
    /// that cannot be read, SIGINT, SIGTERM or SIGHUP: exit status 128 + the signal). A
    /// record the ring refuses (discard mode: the ring is full; overwrite mode: paused,
    /// or making room would overwrite a record still being written) is an error, exit
    /// status 1, unless --drop is given. With --wait, a full discard ring is waited on
    /// until its consumer makes room (a `consume` running on it; one that went away may
    /// be followed by another).
    ///
    /// bpf-pin:PATH or bpf-id:N: a BPF user ring buffer map (BPF_MAP_TYPE_USER_RINGBUF),
    /// written as its one producer (a second is refused), one sample per record, for
    /// the BPF program that drains it with bpf_user_ringbuf_drain. A full map refuses
    /// a record, or with --wait is waited on until the program drains it; an empty
    /// record is refused (a sample has at least 1 byte). A ring buffer map
    /// (BPF_MAP_TYPE_RINGBUF) is refused: the kernel writes those.
    Write {
        /// The ring file (made by `ringtrace create` or a program using the library),
        /// or a BPF user ring buffer map: bpf-pin:PATH or bpf-id:N.
        path: PathBuf,
        /// Files to read (stdin if none; "-" is stdin).
        #[arg(value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// Write each input whole as one record, instead of one record per line.
        #[arg(long)]
        whole: bool,
        /// Records the ring (or map) refuses are counted and reported but are not an error.
        #[arg(long)]
        drop: bool,
        /// Wait for room instead of refusing a record: for ever, or at most TIMEOUT
        /// for each record (--wait=2s). Once a record has waited all of TIMEOUT in
        /// vain, the records after it do not wait: each is written if it fits and
        /// refused at once if not, until one fits again; then they wait again.
        /// Overwrite rings: wait out a pause or a record being written. A record still
        /// refused (the time ran out; the consumer went away while it waited) counts as
        /// refused.
        #[arg(long, value_name = "TIMEOUT", num_args = 0..=1, require_equals = true, default_missing_value = "forever", value_parser = parse_wait)]
        wait: Option<Wait>,
        /// Attach to a ring file of another user, or one its group may write (refused
        /// otherwise: its owner could kill this command with SIGBUS by truncating it).
        #[arg(long)]
        any_owner: bool,
    },
    /// The flight recorder demo: producer processes, an overwrite ring, a live display.
    ///
    /// Producer processes write events into an overwrite ring file while a live
    /// display shows their rates; then the newest events, newest first (producer,
    /// sequence number, age), and what each producer wrote and lost.
    Demo {
        /// The ring file to create and keep (default: a new file in /dev/shm, removed
        /// at the end, or when the demo is interrupted).
        #[arg(value_name = "PATH")]
        path: Option<PathBuf>,
        /// The same as PATH.
        #[arg(long, value_name = "PATH", hide = true, conflicts_with = "path")]
        file: Option<PathBuf>,
        /// How long the producers write, in seconds: 1 to 86400.
        #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=86_400))]
        seconds: u64,
        /// Producer processes: 1 to 32.
        #[arg(long, alias = "producers", default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=32))]
        processes: u32,
        /// Ring capacity: a power of two, as bytes or with k, M or G (64k, 1MiB).
        #[arg(long, default_value = "1MiB", value_name = "SIZE", value_parser = parse_capacity)]
        capacity: u64,
    },
    /// Ship a host's rings into Apache Kafka, or recorders to an OpenTelemetry endpoint.
    ///
    /// --to kafka://BROKERS/TOPIC: the agent (the same as `ringtrace-ship ship`): one
    /// process per host drains ring files, flight recorders, channel files (a source
    /// per slot, PATH#SLOT), ringtrace-tracing recorder directories (a source per
    /// ring, each record decoded on the host and shipped as one JSON object) and BPF
    /// ring buffer maps into a topic. A ring gets a record's space back only after
    /// Kafka acknowledged it; a restarted agent sends again only what was not, under
    /// the same numbers, which readers (`decode kafka://...`) drop as copies. The first
    /// SIGINT or SIGTERM ends the round in flight and stops; a second kills it (safe
    /// too). Needs the command built with its kafka feature.
    ///
    /// --to otlp://HOST:PORT (or otlp+http://): follows ringtrace-tracing recorder
    /// directories and stream trace files, delivering each span once it closed and each
    /// event outside a span as a log record (as export --follow does).
    Ship {
        #[command(flatten)]
        args: ringtrace_ship::command::ShipArgs,
    },
    /// Print a shell completion script: `ringtrace completions bash > ringtrace.bash`.
    Completions {
        /// The shell.
        shell: Shell,
    },
    /// Print a man page (roff): `ringtrace man | man -l -`, `ringtrace man tail`.
    ///
    /// With --dir, writes every page (ringtrace.1 and ringtrace-SUBCOMMAND.1 for each
    /// subcommand) into DIR instead.
    Man {
        /// The subcommand whose page to print (default: the ringtrace page).
        #[arg(value_name = "SUBCOMMAND", value_parser = clap::builder::PossibleValuesParser::new(crate::commands::docs::MAN_PAGES))]
        page: Option<String>,
        /// Write every page into this directory.
        #[arg(long, value_name = "DIR", conflicts_with = "page")]
        dir: Option<PathBuf>,
    },
}

/// How `write --wait` waits for room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Until there is room or the consumer is gone.
    Forever,
    /// At most this long per record.
    For(Duration),
}

fn parse_wait(s: &str) -> Result<Wait, String> {
    if s == "forever" {
        Ok(Wait::Forever)
    } else {
        parse_duration(s).map(Wait::For).map_err(|e| e.to_string())
    }
}

/// How `decode` prints events (a trace's events have no hex form).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EventFormat {
    /// One event a line, for people.
    #[default]
    Text,
    /// One JSON object a line.
    Json,
}

/// `--since` and `--until`: the records of a kafka:// source by time.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct TimeWindow {
    /// kafka:// sources: only records from this time on: RFC 3339 in UTC
    /// (2026-11-27T10:00:00Z, a fraction of a second allowed), a duration before now
    /// (90s, 15m, 2h), or nanoseconds since the Unix epoch. Read from the first Kafka
    /// message that can hold such a record.
    #[arg(long, value_name = "TIME", value_parser = crate::fleet::parse_time)]
    pub since: Option<u64>,
    /// kafka:// sources: only records before this time (written as for --since). Each
    /// partition is read up to its first Kafka message sent at or after this time plus
    /// --until-slack, not to its end.
    #[arg(long, value_name = "TIME", value_parser = crate::fleet::parse_time)]
    pub until: Option<u64>,
    /// kafka:// sources with --until: how long after --until a record's message may
    /// have been sent and still be read. An agent sends a record after its time, but
    /// one that could not reach Kafka sends the records it held when it can: records
    /// before --until sent more than this after it (held through a longer outage) are
    /// not read, and the messages left unread are counted on stderr. end: read every
    /// partition to its end (as without --until).
    #[arg(long, value_name = "DURATION|end", value_parser = crate::fleet::parse_until_slack, default_value = "10m")]
    pub until_slack: crate::fleet::UntilSlack,
    /// kafka:// sources: the reorder bound. The topic is read back as a stream, each
    /// partition in its order, merged by time in bounded memory: a record goes out once
    /// every partition has given one this much newer. Records more out of time order
    /// than this (a host's clock stepped, an agent's round delayed) go out later,
    /// counted late.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_or_zero, default_value = "1s")]
    pub reorder: Duration,
}

impl TimeWindow {
    /// The window selected.
    pub fn get(self) -> crate::fleet::Window {
        crate::fleet::Window {
            since: self.since,
            until: self.until,
            until_slack: self.until_slack.0,
            reorder: self.reorder,
        }
    }
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

/// `export`'s OpenTelemetry options.
#[derive(Args, Debug, Clone)]
pub struct OtlpArgs {
    /// Deliver to this OTLP endpoint instead of writing a file: otlp://HOST:PORT (gRPC;
    /// without a port, 4317) or otlp+http://HOST:PORT/PREFIX (HTTP with protobuf
    /// bodies to PREFIX/v1/traces and PREFIX/v1/logs; without a port, 4318; the prefix
    /// optional). Plain text: no TLS.
    #[cfg(feature = "otlp")]
    #[arg(long, value_name = "ENDPOINT")]
    pub to: Option<crate::pipeline::output::otlp::Endpoint>,
    /// Deliver to this OTLP endpoint (this command is built without its otlp feature).
    #[cfg(not(feature = "otlp"))]
    #[arg(long, value_name = "ENDPOINT", hide = true)]
    pub to: Option<String>,
    /// OpenTelemetry's service.name of the spans and log records (otlp-json, --to):
    /// by default the traced program's name.
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// OpenTelemetry's host.name (otlp-json, --to): left out by default.
    #[arg(long, value_name = "NAME")]
    pub host_name: Option<String>,
    /// What --to sends: spans (with their events), log records (events outside any
    /// span), or both. Jaeger takes spans only. [default: all]
    #[cfg(feature = "otlp")]
    #[arg(long, value_enum, requires = "to")]
    pub signals: Option<crate::pipeline::output::otlp::Signals>,
    /// The longest wait for the endpoint's answer to one batch. [default: 10s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "to")]
    pub timeout: Option<Duration>,
    /// How long a batch the endpoint cannot take now is retried before the delivery
    /// gives up. [default: 60s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "to")]
    pub retry_for: Option<Duration>,
    /// With --to: follow a live recorder directory (or a stream's trace file),
    /// delivering each span once it closed and each log record once read, every
    /// --interval, until SIGINT or SIGTERM; a last round then sends the spans still
    /// open, marked ringtrace.end_unknown.
    #[arg(long, requires = "to")]
    pub follow: bool,
    /// The pause between --follow's rounds. [default: 1s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// A header sent with every request (gRPC metadata), NAME=VALUE: an API key, a
    /// tenant. Repeatable.
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_header, requires = "to")]
    pub header: Vec<(String, String)>,
}
