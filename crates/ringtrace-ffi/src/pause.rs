//! A pause of an overwrite ring held by a ring handle across C calls
//! (`ringtrace_pause` to `ringtrace_resume`).

use std::ffi::c_int;
use std::ptr::NonNull;

use ringtrace::config::{Mpsc, Overwrite, ProducerKind, Spsc};
use ringtrace::recorder::Paused;
use ringtrace::RingBuf;

use crate::error::Fail;
use crate::guard;

/// A pause held by a ring handle. `Paused` borrows its ring; the hold keeps its own
/// clone of the ring in a box that is neither moved nor freed while the pause lives
/// (`Drop` ends the pause first), so erasing the borrow's lifetime is sound.
#[derive(Debug)]
pub(crate) struct Hold<K: ProducerKind> {
    paused: Option<Paused<'static, K>>,
    /// From `Box::into_raw`; freed in `Drop`.
    ring: NonNull<RingBuf<K, Overwrite>>,
}

impl<K: ProducerKind> Hold<K> {
    pub(crate) fn pause(ring: &RingBuf<K, Overwrite>, timeout_ms: c_int) -> Result<Self, Fail> {
        let ring = NonNull::from(Box::leak(Box::new(ring.clone())));
        // SAFETY: the box is freed only in `Drop`, after the pause (module docs above).
        let borrowed: &'static RingBuf<K, Overwrite> = unsafe { &*ring.as_ptr() };
        let paused = match guard::timeout(timeout_ms) {
            Some(t) => borrowed.pause_timeout(t),
            None => borrowed.pause(),
        };
        match paused {
            Ok(p) => Ok(Hold { paused: Some(p), ring }),
            Err(e) => {
                // SAFETY: from `Box::into_raw` above; the failed pause borrows nothing.
                drop(unsafe { Box::from_raw(ring.as_ptr()) });
                Err(e.into())
            }
        }
    }
}

impl<K: ProducerKind> Hold<K> {
    /// The pause, read in place (`None` only while `Drop` runs).
    pub(crate) fn paused(&self) -> Option<&Paused<'static, K>> {
        self.paused.as_ref()
    }
}

impl<K: ProducerKind> Drop for Hold<K> {
    fn drop(&mut self) {
        drop(self.paused.take());
        // SAFETY: from `Box::into_raw`; the pause that borrowed it is gone.
        drop(unsafe { Box::from_raw(self.ring.as_ptr()) });
    }
}

/// The pause of a multi- or single-producer overwrite ring.
#[derive(Debug)]
pub(crate) enum PauseHold {
    Mpsc(Hold<Mpsc>),
    Spsc(Hold<Spsc>),
}
