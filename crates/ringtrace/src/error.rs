//! Error types. Every misuse the type system cannot rule out is one of these, with a
//! message that says what was wrong and what is allowed; nothing panics on input.
//!
//! Five types, each an enum to match on, each message one line:
//!
//! * [`Error`]: setting up, attaching, pausing, clocks, files and system calls of the
//!   user-space rings and channels;
//! * [`ReserveError`]: a producer's refusals;
//! * [`ConsumeError`]: reading records and taking snapshots;
//! * [`FormatError`]: bytes of a file or of shared memory that are not a valid ringtrace
//!   format (ring and channel files, snapshot files), and the I/O of reading them;
//! * [`KernelError`]: attaching to and reading the Linux kernel's rings (BPF ring buffer
//!   maps, perf events).

use std::convert::Infallible;
use std::io;
use std::path::PathBuf;

use crate::format::control::LAYOUT_VERSION;

/// Errors from creating a ring or a channel, attaching a handle to it, pausing it, or
/// calibrating its clock.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The capacity is not a power of two within the limits.
    #[error(
        "ring capacity {capacity} bytes is invalid: it must be a power of two \
         from {min} (one page) to {max} bytes"
    )]
    InvalidCapacity {
        /// What was asked for.
        capacity: u64,
        /// The smallest capacity allowed: the page size.
        min: u64,
        /// The largest capacity allowed.
        max: u64,
    },
    /// The watermark of [`WakeupPolicy::Watermark`](crate::config::WakeupPolicy) is out of range.
    #[error("wakeup watermark {watermark} bytes is invalid: it must be from 1 to the capacity ({capacity} bytes)")]
    InvalidWatermark {
        /// What was asked for.
        watermark: u64,
        /// The ring's capacity.
        capacity: u64,
    },
    /// The retire look-ahead of an overwrite ring is out of range.
    #[error("retire look-ahead {ahead} bytes is invalid: it must be at most half the capacity ({capacity} bytes)")]
    InvalidRetireAhead {
        /// What was asked for.
        ahead: u64,
        /// The ring's capacity.
        capacity: u64,
    },
    /// The consumer's publication batch is out of range.
    #[error("consumer batch {batch} bytes is invalid: it must be from 8 to the capacity ({capacity} bytes)")]
    InvalidBatch {
        /// What was asked for.
        batch: u64,
        /// The ring's capacity.
        capacity: u64,
    },
    /// A ring has one consumer at a time.
    #[error(
        "the ring already has a consumer (in process {pid}): a ring has one consumer at a time \
         (drop the other one first)"
    )]
    ConsumerAttached {
        /// The process that holds the consumer.
        pid: u32,
    },
    /// A single-producer ring has one producer at a time.
    #[error(
        "the single-producer ring already has a producer (in process {pid}): use an Mpsc ring for \
         several producers"
    )]
    ProducerAttached {
        /// The process that holds the producer.
        pid: u32,
    },
    /// A ring file (or a memfd received from another process) cannot be used: its
    /// header, size, positions or seals are not those of a ring this build can attach.
    #[error("invalid ring file: {reason}")]
    InvalidRing {
        /// What does not match, in words.
        reason: String,
    },
    /// A ring file could not be created or opened.
    #[error("{what} {path}: {source}")]
    File {
        /// What ringtrace was doing.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The error the kernel returned.
        #[source]
        source: io::Error,
    },
    /// The handle was opened for consuming only ([`Access::Consumer`](crate::Access)).
    #[error("this ring handle was opened for consuming only: {what} needs Access::Full")]
    ReadOnly {
        /// What was asked.
        what: &'static str,
    },
    /// A channel's write through its thread-local producer was refused
    /// ([`Channel::output`](crate::Channel::output)); counted like any refused reserve.
    #[error(transparent)]
    Reserve(#[from] ReserveError),
    /// The TSC cannot be used: not an x86-64 CPU, or its TSC is not invariant (CPUID
    /// `0x8000_0007` EDX bit 8); also a shared channel's [`Tsc`](crate::clock::Tsc)
    /// calibration this machine cannot use.
    #[error("this CPU has no invariant TSC (CPUID 0x80000007 EDX bit 8); use the Monotonic clock")]
    NoInvariantTsc,
    /// The TSC calibration measured a rate that makes no sense (a TSC that does not
    /// advance, or a clock that jumped).
    #[error("TSC calibration failed: {0}")]
    TscCalibration(String),
    /// The ring is already paused (by another [`Paused`](crate::recorder::Paused) guard).
    #[error("the ring is already paused")]
    AlreadyPaused,
    /// A producer held the ring's retire lock, or a record claimed before the pause was
    /// not finished, for longer than the pause's timeout (`waited`: 1 s for
    /// [`RingBuf::pause`](crate::RingBuf::pause), else the one given to
    /// [`RingBuf::pause_timeout`](crate::RingBuf::pause_timeout)); the ring was
    /// resumed. Try again, or with a longer timeout.
    #[error("a producer did not finish its record within {waited:?}; the ring was not paused")]
    PauseBusy {
        /// How long the pause waited.
        waited: std::time::Duration,
    },
    /// A shared channel's file has a ring for at most this many producers, all taken by
    /// live processes.
    #[error("the channel file has rings for {max} producers and all are in use by live processes")]
    ChannelFull {
        /// Rings in the file.
        max: u32,
    },
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What ringtrace was doing.
        what: &'static str,
        /// The error the kernel returned.
        #[source]
        source: io::Error,
    },
}

impl Error {
    pub(crate) fn io(what: &'static str) -> impl FnOnce(rustix::io::Errno) -> Error {
        move |e| Error::Io { what, source: e.into() }
    }

    pub(crate) fn file<'a>(
        what: &'static str,
        path: &'a std::path::Path,
    ) -> impl FnOnce(rustix::io::Errno) -> Error + 'a {
        move |e| Error::File { what, path: path.to_path_buf(), source: e.into() }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Error {
        Error::InvalidRing { reason: reason.into() }
    }
}

/// Why a reservation was refused (each refusal is counted in the ring's
/// [`Stats`](crate::Stats)), or a write into a reservation ([`ReserveError::OutOfBounds`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReserveError {
    /// No room now (discard mode): the record is lost and counted in `Stats::lost`.
    #[error("ring full: a record of {len} bytes does not fit now; it is counted as lost")]
    Full {
        /// The payload length asked for.
        len: usize,
    },
    /// Overwrite mode: making room would overwrite a record that is still being written
    /// (or another producer is giving up the space and has not finished): the record is
    /// lost and counted in `Stats::lost`, as the kernel's overwrite mode does.
    #[error("no room: a record of {len} bytes would overwrite a record still being written; it is counted as lost")]
    Pending {
        /// The payload length asked for.
        len: usize,
    },
    /// Overwrite mode: the ring is paused; the record is lost and counted in
    /// `Stats::lost` and `Stats::paused`.
    #[error("ring paused: a record of {len} bytes was refused; it is counted as lost")]
    Paused {
        /// The payload length asked for.
        len: usize,
    },
    /// The record could never fit: counted in `Stats::too_large`.
    #[error("record of {len} bytes is too large: this ring takes records of at most {max} bytes")]
    TooLarge {
        /// The payload length asked for.
        len: usize,
        /// The largest payload this ring accepts.
        max: usize,
    },
    /// A write into an overwrite-mode (or channel) reservation past its end
    /// ([`Reservation::write`](crate::Reservation::write)); nothing was written.
    #[error("write of {len} bytes at offset {offset} does not fit in a record of {record_len} bytes")]
    OutOfBounds {
        /// Offset asked for.
        offset: usize,
        /// Bytes to write.
        len: usize,
        /// The reservation's length.
        record_len: usize,
    },
}

/// Why consuming, reading or taking a snapshot stopped with an error. `E` is the
/// callback's error type; `ConsumeError` alone (`E = Infallible`) is the error of
/// what takes no callback, such as [`RingBuf::snapshot`](crate::RingBuf::snapshot).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumeError<E = Infallible> {
    /// The callback returned this error. The record it was given counts as consumed
    /// (as in libbpf; for a forward perf ring, its tail moves past it); the records
    /// after it are still in the ring.
    #[error("consumer callback failed: {0}")]
    Callback(E),
    /// A header that no ringtrace producer writes: the ring's memory was corrupted.
    /// Consumption stops at that position and does not move past it; a snapshot is
    /// not taken.
    #[error("corrupt record header {header:#018x} at position {pos}")]
    Corrupt {
        /// Position of the bad header.
        pos: u64,
        /// Its raw value.
        header: u64,
    },
    /// The ring's positions are not a ring's: the producer position is behind the
    /// reader's, more than the ring's size ahead of it, or misaligned (another process
    /// moved a shared position, or the memory is corrupt). Nothing is read past them.
    #[error(
        "ring positions are inconsistent: reader at {reader}, producer at {producer} (another reader \
         moved the consumer position, or the ring's memory is corrupt)"
    )]
    Positions {
        /// The position reading starts from.
        reader: u64,
        /// The producer position.
        producer: u64,
    },
    /// Overwrite mode: producers overwrote what the consumer copied, 16 times in a row,
    /// before it could check a copy (or a retiring producer stayed mid-update). Nothing
    /// was lost silently: the next call resumes at the oldest record and counts what was
    /// overwritten. A snapshot returns nothing then: try again, or pause the ring first.
    #[error("producers overwrote the ring faster than the consumer could copy it (16 attempts)")]
    Busy,
    /// Waiting failed.
    #[error("waiting for records failed: {0}")]
    Io(#[from] io::Error),
    /// A perf ring's content or positions cannot be right, or an ioctl on it failed
    /// ([`kernel::perf`](crate::kernel::perf) readers).
    #[error(transparent)]
    Kernel(#[from] KernelError),
}

impl ConsumeError<Infallible> {
    /// This error in a caller's error type (the callback that could not fail was a
    /// reader's own: a drain, a copy).
    pub(crate) fn widen<E>(self) -> ConsumeError<E> {
        match self {
            ConsumeError::Callback(never) => match never {},
            ConsumeError::Corrupt { pos, header } => ConsumeError::Corrupt { pos, header },
            ConsumeError::Positions { reader, producer } => ConsumeError::Positions { reader, producer },
            ConsumeError::Busy => ConsumeError::Busy,
            ConsumeError::Io(e) => ConsumeError::Io(e),
            ConsumeError::Kernel(e) => ConsumeError::Kernel(e),
        }
    }
}

/// Bytes of a file or of shared memory that are not a valid ringtrace format (a ring or
/// channel file read by [`inspect`](crate::inspect), a snapshot file read by
/// [`Snapshot::read_from`](crate::Snapshot::read_from)), or the I/O of reading them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// A read or open failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error the system returned.
        #[source]
        source: io::Error,
    },
    /// The path is not a regular file (a FIFO, directory, device or socket).
    #[error("not a ring file: {path} is a {kind}, not a regular file")]
    NotRegular {
        /// The path given.
        path: String,
        /// What it is.
        kind: &'static str,
    },
    /// A ring image's offset ([`RingFile::open_at`](crate::inspect::RingFile::open_at)) is at or past the end of the file.
    #[error("ring image offset {offset} is at or past the end of the file ({len} bytes)")]
    OffsetPastEnd {
        /// The offset asked for.
        offset: u64,
        /// The file's length.
        len: u64,
    },
    /// The file is shorter than the control block.
    #[error("ring file is {len} bytes, the header alone needs {need}")]
    TooSmall {
        /// The file's length.
        len: u64,
        /// The control block's size.
        need: u64,
    },
    /// The magic is 0: the creating process has not finished initializing the ring.
    #[error("ring is not initialized yet (magic is 0): its creator is still setting it up, or died doing so")]
    Uninitialized,
    /// The first word is not the ring magic.
    #[error("not a ringtrace ring file: magic is {found:#018x}, expected \"RINGTRC\\0\"")]
    BadMagic {
        /// The first 8 bytes, as a little-endian number.
        found: u64,
    },
    /// A layout version this reader does not know.
    #[error("layout version {found} is not supported (this ringtrace reads version {LAYOUT_VERSION})")]
    Version {
        /// The version in the file.
        found: u32,
    },
    /// A header field has a value no ring has.
    #[error("invalid ring header: {field} is {value}, expected {expected}")]
    BadField {
        /// The field's name.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it may be.
        expected: &'static str,
    },
    /// The file is shorter than the header says.
    #[error("file is {len} bytes but capacity {capacity} needs {need} (truncated?)")]
    Truncated {
        /// The file's length.
        len: u64,
        /// The capacity in the header.
        capacity: u64,
        /// `data_offset + capacity`.
        need: u64,
    },
    /// The positions (or the header) contradict each other.
    #[error("positions are inconsistent: {0}")]
    Positions(String),
    /// The header changed after the file was opened.
    #[error("the ring header changed while reading (was the ring re-created?)")]
    HeaderChanged,
    /// [`RingFile::records_from`](crate::inspect::RingFile::records_from) was given a position past the newest record.
    #[error("position {from} is past the producer position {end} (was the ring re-created?)")]
    PastEnd {
        /// The position asked for.
        from: u64,
        /// The producer position.
        end: u64,
    },
    /// [`RingFile::records_from`](crate::inspect::RingFile::records_from) was given a position that is not a multiple of 8.
    #[error("position {0} is not a record boundary (positions are multiples of 8)")]
    Unaligned(u64),
    /// Not enough memory to copy the records.
    #[error("cannot allocate {0} bytes to copy the ring's records")]
    OutOfMemory(u64),
    /// A snapshot file that is not one, or is damaged
    /// ([`Snapshot::read_from`](crate::Snapshot::read_from)).
    #[error("not a valid ringtrace snapshot file: {0}")]
    InvalidSnapshot(String),
    /// A snapshot file's checksum does not match its bytes: the file was damaged after
    /// it was written (a flipped bit, a torn write, a bad copy).
    #[error(
        "damaged ringtrace snapshot file: checksum mismatch in the {part} (bytes {start}..{end}): \
         CRC32C {computed:#010x} computed, {stored:#010x} stored"
    )]
    Checksum {
        /// Which part: `"header"` or `"ring bytes"`.
        part: &'static str,
        /// Its first byte's offset in the file.
        start: u64,
        /// Its end's offset in the file.
        end: u64,
        /// The checksum the file holds.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
}

impl FormatError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> FormatError {
        move |source| FormatError::Io { what: what.into(), source }
    }
}

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
    /// `perf_event_open(2)` failed.
    #[error("perf_event_open of the {event} software event failed: {source}; {hint}")]
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
    #[error("mmap of {bytes} bytes of the perf event failed: {source}; {hint}")]
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
    #[error("duplicating the perf event's file descriptor failed: {0} (too many open files? raise RLIMIT_NOFILE)")]
    Dup(#[source] io::Error),
    /// A perf ioctl failed.
    #[error("ioctl {op} on the perf event failed: {source} (is the file descriptor a perf event's?)")]
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

#[cfg(test)]
mod tests {
    use super::*;

    fn one_line(e: &dyn std::error::Error) {
        let msg = e.to_string();
        assert!(!msg.is_empty() && !msg.contains('\n'), "{msg:?}");
    }

    #[test]
    fn every_type_formats_to_one_line() {
        let io = || io::Error::other("cause");
        one_line(&Error::PauseBusy { waited: std::time::Duration::from_millis(5) });
        one_line(&Error::TscCalibration("0 ticks in 20000000 ns".into()));
        one_line(&Error::Io { what: "mapping the ring", source: io() });
        one_line(&ReserveError::OutOfBounds { offset: 8, len: 16, record_len: 16 });
        one_line(&ConsumeError::<Infallible>::Busy);
        one_line(&ConsumeError::<io::Error>::Callback(io()));
        one_line(&ConsumeError::<Infallible>::Kernel(KernelError::BadSize { size: 12288 }));
        one_line(&FormatError::InvalidSnapshot("truncated in the header".into()));
        one_line(&FormatError::Checksum { part: "header", start: 0, end: 88, stored: 1, computed: 2 });
        one_line(&KernelError::Corrupt { offset: 8, pos: 8, size: 0, reason: CorruptReason::Zero });
        one_line(&KernelError::NotPinned { path: "/sys/fs/bpf/x".into(), source: io() });
    }

    #[test]
    fn consume_error_defaults_to_infallible() {
        let e: ConsumeError = ConsumeError::Corrupt { pos: 16, header: 0xdead };
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert_eq!(boxed.to_string(), "corrupt record header 0x000000000000dead at position 16");
        fn take() -> Result<(), ConsumeError> {
            Err(ConsumeError::Busy)
        }
        fn caller() -> Result<(), Box<dyn std::error::Error>> {
            take()?;
            Ok(())
        }
        assert!(caller().unwrap_err().to_string().contains("16 attempts"));
    }
}
