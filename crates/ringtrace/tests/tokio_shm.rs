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

/// The child side. Does nothing in a normal test run.
#[test]
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
    // Killed while the reader waits (after it read the record and armed): only the
    // recheck can find it gone.
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        kid.kill().unwrap();
        kid.wait().unwrap().signal()
    });
    let started = std::time::Instant::now();
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
    assert_eq!(killer.join().unwrap(), Some(9));
    assert!(started.elapsed() >= Duration::from_millis(300), "gone before it was killed?");
    assert_eq!(got, vec![b"before dying".to_vec()]);
    assert!(matches!(end, ConsumeError::Disconnected), "{end}");
    std::fs::remove_file(&path).unwrap();
}

/// A flight recorder's consumer, asynchronously: woken by forced wakeups (an overwrite
/// ring's default policy wakes on nothing else), and its stream ends with the producer.
#[test]
fn an_overwrite_consumer_streams_asynchronously() {
    let ring = FlightRecorder::new(1 << 16).unwrap();
    let consumer: OverwriteConsumer = ring.consumer().unwrap();
    let mut p = ring.producer().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..2000u64 {
            let wakeup = if i % 100 == 99 { Wakeup::Force } else { Wakeup::Default };
            p.output(&i.to_le_bytes(), wakeup).unwrap();
            if i % 100 == 99 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let got = runtime().block_on(async move {
        let mut records = AsyncReader::new(consumer).unwrap().into_stream();
        let mut got = Vec::new();
        while let Some(rec) = timeout(Duration::from_secs(10), records.next()).await.expect("a lost wakeup") {
            got.push(u64::from_le_bytes(rec.unwrap().try_into().unwrap()));
        }
        got
    });
    writer.join().unwrap();
    // A 64 KiB ring holds all 2000 records of 16 bytes: none was overwritten.
    assert_eq!(got, (0..2000).collect::<Vec<_>>());
}
