//! `ringtrace decode`: a trace (a `ringtrace-tracing` trace file or recorder directory,
//! live or left by a process that died; a channel file's raw records; a fleet's records
//! in Kafka) as one event a line.

use crate::failure::Failure;
use crate::pipeline::output::Format;
use crate::pipeline::run::{self, Pick};
use crate::pipeline::source::RecordSource;

pub fn run(source: &mut dyn RecordSource, format: Format) -> Result<(), Failure> {
    if !source.is_trace() {
        return Err(Failure::msg(format!(
            "decode reads ringtrace-tracing traces (a trace file or a recorder directory) and channel files, not {}: \
             try tail or snapshot",
            source.kind()
        )));
    }
    run::read(source, Pick::All, format, None)
}
