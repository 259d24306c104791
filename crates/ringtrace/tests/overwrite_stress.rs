//! Overwrite mode under load: 4 producers write checksummed, sequence-numbered records
//! of random lengths into a small ring while one thread snapshots (and now and then
//! pauses and reads in place) and another consumes. Every record anyone sees is intact;
//! each producer's sequence only increases in every view; the counts add up exactly.
#![cfg(not(loom))]

mod common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Barrier;

use common::fnv1a;
use ringtrace::{ConsumeError, Error, FlightRecorder, ReserveError, Wakeup};

const PRODUCERS: usize = 4;
const PER_PRODUCER: u32 = 150_000;

/// `producer (4) | seq (4) | filler | FNV-1a of all before (4)`.
fn record(producer: u32, seq: u32, len: usize, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&producer.to_le_bytes());
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend((8..len - 4).map(|k| (seq as usize * 31 + k) as u8));
    let sum = fnv1a(buf);
    buf.extend_from_slice(&sum.to_le_bytes());
}

/// Checks a record; returns `(producer, seq)`.
fn check(rec: &[u8]) -> (usize, u32) {
    assert!(rec.len() >= 12, "short record {rec:?}");
    let (body, sum) = rec.split_at(rec.len() - 4);
    assert_eq!(fnv1a(body), u32::from_le_bytes(sum.try_into().unwrap()), "torn record {rec:?}");
    let p = u32::from_le_bytes(rec[0..4].try_into().unwrap()) as usize;
    assert!(p < PRODUCERS);
    (p, u32::from_le_bytes(rec[4..8].try_into().unwrap()))
}

/// Per-producer sequences only increase along `recs`.
fn increasing<'a>(recs: impl Iterator<Item = &'a [u8]>) -> usize {
    let mut last = [None::<u32>; PRODUCERS];
    let mut n = 0;
    for r in recs {
        let (p, s) = check(r);
        assert!(last[p].is_none_or(|l| l < s), "producer {p}: {s} after {:?}", last[p]);
        last[p] = Some(s);
        n += 1;
    }
    n
}

/// Ring shapes: small with a look-ahead; the kernel's exact retiring in a one-page ring;
/// a consumer that copies less than a record's worth at times (batches cut records); a
/// larger ring with the defaults.
#[test]
fn four_producers_a_snapshotter_and_a_consumer() {
    run(FlightRecorder::builder(16 * 1024).retire_ahead(512).build().unwrap());
    run(FlightRecorder::builder(4096).retire_ahead(0).build().unwrap());
    run(FlightRecorder::builder(16 * 1024).consumer_batch(128).build().unwrap());
    run(FlightRecorder::new(256 * 1024).unwrap());
}

fn run(ring: FlightRecorder) {
    let mut consumer = ring.consumer().unwrap();
    let done = AtomicBool::new(false);
    let start = Barrier::new(PRODUCERS + 2);
    let (totals, (snaps, pauses, busy), (consumed, c_busy)) = std::thread::scope(|s| {
        let producers: Vec<_> = (0..PRODUCERS as u32)
            .map(|id| {
                let mut p = ring.producer().unwrap();
                let start = &start;
                s.spawn(move || {
                    let (mut committed, mut lost) = (0u64, 0u64);
                    let mut rng = 0x2545_f491_4f6c_dd1du64 ^ (u64::from(id + 1) * 0x9e37_79b9);
                    let mut buf = Vec::new();
                    start.wait();
                    for seq in 0..PER_PRODUCER {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let len = 12 + (rng % 200) as usize;
                        record(id, seq, len, &mut buf);
                        let r = if rng & 0x100 == 0 {
                            p.output(&buf, Wakeup::Default)
                        } else {
                            // Reserve and write in two parts, the second first.
                            p.reserve(len).map(|mut rec| {
                                rec.write(7, &buf[7..]).unwrap();
                                rec.write(0, &buf[..7]).unwrap();
                                rec.commit();
                            })
                        };
                        match r {
                            Ok(()) => committed += 1,
                            Err(ReserveError::Pending { .. }) => lost += 1,
                            Err(ReserveError::Paused { .. }) => {
                                lost += 1;
                                std::thread::yield_now(); // don't spend the quota while paused
                            }
                            Err(e) => panic!("{e}"),
                        }
                        if seq % 1024 == 0 {
                            std::thread::yield_now(); // let the readers in on 2 cores
                        }
                    }
                    (committed, lost)
                })
            })
            .collect();
        let snapshotter = s.spawn(|| {
            let (mut snaps, mut pauses, mut busy) = (0u64, 0u64, 0u64);
            let mut snap = ringtrace::Snapshot::new();
            start.wait();
            let mut i = 0u64;
            while !done.load(Relaxed) {
                i += 1;
                if i % 8 == 0 {
                    match ring.pause() {
                        Ok(paused) => {
                            let n = increasing(paused.iter());
                            assert_eq!(n, paused.len());
                            // Newest to oldest, in place.
                            assert_eq!(paused.iter().rev().count(), n);
                            pauses += 1;
                        }
                        Err(Error::PauseBusy { .. }) => busy += 1,
                        Err(e) => panic!("{e}"),
                    }
                    continue;
                }
                match ring.snapshot_into(&mut snap) {
                    Ok(()) => {
                        increasing(snap.iter());
                        snaps += 1;
                    }
                    Err(ConsumeError::Busy) => busy += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            (snaps, pauses, busy)
        });
        let consumer = s.spawn(|| {
            let mut last = [None::<u32>; PRODUCERS];
            let (mut n, mut busy) = (0u64, 0u64);
            let mut read = |c: &mut ringtrace::recorder::OverwriteConsumer| match c.consume(|r| {
                let (p, s) = check(r);
                assert!(last[p].is_none_or(|l| l < s), "consumer: producer {p}: {s} after {:?}", last[p]);
                last[p] = Some(s);
                n += 1;
                Ok::<(), Infallible>(())
            }) {
                Ok(_) => {}
                Err(ConsumeError::Busy) => busy += 1,
                Err(e) => panic!("{e}"),
            };
            start.wait();
            while !done.load(Relaxed) {
                read(&mut consumer);
            }
            read(&mut consumer); // drain what is left after the producers stopped
            (n, busy, consumer)
        });
        let totals: Vec<(u64, u64)> = producers.into_iter().map(|h| h.join().unwrap()).collect();
        done.store(true, Relaxed);
        let (n, c_busy, c) = consumer.join().unwrap();
        assert_eq!(c.overwritten_unread() + n, totals.iter().map(|t| t.0).sum::<u64>(), "consumed + overwritten");
        (totals, snapshotter.join().unwrap(), (n, c_busy))
    });
    let committed: u64 = totals.iter().map(|t| t.0).sum();
    let lost: u64 = totals.iter().map(|t| t.1).sum();
    let stats = ring.stats();
    eprintln!(
        "ring {} KiB: committed {committed}, lost {lost} (paused {}), consumed {consumed} (busy {c_busy}), overwritten {} \
         (unread {}), snapshots {snaps}, pauses {pauses}, busy {busy}",
        ring.capacity() / 1024,
        stats.refused_paused,
        stats.overwritten,
        stats.overwritten_unread
    );
    assert_eq!(committed + lost, PRODUCERS as u64 * u64::from(PER_PRODUCER));
    assert_eq!((stats.committed, stats.lost), (committed, lost));
    assert_eq!(stats.consumed, consumed);
    assert_eq!(stats.consumed + stats.overwritten_unread, stats.committed, "committed = read + overwritten");
    assert!(stats.overwritten >= stats.overwritten_unread);
    assert!(consumed > 0 && snaps > 0, "the readers got to read");
}
