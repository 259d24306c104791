//! [`ConsumeError`]: reading records and taking snapshots.

use std::convert::Infallible;
use std::io;

use super::kernel::KernelError;

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
    /// Every producer is gone (each handle dropped, or its process dead) and every
    /// record they committed has been read: nothing more will come, unless a producer
    /// attaches again. Returned by the waiting reads (`poll`, and the async readers),
    /// never by a read that delivered records.
    #[error("every producer is gone and every record they wrote has been read")]
    Disconnected,
    /// Waiting failed.
    #[error("waiting for records failed")]
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
            ConsumeError::Disconnected => ConsumeError::Disconnected,
            ConsumeError::Io(e) => ConsumeError::Io(e),
            ConsumeError::Kernel(e) => ConsumeError::Kernel(e),
        }
    }
}
