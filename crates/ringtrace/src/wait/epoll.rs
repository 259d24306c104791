//! Waiting on epoll: the kernel ring buffer maps' readers ([`crate::kernel::bpf`]).

use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use rustix::event::epoll;

/// One `epoll_wait` on `ep` (interrupted waits are retried with the time left); calls
/// `on_event` with the data of each event reported.
pub(crate) fn wait_epoll(
    ep: BorrowedFd<'_>,
    timeout: Option<Duration>,
    mut on_event: impl FnMut(u64),
) -> io::Result<()> {
    let deadline = timeout.map(|t| std::time::Instant::now() + t);
    let mut buf = [const { std::mem::MaybeUninit::<epoll::Event>::uninit() }; 16];
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
        let ts = left.map(|l| rustix::time::Timespec {
            tv_sec: l.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: l.subsec_nanos() as i64,
        });
        match epoll::wait(ep, &mut buf[..], ts.as_ref()) {
            Ok((events, _)) => {
                events.iter().for_each(|e| on_event(e.data.u64()));
                return Ok(());
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
