//! Where a ring's bytes live. The protocol in [`crate::protocol`] is generic over a
//! [`Region`] (thingbuf's core/storage split): the real ring is a file (a memfd, or a
//! named ring file: `file`) mapped twice ([`mmap`]); loom models and unit tests use a heap region whose payload words are
//! race-checked cells (`heap`, built for tests and loom only).

use crate::format::control::Control;
use crate::sync::AtomicU64;

#[cfg(not(loom))]
pub(crate) mod file;
#[cfg(any(test, loom))]
pub(crate) mod heap;
#[cfg(not(loom))]
pub(crate) mod mmap;
#[cfg(not(loom))]
pub(crate) mod reserve;

/// A ring's memory: control block, data area and doorbell.
///
/// # Safety
///
/// Implementors guarantee, for the life of the region:
/// * `capacity()` is a power of two of at least [`Self::MIN_CAPACITY`] and never
///   changes;
/// * `header(pos)` is the 8-byte word at data offset `pos & (capacity - 1)`, the same
///   object every time for the same offset;
/// * `zero(pos, len)` sets the bytes `[pos, pos + len)` (positions modulo the capacity),
///   headers included, to zero.
pub(crate) unsafe trait Region: Send + Sync {
    /// The smallest capacity this kind of region has (at least 16): records up to this
    /// minus 16 (two headers: a record and the next one, kept zeroed) always fit, which
    /// lets `reserve` drop its size check for small lengths known at compile time.
    const MIN_CAPACITY: u64;
    /// The control block.
    fn control(&self) -> &Control;
    /// Bytes in the data area.
    fn capacity(&self) -> u64;
    /// The header word at a record boundary.
    fn header(&self, pos: u64) -> &AtomicU64;
    /// Zeroes `len` bytes from `pos`.
    ///
    /// # Safety
    ///
    /// * The caller has `[pos, pos + len)` to itself: the consumer, for consumed space it
    ///   has not yet published (no producer accesses it until the consumer position
    ///   passes it); or a single producer, for free space past its producer position
    ///   (the consumer reads there only after a later commit publishes it).
    /// * No reference into that range is alive.
    /// * `len <= capacity()` and `pos` and `len` are multiples of 8.
    unsafe fn zero(&self, pos: u64, len: u64);
    /// Zeroes `len` bytes from `pos` with relaxed atomic word stores: overwrite mode
    /// gives space up while readers may copy it (they detect the rewrite). `len` is at
    /// most the capacity and a multiple of 8, `pos` too.
    fn zero_atomic(&self, pos: u64, len: u64) {
        let mut at = pos;
        while at < pos + len {
            // Relaxed: the caller publishes the zeroes (overwrite: the Release store of
            // the zeroed frontier).
            self.header(at).store(0, crate::sync::Ordering::Relaxed);
            at += 8;
        }
    }
    /// Wakes the consumer (eventfd write, or the model's condition variable).
    fn notify(&self);
    /// Wakes every producer waiting for room: adds one to the control block's
    /// `room_futex` (Release: pairs with the Acquire load in `Core::room_token`) and
    /// wakes its waiters (`FUTEX_WAKE`, or the model's condition variable).
    fn notify_room(&self);
    /// Whether processes other than this one may produce into the ring: then the
    /// asymmetric barrier pair (whose heavy side, `membarrier(PRIVATE_EXPEDITED)`,
    /// reaches only this process's threads) cannot be used.
    fn cross_process(&self) -> bool {
        false
    }
    /// Whether a producer may die while a reader of the ring lives: only a producer in
    /// another process can. Then producers mark their claims and readers step over dead
    /// ones ([`crate::protocol::repair`]); otherwise neither happens.
    #[inline(always)]
    fn producers_may_die(&self) -> bool {
        self.cross_process()
    }
}
