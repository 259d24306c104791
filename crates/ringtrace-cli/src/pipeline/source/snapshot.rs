//! A snapshot file (`Snapshot::write_to`): read whole, its checksums checked on
//! opening. It does not change: nothing follows or consumes it.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use ringtrace::Snapshot;

use super::{Follow, Held, RecordSource};
use crate::failure::{chain, Failure};
use crate::output::ReportFormat;
use crate::pipeline::record::{Raw, Record};

/// A snapshot file, read.
pub struct SnapshotFile(Snapshot);

pub fn open(path: &Path) -> Result<SnapshotFile, Failure> {
    let file = File::open(path).map_err(|e| Failure::msg(format!("cannot open {}: {e}", path.display())))?;
    Snapshot::read_from(BufReader::new(file))
        .map(SnapshotFile)
        .map_err(|e| Failure::msg(format!("{}: {}", path.display(), chain(&e))))
}

impl RecordSource for SnapshotFile {
    fn kind(&self) -> &'static str {
        "a snapshot file"
    }

    fn read(&mut self) -> Result<Box<dyn Held + '_>, Failure> {
        Ok(Box::new(&self.0))
    }

    fn follow(&mut self) -> Result<Box<dyn Follow + '_>, Failure> {
        Err(Failure::msg("a snapshot file does not change: --follow reads ring and channel files"))
    }

    fn stat(&mut self, path: &Path, format: ReportFormat) -> Result<(), Failure> {
        crate::report::snapfile::stat(path, &self.0, format == ReportFormat::Json)
    }
}

impl Held for &Snapshot {
    fn records(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        Box::new(Snapshot::records(self).map(|r| Record::Raw(Raw::of(&r))))
    }

    fn records_rev(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        Box::new(Snapshot::records(self).rev().map(|r| Record::Raw(Raw::of(&r))))
    }
}
