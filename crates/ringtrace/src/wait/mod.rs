//! Every wait of the library, in one place: bounded waits for another thread or
//! process ([`patience`]: spin, then yield, then sleep, and give up at a deadline),
//! sleeping on a ring's doorbell (`doorbell`: the futex of a ring shared between
//! processes, the eventfd of a private one), on epoll (`epoll`: kernel ring buffer
//! maps), a user-space consumer's sleep (`sleep`), and the shape every reader's `poll`
//! has (`poll`).
//!
//! How long a spin or a yield takes depends on the machine and its load: on an idle
//! core a `sched_yield` returns in well under a microsecond, on a loaded one it may
//! not return for milliseconds. A wait that gave up after a number of spins or yields
//! would give up early on one machine and late on another. Every wait in the library
//! that can make its caller give up therefore gives up at a deadline measured with the
//! monotonic clock ([`std::time::Instant`]); spinning and yielding are only its first phases. The
//! table of the library's waits, with the bound each has and why, is in
//! `docs/design/waits.md`.
//!
//! Under loom there is no clock: a [`Patience`] gives up after a fixed number of
//! rounds (each a loom yield, so that the model can schedule the thread waited for),
//! which keeps the models finite.

#[cfg(not(loom))]
pub(crate) mod doorbell;
#[cfg(not(loom))]
pub(crate) mod epoll;
pub(crate) mod flag;
pub(crate) mod patience;
#[cfg(not(loom))]
pub(crate) mod poll;
#[cfg(not(loom))]
pub(crate) mod sleep;

pub(crate) use patience::{settle, Patience};

/// How often a waiting side looks whether the process it waits for died: a consumer
/// waiting at a record left unfinished, or for producers of a ring shared between
/// processes; a producer waiting for room, for its consumer.
#[cfg(not(loom))]
pub(crate) const DEAD_CHECK: std::time::Duration = std::time::Duration::from_millis(200);
