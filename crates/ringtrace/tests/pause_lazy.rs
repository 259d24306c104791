//! A paused flight recorder's records are found when first read, not by the pause: the
//! guard's view, its snapshots (taken paused, or after resuming with `into_snapshot`)
//! and a snapshot of the idle ring agree record for record; a record still being
//! written anywhere in a large ring when the pause begins is waited for.
#![cfg(not(loom))]

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::exact;
use ringtrace::{FlightRecorder, ReserveError, Wakeup};

/// Writes records of every length from 0 to 40 bytes from two producers, discarding
/// every seventh, for several laps of a 64 KiB ring.
fn busy_ring() -> FlightRecorder {
    let ring = exact(64 * 1024);
    let mut a = ring.producer().unwrap();
    let mut b = ring.producer().unwrap();
    for i in 0..20_000u32 {
        let p = if i % 3 == 0 { &mut b } else { &mut a };
        let len = (i % 41) as usize;
        let mut rec = p.reserve(len).unwrap();
        let bytes: Vec<u8> = (0..len).map(|k| (i as usize + k) as u8).collect();
        rec.copy_from_slice(&bytes);
        if i % 7 == 0 {
            rec.discard();
        } else {
            rec.commit();
        }
    }
    ring
}

#[test]
fn the_paused_view_found_on_first_read_is_the_idle_rings_records() {
    let ring = busy_ring();
    let idle = ring.snapshot().unwrap();
    let want: Vec<(u64, Vec<u8>)> = idle.entries().map(|(pos, r)| (pos, r.to_vec())).collect();
    assert!(want.len() > 1000);

    let paused = ring.pause().unwrap();
    assert_eq!((paused.oldest_position(), paused.end_position()), (idle.oldest_position(), idle.end_position()));
    // Read newest first before anything else indexed the span.
    let newest_first: Vec<Vec<u8>> = paused.iter().rev().map(<[u8]>::to_vec).collect();
    assert!(newest_first.iter().rev().eq(want.iter().map(|(_, r)| r)));
    assert_eq!(paused.len(), want.len());
    assert!(!paused.is_empty());
    // The snapshot taken while paused (from the guard's index) holds the same.
    let snap = paused.snapshot();
    assert!(snap.entries().map(|(pos, r)| (pos, r.to_vec())).eq(want.iter().cloned()));
    paused.resume();

    // A fresh guard, not indexed: its copy is indexed after it resumes.
    let paused = ring.pause().unwrap();
    let resumed = paused.into_snapshot();
    assert!(!ring.is_paused());
    assert!(resumed.entries().map(|(pos, r)| (pos, r.to_vec())).eq(want.iter().cloned()));
    assert_eq!(resumed.overwritten_before(), snap.overwritten_before());
    assert_eq!(resumed.end_position(), snap.end_position());
    assert_eq!(resumed.missed(), 0, "the previous snapshot held everything before it");
}

#[test]
fn a_guard_indexed_before_into_snapshot_gives_the_same_copy() {
    let ring = busy_ring();
    let paused = ring.pause().unwrap();
    let n = paused.len();
    let in_place: Vec<Vec<u8>> = paused.iter().map(<[u8]>::to_vec).collect();
    let snap = paused.into_snapshot();
    assert_eq!(snap.len(), n);
    assert!(snap.iter().eq(in_place.iter().map(Vec::as_slice)));
}

#[test]
fn into_snapshot_lets_producers_go_on() {
    let ring = exact(4096);
    let mut p = ring.producer().unwrap();
    p.output(b"one", Wakeup::Default).unwrap();
    let paused = ring.pause().unwrap();
    assert!(matches!(p.output(b"lost", Wakeup::Default), Err(ReserveError::Paused { .. })));
    let snap = paused.into_snapshot();
    p.output(b"two", Wakeup::Default).unwrap();
    assert_eq!(snap.iter().collect::<Vec<_>>(), [&b"one"[..]]);
    assert_eq!(ring.snapshot().unwrap().iter().collect::<Vec<_>>(), [&b"one"[..], &b"two"[..]]);
    assert_eq!(ring.stats().refused_paused, 1);
}

/// A record reserved near the oldest end of a 1 MiB ring, with half a megabyte of
/// records written after it, is still being written when the pause begins: the pause
/// (which checks most of the ring before it refuses producers) waits for it, and the
/// guard holds it, finished.
#[test]
fn a_record_still_being_written_far_from_the_newest_end_is_waited_for() {
    let ring = FlightRecorder::new(1 << 20).unwrap();
    let mut a = ring.producer().unwrap();
    let mut b = ring.producer().unwrap();
    b.output(b"first", Wakeup::Default).unwrap();
    let (reserved, go) = (mpsc::channel(), mpsc::channel::<()>());
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut rec = a.reserve(6).unwrap();
            reserved.0.send(rec.position()).unwrap();
            go.1.recv().unwrap();
            std::thread::sleep(Duration::from_millis(50));
            rec.copy_from_slice(b"middle");
            rec.commit();
        });
        let held_at = reserved.1.recv().unwrap();
        for i in 0..8000u32 {
            b.output(&[i as u8; 56], Wakeup::Default).unwrap();
        }
        go.0.send(()).unwrap();
        let paused = ring.pause().unwrap();
        let records: Vec<(u64, Vec<u8>)> = paused.snapshot().entries().map(|(p, r)| (p, r.to_vec())).collect();
        assert_eq!(records.len(), 8002);
        assert_eq!(records[0].1, b"first");
        assert_eq!(records[1], (held_at, b"middle".to_vec()));
        assert!(records[2..].iter().enumerate().all(|(i, (_, r))| r == &[i as u8; 56]));
        assert_eq!(paused.iter().nth(1), Some(&b"middle"[..]));
    });
}
