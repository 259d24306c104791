//! Byte offsets of the control block's fields in a ring file, taken from the layout's
//! `#[repr(C)]` structs with `offset_of!` (so they follow [`super::control`] exactly), and
//! native-endian word reads from a copy of the block.

use core::mem::{offset_of, size_of};

use super::control::{Control, Counters, Line, Meta, ProducerLine, CONTROL_SIZE, N_SLOTS};

/// Bytes of the meta line (the fixed header).
pub(crate) const META_LEN: usize = size_of::<Line<Meta>>();

pub(crate) const MAGIC: usize = offset_of!(Control, meta.0.magic);
pub(crate) const VERSION: usize = offset_of!(Control, meta.0.version);
pub(crate) const KIND: usize = offset_of!(Control, meta.0.kind);
pub(crate) const MODE: usize = offset_of!(Control, meta.0.mode);
pub(crate) const CREATOR_PID: usize = offset_of!(Control, meta.0.creator_pid);
pub(crate) const CAPACITY: usize = offset_of!(Control, meta.0.capacity);
pub(crate) const DATA_OFFSET: usize = offset_of!(Control, meta.0.data_offset);
pub(crate) const WATERMARK: usize = offset_of!(Control, meta.0.watermark);
pub(crate) const FLAGS: usize = offset_of!(Control, meta.0.flags);
pub(crate) const CLOCK: usize = offset_of!(Control, meta.0.clock);
pub(crate) const CREATED_NS: usize = offset_of!(Control, meta.0.created_ns);
pub(crate) const RETIRE_AHEAD: usize = offset_of!(Control, meta.0.retire_ahead);

/// The producer line: re-read on its own after the rest of the block.
pub(crate) const PRODUCER_LINE: usize = offset_of!(Control, producer);
pub(crate) const PRODUCER_LINE_LEN: usize = size_of::<Line<ProducerLine>>();
pub(crate) const PRODUCER_POS: usize = offset_of!(Control, producer.0.pos);
pub(crate) const PRODUCER_ATTACHED: usize = offset_of!(Control, producer.0.attached);

pub(crate) const CONSUMER_POS: usize = offset_of!(Control, consumer.0.pos);
pub(crate) const CONSUMER_ATTACHED: usize = offset_of!(Control, consumer.0.attached);
pub(crate) const CONSUMER_READ: usize = offset_of!(Control, consumer.0.read);
pub(crate) const CONSUMED: usize = offset_of!(Control, consumer.0.consumed);
pub(crate) const SKIPPED: usize = offset_of!(Control, consumer.0.skipped);
pub(crate) const OVERWRITTEN: usize = offset_of!(Control, consumer.0.overwritten);
pub(crate) const DEAD: usize = offset_of!(Control, consumer.0.dead);

pub(crate) const OVER_POS: usize = offset_of!(Control, overwrite.0.over_pos);
pub(crate) const RETIRED: usize = offset_of!(Control, overwrite.0.retired);
pub(crate) const ZEROED: usize = offset_of!(Control, overwrite.0.zeroed);
pub(crate) const LOCK_PID: usize = offset_of!(Control, overwrite.0.lock_pid);

/// The shared overflow counters, then `N_SLOTS` per-producer lines.
pub(crate) const OVERFLOW: usize = offset_of!(Control, overflow);
pub(crate) const SLOTS: usize = offset_of!(Control, slots);
pub(crate) const SLOT_LEN: usize = size_of::<Line<Counters>>();
pub(crate) const N_COUNTER_SLOTS: usize = N_SLOTS;

pub(crate) const OWNER: usize = offset_of!(Counters, owner);
pub(crate) const COMMITTED: usize = offset_of!(Counters, committed);
pub(crate) const DISCARDED: usize = offset_of!(Counters, discarded);
pub(crate) const LOST: usize = offset_of!(Counters, lost);
pub(crate) const PAUSED: usize = offset_of!(Counters, paused);
pub(crate) const TOO_LARGE: usize = offset_of!(Counters, too_large);

// Every field read lies inside the block (checked at compile time).
const _: () = assert!(SLOTS + N_SLOTS * SLOT_LEN <= CONTROL_SIZE);
const _: () = assert!(CREATED_NS + 8 <= META_LEN && RETIRE_AHEAD + 8 <= META_LEN && OVERFLOW + SLOT_LEN <= SLOTS);

/// The native-endian `u64` at `at`; 0 if `block` is too short (it never is: callers pass
/// a whole control block and offsets from above).
pub(crate) fn u64_at(block: &[u8], at: usize) -> u64 {
    match block.get(at..at.wrapping_add(8)).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
        Some(b) => u64::from_ne_bytes(b),
        None => 0,
    }
}

/// The native-endian `u32` at `at` (0 if out of range, as [`u64_at`]).
pub(crate) fn u32_at(block: &[u8], at: usize) -> u32 {
    match block.get(at..at.wrapping_add(4)).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
        Some(b) => u32::from_ne_bytes(b),
        None => 0,
    }
}
