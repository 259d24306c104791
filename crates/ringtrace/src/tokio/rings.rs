//! [`Source`] for the readers of byte records: the user-space ring's
//! [`Consumer`] and [`OverwriteConsumer`], a BPF ring buffer map ([`BpfRingBuf`]) and a
//! set of them ([`RingSet`]).
//! Each uses the reader's own public API: its doorbell, `arm`, `consume_n`.

use std::convert::Infallible;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use super::source::{counted, finish, sealed::Sealed, take_one, Source};
use crate::callback::Outcome;
use crate::config::ProducerKind;
use crate::error::ConsumeError;
use crate::kernel::bpf::{BpfRingBuf, RingSet};
use crate::recorder::OverwriteConsumer;
use crate::wait::DEAD_CHECK;
use crate::Consumer;

/// The [`Source`] of a reader of byte records with an `arm`, a descriptor and a
/// `consume_n`: the parts every one shares, then `$extra`, its own methods.
macro_rules! byte_source {
    ($(#[$doc:meta])* impl[$($gen:tt)*] $ty:ty { $($extra:item)* }) => {
        impl<$($gen)*> Sealed for $ty {}

        $(#[$doc])*
        impl<$($gen)*> Source for $ty {
            type Record<'a> = &'a [u8];
            type Item = Vec<u8>;

            fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
                Some(self.as_fd())
            }

            fn arm(&mut self) -> io::Result<bool> {
                <$ty>::arm(self)
            }

            fn read<F, R>(&mut self, max: usize, f: F) -> Result<usize, ConsumeError<R::Error>>
            where
                F: FnMut(&[u8]) -> R,
                R: Outcome,
            {
                self.consume_n(max, f)
            }

            fn take(&mut self) -> Result<Option<Vec<u8>>, ConsumeError<Infallible>> {
                take_one(self, <[u8]>::to_vec)
            }

            $($extra)*
        }
    };
}

byte_source! {
    /// The ring's doorbell: an eventfd, or in a ring shared between processes (a file,
    /// a sealed memfd) the socket doorbell that [`Consumer::arm`] names (see there for
    /// its limits).
    impl[K: ProducerKind] Consumer<K> {
        fn disconnected(&self) -> bool {
            self.is_disconnected()
        }

        fn recheck(&self) -> Option<Duration> {
            (self.is_shared() || self.available() > 0).then_some(DEAD_CHECK)
        }

        fn on_recheck(&mut self) {
            self.step_over_dead();
        }
    }
}

byte_source! {
    /// The ring's doorbell; the consumer copies and checks each record before the
    /// callback sees it. Overwrite rings wake their consumer only on
    /// [`Wakeup::Force`](crate::Wakeup::Force) by default.
    impl[K: ProducerKind] OverwriteConsumer<K> {
        fn disconnected(&self) -> bool {
            self.is_disconnected()
        }

        fn recheck(&self) -> Option<Duration> {
            self.is_shared().then_some(DEAD_CHECK)
        }
    }
}

byte_source! {
    /// The map's descriptor, readable while records are available; the kernel wakes it
    /// per the program's flags (see [`BpfRingBuf::wait`]). aya's `RingBuf` is used the
    /// same way under tokio: its docs wrap the map in an `AsyncFd`, and drain it after
    /// each readiness before clearing it
    /// (<https://docs.rs/aya/latest/aya/maps/ring_buf/struct.RingBuf.html>).
    impl[] BpfRingBuf {}
}

impl Sealed for RingSet {}

/// The set's epoll instance (itself registered with the runtime's reactor, nested);
/// records come with the index of the map they were read from.
impl Source for RingSet {
    type Record<'a> = (usize, &'a [u8]);
    type Item = (usize, Vec<u8>);

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }

    fn arm(&mut self) -> io::Result<bool> {
        RingSet::arm(self)
    }

    fn read<F, R>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut((usize, &[u8])) -> R,
        R: Outcome,
    {
        if max == 0 {
            return Ok(0);
        }
        // A map the callback stops in stays on the set's ready list, its other records
        // ready for the next call.
        let mut n = 0;
        let result = self.consume(|i, rec| counted(&mut n, max, f((i, rec)).into_result()));
        finish(result, n)
    }

    fn take(&mut self) -> Result<Option<(usize, Vec<u8>)>, ConsumeError<Infallible>> {
        take_one(self, |(i, rec)| (i, rec.to_vec()))
    }
}
