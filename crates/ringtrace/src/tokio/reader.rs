//! [`AsyncReader`], and its records as streams: [`Records`] (borrowing the reader) and
//! [`IntoRecords`] (owning it).

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use super::source::Source;
use super::stream::{poll_item, Item, StreamState};
use super::wait::Waiter;
use crate::callback::Outcome;
use crate::error::ConsumeError;

/// An async form of one of the crate's readers (any [`Source`]) on a tokio runtime:
/// [`readable`](Self::readable) waits for records without blocking a thread,
/// [`consume`](Self::consume) waits and reads them in place, and
/// [`stream`](Self::stream) / [`into_stream`](Self::into_stream) hand them out copied,
/// as a [`Stream`].
///
/// The reader's descriptor is registered with the runtime's reactor (tokio's
/// [`AsyncFd`](::tokio::io::unix::AsyncFd), read interest): no thread and no timer per
/// reader. tokio registers descriptors edge-triggered and keeps the readiness it was told
/// of until it is cleared
/// ([`clear_ready`](::tokio::io::unix::AsyncFdReadyGuard::clear_ready)), so the reader
/// clears it before arming the reader again: a wakeup that comes between arming and
/// waiting is then kept, never lost (the loop tokio's `AsyncFd` docs give). A
/// [`ChannelReader`](crate::ChannelReader) of a channel file, whose doorbell is a futex
/// (which an event loop cannot wait on), is looked at every millisecond with
/// `tokio::time::sleep` instead.
///
/// Must be made, used and dropped within a tokio runtime with IO (and, for a channel,
/// time) enabled. The reactor watches a duplicate of the reader's descriptor, which the
/// async reader owns.
pub struct AsyncReader<S: Source> {
    waiter: Waiter<S>,
}

impl<S: Source + fmt::Debug> fmt::Debug for AsyncReader<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = if self.waiter.has_fd() { "descriptor" } else { "nap" };
        f.debug_struct("AsyncReader").field("waits_on", &how).field("reader", self.get_ref()).finish()
    }
}

impl<S: Source> AsyncReader<S> {
    /// Registers `reader`'s descriptor with the current runtime's reactor (for read
    /// readiness). Fails outside a runtime, or if the reactor refuses the descriptor.
    pub fn new(reader: S) -> io::Result<AsyncReader<S>> {
        Ok(AsyncReader { waiter: Waiter::new(reader)? })
    }

    /// The reader.
    pub fn get_ref(&self) -> &S {
        self.waiter.get_ref()
    }

    /// The reader, to read it directly, with its own API (reading never blocks; do not
    /// call its blocking `wait` or `poll` on a runtime thread).
    pub fn get_mut(&mut self) -> &mut S {
        self.waiter.get_mut()
    }

    /// Deregisters the descriptor and gives the reader back.
    pub fn into_inner(self) -> S {
        self.waiter.into_inner()
    }

    /// Waits until records may be ready: returns at once if the reader has records
    /// now, else when its doorbell rings (per the reader's wakeup policy). Then read with
    /// [`get_mut`](Self::get_mut) (zero-copy), or use [`consume`](Self::consume).
    ///
    /// For a channel reader, which has no doorbell, it returns after a 1 ms nap: records
    /// may or may not be there. It also returns at once when every writer is gone
    /// ([`Reader::disconnected`](crate::source::Reader::disconnected)): a read then
    /// finds what they left, or nothing.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: it reads no record. Dropped before it completes, it
    /// leaves the reader armed (its wait announced), which the next read undoes, and a
    /// wakeup it received stays recorded for the next call.
    pub async fn readable(&mut self) -> io::Result<()> {
        self.waiter.readable().await
    }

    /// Waits for records and calls `f` with every one available then, in place (the
    /// reader's zero-copy read); returns how many `f` saw (at least one). Stops at the
    /// first error of `f`, as the reader's `consume` does. Once every writer is gone and
    /// their records are read
    /// ([`Reader::disconnected`](crate::source::Reader::disconnected)), returns
    /// [`ConsumeError::Disconnected`], as the reader's `poll` does.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: records are read only after the last await, in one
    /// synchronous call that then returns. If it is dropped before it completes (for
    /// instance in a `tokio::select!` whose other branch finished first), `f` saw no
    /// record and every record is still in the reader.
    pub async fn consume<F, R>(&mut self, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(S::Record<'_>) -> R,
        R: Outcome,
    {
        loop {
            let n = self.get_mut().read(usize::MAX, &mut f)?;
            if n > 0 {
                return Ok(n);
            }
            if self.get_ref().disconnected() {
                // What was committed before the last writer left, then nothing more.
                let n = self.get_mut().read(usize::MAX, &mut f)?;
                return if n > 0 { Ok(n) } else { Err(ConsumeError::Disconnected) };
            }
            self.readable().await?;
        }
    }

    /// The reader's records, copied out one at a time, as a stream borrowing the reader.
    /// See [`Records`].
    pub fn stream(&mut self) -> Records<'_, S> {
        Records { reader: self, state: StreamState::default() }
    }

    /// The reader's records, copied out one at a time, as a stream that owns the reader.
    /// See [`Records`].
    pub fn into_stream(self) -> IntoRecords<S> {
        IntoRecords { reader: self, state: StreamState::default() }
    }
}

/// A stream of a reader's records, each copied out (`Vec<u8>`, or the reader's
/// [`Reader::Item`](crate::source::Reader::Item)), made by [`AsyncReader::stream`].
///
/// A record is taken from the reader only when the stream hands it out: the stream
/// reads one record per item and buffers none. So it can be dropped, or the future of
/// its `next()` cancelled (`tokio::select!`, `tokio::time::timeout`), at any time
/// without losing a record: what it did not hand out is still in the reader, and the
/// reader's position and counters say exactly what was taken.
///
/// After [`YIELD_EVERY`](super::YIELD_EVERY) items in a row without waiting, it yields
/// to the runtime once. It ends (`None`) once every writer is gone and their records
/// were handed out ([`Reader::disconnected`](crate::source::Reader::disconnected)).
/// An error ends the stream (it yields `None` after it), except
/// [`ConsumeError::Busy`] (an overwrite ring's producers outran the copy: the next item
/// is read from the oldest record still there).
///
/// # Cancel safety
///
/// `next()` on this stream is cancel safe: a record is consumed only in the poll that
/// returns it.
pub struct Records<'a, S: Source> {
    reader: &'a mut AsyncReader<S>,
    state: StreamState,
}

/// [`Records`] owning its reader, made by [`AsyncReader::into_stream`]; the same
/// stream, with [`into_inner`](Self::into_inner) to take the reader back.
///
/// # Cancel safety
///
/// `next()` on this stream is cancel safe, as on [`Records`].
pub struct IntoRecords<S: Source> {
    reader: AsyncReader<S>,
    state: StreamState,
}

// The stream never pins the reader in place (it polls it through `&mut`), so it moves
// freely whatever the reader is.
impl<S: Source> Unpin for IntoRecords<S> {}

impl<S: Source> IntoRecords<S> {
    /// The reader back; records the stream did not hand out are still in it.
    pub fn into_inner(self) -> AsyncReader<S> {
        self.reader
    }

    /// The reader.
    pub fn get_ref(&self) -> &AsyncReader<S> {
        &self.reader
    }

    /// The reader, to read it directly or look at its state.
    pub fn get_mut(&mut self) -> &mut AsyncReader<S> {
        &mut self.reader
    }
}

impl<S: Source + fmt::Debug> fmt::Debug for Records<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Records").field("reader", &self.reader).field("state", &self.state).finish()
    }
}

impl<S: Source + fmt::Debug> fmt::Debug for IntoRecords<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IntoRecords").field("reader", &self.reader).field("state", &self.state).finish()
    }
}

impl<S: Source> Stream for Records<'_, S> {
    type Item = Item<S>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item<S>>> {
        let this = self.get_mut();
        poll_item(&mut this.reader.waiter, &mut this.state, cx)
    }
}

impl<S: Source> Stream for IntoRecords<S> {
    type Item = Item<S>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item<S>>> {
        let this = self.get_mut();
        poll_item(&mut this.reader.waiter, &mut this.state, cx)
    }
}
