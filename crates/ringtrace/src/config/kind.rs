//! The producer kind of a ring ([`Mpsc`], [`Spsc`]) and its wakeup flags and policy.

use crate::format::control;

mod sealed {
    pub trait Sealed {}
}

/// Whether a ring takes one producer or many. Sealed: [`Mpsc`] or [`Spsc`].
pub trait ProducerKind: sealed::Sealed + Send + Sync + 'static {
    /// True for [`Mpsc`]: reservations are claimed with a compare-and-swap.
    const MULTI: bool;
    /// `"mpsc"` or `"spsc"`.
    const NAME: &'static str;
    #[doc(hidden)]
    const CODE: u32;
}

/// Any number of producer handles ([`Producer`](crate::Producer) is `Clone`); they
/// claim space with a compare-and-swap on the producer position, never a lock.
#[derive(Debug)]
pub enum Mpsc {}
/// Exactly one producer handle; it owns the producer position and claims space with
/// plain stores: no read-modify-write at all on its path.
#[derive(Debug)]
pub enum Spsc {}

impl sealed::Sealed for Mpsc {}
impl sealed::Sealed for Spsc {}
impl ProducerKind for Mpsc {
    const MULTI: bool = true;
    const NAME: &'static str = "mpsc";
    const CODE: u32 = control::KIND_MPSC;
}
impl ProducerKind for Spsc {
    const MULTI: bool = false;
    const NAME: &'static str = "spsc";
    const CODE: u32 = control::KIND_SPSC;
}

/// The wakeup flag of one commit or discard: the BPF ring buffer's flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Wakeup {
    /// Follow the ring's [`WakeupPolicy`] (BPF flag `0`).
    #[default]
    Default,
    /// Never wake the consumer for this record (`BPF_RB_NO_WAKEUP`). A consumer asleep
    /// with only such records pending sleeps until a later wakeup or its timeout.
    NoWakeup,
    /// Wake a sleeping consumer whatever the policy (`BPF_RB_FORCE_WAKEUP`).
    Force,
}

/// When a commit with [`Wakeup::Default`] wakes a sleeping consumer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WakeupPolicy {
    /// Wake when the consumer has caught up to the record being committed: the record
    /// it is waiting at (the BPF ring buffer's adaptive notification).
    #[default]
    CaughtUp,
    /// Wake only once at least this many bytes (headers and padding included) are
    /// committed behind the consumer's position, or when the record the consumer is
    /// blocked at commits while that much is already reserved behind it. Fewer wakeups,
    /// at the price of latency: a consumer may sleep with less than this pending
    /// until its timeout. At most the capacity less 8 (the most a ring holds: the word
    /// after the newest record is kept zeroed); a larger one is refused when the ring is
    /// built.
    Watermark(u64),
    /// Wake only for commits with [`Wakeup::Force`]: the default of an overwrite ring,
    /// whose readers usually take snapshots after a trigger rather than follow.
    Never,
    /// Wake a consumer that follows an overwrite ring every half ring of records
    /// committed ahead of its position, to give it a chance to read them before they are
    /// overwritten (the kernel's BPF overwrite mode rule).
    HalfRing,
}
