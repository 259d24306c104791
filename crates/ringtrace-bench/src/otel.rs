//! `otel`: what a `tracing` span costs the instrumented program when it is recorded by
//! `ringtrace-tracing`'s layer, against the same span sent to an OpenTelemetry collector
//! by `tracing-opentelemetry`, and the same unit of work through fastrace, a tracing
//! library of its own that does not go through `tracing`.
//!
//! The work, in each writer thread, per span (4 fields on the span, 4 on the event):
//!
//! ```text
//! let span = info_span!("request", a = i, b = 2.5, c = true, d = "text");
//! let _g = span.enter();
//! info!(x = i, y = -1i64, z = 0.5, w = "msg", "event");
//! // _g dropped: the span exits; span dropped: it closes
//! ```
//!
//! Rows, 1 and 2 writer threads, each `tracing` row's subscriber
//! `tracing_subscriber::registry()` with the one layer. Each row runs in a process of its
//! own (this program run again, `__otel-row`), with its subscriber installed as that
//! process's global default (`set_global_default`; fastrace's rows: their reporter,
//! `fastrace::set_reporter`), as a program installs it, so every row gets it the same way
//! and none inherits another's threads, allocator state or thread-locals. Not
//! `dispatcher::with_default` in each writer (the `tracing` rows' way, `layers.rs`): a
//! scoped dispatcher is an `Arc` that every span clones and drops, and with 2 writers
//! running at once on the 2 cores the cache line of its reference count moves between
//! them on each span. Measured here with 2 writers, scoped against global: the
//! `noop-layer` floor 100-180 against 66 ns a span, the flight recorder 265-490 against
//! 240-250 (a sampling profile put 88% of the writer loop's own samples on that `lock
//! decq`). A global default is a `&'static`, with no count.
//!
//! * `ringtrace-tracing` `flight`: the layer's in-memory flight recorder (1 MiB a thread).
//!   The targets judge this row: every record of every span is written in full (the
//!   oldest are overwritten), so none is cheaper for having been lost.
//! * `ringtrace-tracing` `stream`: the layer's stream into a trace file in the temporary
//!   directory (1 MiB ring a thread; a background thread drains the rings into the
//!   file): like the exporter, it moves the spans out of the program's memory on a
//!   thread of its own. A writer as fast as these outruns the drain on 2 cores, and a
//!   record that finds its ring full is lost (counted) without being copied into it, a
//!   little cheaper for the writer than one written.
//! * `noop-layer` `registry`: a layer that does nothing, the floor: what `tracing`'s
//!   dispatch and the registry's span bookkeeping cost every row before its layer runs.
//! * `tracing-opentelemetry` `otlp-http/batch`: `tracing_opentelemetry::layer()` with a
//!   tracer of an `SdkTracerProvider` built with `with_batch_exporter` around
//!   `opentelemetry_otlp::SpanExporter::builder().with_http()` (OTLP over HTTP, binary
//!   protobuf), the setup opentelemetry-otlp's documentation shows first and the
//!   features these crates enable by default (reqwest's blocking client; the batch span
//!   processor's default queue of 2,048 spans, exporting 512 at a time, on a thread of
//!   its own; `OTEL_BSP_*` variables apply as in any program). Every layer option is
//!   its default (span locations, thread ids and names, busy and idle times recorded).
//!
//! The `fastrace` rows (fastrace 0.7.19 with its `enable` feature; `otel/fastrace_peer.rs`)
//! do the same unit of work with fastrace's API and no `tracing` dispatcher (none is
//! installed). fastrace's properties are strings: the unit's number is formatted
//! (`i.to_string()`), the constants are `&'static str`s (`"2.5"`, `"true"`, `"text"`;
//! `"-1"`, `"0.5"`, `"msg"`), which it keeps without copying. Spans go from each thread's
//! queue to fastrace's collector thread, which hands them to the reporter set with
//! `fastrace::set_reporter(reporter, Config::default())` (at least once a second, sooner
//! when a thread's queue is half full).
//!
//! * `fastrace` `root`: per unit, `Span::root("request", SpanContext::random())
//!   .with_properties(|| [a, b, c, d])`, made the thread's local parent
//!   (`set_local_parent`) while `LocalSpan::add_event(Event::new("event")
//!   .with_properties(|| [x, y, z, w]))` adds its event. The reporter counts the spans
//!   named `request` it is given (and their events) on fastrace's collector thread and
//!   keeps nothing: a span counts as delivered when it reached the reporter.
//! * `fastrace` `local`: its cheapest way, a `LocalSpan` per unit:
//!   `LocalSpan::enter_with_local_parent("request").with_properties(...)` with the same
//!   event inside it, under a root span (`writer`, not counted) made the thread's local
//!   parent once per 1,000 units (`fastrace_peer::LOCAL_PER_ROOT`): a root holds its
//!   local spans and events in its thread until its guard drops, at most 10,240 of them
//!   (fastrace's `DEFAULT_SPAN_QUEUE_SIZE`), and records no more past that, so one root
//!   for a whole thread would record 5,120 units and skip the rest. The same counting
//!   reporter.
//! * `fastrace` `otlp-http/batch`: root spans as in `root`, reported by
//!   `fastrace_opentelemetry::OpenTelemetryReporter` (fastrace-opentelemetry 0.19, on
//!   opentelemetry / opentelemetry_sdk 0.33) around the same OTLP exporter and counting
//!   wrapper as `tracing-opentelemetry`'s row: it converts each report's spans to
//!   `SpanData` and exports them in one call, on fastrace's collector thread.
//!
//! Where the spans go: the exporter posts to `RINGTRACE_BENCH_OTLP_ENDPOINT` if that is
//! set (the OTLP/HTTP traces URL of a collector, used as given, e.g.
//! `http://127.0.0.1:4318/v1/traces`); otherwise to a sink the bench starts for each
//! round as a **child process** (this program run again, `__otlp-sink`): an HTTP/1.1
//! server on a loopback port that walks each request's protobuf wire format as an OTLP
//! `ExportTraceServiceRequest` down to its spans' fields, answers 200 to one that is
//! well formed and 400 to anything else, and counts the spans.
//!
//! * A child process, not a thread of the bench: its work (what a collector does) is
//!   charged to neither CPU figure of the rows.
//! * It walks the wire format rather than decoding it into values, because it shares
//!   the machine's cores with the rows: a full decode with `prost` took about 3 µs of
//!   CPU a span here, the walk about 0.2 µs (the sink's own CPU time per span is printed
//!   on stderr at the end of each round).
//! * An export counts as delivered when the exporter's `export` returned success
//!   (counted by a wrapper around the exporter that passes every call on as is); spans
//!   the batch processor dropped (its queue full) or whose export failed are the row's
//!   `drops/s`. After each exporting row (`tracing-opentelemetry` and `fastrace`
//!   `otlp-http/batch`) the bench checks that the sink counted at least as many spans
//!   as the exporter reported exported, and says so on stderr if not.
//!
//! Each row is a fixed number of spans per writer thread (200,000; `--quick` 50,000),
//! after a warmup of a tenth as many that is not counted. Writers wait on a barrier after
//! the warmup; meanwhile the row's main thread empties the warmup's spans from the
//! OpenTelemetry pipeline (`force_flush`; fastrace: `fastrace::flush`, which runs its
//! collector once and waits for it), then opens the window. Figures, per span
//! emitted (a span the batch processor drops has cost its writer all but the hand-over
//! to the processor's queue):
//!
//! * `ns_per_rec` (the table's `writer CPU`; what the targets compare): the writer
//!   threads' CPU time (`CLOCK_THREAD_CPUTIME_ID`, read by each writer around its
//!   measured spans, summed over writers). What the instrumented threads pay; neither
//!   the exporter's thread (nor reqwest's runtime thread) nor the stream's drain is in it.
//! * `cpu_ns_per_rec` (`CPUns/rec`): the row process's CPU time
//!   (`CLOCK_PROCESS_CPUTIME_ID`: all threads, those that exited included, the same
//!   total as `getrusage(RUSAGE_SELF)`) from the window's opening until the pipeline is
//!   shut down: the exporter's and the drain's work for the window's spans, and the
//!   final flush (`SdkTracerProvider::shutdown`, which exports what is still queued;
//!   `Recorder::finish`, which drains the rings and closes the file; `fastrace::flush`,
//!   which reports or exports what is still queued), are in it; the
//!   process's start and its subscriber's setup are not.
//! * `wall_ns_per_rec` (`ns/rec`): the window's wall time, from its opening until the
//!   last writer has emitted its last span, per span; the shutdown (and a fastrace
//!   writer's catch-up, `fastrace_peer::catch_up`) is outside it.
//! * `drops_per_s`: `tracing-opentelemetry`: spans emitted in the window and not
//!   exported; `fastrace`: spans emitted, warmup included, and not reported (`root`,
//!   `local`) or exported (`otlp-http/batch`) after the final `fastrace::flush` (a
//!   warmup span still in its writer's queue when the window opened is reported inside
//!   it). fastrace drops no span while its thread lives, but loses at the thread's exit
//!   what its collector has not yet taken: after the window each writer has it take
//!   everything (`fastrace_peer::catch_up`, outside the writer's CPU figure and the wall
//!   time, inside the process's CPU); `ringtrace-tracing` `stream`: records lost (a
//!   span is 3 records: `open`, the event, `done`), all per second of the window.
//!
//! In each round the rows of a writer count run back to back, their order rotating from
//! round to round.
//!
//! Where `tracing-opentelemetry`'s writer time goes (a sampling profile of its 1-writer
//! row, writer thread): about a quarter in `malloc`, `free` and `realloc` (each span's
//! data, attributes and event are heap objects, freed by the exporter's thread), and a
//! tenth in waking another thread from glibc's allocator lock (`__lll_lock_wake_private`)
//! as the exporter's thread frees spans of the writer's arena. Its figure therefore
//! depends on how much the exporter's thread runs beside the writer: from about 1.5 to
//! 3 µs a span between runs here, where the layer's rows stay within a few percent.

use std::io::{self, Write};
use std::ops::Range;
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use tracing::Dispatch;

use crate::channel::thread_cpu_ns;
use crate::harness::{process_cpu, Measured};
use crate::{Progress, Row, Selection};

mod counted;
mod fastrace_peer;
mod sink;
mod under;
pub use sink::sink_main;
use sink::Sink;
use under::{Back, Under};

pub(crate) const BENCH: &str = "otel";
/// Writer thread counts.
const WRITERS: [usize; 2] = [1, 2];
/// Spans each writer emits in a row's window (full mode, `--quick`).
const SPANS: u64 = 200_000;
const QUICK_SPANS: u64 = 50_000;
/// The collector to export to instead of the bench's own sink.
const ENDPOINT_VAR: &str = "RINGTRACE_BENCH_OTLP_ENDPOINT";
/// The implementations: `(impl, variant)`.
const IMPLS: [(&str, &str); 7] = [
    ("ringtrace-tracing", "stream"),
    ("ringtrace-tracing", "flight"),
    ("tracing-opentelemetry", "otlp-http/batch"),
    ("noop-layer", "registry"),
    ("fastrace", "root"),
    ("fastrace", "local"),
    ("fastrace", "otlp-http/batch"),
];

/// Whether a row exports over OTLP (to the sink or `RINGTRACE_BENCH_OTLP_ENDPOINT`).
fn exports(variant: &str) -> bool {
    variant == "otlp-http/batch"
}

/// One span of the workload: 4 fields on the span, an event of 4 fields inside it.
#[inline(always)]
fn one_span(i: u64) {
    let span = tracing::info_span!("request", a = i, b = 2.5, c = true, d = "text");
    let _g = span.enter();
    tracing::info!(x = i, y = -1i64, z = 0.5, w = "msg", "event");
}

/// How a row emits its units of work.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Work {
    /// `tracing` spans ([`one_span`]) through the thread's dispatcher.
    Tracing,
    /// fastrace root spans ([`fastrace_peer::root_spans`]).
    FastraceRoot,
    /// fastrace local spans ([`fastrace_peer::local_spans`]).
    FastraceLocal,
}

/// Units `r` of the workload, the row's way.
#[inline(always)]
fn run(work: Work, r: Range<u64>) {
    match work {
        Work::Tracing => {
            for i in r {
                one_span(i);
            }
        }
        Work::FastraceRoot => fastrace_peer::root_spans(r),
        Work::FastraceLocal => fastrace_peer::local_spans(r),
    }
}

/// One row's measurement (a child prints it as a JSON line).
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Measurement {
    /// Spans emitted in the window, all writers.
    spans: u64,
    /// Writer threads' CPU time over their measured spans, summed, ns.
    writer_cpu_ns: u64,
    /// The process's CPU time from the window's opening to the end of the shutdown.
    process_cpu: Duration,
    /// The window's wall time.
    wall: Duration,
    /// Spans not exported (OpenTelemetry) or records lost (ringtrace) in the window;
    /// fastrace: spans emitted, warmup included, and not reported or exported.
    drops: u64,
    /// Spans exported (OpenTelemetry) or reported (fastrace) in the window.
    exported: u64,
    /// Events of the spans fastrace's counting reporter was given, warmup included.
    #[serde(default)]
    events: Option<u64>,
}

/// `writers` threads, each emitting a tenth of `spans` as a warmup, then `spans` in the
/// window. `global`: the subscriber is made the process's global default
/// (`set_global_default`, a row's child process); else each writer thread installs it
/// with `dispatcher::with_default` (the unit tests, which share a process).
fn measure(under: Under, writers: usize, spans: u64, global: bool) -> Measurement {
    let (otel, fastrace) = (matches!(under.back, Back::Otel { .. }), matches!(under.back, Back::Fastrace(_)));
    if global && !fastrace {
        tracing::dispatcher::set_global_default(under.dispatch.clone()).expect("no global subscriber yet");
    }
    let with = |d: &Dispatch, f: &mut dyn FnMut() -> (u64, Instant)| {
        if global {
            f()
        } else {
            tracing::dispatcher::with_default(d, f)
        }
    };
    let warm = (spans / 10).max(1);
    let ready = Barrier::new(writers + 1);
    let go = Barrier::new(writers + 1);
    let done = Barrier::new(writers);
    let work = under.work;
    // fastrace's rows: every writer's spans, warmup included, reported before a writer
    // ends (see `fastrace_peer::catch_up`).
    let catch_up = match &under.back {
        Back::Fastrace(p) => Some((p.counter(), (warm + spans) * writers as u64)),
        _ => None,
    };
    let (writer_cpu_ns, wall, cpu0, count0) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..writers)
            .map(|_| {
                let (ready, go, done, d) = (&ready, &go, &done, under.dispatch.clone());
                let (with, catch_up) = (&with, &catch_up);
                s.spawn(move || {
                    with(&d, &mut || {
                        run(work, 0..warm);
                        ready.wait();
                        go.wait();
                        let c0 = thread_cpu_ns();
                        run(work, warm..warm + spans);
                        let (cpu, end) = (thread_cpu_ns() - c0, Instant::now());
                        if let Some((counter, expected)) = catch_up {
                            // Once every writer's window is over.
                            done.wait();
                            if !fastrace_peer::catch_up(counter, *expected) {
                                eprintln!("ringtrace-bench: {BENCH}: fastrace's spans not all reported in time");
                            }
                        }
                        (cpu, end)
                    })
                })
            })
            .collect();
        ready.wait();
        under.settle();
        let count0 = under.count();
        let (t0, cpu0) = (Instant::now(), process_cpu());
        go.wait();
        let (mut cpu, mut end) = (0, t0);
        for h in handles {
            let (c, e) = h.join().expect("writer thread");
            (cpu, end) = (cpu + c, end.max(e));
        }
        (cpu, end.duration_since(t0), cpu0, count0)
    });
    let (count1, events) = under.finish();
    let process_cpu = process_cpu().saturating_sub(cpu0);
    let total = spans * writers as u64;
    let (drops, exported) = if fastrace {
        // A warmup span a writer still held in its queue when the window opened is
        // reported inside it: the drops are every span emitted, warmup included, less
        // every span reported.
        ((total + warm * writers as u64).saturating_sub(count1), count1.saturating_sub(count0))
    } else if otel {
        let exported = count1.saturating_sub(count0);
        (total.saturating_sub(exported), exported)
    } else {
        (count1.saturating_sub(count0), 0)
    };
    Measurement { spans: total, writer_cpu_ns, process_cpu, wall, drops, exported, events }
}

impl Measurement {
    fn row(&self, imp: &str, variant: &str, writers: usize) -> Row {
        let m = Measured {
            committed: self.spans,
            drops: self.drops,
            elapsed: self.wall,
            cpu: Some(self.process_cpu),
            ..Measured::default()
        };
        let mut r = Row::new(BENCH, imp, variant, writers, &m);
        r.ns_per_rec = self.writer_cpu_ns as f64 / self.spans.max(1) as f64;
        r.record_bytes = 0;
        r
    }
}

/// A row's child (`ringtrace-bench __otel-row IMP VARIANT WRITERS SPANS ENDPOINT`): the
/// row measured with its subscriber as the process's global default, printed as one
/// JSON line.
pub fn row_child_main(imp: &str, variant: &str, writers: usize, spans: u64, endpoint: &str) -> io::Result<()> {
    let under = Under::new(imp, variant, endpoint).map_err(io::Error::other)?;
    let m = measure(under, writers, spans, true);
    let mut out = io::stdout().lock();
    serde_json::to_writer(&mut out, &m)?;
    writeln!(out)?;
    out.flush()
}

/// Runs a row in a child process of its own (see the module comment).
fn row_in_child(imp: &str, variant: &str, writers: usize, spans: u64, endpoint: &str) -> Result<Measurement, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let out = Command::new(exe)
        .args(["__otel-row", imp, variant, &writers.to_string(), &spans.to_string(), endpoint])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("starting the row's process: {e}"))?;
    if !out.status.success() {
        return Err(format!("the row's process exited with {}", out.status));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("the row's process printed no measurement: {e}"))
}

/// The `otel` rows of round `round` (0-based), if selected.
pub fn rows(sel: &Selection, round: usize, progress: &mut Progress) -> Vec<Row> {
    let mut out = Vec::new();
    if !sel.wants(BENCH) {
        return out;
    }
    let spans = if sel.quick { QUICK_SPANS } else { SPANS };
    let external = std::env::var(ENDPOINT_VAR).ok().filter(|e| !e.is_empty());
    let mut sink = match &external {
        Some(_) => None,
        None => match Sink::start() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("ringtrace-bench: {BENCH} otlp-http/batch rows skipped: {e}");
                None
            }
        },
    };
    let endpoint = external.clone().or_else(|| sink.as_ref().map(|s| s.endpoint.clone()));
    for writers in WRITERS {
        for i in 0..IMPLS.len() {
            let (imp, variant) = IMPLS[(round + i) % IMPLS.len()];
            let otel = exports(variant);
            let endpoint = match (otel, endpoint.as_deref()) {
                (false, _) => "",
                (true, Some(e)) => e,
                (true, None) => continue,
            };
            progress.step(&format!("{BENCH} {imp} {variant} p={writers}"));
            let before = sink.as_mut().filter(|_| otel).map(Sink::spans);
            let m = match row_in_child(imp, variant, writers, spans, endpoint) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("ringtrace-bench: {BENCH} {imp} {variant} p={writers} skipped: {e}");
                    continue;
                }
            };
            if let (Some(Ok(before)), Some(s)) = (before, sink.as_mut()) {
                match s.spans() {
                    Ok(after) if after.saturating_sub(before) >= m.exported => {}
                    Ok(after) => eprintln!(
                        "ringtrace-bench: {BENCH}: the sink counted {} spans, the exporter reported {} exported",
                        after.saturating_sub(before),
                        m.exported
                    ),
                    Err(e) => eprintln!("ringtrace-bench: {BENCH}: {e}"),
                }
            }
            out.push(m.row(imp, variant, writers));
        }
    }
    // What a collector's receiving end would have spent, for the record: not in any row.
    match sink.map(Sink::finish) {
        Some(Ok((spans, cpu))) if spans > 0 => eprintln!(
            "ringtrace-bench: {BENCH}: the OTLP sink (a process of its own) counted {spans} spans with {:.0} ms of CPU, {:.0} ns a span",
            cpu.as_secs_f64() * 1e3,
            cpu.as_nanos() as f64 / spans as f64
        ),
        Some(Err(e)) => eprintln!("ringtrace-bench: {BENCH}: {e}"),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests;
