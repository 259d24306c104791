//! A channel file's slots read one by one (`Channel::slot_ring`): a slot's consumer
//! reads, puts back and hands back that producer's records as a ring file's does; its
//! role excludes the live reader's, both ways, and a killed holder's is taken over;
//! `Channel::split_stamp` takes records apart as the live reader does.
//!
//! Children are this test binary run again with `RINGTRACE_CHILD` set (as in
//! `tests/channel_shm.rs`).
#![cfg(not(loom))]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::channel::{checksum, record};
use common::{spawn_child as spawn, Kid};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use ringtrace::clock::{monotonic_ns, Monotonic, NoClock, Tsc};
use ringtrace::config::Discard;
use ringtrace::inspect::channel::ChannelFile;
use ringtrace::{Channel, Error, Wakeup};

fn temp_path(name: &str) -> PathBuf {
    common::temp_file(name, "chan")
}

/// The child side: not a test (see `common::child_role`).
#[test]
#[ignore = "a child role: run by this binary's multi-process tests (common::spawn_child)"]
fn child() {
    let (role, args) = common::child_role();
    match role.as_str() {
        // Takes slot 0's consumer, reads everything without handing it back, and
        // waits to be killed.
        "hold-slot" => {
            let c = Channel::<Discard, Monotonic>::open(&args[0]).unwrap();
            let ring = c.slot_ring(0).unwrap();
            let mut consumer = ring.consumer().unwrap();
            let n = consumer.iter().count();
            println!("READ {n}");
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        other => panic!("unknown role {other}"),
    }
}

/// `(tag, seq)` of a record's payload, its checksum checked.
fn parse(payload: &[u8]) -> (u64, u64) {
    assert_eq!(payload.len(), 24, "record of {} bytes", payload.len());
    let word = |i: usize| u64::from_le_bytes(payload[i * 8..i * 8 + 8].try_into().unwrap());
    assert_eq!(word(2), checksum(word(0), word(1)), "torn record");
    (word(0), word(1))
}

#[test]
fn a_slot_is_read_put_back_read_again_and_handed_back_alone() {
    let path = temp_path("slot-read");
    let channel = Channel::<Discard, Monotonic>::builder(1 << 14).max_producers(3).create(&path, Monotonic).unwrap();
    assert_eq!(channel.slots(), 3);
    let before = monotonic_ns();
    let mut p0 = channel.producer().unwrap();
    let mut p1 = channel.producer().unwrap();
    assert_eq!((p0.id(), p1.id()), (0, 1), "one process's producers take slots in order");
    for i in 0..50 {
        p0.output(&record(0, i), Wakeup::Default).unwrap();
        p1.output(&record(1, i), Wakeup::Default).unwrap();
    }
    let after = monotonic_ns();

    // Another handle, as another process would attach.
    let theirs = Channel::<Discard, Monotonic>::open(&path).unwrap();
    assert_eq!(theirs.slots(), 3);
    let ring = theirs.slot_ring(0).unwrap();
    let mut c = ring.consumer().unwrap();
    let read = |c: &mut ringtrace::Consumer<ringtrace::config::Spsc>| -> Vec<(u64, (u64, u64))> {
        c.iter()
            .map(|rec| {
                let (ns, payload) = theirs.split_stamp(rec);
                (ns.expect("stamped"), parse(payload))
            })
            .collect()
    };
    let first = read(&mut c);
    assert_eq!(first.iter().map(|r| r.1).collect::<Vec<_>>(), (0..50).map(|i| (0, i)).collect::<Vec<_>>());
    assert!(first.windows(2).all(|w| w[0].0 <= w[1].0), "stamps in order");
    assert!(first.iter().all(|r| (before..=after).contains(&r.0)), "stamps of the writing time");
    c.unread();
    assert_eq!(c.available(), ring.stats().producer_pos, "put back: nothing handed back");
    assert_eq!(read(&mut c), first, "read again, the same");
    c.release();
    assert_eq!(ring.stats().consumer_pos, ring.stats().producer_pos, "handed back");
    assert!(read(&mut c).is_empty());
    c.unread(); // after a release: nothing to put back
    assert!(read(&mut c).is_empty());

    // Slot 1 is read apart, untouched by slot 0's reading.
    let mut c1 = theirs.slot_ring(1).unwrap().consumer().unwrap();
    let got: Vec<_> = read(&mut c1).into_iter().map(|r| r.1).collect();
    assert_eq!(got, (0..50).map(|i| (1, i)).collect::<Vec<_>>());

    // Per slot disconnection: a slot whose producer left; one still held; one never taken.
    let mut c2 = theirs.slot_ring(2).unwrap().consumer().unwrap();
    drop(p0);
    assert!(c.is_disconnected());
    assert!(!c1.is_disconnected());
    assert!(!c2.is_disconnected(), "a slot no producer took is never disconnected");
    assert!(!c2.ready() && c2.iter().next().is_none());
    // A new producer takes the freed slot and writes after what it held.
    let mut p = channel.producer().unwrap();
    assert_eq!(p.id(), 0, "the emptiest free slot, the lowest among equals");
    p.output(&record(2, 0), Wakeup::Default).unwrap();
    assert!(!c.is_disconnected());
    assert_eq!(read(&mut c).into_iter().map(|r| r.1).collect::<Vec<_>>(), [(2, 0)]);
    drop((p, p1));

    // Errors: past the slots, and a private channel.
    assert!(matches!(theirs.slot_ring(3), Err(Error::InvalidRing { .. })));
    let private = Channel::<Discard, Monotonic>::builder(4096).build(Monotonic).unwrap();
    assert_eq!(private.slots(), 0);
    assert!(matches!(private.slot_ring(0), Err(Error::InvalidRing { .. })));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_slot_consumer_and_the_live_reader_exclude_each_other() {
    let path = temp_path("slot-excl");
    let channel = Channel::<Discard, Monotonic>::builder(4096).max_producers(4).create(&path, Monotonic).unwrap();
    let other = Channel::<Discard, Monotonic>::open(&path).unwrap();
    let me = std::process::id();
    for slot in 0..4 {
        let c = channel.slot_ring(slot).unwrap().consumer().unwrap();
        for handle in [&channel, &other] {
            match handle.reader() {
                Err(Error::ReaderAttached { pid }) => assert_eq!(pid, me),
                other => panic!("slot {slot}'s consumer is held: expected ReaderAttached, got {other:?}"),
            }
        }
        drop(c);
    }
    // The failed attempts left nothing held.
    let reader = other.reader().unwrap();
    for slot in 0..4 {
        for handle in [&channel, &other] {
            let ring = handle.slot_ring(slot).unwrap();
            assert!(matches!(ring.consumer(), Err(Error::ConsumerAttached { pid }) if pid == me), "slot {slot}");
        }
    }
    assert!(matches!(channel.reader(), Err(Error::ReaderAttached { .. })));
    drop(reader);
    let held: Vec<_> = (0..4).map(|s| channel.slot_ring(s).unwrap().consumer().unwrap()).collect();
    drop(held);
    channel.reader().unwrap();
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_killed_slot_consumers_role_is_taken_over_and_its_unreleased_records_read_again() {
    let path = temp_path("slot-kill");
    let channel = Channel::<Discard, Monotonic>::builder(1 << 14).max_producers(2).create(&path, Monotonic).unwrap();
    let mut p = channel.producer().unwrap();
    for i in 0..20 {
        p.output(&record(5, i), Wakeup::Default).unwrap();
    }
    let mut kid = Kid(spawn("hold-slot", &[path.to_str().unwrap()]));
    kid.wait_for("READ 20");
    let pid = kid.0.id();
    let ring = channel.slot_ring(0).unwrap();
    assert!(matches!(ring.consumer(), Err(Error::ConsumerAttached { pid: p }) if p == pid));
    assert!(matches!(channel.reader(), Err(Error::ReaderAttached { pid: p }) if p == pid));
    kid.0.kill().unwrap(); // SIGKILL
    kid.0.wait().unwrap();
    let mut c = ring.consumer().expect("the killed process's role is taken over");
    let got: Vec<_> = c.iter().map(|r| parse(channel.split_stamp(r).1)).collect();
    assert_eq!(got, (0..20).map(|i| (5, i)).collect::<Vec<_>>(), "read, never handed back: read again");
    c.release();
    drop(c);
    // The live reader takes every slot, the dead holder's included.
    let mut reader = channel.reader().unwrap();
    p.output(&record(5, 20), Wakeup::Default).unwrap();
    let mut after = Vec::new();
    std::thread::sleep(Duration::from_millis(30)); // past the slack
    reader
        .drain(|r| {
            after.push(parse(r.data));
            Ok::<_, std::convert::Infallible>(())
        })
        .unwrap();
    assert_eq!(after, [(5, 20)]);
    std::fs::remove_file(&path).unwrap();
}

/// `split_stamp` of drawn stamps and lengths: the stamp converted as the channel's clock
/// converts (for TSC, as the file's header does for tools), and the payload after it;
/// records shorter than a stamp, and unstamped channels, whole and without a time. And
/// records of drawn lengths written by a producer come back through a slot with their
/// stamp of the writing time.
#[test]
fn split_stamp_takes_drawn_records_apart() {
    let mono_path = temp_path("split-mono");
    let mono = Channel::<Discard, Monotonic>::builder(1 << 16).max_producers(1).create(&mono_path, Monotonic).unwrap();
    let none = Channel::<Discard, NoClock>::builder(4096).build(NoClock).unwrap();
    let tsc_path = temp_path("split-tsc");
    let tsc = Tsc::shared().ok().map(|clock| {
        let c = Channel::<Discard, Tsc>::builder(4096).max_producers(1).create(&tsc_path, clock).unwrap();
        (c, *ChannelFile::open(&tsc_path).unwrap().header())
    });
    let ring = mono.slot_ring(0).unwrap();
    // The runner's closure is `Fn`.
    let consumer = std::cell::RefCell::new(ring.consumer().unwrap());
    let producer = std::cell::RefCell::new(mono.producer().unwrap());

    let lens = proptest::collection::vec(0usize..600, 1..24);
    let strategy = (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..64), lens);
    let mut runner = TestRunner::new(Config { cases: 256, failure_persistence: None, ..Config::default() });
    runner
        .run(&strategy, |(stamp, payload, lens)| {
            let mut rec = stamp.to_ne_bytes().to_vec();
            rec.extend_from_slice(&payload);
            prop_assert_eq!(mono.split_stamp(&rec), (Some(stamp), &payload[..]));
            prop_assert_eq!(none.split_stamp(&rec), (None, &rec[..]));
            if let Some((tsc, header)) = &tsc {
                prop_assert_eq!(tsc.split_stamp(&rec), (Some(header.to_ns(stamp)), &payload[..]));
            }
            let short = &rec[..payload.len().min(7)];
            prop_assert_eq!(mono.split_stamp(short), (None, short));

            // Through a producer and the slot's consumer.
            let (mut producer, mut consumer) = (producer.borrow_mut(), consumer.borrow_mut());
            let before = monotonic_ns();
            for (i, &len) in lens.iter().enumerate() {
                let body: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8).collect();
                producer.output(&body, Wakeup::NoWakeup).unwrap();
            }
            let after = monotonic_ns();
            let mut last = before;
            let mut n = 0;
            for (i, rec) in consumer.iter().enumerate() {
                let (ns, body) = mono.split_stamp(rec);
                let ns = ns.unwrap();
                prop_assert!(ns >= last && ns <= after, "stamp {} outside [{}, {}]", ns, last, after);
                last = ns;
                prop_assert_eq!(body.len(), lens[i]);
                prop_assert!(body.iter().enumerate().all(|(j, &b)| b == (i * 31 + j) as u8));
                n += 1;
            }
            consumer.release();
            prop_assert_eq!(n, lens.len());
            Ok(())
        })
        .unwrap();
    drop((consumer, producer));
    std::fs::remove_file(&mono_path).unwrap();
    if tsc.is_some() {
        std::fs::remove_file(&tsc_path).unwrap();
    }
}
