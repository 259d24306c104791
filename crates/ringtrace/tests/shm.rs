//! Rings shared between processes, with real child processes: producers in two
//! processes and a consumer in a third (both modes, checksummed records, exact
//! accounting, cross-process wakeups); a memfd handed over a Unix socket.
//! Processes that die are in `shm_crash.rs`, bad ring files in `shm_files.rs`.
//!
//! Children are this test binary run again with `RINGTRACE_CHILD` set: the `child`
//! test below runs the role it names and exits (the roles are in `common/shm.rs`).
#![cfg(not(loom))]

mod common;

use std::convert::Infallible;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::shm::*;
use ringtrace::config::WakeupPolicy;
use ringtrace::{Access, FlightRecorder, MpscRing, Stats};

/// The child side: not a test (see `common::child_role`).
#[test]
#[ignore = "a child role: run by this binary's multi-process tests (common::spawn_child)"]
fn child() {
    common::shm::child();
}

#[test]
fn discard_producers_in_two_processes_consumer_in_a_third() {
    let path = temp_path("discard");
    let ring = MpscRing::builder(64 * 1024).wakeup_policy(WakeupPolicy::CaughtUp).create(&path).unwrap();
    let p = path.to_str().unwrap();
    let consumer = spawn("consume-discard", &[p]);
    let producers = [spawn("produce-discard", &[p, "0"]), spawn("produce-discard", &[p, "1"])];
    let logs: Vec<_> = producers.into_iter().map(finish).collect();
    let consumed = finish(consumer)[0];
    let s: Stats = ring.stats();
    assert_eq!(consumed, 2 * RECORDS);
    assert_eq!(logs.iter().map(|l| l[0]).sum::<u64>(), 2 * RECORDS);
    assert_eq!((s.committed, s.consumed, s.dead), (2 * RECORDS, 2 * RECORDS, 0));
    assert_eq!(s.lost, logs.iter().map(|l| l[1]).sum::<u64>(), "every refusal is counted in the file");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn overwrite_producers_in_two_processes_consumer_in_a_third() {
    let path = temp_path("overwrite");
    let ring = FlightRecorder::builder(64 * 1024).create(&path).unwrap();
    let p = path.to_str().unwrap();
    let consumer = spawn("consume-overwrite", &[p]);
    let producers = [spawn("produce-overwrite", &[p, "0"]), spawn("produce-overwrite", &[p, "1"])];
    let logs: Vec<_> = producers.into_iter().map(finish).collect();
    std::fs::write(path.with_extension("done"), b"").unwrap();
    let r = finish(consumer);
    let s = ring.stats();
    let committed: u64 = logs.iter().map(|l| l[0]).sum();
    assert_eq!(s.committed, committed);
    assert_eq!(s.lost, logs.iter().map(|l| l[1]).sum::<u64>());
    assert_eq!(s.committed, r[0] + s.overwritten_unread, "committed = consumed + overwritten unread: {s:?}");
    assert_eq!(r[1], s.overwritten_unread);
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(path.with_extension("done")).unwrap();
}

/// Waits for `child` at most `limit`; kills it and fails if it is still running.
fn finish_within(mut child: Kid, limit: Duration, what: &str) -> Vec<u64> {
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{what} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    finish(child)
}

#[test]
fn cross_process_wakeups_are_never_lost() {
    let path = temp_path("sampled");
    let _ring = MpscRing::builder(64 * 1024).wakeup_policy(WakeupPolicy::CaughtUp).create(&path).unwrap();
    let p = path.to_str().unwrap();
    let mut consumer = spawn("consume-sampled", &[p]);
    wait_for_line(&mut consumer, "ATTACHED");
    let producer = spawn("produce-sampled", &[p]);
    assert_eq!(
        finish_within(
            producer,
            Duration::from_secs(120),
            "the producer (a full ring: the consumer slept through a wakeup?)"
        )[0],
        SAMPLED
    );
    // The consumer sleeps with no timeout: only a lost wakeup keeps it asleep.
    assert_eq!(finish_within(consumer, Duration::from_secs(60), "the consumer (a lost wakeup)")[0], SAMPLED);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn memfd_handed_over_a_unix_socket() {
    let ring = MpscRing::builder(64 * 1024).build_shared().unwrap();
    assert!(ring.is_shared());
    let (ours, theirs) = UnixStream::pair().unwrap();
    rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty()).unwrap();
    let fd = theirs.as_raw_fd().to_string();
    let mut c = ring.consumer().unwrap();
    let child = spawn("produce-memfd", &[&fd, "0"]);
    drop(theirs);
    ring.send(&ours).unwrap();
    let mut next = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while next < RECORDS {
        assert!(Instant::now() < deadline);
        c.poll(Some(Duration::from_secs(1)), |rec| {
            assert_eq!(check(rec), (0, next));
            next += 1;
            Ok::<(), Infallible>(())
        })
        .unwrap();
    }
    assert_eq!(finish(child)[0], RECORDS);
    // A private ring cannot be sent.
    assert!(MpscRing::new(4096).unwrap().send(&ours).is_err());
}

#[test]
fn unsealed_memfd_is_refused() {
    let fd = rustix::fs::memfd_create("x", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&fd, 1 << 20).unwrap();
    let err = MpscRing::from_fd(fd, Access::Full).unwrap_err();
    assert!(err.to_string().contains("not sealed against shrinking"), "{err}");
}
