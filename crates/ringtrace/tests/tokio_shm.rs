//! Async readers of rings shared between processes: a ring file's consumer on a tokio
//! runtime, woken through its socket doorbell by producers in other processes, and
//! finding a killed producer process gone without any wakeup (its recheck timer).
//! Children are this test binary run again (`common/shm.rs`).
#![cfg(all(feature = "tokio", not(loom)))]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use common::shm::*;
use ringtrace::recorder::OverwriteConsumer;
use ringtrace::tokio::AsyncReader;
use ringtrace::{ConsumeError, FlightRecorder, MpscRing, Wakeup};
use tokio::time::timeout;
use tokio_stream::StreamExt;

/// The child side: not a test (see `common::child_role`).
#[test]
#[ignore = "a child role: run by this binary's multi-process tests (common::spawn_child)"]
fn child() {
    common::shm::child();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A producer process writes 5 000 records 0 to 60 µs apart (the consumer is asleep,
/// arming or reading at every kind of moment); the async reader streams them all, in
/// order, each `next` bounded by 10 s (a lost wakeup would hit it), and the stream ends
/// when the producer process exits.
#[test]
fn a_ring_file_streams_asynchronously_from_another_process_until_it_exits() {
    let path = temp_path("tokio-shm-stream");
    let ring = MpscRing::builder(1 << 16).create(&path).unwrap();
    let consumer = ring.consumer().unwrap();
    let kid = spawn("produce-sampled", &[path.to_str().unwrap()]);
    let got = runtime().block_on(async move {
        let mut records = AsyncReader::new(consumer).unwrap().into_stream();
        let mut next = 0u64;
        loop {
            let item = timeout(Duration::from_secs(10), records.next()).await;
            match item.unwrap_or_else(|_| panic!("no record for 10 s at {next}: a lost wakeup")) {
                Some(rec) => {
                    assert_eq!(rec.unwrap(), next.to_le_bytes());
                    next += 1;
                }
                None => break next,
            }
        }
    });
    assert_eq!(got, SAMPLED);
    assert_eq!(finish(kid), vec![SAMPLED]);
    std::fs::remove_file(&path).unwrap();
}

/// A producer process killed with SIGKILL rings nothing: the async reader still finds
/// it gone (it looks every 200 ms), delivers its record, then says `Disconnected`.
#[test]
fn an_async_reader_finds_a_killed_producer_process_gone() {
    let path = temp_path("tokio-shm-killed");
    let ring = MpscRing::builder(1 << 16).create(&path).unwrap();
    let consumer = ring.consumer().unwrap();
    let mut kid = spawn("hold-producer", &[path.to_str().unwrap()]);
    wait_for_line(&mut kid, "ATTACHED");
    // Killed while the reader waits (after it read the record and armed: its thread
    // sleeps in the runtime's epoll): only the recheck can find it gone.
    let (reader_thread, watched) = (common::asleep::thread_id(), ring.clone());
    let killer = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + common::asleep::FALL_ASLEEP;
        while watched.stats().consumed < 1 || !common::asleep::is_asleep(reader_thread) {
            assert!(std::time::Instant::now() < deadline, "the reader never read the record and slept");
            std::thread::sleep(Duration::from_micros(20));
        }
        let killed_at = std::time::Instant::now();
        kid.kill().unwrap();
        (kid.wait().unwrap().signal(), killed_at)
    });
    let (got, end) = runtime().block_on(async move {
        let mut reader = AsyncReader::new(consumer).unwrap();
        let mut got = Vec::new();
        loop {
            let r = timeout(Duration::from_secs(20), reader.consume(|rec: &[u8]| got.push(rec.to_vec()))).await;
            match r.expect("the killed producer was never found gone") {
                Ok(_) => {}
                Err(e) => break (got, e),
            }
        }
    });
    let found_at = std::time::Instant::now();
    let (signal, killed_at) = killer.join().unwrap();
    assert_eq!(signal, Some(9));
    assert!(found_at > killed_at, "gone before it was killed?");
    assert_eq!(got, vec![b"before dying".to_vec()]);
    assert!(matches!(end, ConsumeError::Disconnected), "{end}");
    std::fs::remove_file(&path).unwrap();
}

/// A flight recorder's consumer, asynchronously: woken by forced wakeups (an overwrite
/// ring's default policy wakes on nothing else), and its stream ends with the producer.
/// After each forced record the writer waits until the reader has it: only that wakeup
/// can bring it (the producer's leaving, which also wakes the reader, comes after).
#[test]
fn an_overwrite_consumer_streams_asynchronously() {
    let ring = FlightRecorder::new(1 << 16).unwrap();
    let consumer: OverwriteConsumer = ring.consumer().unwrap();
    let mut p = ring.producer().unwrap();
    let read = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = std::thread::spawn({
        let read = read.clone();
        move || {
            for i in 0..2000u64 {
                let wakeup = if i % 100 == 99 { Wakeup::Force } else { Wakeup::Default };
                p.output(&i.to_le_bytes(), wakeup).unwrap();
                if i % 100 == 99 {
                    let deadline = std::time::Instant::now() + Duration::from_secs(10);
                    while read.load(std::sync::atomic::Ordering::Acquire) <= i {
                        assert!(std::time::Instant::now() < deadline, "record {i} not read in 10 s: a lost wakeup");
                        std::thread::sleep(Duration::from_micros(50));
                    }
                }
            }
        }
    });
    let got = runtime().block_on(async move {
        let mut records = AsyncReader::new(consumer).unwrap().into_stream();
        let mut got = Vec::new();
        while let Some(rec) = timeout(Duration::from_secs(20), records.next()).await.expect("a lost wakeup") {
            got.push(u64::from_le_bytes(rec.unwrap().try_into().unwrap()));
            read.store(got.len() as u64, std::sync::atomic::Ordering::Release);
        }
        got
    });
    writer.join().unwrap();
    // A 64 KiB ring holds all 2000 records of 16 bytes: none was overwritten.
    assert_eq!(got, (0..2000).collect::<Vec<_>>());
}

/// Two async producers (tasks of a multi-thread runtime) write through a 4 KiB ring
/// far smaller than what they write, to a consumer on a thread: they wait for room
/// instead of losing records, and each sequence arrives whole and in order.
#[test]
fn async_producers_wait_for_room_and_lose_nothing() {
    const PER: u64 = 100_000;
    let ring = MpscRing::new(4096).unwrap();
    let mut c = ring.consumer().unwrap();
    let producers: Vec<_> = (0..2).map(|_| ring.producer().unwrap()).collect();
    let reader = std::thread::spawn(move || {
        // A poll that sleeps is woken by the next commit (or the producers' leaving) in
        // well under its timeout; one that runs to its timeout was not woken, whatever
        // it delivers after it.
        let timeout = Duration::from_secs(10);
        let mut next = [0u64; 2];
        loop {
            let t0 = std::time::Instant::now();
            match c.poll(Some(timeout), |rec: &[u8]| {
                let (id, seq) = check(rec);
                assert_eq!(seq, next[id as usize], "producer {id}: out of order or lost");
                next[id as usize] += 1;
            }) {
                Ok(_) if t0.elapsed() >= timeout / 2 => {
                    panic!("a poll took {:?} (its timeout {timeout:?}) at {next:?}: a lost wakeup", t0.elapsed())
                }
                Ok(_) => {}
                Err(ConsumeError::Disconnected) => break next,
                Err(e) => panic!("{e}"),
            }
        }
    });
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async move {
        let tasks: Vec<_> = producers
            .into_iter()
            .enumerate()
            .map(|(id, p)| {
                tokio::spawn(async move {
                    let mut p = ringtrace::tokio::AsyncProducer::new(p).unwrap();
                    let mut buf = Vec::new();
                    for seq in 0..PER {
                        record(id as u32, seq, &mut buf);
                        p.output(&buf, Wakeup::Default).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert_eq!(reader.join().unwrap(), [PER, PER]);
    assert_eq!(ring.stats().lost, 0);
}

/// An async producer's `output` cancelled by a timeout while the ring is full has
/// written and counted nothing; once the consumer makes room, the next one succeeds.
#[test]
fn a_cancelled_async_output_writes_and_counts_nothing() {
    let ring = MpscRing::new(4096).unwrap();
    let mut c = ring.consumer().unwrap();
    runtime().block_on(async {
        let mut p = ringtrace::tokio::AsyncProducer::new(ring.producer().unwrap()).unwrap();
        while p.get_mut().output(&[7; 100], Wakeup::NoWakeup).is_ok() {}
        let before = ring.stats();
        let r = timeout(Duration::from_millis(50), p.output(&[8; 100], Wakeup::Default)).await;
        assert!(r.is_err(), "no room, so it should still be waiting");
        let after = ring.stats();
        assert_eq!((after.committed, after.lost), (before.committed, before.lost));
        let read = c.consume(|rec: &[u8]| assert_eq!(rec, [7; 100])).unwrap();
        assert_eq!(read as u64, before.committed);
        timeout(Duration::from_secs(10), p.output(&[8; 100], Wakeup::Default)).await.unwrap().unwrap();
    });
    let mut got = Vec::new();
    c.consume(|rec: &[u8]| got.push(rec.to_vec())).unwrap();
    assert_eq!(got, vec![vec![8; 100]]);
}

/// Async producers in this process, the consumer in another: the consumer rings this
/// process's room socket (named in the ring file) when it makes room.
#[test]
fn async_producers_are_woken_by_a_consumer_in_another_process() {
    let path = temp_path("tokio-shm-room");
    let ring = MpscRing::builder(1 << 16).create(&path).unwrap();
    let producers: Vec<_> = (0..2).map(|_| ring.producer().unwrap()).collect();
    let kid = spawn("consume-discard", &[path.to_str().unwrap()]);
    runtime().block_on(async move {
        let tasks: Vec<_> = producers
            .into_iter()
            .enumerate()
            .map(|(id, p)| {
                tokio::spawn(async move {
                    let mut p = ringtrace::tokio::AsyncProducer::new(p).unwrap();
                    let mut buf = Vec::new();
                    for seq in 0..RECORDS {
                        record(id as u32, seq, &mut buf);
                        timeout(Duration::from_secs(30), p.output(&buf, Wakeup::Default))
                            .await
                            .unwrap_or_else(|_| panic!("no room for 30 s at {seq}: a lost wakeup"))
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert_eq!(finish(kid), vec![2 * RECORDS]);
    assert_eq!(ring.stats().lost, 0);
    std::fs::remove_file(&path).unwrap();
}
