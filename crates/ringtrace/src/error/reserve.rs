//! [`ReserveError`]: a producer's refusals.

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
    /// lost and counted in `Stats::lost`, as the kernel's overwrite mode does. A
    /// multi-producer discard ring: the producer zeroing space ahead for the others has
    /// not finished within 100 ms (a dead one is found out and its work taken over well
    /// before that, so only one preempted for that long).
    #[error(
        "no room: a record of {len} bytes waits for a record still being written or another producer making room; \
         it is counted as lost"
    )]
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
    /// A producer that waits for room ([`Producer::reserve_wait`],
    /// [`Producer::output_wait`]) found none before its timeout: the record is lost and
    /// counted in `Stats::lost`.
    ///
    /// [`Producer::reserve_wait`]: crate::Producer::reserve_wait
    /// [`Producer::output_wait`]: crate::Producer::output_wait
    #[error("ring full: no room came for a record of {len} bytes before the timeout; it is counted as lost")]
    Timeout {
        /// The payload length asked for.
        len: usize,
    },
    /// A producer that waits for room found the consumer gone (dropped, or its process
    /// dead): no room will come. The record is lost and counted in `Stats::lost`.
    #[error("ring full and its consumer is gone: a record of {len} bytes was refused; it is counted as lost")]
    Disconnected {
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
