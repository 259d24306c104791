//! Channels in shared memory: a channel file with producers in child processes and a
//! merged reader in the parent; slots taken over from killed processes; channel files
//! that are foreign, truncated or corrupt.
//!
//! Children are this test binary run again with `RINGTRACE_CHILD` set (as in
//! `tests/shm.rs`).
#![cfg(not(loom))]

mod common;

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ringtrace::channel::ChannelRecord;
use ringtrace::clock::{BestClock, Monotonic};
use ringtrace::config::{Discard, Overwrite};
use ringtrace::inspect::channel::ChannelFile;
use ringtrace::{Channel, Error, MpscRing, ReserveError, Wakeup};

const PER_CHILD: u64 = 100_000;

fn temp_path(name: &str) -> PathBuf {
    common::temp_file(name, "chan")
}

use common::channel::{parse, record};
use common::{result_of as finish, spawn_child as spawn, Kid};

/// The child side: not a test (see `common::child_role`).
#[test]
#[ignore = "a child role: run by this binary's multi-process tests (common::spawn_child)"]
fn child() {
    let (role, args) = common::child_role();
    let tag: u64 = args[1].parse().unwrap();
    let refused = match role.as_str() {
        "write-discard" => {
            let c = Channel::<Discard, BestClock>::open(&args[0]).unwrap();
            let mut p = c.producer().unwrap();
            let mut refused = 0;
            for i in 0..PER_CHILD {
                match p.output(&record(tag, i), Wakeup::NoWakeup) {
                    Ok(()) => {}
                    Err(ReserveError::Full { .. }) => {
                        refused += 1;
                        std::thread::yield_now();
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            refused
        }
        "write-overwrite" => {
            let c = Channel::<Overwrite, BestClock>::open(&args[0]).unwrap();
            let mut p = c.producer().unwrap();
            (0..PER_CHILD).filter(|&i| p.output(&record(tag, i), Wakeup::NoWakeup).is_err()).count() as u64
        }
        "write-forever" => {
            let c = Channel::<Discard, Monotonic>::open(&args[0]).unwrap();
            let mut p = c.producer().unwrap();
            p.output(&record(tag, 0), Wakeup::NoWakeup).unwrap();
            println!("READY");
            let mut i = 1;
            loop {
                let _ = p.output(&record(tag, i), Wakeup::NoWakeup);
                i += 1;
            }
        }
        other => panic!("unknown role {other}"),
    };
    println!("RESULT {refused}");
}

#[test]
fn producers_in_two_processes_are_read_merged_in_time_order_by_a_third() {
    let path = temp_path("discard");
    let channel =
        Channel::<Discard, BestClock>::builder(1 << 16).max_producers(4).create(&path, BestClock::new()).unwrap();
    let mut reader = channel.reader().unwrap();
    let p = path.to_str().unwrap();
    let kids = [spawn("write-discard", &[p, "1"]), spawn("write-discard", &[p, "2"])];
    let mut seen: HashMap<u64, Vec<u64>> = HashMap::new();
    let (mut last, mut inversions) = (0, 0);
    let mut take = |r: ChannelRecord<'_>| {
        inversions += u64::from(r.timestamp < last);
        last = last.max(r.timestamp);
        let (tag, seq) = parse(&r);
        seen.entry(tag).or_default().push(seq);
        Ok::<_, Infallible>(())
    };
    let kids: Vec<_> = kids.into_iter().collect();
    let mut waiting: Vec<_> = kids.into_iter().map(Some).collect();
    let mut refused = [0u64; 3];
    while waiting.iter().any(Option::is_some) {
        reader.consume(&mut take).unwrap();
        for (i, k) in waiting.iter_mut().enumerate() {
            if k.as_mut().is_some_and(|c| c.try_wait().unwrap().is_some()) {
                refused[i + 1] = finish(k.take().unwrap())[0];
            }
        }
    }
    reader.drain(&mut take).unwrap();
    drop(reader);
    let stats = channel.stats();
    assert!(inversions <= stats.late, "{inversions} out of order, {} counted late", stats.late);
    for tag in [1u64, 2] {
        let got = &seen[&tag];
        assert!(got.windows(2).all(|w| w[0] < w[1]), "producer {tag}: in order");
        assert_eq!(got.len() as u64 + refused[tag as usize], PER_CHILD, "producer {tag}: every record read or refused");
    }
    assert_eq!(stats.written, stats.read);
    assert_eq!(stats.lost, refused[1] + refused[2]);
    assert_eq!(stats.exited, 4, "no live producer holds a slot now");
    eprintln!("{stats:?}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn an_overwrite_channel_file_keeps_the_newest_records_of_every_process() {
    let path = temp_path("overwrite");
    let channel =
        Channel::<Overwrite, BestClock>::builder(1 << 14).max_producers(2).create(&path, BestClock::new()).unwrap();
    let p = path.to_str().unwrap();
    let kids = [spawn("write-overwrite", &[p, "1"]), spawn("write-overwrite", &[p, "2"])];
    let refused: Vec<u64> = kids.into_iter().map(|k| finish(k)[0]).collect();
    let snap = Channel::<Overwrite, BestClock>::open(&path).unwrap().snapshot().unwrap();
    // A child that finished before the other started gave its slot back, and the other
    // took it: each slot holds the newest records of the last process that wrote there.
    let mut last_ts = 0;
    let mut per_slot: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for r in snap.iter() {
        assert!(r.timestamp >= last_ts, "time order");
        last_ts = r.timestamp;
        per_slot.entry(r.producer).or_default().push(parse(&r));
    }
    assert!(!per_slot.is_empty());
    for (slot, recs) in &per_slot {
        let (tag, newest) = *recs.last().unwrap();
        assert_eq!(newest, PER_CHILD - 1, "slot {slot}: the newest record of producer {tag} is held");
        let mine: Vec<u64> = recs.iter().filter(|r| r.0 == tag).map(|r| r.1).collect();
        assert!(mine.windows(2).all(|w| w[1] == w[0] + 1), "slot {slot}: consecutive");
    }
    assert_eq!(refused, [0, 0]);
    let stats = channel.stats();
    assert_eq!(stats.written, 2 * PER_CHILD);
    assert_eq!(stats.written, snap.len() as u64 + stats.overwritten, "{stats:?}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_full_channel_file_refuses_a_producer_and_a_killed_producers_slot_is_taken_over() {
    let path = temp_path("slots");
    let channel = Channel::<Discard, Monotonic>::builder(4096).max_producers(1).create(&path, Monotonic).unwrap();
    let mut kid = Kid(spawn("write-forever", &[path.to_str().unwrap(), "9"]));
    // Wait for the child to hold the slot.
    kid.wait_for("READY");
    match channel.producer() {
        Err(e @ Error::ChannelFull { max: 1 }) => assert!(e.to_string().contains("1 producers")),
        other => panic!("expected ChannelFull, got {other:?}"),
    }
    kid.0.kill().unwrap();
    kid.0.wait().unwrap();
    // The dead process's slot is taken over; what it left is read, its unfinished
    // record (if any) stepped over.
    let mut p = channel.producer().unwrap();
    let mut reader = channel.reader().unwrap();
    let mut n = 0;
    reader
        .drain(|r| {
            let (tag, _) = parse(&r);
            assert_eq!(tag, 9);
            n += 1;
            Ok::<_, Infallible>(())
        })
        .unwrap();
    p.output(&record(10, 0), Wakeup::Default).unwrap();
    let mut after = Vec::new();
    std::thread::sleep(Duration::from_millis(30)); // past the slack: nothing else is coming
    reader
        .drain(|r| {
            after.push(parse(&r));
            Ok::<_, Infallible>(())
        })
        .unwrap();
    assert_eq!(after, [(10, 0)]);
    assert!(n > 0, "the killed producer's records are read");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn foreign_truncated_and_corrupt_channel_files_are_refused_with_a_reason() {
    // A ring file is not a channel file.
    let ring_path = temp_path("a-ring");
    MpscRing::builder(4096).create(&ring_path).unwrap();
    let e = Channel::<Discard, Monotonic>::open(&ring_path).unwrap_err();
    assert!(e.to_string().contains("magic"), "{e}");
    std::fs::remove_file(&ring_path).unwrap();

    // The wrong mode or clock.
    let path = temp_path("corrupt");
    Channel::<Discard, Monotonic>::builder(4096).max_producers(2).create(&path, Monotonic).unwrap();
    let e = Channel::<Overwrite, Monotonic>::open(&path).unwrap_err();
    assert!(e.to_string().contains("discard channel stamped by the mono clock"), "{e}");
    let e = Channel::<Discard, BestClock>::open(&path).unwrap_err();
    assert!(e.to_string().contains("mono"), "{e}");

    // Every byte of the header page flipped in turn, and the file cut short: each an
    // error or a channel that works, never a panic.
    let good = std::fs::read(&path).unwrap();
    let bad = temp_path("mutated");
    for at in (0..96).chain([4096, 4100, 4104, 4096 + 64]) {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bytes = good.clone();
            bytes[at] ^= flip;
            write_private(&bad, &bytes);
            if let Ok(c) = Channel::<Discard, Monotonic>::open(&bad) {
                let _ = c.output(b"x", Wakeup::Default);
                let _ = c.reader().map(|mut r| r.drain(|_| Ok::<_, Infallible>(())));
            }
            if let Ok(f) = ChannelFile::open(&bad) {
                for i in 0..f.header().slots.min(8) {
                    let _ = f.ring(i).map(|r| r.records().map(|rs| rs.len()));
                }
            }
        }
    }
    // Ring images shorter than a ring (the next slot's control block inside this slot's
    // data area): refused.
    let mut bytes = good.clone();
    let cap = u64::from_ne_bytes(bytes[24..32].try_into().unwrap());
    bytes[32..40].copy_from_slice(&(cap + 4096).to_ne_bytes());
    write_private(&bad, &bytes);
    let e = Channel::<Discard, Monotonic>::open(&bad).unwrap_err();
    assert!(e.to_string().contains("image length"), "{e}");
    write_private(&bad, &good[..good.len() - 4096]);
    let e = Channel::<Discard, Monotonic>::open(&bad).unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
    std::fs::remove_file(&bad).unwrap();
    std::fs::remove_file(&path).unwrap();
}

fn write_private(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).unwrap();
    std::io::Write::write_all(&mut f, bytes).unwrap();
}

#[test]
fn tools_convert_a_tsc_channels_stamps_with_the_files_calibration() {
    let Ok(tsc) = ringtrace::clock::Tsc::shared() else {
        return ringtrace_fixtures::skip(ringtrace_fixtures::Feature::Tsc, "no invariant TSC on this CPU");
    };
    let path = temp_path("tsc");
    let channel = Channel::<Discard, ringtrace::clock::Tsc>::builder(4096).max_producers(1).create(&path, tsc).unwrap();
    channel.output(b"stamped", Wakeup::Default).unwrap();
    // What a tool sees: the raw stamp, converted with the header's calibration ...
    let file = ChannelFile::open(&path).unwrap();
    let records = file.ring(0).unwrap().records().unwrap();
    let rec = records.iter().next().unwrap();
    let raw = u64::from_ne_bytes(rec.payload[..8].try_into().unwrap());
    let tool_ns = file.header().to_ns(raw);
    // ... is what the library's reader delivers.
    let mut lib_ns = 0;
    channel
        .reader()
        .unwrap()
        .drain(|r| {
            assert_eq!(r.data, b"stamped");
            lib_ns = r.timestamp;
            Ok::<_, Infallible>(())
        })
        .unwrap();
    assert_eq!(tool_ns, lib_ns);
    let now = ringtrace::clock::monotonic_ns();
    assert!(lib_ns <= now + 1_000_000 && lib_ns + 1_000_000_000 > now, "{lib_ns} vs now {now}");
    std::fs::remove_file(&path).unwrap();
}

/// A new producer takes an empty slot before one whose producer left unread records
/// (which would refuse it as `Full` at once), and those records stay readable.
#[test]
fn a_new_producer_takes_an_empty_slot_before_a_left_full_one() {
    let path = temp_path("empty-first");
    let channel = Channel::<Discard, Monotonic>::builder(4096).max_producers(3).create(&path, Monotonic).unwrap();
    let mut first = channel.producer().unwrap();
    let mut left = 0u64;
    while first.output(&record(1, left), Wakeup::NoWakeup).is_ok() {
        left += 1;
    }
    drop(first); // slot 0: full of unread records, no producer
    let mut second = channel.producer().unwrap();
    for i in 0..10 {
        second.output(&record(2, i), Wakeup::NoWakeup).expect("an empty slot, not the full one");
    }
    let stats = channel.producer_stats();
    assert_eq!(stats[0].written, left, "slot 0 keeps what its producer left");
    assert_eq!(stats.iter().map(|s| s.written).sum::<u64>(), left + 10);
    let mut reader = channel.reader().unwrap();
    let mut got = [0u64; 3];
    reader
        .drain(|r| {
            got[parse(&r).0 as usize] += 1;
            Ok::<_, Infallible>(())
        })
        .unwrap();
    assert_eq!(got, [0, left, 10], "every record read, the left ones too");
    // With every other slot taken, the left slot (now drained) is taken over.
    let _third = channel.producer().unwrap();
    let mut fourth = channel.producer().unwrap();
    fourth.output(&record(4, 0), Wakeup::NoWakeup).unwrap();
    std::fs::remove_file(&path).unwrap();
}
