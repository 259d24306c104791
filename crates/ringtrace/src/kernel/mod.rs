//! Readers of the Linux kernel's own ring buffers: BPF ring buffer maps ([`bpf`]) and
//! perf event mmap rings ([`perf`]); and a producer into the one the kernel consumes,
//! the BPF user ring buffer ([`bpf::UserRingBuf`]).
//!
//! Both read memory the kernel writes and another process may map too, so neither
//! trusts it: every length is checked against the positions and the buffer before a
//! byte is read, and every loop is bounded by the buffer's size.

#[cfg(not(loom))]
pub mod bpf;
#[cfg(not(loom))]
pub mod perf;

/// The BPF reader's algorithm alone, with loom's atomics, for its models.
#[cfg(loom)]
#[path = "bpf/reader.rs"]
pub(crate) mod bpf_reader;
#[cfg(all(test, loom))]
#[path = "bpf/reader_loom.rs"]
mod bpf_reader_loom;

/// The BPF user ring buffer producer's algorithm alone, with loom's atomics, for its
/// models.
#[cfg(loom)]
#[path = "bpf/user_producer.rs"]
pub(crate) mod bpf_user_producer;
#[cfg(all(test, loom))]
#[path = "bpf/user_producer_loom.rs"]
mod bpf_user_producer_loom;
