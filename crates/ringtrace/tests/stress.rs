//! Stress tests on real threads (2 cores is enough to interleave them): checksummed,
//! sequence-numbered records of random lengths from 4 producers, and from one producer
//! in runs of equal lengths (the consumer's predicted path), with exact accounting; and
//! a consumer that sleeps between bursts and must never be left sleeping.
//!
//! Sizes scale with `RINGTRACE_STRESS_RECORDS` (default 1,000,000 per producer in
//! release builds, 100,000 in debug builds).
#![cfg(not(loom))]

mod common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringtrace::config::{ProducerKind, WakeupPolicy};
use ringtrace::{MpscRing, Producer, ReserveError, SpscRing, Wakeup};

fn records_per_producer() -> u64 {
    std::env::var("RINGTRACE_STRESS_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(if cfg!(debug_assertions) {
        100_000
    } else {
        1_000_000
    })
}

/// xorshift64*: deterministic per producer, no dependency.
fn rng(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// FNV-1a over the payload after the 16-byte record header.
fn checksum(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ b as u32).wrapping_mul(0x0100_0193))
}

/// Record: seq u64 | producer u32 | checksum u32 | payload (seq-derived bytes).
fn fill(rec: &mut [u8], producer: u32, seq: u64) {
    for (k, b) in rec[16..].iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(k) as u8 ^ producer as u8;
    }
    let sum = checksum(&rec[16..]);
    rec[0..8].copy_from_slice(&seq.to_le_bytes());
    rec[8..12].copy_from_slice(&producer.to_le_bytes());
    rec[12..16].copy_from_slice(&sum.to_le_bytes());
}

#[derive(Default, Debug)]
struct ProducerLog {
    committed: u64,
    discarded: u64,
    lost: u64,
}

/// Reserves `len` bytes, fills them as record `seq` of producer `id`, and commits or
/// discards; a full ring is counted as lost and yields to the consumer.
fn put<K: ProducerKind>(p: &mut Producer<K>, len: usize, id: u32, seq: u64, discard: bool, log: &mut ProducerLog) {
    match p.reserve(len) {
        Ok(mut rec) => {
            fill(&mut rec, id, seq);
            if discard {
                rec.discard();
                log.discarded += 1;
            } else {
                rec.commit();
                log.committed += 1;
            }
        }
        Err(ReserveError::Full { .. }) => {
            log.lost += 1;
            std::thread::yield_now();
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn four_producers_checksummed_exact_accounting() {
    const PRODUCERS: u32 = 4;
    let per = records_per_producer();
    let ring = MpscRing::new(1 << 16).unwrap();
    let mut consumer = ring.consumer().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..PRODUCERS)
        .map(|id| {
            let mut p = ring.producer().unwrap();
            std::thread::spawn(move || {
                let mut log = ProducerLog::default();
                let mut seed = 0x9e37_79b9_7f4a_7c15 ^ (id as u64 + 1);
                for seq in 0..per {
                    let r = rng(&mut seed);
                    let len = 16 + (r % 241) as usize;
                    put(&mut p, len, id, seq, r % 97 == 0, &mut log);
                }
                log
            })
        })
        .collect();

    let mut next_seq = vec![0u64; PRODUCERS as usize];
    let mut gaps = vec![0u64; PRODUCERS as usize];
    let mut consumed = 0u64;
    let mut check = |d: &[u8]| -> Result<(), String> {
        let seq = u64::from_le_bytes(d[0..8].try_into().unwrap());
        let id = u32::from_le_bytes(d[8..12].try_into().unwrap()) as usize;
        let sum = u32::from_le_bytes(d[12..16].try_into().unwrap());
        if id >= next_seq.len() || checksum(&d[16..]) != sum {
            return Err(format!("corrupt record: producer {id} seq {seq} len {}", d.len()));
        }
        if seq < next_seq[id] {
            return Err(format!("producer {id}: seq {seq} after {}", next_seq[id]));
        }
        gaps[id] += seq - next_seq[id];
        next_seq[id] = seq + 1;
        consumed += 1;
        Ok(())
    };
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let finished = done.load(Ordering::Acquire);
        // `Disconnected` once the producers are gone and everything is read.
        match consumer.poll(Some(Duration::from_millis(100)), &mut check) {
            Ok(_) | Err(ringtrace::ConsumeError::Disconnected) => {}
            Err(e) => panic!("{e}"),
        }
        if finished {
            break;
        }
        if handles.iter().all(|h| h.is_finished()) {
            done.store(true, Ordering::Release);
        }
        assert!(Instant::now() < deadline, "stress test did not finish");
    }
    let logs: Vec<ProducerLog> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    consumer.consume(&mut check).unwrap();
    let _ = &mut check; // the closure borrows the tallies until here

    let stats = ring.stats();
    let committed: u64 = logs.iter().map(|l| l.committed).sum();
    let discarded: u64 = logs.iter().map(|l| l.discarded).sum();
    let lost: u64 = logs.iter().map(|l| l.lost).sum();
    assert_eq!(committed + discarded + lost, per * PRODUCERS as u64);
    assert_eq!(consumed, committed, "every committed record consumed exactly once");
    assert_eq!(stats.committed, committed);
    assert_eq!(stats.consumed, committed);
    assert_eq!(stats.discarded, discarded);
    assert_eq!(stats.skipped, discarded);
    assert_eq!(stats.lost, lost);
    assert_eq!(stats.available, 0);
    for (id, log) in logs.iter().enumerate() {
        // A producer's missing sequence numbers are exactly its lost and discarded ones
        // (the trailing ones included).
        let trailing = per - next_seq[id];
        assert_eq!(gaps[id] + trailing, log.lost + log.discarded, "producer {id}: {log:?}");
    }
    eprintln!("stress: {committed} committed, {discarded} discarded, {lost} lost; {stats:?}");
}

/// The single-producer ring (plain-store claims) with a busy consumer on the other
/// core: runs of equal-length records (the consumer's predicted path) broken by other
/// lengths, zero-length and discarded records (its slow path), in a ring small enough to
/// wrap thousands of times and fill up. Exact accounting and every checksum.
#[test]
fn single_producer_checksummed_exact_accounting() {
    let per = 2 * records_per_producer();
    let ring = SpscRing::new(1 << 14).unwrap();
    let mut consumer = ring.consumer().unwrap();
    let mut p = ring.producer().unwrap();
    let t = std::thread::spawn(move || {
        let mut log = ProducerLog::default();
        let mut seed = 0x2545_f491_4f6c_dd1d;
        let mut len = 16;
        for seq in 0..per {
            let r = rng(&mut seed);
            if r % 16 == 0 {
                len = 16 + (r >> 8) as usize % 200; // a new run length
            }
            if r % 101 == 0 {
                // Zero-length records: committed, but carry no sequence number.
                let _ = p.output(&[], Wakeup::Default);
            }
            put(&mut p, len, 0, seq, r % 89 == 0, &mut log);
        }
        log
    });
    let (mut next, mut gaps, mut consumed, mut empty) = (0u64, 0u64, 0u64, 0u64);
    let mut check = |d: &[u8]| -> Result<(), String> {
        if d.is_empty() {
            empty += 1;
            return Ok(());
        }
        let seq = u64::from_le_bytes(d[0..8].try_into().unwrap());
        if checksum(&d[16..]) != u32::from_le_bytes(d[12..16].try_into().unwrap()) || seq < next {
            return Err(format!("corrupt or out of order: seq {seq} after {next}, len {}", d.len()));
        }
        gaps += seq - next;
        next = seq + 1;
        consumed += 1;
        Ok(())
    };
    let deadline = Instant::now() + Duration::from_secs(600);
    while !t.is_finished() {
        consumer.consume(&mut check).unwrap();
        assert!(Instant::now() < deadline, "stress test did not finish");
    }
    let log = t.join().unwrap();
    consumer.consume(&mut check).unwrap();
    let _ = &mut check;
    let stats = ring.stats();
    assert_eq!(log.committed + log.discarded + log.lost, per);
    assert_eq!(consumed, log.committed, "every committed record consumed exactly once");
    assert_eq!(gaps + (per - next), log.lost + log.discarded);
    assert_eq!(stats.committed, log.committed + empty);
    assert_eq!(stats.consumed, log.committed + empty);
    assert_eq!(stats.discarded, log.discarded);
    assert_eq!(stats.skipped, log.discarded);
    assert!(stats.lost >= log.lost, "zero-length records can be lost too");
    assert_eq!(stats.available, 0);
    eprintln!(
        "spsc stress: {} committed, {} discarded, {} lost, {empty} empty; {stats:?}",
        log.committed, log.discarded, log.lost
    );
}

/// The consumer sleeps between bursts; every burst must wake it. Every 8th burst starts
/// only once the consumer sleeps (seen in /proc), so that it is woken from a sleep at
/// least that often whatever the load; the other bursts meet it at every other moment.
/// A lost wakeup shows as a poll that runs to its timeout (after which it still
/// delivers the records pending, so only the time it took tells).
fn sleeping_consumer_never_misses_a_burst(policy: WakeupPolicy) {
    let bursts = (records_per_producer() / 1000).max(50);
    const BURST: u64 = 2000;
    let ring = MpscRing::builder(1 << 16).wakeup_policy(policy).build().unwrap();
    let mut consumer = ring.consumer().unwrap();
    let mut producer = ring.producer().unwrap();
    let consumer_thread = common::asleep::thread_id();
    let t = std::thread::spawn(move || {
        let mut lost = 0;
        for b in 0..bursts {
            for i in 0..BURST {
                let v = b * BURST + i;
                while producer.output(&v.to_le_bytes(), Wakeup::Default).is_err() {
                    lost += 1;
                    std::thread::yield_now();
                }
            }
            if b % 8 == 0 {
                common::asleep::wait_until_asleep(consumer_thread, "the consumer, caught up");
            }
        }
        lost
    });
    // No wakeup is due for the last records if they are fewer bytes than a watermark:
    // the poll that waits for them runs to its timeout.
    let tail = match policy {
        WakeupPolicy::Watermark(bytes) => bytes,
        _ => 0,
    };
    let timeout = Duration::from_secs(5);
    let total = bursts * BURST;
    let mut next = 0u64;
    while next < total {
        let (left, t0) = (total - next, Instant::now());
        let n = consumer
            .poll(Some(timeout), |d| {
                assert_eq!(u64::from_le_bytes(d.try_into().unwrap()), next);
                next += 1;
                Ok::<(), Infallible>(())
            })
            .unwrap();
        // The producer only stops when it is done: a poll that sleeps is woken by the
        // next commit, in well under its timeout.
        let took = t0.elapsed();
        assert!(
            took < timeout / 2 || left * 16 < tail,
            "consumer slept through pending records: a poll took {took:?} (its timeout {timeout:?}) at {next} of \
             {total}, then delivered {n}"
        );
    }
    t.join().unwrap();
    assert_eq!(ring.stats().consumed, total);
}

#[test]
fn sleeping_consumer_caught_up_policy() {
    sleeping_consumer_never_misses_a_burst(WakeupPolicy::CaughtUp);
}

#[test]
fn sleeping_consumer_watermark_policy() {
    sleeping_consumer_never_misses_a_burst(WakeupPolicy::Watermark(4096));
}
