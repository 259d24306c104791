//! `ringtrace decode`: a `ringtrace-tracing` trace (a dump, a stream, or a recorder
//! directory, live or left by a process that died) as one event a line.

use crate::failure::Failure;
use crate::records::Format;
use crate::source::Source;
use crate::traced::{self, line_format};

pub fn run(source: Source, format: Format) -> Result<(), Failure> {
    let Source::Traced(t) = source else {
        return Err(Failure::msg(format!(
            "decode reads ringtrace-tracing traces (a trace file or a recorder directory), not {}: try tail or snapshot",
            source.kind()
        )));
    };
    let trace = t.read()?;
    traced::print(&trace, line_format(format)?, None, false, None)
}
