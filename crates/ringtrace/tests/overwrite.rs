//! Overwrite (flight-recorder) mode through the public API: the kernel selftest's
//! scenario, pausing, the copying consumer, wakeups and the counters. Snapshots and
//! snapshot files: `overwrite_snapshot.rs`; under load: `overwrite_stress.rs`.
#![cfg(not(loom))]

mod common;

use std::convert::Infallible;
use std::os::fd::AsFd;

use common::exact;
use ringtrace::config::Spsc;
use ringtrace::{Error, FlightRecorder, ReserveError, RingBuf, Snapshot, Wakeup};

/// The kernel's selftest (`ringbuf_overwrite_mode_subtest` in
/// `tools/testing/selftests/bpf/prog_tests/ringbuf.c`), step by step, with its exact
/// expected positions: in a 0x1000 ring, records of 0x800 and 0x400 bytes; one of 0x3e8
/// must fail because it would overwrite the first, still being written; one of 0x3e0
/// fits; after committing, 0x3e8 again fits by overwriting exactly the first record.
#[test]
fn kernel_selftest_scenario_positions() {
    const HDR: u64 = 8;
    let (size, len1, len2) = (0x1000u64, 0x800usize, 0x400usize);
    let len3 = size as usize - len1 - len2 - 3 * HDR as usize; // 0x3e8
    let len4 = len3 - 8; // 0x3e0
    let len5 = len3;
    assert_eq!((len3, len4), (0x3e8, 0x3e0));
    let ring = exact(size);
    let mut p = [(); 5].map(|_| ring.producer().unwrap());
    let [p1, p2, p3, p4, p5] = &mut p;

    let rec1 = p1.reserve(len1).unwrap();
    let rec2 = p2.reserve(len2).unwrap();
    assert!(matches!(p3.reserve(len3), Err(ReserveError::Pending { len }) if len == len3), "reserve 3 must fail");
    let rec4 = p4.reserve(len4).unwrap();
    rec1.commit();
    rec2.commit();
    rec4.commit();
    let mut rec5 = p5.reserve(len5).unwrap();
    rec5.write(0, &vec![0xdd; len5]).unwrap();
    rec5.commit();

    let s = ring.stats();
    assert_eq!(s.capacity, size);
    assert_eq!(s.consumer_pos, 0);
    assert_eq!(s.producer_pos, (len1 + len2 + len4 + len5) as u64 + 4 * HDR);
    assert_eq!(s.overwrite_pos, len1 as u64 + HDR);
    assert_eq!(s.available, (len2 + len4 + len5) as u64 + 3 * HDR);
    assert_eq!((s.lost, s.overwritten, s.committed), (1, 1, 4));

    let snap = ring.snapshot().unwrap();
    let lens: Vec<usize> = snap.iter().map(|r| r.len()).collect();
    assert_eq!(lens, [len2, len4, len5]);
    assert!(snap.iter().next_back().unwrap().iter().all(|&b| b == 0xdd));
    assert_eq!((snap.oldest_position(), snap.overwritten_before(), snap.missed()), (0x808, 1, 1));
}

#[test]
fn keeps_the_newest_records_and_counts_the_rest() {
    let ring = exact(4096);
    let mut p = ring.producer().unwrap();
    for i in 0..10_000u64 {
        p.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
    }
    let snap = ring.snapshot().unwrap();
    let got: Vec<u64> = snap.iter().map(|r| u64::from_le_bytes(r.try_into().unwrap())).collect();
    // 16-byte records in 4096 bytes, with the word after the newest kept free.
    assert_eq!(got.len(), 255);
    assert_eq!(got, (10_000 - 255..10_000).collect::<Vec<_>>());
    let newest_first: Vec<u64> = snap.iter().rev().map(|r| u64::from_le_bytes(r.try_into().unwrap())).collect();
    assert_eq!(newest_first.first(), Some(&9_999));
    let s = ring.stats();
    assert_eq!((s.committed, s.lost, s.overwritten), (10_000, 0, 10_000 - 255));
    assert_eq!(snap.overwritten_before(), s.overwritten);
    // A second snapshot: nothing overwritten since the first.
    let again = ring.snapshot().unwrap();
    assert!(again.iter().eq(snap.iter()));
    assert_eq!(again.missed(), 0);
}

#[test]
fn retire_ahead_trades_history_for_fewer_retires() {
    let ring = FlightRecorder::builder(4096).retire_ahead(1024).build().unwrap();
    let mut p = ring.producer().unwrap();
    for i in 0..10_000u64 {
        p.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
    }
    let snap = ring.snapshot().unwrap();
    // At least the ring minus the look-ahead (and one record) is kept, newest last.
    assert!(snap.len() >= (4096 - 1024 - 16) / 16, "{}", snap.len());
    assert_eq!(snap.iter().next_back().unwrap(), 9_999u64.to_le_bytes());
    let err = FlightRecorder::builder(4096).retire_ahead(4096).build().unwrap_err();
    assert!(matches!(err, Error::InvalidRetireAhead { .. }), "{err}");
}

#[test]
fn records_of_every_length_wrap_and_survive() {
    let ring = FlightRecorder::builder(4096).retire_ahead(256).build().unwrap();
    let mut p = ring.producer().unwrap();
    let mut expect = std::collections::VecDeque::new();
    for i in 0..3000usize {
        let len = (i * 37) % 700;
        let data: Vec<u8> = (0..len).map(|k| (i + k) as u8).collect();
        // Written in two parts at odd offsets, to exercise partial words.
        let mut rec = p.reserve(len).unwrap();
        let cut = len / 3;
        rec.write(cut, &data[cut..]).unwrap();
        rec.write(0, &data[..cut]).unwrap();
        rec.commit();
        expect.push_back(data);
        let snap = ring.snapshot().unwrap();
        while expect.len() > snap.len() {
            expect.pop_front();
        }
        assert!(snap.iter().eq(expect.iter().map(|v| &v[..])), "after record {i}");
    }
    assert_eq!(ring.max_record_len(), 4096 - 16);
    assert!(matches!(p.reserve(4096 - 15), Err(ReserveError::TooLarge { max: 4080, .. })));
    let mut rec = p.reserve(4080).unwrap();
    assert!(rec.write(4000, &[0; 81]).is_err());
    assert!(rec.write(usize::MAX, &[0; 2]).is_err());
    rec.write(4000, &[7; 80]).unwrap();
    rec.commit();
    let snap = ring.snapshot().unwrap();
    assert_eq!(snap.len(), 1);
    assert_eq!(&snap.iter().next().unwrap()[4000..], &[7; 80][..]);
}

#[test]
fn pause_refuses_reserves_and_reads_in_place_both_ways() {
    let ring = exact(4096);
    let mut p = ring.producer().unwrap();
    for i in 0..1000u32 {
        p.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
    }
    let paused = ring.pause().unwrap();
    assert!(ring.is_paused());
    assert!(matches!(ring.pause(), Err(Error::AlreadyPaused)));
    for _ in 0..5 {
        assert!(matches!(p.output(b"x", Wakeup::Default), Err(ReserveError::Paused { .. })));
    }
    assert!(matches!(p.reserve(8), Err(ReserveError::Paused { .. })));
    let newest_first: Vec<u32> = paused.iter().rev().map(|r| u32::from_le_bytes(r.try_into().unwrap())).collect();
    assert_eq!(newest_first.len(), paused.len());
    assert!(newest_first.windows(2).all(|w| w[0] == w[1] + 1));
    assert_eq!(newest_first[0], 999);
    // The in-place view and a copy agree; the copy outlives the pause.
    let copy = paused.snapshot();
    assert!(copy.iter().eq(paused.iter()));
    assert_eq!(ring.snapshot().unwrap().len(), paused.len());
    paused.resume();
    assert!(!ring.is_paused());
    p.output(b"after", Wakeup::Default).unwrap();
    let s = ring.stats();
    assert_eq!((s.refused_paused, s.lost), (6, 6));
    assert_eq!(copy.iter().next_back().unwrap(), 999u32.to_le_bytes());
}

#[test]
fn pause_waits_for_a_record_being_written() {
    let ring = exact(4096);
    let mut p = ring.producer().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let r2 = ring.clone();
    let t = std::thread::spawn(move || {
        let mut rec = p.reserve(8).unwrap();
        tx.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        rec.write(0, b"finished").unwrap();
        rec.commit();
        drop(r2);
    });
    rx.recv().unwrap();
    let paused = ring.pause().unwrap(); // waits for the commit
    assert_eq!(paused.iter().collect::<Vec<_>>(), [&b"finished"[..]]);
    drop(paused);
    t.join().unwrap();
}

/// The pause's wait is bounded by time, not by a count of yields: a record held longer
/// than any count of yields takes on an idle machine is waited for, and a record never
/// finished makes the pause give up once its timeout has passed, not before.
#[test]
fn pause_gives_up_at_its_timeout_and_not_before() {
    use std::time::{Duration, Instant};
    let ring = exact(4096);
    let mut p = ring.producer().unwrap();
    p.output(b"old", Wakeup::Default).unwrap();
    let stuck = p.reserve(8).unwrap();
    let limit = Duration::from_millis(300);
    let t = Instant::now();
    let err = ring.pause_timeout(limit).unwrap_err();
    let waited = t.elapsed();
    assert!(waited >= limit, "gave up after {waited:?}, before its {limit:?} timeout");
    // The error says how long the pause waited, as measured: not the limit asked for.
    let Error::PauseBusy { waited: reported } = err else { panic!("{err:?}") };
    assert!(reported > limit && reported <= waited, "reported {reported:?}; limit {limit:?}, measured {waited:?}");
    assert!(err.to_string().contains(&format!("{reported:?}")), "{err}");
    // A zero timeout still took time to give up, and says so.
    let Err(Error::PauseBusy { waited: zero }) = ring.pause_timeout(Duration::ZERO) else { panic!("paused") };
    assert!(zero > Duration::ZERO, "a pause with a zero timeout reported {zero:?}");
    // It resumed the ring: producers write again, and a second pause waits as long.
    assert!(!ring.is_paused());
    let mut q = ring.producer().unwrap();
    q.output(b"new", Wakeup::Default).unwrap();
    stuck.commit();
    let paused = ring.pause_timeout(Duration::ZERO).unwrap();
    assert_eq!(paused.len(), 3);
}

#[test]
fn pause_waits_for_a_record_held_longer_than_any_yield_count() {
    let ring = exact(4096);
    let mut p = ring.producer().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let mut rec = p.reserve(8).unwrap();
        tx.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(400));
        rec.write(0, b"finished").unwrap();
        rec.commit();
    });
    rx.recv().unwrap();
    let paused = ring.pause().unwrap(); // the default waits up to 1 s
    assert_eq!(paused.iter().collect::<Vec<_>>(), [&b"finished"[..]]);
    drop(paused);
    t.join().unwrap();
}

#[test]
fn consumer_follows_and_counts_what_it_missed() {
    let ring = exact(4096);
    let mut c = ring.consumer().unwrap();
    assert!(matches!(ring.consumer(), Err(Error::ConsumerAttached { .. })));
    let mut p = ring.producer().unwrap();
    let mut next = 0u64;
    let mut got = Vec::new();
    for round in 0..200u64 {
        for _ in 0..(round * 7 % 400) {
            p.output(&next.to_le_bytes(), Wakeup::Default).unwrap();
            next += 1;
        }
        c.consume(|r| {
            got.push(u64::from_le_bytes(r.try_into().unwrap()));
            Ok::<(), Infallible>(())
        })
        .unwrap();
    }
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order");
    assert_eq!(got.len() as u64 + c.overwritten_unread(), next);
    assert!(c.overwritten_unread() > 0);
    let s = ring.stats();
    assert_eq!(s.consumed + s.overwritten_unread, s.committed);
    // A callback error stops at that record, which counts as consumed.
    p.output(b"a", Wakeup::Default).unwrap();
    p.output(b"b", Wakeup::Default).unwrap();
    let r = c.consume(|_| Err("stop"));
    assert!(matches!(r, Err(ringtrace::ConsumeError::Callback("stop"))));
    let mut rest = Vec::new();
    c.consume(|r| {
        rest.push(r.to_vec());
        Ok::<(), Infallible>(())
    })
    .unwrap();
    assert_eq!(rest, [b"b".to_vec()]);
}

#[test]
fn forced_wakeups_reach_a_sleeping_consumer() {
    let ring = FlightRecorder::new(1 << 16).unwrap();
    let mut c = ring.consumer().unwrap();
    let mut p = ring.producer().unwrap();
    // Both written once the consumer sleeps; the first leaves its doorbell quiet.
    let (consumer, doorbell) = (common::asleep::thread_id(), c.as_fd().try_clone_to_owned().unwrap());
    let t = std::thread::spawn(move || {
        common::asleep::wait_until_asleep(consumer, "the consumer");
        p.output(b"quiet", Wakeup::Default).unwrap(); // policy Never: no wakeup
        assert!(!common::asleep::rung(&doorbell), "a Default commit rang the doorbell under the Never policy");
        p.output(b"loud", Wakeup::Force).unwrap();
        p // kept until the consumer's check: a producer's leaving wakes it too
    });
    // A poll that runs to its timeout was not woken, whatever it delivers after it.
    let timeout = std::time::Duration::from_secs(20);
    let mut got = Vec::new();
    while got.len() < 2 {
        let t0 = std::time::Instant::now();
        c.poll(Some(timeout), |r| {
            got.push(r.to_vec());
            Ok::<(), Infallible>(())
        })
        .unwrap();
        assert!(t0.elapsed() < timeout / 2, "not woken by the forced wakeup: a poll took {:?}", t0.elapsed());
    }
    assert_eq!(got, [b"quiet".to_vec(), b"loud".to_vec()]);
    t.join().unwrap();
}

#[test]
fn single_producer_overwrite_rings_work_too() {
    let ring = RingBuf::<Spsc, ringtrace::config::Overwrite>::builder(4096).retire_ahead(0).build().unwrap();
    let mut p = ring.producer().unwrap();
    assert!(ring.producer().is_err());
    for i in 0..5000u16 {
        p.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
    }
    let snap = ring.snapshot().unwrap();
    assert_eq!(snap.len(), 255);
    assert_eq!(snap.iter().next_back().unwrap(), 4999u16.to_le_bytes());
}

/// The consumer copies a batch at a time: records that cross a batch's end, and one
/// longer than a batch, are read whole (review finding: they were reported corrupt).
#[test]
fn consumer_reads_records_across_and_longer_than_its_batch() {
    let ring = FlightRecorder::builder(1 << 20).consumer_batch(4096).build().unwrap();
    let mut c = ring.consumer().unwrap();
    let mut p = ring.producer().unwrap();
    let mut sent = Vec::new();
    for i in 0..1000usize {
        let len = if i == 500 { 70_000 } else { 100 + i % 13 };
        let data: Vec<u8> = (0..len).map(|k| (i * 7 + k) as u8).collect();
        p.output(&data, Wakeup::Default).unwrap();
        sent.push(data);
    }
    let mut got = Vec::new();
    let n = c
        .consume(|r| {
            got.push(r.to_vec());
            Ok::<(), Infallible>(())
        })
        .unwrap();
    assert_eq!(n, 1000);
    assert!(got == sent);
}

/// `WakeupPolicy::HalfRing`: a consumer asleep at position 0 is woken by the records
/// that cover its position modulo half the ring (the first, and the one half a ring on);
/// under the default `Never` it would sleep to its timeout.
#[test]
fn half_ring_policy_wakes_a_following_consumer() {
    let ring =
        FlightRecorder::builder(1 << 16).wakeup_policy(ringtrace::config::WakeupPolicy::HalfRing).build().unwrap();
    let mut c = ring.consumer().unwrap();
    let mut p = ring.producer().unwrap();
    let consumer = common::asleep::thread_id();
    let t = std::thread::spawn(move || {
        common::asleep::wait_until_asleep(consumer, "the consumer at position 0");
        // 16-byte records: record 2048 starts at 32768, half the ring.
        for i in 0..2100u64 {
            p.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
        }
        p // kept until the consumer's check: a producer's leaving wakes it too
    });
    let start = std::time::Instant::now();
    assert!(c.wait(Some(std::time::Duration::from_secs(30))).unwrap());
    assert!(start.elapsed() < std::time::Duration::from_secs(20), "woken, not timed out");
    t.join().unwrap();
    let n = c.consume(|_| Ok::<(), Infallible>(())).unwrap();
    assert_eq!(n, 2100);
}

/// The counters' identities (docs/design/overview.md, "Counters: one name per meaning"), exactly, with
/// two producers overwriting, a consumer following and snapshots taken meanwhile.
#[test]
fn counters_add_up_with_a_consumer_and_snapshots_racing_producers() {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    const PER_PRODUCER: u64 = 200_000;
    let ring = FlightRecorder::builder(16 * 1024).build().unwrap();
    let done = AtomicBool::new(false);
    let (committed_by_producers, consumed, consumer_unread, held, missed, unfinished) = std::thread::scope(|s| {
        let producers: Vec<_> = (0..2u64)
            .map(|id| {
                let mut p = ring.producer().unwrap();
                s.spawn(move || {
                    let mut ok = 0u64;
                    for seq in 0..PER_PRODUCER {
                        ok += u64::from(p.output(&(id << 32 | seq).to_le_bytes(), Wakeup::NoWakeup).is_ok());
                    }
                    ok
                })
            })
            .collect();
        let consumer = s.spawn(|| {
            let mut c = ring.consumer().unwrap();
            let mut n = 0u64;
            let read = |c: &mut ringtrace::recorder::OverwriteConsumer| loop {
                match c.consume(|_| Ok::<(), Infallible>(())) {
                    Ok(k) => return k as u64,
                    Err(ringtrace::ConsumeError::Busy) => continue,
                    Err(e) => panic!("{e}"),
                }
            };
            while !done.load(Relaxed) {
                n += read(&mut c);
            }
            // Drained: nothing is being written any more.
            loop {
                let k = read(&mut c);
                if k == 0 {
                    break;
                }
                n += k;
            }
            (n, c.overwritten_unread())
        });
        let (mut held, mut missed, mut unfinished) = (HashSet::new(), 0u64, 0u64);
        let mut snap = Snapshot::new();
        while !producers.iter().all(|p| p.is_finished()) {
            if ring.snapshot_into(&mut snap).is_ok() {
                held.extend(snap.iter().map(|r| u64::from_le_bytes(r.try_into().unwrap())));
                missed += snap.missed();
                unfinished += snap.unfinished();
            }
        }
        let committed: u64 = producers.into_iter().map(|p| p.join().unwrap()).sum();
        done.store(true, Relaxed);
        let (consumed, unread) = consumer.join().unwrap();
        (committed, consumed, unread, held, missed, unfinished)
    });
    let s = ring.stats();
    assert_eq!(s.committed, committed_by_producers);
    assert_eq!(s.committed + s.lost, 2 * PER_PRODUCER, "every write committed or counted as lost");
    // committed = overwritten + held (nothing is being written now).
    let last = ring.snapshot().unwrap();
    assert_eq!(last.unfinished(), 0);
    assert_eq!(s.committed, s.overwritten + last.len() as u64, "{s:?}");
    assert_eq!(last.overwritten_before(), s.overwritten);
    // Drained: committed = consumed + overwritten_unread <= consumed + overwritten.
    assert_eq!(consumed, s.consumed);
    assert_eq!(consumer_unread, s.overwritten_unread);
    assert_eq!(s.consumed + s.overwritten_unread, s.committed, "{s:?}");
    assert!(s.overwritten_unread <= s.overwritten, "{s:?}");
    // Snapshots: held (once each) + missed = overwritten_before + len of the last, exact
    // but for records still being written when a snapshot was taken.
    let mut held = held;
    held.extend(last.iter().map(|r| u64::from_le_bytes(r.try_into().unwrap())));
    let total = held.len() as u64 + missed + last.missed();
    let want = last.overwritten_before() + last.len() as u64;
    assert!(
        total <= want && want - total <= unfinished,
        "held {} + missed {missed}: {total}, want {want} (unfinished {unfinished})",
        held.len()
    );
}
