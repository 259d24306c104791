//! `ringtrace tail`: the newest records, and with `--follow` new ones as they are
//! committed (every 50 ms). A source that reading consumes (a BPF map) is consumed: the
//! next N records, or with `--follow` every one from then on.

use std::path::Path;
use std::time::Duration;

use crate::failure::Failure;
use crate::pipeline::output::Format;
use crate::pipeline::run::{self, Pick};
use crate::pipeline::source::{Consume, RecordSource};

pub fn run(
    path: &Path,
    source: &mut dyn RecordSource,
    count: usize,
    follow: bool,
    format: Format,
    timeout: Option<Duration>,
) -> Result<(), Failure> {
    if source.reading_consumes() {
        let count = if follow { None } else { Some(count as u64) };
        let opts = Consume { count, follow, timeout, owners: ringtrace::Owners::Mine };
        if let Some(done) = run::consume(source, path, &opts, format) {
            return done;
        }
    }
    if follow {
        run::follow(source, count, format, timeout)
    } else {
        run::read(source, Pick::Last(count), format, None)
    }
}
