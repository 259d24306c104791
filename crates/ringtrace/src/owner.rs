//! Process ids as owners of shared roles: the consumer, a single producer, a producer's
//! counter slot, the overwrite retire lock, and (in record headers) a reservation.
//!
//! A ring file outlives the processes that use it, and any of them can be killed at any
//! instruction. Every exclusive role in the control block therefore holds its owner's
//! process id, never a bare flag, so that whoever finds the role taken can ask the
//! kernel whether the owner still exists (`kill(pid, 0)`) and take over from a dead one
//! (Agrona's `unblock()`, LTTng 2.15's repair).
//!
//! Limits: process ids are compared within one pid namespace (processes sharing a ring
//! file across namespaces see each other's ids as unrelated numbers: a foreign live
//! owner may look dead, so do not share rings across pid namespaces); a recycled id
//! makes a dead owner look alive until that process exits, which delays a takeover but
//! never allows a wrong one.

use crate::sync::AtomicU32;
use crate::sync::Ordering::{AcqRel, Acquire, Relaxed, Release};

/// This process's id (never 0).
#[inline]
pub(crate) fn my_pid() -> u32 {
    std::process::id().max(1)
}

/// Whether process `pid` may still exist. `false` only when the kernel says there is no
/// such process (`ESRCH`): a process we may not signal (`EPERM`) exists.
#[cfg(not(loom))]
pub(crate) fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else { return false };
    match rustix::process::Pid::from_raw(raw) {
        None => false,
        Some(p) if matches!(rustix::process::test_kill_process(p), Err(rustix::io::Errno::SRCH)) => false,
        // A zombie (killed, not yet reaped by its parent) runs no code any more.
        Some(_) => !zombie(pid),
    }
}

/// Whether `/proc/<pid>/stat` says the process is a zombie (`Z`); false if unreadable.
#[cfg(not(loom))]
fn zombie(pid: u32) -> bool {
    let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else { return false };
    // "pid (comm) S ...": the state follows the last ')' (comm may hold any byte).
    let after = stat.iter().rposition(|&b| b == b')').map_or(&[][..], |i| &stat[i + 1..]);
    after.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'Z')
}

/// Loom models have one process, alive.
#[cfg(loom)]
pub(crate) fn alive(_pid: u32) -> bool {
    true
}

/// Takes an exclusive role held through `word` (0 = free, else the owner's pid): free,
/// or held by a dead process. Returns the dead owner taken over from (0 if it was free),
/// or `Err(owner)` if a live process (possibly this one) holds it.
pub(crate) fn take(word: &AtomicU32) -> Result<u32, u32> {
    let me = my_pid();
    // Bounded: each failed round saw the owner change, and a role changes hands only
    // through attach and detach, a few times at most while we look.
    for _ in 0..64 {
        // AcqRel: Acquire pairs with the Release in `give_back` (and with a previous
        // takeover's Release), so the new holder sees what the previous one published;
        // Release orders nothing of ours but is the natural pair for a handover word.
        match word.compare_exchange(0, me, AcqRel, Acquire) {
            Ok(_) => return Ok(0),
            Err(owner) if owner != me && !alive(owner) => {
                // AcqRel: as above; the dead owner's last stores were made before it died.
                if word.compare_exchange(owner, me, AcqRel, Relaxed).is_ok() {
                    return Ok(owner);
                }
            }
            Err(owner) => return Err(owner),
        }
    }
    Err(word.load(Relaxed))
}

/// Gives back a role taken with [`take`].
pub(crate) fn give_back(word: &AtomicU32) {
    // Release: pairs with the Acquire in `take`: the next owner sees our final stores.
    word.store(0, Release);
}
