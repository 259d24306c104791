//! `ringtrace consume`: the consumer of a ring file or a BPF map. A record's space is
//! handed back only once its line is written to stdout: an interrupted consume loses
//! nothing (a killed one may leave the last lines it printed in the ring, for the next
//! consumer to print again).

use std::path::Path;

use crate::failure::Failure;
use crate::pipeline::output::Format;
use crate::pipeline::run;
use crate::pipeline::source::{Consume, RecordSource};

pub fn run(path: &Path, source: &mut dyn RecordSource, opts: &Consume, format: Format) -> Result<(), Failure> {
    run::consume(source, path, opts, format).unwrap_or_else(|| {
        Err(Failure::msg(format!(
            "{} is {}: consume drains ring files and BPF maps (tail and snapshot read the others)",
            path.display(),
            source.kind()
        )))
    })
}
