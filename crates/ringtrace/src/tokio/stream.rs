//! The stream's step: the next record copied out of a reader, or a wait for one, with a
//! yield to the runtime after a long run of records (for `Records` and `IntoRecords`).

use std::convert::Infallible;
use std::task::{Context, Poll};

use super::source::Source;
use super::wait::Waiter;
use crate::error::ConsumeError;

/// Records a stream hands out in a row, without the reader running dry, before it
/// returns `Pending` once (waking itself at once), so that a reader that never runs dry
/// does not keep its task from yielding to the others on its runtime thread.
pub const YIELD_EVERY: u32 = 256;

/// What a record stream yields: an item copied out of the reader, or the error that
/// stopped it.
pub type Item<S> = Result<<S as crate::source::Reader>::Item, ConsumeError<Infallible>>;

/// A stream's state besides its reader.
#[derive(Debug, Default)]
pub(super) struct StreamState {
    /// Items handed out since the stream last returned `Pending`.
    streak: u32,
    /// An error ended the stream.
    ended: bool,
}

/// The next item: taken from the reader if one is there, else waited for.
pub(super) fn poll_item<S: Source>(
    w: &mut Waiter<S>,
    st: &mut StreamState,
    cx: &mut Context<'_>,
) -> Poll<Option<Item<S>>> {
    if st.ended {
        return Poll::Ready(None);
    }
    if st.streak >= YIELD_EVERY {
        st.streak = 0;
        cx.waker().wake_by_ref();
        return Poll::Pending;
    }
    // Whether arming said records were ready and then none was taken: the second time,
    // yield rather than look again at once.
    let mut said_ready = false;
    // Whether every writer was gone before the last look: nothing more will come.
    let mut gone = false;
    // Bounded: every round takes an item and returns, ends the stream, returns Pending,
    // or follows a readiness the reactor reported (cleared in `poll_wait`), a nap that
    // ended, or the writers' leaving (once).
    loop {
        match w.get_mut().take() {
            Ok(Some(item)) => {
                st.streak += 1;
                return Poll::Ready(Some(Ok(item)));
            }
            Ok(None) if gone => {
                st.ended = true;
                return Poll::Ready(None);
            }
            Ok(None) => {}
            Err(ConsumeError::Busy) => return Poll::Ready(Some(Err(ConsumeError::Busy))),
            Err(e) => {
                st.ended = true;
                return Poll::Ready(Some(Err(e)));
            }
        }
        if w.get_ref().disconnected() {
            // Look once more: what was committed before the last writer left.
            gone = true;
            continue;
        }
        match w.poll_wait(cx) {
            Poll::Pending => {
                st.streak = 0;
                return Poll::Pending;
            }
            Poll::Ready(Ok(())) if said_ready => {
                st.streak = 0;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(Ok(())) => said_ready = true,
            Poll::Ready(Err(e)) => {
                st.ended = true;
                return Poll::Ready(Some(Err(ConsumeError::Io(e))));
            }
        }
    }
}
