//! Channels under load: writers racing a live reader or snapshots, in both modes; every
//! record intact, in time order, and every counter adding up exactly.
#![cfg(not(loom))]

mod common;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::channel::{parse, record};
use ringtrace::channel::ChannelRecord;
use ringtrace::clock::{BestClock, Monotonic};
use ringtrace::config::{Discard, Overwrite};
use ringtrace::{Channel, ReserveError, Wakeup};

/// The channel stress test: 4 threads write timestamped, sequence-numbered, checksummed
/// records into a discard channel while a reader follows it live. The merged order is
/// non-decreasing in time except for records counted late; every producer's sequence
/// is complete but for the writes it was refused, which are counted exactly.
#[test]
fn stress_discard_channel_four_writers_and_a_live_reader() {
    let per = 300_000u64;
    let channel = Channel::<Discard, BestClock>::builder(1 << 16).build(BestClock::new()).unwrap();
    let mut reader = channel.reader().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(5));
    let writers: Vec<_> = (0..4u64)
        .map(|t| {
            let (c, start) = (channel.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut p = c.producer().unwrap();
                let mut refused = Vec::new();
                for i in 0..per {
                    match p.output(&record(t, i), Wakeup::NoWakeup) {
                        Ok(()) => {}
                        Err(ReserveError::Full { .. }) => {
                            refused.push(i);
                            // Let the reader (2 cores, 5 threads) catch up.
                            std::thread::yield_now();
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                refused
            })
        })
        .collect();
    start.wait();
    let mut seen: HashMap<u64, Vec<u64>> = HashMap::new();
    let (mut last, mut inversions) = (0u64, 0u64);
    let mut take = |r: ChannelRecord<'_>| {
        if r.timestamp < last {
            inversions += 1;
        }
        last = last.max(r.timestamp);
        let (tag, seq) = parse(&r);
        seen.entry(tag).or_default().push(seq);
        Ok::<_, Infallible>(())
    };
    let d2 = done.clone();
    let waiter = std::thread::spawn(move || {
        let refused: Vec<Vec<u64>> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        d2.store(true, Ordering::Release);
        refused
    });
    while !done.load(Ordering::Acquire) {
        reader.consume(&mut take).unwrap();
    }
    let refused = waiter.join().unwrap();
    reader.drain(&mut take).unwrap();
    let late = reader.late();
    drop(reader);
    let stats = channel.stats();
    assert!(inversions <= stats.late, "{inversions} records out of order, {} counted late", stats.late);
    let mut lost = 0;
    for (t, refused) in refused.iter().enumerate() {
        let got = &seen[&(t as u64)];
        let mut expect = Vec::with_capacity(per as usize);
        let mut r = refused.iter().peekable();
        for i in 0..per {
            if r.peek() == Some(&&i) {
                r.next();
            } else {
                expect.push(i);
            }
        }
        assert!(got == &expect, "producer {t}: {} records seen, {} expected", got.len(), expect.len());
        lost += refused.len() as u64;
    }
    // Late deliveries happen when a writer is preempted for longer than the slack
    // between stamping and committing (a loaded machine): counted, never dropped.
    assert_eq!(late, stats.late, "the reader's count is the channel's");
    assert_eq!(stats.written, 4 * per - lost);
    assert_eq!(stats.lost, lost);
    assert_eq!(stats.read, stats.written, "committed = read once drained: {stats:?}");
    eprintln!("stress: {stats:?}");
}

/// 4 threads write into an overwrite channel while another takes snapshots: each
/// snapshot is in non-decreasing time order, holds only intact records, and each
/// producer's records in it are a run of consecutive sequence numbers; at the end,
/// every producer's written = held + overwritten, exactly.
#[test]
fn stress_overwrite_channel_snapshots_are_ordered_and_exact() {
    let per = 200_000u64;
    let channel = Channel::<Overwrite, BestClock>::builder(1 << 14).build(BestClock::new()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let snapper = {
        let (c, stop) = (channel.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let Ok(snap) = c.snapshot() else { continue };
                check_snapshot(&snap);
                n += 1;
            }
            n
        })
    };
    let writers: Vec<_> = (0..4u64)
        .map(|t| {
            let c = channel.clone();
            std::thread::spawn(move || {
                let mut p = c.producer().unwrap();
                let mut written = 0;
                for i in 0..per {
                    written += u64::from(p.output(&record(t, i), Wakeup::NoWakeup).is_ok());
                }
                (p, written)
            })
        })
        .collect();
    let producers: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    let snapshots = snapper.join().unwrap();
    let snap = channel.snapshot().unwrap();
    check_snapshot(&snap);
    let stats = channel.producer_stats();
    for (p, written) in &producers {
        let s = stats.iter().find(|s| s.id == p.id()).unwrap();
        let held = snap.iter().filter(|r| r.producer == p.id()).count() as u64;
        assert_eq!(s.written, *written);
        assert_eq!(s.written, held + s.overwritten, "producer {}: {s:?}, {held} held", p.id());
    }
    assert_eq!(snap.overwritten(), stats.iter().map(|s| s.overwritten).sum::<u64>());
    eprintln!("{snapshots} snapshots taken during the run");
}

fn check_snapshot(snap: &ringtrace::channel::ChannelSnapshot) {
    let mut last_ts = 0;
    let mut last_seq: HashMap<u32, (u64, u64)> = HashMap::new();
    for r in snap.iter() {
        assert!(r.timestamp >= last_ts, "snapshot out of time order");
        last_ts = r.timestamp;
        let (tag, seq) = parse(&r);
        if let Some(&(t, s)) = last_seq.get(&r.producer) {
            assert_eq!(t, tag, "one producer, one tag");
            assert_eq!(seq, s + 1, "producer {tag}: consecutive records in a snapshot");
        }
        last_seq.insert(r.producer, (tag, seq));
    }
    // Newest to oldest is the exact reverse.
    let fwd: Vec<_> = snap.iter().map(|r| (r.producer, r.timestamp)).collect();
    let mut back: Vec<_> = snap.iter().rev().map(|r| (r.producer, r.timestamp)).collect();
    back.reverse();
    assert_eq!(fwd, back);
}

/// Three producers overwrite their 4 KiB rings while the live reader follows them,
/// slower than they write, five times over: the reader is overtaken, and now and then
/// finds a ring overwritten faster than it copies it (`Busy` for the ring's consumer),
/// after which it reads that ring again on its next pass, never giving it up. Every
/// counter identity holds exactly, per producer and in total.
#[test]
fn an_overwrite_channels_counters_add_up_with_a_live_reader_racing_the_producers() {
    for round in 0..5 {
        overwrite_channel_race(round);
    }
}

fn overwrite_channel_race(round: u32) {
    const PER: u64 = 50_000;
    let channel = Channel::<Overwrite, Monotonic>::builder(4096).build(Monotonic).unwrap();
    let mut reader = channel.reader().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..3u64)
        .map(|tag| {
            let channel = channel.clone();
            std::thread::spawn(move || {
                let mut p = channel.producer().unwrap();
                let (mut committed, mut lost) = (0u64, 0u64);
                for seq in 0..PER {
                    match p.output(&record(tag, seq), Wakeup::NoWakeup) {
                        Ok(()) => committed += 1,
                        Err(ReserveError::Pending { .. }) => lost += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
                (p.id(), committed, lost)
            })
        })
        .collect();
    let waiter = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let done: Vec<_> = producers.into_iter().map(|p| p.join().unwrap()).collect();
            // Release: pairs with the reader's Acquire load.
            stop.store(true, Ordering::Release);
            done
        })
    };
    let mut per_producer: HashMap<u32, (u64, u64)> = HashMap::new(); // (delivered, last seq)
    let mut take = |r: ChannelRecord<'_>| {
        let (_, seq) = parse(&r);
        let e = per_producer.entry(r.producer).or_insert((0, 0));
        assert!(e.0 == 0 || e.1 < seq, "producer {}: {} then {seq}", r.producer, e.1);
        *e = (e.0 + 1, seq);
        Ok::<(), Infallible>(())
    };
    while !stop.load(Ordering::Acquire) {
        if let Err(e) = reader.consume(&mut take) {
            panic!("round {round}: the reader failed: {e}");
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let done = waiter.join().unwrap();
    reader.drain(&mut take).unwrap();
    let lanes = channel.producer_stats();
    let total = channel.stats();
    let snap = channel.snapshot().unwrap();
    assert!(snap.failed().is_empty());
    for (id, committed, lost) in &done {
        let s = lanes.iter().find(|s| s.id == *id).unwrap();
        let held = snap.iter().filter(|r| r.producer == *id).count() as u64;
        let delivered = per_producer.get(id).map_or(0, |e| e.0);
        assert_eq!((committed + lost, *committed, *lost, delivered), (PER, s.written, s.lost, s.read), "{s:?}");
        assert_eq!(s.written, s.read + s.overwritten_unread, "round {round}, producer {id}, drained: {s:?}");
        assert_eq!(s.written, s.overwritten + held, "round {round}, producer {id}: {s:?}, {held} held");
        assert!(s.overwritten_unread <= s.overwritten, "{s:?}");
    }
    assert_eq!(total.written, total.read + total.overwritten_unread + total.freed_unread, "{total:?}");
    assert_eq!(snap.len() as u64 + snap.overwritten(), total.written);
    assert_eq!(reader.late(), total.late);
}
