//! [`KernelError`]: attaching to and reading the Linux kernel's rings.

use std::io;
use std::path::PathBuf;

/// Errors of attaching to and reading the Linux kernel's rings: BPF ring buffer maps
/// ([`kernel::bpf`](crate::kernel::bpf)) and perf events
/// ([`kernel::perf`](crate::kernel::perf)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
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
    #[error("nothing is pinned at {path} (is it a path in a mounted bpffs?)")]
    NotPinned {
        /// The path.
        path: PathBuf,
        /// The kernel's error.
        #[source]
        source: io::Error,
    },
    /// The kernel refused for lack of privileges.
    #[error("{what}: permission denied (this needs {needs}, or root)")]
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
    /// Another reader holds the map's reader lock (see
    /// [`BpfRingBuf`](crate::kernel::bpf::BpfRingBuf)): a ringtrace reader in this or
    /// another process, or whoever bound the lock's name first.
    #[error(
        "map {id} already has a reader{}: a BPF ring buffer has one consumer position, and two \
         readers would each miss records",
        holder_text(.holder)
    )]
    MapBusy {
        /// The map's id.
        id: u32,
        /// The holder's pid and uid, where they can be told (not from outside the
        /// initial pid namespace).
        holder: Option<(u32, u32)>,
    },
    /// The map is not a `BPF_MAP_TYPE_USER_RINGBUF`.
    #[error(
        "BPF map {name:?} (id {id}) is of type {kind} ({map_type}), not a user ring buffer \
         (BPF_MAP_TYPE_USER_RINGBUF){hint}"
    )]
    NotUserRingBuf {
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
    /// Another process holds the user ring buffer map's producer lock (see
    /// [`UserRingBuf`](crate::kernel::bpf::UserRingBuf)), or another handle of this
    /// process does.
    #[error(
        "user ring buffer map {id} already has a producer{}: two processes reserving at once \
         would write over each other's samples (the threads of one process share a handle)",
        holder_text(.holder)
    )]
    ProducerBusy {
        /// The map's id.
        id: u32,
        /// The holder's pid and uid, where they can be told.
        holder: Option<(u32, u32)>,
    },
    /// Another system call failed.
    #[error("{what}")]
    Io {
        /// What ringtrace was doing.
        what: &'static str,
        /// The kernel's error.
        #[source]
        source: io::Error,
    },
    /// `perf_event_open(2)` failed.
    #[error("perf_event_open of the {event} software event failed ({hint})")]
    Open {
        /// The event asked for.
        event: &'static str,
        /// The system call's error.
        source: io::Error,
        /// What to do about it.
        hint: String,
    },
    /// The number of data pages is not a power of two from 1 up.
    #[error(
        "{pages} data pages is invalid: a perf ring has a power of two of data pages \
         (1, 2, 4, ...) after its metadata page, at most {max}"
    )]
    InvalidPages {
        /// What was asked for.
        pages: usize,
        /// The largest count allowed.
        max: usize,
    },
    /// `mmap(2)` of the event failed.
    #[error("mmap of {bytes} bytes of the perf event failed ({hint})")]
    Map {
        /// The length of the mapping asked for.
        bytes: usize,
        /// The system call's error.
        source: io::Error,
        /// What to do about it.
        hint: String,
    },
    /// The metadata page describes a data area this reader cannot use.
    #[error(
        "the perf metadata page gives a data area at offset {offset} of {size} bytes, which does not fit \
         the {mapped}-byte mapping or is not a power of two: the file descriptor is not a perf event's"
    )]
    Layout {
        /// `data_offset`.
        offset: u64,
        /// `data_size`.
        size: u64,
        /// Bytes mapped.
        mapped: usize,
    },
    /// Duplicating the event's file descriptor for the ring failed.
    #[error("duplicating the perf event's file descriptor failed (too many open files? raise RLIMIT_NOFILE)")]
    Dup(#[source] io::Error),
    /// A perf ioctl failed.
    #[error("ioctl {op} on the perf event failed (is the file descriptor a perf event's?)")]
    Ioctl {
        /// The ioctl (`PERF_EVENT_IOC_ENABLE`, ...).
        op: &'static str,
        /// Its error.
        source: io::Error,
    },
    /// A record header that the kernel cannot have written. Reading stops there.
    #[error("corrupt perf record header at data offset {offset} (ring position {pos}): size {size} {reason}")]
    Corrupt {
        /// Offset of the header in the data area.
        offset: u64,
        /// The 64-bit ring position of the header.
        pos: u64,
        /// `header.size` as read.
        size: u64,
        /// What is wrong with it.
        reason: CorruptReason,
    },
    /// `data_head - data_tail` is larger than the data area: the kernel never lets a
    /// writable ring get there, so the tail was changed behind the reader's back (or the
    /// image is not a forward ring's). Nothing was walked.
    #[error(
        "perf ring positions are inconsistent: data_head {head} - data_tail {tail} is more than \
         the {size}-byte data area (the ring was overwritten or the tail changed by someone else); \
         the reader skipped to the head"
    )]
    Overrun {
        /// `data_head`.
        head: u64,
        /// `data_tail`.
        tail: u64,
        /// Size of the data area.
        size: u64,
    },
    /// `data_head` moved the wrong way for this kind of ring.
    #[error(
        "data_head {head:#x} moved {moved} but this {ring} reads rings written {expected}: \
         open the event with backward({backward}) for a {ring}"
    )]
    Direction {
        /// `ForwardRing` or `BackwardRing`.
        ring: &'static str,
        /// `data_head` as read.
        head: u64,
        /// The direction `data_head` moved.
        moved: &'static str,
        /// The direction this ring reads.
        expected: &'static str,
        /// What [`EventBuilder::backward`](crate::kernel::perf::EventBuilder::backward) must be given.
        backward: bool,
    },
    /// A data area for the pure walks that is not a power of two of at least 8 bytes.
    #[error("a perf data area of {len} bytes is invalid: it must be a power of two of at least 8 bytes")]
    InvalidDataArea {
        /// Its length.
        len: usize,
    },
}

/// Why a perf record header cannot be right: the `reason` of [`KernelError::Corrupt`]
/// (a part of that error's message, not an error of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptReason {
    /// A zero size between the tail and the head of a forward ring: the kernel writes
    /// every byte there, so either the memory was changed or the positions are wrong.
    Zero,
    /// Smaller than the 8-byte header itself.
    TooSmall,
    /// The kernel writes records in multiples of 8 bytes.
    Unaligned,
    /// The record would end past the head (forward) or past the data area's size.
    PastEnd {
        /// Bytes between the record's start and the end of what may hold records.
        available: u64,
    },
}

impl std::fmt::Display for CorruptReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CorruptReason::Zero => f.write_str("is zero where the kernel must have written a record"),
            CorruptReason::TooSmall => f.write_str("is smaller than the 8-byte record header"),
            CorruptReason::Unaligned => {
                f.write_str("is not a multiple of 8 (the kernel writes 8-byte aligned records)")
            }
            CorruptReason::PastEnd { available } => {
                write!(f, "runs past the end of the written data ({available} bytes left there)")
            }
        }
    }
}

/// ` (pid P, uid U)`, or nothing: who holds a map's reader lock, for
/// [`KernelError::MapBusy`].
fn holder_text(holder: &Option<(u32, u32)>) -> String {
    holder.map(|(pid, uid)| format!(" (pid {pid}, uid {uid})")).unwrap_or_default()
}
