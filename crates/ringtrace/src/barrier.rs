//! The asymmetric barrier of the wakeup protocol.
//!
//! A lost wakeup is a store-buffering race (as in libbpf's `ringbuf_process_ring` under
//! edge-triggered epoll, found by Tatsuyuki Ishi): a producer stores a header then
//! loads the consumer's wait state; the consumer stores its wait state then loads the
//! header. Each side needs StoreLoad ordering between its store and its load, or both
//! may read stale values and the consumer sleeps with a record pending.
//!
//! A full fence on every commit would cost more than the rest of the commit (a compiler
//! fence costs nothing at run time). The consumer goes to sleep
//! rarely, so it pays instead: producers use [`light`], a compiler fence, and the
//! consumer uses [`heavy`], `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which runs a
//! full memory barrier on every CPU currently running a thread of this process (and
//! threads not running pass one when they are switched in). This is the asymmetric
//! Dekker pattern of membarrier(2), liburcu and folly's `asymmetricHeavyBarrier`.
//!
//! Where membarrier is unavailable (seccomp, old kernels) or disabled with
//! `RINGTRACE_BARRIER=fence`, both sides use `fence(SeqCst)`. The choice is made once per
//! process, before the first ring exists, and never changes. Under loom both are
//! `fence(SeqCst)`, which loom models: the models check the protocol with the symmetric
//! form, and membarrier's guarantee is what makes the asymmetric form equivalent.

use std::io;

#[cfg(not(loom))]
mod imp {
    use std::io;
    use std::sync::atomic::{compiler_fence, fence, AtomicBool, Ordering};
    use std::sync::OnceLock;

    use rustix::thread::{membarrier, MembarrierCommand};

    /// Set once, before any ring exists; producers read it with Relaxed (what they see
    /// was fixed before the ring they write to was created and handed to them).
    static ASYMMETRIC: AtomicBool = AtomicBool::new(false);
    static INIT: OnceLock<bool> = OnceLock::new();

    pub(crate) fn init() -> bool {
        *INIT.get_or_init(|| {
            let wanted = std::env::var("RINGTRACE_BARRIER").map(|v| v != "fence").unwrap_or(true);
            let ok = wanted && membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok();
            ASYMMETRIC.store(ok, Ordering::Relaxed);
            ok
        })
    }

    #[inline(always)]
    pub(crate) fn light(asymmetric: bool) {
        if asymmetric {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
    }

    pub(crate) fn heavy() -> io::Result<()> {
        fence(Ordering::SeqCst);
        if ASYMMETRIC.load(Ordering::Relaxed) {
            membarrier(MembarrierCommand::PrivateExpedited)?;
            fence(Ordering::SeqCst);
        }
        Ok(())
    }
}

#[cfg(loom)]
mod imp {
    use crate::sync::{fence, Ordering};
    use std::io;

    pub(crate) fn init() -> bool {
        false
    }
    pub(crate) fn light(_asymmetric: bool) {
        fence(Ordering::SeqCst);
    }
    pub(crate) fn heavy() -> io::Result<()> {
        fence(Ordering::SeqCst);
        Ok(())
    }
}

/// Decides, once per process, which barrier pair to use; true if asymmetric.
pub(crate) fn init() -> bool {
    imp::init()
}

/// The producer's half: orders its header store before its wait-state load.
/// `asymmetric` is what [`init`] returned (each ring keeps a copy, so the fast path
/// tests a value it has at hand instead of loading a global).
#[inline(always)]
pub(crate) fn light(asymmetric: bool) {
    imp::light(asymmetric)
}

/// The consumer's half: orders its wait-state store before its header load, and (with
/// membarrier) every running producer's earlier stores before that load.
pub(crate) fn heavy() -> io::Result<()> {
    imp::heavy()
}

/// Whether this process uses membarrier (for reports and tests).
pub fn uses_membarrier() -> bool {
    init()
}
