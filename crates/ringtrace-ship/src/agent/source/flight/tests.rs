//! A flight recorder followed by the agent's source, drawn by proptest: rounds filled,
//! acknowledged, failed and an agent restarted from its stored state, while producers
//! overwrite; compared with what the module promises.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use ringtrace::{FlightRecorder, Wakeup};

use super::super::{Limits, Source};
use crate::frame::Batch;
use crate::state::SourceState;

#[derive(Debug, Clone)]
enum Op {
    /// Records of these lengths (at least 8: the record's index goes first).
    Write(Vec<usize>),
    /// A round, of at most this many ring bytes.
    Fill(usize),
    Ack,
    Fail,
    /// The agent killed and started again from its stored state.
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop::collection::vec(8usize..400, 1..10).prop_map(Op::Write),
        3 => (64usize..3000).prop_map(Op::Fill),
        2 => Just(Op::Ack),
        1 => Just(Op::Fail),
        1 => Just(Op::Restart),
    ]
}

/// `(seq, index written in the record)` of each record of `messages`.
fn records(messages: &[Vec<u8>]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for m in messages {
        let b = Batch::decode(m).unwrap();
        for r in b.records() {
            out.push((r.seq, u64::from_le_bytes(r.payload[..8].try_into().unwrap())));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Each record shipped carries its index among the records written as its sequence
    /// number, whichever rounds failed and restarts came between; and once drained,
    /// every record written was acknowledged once or counted overwritten.
    #[test]
    fn a_flight_recorder_ships_each_record_under_its_own_number(ops in prop::collection::vec(op(), 1..50)) {
        let path = std::env::temp_dir().join(format!("ringtrace-ship-flight-{}-{}.ring", std::process::id(), rand_id()));
        let _ = std::fs::remove_file(&path);
        let ring = FlightRecorder::builder(4096).retire_ahead(0).create(&path).unwrap();
        let mut p = ring.producer().unwrap();
        let mut s = Some(Source::open(&path).unwrap());
        let (mut written, mut saved): (u64, Option<SourceState>) = (0, None);
        let mut pending: Option<(Vec<(u64, u64)>, SourceState)> = None;
        let mut acked = BTreeSet::new();
        let deadline = || Instant::now() + Duration::from_secs(5);
        let run = (|| -> Result<(), TestCaseError> {
            for op in ops.iter().cloned().chain([Op::Ack, Op::Fill(1 << 20), Op::Ack]) {
                let src = s.as_mut().unwrap();
                match op {
                    Op::Write(lens) => {
                        for len in lens {
                            let mut rec = vec![0x5a; len];
                            rec[..8].copy_from_slice(&written.to_le_bytes());
                            p.output(&rec, Wakeup::Default).unwrap();
                            written += 1;
                        }
                    }
                    Op::Fill(round) if pending.is_none() => {
                        let limits = Limits { batch: 512, max: 1 << 20, round };
                        let mut out = Vec::new();
                        let filled = src.fill("h", 1, limits, &mut out).unwrap();
                        let got = records(&out);
                        prop_assert_eq!(got.len() as u64, filled.records);
                        for &(seq, index) in &got {
                            prop_assert_eq!(seq, index, "a record shipped under another's number");
                        }
                        prop_assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{:?}", got);
                        if let Some(state) = src.pending_state() {
                            pending = Some((got, state));
                        }
                    }
                    Op::Fill(_) => {}
                    Op::Ack => {
                        if let Some((got, state)) = pending.take() {
                            acked.extend(got.iter().map(|r| r.0));
                            saved = Some(state);
                            src.acknowledged();
                        }
                    }
                    Op::Fail => {
                        if pending.take().is_some() {
                            src.failed();
                        }
                    }
                    Op::Restart => {
                        pending = None;
                        drop(s.take());
                        let mut again = Source::open(&path).unwrap();
                        let found = again.recover(saved.as_ref(), deadline()).unwrap();
                        prop_assert!(!found.new_ring);
                        s = Some(again);
                    }
                }
            }
            Ok(())
        })();
        drop(s);
        let _ = std::fs::remove_file(&path);
        run?;
        let saved = saved.unwrap_or_else(|| SourceState {
            source: String::new(), dev: 0, ino: 0, position: 0, next_seq: 0, consumed: 0, skipped: 0,
            counts: Default::default(),
        });
        prop_assert_eq!(acked.len() as u64, saved.consumed, "{:?}", saved);
        prop_assert_eq!(saved.consumed + saved.counts.overwritten, written, "{:?}", saved);
        prop_assert_eq!(saved.next_seq, written);
    }
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Relaxed)
}

/// A writer thread overwriting a small flight recorder while rounds are filled and
/// acknowledged: the state each round stores is one mark, its next sequence number that
/// of the mark (the records overwritten after the round's last record, found by the
/// round's last look, included), so that an agent restarted from it numbers on without
/// reusing a number; every record shipped carries its own number. Runs 2 s.
#[test]
fn a_round_overtaken_after_its_last_record_stores_the_marks_next_number() {
    let path =
        std::env::temp_dir().join(format!("ringtrace-ship-flight-race-{}-{}.ring", std::process::id(), rand_id()));
    let _ = std::fs::remove_file(&path);
    let ring = FlightRecorder::builder(4096).retire_ahead(0).create(&path).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (mut p, stop) = (ring.producer().unwrap(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Lengths from 8 to 1,000 bytes: a long one retires many at once.
                let mut rec = vec![0x5a; 8 + (i as usize * 7919) % 993];
                rec[..8].copy_from_slice(&i.to_le_bytes());
                p.output(&rec, Wakeup::Default).unwrap();
                i += 1;
            }
        })
    };
    let mut s = Source::open(&path).unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    let (mut rounds, mut overtaken) = (0u64, 0u64);
    // A failed check stops the writer before it is reported.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        while Instant::now() < deadline {
            let limits = Limits { batch: 512, max: 1 << 20, round: 1 << 20 };
            let mut out = Vec::new();
            s.fill("h", 1, limits, &mut out).unwrap();
            for (seq, index) in records(&out) {
                assert_eq!(seq, index, "a record shipped under another's number");
            }
            if let Some(state) = s.pending_state() {
                assert_eq!(
                    state.next_seq,
                    state.consumed + state.counts.overwritten,
                    "round {rounds}: the stored next sequence is not the stored mark's"
                );
                if records(&out).last().is_some_and(|&(last, _)| state.next_seq > last + 1) {
                    overtaken += 1;
                }
                s.acknowledged();
                rounds += 1;
            }
        }
    }));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    drop(s);
    let _ = std::fs::remove_file(&path);
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
    eprintln!("{rounds} rounds, {overtaken} overtaken after their last record");
    assert!(rounds > 0);
}
