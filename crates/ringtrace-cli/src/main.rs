//! The `ringtrace` command.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// ringtrace: ring buffers for trace and event data.
#[derive(Debug, Parser)]
#[command(name = "ringtrace", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure ringtrace next to crossbeam, disruptor and rtrb (the kernel's bench_ringbufs matrix).
    Bench {
        /// Short windows: the whole matrix in under a minute.
        #[arg(long)]
        quick: bool,
        /// Only benches whose name contains this (parallel, back-to-back, sampled, reserve-vs-output, contention).
        #[arg(long, value_name = "NAME")]
        filter: Option<String>,
        /// Also write one JSON object per row to this file.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Also write a chart of records/s by producers and implementation to this SVG file.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench { quick, filter, json, svg } => {
            ringtrace_bench::run(&ringtrace_bench::BenchOpts { quick, filter, json, svg }).map(|_| ())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ringtrace: error: {e}");
            ExitCode::FAILURE
        }
    }
}
