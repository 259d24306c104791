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
//! * `output`: stdout, stderr, output files, JSON reports.
//! * `destination`: output files written beside their name and renamed into place,
//!   never over a source.
//! * `cleanup`: temporary files removed and children stopped on SIGINT/SIGTERM.
//! * `escape`, `units`, `liveness`: bytes, sizes, times and watermarks for people;
//!   whether a pid lives.
//! * `failure`: the error every command returns.

#![forbid(unsafe_code)]

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
    Cli::try_parse().unwrap_or_else(|e| e.exit())
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
                && matches!(
                    ringtrace::source::Kind::of(&source),
                    Ok(ringtrace::source::Kind::Unknown(head)) if head.bytes == fleet::STATE_MAGIC
                )
            {
                return fleet::stat_agent_state(&source, format).map_err(|e| e.about(&source));
            }
            on_any(&source, window.get(), &|s| stat::run(&source, s, format))
        }
        Command::Tail { source, count, follow, format, json, timeout, since, reorder } => {
            let format = if json { Format::Json } else { format };
            let window = fleet::Window { since, until: None, until_slack: None, reorder };
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
            // bpf-pin: and bpf-id: name a BPF user ring buffer map, not a source to read.
            if let Some(map) = Spec::parse(path.as_os_str()).map_err(|e| e.about(&path))?.map() {
                return write::map::run(&path, &map, &opts).map_err(|e| e.about(&path));
            }
            on(&path, &|s| write::run(&path, s, &opts))
        }
        Command::Demo { path, file, seconds, processes, capacity } => {
            demo::run(path.or(file), seconds, processes, capacity)
        }
        Command::Ship { args } => ship(args),
        Command::Completions { shell } => docs::completions(Cli::command(), shell),
        Command::Man { page, dir } => docs::man(Cli::command(), page.as_deref(), dir.as_deref()),
    }
}

/// `ringtrace ship`, defined with `ringtrace-ship ship`: the agent into Kafka, or the
/// recorders followed into an OTLP endpoint; the library's log lines on stderr as
/// `ringtrace-ship ship` prints them.
fn ship(args: ringtrace_ship::command::ShipArgs) -> Result<(), Failure> {
    use ringtrace_ship::command::Ship;
    ringtrace_ship::command::log_to_stderr();
    match args.resolve().map_err(|e| Failure::msg(e.to_string()))? {
        Ship::Kafka(agent) => fleet::ship(agent),
        Ship::Otlp(o) => ship_otlp(o),
    }
}

/// `ringtrace ship --to otlp://...`: the recorder directories and trace files given,
/// followed into the endpoint by the code `ringtrace-ship ship --to otlp://` runs; what
/// was delivered on stderr, exit 1 where anything was not, 128 + a signal's number
/// where one stopped it.
#[cfg(feature = "otlp")]
fn ship_otlp(o: ringtrace_ship::command::OtlpShip) -> Result<(), Failure> {
    crate::cleanup::stop_gracefully();
    let signalled = || crate::cleanup::stop_requested().map(i32::from);
    let delivered = o.run_until_signalled(signalled).map_err(|e| Failure::msg(e.to_string()))?;
    output::eprint_line(format_args!("{}", delivered.summary));
    if let Some(why) = delivered.failure {
        return Err(Failure::msg(why));
    }
    delivered.signal.map_or(Ok(()), |s| Err(Failure::Interrupted(u8::try_from(s).unwrap_or(u8::MAX))))
}

#[cfg(not(feature = "otlp"))]
fn ship_otlp(_: ringtrace_ship::command::OtlpShip) -> Result<(), Failure> {
    Err(Failure::msg("--to otlp:// needs the command built with its otlp feature (on by default)"))
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
