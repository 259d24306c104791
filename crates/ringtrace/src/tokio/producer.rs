//! [`AsyncProducer`]: a producer that waits for room on a tokio runtime, without
//! blocking its thread.

use std::fmt;
use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::task::Poll;
use std::time::Duration;

use ::tokio::io::unix::AsyncFd;

use super::wait::register_fd;
use crate::config::{Discard, Mpsc, ProducerKind, Wakeup};
use crate::error::ReserveError;
use crate::wait::DEAD_CHECK;
use crate::{Producer, Reservation};

/// How often a producer looks for room when it has no socket doorbell (every entry
/// of the control block's table is another process's).
const NAP: Duration = Duration::from_millis(1);

/// A discard-mode [`Producer`] whose reserve waits for room asynchronously: the async
/// form of [`Producer::reserve_wait`] and [`Producer::output_wait`].
///
/// When the ring is full it announces its wait as the blocking form does (the room
/// protocol: a flag, the heavy barrier, a look at the consumer position) and awaits a
/// socket doorbell that the consumer rings after it makes room: a datagram socket of
/// this process, bound to an abstract name that the producer writes into the ring's
/// control block (four entries, for four processes with producers waiting this way;
/// a fifth looks every millisecond instead). So it works for rings shared between
/// processes as well as private ones, with no thread and no timer (but, in a shared
/// ring, a look every 200 ms whether the consumer's process died).
///
/// Give up after a while with `tokio::time::timeout`: the methods are cancel safe.
///
/// ```
/// use ringtrace::tokio::{AsyncProducer, AsyncReader};
/// use ringtrace::{ConsumeError, MpscRing, Wakeup};
///
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let ring = MpscRing::new(4096)?;                  // room for about 200 records
///     let mut producer = AsyncProducer::new(ring.producer()?)?;
///     let mut reader = AsyncReader::new(ring.consumer()?)?;
///     let writer = tokio::spawn(async move {
///         for i in 0..10_000u64 {
///             producer.output(&i.to_le_bytes(), Wakeup::Default).await.unwrap();
///         }
///     });                                                 // its producer dropped at the end
///     let mut next = 0u64;
///     loop {
///         match reader.consume(|rec: &[u8]| {
///             assert_eq!(rec, next.to_le_bytes());
///             next += 1;
///         }).await {
///             Ok(_) => {}
///             Err(ConsumeError::Disconnected) => break,
///             Err(e) => return Err(e.into()),
///         }
///     }
///     writer.await?;
///     assert_eq!((next, ring.stats().lost), (10_000, 0));
///     Ok(())
/// }
/// ```
pub struct AsyncProducer<K: ProducerKind = Mpsc> {
    producer: Producer<K, Discard>,
    /// A duplicate of this process's room socket, registered with the reactor (`None`
    /// until the first wait, or if there is none: then it naps).
    bell: Option<AsyncFd<OwnedFd>>,
}

impl<K: ProducerKind> fmt::Debug for AsyncProducer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncProducer").field("producer", &self.producer).field("socket", &self.bell.is_some()).finish()
    }
}

impl<K: ProducerKind> AsyncProducer<K> {
    /// Wraps `producer`. Must be called, and the producer used, within a tokio runtime
    /// with IO and time enabled.
    pub fn new(producer: Producer<K, Discard>) -> io::Result<AsyncProducer<K>> {
        Ok(AsyncProducer { producer, bell: None })
    }

    /// The producer: its non-waiting `reserve` and `output`, and its counters.
    pub fn get_mut(&mut self) -> &mut Producer<K, Discard> {
        &mut self.producer
    }

    /// Gives the producer back.
    pub fn into_inner(self) -> Producer<K, Discard> {
        self.producer
    }

    /// Reserves `len` bytes, waiting for room if the ring is full; then write the record
    /// in place and commit it, as with [`Producer::reserve`].
    ///
    /// Errors: [`ReserveError::Disconnected`] when the consumer is gone (counted as
    /// lost), [`ReserveError::TooLarge`].
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: dropped before it completes, it has reserved nothing
    /// and counted nothing (the record is still the caller's, to retry or to drop).
    pub async fn reserve(&mut self, len: usize) -> Result<Reservation<'_, K, Discard>, ReserveError> {
        let pos = self.claim(len).await?;
        Ok(self.producer.reservation(pos, len))
    }

    /// Reserves (waiting for room), copies `data` and commits with `wakeup`.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: dropped before it completes, it has written nothing
    /// and counted nothing. Once it completes, the record is committed.
    pub async fn output(&mut self, data: &[u8], wakeup: Wakeup) -> Result<(), ReserveError> {
        let pos = self.claim(data.len()).await?;
        self.producer.commit_copy(pos, data, wakeup);
        Ok(())
    }

    /// Claims space, awaiting room while the ring is full.
    async fn claim(&mut self, len: usize) -> Result<u64, ReserveError> {
        // Bounded by the consumer: each round waits until it makes room (or goes
        // away, or, shared, 200 ms pass); the caller bounds the time (`timeout`).
        loop {
            if let Some(pos) = self.producer.try_claim(len)? {
                return Ok(pos);
            }
            if self.producer.is_disconnected() {
                self.producer.count_lost();
                return Err(ReserveError::Disconnected { len });
            }
            self.wait_for_room().await;
        }
    }

    /// One wait: until the room doorbell rings (or a look is due). Errors of the
    /// doorbell (which do not happen on a kernel that made it) turn it into a nap.
    ///
    /// The async producers of one process share its room socket, each with its own
    /// registration of a duplicate. One that finds it readable drains it (so that its
    /// queue never fills) and wakes the others through the ring's `Notify`: epoll
    /// reports an edge only if the socket is still readable when the runtime asks, so
    /// a datagram drained by one producer would otherwise be an edge lost to another.
    /// Each producer enables its `Notify` waiter before it arms, so a drain of the
    /// datagram its arming called for comes after, and wakes it.
    async fn wait_for_room(&mut self) {
        if self.bell.is_none() {
            // The socket is bound once per process and ring, and registered with the
            // reactor once per producer (a duplicate, so each has its own readiness).
            self.bell = self
                .producer
                .room_socket()
                .and_then(|(fd, _)| fd.try_clone_to_owned().ok())
                .and_then(|fd| register_fd(fd).ok());
        }
        let (Some(bell), true) = (&self.bell, self.producer.room_socket().is_some()) else {
            ::tokio::time::sleep(NAP).await;
            return;
        };
        let notify = self.producer.room_notify();
        let notified = notify.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        match self.producer.arm_room() {
            Ok(true) => {}
            Ok(false) => return, // the consumer moved meanwhile: try again
            Err(_) => {
                ::tokio::time::sleep(NAP).await;
                return;
            }
        }
        let rung = std::future::poll_fn(|cx| {
            if notified.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            match bell.poll_read_ready(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(ready) => {
                    if let Ok(mut guard) = ready {
                        // Before the next arming: a ring after this raises a new edge.
                        guard.clear_ready();
                    }
                    let _ = crate::wait::doorbell::drain_socket(std::os::fd::AsFd::as_fd(bell.get_ref()));
                    notify.notify_waiters();
                    Poll::Ready(())
                }
            }
        });
        if self.producer.is_shared() {
            // A consumer process that dies rings nothing: look again now and then.
            let _ = ::tokio::time::timeout(DEAD_CHECK, rung).await;
        } else {
            rung.await;
        }
    }
}
