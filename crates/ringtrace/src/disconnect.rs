//! Whether the other side of a ring is gone: every producer handle, or the consumer.
//!
//! Each producer handle owns a counter slot in the control block, marked with its
//! process id (handles past the 58 slots share the overflow slot, which counts them),
//! and the consumer role holds its owner's process id (see [`crate::owner`]). So a
//! side is gone when no such mark names a process that still exists: a handle dropped
//! clears its mark, a process that died leaves marks that `kill(pid, 0)` finds dead.
//! Both sides are also remembered as having attached once ([`WaitLine::seen`]): a ring
//! whose consumer has not attached yet is not disconnected for its producers, nor one
//! no producer has attached to for its consumer.
//!
//! Limits: a process that dies while it holds one of more than 58 producer handles of a
//! ring leaves the overflow count above zero, so the consumer never sees the producers
//! gone (it still reads what they wrote); processes in other pid namespaces are seen as
//! in [`crate::owner`].
//!
//! [`WaitLine::seen`]: crate::format::control::WaitLine

#![cfg(not(loom))]

use crate::format::control::{SEEN_CONSUMER, SEEN_PRODUCER};
use crate::owner;
use crate::protocol::core::Core;
use crate::region::mmap::MmapView;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

/// Records that a side has attached (`SEEN_PRODUCER` or `SEEN_CONSUMER`).
pub(crate) fn mark_seen(core: &Core<MmapView>, side: u32) {
    let seen = &core.control().wait.0.seen;
    // Release: called once the side's mark (slot owner, consumer pid) is stored; pairs
    // with the Acquire loads of `seen` below, so a side seen as attached has its mark
    // seen too (until it clears it). Every attach writes, even when the bit is set, so
    // that the pairing holds for the newest mark too.
    seen.fetch_or(side, Release);
}

/// Whether some producer handle attached once and none is left (every one dropped,
/// or its process dead). Called by a consumer that found nothing to read.
pub(crate) fn producers_gone(core: &Core<MmapView>) -> bool {
    let ctl = core.control();
    // Acquire: pairs with the Release in `mark_seen`.
    if ctl.wait.0.seen.load(Acquire) & SEEN_PRODUCER == 0 {
        return false;
    }
    // Acquire (each load): pairs with the Release store that freed the slot
    // (`SlotRef::free`), so that when every slot reads free, every record its handle
    // committed is visible to the consumer's next read.
    if ctl.overflow.0.owner.load(Acquire) != 0 {
        return false;
    }
    let me = owner::my_pid();
    let mut dead_checked = 0u32;
    for line in ctl.slots.iter() {
        let owner = line.0.owner.load(Acquire);
        if owner == 0 {
            continue;
        }
        match u32::try_from(owner) {
            Ok(pid) if pid == me => return false,
            // One `kill(pid, 0)` per distinct owner in a row (a process owns its slots
            // side by side when it made its handles together).
            Ok(pid) if pid == dead_checked => continue,
            Ok(pid) if owner::alive(pid) => return false,
            Ok(pid) => dead_checked = pid,
            // Not a process id: another process wrote the word; it names nobody alive.
            Err(_) => continue,
        }
    }
    true
}

/// Whether a consumer attached once and has gone (dropped, or its process dead).
pub(crate) fn consumer_gone(core: &Core<MmapView>) -> bool {
    let ctl = core.control();
    // Acquire: pairs with the Release in `mark_seen`.
    if ctl.wait.0.seen.load(Acquire) & SEEN_CONSUMER == 0 {
        return false;
    }
    // Relaxed: the producer only decides to stop waiting; it reads nothing the
    // consumer wrote.
    match ctl.consumer.0.attached.load(Relaxed) {
        0 => true,
        pid => pid != owner::my_pid() && !owner::alive(pid),
    }
}
