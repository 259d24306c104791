//! BPF ring buffer maps (`BPF_MAP_TYPE_RINGBUF`), read from user space: [`BpfRingBuf`]
//! for one map, [`RingSet`] for several polled together (libbpf's `ring_buffer__add`).
//!
//! A map is attached by descriptor ([`BpfRingBuf::from_fd`]), by the path it is pinned
//! at in a bpffs ([`BpfRingBuf::open_pinned`]) or by its id
//! ([`BpfRingBuf::open_id`]). Its consumer page is mapped writable and everything else
//! read-only, as the kernel requires. Records are handed to the callback in place
//! (zero-copy) in the order the kernel reserved them, discarded ones skipped, as with
//! the user-space rings' [`Consumer`](crate::Consumer): the same `consume`,
//! `consume_n`, `poll`, `wait`, `release` and `arm` (which cannot fail here, so it
//! returns a plain `bool`), and the same [`crate::ConsumeError`].
//!
//! What differs from libbpf's consumer, and why, is in the docs of `reader.rs`: the
//! consumer position is published in batches, and waiting is safe with edge-triggered
//! epoll (libbpf's release-only store loses wakeups there).
//!
//! A map created with `BPF_F_RB_OVERWRITE` (Linux 6.19 and later) is read as a flight
//! recorder: records are copied and checked before they are delivered (the kernel does
//! not wait for the reader), and what the kernel overwrote first is counted in
//! [`BpfStats::overwritten_bytes`]. [`BpfRingBuf::snapshot`] copies what a map holds
//! without consuming it, in either mode.
//!
//! The other direction: [`UserRingBuf`] writes samples into a user ring buffer map
//! (`BPF_MAP_TYPE_USER_RINGBUF`, Linux 6.1), which a BPF program drains with
//! `bpf_user_ringbuf_drain` (libbpf's `user_ring_buffer`): the same header protocol
//! with the roles turned round, the kernel the consumer that checks every sample.

mod error;
mod lock;
mod map;
mod open;
mod reader;
mod ringbuf;
mod set;
mod sys;
mod user;
mod user_map;
pub(crate) mod user_producer;

pub use crate::error::KernelError;
pub use reader::BpfStats;
pub use ringbuf::{BpfRingBuf, DEFAULT_LINGER};
pub use set::RingSet;
pub use sys::BPF_F_RB_OVERWRITE;
pub use user::{UserRawError, UserReserveError, UserRingBuf, UserSample};
pub use user_producer::UserStats;
