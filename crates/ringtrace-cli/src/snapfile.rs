//! Snapshot files (`Snapshot::write_to`, conventionally `.rtsnap`): `stat` shows their
//! header, `snapshot` prints their records. Reading checks the file's checksums, so a
//! damaged file is reported, never printed as other records.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use ringtrace::{Snapshot, SNAPSHOT_MAGIC};

use crate::format::{json_string, Failure, Format};
use crate::snapshot::write_records;

/// Whether `path` starts with the snapshot file magic (else it is some other source).
pub fn is_snapshot_file(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && magic == SNAPSHOT_MAGIC
}

fn read(path: &Path) -> Result<Snapshot, Failure> {
    let file = File::open(path).map_err(|e| Failure::Message(format!("cannot open {}: {e}", path.display())))?;
    Snapshot::read_from(BufReader::new(file)).map_err(|e| Failure::Message(format!("{}: {e}", path.display())))
}

/// `ringtrace stat FILE`: the snapshot's header, its checksums verified.
pub fn stat(path: &Path, json: bool) -> Result<(), Failure> {
    let s = read(path)?;
    let mut t = String::new();
    if json {
        t.push_str("{\"path\":");
        json_string(&mut t, &path.display().to_string());
        let _ = writeln!(
            t,
            ",\"kind\":\"snapshot\",\"capacity\":{},\"oldest_pos\":{},\"end_pos\":{},\"records\":{},\
             \"overwritten_before\":{},\"missed\":{},\"unfinished\":{},\"checksums\":\"ok\"}}",
            s.capacity(),
            s.oldest_position(),
            s.end_position(),
            s.len(),
            s.overwritten_before(),
            s.missed(),
            s.unfinished()
        );
    } else {
        let _ = writeln!(t, "snapshot file {}", path.display());
        let _ = writeln!(t, "capacity      {} bytes", s.capacity());
        let _ = writeln!(t, "positions     {}..{}", s.oldest_position(), s.end_position());
        let _ = writeln!(t, "records       {} held, {} still being written (skipped)", s.len(), s.unfinished());
        let _ = writeln!(
            t,
            "overwritten   {} before the oldest; {} held by no snapshot (missed)",
            s.overwritten_before(),
            s.missed()
        );
        let _ = writeln!(t, "checksums     ok (CRC32C of the header and of the records)");
    }
    crate::format::print(&t)
}

/// `ringtrace tail FILE`: the snapshot's newest `count` records, oldest first.
pub fn tail(path: &Path, count: usize, follow: bool, format: Format) -> Result<(), Failure> {
    let s = read(path)?;
    if follow {
        return Err(Failure::Message(
            "a snapshot file does not change: --follow reads ring and channel files".to_owned(),
        ));
    }
    let skip = s.len().saturating_sub(count);
    crate::snapshot::write_output(None, |w| write_records(w, format, s.records().skip(skip), false))
}

/// `ringtrace snapshot FILE`: the snapshot's records, oldest (or newest) first.
pub fn snapshot(path: &Path, reverse: bool, format: Format, output: Option<&Path>) -> Result<(), Failure> {
    let s = read(path)?;
    crate::snapshot::write_output(output, |w| write_records(w, format, s.records(), reverse))
}
