//! [`Paused`]: perf's `PAUSE_OUTPUT` for an overwrite ring, and reading it in place.
//!
//! This module holds the overwrite mode's one `unsafe`: slices into the ring's memory
//! while it is paused.

use std::fmt;
use std::marker::PhantomData;
use std::sync::OnceLock;
use std::time::Duration;

use super::snapshot::Snapshot;
use crate::callback::{Held, Iter};
use crate::config::ProducerKind;
use crate::error::Error;
use crate::format::record::{footprint, len_word, BUSY_BIT, DISCARD_BIT, HDR_SIZE, LEN_MASK};
use crate::protocol::capture::Found;
use crate::protocol::core::PauseRefused;
use crate::protocol::core::PauseToken;
use crate::region::Region;
use crate::shared::Shared;
use crate::sync::Ordering::Relaxed;

/// A paused overwrite ring ([`crate::RingBuf::pause`]): producers' reserves fail at once (and
/// are counted in [`Stats::refused_paused`](crate::Stats::refused_paused)) until it is
/// dropped or [`resume`](Self::resume)d, and the records it holds can be read in place,
/// without a copy, in either direction.
///
/// Pausing does not index the records: the first call that needs them ([`len`](Self::len),
/// [`is_empty`](Self::is_empty), [`iter`](Self::iter), [`snapshot`](Self::snapshot))
/// walks the paused span once (about 8 bytes of index per record) while producers are
/// still refused. To copy the records out and let producers go on while the copy is
/// indexed, use [`into_snapshot`](Self::into_snapshot).
///
/// ```
/// use ringtrace::{FlightRecorder, ReserveError, Wakeup};
///
/// let ring = FlightRecorder::new(4096)?;
/// let mut p = ring.producer()?;
/// p.output(b"one", Wakeup::Default)?;
/// p.output(b"two", Wakeup::Default)?;
///
/// let paused = ring.pause()?;
/// assert!(matches!(p.output(b"three", Wakeup::Default), Err(ReserveError::Paused { .. })));
/// let newest_first: Vec<&[u8]> = paused.iter().rev().collect();
/// assert_eq!(newest_first, [&b"two"[..], &b"one"[..]]);
/// paused.resume();
///
/// p.output(b"three", Wakeup::Default)?;
/// assert_eq!(ring.stats().refused_paused, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "if unused the ring resumes at once"]
pub struct Paused<'a, K: ProducerKind> {
    ring: &'a Shared,
    _kind: PhantomData<fn() -> K>,
    token: Option<PauseToken>,
    /// The committed records in `[over_pos, prod)`, oldest first: built by the first
    /// reader that needs it ([`Self::index`]), not by the pause.
    index: OnceLock<Vec<Entry>>,
}

/// A record of the paused span: its header's offset from the oldest position (the span
/// is shorter than the ring, at most 4 GiB) and its payload length, read when indexed.
#[derive(Clone, Copy, Debug)]
struct Entry {
    off: u32,
    len: u32,
}

impl<K: ProducerKind> fmt::Debug for Paused<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Paused")
            .field("oldest_position", &self.oldest_position())
            .field("end_position", &self.end_position())
            .field("indexed_records", &self.index.get().map(Vec::len))
            .field("token", &self.token)
            .finish()
    }
}

impl<'a, K: ProducerKind> Paused<'a, K> {
    pub(crate) fn new(ring: &'a Shared, limit: Duration) -> Result<Self, Error> {
        let core = &ring.core;
        let began = std::time::Instant::now();
        let token = core.pause(ring.writable, limit).map_err(|e| match e {
            PauseRefused::Already => Error::AlreadyPaused,
            // The time measured (at least the limit: the wait gives up only past it).
            PauseRefused::Busy => Error::PauseBusy { waited: began.elapsed() },
        })?;
        Ok(Paused { ring, _kind: PhantomData, token: Some(token), index: OnceLock::new() })
    }

    /// The paused span's records, indexed on first use: a walk of the headers from
    /// the oldest position to the producer position (every one final: the pause saw
    /// each record finished, with Acquire loads, and nothing rewrites them while it
    /// lasts), stepping over discarded records, records whose producer died (BUSY, by
    /// their length) and dead claims with no header (by the length the pause found).
    fn index(&self) -> &[Entry] {
        self.index.get_or_init(|| {
            let Some(t) = self.token.as_ref() else { return Vec::new() };
            let core = &self.ring.core;
            let mut index = Vec::new();
            // Relaxed: the pause's Acquire loads of these headers (on this thread, or on
            // one that handed the guard over, which orders them before this) made them
            // and their payloads visible.
            walk_span(
                t.over_pos,
                t.prod,
                &t.skips,
                |x| core.region.header(x).load(Relaxed),
                |pos, len| {
                    index.push(Entry { off: (pos - t.over_pos) as u32, len });
                },
            );
            index
        })
    }

    /// Committed records held (indexing them, the first time: see the type's docs).
    pub fn len(&self) -> usize {
        self.index().len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.index().is_empty()
    }

    /// The records' payloads, in place, oldest first; `.rev()` walks newest to oldest.
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self)
    }

    /// Position of the oldest record.
    pub fn oldest_position(&self) -> u64 {
        self.token.as_ref().map_or(0, |t| t.over_pos)
    }

    /// The producer position: just past the newest record.
    pub fn end_position(&self) -> u64 {
        self.token.as_ref().map_or(0, |t| t.prod)
    }

    /// A copy of the records, as a [`Snapshot`] (to keep, or write to a file), taken
    /// while the ring stays paused: the span's bytes are copied and the copy indexed
    /// (from this guard's index if it has one) before it returns. A copy of a large
    /// ring costs fresh memory each time (its bytes, and 16 bytes of index per record):
    /// see [`into_snapshot`](Self::into_snapshot), which resumes before indexing, and
    /// [`RingBuf::snapshot_into`](crate::RingBuf::snapshot_into), which reuses a
    /// snapshot's memory.
    pub fn snapshot(&self) -> Snapshot {
        let mut snap = self.copy();
        match self.index.get() {
            Some(index) => index_from(&mut snap, index),
            None => index_copy(&mut snap, self.token.as_ref().map_or(&[][..], |t| &t.skips)),
        }
        Snapshot::settle(self.ring, &mut snap);
        snap
    }

    /// Copies the records, resumes the ring, then indexes the copy: producers are
    /// refused only while the bytes are copied, not while the records are found. The
    /// same [`Snapshot`] as [`snapshot`](Self::snapshot) then [`resume`](Self::resume).
    ///
    /// ```
    /// use ringtrace::{FlightRecorder, Wakeup};
    ///
    /// let ring = FlightRecorder::new(4096)?;
    /// let mut p = ring.producer()?;
    /// p.output(b"one", Wakeup::Default)?;
    /// let snap = ring.pause()?.into_snapshot();
    /// p.output(b"two", Wakeup::Default)?;          // running again
    /// assert_eq!(snap.iter().collect::<Vec<_>>(), [&b"one"[..]]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_snapshot(mut self) -> Snapshot {
        let mut snap = self.copy();
        let index = self.index.take();
        let skips = match self.token.take() {
            Some(mut token) => {
                let skips = std::mem::take(&mut token.skips);
                self.ring.core.resume(token);
                skips
            }
            None => Vec::new(),
        };
        match index {
            Some(index) => index_from(&mut snap, &index),
            None => index_copy(&mut snap, &skips),
        }
        Snapshot::settle(self.ring, &mut snap);
        snap
    }

    /// The paused span's bytes, copied into a snapshot not yet indexed or settled.
    fn copy(&self) -> Snapshot {
        let (first, end, retired) = self.token.as_ref().map_or((0, 0, 0), |t| (t.over_pos, t.prod, t.retired));
        let mut snap = Snapshot::new();
        snap.capacity = self.ring.core.capacity();
        snap.retired_before = retired;
        let cap = &mut snap.cap;
        cap.start = first;
        cap.first = first;
        cap.end = end;
        cap.retired_at_first = Some(retired);
        cap.bytes.clear();
        // SAFETY: `[first, end)` is the paused span, at most the capacity long, so
        // contiguous in the double mapping (which lives as long as `self.ring`); as for
        // the records `Held::record` hands out, nothing writes any of it while `self`
        // lives (see there): its bytes are final, and visible to this thread (the
        // pause's Acquire header loads), so they are copied as plain memory, at once.
        let span = unsafe { std::slice::from_raw_parts(self.ring.core.region.data_ptr(first), (end - first) as usize) };
        cap.bytes.extend_from_slice(span);
        snap
    }

    /// Resumes the ring (as dropping the guard does).
    pub fn resume(self) {}
}

/// Walks the records of a paused span `[first, end)` (every one finished, or left by a
/// dead producer) with `word` reading the 8 bytes at a position, and calls `found` with
/// each committed record's position and length. `skips`: the dead claims with a zero
/// header the pause stepped over, ascending ([`PauseToken::skips`]). Stops early only
/// at a zero header that is not one of them (which the pause rules out, unless another
/// process wrote the ring meanwhile).
fn walk_span(first: u64, end: u64, skips: &[(u64, u64)], word: impl Fn(u64) -> u64, mut found: impl FnMut(u64, u32)) {
    let mut skips = skips.iter().copied().peekable();
    let mut x = first;
    // Bounded: `x` grows by at least 8 per step (a footprint, or a skip of a dead
    // claim, which is at least a header long) up to `end`.
    while x < end {
        let h = word(x);
        if h == 0 {
            while skips.next_if(|&(at, _)| at < x).is_some() {}
            match skips.next_if(|&(at, _)| at == x) {
                Some((_, fp)) => {
                    x += fp.max(HDR_SIZE);
                    continue;
                }
                None => break,
            }
        }
        let w = len_word(h);
        let fp = footprint(w & LEN_MASK);
        if w & (BUSY_BIT | DISCARD_BIT) == 0 && fp <= end - x {
            found(x, w & LEN_MASK);
        }
        x += fp.min(end - x);
    }
}

/// Indexes a paused span's copy (`snap.cap`, its bytes from `cap.start`).
fn index_copy(snap: &mut Snapshot, skips: &[(u64, u64)]) {
    let cap = &mut snap.cap;
    let mut found = std::mem::take(&mut cap.found);
    found.clear();
    let (start, bytes) = (cap.start, &cap.bytes);
    let word = |x: u64| {
        let at = (x - start) as usize;
        u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("a whole word"))
    };
    walk_span(cap.first, cap.end, skips, word, |pos, len| found.push(Found { pos, word: len }));
    cap.found = found;
}

/// Fills a paused span's copy's index from the guard's own.
fn index_from(snap: &mut Snapshot, index: &[Entry]) {
    let first = snap.cap.first;
    snap.cap.found.clear();
    snap.cap.found.extend(index.iter().map(|e| Found { pos: first + u64::from(e.off), word: e.len }));
}

impl<K: ProducerKind> Drop for Paused<'_, K> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.ring.core.resume(token);
        }
    }
}

impl<K: ProducerKind> Held for Paused<'_, K> {
    fn count(&self) -> usize {
        self.index().len()
    }
    fn record(&self, i: usize) -> &[u8] {
        let e = self.index()[i];
        let pos = self.oldest_position() + u64::from(e.off);
        let region = &self.ring.core.region;
        // SAFETY: a committed record of the paused ring, whose header at `pos` the
        // index read (so `pos` and `len` lie in the span, `walk_span` checks), contiguous
        // in the double mapping (which lives as long as `self.ring`). Nothing writes it
        // while `self` lives: producers cannot claim it (a multi-producer ring's pause
        // flag stops every claim; a single producer claims only past the frozen `P`, in
        // free space below `Z`), no producer can give up space (we hold the retire
        // lock), every record claimed before the pause finished (`Core::pause` saw each
        // finished with Acquire loads, so its bytes are final and visible), and readers
        // only read. The slice borrows `self`, which resumes only when dropped or
        // consumed.
        unsafe { std::slice::from_raw_parts(region.data_ptr(pos + HDR_SIZE), e.len as usize) }
    }
}
