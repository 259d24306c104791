//! Waiting on both sides: producers that wait for room instead of losing records, and
//! each side learning that the other is gone, in one process and between processes
//! (children are this test binary run again, see `common/shm.rs`).
#![cfg(not(loom))]

mod common;

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use common::shm::*;
use ringtrace::{ConsumeError, MpscRing, ReserveError, SpscRing, Wakeup};

/// The child side: not a test (see `common::child_role`).
#[test]
#[ignore = "a child role: run by this binary's multi-process tests (common::spawn_child)"]
fn child() {
    common::shm::child();
}

/// Reads until the producers are gone; checks every record and that each producer's
/// sequence is complete and in order. Returns the records read.
fn drain_until_disconnected<K: ringtrace::config::ProducerKind>(
    c: &mut ringtrace::Consumer<K>,
    per_producer: u64,
    producers: u32,
) -> u64 {
    let mut next: HashMap<u32, u64> = HashMap::new();
    let mut total = 0u64;
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < Duration::from_secs(120), "stuck after {total} records");
        match c.poll(Some(Duration::from_secs(30)), |rec: &[u8]| {
            let (id, seq) = check(rec);
            let want = next.entry(id).or_insert(0);
            assert_eq!(seq, *want, "producer {id}: out of order or lost");
            *want += 1;
            total += 1;
        }) {
            Ok(_) => {}
            Err(ConsumeError::Disconnected) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(next.len(), producers as usize);
    assert!(next.values().all(|&n| n == per_producer), "{next:?}");
    total
}

/// Four threads write through a 4 KiB ring, far smaller than their bursts, waiting for
/// room: nothing is lost, and the consumer ends with `Disconnected` once they are gone.
#[test]
fn waiting_producers_lose_nothing_and_the_consumer_sees_them_go() {
    const PER: u64 = 50_000;
    let ring = MpscRing::new(4096).unwrap();
    let mut c = ring.consumer().unwrap();
    let writers: Vec<_> = (0..4u32)
        .map(|id| {
            let mut p = ring.producer().unwrap();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                for seq in 0..PER {
                    record(id, seq, &mut buf);
                    p.output_wait(&buf, Wakeup::Default, Some(Duration::from_secs(60))).unwrap();
                }
            })
        })
        .collect();
    assert_eq!(drain_until_disconnected(&mut c, PER, 4), 4 * PER);
    writers.into_iter().for_each(|w| w.join().unwrap());
    let s = ring.stats();
    assert_eq!((s.committed, s.lost, s.consumed), (4 * PER, 0, 4 * PER));
}

/// The same with a single producer, which zeroes ahead of itself: its waiting path goes
/// through that refill.
#[test]
fn a_waiting_single_producer_loses_nothing() {
    const PER: u64 = 100_000;
    let ring = SpscRing::new(4096).unwrap();
    let mut c = ring.consumer().unwrap();
    let mut p = ring.producer().unwrap();
    let w = std::thread::spawn(move || {
        let mut buf = Vec::new();
        for seq in 0..PER {
            record(7, seq, &mut buf);
            let mut r = p.reserve_wait(buf.len(), Some(Duration::from_secs(60))).unwrap();
            r.copy_from_slice(&buf);
            r.commit();
        }
    });
    assert_eq!(drain_until_disconnected(&mut c, PER, 1), PER);
    w.join().unwrap();
    assert_eq!(ring.stats().lost, 0);
}

/// A full ring whose consumer reads nothing: the wait ends at its timeout, not before,
/// and the record is counted as lost.
#[test]
fn a_waiting_producer_times_out_and_counts_the_record_lost() {
    let ring = MpscRing::new(4096).unwrap();
    let _c = ring.consumer().unwrap();
    let mut p = ring.producer().unwrap();
    while p.output(&[0; 100], Wakeup::NoWakeup).is_ok() {}
    let lost = ring.stats().lost;
    let t = Instant::now();
    let err = p.output_wait(&[0; 100], Wakeup::Default, Some(Duration::from_millis(100))).unwrap_err();
    assert_eq!(err, ReserveError::Timeout { len: 100 });
    assert!(t.elapsed() >= Duration::from_millis(100), "gave up early: {:?}", t.elapsed());
    assert_eq!(ring.stats().lost, lost + 1);
    // Records that never fit are refused at once, not waited for.
    let err = p.reserve_wait(1 << 20, None).unwrap_err();
    assert!(matches!(err, ReserveError::TooLarge { .. }), "{err:?}");
}

/// A producer waiting on a full ring learns that the consumer was dropped: woken by the
/// drop, long before its timeout.
#[test]
fn a_waiting_producer_learns_that_the_consumer_is_gone() {
    let ring = MpscRing::new(4096).unwrap();
    let c = ring.consumer().unwrap();
    let mut p = ring.producer().unwrap();
    assert!(!p.is_disconnected());
    while p.output(&[0; 100], Wakeup::NoWakeup).is_ok() {}
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        tid_tx.send(common::asleep::thread_id()).unwrap();
        let t = Instant::now();
        let r = p.output_wait(&[0; 100], Wakeup::Default, Some(Duration::from_secs(30)));
        (r, t.elapsed(), p.is_disconnected())
    });
    // Dropped while the producer sleeps waiting for room.
    common::asleep::wait_until_asleep(tid_rx.recv().unwrap(), "the producer waiting for room");
    drop(c);
    let (r, took, disconnected) = waiter.join().unwrap();
    assert_eq!(r, Err(ReserveError::Disconnected { len: 100 }));
    assert!(disconnected);
    assert!(took < Duration::from_secs(20), "not woken by the drop: {took:?}");
}

/// A consumer asleep in `poll(None)` is woken when the last producer is dropped, and
/// gets the records committed before with them, then `Disconnected`.
#[test]
fn a_sleeping_consumer_wakes_when_the_last_producer_goes() {
    let ring = MpscRing::new(4096).unwrap();
    let mut c = ring.consumer().unwrap();
    // No producer yet: not disconnected (the producers have not come yet).
    assert!(!c.is_disconnected());
    let (p1, p2) = (ring.producer().unwrap(), ring.producer().unwrap());
    let ((tid_tx, tid_rx), (done_tx, done_rx)) = (std::sync::mpsc::channel(), std::sync::mpsc::channel());
    let reader_thread = std::thread::spawn(move || {
        tid_tx.send(common::asleep::thread_id()).unwrap();
        let mut got = Vec::new();
        let end = loop {
            match c.poll(None, |rec: &[u8]| got.push(rec.to_vec())) {
                Ok(_) => {}
                Err(e) => break e,
            }
        };
        done_tx.send((got, end)).unwrap();
    });
    let reader = tid_rx.recv().unwrap();
    // Each step once the consumer sleeps: the first producer's leaving, a record that
    // asks for no wakeup, the last producer's leaving (which must wake it).
    common::asleep::wait_until_asleep(reader, "the consumer");
    drop(p1);
    common::asleep::wait_until_asleep(reader, "the consumer, one producer left");
    let mut p2 = p2;
    p2.output(b"last", Wakeup::NoWakeup).unwrap();
    common::asleep::wait_until_asleep(reader, "the consumer, a record unannounced");
    drop(p2);
    // Bounded: a consumer the drop did not wake would sleep for ever in `poll(None)`.
    let (got, end) = done_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the consumer was not woken by the last producer's leaving");
    reader_thread.join().unwrap();
    assert_eq!(got, vec![b"last".to_vec()]);
    assert!(matches!(end, ConsumeError::Disconnected), "{end}");
    // A new consumer sees them gone too; a producer that attaches again reconnects.
    let c = ring.consumer().unwrap();
    assert!(c.is_disconnected());
    let _p3 = ring.producer().unwrap();
    assert!(!c.is_disconnected());
}

/// Two producer processes write 200 000 records each through a 64 KiB ring file,
/// waiting for room (the doorbell is a futex between processes); they exit, and the
/// consumer here ends with `Disconnected` after reading every record.
#[test]
fn producers_in_other_processes_wait_for_room_and_the_consumer_sees_them_exit() {
    let path = temp_path("wait-procs");
    let ring = MpscRing::builder(1 << 16).create(&path).unwrap();
    let mut c = ring.consumer().unwrap();
    let kids: Vec<_> = (0..2).map(|id| spawn("produce-waiting", &[path.to_str().unwrap(), &id.to_string()])).collect();
    // A producer that has not attached yet is not counted: one child may finish before
    // the other attaches. This handle keeps the ring connected until both have exited.
    let gate = ring.producer().unwrap();
    let waiter = std::thread::spawn(move || {
        let results: Vec<_> = kids.into_iter().map(finish).collect();
        drop(gate);
        results
    });
    assert_eq!(drain_until_disconnected(&mut c, RECORDS, 2), 2 * RECORDS);
    assert_eq!(waiter.join().unwrap(), vec![vec![RECORDS]; 2]);
    assert_eq!(ring.stats().lost, 0);
    std::fs::remove_file(&path).unwrap();
}

/// A producer process killed with SIGKILL (no handle dropped): the waiting consumer
/// finds it dead and ends with `Disconnected` after its record.
#[test]
fn a_consumer_finds_a_killed_producer_process_gone() {
    let path = temp_path("wait-killed-producer");
    let ring = MpscRing::builder(1 << 16).create(&path).unwrap();
    let mut c = ring.consumer().unwrap();
    let mut kid = spawn("hold-producer", &[path.to_str().unwrap()]);
    wait_for_line(&mut kid, "ATTACHED");
    assert!(!c.is_disconnected());
    kid.kill().unwrap();
    assert_eq!(kid.wait().unwrap().signal(), Some(9));
    let t = Instant::now();
    let mut got = Vec::new();
    let end = loop {
        match c.poll(Some(Duration::from_secs(30)), |rec: &[u8]| got.push(rec.to_vec())) {
            Ok(_) => assert!(t.elapsed() < Duration::from_secs(30), "never found the producer dead"),
            Err(e) => break e,
        }
    };
    assert!(matches!(end, ConsumeError::Disconnected), "{end}");
    assert_eq!(got, vec![b"before dying".to_vec()]);
    std::fs::remove_file(&path).unwrap();
}

/// A consumer process killed while a producer here waits on the full ring: the
/// producer finds it dead (it looks every 200 ms) and stops with `Disconnected`.
#[test]
fn a_waiting_producer_finds_a_killed_consumer_process_gone() {
    let path = temp_path("wait-killed-consumer");
    let ring = MpscRing::builder(1 << 16).create(&path).unwrap();
    let mut p = ring.producer().unwrap();
    while p.output(&[1; 200], Wakeup::NoWakeup).is_ok() {}
    let mut kid = spawn("hold-consumer", &[path.to_str().unwrap()]);
    wait_for_line(&mut kid, "ATTACHED");
    // Killed while the producer sleeps waiting for room.
    let producer = common::asleep::thread_id();
    let killer = std::thread::spawn(move || {
        common::asleep::wait_until_asleep(producer, "the producer waiting for room");
        kid.kill().unwrap();
        kid.wait().unwrap();
    });
    let t = Instant::now();
    let r = p.output_wait(&[1; 200], Wakeup::Default, Some(Duration::from_secs(30)));
    killer.join().unwrap();
    assert_eq!(r, Err(ReserveError::Disconnected { len: 200 }));
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    std::fs::remove_file(&path).unwrap();
}

/// A consumer of a ring file in an event loop: edge-triggered epoll on its descriptor
/// (the socket doorbell `arm` names), a producer in another process that writes with
/// pauses of 0 to 60 µs (the consumer is caught up and asleep, arming, or busy at every
/// kind of moment). No edge is ever missing while records are pending.
#[test]
fn a_ring_file_consumer_waits_in_an_event_loop_for_another_process() {
    use rustix::event::epoll;
    use std::os::fd::AsFd;
    let path = temp_path("wait-epoll");
    let ring = MpscRing::builder(1 << 16).create(&path).unwrap();
    let mut c = ring.consumer().unwrap();
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
    epoll::add(&ep, c.as_fd(), epoll::EventData::new_u64(1), epoll::EventFlags::IN | epoll::EventFlags::ET).unwrap();
    let kid = spawn("produce-sampled", &[path.to_str().unwrap()]);
    let (mut next, mut sleeps) = (0u64, 0u64);
    let mut events: Vec<epoll::Event> = Vec::with_capacity(4);
    while next < SAMPLED {
        c.consume(|d: &[u8]| {
            assert_eq!(d, next.to_le_bytes());
            next += 1;
        })
        .unwrap();
        if next < SAMPLED && c.arm().unwrap() {
            sleeps += 1;
            let ts = rustix::event::Timespec { tv_sec: 10, tv_nsec: 0 };
            events.clear();
            epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), Some(&ts)).unwrap();
            assert!(!events.is_empty(), "stalled: no edge while records were pending (at {next})");
        }
    }
    assert_eq!(finish(kid), vec![SAMPLED]);
    assert!(sleeps > 0, "the consumer never waited: the test proves nothing");
    // Dropped: producers ring the futex again, and a consumer that sleeps on it is woken.
    drop(c);
    let mut c = ring.consumer().unwrap();
    let mut p = ring.producer().unwrap();
    let consumer = common::asleep::thread_id();
    let t = std::thread::spawn(move || {
        common::asleep::wait_until_asleep(consumer, "the consumer on the futex");
        p.output(b"futex again", Wakeup::Default).unwrap();
        p // kept until the consumer's check: a producer's leaving wakes it too
    });
    let mut got = Vec::new();
    c.poll(Some(Duration::from_secs(10)), |d: &[u8]| got.push(d.to_vec())).unwrap();
    assert_eq!(got, vec![b"futex again".to_vec()]);
    t.join().unwrap();
    std::fs::remove_file(&path).unwrap();
}
