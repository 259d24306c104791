//! The `ringtrace` command.
//!
//! Exit status: 0 on success (and when the reader of stdout goes away, `| head`); 1 with
//! one line `ringtrace: error: <message>` on stderr for any error; 2 for usage errors.
//!
//! Modules. Imports run one way, down this list; no module imports one above it or a
//! sibling subcommand:
//!
//! * `cli`: the command line (clap): subcommands, arguments, help text.
//! * `commands::*`: one module per subcommand (`stat` has one per kind of source).
//! * `fleet`: `kafka://BROKERS/TOPIC`, a fleet's records in Kafka (the `kafka` feature).
//! * `source`: what a SOURCE argument names, opened (ring, channel, snapshot or trace
//!   file, recorder directory, BPF map).
//! * `merge`: a channel file's slots read and merged by timestamp.
//! * `traced`: `ringtrace-tracing` traces (trace files, recorder directories) decoded.
//! * `follow`: `tail --follow` of one ring.
//! * `bpf`: a BPF map's one reader (its lock) and its consuming loop.
//! * `records`: record lines (text, hex, JSON).
//! * `output`: stdout, stderr, output files, JSON reports.
//! * `destination`: output files written beside their name and renamed into place,
//!   never over a source.
//! * `cleanup`: temporary files removed and children stopped on SIGINT/SIGTERM.
//! * `units`, `liveness`: sizes, times and watermarks for people; whether a pid lives.
//! * `failure`: the error every command returns.

mod bpf;
mod cleanup;
mod cli;
mod commands;
mod destination;
mod failure;
mod fleet;
mod follow;
mod liveness;
mod merge;
mod output;
mod records;
mod source;
mod traced;
mod units;

use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use cli::{Cli, Command, DemoProducer};
use commands::{consume, create, decode, demo, docs, export, snapshot, stat, tail, write};
use failure::Failure;
use output::ReportFormat;
use source::Source;

fn main() -> ExitCode {
    cleanup::install();
    let result = if std::env::args_os().nth(1).is_some_and(|a| a == demo::PRODUCER_ARG) {
        let p = DemoProducer::parse_from(std::env::args_os().skip(1));
        demo::producer(&p.file, p.id, p.millis)
    } else {
        run(Cli::parse().command)
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

/// Runs a command; every error of a command on a source names it.
fn run(command: Command) -> Result<(), Failure> {
    let on = |path: &Path, f: &dyn Fn(Source) -> Result<(), Failure>| f(Source::open(path)?).map_err(|e| e.about(path));
    match command {
        Command::Stat { source, format, json, window } => {
            let format = if json { ReportFormat::Json } else { format };
            if let Some(topic) = kafka(&source, window.get())? {
                return fleet::run(&topic, window.get(), fleet::Job::Stat { format });
            }
            if source.is_file() && source::first_bytes(&source).is_ok_and(|(head, _)| head == fleet::STATE_MAGIC) {
                return fleet::stat_agent_state(&source, format).map_err(|e| e.about(&source));
            }
            on(&source, &|s| stat::run(&source, s, format))
        }
        Command::Tail { source, count, follow, format, json, timeout, since } => {
            let format = if json { records::Format::Json } else { format };
            let window = fleet::Window { since, until: None };
            if let Some(topic) = kafka(&source, window)? {
                return fleet::run(&topic, window, fleet::Job::Tail { count, follow, format, timeout });
            }
            on(&source, &|s| tail::run(s, count, follow, format, timeout))
        }
        Command::Consume { source, count, follow, timeout, format, json, any_owner } => {
            let format = if json { records::Format::Json } else { format };
            let opts = consume::Options { count, follow, timeout, format, owners: owners(any_owner) };
            on(&source, &|s| consume::run(&source, s, &opts))
        }
        Command::Snapshot { source, reverse, format, json, output } => {
            let format = if json { records::Format::Json } else { format };
            refuse_source(output.as_deref(), &source)?;
            on(&source, &|s| snapshot::run(s, reverse, format, output.as_deref()))
        }
        Command::Decode { source, format, json, window } => {
            let format =
                if json || format == cli::EventFormat::Json { records::Format::Json } else { records::Format::Text };
            if let Some(topic) = kafka(&source, window.get())? {
                return fleet::run(&topic, window.get(), fleet::Job::Decode { format });
            }
            on(&source, &|s| decode::run(s, format))
        }
        Command::Export { source, format, output, window } => {
            refuse_source(output.as_deref(), &source)?;
            if let Some(topic) = kafka(&source, window.get())? {
                return fleet::run(&topic, window.get(), fleet::Job::Export { format, output });
            }
            on(&source, &|s| export::run(&source, s, format, output.as_deref()))
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
        Command::Completions { shell } => docs::completions(Cli::command(), shell),
        Command::Man { page, dir } => docs::man(Cli::command(), page.as_deref(), dir.as_deref()),
    }
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
    match source::Spec::parse(source.as_os_str())? {
        source::Spec::Kafka(topic) => Ok(Some(topic)),
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
    let source = match source::Spec::parse(source.as_os_str())? {
        source::Spec::File(p) | source::Spec::BpfPin(p) => p,
        source::Spec::BpfId(_) | source::Spec::Kafka(_) => return Ok(()),
    };
    destination::refuse_source(output, &[&source])
}
