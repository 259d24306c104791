//! `ringtrace snapshot`: every record the ring holds, oldest (or newest) first, to
//! stdout or a file.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

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
    let write = |w: &mut dyn Write| -> io::Result<()> {
        let mut w = BufWriter::new(w);
        if reverse {
            records.iter().rev().try_for_each(|r| write_record(&mut w, format, &r))?;
        } else {
            records.iter().try_for_each(|r| write_record(&mut w, format, &r))?;
        }
        w.flush()
    };
    write_output(output, write)
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
