//! Processes that die while they share a ring: a producer killed with SIGKILL in the
//! middle of a record, recovery after every process died, and the roles of dead
//! consumers, pausers and producers taken over.
//!
//! Children are this test binary run again with `RINGTRACE_CHILD` set (`common/shm.rs`).
#![cfg(not(loom))]

mod common;

use std::convert::Infallible;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::shm::*;
use ringtrace::config::ProducerKind;
use ringtrace::{Error, FlightRecorder, MpscRing, Producer, RingBuf, Wakeup};

/// The child side: not a test (see `common::child_role`).
#[test]
#[ignore = "a child role: run by this binary's multi-process tests (common::spawn_child)"]
fn child() {
    common::shm::child();
}

/// Writes 100 records behind a dead producer's unfinished one; the consumer must step
/// over it (counted once in `dead`) and deliver them all, in order.
fn drain_past_a_dead_record<K: ProducerKind>(ring: &RingBuf<K>, p: &mut Producer<K>) {
    for i in 0..100u64 {
        p.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
    }
    let mut c = ring.consumer().unwrap();
    let mut got = Vec::new();
    let t = Instant::now();
    while got.len() < 100 {
        assert!(t.elapsed() < Duration::from_secs(10), "jammed behind the dead record: {:?}", ring.stats());
        c.poll(Some(Duration::from_secs(1)), |d| {
            got.push(u64::from_le_bytes(d.try_into().unwrap()));
            Ok::<(), Infallible>(())
        })
        .unwrap();
    }
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    assert_eq!(ring.stats().dead, 1);
}

#[test]
fn producer_killed_mid_record_discard() {
    let path = temp_path("kill-discard");
    let ring = MpscRing::create_default(&path);
    let mut child = spawn("die-mid-record", &[path.to_str().unwrap(), "discard"]);
    wait_for_line(&mut child, "RESERVED");
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(9));
    let mut p = ring.producer().unwrap();
    drain_past_a_dead_record(&ring, &mut p);
    std::fs::remove_file(&path).unwrap();
}

/// A consumer that polls with `consume` (never `poll` or `wait`) steps over a dead
/// producer's record after the same time as one that sleeps, however seldom it calls:
/// the check is made by time, not after a count of empty calls.
#[test]
fn a_consumer_polling_slowly_steps_over_a_dead_record_in_time() {
    let path = temp_path("kill-slow-poll");
    let ring = MpscRing::create_default(&path);
    let mut child = spawn("die-mid-record", &[path.to_str().unwrap(), "discard"]);
    wait_for_line(&mut child, "RESERVED");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut p = ring.producer().unwrap();
    p.output(b"after", Wakeup::Default).unwrap();
    let mut c = ring.consumer().unwrap();
    let t = Instant::now();
    let mut calls = 0u32;
    let mut got = Vec::new();
    // 20 ms between calls: a check every 256 empty calls would come after 5 s.
    while got.is_empty() && t.elapsed() < Duration::from_secs(4) {
        calls += 1;
        c.consume(|d| {
            got.push(d.to_vec());
            Ok::<(), Infallible>(())
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(got, [b"after".to_vec()], "still jammed after {:?} and {calls} calls: {:?}", t.elapsed(), ring.stats());
    assert_eq!(ring.stats().dead, 1);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn producer_killed_mid_record_overwrite() {
    let path = temp_path("kill-overwrite");
    let ring = FlightRecorder::builder(16 * 1024).create(&path).unwrap();
    let mut child = spawn("die-mid-record", &[path.to_str().unwrap(), "overwrite"]);
    wait_for_line(&mut child, "RESERVED");
    child.kill().unwrap();
    child.wait().unwrap();
    // Lap the ring many times: the dead record must be stepped over, not block forever.
    let mut p = ring.producer().unwrap();
    let mut ok = 0u64;
    for i in 0..20_000u64 {
        ok += u64::from(p.output(&i.to_le_bytes(), Wakeup::NoWakeup).is_ok());
    }
    let s = ring.stats();
    assert!(ok > 19_000, "reserves kept failing behind the dead record: {ok} ok, {s:?}");
    assert_eq!(s.dead, 1, "{s:?}");
    let snap = ring.snapshot().unwrap();
    assert_eq!(snap.iter().next_back(), Some(&19_999u64.to_le_bytes()[..]));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn records_recovered_after_every_process_died() {
    let path = temp_path("recover");
    let ring = FlightRecorder::builder(16 * 1024).create(&path).unwrap();
    let p = path.to_str().unwrap();
    // One producer process writes and exits; another dies holding a record.
    finish(spawn("produce-overwrite", &[p, "0"]));
    let mut child = spawn("die-mid-record", &[p, "overwrite"]);
    wait_for_line(&mut child, "RESERVED");
    child.kill().unwrap();
    child.wait().unwrap();
    drop(ring); // the last process using the file lets go
    let ring = FlightRecorder::open(&path).unwrap();
    let snap = ring.snapshot().unwrap();
    let seqs: Vec<u64> = snap.iter().map(|r| check(r).1).collect();
    assert!(seqs.len() > 100, "{} records recovered", seqs.len());
    assert_eq!(*seqs.last().unwrap(), RECORDS - 1, "the newest records survive");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "contiguous");
    assert_eq!(snap.unfinished(), 1, "the dead producer's record is reported unfinished");
    // The untrusted reader (what `ringtrace snapshot FILE` uses; it never maps the file)
    // recovers the same records and steps over the dead one.
    let file = ringtrace::inspect::RingFile::open(&path).unwrap();
    let recs = file.records().unwrap();
    let read: Vec<u64> = recs.iter().map(|r| check(r.payload).1).collect();
    assert_eq!(read, seqs);
    assert_eq!(recs.unfinished_count(), 1);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_dead_consumer_is_taken_over() {
    let path = temp_path("dead-consumer");
    let ring = MpscRing::create_default(&path);
    let mut child = spawn("hold-consumer", &[path.to_str().unwrap()]);
    wait_for_line(&mut child, "ATTACHED");
    match ring.consumer() {
        Err(Error::ConsumerAttached { pid }) => assert_eq!(pid, child.id()),
        other => panic!("expected ConsumerAttached, got {other:?}"),
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(ring.consumer().is_ok(), "the dead process's consumer role is taken over");
    std::fs::remove_file(&path).unwrap();
}

trait CreateDefault: Sized {
    fn create_default(path: &Path) -> Self;
}
impl CreateDefault for MpscRing {
    fn create_default(path: &Path) -> Self {
        MpscRing::builder(64 * 1024).create(path).unwrap()
    }
}

#[test]
fn a_dead_pausers_pause_ends() {
    let path = temp_path("dead-pauser");
    let ring = FlightRecorder::builder(16 * 1024).create(&path).unwrap();
    let mut child = spawn("pause-and-wait", &[path.to_str().unwrap()]);
    wait_for_line(&mut child, "PAUSED");
    let mut p = ring.producer().unwrap();
    assert!(p.output(b"x", Wakeup::NoWakeup).is_err(), "paused");
    child.kill().unwrap();
    child.wait().unwrap();
    // Producers find the pauser dead after a few refusals and end its pause.
    let ok = (0..1000u64).filter(|i| p.output(&i.to_le_bytes(), Wakeup::NoWakeup).is_ok()).count();
    assert!(ok > 900, "still paused: {ok} of 1000 went in");
    assert!(!ring.is_paused());
    drop(ring.pause().expect("the ring can be paused again"));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_consumer_taken_over_mid_line_starts_at_a_record() {
    let path = temp_path("consumer-mid-line");
    let ring = MpscRing::create_default(&path);
    let mut p = ring.producer().unwrap();
    for i in 0..10u64 {
        p.output(&i.to_le_bytes(), Wakeup::NoWakeup).unwrap(); // 16-byte records
    }
    // The dead consumer read 3 records (48 bytes) and handed back whole lines only (0).
    let mut child = spawn("consume-some", &[path.to_str().unwrap()]);
    wait_for_line(&mut child, "CONSUMED");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut c = ring.consumer().unwrap();
    let mut got = Vec::new();
    c.consume(|d| {
        got.push(u64::from_le_bytes(d.try_into().unwrap()));
        Ok::<(), Infallible>(())
    })
    .unwrap();
    assert_eq!(got, (3..10).collect::<Vec<_>>(), "resumes at the dead consumer's record boundary");
    p.output(&10u64.to_le_bytes(), Wakeup::NoWakeup).unwrap();
    assert_eq!(c.iter().next(), Some(&10u64.to_le_bytes()[..]));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_single_producer_taken_over_from_a_dead_one_mid_record() {
    let path = temp_path("spsc-takeover");
    let ring = ringtrace::SpscRing::builder(64 * 1024).create(&path).unwrap();
    let mut child = spawn("die-mid-record", &[path.to_str().unwrap(), "spsc"]);
    wait_for_line(&mut child, "RESERVED");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut p = ring.producer().expect("the dead producer's role is taken over");
    drain_past_a_dead_record(&ring, &mut p);
    std::fs::remove_file(&path).unwrap();
}
