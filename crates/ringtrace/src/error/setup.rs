//! [`Error`]: setting up, attaching, pausing, clocks, files and system calls.

use std::io;

use super::reserve::ReserveError;

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
    #[error(
        "wakeup watermark {watermark} bytes is invalid: it must be from 1 to the capacity less 8 ({max} bytes), the \
         most a ring holds",
        max = .capacity - 8
    )]
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
    /// A channel has one live reader at a time, in all processes (a channel file's
    /// reader holds every slot's consumer role).
    #[error(
        "the channel already has a reader (in process {pid}): a channel has one reader at a time, in all \
         processes (drop the other one first)"
    )]
    ReaderAttached {
        /// The process that holds the reader (or one of the slots' consumer roles).
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
    #[error("{what} {path}")]
    File {
        /// What ringtrace was doing.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The error the kernel returned.
        #[source]
        source: io::Error,
    },
    /// The space of a ring or channel file (or a memfd) could not be reserved before
    /// it was mapped (`fallocate`): a full filesystem (`ENOSPC`), a quota, a memory
    /// limit. A page the filesystem cannot back would stop the process that touches it
    /// with SIGBUS, so the file is not used: a new one is removed again.
    #[error("reserving {} for {}", super::size_text(*bytes), path.display())]
    NoSpace {
        /// The bytes asked for: the whole file, or the ring image being attached.
        bytes: u64,
        /// The file (a memfd: `memfd:ringtrace`).
        path: std::path::PathBuf,
        /// The error the kernel returned.
        #[source]
        source: io::Error,
    },
    /// A ring file being attached has holes (a sparse file, not made by this version
    /// of ringtrace, or cut by hand) that this process cannot reserve: its filesystem
    /// has no `fallocate`, or the descriptor is not writable. Touching a page in a
    /// hole on a full filesystem would stop the process with SIGBUS, so the file is
    /// refused.
    #[error(
        "{} has holes (unreserved space) in the {} from offset {offset}, which could not be reserved: \
         a page the filesystem cannot back would stop this process with SIGBUS",
        path.display(),
        super::size_text(*bytes)
    )]
    Sparse {
        /// The file.
        path: std::path::PathBuf,
        /// Where the ring image starts in it.
        offset: u64,
        /// The image's length.
        bytes: u64,
        /// Why the holes could not be filled: `fallocate`'s error.
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
    /// not finished, for longer than the pause's timeout (1 s for
    /// [`RingBuf::pause`](crate::RingBuf::pause), else the one given to
    /// [`RingBuf::pause_timeout`](crate::RingBuf::pause_timeout)); the ring was
    /// resumed. Try again, or with a longer timeout. `waited` is the time the pause
    /// took, measured on the monotonic clock (at least the timeout).
    #[error("a producer did not finish its record within {waited:?}; the ring was not paused")]
    PauseBusy {
        /// How long the pause waited, measured.
        waited: std::time::Duration,
    },
    /// A shared channel's file has a ring for at most this many producers, all taken by
    /// live processes.
    #[error("the channel file has rings for {max} producers and all are in use by live processes")]
    ChannelFull {
        /// Rings in the file.
        max: u32,
    },
    /// A [`ReadMark`](crate::recorder::ReadMark) the consumer cannot return to
    /// ([`OverwriteConsumer::rewind`](crate::recorder::OverwriteConsumer::rewind)).
    #[error("cannot rewind to this read mark: {reason}")]
    InvalidMark {
        /// What is wrong with it, in words.
        reason: String,
    },
    /// A system call failed.
    #[error("{what}")]
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
