//! Readers of the Linux kernel's own ring buffers: BPF ring buffer maps
//! ([`bpf`]) and perf event mmap rings ([`perf`]).

pub mod perf;
pub mod bpf;
