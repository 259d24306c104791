//! `ringtrace stat`: what a source is and holds, as text or one JSON object. Each kind
//! of source has its own module; none moves a consumer position.

mod channel;
mod kernel;
mod ring;
mod snapfile;

use std::path::Path;

use crate::failure::Failure;
use crate::output::ReportFormat;
use crate::source::Source;

/// Shows `source`, opened from `path` (the argument as given, named in the output).
pub fn run(path: &Path, source: Source, format: ReportFormat) -> Result<(), Failure> {
    let json = format == ReportFormat::Json;
    match source {
        Source::Ring(ring) => ring::stat(path, &ring, json),
        Source::Channel(ch) => channel::stat(path, &ch, json),
        Source::Snapshot(snap) => snapfile::stat(path, &snap, json),
        Source::Bpf(mut map) => kernel::stat(&mut map, json),
        Source::Traced(t) => crate::traced::stat(path, &t.read()?, json),
    }
}
