//! Error types. Every misuse the type system cannot rule out is one of these, with a
//! message that says what was wrong and what is allowed; nothing panics on input.

use std::io;

/// Errors from creating a ring or attaching a handle to it.
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
    /// The channel's clock cannot be used here ([`Tsc`](crate::clock::Tsc) on a CPU without an
    /// invariant TSC, or a shared channel's calibration this machine cannot use).
    #[cfg(not(loom))]
    #[error(transparent)]
    Clock(#[from] crate::clock::ClockError),
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

/// Why a reservation was refused. Both are counted in the ring's [`Stats`](crate::Stats).
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
}

/// A write into an overwrite-mode reservation past its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("write of {len} bytes at offset {offset} does not fit in a record of {record_len} bytes")]
pub struct OutOfBounds {
    /// Offset asked for.
    pub offset: usize,
    /// Bytes to write.
    pub len: usize,
    /// The reservation's length.
    pub record_len: usize,
}

/// Why pausing a ring failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PauseError {
    /// The ring is already paused (by another [`Paused`](crate::recorder::Paused) guard).
    #[error("the ring is already paused")]
    AlreadyPaused,
    /// A producer held the ring's retire lock, or a record claimed before the pause was
    /// not finished, for longer than the pause's timeout (`waited`: 1 s for
    /// [`RingBuf::pause`](crate::RingBuf::pause), else the one given to
    /// [`RingBuf::pause_timeout`](crate::RingBuf::pause_timeout)); the ring was
    /// resumed. Try again, or with a longer timeout.
    #[error("a producer did not finish its record within {waited:?}; the ring was not paused")]
    Busy {
        /// How long the pause waited.
        waited: std::time::Duration,
    },
}

/// Why reading an overwrite ring or taking a snapshot failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// Producers overwrote every copy before it could be checked, 16 times in a row (or
    /// a retiring producer stayed mid-update): the ring is written faster than it can be
    /// copied. Nothing was returned; try again, or pause the ring first.
    #[error("producers overwrote the ring faster than it could be copied (16 attempts); nothing was read")]
    Busy,
    /// A header that no ringtrace producer writes.
    #[error("corrupt record header {header:#018x} at position {pos}")]
    Corrupt {
        /// Position of the bad header.
        pos: u64,
        /// Its raw value.
        header: u64,
    },
    /// Reading or writing a snapshot file failed.
    #[error("snapshot file: {0}")]
    Io(#[from] io::Error),
    /// A snapshot file that is not one, or is damaged.
    #[error("not a valid ringtrace snapshot file: {0}")]
    Format(String),
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

/// Why consuming stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumeError<E> {
    /// The callback returned this error. The record it was given counts as consumed
    /// (as in libbpf); the records after it are still in the ring.
    #[error("consumer callback failed: {0}")]
    Callback(E),
    /// A header that no ringtrace producer writes: the ring's memory was corrupted.
    /// Consumption stops at that position and does not move past it.
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
    /// before it could check a copy. Nothing was lost silently: the next call resumes at
    /// the oldest record and counts what was overwritten.
    #[error("producers overwrote the ring faster than the consumer could copy it (16 attempts)")]
    Busy,
    /// Waiting failed.
    #[error("waiting for records failed: {0}")]
    Io(#[from] io::Error),
}

impl ConsumeError<std::convert::Infallible> {
    /// This error in a caller's error type (the callback that could not fail was a
    /// reader's own: a drain, a copy).
    pub(crate) fn widen<E>(self) -> ConsumeError<E> {
        match self {
            ConsumeError::Callback(never) => match never {},
            ConsumeError::Corrupt { pos, header } => ConsumeError::Corrupt { pos, header },
            ConsumeError::Positions { reader, producer } => ConsumeError::Positions { reader, producer },
            ConsumeError::Busy => ConsumeError::Busy,
            ConsumeError::Io(e) => ConsumeError::Io(e),
        }
    }
}
