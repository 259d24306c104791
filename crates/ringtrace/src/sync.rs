//! The std/loom switch for everything the protocol synchronizes through.
//!
//! Built normally, these are `core`'s atomics. Built with `RUSTFLAGS="--cfg loom"`,
//! they are loom's, so the models in `tests/loom.rs` explore every interleaving of
//! the real protocol code in [`crate::protocol`].

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Loom's scheduling point, through which [`crate::wait::Patience`] waits under loom
/// (outside loom it spins, yields and sleeps on its own).
#[cfg(loom)]
pub(crate) use loom::thread::yield_now;

/// `UnsafeCell` with loom's closure API, so payload shadows in the heap region are
/// race-checked under loom and free otherwise.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(all(test, not(loom)))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(all(test, not(loom)))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(v: T) -> Self {
        Self(core::cell::UnsafeCell::new(v))
    }
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex};
#[cfg(all(test, not(loom)))]
pub(crate) use std::sync::{Condvar, Mutex};
