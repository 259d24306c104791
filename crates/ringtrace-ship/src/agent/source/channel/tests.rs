//! A channel file's slots as sources: each read, failed, acknowledged and recovered on
//! its own; stamps turned into wall-clock times; the channel's end for
//! `--until-disconnected`; overwrite channels followed as flight recorders.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringtrace::clock::{Monotonic, NoClock, Tsc};
use ringtrace::config::{Discard, Overwrite};
use ringtrace::{Channel, Wakeup};

use super::super::{Limits, Ring, Source};
use super::*;
use crate::frame::Batch;

/// A channel file of its own in the temporary directory, removed when dropped.
struct TempChan(PathBuf);

impl TempChan {
    fn new(what: &str) -> TempChan {
        use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Relaxed);
        let p = std::env::temp_dir().join(format!("ringtrace-ship-chan-{what}-{}-{n}.chan", std::process::id()));
        let _ = std::fs::remove_file(&p);
        TempChan(p)
    }
}

impl Drop for TempChan {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const LIMITS: Limits = Limits { batch: 1 << 16, max: 1 << 20, round: 1 << 20 };

fn wall_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Record `i` of producer `p`.
fn body(p: u8, i: u64) -> Vec<u8> {
    let mut b = vec![p; 12];
    b.extend_from_slice(&i.to_le_bytes());
    b
}

/// Records as (seq, time, payload), and each batch's time source and offset.
type Decoded = (Vec<(u64, u64, Vec<u8>)>, Vec<(TimeSource, i64)>);

/// The records of `messages`.
fn decoded(messages: &[Vec<u8>]) -> Decoded {
    let (mut recs, mut batches) = (Vec::new(), Vec::new());
    for m in messages {
        let b = Batch::decode(m).unwrap();
        batches.push((b.time_source, b.offset_ns));
        recs.extend(b.records().map(|r| (r.seq, r.time_ns, r.payload.to_vec())));
    }
    (recs, batches)
}

fn fill(s: &mut Source, drained: u64) -> Decoded {
    let mut out = Vec::new();
    let filled = s.fill("h", drained, LIMITS, &mut out).unwrap();
    let got = decoded(&out);
    assert_eq!(filled.records, got.0.len() as u64);
    got
}

fn payloads(recs: &[(u64, u64, Vec<u8>)]) -> Vec<Vec<u8>> {
    recs.iter().map(|r| r.2.clone()).collect()
}

fn sources(path: &Path) -> Vec<Source> {
    Source::expand(&[path.to_path_buf()]).unwrap()
}

#[test]
fn each_slot_is_a_source_filled_failed_acknowledged_and_dropped_on_its_own() {
    let at = TempChan::new("slots");
    let channel = Channel::<Discard, Monotonic>::builder(1 << 16).max_producers(3).create(&at.0, Monotonic).unwrap();
    let (mut p0, mut p1) = (channel.producer().unwrap(), channel.producer().unwrap());
    for i in 0..5 {
        p0.output(&body(0, i), Wakeup::Default).unwrap();
        p1.output(&body(1, i), Wakeup::Default).unwrap();
    }
    let mut s = sources(&at.0);
    let names: Vec<_> = s.iter().map(|s| s.name.clone()).collect();
    let path = at.0.display();
    assert_eq!(names, [format!("{path}#0"), format!("{path}#1"), format!("{path}#2")]);
    // The agent holds every slot: no other reader of the channel meanwhile.
    assert!(matches!(channel.reader(), Err(ringtrace::Error::ReaderAttached { .. })));

    let (r0, _) = fill(&mut s[0], 1);
    assert_eq!(payloads(&r0), (0..5).map(|i| body(0, i)).collect::<Vec<_>>(), "slot 0: its records, stamps off");
    assert_eq!(r0.iter().map(|r| r.0).collect::<Vec<_>>(), (0..5).collect::<Vec<_>>());
    let (r1, _) = fill(&mut s[1], 1);
    assert_eq!(payloads(&r1), (0..5).map(|i| body(1, i)).collect::<Vec<_>>());
    assert_eq!(fill(&mut s[2], 1).0, [], "a slot no producer took");
    assert!(s[2].pending_state().is_none());

    // Slot 0's round fails: its records come again with the same numbers; slot 1's is
    // acknowledged: its entry names it, and its records are gone.
    s[0].failed();
    let e1 = s[1].pending_state().unwrap();
    assert_eq!((e1.source.as_str(), e1.next_seq), (names[1].as_str(), 5));
    s[1].acknowledged();
    let (again, _) = fill(&mut s[0], 1);
    assert_eq!(payloads(&again), payloads(&r0));
    assert_eq!(again.iter().map(|r| r.0).collect::<Vec<_>>(), (0..5).collect::<Vec<_>>());
    assert_eq!(fill(&mut s[1], 1).0, []);

    // Slot 0 dropped mid-round (the agent stopped on an error): its records stay, for
    // the next agent, which steps over what the state says was acknowledged.
    let saved0 = s[0].pending_state().unwrap();
    p1.output(&body(1, 5), Wakeup::Default).unwrap();
    drop(s);
    let mut s = sources(&at.0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let found = s[0].recover(Some(&saved0), deadline).unwrap();
    assert_eq!((found.acknowledged, found.new_ring), (5, false), "acknowledged before the restart: stepped over");
    assert_eq!(fill(&mut s[0], 1).0, []);
    assert_eq!(s[1].recover(Some(&e1), deadline).unwrap().acknowledged, 0, "released: nothing to step over");
    let (r1, _) = fill(&mut s[1], 1);
    assert_eq!((r1[0].0, &r1[0].2), (5, &body(1, 5)), "numbered on from the state");
    drop((p0, p1));
}

#[test]
fn a_stamped_records_time_is_its_writing_time_on_the_wall_clock() {
    let at = TempChan::new("stamps");
    let channel = Channel::<Discard, Monotonic>::builder(1 << 16).max_producers(1).create(&at.0, Monotonic).unwrap();
    let mut written = Vec::new();
    for i in 0..20 {
        written.push(wall_ns());
        channel.output(&body(0, i), Wakeup::Default).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    // Drained much later: the times are the stamps', not the drain's.
    std::thread::sleep(Duration::from_millis(100));
    let mut s = sources(&at.0);
    let (recs, batches) = fill(&mut s[0], wall_ns());
    assert_eq!(payloads(&recs), (0..20).map(|i| body(0, i)).collect::<Vec<_>>());
    for ((_, t, _), w) in recs.iter().zip(&written) {
        assert!(t.abs_diff(*w) < 3_000_000, "time {t} vs written at {w}: {} ns apart", t.abs_diff(*w));
    }
    assert!(recs.windows(2).all(|w| w[0].1 <= w[1].1));
    let mono = ringtrace::clock::monotonic_ns() as i128;
    for (source, offset) in batches {
        assert_eq!(source, TimeSource::Monotonic);
        assert!((i128::from(offset) + mono - wall_ns() as i128).abs() < 3_000_000, "offset {offset}");
    }
}

#[test]
fn a_tsc_channels_stamps_become_wall_clock_times_too() {
    let tsc = match Tsc::shared() {
        Ok(tsc) => tsc,
        Err(e) => return ringtrace_fixtures::skip(ringtrace_fixtures::Feature::Tsc, format!("no invariant TSC: {e}")),
    };
    let at = TempChan::new("tsc");
    let channel = Channel::<Discard, Tsc>::builder(1 << 16).max_producers(2).create(&at.0, tsc).unwrap();
    let before = wall_ns();
    channel.output(b"tsc", Wakeup::Default).unwrap();
    let after = wall_ns();
    std::thread::sleep(Duration::from_millis(50));
    let mut s = sources(&at.0);
    let (recs, batches) = fill(&mut s[0], wall_ns());
    assert_eq!(payloads(&recs), [b"tsc".to_vec()]);
    assert_eq!(batches[0].0, TimeSource::Monotonic);
    let t = recs[0].1;
    assert!(t + 3_000_000 >= before && t <= after + 3_000_000, "{before} <= {t} <= {after}, within 3 ms");
}

#[test]
fn an_unstamped_channel_is_shipped_as_ring_files_are() {
    let at = TempChan::new("nostamp");
    let channel = Channel::<Discard, NoClock>::builder(1 << 16).max_producers(2).create(&at.0, NoClock).unwrap();
    channel.output(b"no time", Wakeup::Default).unwrap();
    channel.output(b"", Wakeup::Default).unwrap();
    let mut s = sources(&at.0);
    let (recs, batches) = fill(&mut s[0], 77);
    assert_eq!(recs, [(0, 77, b"no time".to_vec()), (1, 77, Vec::new())]);
    assert_eq!(batches, [(TimeSource::Drained, 0)]);
}

#[test]
fn times_do_not_step_back_by_the_offsets_noise() {
    let at = TempChan::new("jitter");
    let _channel = Channel::<Discard, Monotonic>::builder(1 << 16).max_producers(1).create(&at.0, Monotonic).unwrap();
    let s = sources(&at.0);
    let Ring::Slot(slot) = &s[0].ring else { panic!("a slot") };
    let mut last = 0;
    let mut stamps = Stamps { slots: &*slot.slots, drained_ns: 5, last_ns: &mut last, offset: 1_000 };
    assert_eq!(stamps.time(Some(10_000)), 11_000);
    stamps.offset = 900; // measured 100 ns lower
    assert_eq!(stamps.time(Some(10_050)), 11_000, "held at the previous time");
    assert_eq!(stamps.time(Some(10_200)), 11_100);
    assert_eq!(stamps.time(None), 5, "no stamp: the drain time");
    stamps.offset = -10_000_000_000; // the wall clock set back 10 s
    assert_eq!(stamps.time(Some(10_300_000_000)), 300_000_000);
}

#[test]
fn the_realtime_offset_is_the_wall_clock_less_the_monotonic_one() {
    for _ in 0..10 {
        let o = realtime_offset();
        let expect = wall_ns() as i128 - ringtrace::clock::monotonic_ns() as i128;
        assert!((i128::from(o) - expect).abs() < 1_000_000, "{o} vs {expect}");
    }
}

#[test]
fn a_channel_is_finished_when_every_slot_that_had_a_producer_left_and_one_did() {
    let at = TempChan::new("until");
    let channel = Channel::<Discard, Monotonic>::builder(1 << 16).max_producers(3).create(&at.0, Monotonic).unwrap();
    let s = sources(&at.0);
    let done = |s: &[Source]| s.iter().map(|s| s.is_disconnected()).collect::<Vec<_>>();
    assert_eq!(done(&s), [false; 3], "no slot ever had a producer");
    let mut p0 = channel.producer().unwrap();
    p0.output(b"x", Wakeup::Default).unwrap();
    let p1 = channel.producer().unwrap(); // attached, writes nothing
    std::thread::sleep(LIVENESS_TTL);
    assert_eq!(done(&s), [false, false, true], "live producers in 0 and 1; 2 never had one");
    drop(p0);
    std::thread::sleep(LIVENESS_TTL);
    assert_eq!(done(&s), [true, false, true]);
    drop(p1);
    std::thread::sleep(LIVENESS_TTL);
    assert_eq!(done(&s), [true; 3]);
}

/// An overwrite channel's slots are followed as flight recorders: each a source of its
/// own, its records under the ring's numbers (the overwritten ones leaving a gap),
/// their stamps turned into wall-clock times, a failed round read again the same.
#[test]
fn an_overwrite_channels_slots_are_followed_as_flight_recorders() {
    let at = TempChan::new("overwrite");
    let channel = Channel::<Overwrite, Monotonic>::builder(4096).max_producers(2).create(&at.0, Monotonic).unwrap();
    let mut sources = Source::expand(std::slice::from_ref(&at.0)).unwrap();
    assert_eq!(sources.len(), 2);
    let (mut p0, mut p1) = (channel.producer().unwrap(), channel.producer().unwrap());
    let before = now_ns();
    for i in 0u64..3 {
        p0.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
    }
    // Far more than the slot's ring holds: its oldest records are overwritten.
    for i in 0u64..2000 {
        p1.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
    }
    let after = now_ns();
    let limits = Limits { batch: 1 << 16, max: 1 << 20, round: 1 << 20 };
    let read = |s: &mut Source| {
        let mut out = Vec::new();
        s.fill("h", 1, limits, &mut out).unwrap();
        let mut got = Vec::new();
        for m in &out {
            let b = Batch::decode(m).unwrap();
            for r in b.records() {
                assert!((before..=after).contains(&r.time_ns), "{} not within the writes", r.time_ns);
                got.push((r.seq, u64::from_le_bytes(r.payload.try_into().unwrap())));
            }
        }
        got
    };
    let first = read(&mut sources[0]);
    assert_eq!(first, [(0, 0), (1, 1), (2, 2)]);
    sources[0].failed();
    assert_eq!(read(&mut sources[0]), first, "a failed round is read again, the same");
    sources[0].acknowledged();
    let big = read(&mut sources[1]);
    assert!(big.len() < 2000 && !big.is_empty());
    assert!(big.iter().all(|&(seq, i)| seq == i), "each record under its own number");
    assert_eq!(big.last().unwrap().0, 1999);
    assert_eq!(sources[0].name, format!("{}#0", at.0.display()));
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}
