//! Channels: per-producer rings merged by timestamp. Under load: `channel_stress.rs`;
//! in shared memory, between processes: `channel_shm.rs`.
#![cfg(not(loom))]

mod common;

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::{Duration, Instant};

use common::channel::{parse, record};
use ringtrace::channel::ChannelRecord;
use ringtrace::clock::{BestClock, Monotonic, NoClock, Tsc};
use ringtrace::config::{Discard, Overwrite};
use ringtrace::{Channel, ReserveError, Wakeup};

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
    assert!(matches!(channel.reader(), Err(ringtrace::Error::ReaderAttached { .. })));
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

/// A producer with more records than a pass takes from a ring: the pass delivers no
/// other producer's record newer than the last it took from that ring, so the rest of
/// the busy ring, read on later passes, is not late.
#[test]
fn a_busy_producers_records_past_a_pass_are_not_overtaken() {
    let channel =
        Channel::<Discard, Monotonic>::builder(1 << 20).slack(Duration::from_millis(1)).build(Monotonic).unwrap();
    let mut busy = channel.producer().unwrap();
    let mut other = channel.producer().unwrap();
    let mut reader = channel.reader().unwrap();
    // More than a pass takes from one ring (4096), then one newer record elsewhere.
    for i in 0..10_000u32 {
        busy.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
    }
    other.output(b"last", Wakeup::Default).unwrap();
    // Older than the slack: only the busy ring's unread records can hold it back.
    std::thread::sleep(Duration::from_millis(5));
    let mut order = Vec::new();
    let start = Instant::now();
    while order.len() < 10_001 && start.elapsed() < Duration::from_secs(10) {
        reader
            .consume(|r: ChannelRecord<'_>| {
                order.push((r.producer, r.timestamp));
                Ok::<_, Infallible>(())
            })
            .unwrap();
    }
    assert_eq!(order.len(), 10_001);
    assert!(order.windows(2).all(|w| w[0].1 <= w[1].1), "in time order");
    assert_eq!(order.last().unwrap().0, other.id(), "the newer record comes last");
    assert_eq!(reader.late(), 0);
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
        Err(e) => ringtrace_fixtures::skip(ringtrace_fixtures::Feature::Tsc, format!("the TSC part: {e}")),
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
