//! The `ringtrace` command.
//!
//! Exit status: 0 on success (and when the reader of stdout goes away, `| head`); 1 with
//! one line `ringtrace: error: <message>` on stderr for any error; 2 for usage errors.
//!
//! The reading commands (stat, tail, consume, snapshot, decode, export, write's
//! attach) are one pipeline:
//!
//! ```text
//! SOURCE --open--> RecordSource --read/follow/consume--> Record --> output
//!                  ring, channel, snapshot,               Raw       text, hex, json (lines)
//!                  bpf, traced, kafka        --timeline-> Timeline  chrome, perfetto, ctf
//! ```
//!
//! * A source ([`pipeline::source`], one module per kind, one registry in
//!   `pipeline::source::open`) is what a SOURCE argument names, opened. It yields
//!   [`pipeline::record::Record`]s with what it knows of each: a raw record's payload,
//!   position, pid, and a channel's slot and timestamp; a trace's decoded event; a
//!   fleet's time, host, source and sequence number. It holds them ([`Held`], read
//!   without consuming), follows them (`tail -f`), consumes them into a sink (ring
//!   files, BPF maps: each record's space handed back once the output took it), reads
//!   them whole for the exporters ([`pipeline::record::Timeline`]), or reports on
//!   itself (`stat`, through [`report`]). What a kind cannot do it answers `None` (or
//!   an error saying why), and the command says what it reads.
//! * An output ([`pipeline::output`], one module per output, chosen in one place:
//!   `Format::lines`) writes records one a line; `export` writes a timeline.
//! * [`pipeline::run`] joins them: all the records held (or newest first, or the newest
//!   N), a follow, a consume.
//!
//! A new source is one module under `pipeline/source/` and a line in its `open`; a new
//! line output one module under `pipeline/output/` and a line in `Format::lines`.
//!
//! [`Held`]: pipeline::source::Held
//!
//! Modules. Imports run one way, down this list; no module imports one above it or a
//! sibling subcommand:
//!
//! * `cli`: the command line (clap): subcommands, arguments, help text.
//! * `commands::*`: one module per subcommand.
//! * `pipeline`: `run` above `source` (one module per kind of source) above `output`
//!   (one module per output) above `record`.
//! * `report`: what `stat` prints of each kind of source.
//! * `fleet`: `kafka://BROKERS/TOPIC`, a fleet's records in Kafka (the `kafka` feature).
//! * `bpf`: a BPF map's one reader (its lock).
//! * `output`: stdout, stderr, output files, JSON reports.
//! * `destination`: output files written beside their name and renamed into place,
//!   never over a source.
//! * `cleanup`: temporary files removed and children stopped on SIGINT/SIGTERM.
//! * `escape`, `units`, `liveness`: bytes, sizes, times and watermarks for people;
//!   whether a pid lives.
//! * `failure`: the error every command returns.

mod bpf;
mod cleanup;
mod cli;
mod commands;
mod destination;
mod escape;
mod failure;
mod fleet;
mod liveness;
mod output;
mod pipeline;
mod report;
mod units;

use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use cli::{Cli, Command, DemoProducer};
use commands::{consume, create, decode, demo, docs, export, snapshot, stat, tail, write};
use failure::Failure;
use output::ReportFormat;
use pipeline::output::Format;
use pipeline::source::{self, RecordSource, Spec};

fn main() -> ExitCode {
    cleanup::install();
    let result = if std::env::args_os().nth(1).is_some_and(|a| a == demo::PRODUCER_ARG) {
        let p = DemoProducer::parse_from(std::env::args_os().skip(1));
        demo::producer(&p.file, p.id, p.millis)
    } else {
        run(parse().command)
    };
    match result {
        Ok(()) | Err(Failure::BrokenPipe) => ExitCode::SUCCESS,
        Err(Failure::Interrupted(signal)) => ExitCode::from(128 + signal),
        Err(Failure::Message(e)) => {
            // One line, whatever the message holds.
            let e = e.replace(['\n', '\r'], " ");
            output::eprint_line(format_args!("ringtrace: error: {e}"));
            ExitCode::FAILURE
        }
    }
}

/// The command line; a usage error ends the command (exit status 2).
fn parse() -> Cli {
    Cli::try_parse().unwrap_or_else(|e| {
        #[cfg(not(feature = "kafka"))]
        let e = with_kafka_tip(e);
        e.exit()
    })
}

/// A usage error of `ship` in a command built without its kafka feature: an option it
/// does not know is likely Kafka's, and the error says how to get them.
#[cfg(not(feature = "kafka"))]
fn with_kafka_tip(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let ship = std::env::args_os().nth(1).is_some_and(|a| a == "ship");
    if ship && e.kind() == ErrorKind::UnknownArgument {
        let tip = format!("ship's other options are Kafka's. {}", fleet::KAFKA_FEATURE);
        e.insert(ContextKind::Suggested, ContextValue::StyledStrs(vec![tip.into()]));
    }
    e
}

/// Runs a command; every error of a command on a source names it (a `kafka://`
/// topic's errors name it themselves).
fn run(command: Command) -> Result<(), Failure> {
    type Run<'a> = &'a dyn Fn(&mut dyn RecordSource) -> Result<(), Failure>;
    let on = |path: &Path, f: Run<'_>| f(&mut *source::open(path)?).map_err(|e| e.about(path));
    let on_any = |path: &Path, window: fleet::Window, f: Run<'_>| match kafka(path, window)? {
        Some(topic) => f(&mut *source::open_topic(topic, window)?),
        None => on(path, f),
    };
    // `decode` and `export`: a channel file read as a trace (a recorder's rings file as
    // its directory).
    let on_trace = |path: &Path, window: fleet::Window, f: Run<'_>| match kafka(path, window)? {
        Some(topic) => f(&mut *source::open_topic(topic, window)?),
        None => f(&mut *source::open_trace(path)?).map_err(|e| e.about(path)),
    };
    match command {
        Command::Stat { source, format, json, window } => {
            let format = if json { ReportFormat::Json } else { format };
            if kafka(&source, window.get())?.is_none()
                && source.is_file()
                && source::first_bytes(&source).is_ok_and(|(head, _)| head == fleet::STATE_MAGIC)
            {
                return fleet::stat_agent_state(&source, format).map_err(|e| e.about(&source));
            }
            on_any(&source, window.get(), &|s| stat::run(&source, s, format))
        }
        Command::Tail { source, count, follow, format, json, timeout, since, reorder } => {
            let format = if json { Format::Json } else { format };
            let window = fleet::Window { since, until: None, reorder };
            on_any(&source, window, &|s| tail::run(&source, s, count, follow, format, timeout))
        }
        Command::Consume { source, count, follow, timeout, format, json, any_owner } => {
            let format = if json { Format::Json } else { format };
            let opts = source::Consume { count, follow, timeout, owners: owners(any_owner) };
            on(&source, &|s| consume::run(&source, s, &opts, format))
        }
        Command::Snapshot { source, reverse, format, json, output } => {
            let format = if json { Format::Json } else { format };
            refuse_source(output.as_deref(), &source)?;
            on(&source, &|s| snapshot::run(s, reverse, format, output.as_deref()))
        }
        Command::Decode { source, format, json, window } => {
            let format = if json || format == cli::EventFormat::Json { Format::Json } else { Format::Text };
            on_trace(&source, window.get(), &|s| decode::run(s, format))
        }
        Command::Export { source, format, output, otlp, window } => {
            #[cfg(feature = "otlp")]
            if otlp.follow {
                if window.since.is_some() || window.until.is_some() {
                    return Err(Failure::msg("--since and --until select a kafka:// topic's records, not --follow's"));
                }
                return export::follow(vec![source], None, &otlp);
            }
            refuse_source(output.as_deref(), &source)?;
            if let Some(dir) = source::recorder_of(&source) {
                refuse_source(output.as_deref(), &dir)?;
            }
            on_trace(&source, window.get(), &|s| export::run(s, format, output.as_deref(), &otlp))
        }
        Command::Create { path, capacity, mode, producers, force } => {
            create::run(&path, capacity, mode, producers, force).map_err(|e| e.about(&path))
        }
        Command::Write { path, inputs, whole, drop, wait, any_owner } => {
            let opts = write::Options { inputs, whole, drop, wait, owners: owners(any_owner) };
            on(&path, &|s| write::run(&path, s, &opts))
        }
        Command::Demo { path, file, seconds, processes, capacity } => {
            demo::run(path.or(file), seconds, processes, capacity)
        }
        #[cfg(feature = "kafka")]
        Command::Ship { args, otlp } => {
            if otlp.to.is_some() {
                return ship_otlp(args, otlp);
            }
            fleet::ship(args)
        }
        #[cfg(all(not(feature = "kafka"), feature = "otlp"))]
        Command::Ship { ship: s } if s.otlp.to.is_some() => {
            let duration = seconds(s.duration)?;
            let otlp = cli::OtlpArgs { host_name: s.otlp.host_name.or(s.host), ..s.otlp };
            export::follow(s.rings, duration, &otlp)
        }
        #[cfg(not(feature = "kafka"))]
        Command::Ship { .. } => Err(Failure::msg(format!(
            "ship without --to ships into Kafka. {}. ship --to otlp://HOST:PORT delivers recorders to an \
             OpenTelemetry endpoint",
            fleet::KAFKA_FEATURE
        ))),
        Command::Completions { shell } => docs::completions(Cli::command(), shell),
        Command::Man { page, dir } => docs::man(Cli::command(), page.as_deref(), dir.as_deref()),
    }
}

/// `--duration` seconds.
#[cfg(feature = "otlp")]
fn seconds(s: Option<f64>) -> Result<Option<std::time::Duration>, Failure> {
    s.map(|s| {
        std::time::Duration::try_from_secs_f64(s)
            .map_err(|_| Failure::msg(format!("--duration {s}: not a number of seconds")))
    })
    .transpose()
}

/// `ringtrace ship --to ENDPOINT`: the OTLP follower of the recorder directories and
/// trace files given, the Kafka options refused.
#[cfg(all(feature = "kafka", feature = "otlp"))]
fn ship_otlp(args: ringtrace_ship::command::ShipArgs, otlp: cli::OtlpArgs) -> Result<(), Failure> {
    let kafka = [
        ("--config", args.config.is_some()),
        ("--brokers", args.brokers.is_some()),
        ("--topic", args.topic.is_some()),
        ("--state", args.state.is_some()),
        ("--compression", args.compression.is_some()),
        ("--spool", args.spool.is_some()),
        ("--until-disconnected", args.until_disconnected),
        ("--ack-timeout", args.ack_timeout.is_some()),
        ("--max-message", args.max_message.is_some()),
        ("--spool-max", args.spool_max.is_some()),
        ("--spool-wait", args.spool_wait.is_some()),
    ];
    if let Some((name, _)) = kafka.iter().find(|(_, given)| *given) {
        return Err(Failure::msg(format!("{name} is Kafka's: ship --to delivers to an OTLP endpoint instead")));
    }
    if args.rings.is_empty() {
        return Err(Failure::msg("ship --to needs the recorder directories or trace files to follow"));
    }
    let duration = seconds(args.duration)?;
    let otlp = cli::OtlpArgs { host_name: otlp.host_name.or(args.host), ..otlp };
    export::follow(args.rings, duration, &otlp)
}

#[cfg(all(feature = "kafka", not(feature = "otlp")))]
fn ship_otlp(_: ringtrace_ship::command::ShipArgs, _: cli::OtlpArgs) -> Result<(), Failure> {
    Err(Failure::msg("--to needs the command built with its otlp feature (on by default)"))
}

/// Whose ring files `write` and `consume` attach to.
fn owners(any: bool) -> ringtrace::Owners {
    if any {
        ringtrace::Owners::Any
    } else {
        ringtrace::Owners::Mine
    }
}

/// The topic `source` names if it is a `kafka://` source; a time window is refused
/// on any other (its records' times are not on one clock the command could select by).
fn kafka(source: &Path, window: fleet::Window) -> Result<Option<fleet::Topic>, Failure> {
    match Spec::parse(source.as_os_str())? {
        Spec::Kafka(topic) => Ok(Some(topic)),
        _ if !window.is_all() => {
            Err(Failure::msg("--since and --until select a kafka:// topic's records by time; this source is not one")
                .about(source))
        }
        _ => Ok(None),
    }
}

/// Refuses an output that is the source (or inside it), before either is opened.
fn refuse_source(output: Option<&Path>, source: &Path) -> Result<(), Failure> {
    let Some(output) = output else { return Ok(()) };
    let source = match Spec::parse(source.as_os_str())? {
        Spec::File(p) | Spec::BpfPin(p) => p,
        Spec::BpfId(_) | Spec::Kafka(_) => return Ok(()),
    };
    destination::refuse_source(output, &[&source])
}
