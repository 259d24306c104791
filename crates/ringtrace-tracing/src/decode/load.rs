//! Reading a trace file (a dump or a stream) or a recorder directory into its parts,
//! checking everything: what cannot be read is counted in [`Problems`], never guessed.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use foldhash::HashMap;

use super::records::{ChunkRef, Rec, Records};
use super::ring_scan;
use crate::catalog::{Callsite, ThreadInfo};
use crate::directory::not_a_trace;
use crate::error::Error;
use crate::file::{self, chunk, Damage, Losses, Process, CATALOG_FILE, CHUNK_HEAD};
use crate::wire::{self, WireError};

/// What could not be read, counted: a trace is decoded as far as it is sound.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problems {
    /// Damaged chunks (failing their checksums, or with a length over the limit), in
    /// file order, each skipped: reading goes on at the next chunk, which confirms the
    /// damaged one's length; where none does, the last runs to the end of the file,
    /// where reading stopped ([`Damage::stopped`]).
    pub damaged: Vec<Damage>,
    /// Where the file ends inside a chunk: it is cut short (its writer did not finish,
    /// or a copy of it was cut).
    pub cut: Option<Damage>,
    /// A file without its end chunk: its writer did not finish (a stream whose process
    /// died, or a file cut short). Not said of a file whose damaged last bytes may have
    /// held it.
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
        !self.damaged.is_empty()
            || self.cut.is_some()
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

/// A chunk other than records, decoded.
enum Meta {
    Process(Result<Process, WireError>),
    Callsite(Result<Callsite, WireError>),
    Thread(Result<ThreadInfo, WireError>),
    Stats(Result<Vec<(String, u64)>, WireError>),
    End,
    Unknown,
}

fn decode_meta(kind: u8, payload: &[u8]) -> Meta {
    match kind {
        chunk::PROCESS => Meta::Process(Process::decode(payload)),
        chunk::CALLSITE => Meta::Callsite(Callsite::decode(payload)),
        chunk::THREAD => Meta::Thread(ThreadInfo::decode(payload)),
        chunk::STATS => Meta::Stats(file::decode_stats(payload)),
        chunk::END => Meta::End,
        _ => Meta::Unknown,
    }
}

fn apply_meta(m: Meta, parts: &mut Parts, problems: &mut Problems) {
    let mut bad = |what: &str, e: WireError| {
        problems.bad_chunks += 1;
        note(problems, what, e);
    };
    match m {
        Meta::Process(Ok(p)) => parts.process = Some(p),
        Meta::Callsite(Ok(c)) => {
            parts.callsites.insert(c.id, c);
        }
        Meta::Thread(Ok(t)) => parts.threads.push(t),
        Meta::Stats(Ok(s)) => parts.stats = s,
        Meta::Process(Err(e)) => bad("process chunk", e),
        Meta::Callsite(Err(e)) => bad("callsite chunk", e),
        Meta::Thread(Err(e)) => bad("thread chunk", e),
        Meta::Stats(Err(e)) => bad("stats chunk", e),
        Meta::End => parts.ended = true,
        Meta::Unknown => problems.unknown_chunks += 1,
    }
}

/// Decodes a records chunk's payload into `records`.
fn hold_records(payload: &[u8], records: &mut Vec<Rec>, problems: &mut Problems) {
    match file::records(payload) {
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

/// Whether a file of `len` bytes whose end chunk was not read was left unfinished: not
/// if its last bytes are damaged (they may have held the end chunk).
fn unfinished(ended: bool, damaged: &[Damage], len: u64) -> bool {
    !ended && damaged.last().is_none_or(|d| d.offset + d.bytes < len)
}

fn read_chunks(bytes: &[u8], path: &Path, parts: &mut Parts, problems: &mut Problems) -> Result<(), Error> {
    let (chunks, Losses { damaged, cut }) = file::chunks(bytes).map_err(|e| not_a_trace(path, e))?;
    problems.damaged = damaged;
    problems.cut = cut;
    for (kind, payload) in chunks {
        if kind == chunk::RECORDS {
            hold_records(payload, &mut parts.records, problems);
        } else {
            apply_meta(decode_meta(kind, payload), parts, problems);
        }
    }
    Ok(())
}

/// A records chunk, checked: its records' times, how many decode, what their `lost`
/// records count, those that do not decode (and why the first does not).
struct Summary {
    min_ts: u64,
    max_ts: u64,
    good: u32,
    lost: u64,
    bad: u64,
    first_bad: Option<WireError>,
}

/// A chunk of a trace file, read and checked.
enum Checked {
    /// It fails its checksum; the records and events it frames, if a records chunk
    /// whose framing parses.
    Unsound(Option<(u64, u64)>),
    Records(Result<Summary, WireError>),
    Meta(Meta),
}

fn summarize(payload: &[u8]) -> Result<Summary, WireError> {
    let mut s = Summary { min_ts: u64::MAX, max_ts: 0, good: 0, lost: 0, bad: 0, first_bad: None };
    for (_, ts, b) in file::records(payload)? {
        match wire::check(b) {
            Ok(n) => {
                s.good += 1;
                s.lost += n.unwrap_or(0);
                s.min_ts = s.min_ts.min(ts);
                s.max_ts = s.max_ts.max(ts);
            }
            Err(e) => {
                s.bad += 1;
                s.first_bad.get_or_insert(e);
            }
        }
    }
    Ok(s)
}

/// Reads chunk `c` of `f` (its head again, and its payload) and checks it.
fn check(f: &File, c: &file::ChunkAt, buf: &mut Vec<u8>) -> io::Result<Checked> {
    buf.resize(CHUNK_HEAD + c.len as usize, 0);
    f.read_exact_at(buf, c.head)?;
    let (head, payload) = buf.split_at(CHUNK_HEAD);
    if !file::chunk_sound(head, payload, c.crc) {
        return Ok(Checked::Unsound(if c.kind == chunk::RECORDS { file::frame_count(payload) } else { None }));
    }
    Ok(match c.kind {
        chunk::RECORDS => Checked::Records(summarize(payload)),
        kind => Checked::Meta(decode_meta(kind, payload)),
    })
}

/// Bytes of chunks from which [`scan`] checks them on two threads.
const TWO_THREADS_FROM: u64 = 8 << 20;

/// Reads a trace file without holding its records: every chunk and record is checked,
/// and where each records chunk lies is noted, for [`Records::File`] to read them again
/// as they are reached. The chunks are found by their heads first, then read and
/// checked (on two threads, for a large file on a machine with two CPUs: half the
/// chunks each), then taken in file order, skipping those that fail their checksums
/// where the next chunk confirms their lengths, and stopping at one where it does not
/// (see [`file::resolve`]).
pub(crate) fn scan(path: &Path) -> Result<(Parts, Records, Problems), Error> {
    let io = |e| Error::io("reading", path, e);
    let f = File::open(path).map_err(|e| Error::io("opening", path, e))?;
    // A file still being written is read as it is now.
    let len = f.metadata().map_err(io)?.len();
    let mut h = [0u8; file::HEADER_LEN];
    let n = (len as usize).min(file::HEADER_LEN);
    f.read_exact_at(&mut h[..n], 0).map_err(io)?;
    file::check_header(&h[..n]).map_err(|e| not_a_trace(path, e))?;
    let (heads, stop) = file::chunk_heads(&f, len).map_err(io)?;
    let bytes: u64 = heads.iter().map(|c| u64::from(c.len)).sum();
    let two = bytes >= TWO_THREADS_FROM && std::thread::available_parallelism().map_or(1, |n| n.get()) > 1;
    let checked: io::Result<Vec<Checked>> = if two {
        std::thread::scope(|s| {
            let odd = s.spawn(|| {
                let mut buf = Vec::new();
                heads.iter().skip(1).step_by(2).map(|c| check(&f, c, &mut buf)).collect::<Vec<_>>()
            });
            let mut buf = Vec::new();
            let even: Vec<_> = heads.iter().step_by(2).map(|c| check(&f, c, &mut buf)).collect();
            let odd = odd.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            let mut odd = odd.into_iter();
            even.into_iter().flat_map(|e| std::iter::once(e).chain(odd.next())).collect()
        })
    } else {
        let mut buf = Vec::new();
        heads.iter().map(|c| check(&f, c, &mut buf)).collect()
    };
    let checked = checked.map_err(io)?;
    let sound: Vec<bool> = checked.iter().map(|c| !matches!(c, Checked::Unsound(_))).collect();
    let (read, losses) = file::resolve(&heads, stop, len, &sound, |i| match checked.get(i) {
        Some(Checked::Unsound(n)) => *n,
        _ => None,
    });
    let mut parts = Parts::default();
    let mut problems = Problems::default();
    let (mut chunks, mut count, mut lost) = (Vec::new(), 0u64, 0u64);
    for ((c, checked), read) in heads.iter().zip(checked).zip(read) {
        if !read {
            continue;
        }
        match checked {
            Checked::Unsound(_) => {}
            Checked::Meta(m) => apply_meta(m, &mut parts, &mut problems),
            Checked::Records(Err(e)) => {
                problems.bad_chunks += 1;
                note(&mut problems, "records chunk", e);
            }
            Checked::Records(Ok(s)) => {
                problems.bad_records += s.bad;
                if let Some(e) = s.first_bad {
                    note(&mut problems, "record", e);
                }
                lost += s.lost;
                if s.good > 0 {
                    count += u64::from(s.good);
                    chunks.push(ChunkRef {
                        head: c.head,
                        len: c.len,
                        min_ts: s.min_ts,
                        max_ts: s.max_ts,
                        count: s.good,
                    });
                }
            }
        }
    }
    problems.incomplete = unfinished(parts.ended, &losses.damaged, len);
    problems.damaged = losses.damaged;
    problems.cut = losses.cut;
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
    problems.incomplete = unfinished(parts.ended, &problems.damaged, bytes.len() as u64);
    Ok((parts, problems))
}

/// Opens a recorder directory: walks every ring of its channel file as it is now,
/// checking its records and noting where they lie (for [`Records::Rings`] to read them
/// again), and reads its catalog.
pub(crate) fn dir(dir: &Path) -> Result<(Parts, Records, Problems), Error> {
    let s = ring_scan::scan(dir)?;
    let mut parts = Parts::default();
    let mut problems = Problems::default();
    read_chunks(&s.catalog, &dir.join(CATALOG_FILE), &mut parts, &mut problems)?;
    // A live writer may be appending: a catalog cut inside its last chunk is normal.
    problems.cut = None;
    problems.unfinished = s.unfinished;
    problems.unreadable_rings = s.unreadable;
    problems.bad_records += s.unstamped + s.bad;
    if let Some(e) = s.first_bad {
        note(&mut problems, "record", e);
    }
    Ok((parts, Records::Rings(s.records), problems))
}
