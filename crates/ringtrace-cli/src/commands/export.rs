//! `ringtrace export`: a trace (a `ringtrace-tracing` trace file or recorder directory,
//! a channel file of raw records, a fleet's records in Kafka) in a format other tools
//! read.

use std::path::Path;

use crate::failure::Failure;
use crate::output::ExportFormat;
use crate::pipeline::output::export;
use crate::pipeline::source::RecordSource;

pub fn run(source: &mut dyn RecordSource, format: ExportFormat, output: Option<&Path>) -> Result<(), Failure> {
    let Some(timeline) = source.timeline() else {
        return Err(Failure::msg(format!(
            "export reads ringtrace-tracing traces (a trace file or a recorder directory) and channel files, not {}",
            source.kind()
        )));
    };
    export::write(&timeline?, format, output)
}
