//! [`Source`] for the readers of byte records: the user-space ring's
//! [`Consumer`] and [`OverwriteConsumer`], a BPF ring buffer map ([`BpfRingBuf`]) and a
//! set of them ([`RingSet`]); their reading is their [`Reader`](crate::source::Reader).
//! Each uses the reader's own public API: its doorbell, `arm`.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use super::source::Source;
use crate::config::ProducerKind;
use crate::kernel::bpf::{BpfRingBuf, RingSet};
use crate::recorder::OverwriteConsumer;
use crate::wait::DEAD_CHECK;
use crate::Consumer;

/// The [`Source`] of a reader with an `arm` and a descriptor: the parts every one
/// shares, then `$extra`, its own methods.
macro_rules! fd_source {
    ($(#[$doc:meta])* impl[$($gen:tt)*] $ty:ty { $($extra:item)* }) => {
        $(#[$doc])*
        impl<$($gen)*> Source for $ty {
            fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
                Some(self.as_fd())
            }

            fn arm(&mut self) -> io::Result<bool> {
                <$ty>::arm(self)
            }

            $($extra)*
        }
    };
}

fd_source! {
    /// The ring's doorbell: an eventfd, or in a ring shared between processes (a file,
    /// a sealed memfd) the socket doorbell that [`Consumer::arm`] names (see there for
    /// its limits).
    impl[K: ProducerKind] Consumer<K> {
        fn recheck(&self) -> Option<Duration> {
            (self.is_shared() || self.available() > 0).then_some(DEAD_CHECK)
        }

        fn on_recheck(&mut self) {
            self.step_over_dead();
        }
    }
}

fd_source! {
    /// The ring's doorbell; the consumer copies and checks each record before the
    /// callback sees it. Overwrite rings wake their consumer only on
    /// [`Wakeup::Force`](crate::Wakeup::Force) by default.
    impl[K: ProducerKind] OverwriteConsumer<K> {
        fn recheck(&self) -> Option<Duration> {
            self.is_shared().then_some(DEAD_CHECK)
        }
    }
}

fd_source! {
    /// The map's descriptor, readable while records are available; the kernel wakes it
    /// per the program's flags (see [`BpfRingBuf::wait`]). aya's `RingBuf` is used the
    /// same way under tokio: its docs wrap the map in an `AsyncFd`, and drain it after
    /// each readiness before clearing it
    /// (<https://docs.rs/aya/latest/aya/maps/ring_buf/struct.RingBuf.html>).
    impl[] BpfRingBuf {}
}

fd_source! {
    /// The set's epoll instance (itself registered with the runtime's reactor, nested);
    /// records come with the index of the map they were read from.
    impl[] RingSet {}
}
