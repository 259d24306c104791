//! Flight recorders (overwrite-mode ring files) as sources.
//!
//! A flight recorder's producers never wait for a reader: when the ring is full they
//! overwrite its oldest records. The agent follows it with an
//! [`OverwriteConsumer`], which copies each record out and checks it, so a record
//! overwritten while it was read is never shipped, and counts the records overwritten
//! before it reached them.
//!
//! Sequence numbers are the ring's own record numbers
//! ([`OverwriteConsumer::consume_numbered`]: the committed records before each one)
//! plus a per-source base, so that the records producers overwrote before the agent
//! read them leave gaps, which the fleet reader counts as missing, and a record read
//! twice gets the same number both times. The base is chosen when the agent first
//! reads the ring: 0, or for a ring that replaced another under the same name, the
//! state's next sequence number less the ring's first number, so numbers never repeat.
//!
//! Exactly once: the state file stores the consumer's [`ReadMark`] after each round
//! Kafka acknowledged (position, and counts there). A round that failed, and an agent
//! restarted after a crash, rewind to that mark and read again what producers have not
//! overwritten since, with the same numbers; the reader drops the copies. What was
//! overwritten meanwhile is counted ([`SourceCounts::overwritten`]).
//!
//! The slots of an overwrite-mode channel file (a recorder directory's among them)
//! are followed the same way, each its own source ([`Flight::slot`]); their records'
//! stamps give their times as a discard channel's do ([`channel::Stamps`]). A
//! recorder directory's records are shipped decoded ([`traced`](super::traced)).
//!
//! [`SourceCounts::overwritten`]: crate::state::SourceCounts::overwritten

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringtrace::config::{Mpsc, Overwrite, ProducerKind, Spsc};
use ringtrace::inspect::RingKind;
use ringtrace::recorder::{OverwriteConsumer, ReadMark};
use ringtrace::{Access, RingBuf, Stats};

use super::super::error::ShipError;
use super::channel::{self, Slots};
use super::error::SourceErrorKind;
use super::round::{read_outcome, Batcher, Filled, Limits, Reader, Recovered, Stop, Times};
use super::traced::Decoder;
use crate::frame::Content;
use crate::state::SourceState;

/// A flight recorder of either producer kind, followed.
pub(super) enum Flight {
    Mpsc(Followed<Mpsc>),
    Spsc(Followed<Spsc>),
}

/// Applies `$body` to the [`Followed`] (`$f`) whichever the kind.
macro_rules! with_followed {
    ($flight:expr, $f:ident => $body:expr) => {
        match $flight {
            Flight::Mpsc($f) => $body,
            Flight::Spsc($f) => $body,
        }
    };
}

/// One flight recorder, its consumer and where the agent is in it.
pub(super) struct Followed<K: ProducerKind> {
    ring: RingBuf<K, Overwrite>,
    consumer: OverwriteConsumer<K>,
    /// A record's sequence number is `base + its number` (wrapping).
    base: u64,
    /// The consumer's mark after the last round acknowledged (or spooled).
    acked: ReadMark,
    /// Its mark after the round in flight.
    pending: Option<ReadMark>,
    /// A channel's slot: where the times come from.
    slot: Option<ChannelSlot>,
}

/// The slot of an overwrite-mode channel a [`Followed`] reads.
struct ChannelSlot {
    slots: Arc<Slots<Overwrite>>,
    slot: u32,
    /// The slot's latest time shipped, and its value before the round in flight
    /// (restored if the round fails).
    last_ns: u64,
    last_ns_before: u64,
    /// A recorder directory's: its records are shipped decoded.
    decoder: Option<Decoder>,
}

impl Flight {
    /// Attaches to the flight recorder at `path` as its consumer.
    pub fn open(path: &Path, kind: RingKind) -> Result<Flight, SourceErrorKind> {
        Ok(match kind {
            RingKind::Mpsc => Flight::Mpsc(Followed::open(path)?),
            RingKind::Spsc => Flight::Spsc(Followed::open(path)?),
        })
    }

    /// Attaches to slot `slot` of an overwrite-mode channel as its consumer; with a
    /// decoder, its records are shipped decoded.
    pub fn slot(slots: &Arc<Slots<Overwrite>>, slot: u32, decoder: Option<Decoder>) -> Result<Flight, SourceErrorKind> {
        let ring = slots.rings().get(slot as usize).ok_or(SourceErrorKind::NoSlot(slot))?.clone();
        let mut f = Followed::of(ring)?;
        f.slot = Some(ChannelSlot { slots: slots.clone(), slot, last_ns: 0, last_ns_before: 0, decoder });
        Ok(Flight::Spsc(f))
    }
}

impl Reader for Flight {
    /// Takes up at the state's mark (see the [module documentation](self)).
    fn recover(&mut self, saved: Option<&SourceState>, same: bool, _: Instant) -> Result<Recovered, ShipError> {
        Ok(with_followed!(self, f => f.recover(saved, same)))
    }

    fn next_seq(&self) -> u64 {
        with_followed!(self, f => f.base.wrapping_add(f.acked.next_number()))
    }

    fn fill(
        &mut self,
        host: &str,
        name: &str,
        time_ns: u64,
        limits: Limits,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(Filled, u64, u64), ShipError> {
        with_followed!(self, f => f.fill(host, name, time_ns, limits, out))
    }

    /// The consumer's mark after the round in flight.
    fn pending_counts(&self) -> (u64, u64, u64) {
        with_followed!(self, f => f.pending.map_or((0, 0, 0), |m| (m.consumed, m.skipped, m.overwritten_unread)))
    }

    fn acknowledged(&mut self) {
        with_followed!(self, f => if let Some(m) = f.pending.take() { f.acked = m })
    }

    /// Reads again from the last acknowledged mark.
    fn failed(&mut self) {
        with_followed!(self, f => if f.pending.take().is_some() {
            if let Some(s) = &mut f.slot {
                s.last_ns = s.last_ns_before;
            }
            f.rewind()
        })
    }

    fn stats(&self) -> Stats {
        with_followed!(self, f => f.ring.stats())
    }

    fn ready(&self) -> bool {
        with_followed!(self, f => f.consumer.ready())
    }

    fn is_disconnected(&self) -> bool {
        with_followed!(self, f => match &f.slot {
            Some(s) => s.slots.finished(s.slot, f.consumer.is_disconnected()),
            None => f.consumer.is_disconnected(),
        })
    }

    fn wait(&mut self, timeout: Duration) -> std::io::Result<bool> {
        with_followed!(self, f => f.consumer.wait(Some(timeout)))
    }
}

impl<K: ProducerKind> Followed<K> {
    fn open(path: &Path) -> Result<Self, SourceErrorKind> {
        Self::of(RingBuf::<K, Overwrite>::open_with(path, Access::Consumer).map_err(SourceErrorKind::open)?)
    }

    fn of(ring: RingBuf<K, Overwrite>) -> Result<Self, SourceErrorKind> {
        let consumer = ring.consumer().map_err(SourceErrorKind::open)?;
        let acked = consumer.mark();
        Ok(Followed { ring, consumer, base: 0, acked, pending: None, slot: None })
    }

    fn recover(&mut self, saved: Option<&SourceState>, same: bool) -> Recovered {
        let now = self.consumer.mark();
        let Some(saved) = saved else { return Recovered::default() };
        if same {
            let mark = ReadMark {
                position: saved.position,
                consumed: saved.consumed,
                skipped: saved.skipped,
                overwritten_unread: saved.counts.overwritten,
            };
            // Refused if the ring is not where the state says it was read to (its
            // consumer's counts behind the mark's): then it is taken for a new ring.
            if self.consumer.rewind(mark).is_ok() {
                self.base = saved.next_seq.wrapping_sub(mark.next_number());
                self.acked = mark;
                return Recovered::default();
            }
        }
        self.base = saved.next_seq.wrapping_sub(now.next_number());
        Recovered { acknowledged: 0, new_ring: true }
    }

    fn fill(
        &mut self,
        host: &str,
        name: &str,
        time_ns: u64,
        limits: Limits,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(Filled, u64, u64), ShipError> {
        debug_assert!(self.pending.is_none(), "a round is in flight");
        let base = self.base;
        let first = base.wrapping_add(self.consumer.mark().next_number());
        let (mut decoder, mut times) = match &mut self.slot {
            Some(s) => {
                s.last_ns_before = s.last_ns;
                let slots: &dyn channel::Stamping = &*s.slots;
                let stamps = channel::Stamps { slots, drained_ns: time_ns, last_ns: &mut s.last_ns, offset: 0 };
                (s.decoder.as_mut(), Times::Channel(stamps))
            }
            None => (None, Times::Drained(time_ns)),
        };
        let content = if decoder.is_some() { Content::Events } else { Content::Records };
        let mut batches = Batcher::new(host, name, first, times.batch(), limits, out)?.content(content);
        let filled = match decoder.as_mut() {
            Some(decoder) => {
                // The round's records copied out, then decoded together, then batched.
                let (mut read, mut bytes) = (Vec::new(), 0);
                let got = self.consumer.consume_numbered(usize::MAX, |n, rec| {
                    read.push((n, rec.to_vec()));
                    bytes += rec.len() + 16;
                    if bytes >= limits.round {
                        Err(Stop::Full)
                    } else {
                        Ok(())
                    }
                });
                read_outcome(got, name, true)?;
                let split: Vec<(Option<u64>, &[u8])> = read.iter().map(|(_, rec)| times.split(rec)).collect();
                let lines = decoder.decode(&split);
                for (((n, whole), (stamp, _)), line) in read.iter().zip(&split).zip(&lines) {
                    let seq = base.wrapping_add(*n);
                    match batches.take_split(seq, *stamp, line.as_bytes(), whole.len(), &mut times) {
                        // Every record read is shipped: the round's bytes were counted above.
                        Ok(()) | Err(Stop::Full) => {}
                        Err(Stop::Failed(e)) => return Err(e),
                    }
                }
                batches.finish()
            }
            None => {
                // A gap (records overwritten before they were read) starts a new batch.
                let read = self
                    .consumer
                    .consume_numbered(usize::MAX, |n, rec| batches.take(base.wrapping_add(n), rec, &mut times));
                let filled = batches.finish();
                // Producers that overwrite the records faster than they are copied: the
                // next round tries again.
                read_outcome(read, name, true)?;
                filled
            }
        };
        let mark = self.consumer.mark();
        if filled.records > 0 {
            self.pending = Some(mark);
        }
        // The mark's, not the last record's + 1: the round's last look may have found
        // records overwritten after it, which the mark counts and the numbers skip.
        Ok((filled, base.wrapping_add(mark.next_number()), mark.position))
    }

    fn rewind(&mut self) {
        // Cannot fail: the acknowledged mark was this consumer's, at or before it.
        let _ = self.consumer.rewind(self.acked);
    }
}

impl<K: ProducerKind> Drop for Followed<K> {
    /// Records read and not acknowledged are read again by the next agent: the
    /// consumer's position, which the next consumer starts from, goes back to the mark.
    fn drop(&mut self) {
        self.rewind();
    }
}

#[cfg(test)]
mod tests;
