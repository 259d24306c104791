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
//! * `source`: what a SOURCE argument names, opened (ring, channel, snapshot or trace
//!   file, recorder directory, BPF map).
//! * `merge`: a channel file's slots read and merged by timestamp.
//! * `traced`: `ringtrace-tracing` traces (trace files, recorder directories) decoded.
//! * `follow`: `tail --follow` of one ring.
//! * `records`: record lines (text, hex, JSON).
//! * `output`: stdout, stderr, output files, JSON reports.
//! * `units`, `liveness`: sizes, times and watermarks for people; whether a pid lives.
//! * `failure`: the error every command returns.

mod cli;
mod commands;
mod failure;
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
use commands::{create, decode, demo, docs, export, snapshot, stat, tail, write};
use failure::Failure;
use output::ReportFormat;
use source::Source;

fn main() -> ExitCode {
    let result = if std::env::args_os().nth(1).is_some_and(|a| a == demo::PRODUCER_ARG) {
        let p = DemoProducer::parse_from(std::env::args_os().skip(1));
        demo::producer(&p.file, p.id, p.millis)
    } else {
        run(Cli::parse().command)
    };
    match result {
        Ok(()) | Err(Failure::BrokenPipe) => ExitCode::SUCCESS,
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
        Command::Stat { source, format, json } => {
            let format = if json { ReportFormat::Json } else { format };
            on(&source, &|s| stat::run(&source, s, format))
        }
        Command::Tail { source, count, follow, format } => on(&source, &|s| tail::run(s, count, follow, format)),
        Command::Snapshot { source, reverse, format, output } => {
            on(&source, &|s| snapshot::run(s, reverse, format, output.as_deref()))
        }
        Command::Decode { source, format, json } => {
            let format = if json { records::Format::Json } else { format };
            on(&source, &|s| decode::run(s, format))
        }
        Command::Export { source, format, output } => {
            on(&source, &|s| export::run(&source, s, format, output.as_deref()))
        }
        Command::Create { path, capacity, mode, producers, force } => {
            create::run(&path, capacity, mode, producers, force).map_err(|e| e.about(&path))
        }
        Command::Write { path, inputs, whole, drop } => {
            let opts = write::Options { inputs, whole, drop };
            on(&path, &|s| write::run(&path, s, &opts))
        }
        Command::Demo { file, seconds, producers, capacity } => demo::run(file, seconds, producers, capacity),
        Command::Completions { shell } => docs::completions(Cli::command(), shell),
        Command::Man => docs::man(Cli::command()),
    }
}
