//! Where a trace's records are, and how they are read in timestamp order.
//!
//! A channel file of raw records is bounded by its rings' sizes: its records are held,
//! decoded and sorted. A recorder directory's records are read in place in its rings
//! (`ring_read`), a window of each ring at a time. A trace file is not bounded (a stream
//! grows for as long as its program runs): opening it reads it once, checking every
//! chunk and record and noting where each records chunk is and its earliest time; the
//! records are then read again chunk by chunk as they are reached. A stream's drain
//! writes each pass in time order, but a record stamped before a pass and committed
//! after it lands in a later chunk: the reading merges the chunks whose times overlap,
//! holding only those, so the records come out in the order a stable sort by time
//! would give, and memory stays a few chunks (a chunk is at most
//! [`MAX_CHUNK`](crate::file::MAX_CHUNK) bytes; ringtrace writes 1 MiB ones).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;

use super::ring_read::RingsReading;
use super::rings::RingRecords;
use crate::file::{self, CHUNK_HEAD};
use crate::wire::{self, RawRecord};

/// One record as read: its time, its lane, its decoded bytes.
#[derive(Clone, Debug)]
pub(crate) struct Rec {
    pub ts: u64,
    pub lane: u32,
    pub raw: RawRecord,
}

/// Chunks a reading could not read again as they were first read (the file changed on
/// disk since it was opened), and why the first could not.
#[derive(Debug, Default)]
pub(crate) struct Unread {
    pub chunks: u64,
    pub first: Option<String>,
}

/// A records chunk of a trace file, as the first reading found it.
#[derive(Debug)]
pub(crate) struct ChunkRef {
    /// Where its head starts in the file.
    pub head: u64,
    /// Its payload's length.
    pub len: u32,
    /// The earliest and latest times of its records, and how many decode.
    pub min_ts: u64,
    pub max_ts: u64,
    pub count: u32,
}

/// A trace's records.
#[derive(Debug)]
pub(crate) enum Records {
    /// Held in memory, in time order.
    Held(Vec<Rec>),
    /// In a trace file, read again chunk by chunk; `count` records decode, and their
    /// `lost` records count `lost` events.
    File { file: File, chunks: Vec<ChunkRef>, count: u64, lost: u64 },
    /// In a recorder directory's rings, read again window by window.
    Rings(RingRecords),
}

impl Records {
    /// Records that decode.
    pub fn count(&self) -> u64 {
        match self {
            Records::Held(r) => r.len() as u64,
            Records::File { count, .. } => *count,
            Records::Rings(r) => r.count,
        }
    }

    /// Events the `lost` records count.
    pub fn lost(&self) -> u64 {
        match self {
            Records::Held(r) => r.iter().map(|r| if let RawRecord::Lost { count } = r.raw { count } else { 0 }).sum(),
            Records::File { lost, .. } => *lost,
            Records::Rings(r) => r.lost,
        }
    }

    /// A reading from the first record.
    pub fn read(&self) -> Reading<'_> {
        self.read_window(0..u64::MAX, None)
    }

    /// A time that splits a trace file's records into two halves of about as many
    /// records: those before it, and those at or after it. `None` for held records, or
    /// a file of one chunk.
    pub fn middle(&self) -> Option<u64> {
        let Records::File { chunks, count, .. } = self else { return None };
        let first = chunks.iter().map(|c| c.min_ts).min()?;
        let mut before = 0u64;
        for c in chunks {
            if before + u64::from(c.count) > count / 2 {
                return (c.min_ts > first).then_some(c.min_ts);
            }
            before += u64::from(c.count);
        }
        None
    }

    /// A reading of a trace file's records of times `times` alone, in the order a whole
    /// reading gives them (so that readings of `..t` and `t..` one after the other give
    /// what one reading gives); with `kinds`, only the records whose kind byte it
    /// accepts are decoded and given. (A held trace: all its records, whatever `times`
    /// and `kinds`.)
    pub fn read_window(&self, times: Range<u64>, kinds: Option<fn(u8) -> bool>) -> Reading<'_> {
        match self {
            Records::Held(r) => Reading::Held(r.iter()),
            Records::Rings(r) => Reading::Rings(RingsReading::new(r, times, kinds)),
            Records::File { file, chunks, .. } => {
                // The chunks holding a record of the window, in file order.
                let chunks: Vec<&ChunkRef> =
                    chunks.iter().filter(|c| c.max_ts >= times.start && c.min_ts < times.end).collect();
                Reading::File(FileReading {
                    file,
                    later_min: later_min(&chunks),
                    runs: (0..chunks.len()).map(|_| None).collect(),
                    chunks,
                    next_chunk: 0,
                    heads: BinaryHeap::new(),
                    spare: Vec::new(),
                    retired: None,
                    peak: 0,
                    kinds,
                    times,
                })
            }
        }
    }
}

/// `later_min[i]`: the earliest time in chunks `i..` (`u64::MAX` past the last).
fn later_min(chunks: &[&ChunkRef]) -> Vec<u64> {
    let mut later_min = vec![u64::MAX; chunks.len() + 1];
    for i in (0..chunks.len()).rev() {
        later_min[i] = later_min[i + 1].min(chunks[i].min_ts);
    }
    later_min
}

/// A loaded chunk: its bytes, and its records in time order (time, lane, where).
struct Run {
    buf: Vec<u8>,
    order: Vec<(u64, u32, u32, u32)>,
    next: usize,
}

/// A reading of a trace file's records.
pub(crate) struct FileReading<'a> {
    file: &'a File,
    chunks: Vec<&'a ChunkRef>,
    later_min: Vec<u64>,
    /// The first chunk not loaded yet.
    next_chunk: usize,
    /// The loaded chunks still holding records to give, by chunk number.
    runs: Vec<Option<Run>>,
    /// Each loaded chunk's next record: (time, chunk number), earliest on top; ties go to
    /// the earlier chunk, as a stable sort by time would order them.
    heads: BinaryHeap<Reverse<(u64, usize)>>,
    /// A buffer of a finished chunk, for the next.
    spare: Vec<Vec<u8>>,
    /// The chunk the last record given lies in, when it had no more.
    retired: Option<Vec<u8>>,
    /// The most chunks held at once.
    peak: usize,
    /// Which kinds of records to give (all, if `None`), and of which times.
    kinds: Option<fn(u8) -> bool>,
    times: Range<u64>,
}

impl FileReading<'_> {
    /// Loads chunk `i`; a chunk that cannot be read again as it was read first (the file
    /// changed on disk) is counted in `unread` and skipped.
    fn load(&mut self, i: usize, unread: &mut Unread) {
        let c = self.chunks[i];
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.resize(CHUNK_HEAD + c.len as usize, 0);
        let why = match self.file.read_exact_at(&mut buf, c.head) {
            Err(e) => Some(e.to_string()),
            Ok(()) => {
                let (head, payload) = buf.split_at(CHUNK_HEAD);
                let crc = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
                (!file::chunk_sound(head, payload, crc)).then(|| "it changed since it was opened".to_string())
            }
        };
        if let Some(why) = why {
            unread.chunks += 1;
            if unread.first.is_none() {
                unread.first = Some(format!("records chunk at byte {}: {why}", c.head));
            }
            self.spare.push(buf);
            return;
        }
        // A chunk whose records do not parse, or that holds none, was counted when the
        // file was opened.
        let Ok(rs) = file::records(&buf[CHUNK_HEAD..]) else {
            self.spare.push(buf);
            return;
        };
        let base = buf.as_ptr() as usize;
        let mut order: Vec<_> =
            rs.iter().map(|&(lane, ts, b)| (ts, lane, (b.as_ptr() as usize - base) as u32, b.len() as u32)).collect();
        if order.is_empty() {
            self.spare.push(buf);
            return;
        }
        // Stable: records of equal times keep their order in the file.
        if !order.is_sorted_by_key(|r| r.0) {
            order.sort_by_key(|r| r.0);
        }
        self.heads.push(Reverse((order[0].0, i)));
        self.runs[i] = Some(Run { buf, order, next: 0 });
        self.peak = self.peak.max(self.heads.len());
    }

    /// The next record of the window and kinds wanted, in place: its time, lane and
    /// bytes (which may not decode: pass 1 counted those).
    #[inline]
    fn next_bytes(&mut self, unread: &mut Unread) -> Option<(u64, u32, &[u8])> {
        // The chunk the last record came from, if it had no more: reused from now on.
        if let Some(buf) = self.retired.take() {
            self.spare.push(buf);
        }
        // Each turn loads a chunk or steps over a record: bounded by chunks and records.
        loop {
            let top = self.heads.peek().map(|Reverse((ts, _))| *ts);
            // A chunk not loaded yet may hold a record earlier than every loaded one.
            if self.next_chunk < self.chunks.len() && top.is_none_or(|t| self.later_min[self.next_chunk] < t) {
                self.load(self.next_chunk, unread);
                self.next_chunk += 1;
                continue;
            }
            let Reverse((_, i)) = self.heads.pop()?;
            let run = self.runs[i].as_mut().expect("a head names a loaded chunk");
            let (ts, lane, start, len) = run.order[run.next];
            run.next += 1;
            let last = match run.order.get(run.next) {
                Some(&(next_ts, ..)) => {
                    self.heads.push(Reverse((next_ts, i)));
                    false
                }
                None => true,
            };
            let kind = run.buf.get(start as usize).copied();
            if !self.times.contains(&ts) || !self.kinds.is_none_or(|k| kind.is_some_and(k)) {
                if last {
                    self.spare.push(self.runs[i].take().expect("loaded").buf);
                }
                continue;
            }
            let buf = if last {
                &*self.retired.insert(self.runs[i].take().expect("loaded").buf)
            } else {
                &self.runs[i].as_ref().expect("loaded").buf
            };
            return Some((ts, lane, &buf[start as usize..][..len as usize]));
        }
    }
}

/// A record as a reading gives it: in place in a trace file's chunk, or held decoded.
pub(crate) enum Got<'r> {
    Bytes { ts: u64, lane: u32, bytes: &'r [u8] },
    Held(&'r Rec),
}

/// A reading of a trace's records in time order.
pub(crate) enum Reading<'a> {
    Held(std::slice::Iter<'a, Rec>),
    File(FileReading<'a>),
    Rings(RingsReading<'a>),
}

/// The next record of a recorder directory's reading, what it could not read again
/// counted in `unread`.
fn next_in_rings<'r>(r: &'r mut RingsReading<'_>, unread: &mut Unread) -> Option<(u64, u32, &'r [u8])> {
    r.next_bytes(&mut unread.chunks, &mut unread.first)
}

impl Reading<'_> {
    /// The next record, decoded; what cannot be read again is counted in `unread`.
    pub fn next(&mut self, unread: &mut Unread) -> Option<Rec> {
        match self {
            Reading::Held(it) => it.next().cloned(),
            Reading::File(f) => loop {
                let (ts, lane, bytes) = f.next_bytes(unread)?;
                // One that does not decode was counted when the file was opened.
                if let Ok(raw) = wire::decode(bytes) {
                    return Some(Rec { ts, lane, raw });
                }
            },
            Reading::Rings(r) => loop {
                let (ts, lane, bytes) = next_in_rings(r, unread)?;
                // One that does not decode was counted when the directory was opened.
                if let Ok(raw) = wire::decode(bytes) {
                    return Some(Rec { ts, lane, raw });
                }
            },
        }
    }

    /// The next record as it lies: nothing is copied out of a trace file's chunk.
    pub fn next_got(&mut self, unread: &mut Unread) -> Option<Got<'_>> {
        match self {
            Reading::Held(it) => it.next().map(Got::Held),
            Reading::File(f) => f.next_bytes(unread).map(|(ts, lane, bytes)| Got::Bytes { ts, lane, bytes }),
            Reading::Rings(r) => next_in_rings(r, unread).map(|(ts, lane, bytes)| Got::Bytes { ts, lane, bytes }),
        }
    }
}

impl std::fmt::Debug for Reading<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reading::Held(it) => write!(f, "Reading::Held({} left)", it.len()),
            Reading::File(r) => write!(f, "Reading::File(chunk {} of {})", r.next_chunk, r.chunks.len()),
            Reading::Rings(r) => write!(f, "Reading::{r:?}"),
        }
    }
}

#[cfg(test)]
mod tests;
