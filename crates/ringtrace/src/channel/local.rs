//! The thread-local producer table behind [`Channel::output`]: each thread's producer
//! for a channel is made on its first write there and dropped when the thread exits
//! (which marks its ring exited).

use std::any::Any;
use std::cell::RefCell;

use super::writer::ChannelProducer;
use super::Channel;
use crate::clock::Clock;
use crate::config::Mode;
use crate::config::{Discard, Overwrite, Wakeup};
use crate::error::Error;

thread_local! {
    /// `(channel id, its ChannelProducer<M, C>)` for every channel this thread wrote
    /// to. Few entries: a linear search, most recent first.
    static LOCAL: RefCell<Vec<(u64, Box<dyn Any>)>> = const { RefCell::new(Vec::new()) };
}

impl<M: Mode, C: Clock> Channel<M, C> {
    /// Calls `f` with this thread's producer of this channel, made (with its ring) on
    /// the thread's first call. The producer lives until the thread exits, even if the
    /// channel is dropped first (its ring's memory with it).
    ///
    /// Errors: making the ring failed. Calling `with_producer` on the same channel from
    /// inside `f` is refused with [`Error::ProducerAttached`] (the thread's producer is
    /// in use).
    pub fn with_producer<R>(&self, f: impl FnOnce(&mut ChannelProducer<M, C>) -> R) -> Result<R, Error> {
        let id = self.inner.id;
        let run = LOCAL.try_with(|local| {
            let Ok(mut table) = local.try_borrow_mut() else {
                return Err(Error::ProducerAttached { pid: crate::owner::my_pid() });
            };
            let at = match table.iter().position(|(c, _)| *c == id) {
                Some(at) => at,
                None => {
                    table.push((id, Box::new(self.producer()?)));
                    table.len() - 1
                }
            };
            // Move the entry to the front on a miss only, so a thread writing to one
            // channel finds it first, without reordering on every call.
            if at != 0 {
                table.swap(0, at);
            }
            match table[0].1.downcast_mut::<ChannelProducer<M, C>>() {
                Some(p) => Ok(f(p)),
                // Channel ids are unique to a channel, whose type is fixed.
                None => unreachable!("a channel id with another producer type"),
            }
        });
        // The thread is exiting and its table is gone: a producer made now would be
        // dropped at once; use `producer()` from thread-local destructors.
        run.unwrap_or_else(|_| {
            Err(Error::Io {
                what: "writing through this thread's channel producer",
                source: std::io::Error::other("the thread is exiting: its thread-local producers are gone"),
            })
        })
    }
}

impl<C: Clock> Channel<Discard, C> {
    /// Writes one record through this thread's producer (made on the first write).
    ///
    /// ```
    /// use ringtrace::{Channel, Wakeup};
    /// use ringtrace::clock::Monotonic;
    /// use ringtrace::config::Discard;
    ///
    /// let channel = Channel::<Discard, Monotonic>::builder(4096).build(Monotonic)?;
    /// channel.output(b"from this thread", Wakeup::Default)?;
    /// assert_eq!(channel.stats().written, 1);
    /// # Ok::<(), ringtrace::Error>(())
    /// ```
    #[inline]
    pub fn output(&self, data: &[u8], wakeup: Wakeup) -> Result<(), Error> {
        self.with_producer(|p| p.output(data, wakeup))?.map_err(Error::from)
    }
}

impl<C: Clock> Channel<Overwrite, C> {
    /// Writes one record through this thread's producer (made on the first write).
    #[inline]
    pub fn output(&self, data: &[u8], wakeup: Wakeup) -> Result<(), Error> {
        self.with_producer(|p| p.output(data, wakeup))?.map_err(Error::from)
    }
}
