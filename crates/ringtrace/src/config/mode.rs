//! The mode of a ring: what a producer does when a record does not fit ([`Discard`],
//! [`Overwrite`]), and the consumer type each mode has.

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;

use super::kind::{ProducerKind, Spsc};
use crate::consumer::Consumer;
use crate::error::{ConsumeError, Error};
use crate::format::control;
use crate::recorder::consumer::OverwriteConsumer;
use crate::recorder::snapshot::Snapshot;
use crate::shared::Shared;

mod sealed {
    pub trait Sealed {}
}

/// What a producer does when a record does not fit. Sealed: [`Discard`] or
/// [`Overwrite`].
// `attach` and `unread` name the crate-private `Shared`: the trait is sealed and those
// methods hidden, so no program can implement or call them.
#[allow(private_interfaces)]
pub trait Mode: sealed::Sealed + Send + Sync + 'static {
    /// True for [`Overwrite`].
    const OVERWRITE: bool;
    /// `"discard"` or `"overwrite"`.
    const NAME: &'static str;
    #[doc(hidden)]
    const CODE: u32;
    /// The consumer of a ring in this mode ([`RingBuf::consumer`](crate::RingBuf::consumer)):
    /// [`Consumer`] in discard mode, [`OverwriteConsumer`] in overwrite mode.
    type Consumer<K: ProducerKind>: fmt::Debug + Send;
    /// Attaches the consumer of the ring `shared`.
    #[doc(hidden)]
    fn attach<K: ProducerKind>(shared: Arc<Shared>) -> Result<Self::Consumer<K>, Error>;
    /// Calls `f` with up to `max` records, in order (a channel's live reader).
    #[doc(hidden)]
    fn drain(c: &mut Self::Consumer<Spsc>, max: usize, f: impl FnMut(&[u8]))
        -> Result<usize, ConsumeError<Infallible>>;
    /// Records the ring holds that no reader took (`read`: what the channel's live
    /// reader delivered): what freeing an exited producer's ring loses.
    #[doc(hidden)]
    fn unread(shared: &Shared, read: u64) -> u64;
    /// Whether a record is ready at the consumer's position (a channel's live reader
    /// looks before it sleeps).
    #[doc(hidden)]
    fn ready(c: &Self::Consumer<Spsc>) -> bool;
}

fn infallible<T>(f: &mut impl FnMut(&[u8]), rec: &[u8]) -> Result<(), T> {
    f(rec);
    Ok(())
}

/// A record that does not fit is refused at once and counted as lost; nothing already
/// in the ring is ever overwritten.
#[derive(Debug)]
pub enum Discard {}
impl sealed::Sealed for Discard {}
#[allow(private_interfaces)] // As on the trait.
impl Mode for Discard {
    const OVERWRITE: bool = false;
    const NAME: &'static str = "discard";
    const CODE: u32 = control::MODE_DISCARD;
    type Consumer<K: ProducerKind> = Consumer<K>;
    fn attach<K: ProducerKind>(shared: Arc<Shared>) -> Result<Consumer<K>, Error> {
        Consumer::attach(shared)
    }
    fn drain(c: &mut Consumer<Spsc>, max: usize, mut f: impl FnMut(&[u8])) -> Result<usize, ConsumeError<Infallible>> {
        c.consume_n(max, |rec| infallible(&mut f, rec))
    }
    fn ready(c: &Consumer<Spsc>) -> bool {
        c.ready()
    }
    fn unread(shared: &Shared, read: u64) -> u64 {
        shared.stats().committed.saturating_sub(read)
    }
}

/// Flight-recorder mode: a record that does not fit overwrites the oldest records (whole
/// records, never one still being written), so the ring always holds the newest records
/// that fit and producers never wait for a reader. Readers copy records out and check
/// that they were not overwritten meanwhile (see [`FlightRecorder`](crate::FlightRecorder)).
#[derive(Debug)]
pub enum Overwrite {}
impl sealed::Sealed for Overwrite {}
#[allow(private_interfaces)] // As on the trait.
impl Mode for Overwrite {
    const OVERWRITE: bool = true;
    const NAME: &'static str = "overwrite";
    const CODE: u32 = control::MODE_OVERWRITE;
    type Consumer<K: ProducerKind> = OverwriteConsumer<K>;
    fn attach<K: ProducerKind>(shared: Arc<Shared>) -> Result<OverwriteConsumer<K>, Error> {
        OverwriteConsumer::attach(shared)
    }
    fn drain(
        c: &mut OverwriteConsumer<Spsc>,
        max: usize,
        mut f: impl FnMut(&[u8]),
    ) -> Result<usize, ConsumeError<Infallible>> {
        c.consume_n(max, |rec| infallible(&mut f, rec))
    }
    fn ready(c: &OverwriteConsumer<Spsc>) -> bool {
        c.ready()
    }
    fn unread(shared: &Shared, _read: u64) -> u64 {
        // Exact for an exited producer: a snapshot holds every record still readable;
        // those before the consumer's position were read.
        let from = shared.stats().consumer_pos;
        Snapshot::take(shared).map_or(0, |s| s.entries().filter(|&(pos, _)| pos >= from).count() as u64)
    }
}
