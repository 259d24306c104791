//! Byte offsets of the control block's fields in a ring file, taken from the layout's
//! `#[repr(C)]` structs with `offset_of!` (so they follow [`super::control`] exactly), and
//! native-endian word reads from a copy of the block.

use core::mem::{offset_of, size_of};

use super::control::{Control, Counters, Line, Meta, ProducerLine, CONTROL_SIZE, N_SLOTS};

/// Bytes of the meta line (the fixed header).
pub const META_LEN: usize = size_of::<Line<Meta>>();

/// Byte offset of `meta.magic` in the control block.
pub const MAGIC_AT: usize = offset_of!(Control, meta.0.magic);
/// Byte offset of `meta.version` in the control block.
pub const VERSION_AT: usize = offset_of!(Control, meta.0.version);
/// Byte offset of `meta.kind` in the control block.
pub const KIND_AT: usize = offset_of!(Control, meta.0.kind);
/// Byte offset of `meta.mode` in the control block.
pub const MODE_AT: usize = offset_of!(Control, meta.0.mode);
/// Byte offset of `meta.creator_pid` in the control block.
pub const CREATOR_PID_AT: usize = offset_of!(Control, meta.0.creator_pid);
/// Byte offset of `meta.capacity` in the control block.
pub const CAPACITY_AT: usize = offset_of!(Control, meta.0.capacity);
/// Byte offset of `meta.data_offset` in the control block.
pub const DATA_OFFSET_AT: usize = offset_of!(Control, meta.0.data_offset);
/// Byte offset of `meta.watermark` in the control block.
pub const WATERMARK_AT: usize = offset_of!(Control, meta.0.watermark);
/// Byte offset of `meta.flags` in the control block.
pub const FLAGS_AT: usize = offset_of!(Control, meta.0.flags);
/// Byte offset of `meta.clock` in the control block.
pub const CLOCK_AT: usize = offset_of!(Control, meta.0.clock);
/// Byte offset of `meta.created_ns` in the control block.
pub const CREATED_NS_AT: usize = offset_of!(Control, meta.0.created_ns);
/// Byte offset of `meta.retire_ahead` in the control block.
pub const RETIRE_AHEAD_AT: usize = offset_of!(Control, meta.0.retire_ahead);

/// The producer line: re-read on its own after the rest of the block.
pub const PRODUCER_LINE_AT: usize = offset_of!(Control, producer);
/// Bytes of a `Line<ProducerLine>`.
pub const PRODUCER_LINE_LEN: usize = size_of::<Line<ProducerLine>>();
/// Byte offset of `producer.pos` in the control block.
pub const PRODUCER_POS_AT: usize = offset_of!(Control, producer.0.pos);
/// Byte offset of `producer.attached` in the control block.
pub const PRODUCER_ATTACHED_AT: usize = offset_of!(Control, producer.0.attached);

/// Byte offset of `consumer.pos` in the control block.
pub const CONSUMER_POS_AT: usize = offset_of!(Control, consumer.0.pos);
/// Byte offset of `consumer.attached` in the control block.
pub const CONSUMER_ATTACHED_AT: usize = offset_of!(Control, consumer.0.attached);
/// Byte offset of `consumer.read` in the control block.
pub const CONSUMER_READ_AT: usize = offset_of!(Control, consumer.0.read);
/// Byte offset of `consumer.consumed` in the control block.
pub const CONSUMED_AT: usize = offset_of!(Control, consumer.0.consumed);
/// Byte offset of `consumer.skipped` in the control block.
pub const SKIPPED_AT: usize = offset_of!(Control, consumer.0.skipped);
/// Byte offset of `consumer.overwritten` in the control block.
pub const OVERWRITTEN_AT: usize = offset_of!(Control, consumer.0.overwritten);
/// Byte offset of `consumer.dead` in the control block.
pub const DEAD_AT: usize = offset_of!(Control, consumer.0.dead);

/// Byte offset of `overwrite.over_pos` in the control block.
pub const OVER_POS_AT: usize = offset_of!(Control, overwrite.0.over_pos);
/// Byte offset of `overwrite.retired` in the control block.
pub const RETIRED_AT: usize = offset_of!(Control, overwrite.0.retired);
/// Byte offset of `overwrite.zeroed` in the control block.
pub const ZEROED_AT: usize = offset_of!(Control, overwrite.0.zeroed);
/// Byte offset of `overwrite.lock_pid` in the control block.
pub const LOCK_PID_AT: usize = offset_of!(Control, overwrite.0.lock_pid);

/// The shared overflow counters, then `N_SLOTS` per-producer lines.
pub const OVERFLOW_AT: usize = offset_of!(Control, overflow);
/// Byte offset of `slots` in the control block.
pub const SLOTS_AT: usize = offset_of!(Control, slots);
/// Bytes of a `Line<Counters>`.
pub const SLOT_LEN: usize = size_of::<Line<Counters>>();
/// Per-producer counter slots.
pub const N_COUNTER_SLOTS: usize = N_SLOTS;

/// Byte offset of `owner` in the counters of a slot.
pub const OWNER_AT: usize = offset_of!(Counters, owner);
/// Byte offset of `committed` in the counters of a slot.
pub const COMMITTED_AT: usize = offset_of!(Counters, committed);
/// Byte offset of `discarded` in the counters of a slot.
pub const DISCARDED_AT: usize = offset_of!(Counters, discarded);
/// Byte offset of `lost` in the counters of a slot.
pub const LOST_AT: usize = offset_of!(Counters, lost);
/// Byte offset of `paused` in the counters of a slot.
pub const PAUSED_AT: usize = offset_of!(Counters, paused);
/// Byte offset of `too_large` in the counters of a slot.
pub const TOO_LARGE_AT: usize = offset_of!(Counters, too_large);

// Every field read lies inside the block (checked at compile time).
const _: () = assert!(SLOTS_AT + N_SLOTS * SLOT_LEN <= CONTROL_SIZE);
const _: () =
    assert!(CREATED_NS_AT + 8 <= META_LEN && RETIRE_AHEAD_AT + 8 <= META_LEN && OVERFLOW_AT + SLOT_LEN <= SLOTS_AT);

/// The native-endian `u64` at `at`; 0 if `block` is too short (it never is: callers pass
/// a whole control block and offsets from above).
pub fn u64_at(block: &[u8], at: usize) -> u64 {
    match block.get(at..at.wrapping_add(8)).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
        Some(b) => u64::from_ne_bytes(b),
        None => 0,
    }
}

/// The native-endian `u32` at `at` (0 if out of range, as [`u64_at`]).
pub fn u32_at(block: &[u8], at: usize) -> u32 {
    match block.get(at..at.wrapping_add(4)).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
        Some(b) => u32::from_ne_bytes(b),
        None => 0,
    }
}
