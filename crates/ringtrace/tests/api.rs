//! Behaviour of the public API: bad input, ordering, accounting, the stalled producer,
//! callbacks that fail, wakeups through the file descriptor.
#![cfg(not(loom))]

mod common;

use std::convert::Infallible;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringtrace::config::{Spsc, WakeupPolicy};
use ringtrace::{ConsumeError, Error, MpscRing, ReserveError, RingBuf, SpscRing, Wakeup};

fn drain<K: ringtrace::config::ProducerKind>(c: &mut ringtrace::Consumer<K>) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    c.consume(|d| {
        v.push(d.to_vec());
        Ok::<(), Infallible>(())
    })
    .unwrap();
    v
}

#[test]
fn bad_capacities_are_errors_that_name_the_limit() {
    for cap in [0, 1, 1000, 4095, 4097, 3 << 20, (1 << 32) + 4096, 1 << 33] {
        let err = MpscRing::new(cap).unwrap_err();
        assert!(matches!(err, Error::InvalidCapacity { capacity, .. } if capacity == cap), "{cap}: {err}");
        let msg = err.to_string();
        assert!(msg.contains("power of two") && msg.contains("4096") && msg.contains("4294967296"), "{msg}");
    }
    assert!(MpscRing::new(4096).is_ok());
    let err = MpscRing::builder(4096).wakeup_policy(WakeupPolicy::Watermark(0)).build().unwrap_err();
    assert!(err.to_string().contains("watermark"));
    let err = MpscRing::builder(4096).consumer_batch(4).build().unwrap_err();
    assert!(err.to_string().contains("batch"));
}

#[test]
fn one_consumer_and_one_spsc_producer_at_a_time() {
    let ring = SpscRing::new(4096).unwrap();
    let c = ring.consumer().unwrap();
    assert!(matches!(ring.consumer(), Err(Error::ConsumerAttached { .. })));
    drop(c);
    assert!(ring.consumer().is_ok());
    let p = ring.producer().unwrap();
    let err = ring.producer().unwrap_err();
    assert!(matches!(err, Error::ProducerAttached { .. }));
    assert!(err.to_string().contains("Mpsc"));
    drop(p);
    assert!(ring.producer().is_ok());
}

#[test]
fn records_round_trip_with_zero_length_and_wrap_around() {
    let ring = MpscRing::new(4096).unwrap();
    let mut p = ring.producer().unwrap();
    let mut c = ring.consumer().unwrap();
    let mut expect = Vec::new();
    // Many laps of varied lengths (0 included): every record is contiguous even where it wraps.
    for i in 0..5000usize {
        let len = (i * 37) % 300;
        let rec: Vec<u8> = (0..len).map(|k| (i + k) as u8).collect();
        p.output(&rec, Wakeup::Default).unwrap();
        expect.push(rec);
        if i % 7 == 0 {
            assert_eq!(drain(&mut c), expect);
            expect.clear();
        }
    }
    assert_eq!(drain(&mut c), expect);
    let s = ring.stats();
    assert_eq!((s.committed, s.consumed, s.lost, s.available), (5000, 5000, 0, 0));
}

#[test]
fn too_large_and_full_are_refused_and_counted() {
    let ring = MpscRing::new(4096).unwrap();
    let mut p = ring.producer().unwrap();
    assert_eq!(ring.max_record_len(), 4080);
    assert_eq!(p.reserve(4081).unwrap_err(), ReserveError::TooLarge { len: 4081, max: 4080 });
    assert!(p.reserve(4080).is_ok()); // dropped: discarded
    let mut c = ring.consumer().unwrap();
    assert!(drain(&mut c).is_empty());
    let mut n = 0;
    while p.output(&[1; 24], Wakeup::NoWakeup).is_ok() {
        n += 1;
    }
    // The consumer stepped over the discarded record (4088 bytes) and handed it back;
    // the word after the last record (the next header, kept zeroed) is never claimed,
    // so one record fewer than the capacity holds fits.
    assert_eq!(n, 4096 / 32 - 1);
    let err = p.output(&[1; 24], Wakeup::NoWakeup).unwrap_err();
    assert_eq!(err, ReserveError::Full { len: 24 });
    assert!(err.to_string().contains("lost"));
    let s = ring.stats();
    assert_eq!((s.committed, s.discarded, s.lost, s.too_large, s.skipped), (127, 1, 2, 1, 1));
    assert_eq!(drain(&mut c).len(), 127);
    assert_eq!(ring.stats().consumed, 127);
}

/// A single producer keeps the next header word zeroed, so it needs 8 bytes past its
/// record: the largest record is 16 bytes short of the capacity, a full ring holds all
/// but 8 bytes, and records of the largest size still go round the ring.
#[test]
fn single_producer_limits_and_largest_records_wrap() {
    let ring = SpscRing::new(4096).unwrap();
    assert_eq!(ring.max_record_len(), 4080);
    let mut p = ring.producer().unwrap();
    let mut c = ring.consumer().unwrap();
    assert_eq!(p.reserve(4081).unwrap_err(), ReserveError::TooLarge { len: 4081, max: 4080 });
    for round in 0..5u8 {
        p.output(&[round; 4080], Wakeup::NoWakeup).unwrap();
        assert_eq!(p.output(&[], Wakeup::NoWakeup).unwrap_err(), ReserveError::Full { len: 0 });
        assert_eq!(drain(&mut c), vec![vec![round; 4080]]);
    }
    let mut n = 0;
    while p.output(&[7; 24], Wakeup::NoWakeup).is_ok() {
        n += 1;
    }
    assert_eq!(n, 4096 / 32 - 1, "all but the last 8 bytes");
    assert_eq!(drain(&mut c).len(), n);
    let s = ring.stats();
    assert_eq!((s.committed, s.consumed, s.lost, s.too_large), (5 + n as u64, 5 + n as u64, 6, 1));
}

/// Requirement 5: a producer stopped between reserve and commit stops no other
/// producer until the ring is full behind it; the consumer waits at its record.
#[test]
fn a_stalled_reservation_blocks_only_the_consumer() {
    let ring = MpscRing::new(4096).unwrap();
    let mut stalled = ring.producer().unwrap();
    let mut c = ring.consumer().unwrap();
    let mut held = stalled.reserve(8).unwrap();
    held.copy_from_slice(b"stalled!");
    let others: Vec<_> = (0..3)
        .map(|t| {
            let mut p = ring.producer().unwrap();
            std::thread::spawn(move || {
                let mut ok = 0u64;
                loop {
                    match p.output(&[t; 8], Wakeup::Default) {
                        Ok(()) => ok += 1,
                        Err(ReserveError::Full { .. }) => break ok,
                        // Another producer zeroing ahead was preempted for over 1 ms
                        // (a loaded machine): counted as lost, and room is still there.
                        Err(ReserveError::Pending { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    let committed: u64 = others.into_iter().map(|h| h.join().unwrap()).sum();
    // The ring is full behind the held record: it holds 4096 - 8 bytes (the word after
    // the newest record is kept zeroed), the held record's 16 and 254 others.
    assert_eq!(committed, 254);
    assert!(drain(&mut c).is_empty(), "the consumer must wait at the unfinished record");
    assert!(!c.ready());
    held.commit();
    let got = drain(&mut c);
    assert_eq!(got.len(), 255);
    assert_eq!(got[0], b"stalled!");
}

#[test]
fn callback_error_stops_and_reaches_the_caller() {
    let ring = MpscRing::new(4096).unwrap();
    let mut p = ring.producer().unwrap();
    for i in 0..10u8 {
        p.output(&[i], Wakeup::Default).unwrap();
    }
    let mut c = ring.consumer().unwrap();
    let mut seen = Vec::new();
    let r = c.consume(|d| {
        seen.push(d[0]);
        if d[0] == 3 {
            Err("boom")
        } else {
            Ok(())
        }
    });
    assert!(matches!(r, Err(ConsumeError::Callback("boom"))));
    assert_eq!(seen, [0, 1, 2, 3]);
    // consume_n bounds the batch.
    let n = c.consume_n(2, |d| {
        seen.push(d[0]);
        Ok::<(), Infallible>(())
    });
    assert_eq!(n.unwrap(), 2);
    assert_eq!(seen, [0, 1, 2, 3, 4, 5]);
    // The iterator reads in place; its space is released at the next call.
    let rest: Vec<u8> = c.iter().map(|d| d[0]).collect();
    assert_eq!(rest, [6, 7, 8, 9]);
    assert_eq!(ring.stats().consumer_pos, 6 * 16);
    c.release();
    assert_eq!(ring.stats().consumer_pos, 10 * 16);
    assert_eq!(ring.stats().consumed, 10);
}

#[test]
fn spsc_ring_works_like_mpsc() {
    let ring: RingBuf<Spsc> = RingBuf::new(1 << 16).unwrap();
    let mut p = ring.producer().unwrap();
    let mut c = ring.consumer().unwrap();
    let t = std::thread::spawn(move || {
        for i in 0..100_000u64 {
            while p.output(&i.to_le_bytes(), Wakeup::Default).is_err() {
                std::thread::yield_now();
            }
        }
    });
    let mut next = 0u64;
    while next < 100_000 {
        c.poll(Some(Duration::from_secs(10)), |d| {
            assert_eq!(u64::from_le_bytes(d.try_into().unwrap()), next);
            next += 1;
            Ok::<(), Infallible>(())
        })
        .unwrap();
    }
    t.join().unwrap();
    let s = ring.stats();
    assert_eq!(s.committed, 100_000);
    assert_eq!((s.consumed, s.lost, s.discarded), (100_000, s.lost, 0));
}

#[test]
fn poll_times_out_when_nothing_comes_and_no_wakeup_is_honoured() {
    let ring = MpscRing::new(4096).unwrap();
    let mut c = ring.consumer().unwrap();
    let t0 = std::time::Instant::now();
    assert!(!c.wait(Some(Duration::from_millis(30))).unwrap());
    assert!(t0.elapsed() >= Duration::from_millis(30));
    // A NoWakeup commit does not wake a sleeper (it leaves the doorbell quiet); a later
    // Force one does. Both are made once the consumer sleeps.
    let mut p = ring.producer().unwrap();
    let (consumer, doorbell) = (common::asleep::thread_id(), c.as_fd().try_clone_to_owned().unwrap());
    let loud = Arc::new(AtomicBool::new(false));
    let t = std::thread::spawn({
        let loud = loud.clone();
        move || {
            common::asleep::wait_until_asleep(consumer, "the consumer");
            p.output(b"quiet", Wakeup::NoWakeup).unwrap();
            assert!(!common::asleep::rung(&doorbell), "a NoWakeup commit rang the doorbell");
            loud.store(true, Ordering::Release);
            p.output(b"loud", Wakeup::Force).unwrap();
            p // kept until the consumer's check: a producer's leaving wakes it too
        }
    });
    let t0 = std::time::Instant::now();
    assert!(c.wait(Some(Duration::from_secs(20))).unwrap());
    assert!(loud.load(Ordering::Acquire), "woken before the forced wakeup");
    assert!(t0.elapsed() < Duration::from_secs(10), "not woken by the forced wakeup: {:?}", t0.elapsed());
    t.join().unwrap();
    assert_eq!(drain(&mut c), [b"quiet".to_vec(), b"loud".to_vec()]);
}

/// The fd protocol with edge-triggered epoll, as mio/tokio use it.
#[test]
fn edge_triggered_epoll_on_the_doorbell() {
    use rustix::event::epoll;
    let ring = MpscRing::new(1 << 16).unwrap();
    let mut c = ring.consumer().unwrap();
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
    epoll::add(&ep, c.as_fd(), epoll::EventData::new_u64(1), epoll::EventFlags::IN | epoll::EventFlags::ET).unwrap();
    let mut p = ring.producer().unwrap();
    const N: u64 = 200_000;
    let t = std::thread::spawn(move || {
        for i in 0..N {
            while p.output(&i.to_le_bytes(), Wakeup::Default).is_err() {
                std::thread::yield_now();
            }
            if i % 50_000 == 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    });
    let mut next = 0;
    let mut events: Vec<epoll::Event> = Vec::with_capacity(4);
    while next < N {
        c.consume(|d| {
            assert_eq!(u64::from_le_bytes(d.try_into().unwrap()), next);
            next += 1;
            Ok::<(), Infallible>(())
        })
        .unwrap();
        if next < N && c.arm().unwrap() {
            let ts = rustix::event::Timespec { tv_sec: 10, tv_nsec: 0 };
            events.clear();
            epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), Some(&ts)).unwrap();
            assert!(!events.is_empty(), "stalled: no edge while records were pending (at {next})");
        }
    }
    t.join().unwrap();
}

/// A single producer's handle dropped and attached again, thousands of times, at every
/// point of the ring (the new handle knows only that the word at the producer position
/// is zero), with discarded reservations and a consumer that reads a few records at a
/// time: every record arrives once, in order, intact.
#[test]
fn single_producer_reattaches_anywhere() {
    let ring = SpscRing::new(4096).unwrap();
    let mut c = ring.consumer().unwrap();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut written, mut read) = (0u64, 0u64);
    let mut check = |d: &[u8]| {
        if !d.is_empty() {
            let s = u64::from_le_bytes(d[..8].try_into().unwrap());
            assert_eq!(s, read);
            assert!(d[8..].iter().all(|&b| b == (s % 251) as u8));
            read += 1;
        }
        Ok::<(), Infallible>(())
    };
    for _ in 0..20_000 {
        let mut p = ring.producer().unwrap();
        if rnd() % 2 == 0 {
            let _ = p.output(&[], Wakeup::NoWakeup);
        }
        for _ in 0..rnd() % 8 {
            let len = 8 + (rnd() % 600) as usize;
            let mut rec = vec![(written % 251) as u8; len];
            rec[..8].copy_from_slice(&written.to_le_bytes());
            match p.output(&rec, Wakeup::NoWakeup) {
                Ok(()) => written += 1,
                Err(ReserveError::Full { .. }) => break,
                Err(e) => panic!("{e}"),
            }
        }
        if rnd() % 3 == 0 {
            if let Ok(mut r) = p.reserve(16) {
                r.fill(0xff);
                drop(r); // discarded
            }
        }
        drop(p);
        c.consume_n((rnd() % 6) as usize, &mut check).unwrap();
    }
    c.consume(&mut check).unwrap();
    assert_eq!(read, written);
    assert!(written > 10_000, "{written}");
}

/// A record is written the same way in either mode: `copy_from_slice` for the whole
/// payload, `write(offset, bytes)` for a part, which refuses what does not fit.
#[test]
fn reservations_write_the_same_in_both_modes() {
    let discard = ringtrace::MpscRing::new(4096).unwrap();
    let recorder = ringtrace::FlightRecorder::new(4096).unwrap();
    let (mut pd, mut po) = (discard.producer().unwrap(), recorder.producer().unwrap());

    let mut rec = pd.reserve(5).unwrap();
    rec.copy_from_slice(b"hello");
    rec.commit();
    let mut rec = po.reserve(5).unwrap();
    rec.copy_from_slice(b"hello");
    rec.commit();

    let mut rec = pd.reserve(4).unwrap();
    rec.write(0, b"ab").unwrap();
    rec.write(2, b"cd").unwrap();
    let err = rec.write(3, b"xy").unwrap_err();
    assert!(matches!(err, ringtrace::ReserveError::OutOfBounds { offset: 3, len: 2, record_len: 4 }), "{err}");
    rec.commit();
    let mut rec = po.reserve(4).unwrap();
    rec.write(0, b"ab").unwrap();
    rec.write(2, b"cd").unwrap();
    let err = rec.write(3, b"xy").unwrap_err();
    assert!(matches!(err, ringtrace::ReserveError::OutOfBounds { offset: 3, len: 2, record_len: 4 }), "{err}");
    rec.commit();

    let from_discard: Vec<Vec<u8>> = discard.consumer().unwrap().iter().map(<[u8]>::to_vec).collect();
    let mut c = recorder.consumer().unwrap();
    let from_recorder: Vec<Vec<u8>> = c.iter().unwrap().map(<[u8]>::to_vec).collect();
    assert_eq!(from_discard, [b"hello".to_vec(), b"abcd".to_vec()]);
    assert_eq!(from_recorder, from_discard);
}

/// A consume callback may return `()` (it cannot fail) or a `Result` (its error stops
/// the call); the same in every reader, and `poll` returns what it read or, at the
/// deadline, zero.
#[test]
fn callbacks_may_return_unit_or_result_and_poll_keeps_its_deadline() {
    let ring = ringtrace::MpscRing::new(4096).unwrap();
    let mut p = ring.producer().unwrap();
    let mut c = ring.consumer().unwrap();
    for i in 0..3u8 {
        p.output(&[i], Wakeup::Default).unwrap();
    }
    let mut seen = Vec::new();
    assert_eq!(c.consume_n(1, |rec| seen.push(rec[0])).unwrap(), 1);
    let stopped = c.consume(|rec| {
        if rec[0] == 2 {
            return Err(rec[0]);
        }
        seen.push(rec[0]);
        Ok(())
    });
    assert!(matches!(stopped, Err(ringtrace::ConsumeError::Callback(2))));
    assert_eq!(seen, [0, 1]);

    let start = std::time::Instant::now();
    let n = c.poll(Some(std::time::Duration::from_millis(30)), |_| ()).unwrap();
    assert_eq!(n, 0);
    assert!(start.elapsed() >= std::time::Duration::from_millis(30));
    p.output(b"x", Wakeup::Default).unwrap();
    assert_eq!(c.poll(None, |rec| assert_eq!(rec, b"x")).unwrap(), 1);
}

/// The largest record fits whenever the ring is empty, wherever the consumer stopped:
/// at every position mod 64 (a multi-producer ring's consumer hands space back in whole
/// cache lines), for `output`, `reserve` and a waiting producer, in rings of one page and
/// of 64 KiB.
#[test]
fn the_largest_record_fits_an_empty_ring_at_every_alignment() {
    for cap in [4096u64, 1 << 16] {
        for shift in (0..128usize).step_by(8) {
            let ring = MpscRing::new(cap).unwrap();
            let max = ring.max_record_len();
            let mut p = ring.producer().unwrap();
            let mut c = ring.consumer().unwrap();
            if shift > 0 {
                p.output(&vec![1; shift - 8], Wakeup::NoWakeup).unwrap();
                assert_eq!(drain(&mut c).len(), 1);
            }
            assert_eq!(ring.stats().available, ring.stats().producer_pos - ring.stats().consumer_pos);
            for round in 0..3u8 {
                let what = format!("capacity {cap}, consumer at {shift} mod 64, round {round}");
                match round {
                    0 => p.output(&vec![round; max], Wakeup::NoWakeup).expect(&what),
                    1 => {
                        let mut r = p.reserve(max).expect(&what);
                        r.copy_from_slice(&vec![round; max]);
                        r.commit();
                    }
                    _ => p.output_wait(&vec![round; max], Wakeup::NoWakeup, Some(Duration::from_secs(5))).expect(&what),
                }
                let got = drain(&mut c);
                assert!(got == vec![vec![round; max]], "{what}: {} records read", got.len());
            }
            let err = p.output_wait(&vec![0; max + 1], Wakeup::NoWakeup, Some(Duration::from_secs(5))).unwrap_err();
            assert_eq!(err, ReserveError::TooLarge { len: max + 1, max });
            assert_eq!(ring.stats().lost, 0);
        }
    }
}
