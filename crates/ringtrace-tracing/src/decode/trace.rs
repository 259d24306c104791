//! [`Trace`]: a trace read and checked; the `resolve` module names its records on demand.

use std::collections::HashMap;
use std::path::Path;

use super::load::{self, Parts, Problems, Rec};
use crate::catalog::{Callsite, ThreadInfo};
use crate::error::Error;
use crate::file::Process;
use crate::wire::RawRecord;

/// A trace, read and checked.
#[derive(Debug)]
pub struct Trace {
    /// The process that wrote it (absent if its chunk was lost).
    pub process: Option<Process>,
    pub(crate) callsites: HashMap<u32, Callsite>,
    /// Sorted by lane, then time.
    pub(crate) threads: Vec<ThreadInfo>,
    /// In timestamp order.
    pub(crate) records: Vec<Rec>,
    /// The recorder's counters when the file was finished (`lost`, `overwritten`, ...).
    pub stats: Vec<(String, u64)>,
    /// What was skipped.
    pub problems: Problems,
}

impl Trace {
    /// Reads a trace file (a dump or a stream) or a recorder directory.
    pub fn open(path: impl AsRef<Path>) -> Result<Trace, Error> {
        let path = path.as_ref();
        if path.is_dir() {
            return Trace::open_dir(path);
        }
        let bytes = std::fs::read(path).map_err(|e| Error::io("reading", path, e))?;
        Trace::from_bytes(&bytes, path)
    }

    /// Reads a trace file's bytes; `path` names it in errors.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Trace, Error> {
        let (parts, problems) = load::file(bytes, path)?;
        Ok(Trace::assemble(parts, problems))
    }

    /// Reads a recorder directory: its catalog, and every ring of its channel file as
    /// it is now (a live process goes on writing; a record being written is stepped
    /// over and counted in [`Problems::unfinished`]).
    pub fn open_dir(dir: &Path) -> Result<Trace, Error> {
        let (parts, problems) = load::dir(dir)?;
        Ok(Trace::assemble(parts, problems))
    }

    fn assemble(mut parts: Parts, problems: Problems) -> Trace {
        // A stream's passes are each in order; a late record can fall behind a pass.
        parts.records.sort_by_key(|r| r.ts);
        parts.threads.sort_by_key(|t| (t.lane, t.since_ns));
        Trace {
            process: parts.process,
            callsites: parts.callsites,
            threads: parts.threads,
            records: parts.records,
            stats: parts.stats,
            problems,
        }
    }

    /// Records read.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record was read.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// A callsite by number.
    pub fn callsite(&self, id: u32) -> Option<&Callsite> {
        self.callsites.get(&id)
    }

    /// Every thread that took a lane.
    pub fn threads(&self) -> &[ThreadInfo] {
        &self.threads
    }

    /// The thread that wrote at `ts_ns` into `lane`: the last to take it at or before
    /// then (the first, for a record older than every entry).
    pub fn thread(&self, lane: u32, ts_ns: u64) -> Option<&ThreadInfo> {
        let start = self.threads.partition_point(|t| t.lane < lane);
        let end = self.threads.partition_point(|t| t.lane <= lane);
        let of_lane = &self.threads[start..end];
        let i = of_lane.partition_point(|t| t.since_ns <= ts_ns);
        of_lane.get(i.saturating_sub(1))
    }

    /// A counter from the stats chunk.
    pub fn stat(&self, name: &str) -> Option<u64> {
        self.stats.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    /// Events lost: the `lost` records' counts, and what the stats add (losses whose
    /// count a thread could not write, events of threads with no ring, events during a
    /// thread's exit).
    pub fn lost(&self) -> u64 {
        let in_rings: u64 =
            self.records.iter().map(|r| if let RawRecord::Lost { count } = r.raw { count } else { 0 }).sum();
        let extra: u64 = ["unreported", "no_ring", "teardown", "busy"].iter().filter_map(|n| self.stat(n)).sum();
        in_rings + extra
    }
}
