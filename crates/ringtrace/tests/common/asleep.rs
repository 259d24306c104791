//! Whether a thread of this test process sleeps in the kernel, in a system call that
//! waits (a futex, poll or epoll: a consumer on its doorbell, a producer waiting for
//! room, an event loop), read from `/proc/self/task/<tid>/{stat,syscall}`. A test that
//! must commit while its consumer sleeps waits for this instead of sleeping a while
//! and hoping the consumer got there; and whether a doorbell was rung.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// How long a thread may take to fall asleep before the test gives up.
pub const FALL_ASLEEP: Duration = Duration::from_secs(10);

/// The calling thread's id, for another thread's [`wait_until_asleep`].
pub fn thread_id() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// The system calls a waiting thread sleeps in.
fn is_wait_syscall(nr: i64) -> bool {
    #[cfg(target_arch = "x86_64")]
    if nr == libc::SYS_poll || nr == libc::SYS_epoll_wait {
        return true;
    }
    [libc::SYS_futex, libc::SYS_ppoll, libc::SYS_epoll_pwait, libc::SYS_epoll_pwait2].contains(&nr)
}

/// Whether thread `tid` of this process sleeps (state `S`) in a system call that waits.
pub fn is_asleep(tid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else { return false };
    // `pid (comm) state ...`: the name may hold spaces and parentheses.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    if state != Some("S") {
        return false;
    }
    // `nr args... sp pc` while blocked in a system call; `running`, or -1, otherwise.
    let Ok(syscall) = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")) else { return false };
    syscall.split_whitespace().next().and_then(|nr| nr.parse().ok()).is_some_and(is_wait_syscall)
}

/// Waits until thread `tid` sleeps in a system call that waits ([`is_asleep`]); fails
/// the test if it has not within [`FALL_ASLEEP`].
#[track_caller]
pub fn wait_until_asleep(tid: i32, what: &str) {
    let deadline = Instant::now() + FALL_ASLEEP;
    while !is_asleep(tid) {
        assert!(Instant::now() < deadline, "{what} (thread {tid}) did not fall asleep within {FALL_ASLEEP:?}");
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// Whether a doorbell descriptor (a consumer's eventfd, a duplicate of it) is readable
/// now: rung since the consumer last reset it before sleeping.
pub fn rung(doorbell: impl AsFd) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(&doorbell, PollFlags::IN)];
    poll(&mut fds, Some(&Timespec { tv_sec: 0, tv_nsec: 0 })).unwrap() > 0
}

/// The calling thread's voluntary context switches: each sleep that ends is one (a
/// reader on a doorbell sleeps once per wakeup; one that naps, once per nap).
pub fn voluntary_switches() -> u64 {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("voluntary_ctxt_switches:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}
