//! [`Paused`]: perf's `PAUSE_OUTPUT` for an overwrite ring, and reading it in place.
//!
//! This module holds the overwrite mode's one `unsafe`: slices into the ring's memory
//! while it is paused.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use super::snapshot::Snapshot;
use crate::callback::{Held, Iter};
use crate::config::ProducerKind;
use crate::error::Error;
use crate::format::record::HDR_SIZE;
use crate::protocol::capture::Found;
use crate::protocol::core::PauseRefused;
use crate::protocol::core::PauseToken;
use crate::shared::Shared;

/// A paused overwrite ring ([`crate::RingBuf::pause`]): producers' reserves fail at once (and
/// are counted in [`Stats::refused_paused`](crate::Stats::refused_paused)) until it is
/// dropped or [`resume`](Self::resume)d, and the records it holds can be read in place,
/// without a copy, in either direction.
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
    /// The committed records in `[over_pos, prod)`, oldest first.
    index: Vec<Found>,
}

impl<K: ProducerKind> fmt::Debug for Paused<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Paused").field("records", &self.index.len()).field("token", &self.token).finish()
    }
}

impl<'a, K: ProducerKind> Paused<'a, K> {
    pub(crate) fn new(ring: &'a Shared, limit: Duration) -> Result<Self, Error> {
        let core = &ring.core;
        let began = std::time::Instant::now();
        let mut token = core.pause(ring.writable, limit).map_err(|e| match e {
            PauseRefused::Already => Error::AlreadyPaused,
            // The time measured (at least the limit: the wait gives up only past it).
            PauseRefused::Busy => Error::PauseBusy { waited: began.elapsed() },
        })?;
        // The pause's own wait walked the records (with Acquire) and indexed them.
        let index = std::mem::take(&mut token.index);
        Ok(Paused { ring, _kind: PhantomData, token: Some(token), index })
    }

    /// Committed records held.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
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

    /// A copy of the records, as a [`Snapshot`] (to keep, or write to a file).
    pub fn snapshot(&self) -> Snapshot {
        let (first, end, retired) = self.token.as_ref().map_or((0, 0, 0), |t| (t.over_pos, t.prod, t.retired));
        let mut snap = Snapshot::new();
        snap.capacity = self.ring.core.capacity();
        snap.retired_before = retired;
        let cap = &mut snap.cap;
        cap.start = first;
        cap.first = first;
        cap.end = end;
        cap.retired_at_first = Some(retired);
        cap.bytes.resize((end - first) as usize, 0);
        // The paused ring's bytes are final (nothing writes them while we hold the
        // pause), so the reader's copy needs no check here.
        self.ring.core.copy_words(first, end, &mut cap.bytes);
        cap.found.extend_from_slice(&self.index);
        Snapshot::settle(self.ring, &mut snap);
        snap
    }

    /// Resumes the ring (as dropping the guard does).
    pub fn resume(self) {}
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
        self.index.len()
    }
    fn record(&self, i: usize) -> &[u8] {
        let f = self.index[i];
        let region = &self.ring.core.region;
        // SAFETY: a committed record of the paused ring, contiguous in the double
        // mapping (which lives as long as `self.ring`). Nothing writes it while
        // `self` lives: producers cannot claim it (a multi-producer ring's pause flag
        // stops every claim; a single producer claims only past the frozen `P`, in
        // free space below `Z`), no producer can give up space (we hold the retire
        // lock), every record claimed before the
        // pause finished (`Core::pause` waited with Acquire loads, so its bytes are
        // final and visible), and readers only read. The slice borrows `self`,
        // which resumes only when dropped or consumed.
        unsafe { std::slice::from_raw_parts(region.data_ptr(f.pos + HDR_SIZE), f.len() as usize) }
    }
}
