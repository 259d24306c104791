//! The retire lock (`lock_pid`): taking it, dropping it, and taking it over from a
//! process that died holding it.
//!
//! The lock word holds the holder's process id, stored by the CAS that takes the lock,
//! so there is no instant at which the lock is held by nobody known. A holder can die
//! at any point of its work; the one that takes the lock over finishes that work from
//! what the shared words say, which is always enough:
//!
//! * `retire` changes `O` and `retired` under the seqlock, then zeroes `[Z, O + cap)`,
//!   then publishes `Z = O + cap`. Whatever point it died at, `O` is a record boundary
//!   (the old one or the new one), and `Z` is still the old frontier; zeroing
//!   `[Z, O + cap)` again and publishing `Z = O + cap` completes it. (If it died inside
//!   the seqlock write, `retired` may miss the records it gave up: their count is lost,
//!   and the records themselves were overwritten, which is what they were given up for.)
//! * A pause (`PAUSER`) changes nothing but the pause flag in `P`: clearing it ends the
//!   pause.

use super::core::Core;
use crate::format::control::{LOCK, PAUSED, PAUSER};
use crate::owner;
use crate::region::Region;
use crate::sync::fence;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

impl<R: Region> Core<R> {
    /// Takes the retire lock for `who` (a process id, with [`PAUSER`] for a pause).
    #[inline]
    pub(super) fn try_lock(&self, who: u32) -> bool {
        let lock = &self.control().overwrite.0.lock_pid;
        // Acquire: pairs with the Release store in `unlock`: the last holder's zeroing,
        // its updates of `O` and `Z`, and a pauser's in-place reads happen-before ours.
        lock.load(Relaxed) == 0 && lock.compare_exchange(0, who, Acquire, Relaxed).is_ok()
    }

    /// Drops the retire lock (after publishing `Z`).
    #[inline]
    pub(super) fn unlock(&self) {
        // Release: pairs with the Acquire CAS in `try_lock`.
        self.control().overwrite.0.lock_pid.store(0, Release);
    }

    /// If the retire lock's holder is a dead process, takes the lock over, finishes
    /// the holder's work (module docs) and drops the lock. True if it did.
    ///
    /// `may_write`: the caller maps the data area writable. A handle that maps it
    /// read-only ends a dead pauser's pause (control block only), and a dead retirer's
    /// seqlock write (so that readers are not `Busy` for good), but leaves the
    /// retirer's zeroing, and its lock, to a producer.
    pub(crate) fn recover_lock(&self, may_write: bool) -> bool {
        let line = &self.control().overwrite.0;
        // Relaxed: only compared; the CAS below decides.
        let holder = line.lock_pid.load(Relaxed);
        let pid = holder & !PAUSER;
        if holder == 0 || pid == owner::my_pid() || owner::alive(pid) {
            return false;
        }
        if !may_write && holder & PAUSER == 0 {
            // Relaxed: compared; the CAS decides. Release: pairs with the readers'
            // Acquire load of `seq` in `over_state` (as the end of a write does).
            let s = line.seq.load(Relaxed);
            return s & 1 != 0 && line.seq.compare_exchange(s, s + 1, Release, Relaxed).is_ok();
        }
        // Acquire: the dead holder's stores have all been made (the kernel reaps a
        // process's threads before `kill(pid, 0)` says ESRCH); this orders our reads
        // after the load that saw its id.
        if line.lock_pid.compare_exchange(holder, owner::my_pid(), Acquire, Relaxed).is_err() {
            return false;
        }
        let cap = self.capacity();
        // Relaxed: we hold the lock.
        let s = line.seq.load(Relaxed);
        if s & 1 != 0 {
            // Release: ends the dead writer's seqlock write (pairs with the readers'
            // Acquire load of `seq` in `over_state`).
            line.seq.store(s + 1, Release);
        }
        let o = line.over_pos.load(Relaxed);
        let z = line.zeroed.load(Relaxed) & !LOCK;
        let new_z = o + cap;
        if may_write && new_z > z && new_z - z <= cap && z % 8 == 0 {
            // Release fence: `O` before the zeroes, as in `retire`.
            fence(Release);
            let mut at = z;
            while at < new_z {
                // Relaxed: published by the Release store of `zeroed` below.
                self.region.header(at).store(0, Relaxed);
                at += 8;
            }
        }
        // Release: as in `retire`: the zeroes happen-before any write of the new space.
        line.zeroed.store(new_z.max(z), Release);
        if holder & PAUSER != 0 {
            // Relaxed: as in `resume`.
            self.control().producer.0.pos.fetch_and(!PAUSED, Relaxed);
        }
        // Relaxed: a statistic.
        self.control().consumer.0.dead.fetch_add(1, Relaxed);
        self.unlock();
        true
    }
}
