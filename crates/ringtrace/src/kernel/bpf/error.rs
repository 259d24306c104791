//! Why a BPF ring buffer map could not be attached.

use std::io;
use std::path::PathBuf;

/// Why a BPF ring buffer map could not be attached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BpfError {
    /// The descriptor is not a BPF map at all.
    #[error("file descriptor {fd} is not a BPF map (it is {what})")]
    NotAMap {
        /// The descriptor.
        fd: i32,
        /// What it is, as `/proc/self/fd` names it.
        what: String,
    },
    /// The map is not a `BPF_MAP_TYPE_RINGBUF`.
    #[error(
        "BPF map {name:?} (id {id}) is of type {kind} ({map_type}), not a ring buffer \
         (BPF_MAP_TYPE_RINGBUF){hint}"
    )]
    NotRingBuf {
        /// The map's name.
        name: String,
        /// The map's id.
        id: u32,
        /// Its `bpf_map_type`.
        map_type: u32,
        /// The type's name.
        kind: &'static str,
        /// What to use instead, if anything.
        hint: &'static str,
    },
    /// No map has this id (it never existed, or was freed when its last user closed it).
    #[error("no BPF map has id {id} (list them with `bpftool map`)")]
    NoSuchMap {
        /// The id asked for.
        id: u32,
    },
    /// Nothing is pinned at the path, or what is there is not a bpffs object.
    #[error("nothing is pinned at {path} (is it a path in a mounted bpffs?): {source}")]
    NotPinned {
        /// The path.
        path: PathBuf,
        /// The kernel's error.
        #[source]
        source: io::Error,
    },
    /// The kernel refused for lack of privileges.
    #[error("{what}: permission denied (this needs {needs}, or root): {source}")]
    Permission {
        /// What was refused.
        what: String,
        /// The capability the kernel asks for here.
        needs: &'static str,
        /// The kernel's error.
        #[source]
        source: io::Error,
    },
    /// The map's size is not one a ring buffer map can have.
    #[error("BPF ring buffer map has a data size of {size} bytes, not a power of two and a multiple of the page size")]
    BadSize {
        /// Its `max_entries`.
        size: u32,
    },
    /// The positions in the map's memory are not a ring's (another reader moved the
    /// consumer position to somewhere invalid).
    #[error("BPF ring buffer positions are inconsistent: consumer {consumer}, producer {producer}")]
    BadPositions {
        /// `consumer_pos`.
        consumer: u64,
        /// `producer_pos`.
        producer: u64,
    },
    /// Another system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What ringtrace was doing.
        what: &'static str,
        /// The kernel's error.
        #[source]
        source: io::Error,
    },
}

pub(super) fn is_permission(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
}

/// Names of the map types a descriptor may turn out to be (`enum bpf_map_type`).
pub(super) fn map_type_name(t: u32) -> &'static str {
    const NAMES: [&str; 34] = [
        "unspec",
        "hash",
        "array",
        "prog_array",
        "perf_event_array",
        "percpu_hash",
        "percpu_array",
        "stack_trace",
        "cgroup_array",
        "lru_hash",
        "lru_percpu_hash",
        "lpm_trie",
        "array_of_maps",
        "hash_of_maps",
        "devmap",
        "sockmap",
        "cpumap",
        "xskmap",
        "sockhash",
        "cgroup_storage",
        "reuseport_sockarray",
        "percpu_cgroup_storage",
        "queue",
        "stack",
        "sk_storage",
        "devmap_hash",
        "struct_ops",
        "ringbuf",
        "inode_storage",
        "task_storage",
        "bloom_filter",
        "user_ringbuf",
        "cgrp_storage",
        "arena",
    ];
    NAMES.get(t as usize).copied().unwrap_or("unknown")
}
