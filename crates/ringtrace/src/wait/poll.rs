//! The shape every reader's `poll` has (libbpf's `ring_buffer__poll`): read what is
//! there; if nothing was, linger (kernel rings: sleep a little without asking for a
//! wakeup), then wait until a record may be ready, and read again; until a record came
//! or the timeout passed.

use std::io;
use std::time::{Duration, Instant};

use crate::error::ConsumeError;

/// A reader that [`poll`] drives.
pub(crate) trait Poll {
    /// What the callback gets: a record's bytes, or more (a channel record's timestamp
    /// and producer, a ring set's map index).
    type Record<'a>;
    /// Reads every record available now; how many the callback saw.
    fn read_now<F, E>(&mut self, f: &mut F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(Self::Record<'_>) -> Result<(), E>;
    /// Sleeps until a record may be ready or `timeout` passes (`None`: no timeout);
    /// false if it timed out.
    fn wait_ready(&mut self, timeout: Option<Duration>) -> io::Result<bool>;
    /// How long to sleep, without asking for a wakeup, once a read found nothing.
    fn linger(&self) -> Duration {
        Duration::ZERO
    }
    /// Whether every writer is gone, so that nothing more will come once what is there
    /// is read (readers that cannot tell: never).
    fn disconnected(&mut self) -> bool {
        false
    }
}

/// Reads what `reader` has; if nothing, lingers and waits (at most `timeout`) and reads
/// again, until a read delivers or the time is up. Returns the records the callback saw.
pub(crate) fn poll<P, F, E>(reader: &mut P, timeout: Option<Duration>, mut f: F) -> Result<usize, ConsumeError<E>>
where
    P: Poll,
    F: FnMut(P::Record<'_>) -> Result<(), E>,
{
    let n = reader.read_now(&mut f)?;
    if n > 0 {
        return Ok(n);
    }
    let deadline = timeout.map(|t| Instant::now() + t);
    let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let linger = reader.linger();
    if !linger.is_zero() {
        std::thread::sleep(left().map_or(linger, |l| l.min(linger)));
        let n = reader.read_now(&mut f)?;
        if n > 0 {
            return Ok(n);
        }
    }
    // Bounded by the deadline: every round sleeps until a wakeup or the deadline; with
    // no deadline it returns at the first read that delivers, or once every writer is
    // gone.
    loop {
        if reader.disconnected() {
            // What the writers published before they left is visible now (the look
            // above acquired their detaching): read it, and say so when it is all read.
            let n = reader.read_now(&mut f)?;
            return if n > 0 { Ok(n) } else { Err(ConsumeError::Disconnected) };
        }
        // Whether the wait saw a record does not matter: the read below says, and a
        // wait that ended early (a spurious wakeup, every writer gone) comes round again.
        reader.wait_ready(left())?;
        let n = reader.read_now(&mut f)?;
        if n > 0 || left().is_some_and(|l| l.is_zero()) {
            return Ok(n);
        }
    }
}

/// The one definition of a byte-record reader's public `poll` and of its [`Poll`]
/// implementation ([`Consumer`](crate::Consumer),
/// [`OverwriteConsumer`](crate::recorder::OverwriteConsumer),
/// [`BpfRingBuf`](crate::kernel::bpf::BpfRingBuf)). `read` names the reader's method
/// that reads every record available now (`fn(&mut self, &mut F) -> Result<usize,
/// ConsumeError<E>>`); `linger`, if given, the field holding its linger time;
/// `disconnected`, if given, its method that says whether every writer is gone.
macro_rules! byte_reader_poll {
    ($(#[$doc:meta])* impl[$($gen:tt)*] $ty:ty { read: $read:ident $(, linger: $linger:ident)? $(, disconnected: $disconnected:ident)? }) => {
        impl<$($gen)*> $ty {
            $(#[$doc])*
            pub fn poll<F, R>(
                &mut self,
                timeout: Option<std::time::Duration>,
                mut f: F,
            ) -> Result<usize, $crate::error::ConsumeError<R::Error>>
            where
                F: FnMut(&[u8]) -> R,
                R: $crate::callback::Outcome,
            {
                $crate::wait::poll::poll(self, timeout, move |rec| f(rec).into_result())
            }
        }

        impl<$($gen)*> $crate::wait::poll::Poll for $ty {
            type Record<'a> = &'a [u8];
            fn read_now<F, E>(&mut self, f: &mut F) -> Result<usize, $crate::error::ConsumeError<E>>
            where
                F: FnMut(&[u8]) -> Result<(), E>,
            {
                self.$read(f)
            }
            fn wait_ready(&mut self, timeout: Option<std::time::Duration>) -> std::io::Result<bool> {
                self.wait(timeout)
            }
            $(fn linger(&self) -> std::time::Duration {
                self.$linger
            })?
            $(fn disconnected(&mut self) -> bool {
                self.$disconnected()
            })?
        }
    };
}
pub(crate) use byte_reader_poll;
