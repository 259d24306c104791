//! Reading a trace file (a dump or a stream) or a recorder directory into its parts,
//! checking everything: what cannot be read is counted in [`Problems`], never guessed.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use foldhash::HashMap;

use super::records::{ChunkRef, Rec, Records};
use crate::catalog::{Callsite, ThreadInfo};
use crate::directory::{self, not_a_trace};
use crate::error::Error;
use crate::file::{self, chunk, ChunkReader, Damage, Process, CATALOG_FILE, CHUNK_HEAD};
use crate::wire;

/// What could not be read, counted: a trace is decoded as far as it is sound.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problems {
    /// Where reading the file stopped early (cut short, or a chunk failed its checksum).
    pub damage: Option<Damage>,
    /// A file without its end chunk: its writer did not finish (a stream whose process
    /// died, or a file cut at a chunk boundary).
    pub incomplete: bool,
    /// Records whose bytes are not a record, skipped.
    pub bad_records: u64,
    /// Catalog, records or stats chunks whose bytes do not decode, skipped.
    pub bad_chunks: u64,
    /// Chunks of a kind this version does not know, skipped.
    pub unknown_chunks: u64,
    /// Recorder directory: records being written when the rings were read, stepped over.
    pub unfinished: u64,
    /// Recorder directory: rings that could not be read (slot, why).
    pub unreadable_rings: Vec<(u32, String)>,
    /// The first error met, for a message.
    pub first_error: Option<String>,
}

impl Problems {
    /// Whether anything was skipped or found damaged.
    pub fn any(&self) -> bool {
        self.damage.is_some()
            || self.bad_records > 0
            || self.bad_chunks > 0
            || self.unknown_chunks > 0
            || self.unfinished > 0
            || !self.unreadable_rings.is_empty()
    }
}

/// What the chunks of a trace file hold.
#[derive(Default)]
pub(crate) struct Parts {
    pub process: Option<Process>,
    pub callsites: HashMap<u32, Callsite>,
    pub threads: Vec<ThreadInfo>,
    pub records: Vec<Rec>,
    pub stats: Vec<(String, u64)>,
    pub ended: bool,
}

fn note(p: &mut Problems, what: &str, e: impl std::fmt::Display) {
    if p.first_error.is_none() {
        p.first_error = Some(format!("{what}: {e}"));
    }
}

/// Takes in one chunk; a records chunk's payload goes to `records`.
fn take_chunk(
    kind: u8,
    payload: &[u8],
    parts: &mut Parts,
    problems: &mut Problems,
    records: &mut impl FnMut(&[u8], &mut Problems),
) {
    match kind {
        chunk::PROCESS => match Process::decode(payload) {
            Ok(p) => parts.process = Some(p),
            Err(e) => {
                problems.bad_chunks += 1;
                note(problems, "process chunk", e);
            }
        },
        chunk::CALLSITE => match Callsite::decode(payload) {
            Ok(c) => {
                parts.callsites.insert(c.id, c);
            }
            Err(e) => {
                problems.bad_chunks += 1;
                note(problems, "callsite chunk", e);
            }
        },
        chunk::THREAD => match ThreadInfo::decode(payload) {
            Ok(t) => parts.threads.push(t),
            Err(e) => {
                problems.bad_chunks += 1;
                note(problems, "thread chunk", e);
            }
        },
        chunk::RECORDS => records(payload, problems),
        chunk::STATS => match file::decode_stats(payload) {
            Ok(s) => parts.stats = s,
            Err(e) => {
                problems.bad_chunks += 1;
                note(problems, "stats chunk", e);
            }
        },
        chunk::END => parts.ended = true,
        _ => problems.unknown_chunks += 1,
    }
}

/// Reads a records chunk's payload into `records`.
fn hold_records(records: &mut Vec<Rec>) -> impl FnMut(&[u8], &mut Problems) + '_ {
    |payload, problems| match file::records(payload) {
        Ok(rs) => {
            for (lane, ts, b) in rs {
                push_record(records, problems, lane, ts, b);
            }
        }
        Err(e) => {
            problems.bad_chunks += 1;
            note(problems, "records chunk", e);
        }
    }
}

fn read_chunks(bytes: &[u8], path: &Path, parts: &mut Parts, problems: &mut Problems) -> Result<(), Error> {
    let (chunks, damage) = file::chunks(bytes).map_err(|e| not_a_trace(path, e))?;
    problems.damage = damage;
    let mut held = Vec::new();
    for (kind, payload) in chunks {
        take_chunk(kind, payload, parts, problems, &mut hold_records(&mut held));
    }
    parts.records.append(&mut held);
    Ok(())
}

/// Reads a trace file without holding its records: every chunk and record is checked,
/// and where each records chunk lies is noted, for [`Records::File`] to read them again
/// as they are reached.
pub(crate) fn scan(path: &Path) -> Result<(Parts, Records, Problems), Error> {
    let f = File::open(path).map_err(|e| Error::io("opening", path, e))?;
    let len = f.metadata().map_err(|e| Error::io("reading", path, e))?.len();
    let io = |e| Error::io("reading", path, e);
    let mut reader = match ChunkReader::new(BufReader::with_capacity(1 << 16, &f), len).map_err(io)? {
        Ok(r) => r,
        Err(e) => return Err(not_a_trace(path, e)),
    };
    let mut parts = Parts::default();
    let mut problems = Problems::default();
    let (mut chunks, mut count, mut lost) = (Vec::new(), 0u64, 0u64);
    while let Some(read) = reader.next_chunk().map_err(io)? {
        let c = match read {
            Ok(c) => c,
            Err(damage) => {
                problems.damage = Some(damage);
                break;
            }
        };
        let head = c.offset - CHUNK_HEAD as u64;
        let mut scan_records = |payload: &[u8], problems: &mut Problems| match file::records(payload) {
            Ok(rs) => {
                let (mut min_ts, mut max_ts, mut good) = (u64::MAX, 0, 0u32);
                for (_, ts, b) in &rs {
                    match wire::check(b) {
                        Ok(n) => {
                            good += 1;
                            lost += n.unwrap_or(0);
                            min_ts = min_ts.min(*ts);
                            max_ts = max_ts.max(*ts);
                        }
                        Err(e) => {
                            problems.bad_records += 1;
                            note(problems, "record", e);
                        }
                    }
                }
                if good > 0 {
                    count += u64::from(good);
                    chunks.push(ChunkRef { head, len: payload.len() as u32, min_ts, max_ts, count: good });
                }
            }
            Err(e) => {
                problems.bad_chunks += 1;
                note(problems, "records chunk", e);
            }
        };
        take_chunk(c.kind, c.payload, &mut parts, &mut problems, &mut scan_records);
    }
    problems.incomplete = !parts.ended;
    drop(reader);
    Ok((parts, Records::File { file: f, chunks, count, lost }, problems))
}

fn push_record(records: &mut Vec<Rec>, problems: &mut Problems, lane: u32, ts: u64, b: &[u8]) {
    match wire::decode(b) {
        Ok(raw) => records.push(Rec { ts, lane, raw }),
        Err(e) => {
            problems.bad_records += 1;
            note(problems, "record", e);
        }
    }
}

/// Reads a trace file's bytes; `path` names it in errors.
pub(crate) fn file(bytes: &[u8], path: &Path) -> Result<(Parts, Problems), Error> {
    let mut parts = Parts::default();
    let mut problems = Problems::default();
    read_chunks(bytes, path, &mut parts, &mut problems)?;
    problems.incomplete = !parts.ended;
    Ok((parts, problems))
}

/// Reads a recorder directory: its catalog, and every ring of its channel file as it is
/// now.
pub(crate) fn dir(dir: &Path) -> Result<(Parts, Problems), Error> {
    let c = directory::read(dir)?;
    let mut parts = Parts::default();
    let mut problems = Problems::default();
    read_chunks(&c.catalog, &dir.join(CATALOG_FILE), &mut parts, &mut problems)?;
    // A live writer may be appending: a catalog cut inside its last chunk is normal.
    if problems.damage.as_ref().is_some_and(|d| d.reason.starts_with("the file ends")) {
        problems.damage = None;
    }
    problems.unfinished = c.unfinished;
    problems.unreadable_rings = c.unreadable;
    problems.bad_records += c.unstamped;
    for (slot, ts, bytes) in &c.records {
        push_record(&mut parts.records, &mut problems, *slot, *ts, bytes);
    }
    Ok((parts, problems))
}
