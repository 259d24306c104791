//! `ringtrace stat`: what a source is and holds, as text or one JSON object (each kind
//! of source's report is in [`crate::report`]). Nothing moves a consumer position.

use std::path::Path;

use crate::failure::Failure;
use crate::output::ReportFormat;
use crate::pipeline::source::RecordSource;

/// Shows `source`, opened from `path` (the argument as given, named in the output).
pub fn run(path: &Path, source: &mut dyn RecordSource, format: ReportFormat) -> Result<(), Failure> {
    source.stat(path, format)
}
