//! Waiting for records: [`ChannelReader::poll`] sleeps on the channel's doorbell (or,
//! without one, naps), at most until held-back records are due.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{ChannelReader, ChannelRecord};
use crate::callback::Outcome;
use crate::clock::Clock;
use crate::config::Mode;
use crate::error::ConsumeError;
use crate::wait::doorbell::BellToken;
use crate::wait::poll::{poll, Poll};
use crate::wait::DEAD_CHECK;

impl<M: Mode, C: Clock> ChannelReader<M, C> {
    /// Waits up to `timeout` (or forever with `None`) for records to deliver, and
    /// delivers them.
    ///
    /// A channel has a doorbell that every producer rings when it commits while the
    /// reader sleeps, on the rings' no-lost-wakeup protocol: an idle reader sleeps until
    /// a commit, or for records held back by the slack (module docs), until they are
    /// due. A private channel's is an eventfd; a channel file's (version 2) a futex word
    /// in the file's bell line, which producers in any process wake
    /// ([`crate::format::channel`]). The reader of a version 1 channel file, whose
    /// producers never ring, looks every millisecond, as LTTng's consumer daemon does on
    /// a timer.
    ///
    /// Every sleep ends by the timeout's deadline (`CLOCK_MONOTONIC`), whatever another
    /// process writes into a channel file's bell line: a value it writes there costs at
    /// worst needless wakeups, or a sleep until the timeout.
    pub fn poll<F, R>(&mut self, timeout: Option<Duration>, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(ChannelRecord<'_>) -> R,
        R: Outcome,
    {
        poll(self, timeout, move |rec| f(rec).into_result())
    }

    /// Whether a look finds something to read: a ring's next record, or a producer
    /// added since the last pass.
    pub(super) fn look(&self) -> bool {
        // Acquire: pairs with the Release bump in `Inner::bump_version`.
        self.inner.version.load(Ordering::Acquire) != self.version
            || self.lanes.iter().any(|l| !l.done && !l.broken && M::ready(&l.reader))
    }

    /// How long staged records may wait for the horizon (the slack, module docs)
    /// before a pass delivers them; `None` with nothing staged.
    pub(crate) fn held_back(&self) -> Option<Duration> {
        let staged = self.lanes.iter().any(|l| !l.q.recs.is_empty());
        staged.then(|| Duration::from_nanos(self.inner.slack_ns).max(MIN_RECHECK))
    }

    /// Resets the doorbell, announces the sleep and looks once more (see
    /// [`crate::wait::flag`]). `Ok(Some(token))`: sleep. `Ok(None)`: read first (or
    /// the channel has no doorbell).
    pub(crate) fn arm(&mut self) -> std::io::Result<Option<BellToken>> {
        let inner = Arc::clone(&self.inner);
        let Some(bell) = inner.bell.as_deref() else { return Ok(None) };
        let token = bell.arm(|| self.look())?;
        self.armed = token.is_some();
        Ok(token)
    }

    /// Withdraws an announced sleep (every pass begins with it).
    pub(super) fn disarm(&mut self) {
        if std::mem::take(&mut self.armed) {
            if let Some(bell) = &self.inner.bell {
                bell.disarm();
            }
        }
    }

    /// The doorbell's descriptor (a private channel's), for an event loop.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn bell_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.inner.bell.as_deref().and_then(|b| b.fd())
    }
}

impl<M: Mode, C: Clock> Poll for ChannelReader<M, C> {
    type Record<'a> = ChannelRecord<'a>;
    fn read_now<F, E>(&mut self, f: &mut F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(ChannelRecord<'_>) -> Result<(), E>,
    {
        self.consume_with(f)
    }
    /// Sleeps on the channel's doorbell (at most until held-back records are due), or,
    /// a version 1 channel file's reader, naps a millisecond.
    fn wait_ready(&mut self, timeout: Option<Duration>) -> std::io::Result<bool> {
        let inner = Arc::clone(&self.inner);
        let Some(bell) = inner.bell.as_deref() else {
            let nap = timeout.map_or(POLL_NAP, |t| t.min(POLL_NAP));
            if nap.is_zero() {
                return Ok(false);
            }
            std::thread::sleep(nap);
            return Ok(true);
        };
        let timeout = match (timeout, self.held_back()) {
            (Some(t), Some(h)) => Some(t.min(h)),
            (t, h) => t.or(h),
        };
        // A channel file's writers are other processes: one killed between taking the
        // flag and its `FUTEX_WAKE`, or one that writes the bell line at will, must not
        // leave the reader asleep with records ready; it looks again every DEAD_CHECK,
        // as a shared ring's consumer does.
        let timeout = if bell.is_file() { Some(timeout.map_or(DEAD_CHECK, |t| t.min(DEAD_CHECK))) } else { timeout };
        if timeout.is_some_and(|t| t.is_zero()) {
            return Ok(false);
        }
        let Some(token) = self.arm()? else { return Ok(true) };
        let slept = bell.sleep(token, timeout);
        self.disarm();
        slept.map(|()| true)
    }
}

/// How often the reader of a channel without a doorbell (a version 1 channel file's)
/// looks for records.
const POLL_NAP: Duration = Duration::from_millis(1);
/// The shortest wait for held-back records (a channel with no slack still waits this
/// long rather than spin).
const MIN_RECHECK: Duration = Duration::from_micros(100);
