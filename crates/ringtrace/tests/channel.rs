//! Channels: per-producer rings merged by timestamp.
#![cfg(not(loom))]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ringtrace::channel::ChannelRecord;
use ringtrace::clock::{BestClock, Monotonic, NoClock, Tsc};
use ringtrace::config::{Discard, Overwrite};
use ringtrace::{Channel, ReserveError, Wakeup};

/// A record: producer tag, sequence number, checksum of both (24 bytes).
fn record(tag: u64, seq: u64) -> [u8; 24] {
    let mut r = [0u8; 24];
    r[..8].copy_from_slice(&tag.to_le_bytes());
    r[8..16].copy_from_slice(&seq.to_le_bytes());
    r[16..].copy_from_slice(&checksum(tag, seq).to_le_bytes());
    r
}

fn checksum(tag: u64, seq: u64) -> u64 {
    (tag ^ seq.rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Checks a record's checksum; its `(tag, seq)`.
fn parse(rec: &ChannelRecord<'_>) -> (u64, u64) {
    assert_eq!(rec.data.len(), 24, "record of {} bytes", rec.data.len());
    let word = |i: usize| u64::from_le_bytes(rec.data[i * 8..i * 8 + 8].try_into().unwrap());
    let (tag, seq) = (word(0), word(1));
    assert_eq!(word(2), checksum(tag, seq), "torn record: tag {tag} seq {seq}");
    (tag, seq)
}

#[test]
fn threads_write_through_their_own_rings_and_the_reader_merges_them_in_time_order() {
    let channel = Channel::<Discard, Monotonic>::builder(1 << 16).build(Monotonic).unwrap();
    let mut reader = channel.reader().unwrap();
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let channel = &channel;
            s.spawn(move || {
                for i in 0..1000 {
                    channel.output(&record(t, i), Wakeup::Default).unwrap();
                }
            });
        }
    });
    wait_exited(&|| channel.stats(), 3);
    let (mut last, mut next) = (0, HashMap::new());
    let n = reader
        .drain(|rec| {
            assert!(rec.timestamp >= last, "time went back: {last} -> {}", rec.timestamp);
            last = rec.timestamp;
            let (tag, seq) = parse(&rec);
            let expect = next.entry(tag).or_insert(0);
            assert_eq!(seq, *expect, "producer {tag}: records in order, none missing");
            *expect += 1;
            Ok::<(), Infallible>(())
        })
        .unwrap();
    assert_eq!(n, 3000);
    let stats = channel.stats();
    assert_eq!((stats.producers, stats.exited, stats.written, stats.read, stats.lost), (3, 3, 3000, 3000, 0));
    // The exited producers' rings were drained, so they are freed.
    assert!(channel.producer_stats().is_empty(), "{:?}", channel.producer_stats());
}

#[test]
fn one_reader_at_a_time() {
    let channel = Channel::<Discard, NoClock>::builder(4096).build(NoClock).unwrap();
    let r = channel.reader().unwrap();
    assert!(matches!(channel.reader(), Err(ringtrace::Error::ConsumerAttached { .. })));
    drop(r);
    channel.reader().unwrap();
}

#[test]
fn refused_writes_are_counted_and_reported_with_the_callers_length() {
    let channel = Channel::<Discard, Monotonic>::builder(4096).build(Monotonic).unwrap();
    let mut p = channel.producer().unwrap();
    let max = channel.max_record_len();
    assert_eq!(p.reserve(max + 1).unwrap_err(), ReserveError::TooLarge { len: max + 1, max });
    let mut lost = 0;
    for _ in 0..1000 {
        match p.output(&[7; 100], Wakeup::NoWakeup) {
            Ok(()) => {}
            Err(ReserveError::Full { len: 100 }) => lost += 1,
            Err(e) => panic!("{e}"),
        }
    }
    let s = channel.stats();
    assert!(lost > 0);
    assert_eq!((s.written + s.lost, s.lost), (1000, lost));
}

#[test]
fn an_idle_producer_delays_the_others_by_the_slack_only() {
    let channel =
        Channel::<Discard, Monotonic>::builder(4096).slack(Duration::from_millis(5)).build(Monotonic).unwrap();
    let _idle = channel.producer().unwrap(); // attached, never writes
    let mut busy = channel.producer().unwrap();
    let mut reader = channel.reader().unwrap();
    busy.output(b"hello", Wakeup::Default).unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    while got.is_empty() && start.elapsed() < Duration::from_secs(10) {
        reader
            .poll(Some(Duration::from_millis(100)), |r| {
                got.push(r.data.to_vec());
                Ok::<_, Infallible>(())
            })
            .unwrap();
    }
    assert_eq!(got, [b"hello".to_vec()], "delivered though another producer is idle");
}

#[test]
fn a_record_committed_after_the_slack_is_delivered_late_and_counted() {
    let channel =
        Channel::<Discard, Monotonic>::builder(4096).slack(Duration::from_millis(1)).build(Monotonic).unwrap();
    let mut slow = channel.producer().unwrap();
    let mut fast = channel.producer().unwrap();
    let mut reader = channel.reader().unwrap();
    let mut rec = slow.reserve(4).unwrap(); // stamped now
    rec.copy_from_slice(b"slow");
    std::thread::sleep(Duration::from_millis(5));
    fast.output(b"fast", Wakeup::Default).unwrap();
    let mut order = Vec::new();
    let mut take = |r: ChannelRecord<'_>| {
        order.push((r.data.to_vec(), r.timestamp));
        Ok::<_, Infallible>(())
    };
    let start = Instant::now();
    while reader.consume(&mut take).unwrap() == 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    rec.commit();
    reader.drain(&mut take).unwrap();
    assert_eq!(order.len(), 2);
    assert_eq!(order[0].0, b"fast");
    assert_eq!(order[1].0, b"slow");
    assert!(order[1].1 < order[0].1, "the slow record is older");
    // Cumulative, as its docs say: the calls after the late delivery (which publish
    // the reader's counts to the channel) leave it as it was.
    assert_eq!(reader.late(), 1);
    let mut none = |_: ChannelRecord<'_>| Ok::<_, Infallible>(());
    assert_eq!(reader.consume(&mut none).unwrap(), 0);
    assert_eq!(reader.poll(Some(Duration::from_millis(2)), &mut none).unwrap(), 0);
    assert_eq!(reader.late(), 1, "late() is cumulative");
    assert_eq!(channel.stats().late, 1, "counted once in the channel's stats");
    drop(reader);
    assert_eq!(channel.stats().late, 1);
    assert_eq!(channel.stats().read, 2);
    // A second reader starts from zero; the channel's total stays.
    let reader = channel.reader().unwrap();
    assert_eq!(reader.late(), 0);
    assert_eq!(channel.stats().late, 1);
}

#[test]
fn tsc_and_best_clocks_stamp_in_the_monotonic_time_base() {
    let best = BestClock::new();
    let channel = Channel::<Discard, BestClock>::builder(4096).build(best).unwrap();
    let before = ringtrace::clock::monotonic_ns();
    channel.output(b"x", Wakeup::Default).unwrap();
    let after = ringtrace::clock::monotonic_ns();
    let mut ts = 0;
    channel
        .reader()
        .unwrap()
        .drain(|r| {
            ts = r.timestamp;
            Ok::<_, Infallible>(())
        })
        .unwrap();
    // The TSC's conversion may be off by its calibration error: a millisecond is loose.
    assert!(ts + 1_000_000 >= before && ts <= after + 1_000_000, "{before} <= {ts} <= {after}");
    match Tsc::shared() {
        Ok(tsc) => {
            assert!(best.is_tsc());
            let c = Channel::<Overwrite, Tsc>::builder(4096).build(tsc).unwrap();
            c.output(b"y", Wakeup::Default).unwrap();
            assert_eq!(c.snapshot().unwrap().len(), 1);
        }
        Err(e) => eprintln!("TSC part skipped: {e}"),
    }
}

#[test]
fn exited_producers_rings_are_kept_for_snapshots_then_freed_and_counted() {
    let channel = Channel::<Overwrite, Monotonic>::builder(4096).retain_exited(2).build(Monotonic).unwrap();
    for t in 0..4u64 {
        let c = channel.clone();
        std::thread::spawn(move || {
            for i in 0..10 {
                c.output(&record(t, i), Wakeup::Default).unwrap();
            }
        })
        .join()
        .unwrap();
        wait_exited(&|| channel.stats(), t + 1);
    }
    // The newest exited ring is made and freed only when the next producer comes.
    let _next = channel.producer().unwrap();
    let snap = channel.snapshot().unwrap();
    let tags: Vec<u64> = snap.iter().map(|r| parse(&r).0).collect();
    assert_eq!(snap.len(), 20, "two exited rings kept: {tags:?}");
    assert!(tags.iter().all(|&t| t >= 2), "the oldest were freed: {tags:?}");
    let s = channel.stats();
    assert_eq!((s.producers, s.exited, s.written, s.freed_unread), (5, 4, 40, 20));
}

/// The stress test: 4 threads write timestamped, sequence-numbered, checksummed
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

/// The README's channel example, as written there.
#[test]
fn readme_example() -> Result<(), Box<dyn std::error::Error>> {
    let channel = Channel::<Overwrite, BestClock>::builder(1 << 16).build(BestClock::new())?;
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let channel = &channel;
            s.spawn(move || {
                for i in 0..10_000u32 {
                    channel.output(&[&[t][..], &i.to_le_bytes()].concat(), Wakeup::NoWakeup).unwrap();
                }
            });
        }
    });
    let snap = channel.snapshot()?;
    let newest: Vec<_> = snap.iter().rev().take(3).collect();
    assert!(newest.windows(2).all(|w| w[0].timestamp >= w[1].timestamp));
    assert!(newest.iter().any(|r| r.data[1..] == 9_999u32.to_le_bytes()), "some thread's last record is newest");
    assert_eq!(snap.len() as u64 + snap.overwritten(), 40_000);
    Ok(())
}

/// Exited rings a live reader has not delivered yet are not freed under it: it
/// delivers them all, and only then are they freed, with nothing counted unread.
#[test]
fn exited_rings_are_freed_only_once_the_reader_has_them() {
    let channel = Channel::<Overwrite, Monotonic>::builder(4096).retain_exited(0).build(Monotonic).unwrap();
    let mut reader = channel.reader().unwrap();
    for t in 0..3u64 {
        let c = channel.clone();
        std::thread::spawn(move || {
            for i in 0..50 {
                c.output(&record(t, i), Wakeup::NoWakeup).unwrap();
            }
        })
        .join()
        .unwrap();
        wait_exited(&|| channel.stats(), t + 1);
    }
    let _p = channel.producer().unwrap(); // would free every exited ring but for the reader
    let mut n = 0;
    reader
        .drain(|r| {
            parse(&r);
            n += 1;
            Ok::<_, Infallible>(())
        })
        .unwrap();
    assert_eq!(n, 150);
    let _q = channel.producer().unwrap(); // now they go
    let s = channel.stats();
    assert_eq!((s.written, s.read, s.freed_unread), (150, 150, 0), "{s:?}");
    assert_eq!(channel.producer_stats().len(), 2, "only the two live producers' rings are left");
}

/// A thread's thread-local producer is dropped when the thread exits, which may come
/// just after `join` returns: waits (bounded) until `n` producers have exited.
fn wait_exited(stats: &dyn Fn() -> ringtrace::channel::ChannelStats, n: u64) {
    let start = Instant::now();
    while stats().exited < n && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(stats().exited, n, "producers exited");
}

/// A discard channel with no reader does not keep every exited thread's ring: beyond
/// `retain_exited`, the oldest are freed and their records counted as never read.
#[test]
fn a_discard_channel_without_a_reader_frees_old_exited_rings_and_counts_them() {
    let channel = Channel::<Discard, Monotonic>::builder(4096).retain_exited(1).build(Monotonic).unwrap();
    for t in 0..3u64 {
        let c = channel.clone();
        std::thread::spawn(move || {
            for i in 0..10 {
                c.output(&record(t, i), Wakeup::NoWakeup).unwrap();
            }
        })
        .join()
        .unwrap();
        wait_exited(&|| channel.stats(), t + 1);
    }
    let _p = channel.producer().unwrap();
    let s = channel.stats();
    assert_eq!((s.producers, s.exited, s.written, s.freed_unread), (4, 3, 30, 20), "{s:?}");
    assert_eq!(channel.producer_stats().len(), 2, "the newest exited ring and the live one");
    // The kept one is still read.
    let mut n = 0;
    channel
        .reader()
        .unwrap()
        .drain(|r| {
            assert_eq!(parse(&r).0, 2);
            n += 1;
            Ok::<_, Infallible>(())
        })
        .unwrap();
    assert_eq!(n, 10);
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
