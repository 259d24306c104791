//! Readers of the Linux kernel's own ring buffers: BPF ring buffer maps ([`bpf`]) and
//! perf event mmap rings ([`perf`]).
//!
//! Both read memory the kernel writes and another process may map too, so neither
//! trusts it: every length is checked against the positions and the buffer before a
//! byte is read, and every loop is bounded by the buffer's size.

pub mod bpf;
pub mod perf;
