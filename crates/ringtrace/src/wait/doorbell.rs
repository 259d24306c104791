//! Sleeping on a ring's doorbell, and ringing it.
//!
//! A ring private to one process rings an eventfd (which its consumer can also hand to
//! an event loop); a ring shared between processes rings a futex on the control block's
//! [`WaitLine::futex`](crate::format::control::WaitLine) word, which any process can
//! wake. The consumer reads the doorbell ([`Bell::token`]) before it arms its wait, so a ring
//! between that read and its sleep is not missed: the eventfd then stays readable, the
//! futex word then differs from the token and `FUTEX_WAIT` returns at once.
//!
//! A futex cannot go into an event loop. A consumer of a shared ring that waits through
//! a descriptor ([`Consumer::arm`](crate::Consumer::arm)) therefore names a socket
//! doorbell in the control block ([`WaitLine::socket`](crate::format::control::WaitLine)):
//! a datagram socket bound to an abstract Unix name, to which a producer in any process
//! of the same network namespace sends a byte instead of waking the futex. The socket
//! is read before the wait is armed, so a byte sent between that read and the sleep
//! keeps it readable.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::OnceLock;
use std::time::Duration;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::net::{bind, sendto, socket_with, AddressFamily, SendFlags, SocketAddrUnix, SocketFlags, SocketType};
use rustix::thread::futex;

use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Release};

/// What a consumer read from the doorbell before it armed its wait: the futex value
/// (futex rings) or nothing (the eventfd was reset).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BellToken(pub(crate) u32);

/// The doorbell of one ring: its futex word, its eventfd, or (a consumer of a ring
/// shared between processes that waits in an event loop) its socket.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Bell<'a> {
    Futex(&'a AtomicU32),
    Eventfd(BorrowedFd<'a>),
    /// The consumer's side of a socket doorbell: a datagram socket bound to an
    /// abstract name ([`bind_socket`]), to which producers send a byte
    /// ([`ring_socket`]).
    Socket(BorrowedFd<'a>),
}

/// Datagrams a consumer reads off its socket doorbell before it arms, at most: the
/// kernel queues 10 by default (`net.unix.max_dgram_qlen`); a socket left readable by
/// a process that floods it only costs needless wakeups.
const SOCKET_DRAIN: usize = 64;

fn timespec(t: Duration) -> Timespec {
    Timespec { tv_sec: t.as_secs().min(i64::MAX as u64) as _, tv_nsec: t.subsec_nanos() as _ }
}

impl Bell<'_> {
    /// Resets the doorbell before the consumer arms its wait: reads the eventfd's
    /// counter, or the futex word's value.
    pub(crate) fn token(self) -> io::Result<BellToken> {
        match self {
            // Acquire: pairs with the Release `fetch_add` in `ring`: a producer that
            // rang before this load is seen here, and then `sleep` sleeps only if no
            // producer rang since.
            Bell::Futex(word) => Ok(BellToken(word.load(Acquire))),
            Bell::Eventfd(fd) => {
                let mut buf = [0u8; 8];
                match rustix::io::read(fd, &mut buf) {
                    Ok(_) | Err(rustix::io::Errno::AGAIN) => Ok(BellToken(0)),
                    Err(e) => Err(e.into()),
                }
            }
            Bell::Socket(fd) => {
                let mut buf = [0u8; 8];
                for _ in 0..SOCKET_DRAIN {
                    match rustix::net::recv(fd, &mut buf, rustix::net::RecvFlags::DONTWAIT) {
                        Ok(_) => {}
                        Err(rustix::io::Errno::AGAIN) => break,
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok(BellToken(0))
            }
        }
    }

    /// Sleeps until the doorbell rings (after `token` was read), `timeout` passes or a
    /// signal arrives.
    pub(crate) fn sleep(self, token: BellToken, timeout: Option<Duration>) -> io::Result<()> {
        let ts = timeout.map(timespec);
        match self {
            // Not FUTEX_PRIVATE: the word is shared with other processes. The kernel
            // sleeps only if the word still holds `token`, atomically with queueing us.
            Bell::Futex(word) => match futex::wait(word, futex::Flags::empty(), token.0, ts.as_ref()) {
                Ok(()) | Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR | rustix::io::Errno::TIMEDOUT) => {
                    Ok(())
                }
                Err(e) => Err(e.into()),
            },
            Bell::Eventfd(fd) | Bell::Socket(fd) => {
                let mut fds = [PollFd::new(&fd, PollFlags::IN)];
                match poll(&mut fds, ts.as_ref()) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Rings: wakes a consumer asleep on the doorbell (or makes its next sleep return).
    pub(crate) fn ring(self) {
        match self {
            Bell::Futex(word) => {
                // Release: pairs with the Acquire load in `token`. Then FUTEX_WAKE: a
                // consumer that read the old value and went to sleep is woken; one that
                // has not slept yet finds the value changed and does not.
                word.fetch_add(1, Release);
                let _ = futex::wake(word, futex::Flags::empty(), 1);
            }
            // A full counter (2^64 - 2 unread wakeups) cannot happen: the consumer
            // resets it before every sleep. Any error leaves the consumer to its
            // timeout; there is no caller to report it to on the commit path.
            Bell::Eventfd(fd) => {
                let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
            }
            // Producers ring a socket doorbell by its name ([`ring_socket`]).
            Bell::Socket(_) => {}
        }
    }
}

/// The abstract Unix socket name of socket doorbell `id`.
fn socket_name(id: u64) -> io::Result<SocketAddrUnix> {
    Ok(SocketAddrUnix::new_abstract_name(format!("ringtrace.{id:016x}").as_bytes())?)
}

/// A random nonzero doorbell id (std's `RandomState` keys are random per process;
/// the process id, the time and a counter make each call's differ).
fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    h.write_u128(now.as_nanos());
    h.finish().max(1)
}

/// Makes a consumer's socket doorbell: a nonblocking datagram socket bound to the
/// abstract name of a random id (abstract names need no file and vanish with the
/// socket; they are per network namespace). Returns the socket and its id.
pub(crate) fn bind_socket() -> io::Result<(OwnedFd, u64)> {
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let fd = socket_with(AddressFamily::UNIX, SocketType::DGRAM, flags, None)?;
    // A few random names: a 64-bit id taken by another socket is all but impossible.
    for _ in 0..4 {
        let id = random_id();
        match bind(&fd, &socket_name(id)?) {
            Ok(()) => return Ok((fd, id)),
            Err(rustix::io::Errno::ADDRINUSE) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::new(io::ErrorKind::AddrInUse, "no free abstract socket name for the doorbell"))
}

/// Rings the socket doorbell `id` (read from the control block: any value another
/// process wrote there only sends a byte to some other ringtrace doorbell): one
/// datagram, never blocking. A full queue means the consumer is already woken; a name
/// nobody holds (the consumer is gone), nothing to wake. Sent from one unbound socket
/// per process, made at the first ring.
///
/// Returns false when no socket holds the name any more (`ECONNREFUSED`): its process
/// closed it or died.
pub(crate) fn ring_socket(id: u64) -> bool {
    static SENDER: OnceLock<Option<OwnedFd>> = OnceLock::new();
    let sender = SENDER.get_or_init(|| {
        socket_with(AddressFamily::UNIX, SocketType::DGRAM, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC, None).ok()
    });
    if let (Some(fd), Ok(name)) = (sender, socket_name(id)) {
        if let Err(rustix::io::Errno::CONNREFUSED) = sendto(fd, &[1], SendFlags::DONTWAIT | SendFlags::NOSIGNAL, &name)
        {
            return false;
        }
    }
    true
}

/// Reads what was sent to a socket doorbell (at most [`SOCKET_DRAIN`] datagrams), so
/// that its queue never fills: a full queue refuses new datagrams, and an event loop
/// waiting edge-triggered would see no new edge.
#[cfg_attr(not(feature = "tokio"), allow(dead_code))] // the async producers' room socket
pub(crate) fn drain_socket(fd: BorrowedFd<'_>) -> io::Result<()> {
    Bell::Socket(fd).token().map(|_| ())
}

/// Rings a futex doorbell that several threads or processes may sleep on (the
/// producers' `room_futex`): adds one, then wakes every waiter.
pub(crate) fn ring_all(word: &AtomicU32) {
    // Release: pairs with the Acquire load of the token (`Core::room_token`): a waiter
    // that read the old value sleeps in FUTEX_WAIT only while the word still holds it,
    // atomically with queueing, so it is woken below or does not sleep.
    word.fetch_add(1, Release);
    // `i32::MAX`: the kernel reads the count as an int (`u32::MAX` would wake one).
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}
