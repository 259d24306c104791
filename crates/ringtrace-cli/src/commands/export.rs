//! `ringtrace export`: a `ringtrace-tracing` trace (a trace file or a recorder
//! directory), or a channel file of raw records, in a format other tools read.

use std::io::{BufWriter, Write};
use std::path::Path;

use ringtrace_tracing::export::{chrome, ctf, perfetto};

use crate::failure::Failure;
use crate::output::write_output;
use crate::source::Source;
use crate::traced::Traced;

/// The formats `export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Chrome's Trace Event Format (JSON): chrome://tracing, ui.perfetto.dev.
    Chrome,
    /// Perfetto's protobuf trace of TrackEvent packets: ui.perfetto.dev, trace_processor.
    Perfetto,
    /// CTF 1.8, a directory (metadata and a stream file per thread): babeltrace2,
    /// Trace Compass. Needs -o DIR.
    Ctf,
}

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
        let x = ctf::write(&trace, dir).map_err(|e| Failure::msg(format!("cannot write {}: {e}", dir.display())))?;
        report(&x, dir);
        return Ok(());
    }
    let done = std::cell::Cell::new(None);
    write_output(output, |w| {
        let mut w = BufWriter::new(w);
        let x = match format {
            ExportFormat::Chrome => chrome::write(&trace, &mut w)?,
            ExportFormat::Perfetto => perfetto::write(&trace, &mut w)?,
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
}
