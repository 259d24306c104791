//! Traces of `ringtrace-tracing`: a trace file (a dump or a stream) or a recorder
//! directory (its rings read live, or after its process died), decoded into events.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use ringtrace_tracing::decode::text;
use ringtrace_tracing::decode::{EntryKind, Trace};

use super::{Follow, Held, RecordSource};
use crate::failure::{chain, Failure};
use crate::output::{warn, ReportFormat};
use crate::pipeline::record::{Record, Shape, Timeline};

/// A trace, before it is read.
#[derive(Debug)]
pub struct Traced {
    path: PathBuf,
    /// A recorder directory, not a trace file.
    dir: bool,
    /// A channel file of raw records, read as a trace.
    channel: bool,
}

/// A recorder directory ([`ringtrace::source::Kind::RecorderDir`]): its rings and
/// catalog files in it.
pub fn open_dir(path: PathBuf) -> Traced {
    Traced { path, dir: true, channel: false }
}

/// What a directory that is not a recorder directory ([`ringtrace::source::Kind`]) is
/// said to be.
pub fn not_a_recorder(path: &Path) -> Failure {
    Failure::msg(format!(
        "{} is a directory, not a regular file, nor a recorder directory (it has no {} and {} files)",
        path.display(),
        ringtrace_tracing::RINGS_FILE,
        ringtrace_tracing::CATALOG_FILE
    ))
}

/// A trace file (told by its magic).
pub fn open_file(path: PathBuf) -> Traced {
    Traced { path, dir: false, channel: false }
}

/// A channel file of raw records, read as a trace: each record an event on its slot's
/// track (`ringtrace_tracing::decode::raw`).
pub fn open_channel(path: PathBuf) -> Traced {
    Traced { path, dir: false, channel: true }
}

/// Reads and checks the trace at `path`; what was skipped is said on stderr.
pub fn read(path: &Path) -> Result<Trace, Failure> {
    let trace = Trace::open(path).map_err(|e| Failure::msg(chain(&e)))?;
    let summary = text::summary(&trace);
    if !summary.is_empty() {
        warn(&summary);
    }
    Ok(trace)
}

impl RecordSource for Traced {
    fn kind(&self) -> &'static str {
        if self.dir {
            "a recorder directory"
        } else if self.channel {
            "a channel file"
        } else {
            "a trace file"
        }
    }

    fn shape(&self) -> Shape {
        Shape::Events
    }

    fn is_trace(&self) -> bool {
        true
    }

    fn read(&mut self) -> Result<Box<dyn Held + '_>, Failure> {
        Ok(Box::new(read(&self.path)?))
    }

    fn follow(&mut self) -> Result<Box<dyn Follow + '_>, Failure> {
        Err(Failure::msg("--follow reads rings; a trace is read whole (decode prints it all)"))
    }

    fn timeline(&mut self) -> Option<Result<Timeline, Failure>> {
        Some(read(&self.path).map(|t| Timeline::Trace(Box::new(t))))
    }

    /// A recorder directory's snapshot into a file is a trace file (a dump that
    /// `ringtrace decode` reads).
    fn copy_to(&mut self, file: &Path, reverse: bool) -> Option<Result<(), Failure>> {
        if !self.dir {
            return None;
        }
        if reverse {
            return Some(Err(Failure::msg("--reverse prints events; a snapshot into a file is a trace file")));
        }
        Some(snapshot_to(&self.path, file))
    }

    fn stat(&mut self, path: &Path, format: ReportFormat) -> Result<(), Failure> {
        crate::report::trace::stat(path, &read(&self.path)?, format == ReportFormat::Json)
    }
}

/// A trace's events, and its lost-event markers.
impl Held for Trace {
    fn records(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        Box::new(
            self.entries()
                .filter(|e| matches!(e.kind, EntryKind::Event(_) | EntryKind::Lost { .. }))
                .map(|entry| Record::Traced { trace: self, entry }),
        )
    }
}

/// Writes a recorder directory's snapshot as a trace file at `file`.
fn snapshot_to(dir: &Path, file: &Path) -> Result<(), Failure> {
    let err = |e: std::io::Error| Failure::msg(format!("cannot write {}: {e}", file.display()));
    let mut out = crate::destination::Output::create(file).map_err(err)?;
    let mut w = BufWriter::new(out.file());
    let s = ringtrace_tracing::snapshot(dir, &mut w).map_err(|e| Failure::msg(chain(&e)))?;
    w.flush().map_err(err)?;
    drop(w);
    out.commit().map_err(err)?;
    if s.unfinished > 0 {
        warn(&format!("{} records being written were stepped over", s.unfinished));
    }
    for (slot, why) in &s.unreadable {
        warn(&format!("ring {slot} is not in the snapshot: {why}"));
    }
    let _ = writeln!(std::io::stderr(), "{} records written to {}", s.records, file.display());
    Ok(())
}
