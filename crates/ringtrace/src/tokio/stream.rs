//! The records of an [`AsyncReader`] as a [`Stream`] of owned items: [`Records`]
//! (borrowing the reader) and [`IntoRecords`] (owning it).

use std::convert::Infallible;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use super::reader::AsyncReader;
use super::source::Source;
use crate::error::ConsumeError;

/// Records a stream hands out in a row, without the reader running dry, before it
/// returns `Pending` once (waking itself at once), so that a reader that never runs dry
/// does not keep its task from yielding to the others on its runtime thread.
pub const YIELD_EVERY: u32 = 256;

/// What a record stream yields: an item copied out of the reader, or the error that
/// stopped it.
pub type Item<S> = Result<<S as Source>::Item, ConsumeError<Infallible>>;

impl<S: Source> AsyncReader<S> {
    /// The reader's records, copied out one at a time, as a stream borrowing the reader.
    /// See [`Records`].
    pub fn stream(&mut self) -> Records<'_, S> {
        Records { reader: self, ended: false }
    }

    /// The reader's records, copied out one at a time, as a stream that owns the reader.
    /// See [`Records`].
    pub fn into_stream(self) -> IntoRecords<S> {
        IntoRecords { reader: self, ended: false }
    }
}

/// A stream of a reader's records, each copied out (`Vec<u8>`, or the reader's
/// [`Source::Item`]), made by [`AsyncReader::stream`].
///
/// A record is taken from the reader only when the stream hands it out: the stream
/// reads one record per item and buffers none. So it can be dropped, or the future of
/// its `next()` cancelled (`tokio::select!`, `tokio::time::timeout`), at any time
/// without losing a record: what it did not hand out is still in the reader, and the
/// reader's position and counters say exactly what was taken.
///
/// After [`YIELD_EVERY`] items in a row without waiting, it yields to the runtime once.
/// An error ends the stream (it yields `None` after it), except
/// [`ConsumeError::Busy`] (an overwrite ring's producers outran the copy: the next
/// item is read from the oldest record still there).
///
/// # Cancel safety
///
/// `next()` on this stream is cancel safe: a record is consumed only in the poll that
/// returns it.
pub struct Records<'a, S: Source> {
    reader: &'a mut AsyncReader<S>,
    ended: bool,
}

/// [`Records`] owning its reader, made by [`AsyncReader::into_stream`]; the same
/// stream, with [`into_inner`](Self::into_inner) to take the reader back.
///
/// # Cancel safety
///
/// `next()` on this stream is cancel safe, as on [`Records`].
pub struct IntoRecords<S: Source> {
    reader: AsyncReader<S>,
    ended: bool,
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
        f.debug_struct("Records").field("reader", &self.reader).field("ended", &self.ended).finish()
    }
}

impl<S: Source + fmt::Debug> fmt::Debug for IntoRecords<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IntoRecords").field("reader", &self.reader).field("ended", &self.ended).finish()
    }
}

impl<S: Source> Stream for Records<'_, S> {
    type Item = Item<S>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item<S>>> {
        let this = self.get_mut();
        poll_item(this.reader, &mut this.ended, cx)
    }
}

impl<S: Source> Stream for IntoRecords<S> {
    type Item = Item<S>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item<S>>> {
        let this = self.get_mut();
        poll_item(&mut this.reader, &mut this.ended, cx)
    }
}

/// The next item: taken from the reader if one is there, else waited for.
fn poll_item<S: Source>(r: &mut AsyncReader<S>, ended: &mut bool, cx: &mut Context<'_>) -> Poll<Option<Item<S>>> {
    if *ended {
        return Poll::Ready(None);
    }
    if r.streak >= YIELD_EVERY {
        r.streak = 0;
        cx.waker().wake_by_ref();
        return Poll::Pending;
    }
    // Whether arming said records were ready and then none was taken: the second time,
    // yield rather than look again at once.
    let mut said_ready = false;
    // Bounded: every round takes an item and returns, returns Pending, or follows a
    // readiness the reactor reported (cleared in `poll_wait`) or a nap that ended.
    loop {
        match r.get_mut().take() {
            Ok(Some(item)) => {
                r.streak += 1;
                return Poll::Ready(Some(Ok(item)));
            }
            Ok(None) => {}
            Err(ConsumeError::Busy) => return Poll::Ready(Some(Err(ConsumeError::Busy))),
            Err(e) => {
                *ended = true;
                return Poll::Ready(Some(Err(e)));
            }
        }
        match r.poll_wait(cx) {
            Poll::Pending => {
                r.streak = 0;
                return Poll::Pending;
            }
            Poll::Ready(Ok(())) if said_ready => {
                r.streak = 0;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(Ok(())) => said_ready = true,
            Poll::Ready(Err(e)) => {
                *ended = true;
                return Poll::Ready(Some(Err(ConsumeError::Io(e))));
            }
        }
    }
}
