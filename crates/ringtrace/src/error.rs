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
    /// The watermark of [`WakeupPolicy::Watermark`](crate::WakeupPolicy) is out of range.
    #[error("wakeup watermark {watermark} bytes is invalid: it must be from 1 to the capacity ({capacity} bytes)")]
    InvalidWatermark {
        /// What was asked for.
        watermark: u64,
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
    #[error("the ring already has a consumer: a ring has one consumer at a time (drop the other one first)")]
    ConsumerAttached,
    /// A single-producer ring has one producer at a time.
    #[error("the single-producer ring already has a producer: use an Mpsc ring for several producers")]
    ProducerAttached,
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
    /// The record could never fit: counted in `Stats::too_large`.
    #[error("record of {len} bytes is too large: this ring takes records of at most {max} bytes")]
    TooLarge {
        /// The payload length asked for.
        len: usize,
        /// The largest payload this ring accepts.
        max: usize,
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
    /// Waiting failed.
    #[error("waiting for records failed: {0}")]
    Io(#[from] io::Error),
}
