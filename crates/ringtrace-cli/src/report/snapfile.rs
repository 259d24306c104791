//! `ringtrace stat` of a snapshot file: its header (its checksums were checked when it
//! was opened).

use std::fmt::Write as _;
use std::path::Path;

use ringtrace::Snapshot;
use serde::Serialize;

use crate::failure::Failure;
use crate::output::{print, print_json};
use crate::units::bytes;

/// `stat --format json` of a snapshot file: sizes, positions and counts, all numbers
/// (see `records`' docs).
#[derive(Serialize)]
struct Json {
    path: String,
    kind: &'static str,
    capacity: u64,
    oldest_pos: u64,
    end_pos: u64,
    records: usize,
    overwritten_before: u64,
    missed: u64,
    unfinished: u64,
    checksums: &'static str,
}

pub fn stat(path: &Path, s: &Snapshot, json: bool) -> Result<(), Failure> {
    if json {
        return print_json(&Json {
            path: path.display().to_string(),
            kind: "snapshot",
            capacity: s.capacity(),
            oldest_pos: s.oldest_position(),
            end_pos: s.end_position(),
            records: s.len(),
            overwritten_before: s.overwritten_before(),
            missed: s.missed(),
            unfinished: s.unfinished(),
            checksums: "ok",
        });
    }
    let mut t = String::new();
    let _ = writeln!(t, "snapshot file {}", path.display());
    let _ = writeln!(t, "capacity      {} (of the ring it was taken from)", bytes(s.capacity()));
    let _ = writeln!(t, "positions     {}..{}", s.oldest_position(), s.end_position());
    let _ = writeln!(t, "records       {} held, {} still being written (skipped)", s.len(), s.unfinished());
    let _ = writeln!(
        t,
        "overwritten   {} before the oldest; {} held by no snapshot (missed)",
        s.overwritten_before(),
        s.missed()
    );
    let _ = writeln!(t, "checksums     ok (CRC32C of the header and of the records)");
    print(&t)
}
