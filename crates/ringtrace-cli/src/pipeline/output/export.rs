//! `--format chrome|perfetto|ctf`: a source read whole ([`Timeline`]) written as a
//! trace other tools open, with the exporters of `ringtrace-tracing` (a trace) and
//! `ringtrace-ship` (a fleet's records), to stdout or a file (CTF: a directory).

use std::io::{BufWriter, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use ringtrace_export::{chrome, ctf, perfetto};

use crate::failure::Failure;
use crate::output::{eprint_line, warn, write_output, ExportFormat};
use crate::pipeline::record::Timeline;

/// Writes `timeline` in `format` to `output` (stdout without one), and says on stderr
/// what was written where.
pub fn write(
    timeline: &Timeline,
    format: ExportFormat,
    output: Option<&Path>,
    names: &ringtrace_export::otlp::Options,
) -> Result<(), Failure> {
    if format == ExportFormat::OtlpJson {
        return otlp_json(timeline, output, names);
    }
    match timeline {
        Timeline::Trace(trace) => {
            let x = to(
                format,
                output,
                |dir| ctf::write_with_progress(trace, dir, &mut progress()),
                |w| match format {
                    ExportFormat::Chrome => chrome::write_with_progress(trace, w, &mut progress()),
                    _ => perfetto::write_with_progress(trace, w, &mut progress()),
                },
            )?;
            if let (Some(x), Some(path)) = (x, output) {
                report(&x, path);
            }
        }
        #[cfg(feature = "kafka")]
        Timeline::Fleet(read) => {
            use ringtrace_ship::fleet::export::TraceWriter;
            // Streamed into the writer as the topic is read: memory bounded by the merge
            // and the writer, not by the topic.
            let stats = std::cell::Cell::new(None);
            let x = to(
                format,
                output,
                |dir| {
                    let mut w = TraceWriter::ctf(dir)?;
                    stats.set(Some(read.stream(|i| w.put(&i))?));
                    w.finish()
                },
                |out| {
                    let mut w = match format {
                        ExportFormat::Chrome => TraceWriter::chrome(out),
                        _ => TraceWriter::perfetto(out),
                    };
                    stats.set(Some(read.stream(|i| w.put(&i))?));
                    w.finish()
                },
            )?;
            let Some(x) = x else { return Ok(()) };
            if let Some(path) = output {
                eprint_line(format_args!(
                    "{} records of {} hosts ({} sources) written to {}",
                    x.records,
                    x.hosts,
                    x.sources,
                    path.display()
                ));
            }
            if let Some(stats) = stats.take() {
                read.summary(stats);
            }
        }
    }
    Ok(())
}

/// `--format otlp-json`: a trace as OTLP/JSON lines.
fn otlp_json(
    timeline: &Timeline,
    output: Option<&Path>,
    opts: &ringtrace_export::otlp::Options,
) -> Result<(), Failure> {
    // One arm without the kafka feature, two with it.
    #[allow(clippy::infallible_destructuring_match)]
    let trace = match timeline {
        Timeline::Trace(trace) => trace,
        #[cfg(feature = "kafka")]
        Timeline::Fleet(read) => {
            use ringtrace_ship::fleet::export::OtlpWriter;
            // Streamed as the topic is read, a line (2048 log records or spans) at a time.
            let stats = std::cell::Cell::new(None);
            let x = to(
                ExportFormat::OtlpJson,
                output,
                |_| unreachable_ctf(),
                |w| {
                    let mut w = OtlpWriter::json(w);
                    stats.set(Some(read.stream(|i| w.put(&i))?));
                    w.finish()
                },
            )?;
            if let (Some(x), Some(path)) = (x, output) {
                eprint_line(format_args!(
                    "{} records of {} hosts ({} sources) written to {} as {} log records ({} gap notes; {} records \
                     not decodable, written as bytes), {} spans and {} span events",
                    x.records,
                    x.hosts,
                    x.sources,
                    path.display(),
                    x.log_records,
                    x.gaps,
                    x.undecodable + x.host_undecodable,
                    x.otlp_spans,
                    x.span_events
                ));
                if x.start_unknown + x.end_unknown > 0 {
                    eprint_line(format_args!(
                        "{} spans without their start and {} without their end in the topic: written with what it \
                         holds of them, marked ringtrace.start_unknown and ringtrace.end_unknown",
                        x.start_unknown, x.end_unknown
                    ));
                }
            }
            if let Some(stats) = stats.take() {
                read.summary(stats);
            }
            return Ok(());
        }
    };
    let x = to(
        ExportFormat::OtlpJson,
        output,
        |_| unreachable_ctf(),
        |w| ringtrace_export::otlp::write_json_lines(trace, opts, w),
    )?;
    let Some(x) = x else { return Ok(()) };
    if let Some(path) = output {
        eprint_line(format_args!(
            "{} spans, {} span events and {} log records written to {} ({} spans without their start, {} without \
             their end in the trace, marked)",
            x.spans,
            x.span_events,
            x.log_records,
            path.display(),
            x.start_unknown,
            x.end_unknown
        ));
    }
    otlp_warnings(x.clock_unknown, x.unread_chunks);
    Ok(())
}

/// What an OTLP export of a trace says of times it could not make Unix ones, and of
/// chunks it could not read.
pub fn otlp_warnings(clock_unknown: bool, unread_chunks: u64) {
    if clock_unknown {
        warn(
            "the trace holds no wall-clock reading of its process: the times written are CLOCK_MONOTONIC \
             nanoseconds (since boot), not Unix ones",
        );
    }
    if unread_chunks > 0 {
        warn(&format!("{unread_chunks} records chunks left out: the file changed on disk while it was exported"));
    }
}

/// `to`'s directory branch, never taken for a stream format.
fn unreachable_ctf<X>() -> std::io::Result<X> {
    Err(std::io::Error::other("not a directory format"))
}

/// Runs `ctf` on a directory taking the place of `output`, or `stream` on stdout or
/// `output`; what it returns, `None` where stdout went away.
fn to<X>(
    format: ExportFormat,
    output: Option<&Path>,
    ctf: impl FnOnce(&Path) -> std::io::Result<X>,
    stream: impl Fn(&mut BufWriter<&mut dyn Write>) -> std::io::Result<X>,
) -> Result<Option<X>, Failure> {
    if format == ExportFormat::Ctf {
        let Some(dir) = output else {
            return Err(Failure::msg("a CTF trace is a directory: name it with -o DIR"));
        };
        return crate::destination::write_dir(dir, ctf).map(Some);
    }
    let done = std::cell::Cell::new(None);
    write_output(output, |w| {
        let mut w = BufWriter::new(w);
        let x = stream(&mut w)?;
        w.flush()?;
        done.set(Some(x));
        Ok(())
    })?;
    Ok(done.take())
}

/// A progress display on stderr, for an export that takes long: shown in place on a
/// terminal once the export has run for half a second, updated at most 10 times a
/// second, cleared at the end. Nothing where stderr is not a terminal.
fn progress() -> impl FnMut(u64, u64) {
    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut shown: Option<Instant> = None;
    move |done, total| {
        let now = Instant::now();
        if !tty || now - start < Duration::from_millis(500) {
            return;
        }
        let mut e = std::io::stderr().lock();
        if done >= total {
            if shown.is_some() {
                let _ = write!(e, "\r\x1b[2K");
            }
            return;
        }
        if shown.is_none_or(|t| now - t >= Duration::from_millis(100)) {
            shown = Some(now);
            let pct = done as f64 * 100.0 / total.max(1) as f64;
            let _ = write!(e, "\r\x1b[2Kexporting: {pct:.0}% ({done} of {total} records)");
            let _ = e.flush();
        }
    }
}

/// Says on stderr what was written where.
fn report(x: &ringtrace_export::Exported, path: &Path) {
    eprint_line(format_args!(
        "{} events, {} span slices and {} lost-event markers written to {}{}",
        x.events,
        x.slices,
        x.lost_markers,
        path.display(),
        if x.unmatched_exits > 0 {
            format!(" ({} span exits left out: their enters were no longer in the trace)", x.unmatched_exits)
        } else {
            String::new()
        }
    ));
    if x.unread_chunks > 0 {
        eprint_line(format_args!(
            "warning: {} records chunks left out: the file changed on disk while it was exported",
            x.unread_chunks
        ));
    }
}
