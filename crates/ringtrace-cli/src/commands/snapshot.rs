//! `ringtrace snapshot`: every record a source holds, oldest (or newest) first, to
//! stdout or a file. Nothing is consumed. A `ringtrace-tracing` recorder directory:
//! its events decoded, or with `--output`, a trace file of its rings as they are now
//! (the process goes on running).

use std::path::Path;

use crate::failure::Failure;
use crate::pipeline::output::Format;
use crate::pipeline::run::{self, Pick};
use crate::pipeline::source::RecordSource;

pub fn run(source: &mut dyn RecordSource, reverse: bool, format: Format, output: Option<&Path>) -> Result<(), Failure> {
    if let Some(copied) = output.and_then(|file| source.copy_to(file, reverse)) {
        return copied;
    }
    run::read(source, if reverse { Pick::Reversed } else { Pick::All }, format, output)
}
