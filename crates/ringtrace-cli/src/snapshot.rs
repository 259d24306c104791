//! `ringtrace snapshot`: every record the ring holds, oldest (or newest) first, to
//! stdout or a file.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use ringtrace::inspect::Record;

use crate::format::{stdout_err, write_record, Failure, Format};
use crate::tail::warn_corrupt;

pub fn run(path: &Path, reverse: bool, format: Format, output: Option<&Path>) -> Result<(), Failure> {
    if let Some(k) = crate::kernel::parse(path)? {
        return crate::kernel::snapshot(&k, reverse, format, output);
    }
    if crate::channel::is_channel(path)? {
        return crate::channel::snapshot(path, reverse, format, output);
    }
    if crate::snapfile::is_snapshot_file(path) {
        return crate::snapfile::snapshot(path, reverse, format, output);
    }
    let ring = crate::channel::open_ring(path)?;
    let records = ring.records()?;
    warn_corrupt(&records, "");
    write_output(output, |w| write_records(w, format, records.iter(), reverse))
}

/// Writes `records` one per line in `format`, newest first if `reverse`.
pub fn write_records<'a>(
    w: &mut dyn Write,
    format: Format,
    records: impl DoubleEndedIterator<Item = Record<'a>>,
    reverse: bool,
) -> io::Result<()> {
    let mut w = BufWriter::new(w);
    if reverse {
        records.rev().try_for_each(|r| write_record(&mut w, format, &r))?;
    } else {
        records.into_iter().try_for_each(|r| write_record(&mut w, format, &r))?;
    }
    w.flush()
}

/// Runs `write` on stdout, or on `output` (created, synced).
pub fn write_output(output: Option<&Path>, write: impl Fn(&mut dyn Write) -> io::Result<()>) -> Result<(), Failure> {
    match output {
        None => write(&mut io::stdout().lock()).map_err(stdout_err),
        Some(file) => {
            let err = |e: io::Error| Failure::Message(format!("cannot write {}: {e}", file.display()));
            let mut f = File::create(file).map_err(err)?;
            write(&mut f).and_then(|()| f.sync_all()).map_err(err)
        }
    }
}
