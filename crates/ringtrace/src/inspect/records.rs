//! [`Records`]: the records a ring holds, copied out of the file and walked without
//! trusting a byte of them.

use super::header::{Header, RingKind, RingMode};
use super::state::State;
use crate::format::record::aux as aux_word;
use crate::format::record::{footprint, len_word, BUSY_BIT, DISCARD_BIT, HDR_SIZE, LEN_MASK};

/// How many unfinished records [`Records::unfinished`] lists (all are counted).
pub const MAX_LISTED_UNFINISHED: usize = 64;

/// One committed record: its position, its producer's pid, its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Position of the record's header (bytes since the ring was created).
    pub pos: u64,
    /// Process id of the producer that wrote it.
    pub pid: u32,
    /// The payload.
    pub payload: &'a [u8],
}

impl Record<'_> {
    /// Position just past the record: where the next one starts.
    pub fn end(&self) -> u64 {
        self.pos + footprint(self.payload.len() as u32)
    }
}

/// A record that was not finished when the ring was read, stepped over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unfinished {
    /// Its position.
    pub pos: u64,
    /// Process id of its producer, if its header was written (BUSY); `None`: the space
    /// is claimed and the header still zero.
    pub pid: Option<u32>,
    /// Bytes stepped over: the record's footprint (BUSY), or up to the next plausible
    /// header (zero header).
    pub bytes: u64,
}

/// Where the walk stopped at a header no producer could have written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt {
    /// Position of the bad header.
    pub pos: u64,
    /// The header's 64-bit value (native endian).
    pub header: u64,
}

/// A committed record found by the walk (payload at `pos + 8` in the copy).
#[derive(Clone, Copy, Debug)]
struct Found {
    pos: u64,
    pid: u32,
    len: u32,
}

/// The records a ring held, oldest first ([`crate::inspect::RingFile::records`],
/// [`crate::inspect::RingFile::records_from`]), with what was skipped.
#[derive(Clone, Debug, Default)]
pub struct Records {
    /// The ring's bytes of `[start, start + bytes.len())`.
    bytes: Vec<u8>,
    start: u64,
    found: Vec<Found>,
    window: (u64, u64),
    end: u64,
    resume: u64,
    discarded: u64,
    unfinished_count: u64,
    unfinished: Vec<Unfinished>,
    corrupt: Option<Corrupt>,
    gone: u64,
    missed_bytes: u64,
    retired_before: Option<u64>,
}

impl Records {
    /// Committed records held.
    pub fn len(&self) -> usize {
        self.found.len()
    }

    /// Whether there is no committed record.
    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// The records, oldest first; `.rev()` walks newest first.
    pub fn iter(&self) -> RecordsIter<'_> {
        RecordsIter { records: self, front: 0, back: self.found.len() }
    }

    fn record(&self, f: Found) -> Record<'_> {
        // In range: the walk found the record inside the copy (an empty payload if not,
        // rather than a panic).
        let at = (f.pos - self.start + HDR_SIZE) as usize;
        let payload = self.bytes.get(at..at.saturating_add(f.len as usize)).unwrap_or(&[]);
        Record { pos: f.pos, pid: f.pid, payload }
    }

    /// The ring's window when it was read: `[consumer read position, producer position)`
    /// in discard mode, `[overwrite position, producer position)` in overwrite mode
    /// (see [`State::window`]).
    pub fn window(&self) -> (u64, u64) {
        self.window
    }

    /// Where the walk ended: the producer position, or where it stopped (a corrupt
    /// header, or an unfinished record when asked to stop there).
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Where a follower reads next ([`crate::inspect::RingFile::records_from`]): the first unfinished
    /// record if the walk stopped there, else [`end`](Self::end).
    pub fn resume_at(&self) -> u64 {
        self.resume
    }

    /// Discarded records stepped over.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    /// Unfinished records stepped over (still being written, or their producer died).
    pub fn unfinished_count(&self) -> u64 {
        self.unfinished_count
    }

    /// The first [`MAX_LISTED_UNFINISHED`] unfinished records stepped over.
    pub fn unfinished(&self) -> &[Unfinished] {
        &self.unfinished
    }

    /// The header the walk stopped at, if it found one no producer could have written
    /// (the records after it are not read).
    pub fn corrupt(&self) -> Option<Corrupt> {
        self.corrupt
    }

    /// Committed records whose space the consumer (discard mode) or producers (overwrite
    /// mode) reclaimed while the ring was being copied (their bytes may have changed, so
    /// they are not read), counted from the ring's counters read before and after the
    /// copy: for a read from a position past the oldest record, records before that
    /// position reclaimed meanwhile count too.
    pub fn gone_during_read(&self) -> u64 {
        self.gone
    }

    /// [`crate::inspect::RingFile::records_from`]: bytes of records between the position asked for and
    /// the oldest record still held, which were consumed or overwritten before they
    /// could be read.
    pub fn missed_bytes(&self) -> u64 {
        self.missed_bytes
    }

    /// Overwrite mode: committed records the ring had overwritten before the window's
    /// start ([`Records::window`]), as read with it.
    pub fn retired_before(&self) -> Option<u64> {
        self.retired_before
    }
}

/// Iterator over [`Records`], oldest first; double-ended.
#[derive(Clone, Debug)]
pub struct RecordsIter<'a> {
    records: &'a Records,
    front: usize,
    back: usize,
}

impl<'a> Iterator for RecordsIter<'a> {
    type Item = Record<'a>;
    fn next(&mut self) -> Option<Record<'a>> {
        (self.front < self.back).then(|| {
            self.front += 1;
            self.records.record(self.records.found[self.front - 1])
        })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.back - self.front, Some(self.back - self.front))
    }
}

impl<'a> DoubleEndedIterator for RecordsIter<'a> {
    fn next_back(&mut self) -> Option<Record<'a>> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            self.records.record(self.records.found[self.back])
        })
    }
}

impl ExactSizeIterator for RecordsIter<'_> {}

impl<'a> IntoIterator for &'a Records {
    type Item = Record<'a>;
    type IntoIter = RecordsIter<'a>;
    fn into_iter(self) -> RecordsIter<'a> {
        self.iter()
    }
}

/// The walk over a copy of `[start, start + bytes.len())`.
struct Walk<'b> {
    bytes: &'b [u8],
    start: u64,
    end: u64,
}

impl Walk<'_> {
    /// The word at `pos` (`start <= pos`, `pos + 8 <= end`, both multiples of 8); 0 if
    /// out of the copy (never, by the callers' checks).
    fn word(&self, pos: u64) -> u64 {
        let at = usize::try_from(pos.wrapping_sub(self.start)).unwrap_or(usize::MAX);
        crate::format::offsets::u64_at(self.bytes, at)
    }

    /// The end of the record whose header `h` is at `pos`, if it is one a producer could
    /// have written and it ends inside the copy.
    fn record_end(&self, pos: u64, h: u64) -> Option<u64> {
        if aux_word(h) == 0 {
            return None;
        }
        let end = pos.checked_add(footprint(len_word(h) & LEN_MASK))?;
        (end <= self.end).then_some(end)
    }

    /// The first position at or after `pos` (a multiple of 8) whose word is not zero,
    /// or the end: zero blocks are stepped over a page at a time (a sparse file's holes
    /// are long runs of them).
    fn skip_zeros(&self, mut pos: u64) -> u64 {
        const PAGE: u64 = 4096;
        static ZERO: [u8; PAGE as usize] = [0; PAGE as usize];
        while pos < self.end {
            let at = usize::try_from(pos.wrapping_sub(self.start)).unwrap_or(usize::MAX);
            if pos + PAGE <= self.end && self.bytes.get(at..at.saturating_add(PAGE as usize)) == Some(&ZERO[..]) {
                pos += PAGE;
                continue;
            }
            if self.word(pos) != 0 {
                return pos;
            }
            pos += HDR_SIZE;
        }
        self.end
    }

    /// Whether the nonzero word at `pos` looks like a record header: a valid record
    /// whose next header is the end of the copy, zero, or valid too.
    fn plausible(&self, pos: u64, h: u64) -> bool {
        let Some(next) = self.record_end(pos, h) else { return false };
        if next == self.end {
            return true;
        }
        let h2 = self.word(next);
        h2 == 0 || self.record_end(next, h2).is_some()
    }
}

/// What the walk does at an unfinished record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AtUnfinished {
    /// Steps over it (snapshots, `tail` without `--follow`).
    Skip,
    /// Stops there (a follower, which reads it again when it is finished).
    Stop,
}

impl Records {
    /// Walks `bytes`, the copy of positions `[start, end of the window)` of a ring with
    /// header `h`, read while its state was `s1`, from the record boundary `walk_from`
    /// (`start <= walk_from <= end`: where the intact part of the copy begins). `from`:
    /// the position a follower asked for (`None` for the whole window).
    pub(super) fn walk_copy(
        h: &Header,
        s1: &State,
        from: Option<u64>,
        start: u64,
        walk_from: u64,
        bytes: Vec<u8>,
        at_unfinished: AtUnfinished,
    ) -> Records {
        let window = s1.window(h.mode);
        let mut out = Records {
            start,
            window,
            missed_bytes: from.map_or(0, |f| window.0.saturating_sub(f)),
            retired_before: (h.mode == RingMode::Overwrite).then_some(s1.overwritten),
            ..Records::default()
        };
        // A single producer in discard mode writes its record before its header: a zero
        // header is its one unfinished record, up to the producer position.
        let zero_is_last = h.kind == RingKind::Spsc && h.mode == RingMode::Discard;
        let end = window.1.max(walk_from);
        walk(&Walk { bytes: &bytes, start, end }, walk_from, zero_is_last, at_unfinished, &mut out);
        out.bytes = bytes;
        out
    }

    /// Moves the window's start to where `s2` has it (the walk began there: the space
    /// before it was reclaimed during the copy), and counts the committed records
    /// reclaimed between the positions' two readings `s1` and `s2` from the ring's
    /// counters (the copy of their bytes cannot be trusted to count them).
    pub(super) fn drop_reclaimed(&mut self, mode: RingMode, s1: &State, s2: &State, from: Option<u64>) {
        let (lo2, _) = s2.window(mode);
        if lo2 <= self.start {
            return;
        }
        self.gone = match mode {
            RingMode::Overwrite => s2.overwritten.saturating_sub(s1.overwritten),
            RingMode::Discard => s2.consumed.saturating_sub(s1.consumed),
        };
        self.found.retain(|f| f.pos >= lo2);
        self.unfinished.retain(|u| u.pos >= lo2);
        self.window.0 = lo2;
        // A consumer that passed the producer position read before the copy: the
        // window read then is empty now.
        self.window.1 = self.window.1.max(lo2);
        if let Some(from) = from {
            self.missed_bytes = lo2.saturating_sub(from);
        }
        if mode == RingMode::Overwrite {
            self.retired_before = Some(s2.overwritten);
        }
        // The walk may have stopped below `lo2`; what lies past that is read next time.
        self.end = self.end.max(lo2);
        self.resume = self.resume.max(lo2);
    }
}

/// Walks the copy from its start to its end, filling `out` (`found`, counts, `end`,
/// `resume`, `corrupt`). Bounded: every step moves at least 8 bytes forward, and the
/// scan over a zero header looks at each word once (plus one word of look-ahead).
fn walk(w: &Walk<'_>, from: u64, zero_is_last: bool, at_unfinished: AtUnfinished, out: &mut Records) {
    let mut pos = from;
    let mut resume = None;
    let unfinished = |out: &mut Records, u: Unfinished| {
        out.unfinished_count += 1;
        if out.unfinished.len() < MAX_LISTED_UNFINISHED {
            out.unfinished.push(u);
        }
    };
    while pos < w.end {
        let h = w.word(pos);
        if h == 0 {
            if at_unfinished == AtUnfinished::Stop {
                resume = Some(pos);
                break;
            }
            // Claimed, header not written: step to the next plausible header.
            let mut next = pos + HDR_SIZE;
            if zero_is_last {
                next = w.end;
            }
            while next < w.end {
                next = w.skip_zeros(next);
                if next >= w.end || w.plausible(next, w.word(next)) {
                    break;
                }
                next += HDR_SIZE;
            }
            unfinished(out, Unfinished { pos, pid: None, bytes: next - pos });
            pos = next;
            continue;
        }
        let Some(next) = w.record_end(pos, h) else {
            out.corrupt = Some(Corrupt { pos, header: h });
            break;
        };
        let word = len_word(h);
        if word & BUSY_BIT != 0 {
            if at_unfinished == AtUnfinished::Stop {
                resume = Some(pos);
                break;
            }
            unfinished(out, Unfinished { pos, pid: Some(aux_word(h)), bytes: next - pos });
        } else if word & DISCARD_BIT != 0 {
            out.discarded += 1;
        } else {
            out.found.push(Found { pos, pid: aux_word(h), len: word & LEN_MASK });
        }
        pos = next;
    }
    out.end = pos;
    out.resume = resume.unwrap_or(pos);
}
