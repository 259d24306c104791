//! [`State`]: a ring's positions and counters, read and checked against each other.

use super::header::RingMode;
use crate::format::control::{LOCK, PAUSED};
use crate::format::offsets::{self as f, u32_at, u64_at};

/// A ring's positions and counters at one moment ([`crate::inspect::RingFile::state`]).
///
/// Positions are byte positions since the ring was created. The words are read with
/// plain reads while producers may write them, so counters can be a little apart from
/// each other; the positions are checked (and read again while they disagree).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct State {
    /// End of the newest reservation (overwrite mode: with the pause bit cleared).
    pub producer_pos: u64,
    /// Overwrite mode: the ring is paused (reservations are refused).
    pub paused: bool,
    /// Single-producer rings: pid of the process holding the producer (0: none).
    pub producer_attached: u32,
    /// Everything before it is handed back to producers (discard mode; may lie inside
    /// a record).
    pub consumer_pos: u64,
    /// The consumer's read position: a record boundary, everything before it consumed.
    pub consumer_read: u64,
    /// Pid of the process holding the consumer (0: none).
    pub consumer_attached: u32,
    /// Overwrite mode: the oldest record not overwritten.
    pub over_pos: u64,
    /// Overwrite mode: committed records before `over_pos`, given up to make room
    /// (read or not): [`Stats::overwritten`](crate::Stats::overwritten).
    pub overwritten: u64,
    /// Overwrite mode: the end of the zeroed free space (lock bit cleared).
    pub zeroed: u64,
    /// Overwrite mode: bit 0 of `zeroed`, the hint that the retire lock is held (by a
    /// retiring producer or a pause); the lock itself is `lock_pid`.
    pub retire_locked: bool,
    /// Overwrite mode: the retire lock, the pid of its holder with bit 31 set if the
    /// holder is pausing the ring (0: free).
    pub lock_pid: u32,
    /// Records committed, summed over all producer slots.
    pub committed: u64,
    /// Records discarded by their producers.
    pub discarded: u64,
    /// Reservations refused for want of room (full, unfinished record, or paused).
    pub lost: u64,
    /// Of `lost`: refused because the ring was paused.
    pub refused_paused: u64,
    /// Reservations refused because the record could never fit.
    pub too_large: u64,
    /// Committed records the consumer delivered.
    pub consumed: u64,
    /// Discarded records the consumer skipped.
    pub skipped: u64,
    /// Overwrite mode: of `overwritten`, the records the consumer never read
    /// ([`Stats::overwritten_unread`](crate::Stats::overwritten_unread)).
    pub overwritten_unread: u64,
    /// Reservations of dead producer processes that were stepped over.
    pub dead: u64,
    /// The producer counter slots owned by a process now.
    pub producers: Vec<SlotInfo>,
}

/// A producer counter slot with an owner ([`State::producers`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlotInfo {
    /// The slot's index.
    pub slot: usize,
    /// The owner: the pid of the process holding the producer handle.
    pub owner: u64,
    /// Records this slot counted as committed (over all its owners).
    pub committed: u64,
}

impl State {
    /// The positions of the records the ring holds now: `[consumer_read, producer_pos)`
    /// in discard mode (records not consumed yet), `[over_pos, producer_pos)` in
    /// overwrite mode. At most a capacity long.
    pub fn window(&self, mode: RingMode) -> (u64, u64) {
        match mode {
            RingMode::Discard => (self.consumer_read, self.producer_pos),
            RingMode::Overwrite => (self.over_pos, self.producer_pos),
        }
    }

    /// Number of producer handles attached: counter slots with an owner (for a
    /// single-producer ring, whether its producer is attached).
    pub fn attached_producers(&self) -> usize {
        if self.producers.is_empty() && self.producer_attached != 0 {
            1
        } else {
            self.producers.len()
        }
    }

    pub(super) fn from_block(block: &[u8], producer_line: &[u8], mode: RingMode) -> State {
        let raw_p = u64_at(producer_line, f::PRODUCER_POS_AT - f::PRODUCER_LINE_AT);
        let (producer_pos, paused) = match mode {
            RingMode::Overwrite => (raw_p & !PAUSED, raw_p & PAUSED != 0),
            RingMode::Discard => (raw_p, false),
        };
        let zeroed = u64_at(block, f::ZEROED_AT);
        let mut s = State {
            producer_pos,
            paused,
            producer_attached: u32_at(producer_line, f::PRODUCER_ATTACHED_AT - f::PRODUCER_LINE_AT),
            consumer_pos: u64_at(block, f::CONSUMER_POS_AT),
            consumer_read: u64_at(block, f::CONSUMER_READ_AT),
            consumer_attached: u32_at(block, f::CONSUMER_ATTACHED_AT),
            over_pos: u64_at(block, f::OVER_POS_AT),
            overwritten: u64_at(block, f::RETIRED_AT),
            zeroed: zeroed & !LOCK,
            retire_locked: zeroed & LOCK != 0,
            lock_pid: u32_at(block, f::LOCK_PID_AT),
            consumed: u64_at(block, f::CONSUMED_AT),
            skipped: u64_at(block, f::SKIPPED_AT),
            overwritten_unread: u64_at(block, f::OVERWRITTEN_AT),
            dead: u64_at(block, f::DEAD_AT),
            ..State::default()
        };
        // The overflow line (index None) and every slot; hostile values saturate.
        let lines = std::iter::once((None, f::OVERFLOW_AT))
            .chain((0..f::N_COUNTER_SLOTS).map(|i| (Some(i), f::SLOTS_AT + i * f::SLOT_LEN)));
        for (slot, at) in lines {
            let get = |field: usize| u64_at(block, at + field);
            s.committed = s.committed.saturating_add(get(f::COMMITTED_AT));
            s.discarded = s.discarded.saturating_add(get(f::DISCARDED_AT));
            s.lost = s.lost.saturating_add(get(f::LOST_AT));
            s.refused_paused = s.refused_paused.saturating_add(get(f::PAUSED_AT));
            s.too_large = s.too_large.saturating_add(get(f::TOO_LARGE_AT));
            let owner = get(f::OWNER_AT);
            if let (Some(slot), true) = (slot, owner != 0) {
                s.producers.push(SlotInfo { slot, owner, committed: get(f::COMMITTED_AT) });
            }
        }
        s
    }

    /// Checks the positions against each other and the capacity; the message says what
    /// is wrong.
    pub(super) fn check(&self, mode: RingMode, capacity: u64) -> Result<(), String> {
        let p = self.producer_pos;
        let named = [("producer", p), ("consumer", self.consumer_pos), ("consumer read", self.consumer_read)];
        let over = [("overwrite", self.over_pos)];
        let all = named.iter().chain(if mode == RingMode::Overwrite { &over[..] } else { &[] });
        for &(name, pos) in all {
            if pos % 8 != 0 {
                return Err(format!("{name} position {pos} is not a multiple of 8"));
            }
            if pos > p {
                return Err(format!("{name} {pos} is past producer {p}"));
            }
        }
        let (start, what) = match mode {
            RingMode::Discard => {
                if self.consumer_pos > self.consumer_read {
                    return Err(format!(
                        "consumer {} is past its read position {}",
                        self.consumer_pos, self.consumer_read
                    ));
                }
                (self.consumer_pos, "consumer")
            }
            RingMode::Overwrite => (self.over_pos, "overwrite position"),
        };
        if p - start > capacity {
            return Err(format!("producer {p} is more than the capacity {capacity} past the {what} {start}"));
        }
        Ok(())
    }
}
