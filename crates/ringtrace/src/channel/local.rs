//! The thread-local producer table behind [`Channel::output`](super::Channel::output): each thread's producer
//! for a channel is made on its first write there and dropped when the thread exits
//! (which marks its ring exited).

use std::any::Any;
use std::cell::RefCell;

use crate::error::Error;

thread_local! {
    /// `(channel id, its ChannelProducer<M, C>)` for every channel this thread wrote
    /// to. Few entries: a linear search, most recent first.
    static LOCAL: RefCell<Vec<(u64, Box<dyn Any>)>> = const { RefCell::new(Vec::new()) };
}

/// Calls `f` with this thread's producer of the channel `id` (of type `P`), made with
/// `make` on the thread's first call ([`Channel::with_producer`](super::Channel::with_producer)).
pub(super) fn with_local<P: 'static, R>(
    id: u64,
    make: impl FnOnce() -> Result<P, Error>,
    f: impl FnOnce(&mut P) -> R,
) -> Result<R, Error> {
    let run = LOCAL.try_with(|local| {
        let Ok(mut table) = local.try_borrow_mut() else {
            return Err(Error::ProducerAttached { pid: crate::owner::my_pid() });
        };
        let at = match table.iter().position(|(c, _)| *c == id) {
            Some(at) => at,
            None => {
                table.push((id, Box::new(make()?)));
                table.len() - 1
            }
        };
        // Move the entry to the front on a miss only, so a thread writing to one
        // channel finds it first, without reordering on every call.
        if at != 0 {
            table.swap(0, at);
        }
        match table[0].1.downcast_mut::<P>() {
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
