//! `ringtrace-bench`: ringtrace next to the queues a user would otherwise pick, and
//! next to libbpf's consumer on kernel rings. A binary of its own, so that the product
//! binary `ringtrace` links none of the peers.
//!
//! Exit status: 0 on success; 1 with one line `ringtrace-bench: error: <message>` on
//! stderr; 2 for usage errors.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// Measure ringtrace next to crossbeam, disruptor, rtrb and libbpf (the kernel's
/// bench_ringbufs matrix, and more).
#[derive(Debug, Parser)]
#[command(name = "ringtrace-bench", version, about)]
struct Cli {
    /// Short windows: the whole matrix in a couple of minutes.
    #[arg(long)]
    quick: bool,
    /// Only benches whose name contains this (parallel, back-to-back, sampled, reserve-vs-output, contention,
    /// overwrite-contention, snapshot, shm, channel-scaling, c-api, kernel-bpf, kernel-user-ringbuf,
    /// perf-backward, tracing, export, otel; scale: scale-merge, scale-wakeup, scale-directory, scale-pause). `otel` exports to the OTLP/HTTP
    /// traces URL in RINGTRACE_BENCH_OTLP_ENDPOINT if set, else to a sink it starts.
    #[arg(long, value_name = "NAME")]
    filter: Option<String>,
    /// Also write one JSON object per row to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write a chart of records/s by producers and implementation to this SVG file.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    #[command(subcommand)]
    internal: Option<Internal>,
}

#[derive(Debug, Subcommand)]
enum Internal {
    /// A producer process of the `shm` bench (this program run again).
    #[command(name = "__bench-producer", hide = true)]
    BenchProducer { file: PathBuf, millis: u64 },
    /// One export of the `export` bench (this program run again).
    #[command(name = "__export-child", hide = true)]
    ExportChild { format: String, trace: PathBuf, out: PathBuf },
    /// One decode of the `scale-directory` bench (this program run again).
    #[command(name = "__decode-child", hide = true)]
    DecodeChild { path: PathBuf },
    /// The OTLP sink of the `otel` bench (this program run again).
    #[command(name = "__otlp-sink", hide = true)]
    OtlpSink,
    /// One row of the `otel` bench (this program run again).
    #[command(name = "__otel-row", hide = true)]
    OtelRow { imp: String, variant: String, writers: usize, spans: u64, endpoint: String },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.internal {
        Some(Internal::BenchProducer { file, millis }) => {
            ringtrace_bench::shm::producer_main(&file, Duration::from_millis(millis)).map(|_| ())
        }
        Some(Internal::ExportChild { format, trace, out }) => {
            ringtrace_bench::export::child_main(&format, &trace, &out)
        }
        Some(Internal::DecodeChild { path }) => ringtrace_bench::scale::decode_child_main(&path),
        Some(Internal::OtlpSink) => ringtrace_bench::otlp_sink_main(),
        Some(Internal::OtelRow { imp, variant, writers, spans, endpoint }) => {
            ringtrace_bench::otel_row_main(&imp, &variant, writers, spans, &endpoint)
        }
        None => ringtrace_bench::run(&ringtrace_bench::BenchOpts {
            quick: cli.quick,
            filter: cli.filter,
            json: cli.json,
            svg: cli.svg,
        })
        .map(|_| ()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let e = e.to_string().replace(['\n', '\r'], " ");
            eprintln!("ringtrace-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}
