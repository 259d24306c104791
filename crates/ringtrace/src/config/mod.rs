//! The static configuration of a ring: its producer kind and its mode are type
//! parameters, so the fast path is specialized at compile time and carries no runtime
//! branch on them (the idea of LTTng's client configuration, in Rust's type system).

mod kind;
#[cfg(not(loom))]
mod mode;

pub use crate::barrier::uses_membarrier;
pub use kind::{Mpsc, ProducerKind, Spsc, Wakeup, WakeupPolicy};
#[cfg(not(loom))]
pub use mode::{Discard, Mode, Overwrite};
