//! What the live channel reader copied out of each ring and has not delivered yet:
//! the staging the merge ([`super::reader`]) reads from.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use super::lane::Lane;
use super::writer::split_stamp;
use crate::clock::Clock;
use crate::config::{Mode, Spsc};
use crate::error::ConsumeError;

/// Records taken from one ring per pass at most, so that a fast producer cannot keep a
/// pass going forever (and its staging memory stays bounded).
pub(super) const DRAIN_BATCH: usize = 4096;
/// A ring whose undelivered staged records reach this many bytes is not drained further
/// until they are delivered (its producer then finds its ring full: counted, never
/// silent).
pub(super) const STAGE_LIMIT: usize = 4 << 20;

/// A ring's staged records: what the merge reads for every record it delivers, in one
/// cache line (`repr(C)`, 64 bytes, aligned), so that a merge of many lanes touches
/// one line of a lane per record, not the several a lane's whole state spans.
#[repr(C, align(64))]
#[derive(Default)]
pub(super) struct Queue {
    /// `(timestamp, length)`, oldest first: 16 bytes a record (24 with its start too).
    pub(super) recs: VecDeque<(u64, u32)>,
    /// Their payloads, back to back from `head` on (the bytes before it are delivered
    /// ones, kept until the next pass so that slices of them could be handed out).
    pub(super) bytes: Vec<u8>,
    pub(super) head: usize,
}

/// A ring's staged records left by a reader that was dropped before it delivered them:
/// the channel keeps them ([`Inner::handed_over`](super::inner::Inner)) and the next
/// reader of the ring starts with them, so that no record goes missing between readers.
pub(super) struct HandedOver<M: Mode> {
    pub(super) lane: Arc<Lane<M>>,
    pub(super) q: Queue,
    pub(super) last_staged: u64,
}

/// A ring's records copied out and not yet delivered.
pub(super) struct Staged<M: Mode> {
    pub(super) q: Queue,
    pub(super) lane: Arc<Lane<M>>,
    pub(super) reader: M::Consumer<Spsc>,
    /// The producer exited and its ring was found empty after that: nothing more comes.
    pub(super) done: bool,
    /// Done and fully delivered: counted, and (discard mode) freed.
    pub(super) settled: bool,
    /// The ring gave an error (a corrupt header written by another process): it is
    /// not read again.
    pub(super) broken: bool,
    /// The last pass left records in the ring (it took a whole batch, or none at the
    /// staging limit); those are no older than `last_staged`, the newest staged
    /// timestamp, which bounds what may be delivered once the staged ones are gone.
    pub(super) more: bool,
    pub(super) last_staged: u64,
}

impl<M: Mode> Staged<M> {
    /// The bound this lane puts on what may be delivered while it has nothing staged
    /// (see [`ChannelReader::merge`](super::reader::ChannelReader::merge)): `u64::MAX`
    /// for none.
    pub(super) fn bound(&self, floor: Option<u64>) -> u64 {
        match floor {
            None => u64::MAX,
            Some(_) if self.broken => u64::MAX,
            Some(_) if self.more => self.last_staged,
            Some(floor) if !self.done => floor,
            Some(_) => u64::MAX,
        }
    }

    /// Bytes of records not delivered yet.
    pub(super) fn pending_bytes(&self) -> usize {
        if self.q.recs.is_empty() {
            0
        } else {
            self.q.bytes.len() - self.q.head
        }
    }

    /// Drops the bytes of delivered records (kept until now so that a pass can hand
    /// out slices without copying), so staging holds only what is pending.
    pub(super) fn compact(&mut self) {
        let q = &mut self.q;
        if q.recs.is_empty() {
            q.bytes.clear();
        } else {
            q.bytes.drain(..q.head);
        }
        q.head = 0;
    }
}

/// Copies up to a batch of `l`'s records into its staging; how many.
pub(super) fn stage<M: Mode, C: Clock>(l: &mut Staged<M>, clock: &C) -> Result<usize, ConsumeError<Infallible>> {
    let (recs, bytes) = (&mut l.q.recs, &mut l.q.bytes);
    M::drain(&mut l.reader, DRAIN_BATCH, |rec| {
        let (ts, body) = split_stamp(clock, rec);
        // A payload is at most `MAX_RECORD_LEN` (a `u32`) bytes.
        recs.push_back((ts, body.len() as u32));
        bytes.extend_from_slice(body);
    })
}
