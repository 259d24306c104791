//! `ringtrace export`: a `ringtrace-tracing` trace (a trace file or a recorder
//! directory), or a channel file of raw records, in a format other tools read.

use std::io::{BufWriter, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use ringtrace_tracing::export::{chrome, ctf, perfetto};

use crate::failure::Failure;
use crate::output::{write_output, ExportFormat};
use crate::source::Source;
use crate::traced::Traced;

/// Exports `source`, opened from `path`.
pub fn run(path: &Path, source: Source, format: ExportFormat, output: Option<&Path>) -> Result<(), Failure> {
    let trace = match source {
        Source::Traced(t) => t.read()?,
        // Raw records: each an event on its slot's track (ringtrace_tracing::decode::raw).
        Source::Channel(_) => Traced::File(path.into()).read()?,
        other => {
            return Err(Failure::msg(format!(
            "export reads ringtrace-tracing traces (a trace file or a recorder directory) and channel files, not {}",
            other.kind()
        )))
        }
    };
    if format == ExportFormat::Ctf {
        let Some(dir) = output else {
            return Err(Failure::msg("a CTF trace is a directory: name it with -o DIR"));
        };
        let x = crate::destination::write_dir(dir, |tmp| ctf::write_with_progress(&trace, tmp, &mut progress()))?;
        report(&x, dir);
        return Ok(());
    }
    let done = std::cell::Cell::new(None);
    write_output(output, |w| {
        let mut w = BufWriter::new(w);
        let x = match format {
            ExportFormat::Chrome => chrome::write_with_progress(&trace, &mut w, &mut progress())?,
            ExportFormat::Perfetto => perfetto::write_with_progress(&trace, &mut w, &mut progress())?,
            ExportFormat::Ctf => unreachable!("written above"),
        };
        w.flush()?;
        done.set(Some(x));
        Ok(())
    })?;
    if let (Some(x), Some(path)) = (done.take(), output) {
        report(&x, path);
    }
    Ok(())
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
fn report(x: &ringtrace_tracing::export::Exported, path: &Path) {
    crate::output::eprint_line(format_args!(
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
        crate::output::eprint_line(format_args!(
            "warning: {} records chunks left out: the file changed on disk while it was exported",
            x.unread_chunks
        ));
    }
}
