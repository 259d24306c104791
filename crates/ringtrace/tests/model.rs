//! Model-based tests of the public API: random sequences of operations on rings of
//! every kind and mode, each step checked against a simple sequential model of what the
//! docs promise (which records are held and in what order, what is refused and why, the
//! counters' identities).
//!
//! The lengths are drawn where defects hide: 0, 1, 7, 8, 9, the largest record and one
//! past it, its neighbours, and random; the record sizes before them put every position
//! at every alignment (mod 8, mod 64 and across the end of the data area).
//!
//! What the model promises, for discard rings:
//! * a record longer than `max_record_len()` is `TooLarge` (counted in `too_large`);
//! * **a record up to `max_record_len()` is accepted whenever the consumer has read
//!   everything** (the ring is empty), whatever the positions: a producer that waits for
//!   room must never wait for room that cannot come;
//! * otherwise a record that fits in what is free (minus the consumer's unpublished
//!   part of a cache line, multi-producer rings) is accepted, one that does not fit in
//!   the capacity less what is held is `Full` (counted in `lost`);
//! * the consumer delivers exactly the committed records, oldest first, byte for byte,
//!   and steps over the discarded ones (counted in `skipped`);
//! * records read through `iter` and put back with `unread` are delivered again, and
//!   the counters do not move until they are handed back.
//!
//! For overwrite rings (flight recorders): a record up to the largest is always accepted
//! (no other thread holds a record); a snapshot (and a pause) holds the newest records,
//! a suffix of everything committed, always the newest one, and `overwritten_before() +
//! len()` committed records; while paused, multi-producer rings refuse every record
//! (counted in `paused`).

use std::collections::VecDeque;
use std::time::Duration;

use proptest::prelude::*;
use ringtrace::config::{Discard, Mpsc, Overwrite, ProducerKind, Spsc};
use ringtrace::{ReserveError, RingBuf, Stats, Wakeup};

/// A record's footprint in the ring: the 8-byte header and the payload rounded up to 8.
fn footprint(len: usize) -> u64 {
    8 + (len as u64).next_multiple_of(8)
}

/// A payload that names its sequence number in every byte (so a record read in the
/// wrong place or torn shows).
fn payload(seq: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as u8).wrapping_mul(31).wrapping_add(i as u8)).collect()
}

/// How an operation chooses its length: one of the edge cases or any length up to one
/// past the largest record.
#[derive(Clone, Copy, Debug)]
enum Len {
    Fixed(usize),
    Max,
    MaxMinus(usize),
    MaxPlus1,
    /// A fraction (per mille) of the largest record.
    Frac(u16),
}

impl Len {
    fn resolve(self, max: usize) -> usize {
        match self {
            Len::Fixed(n) => n,
            Len::Max => max,
            Len::MaxMinus(k) => max.saturating_sub(k),
            Len::MaxPlus1 => max + 1,
            Len::Frac(f) => max * f as usize / 1000,
        }
    }
}

fn len_strategy() -> impl Strategy<Value = Len> {
    prop_oneof![
        4 => prop::sample::select(vec![0usize, 1, 7, 8, 9, 15, 16, 17, 55, 56, 57, 63, 64, 65]).prop_map(Len::Fixed),
        3 => (0usize..200).prop_map(Len::Fixed),
        2 => Just(Len::Max),
        1 => (1usize..80).prop_map(Len::MaxMinus),
        1 => Just(Len::MaxPlus1),
        2 => (0u16..=1000).prop_map(Len::Frac),
    ]
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// `output` a record.
    Output(Len),
    /// `reserve`, fill, then commit (`true`) or discard (`false`, or by drop every
    /// other time).
    Reserve(Len, bool),
    /// `output_wait` with a short timeout.
    OutputWait(Len),
    /// `consume_n(n)` (0: `consume`, everything).
    Consume(usize),
    /// The consumer hands back everything it read.
    Release,
    /// `iter` over `n` records (0: all), then `release` (`true`) or `unread` (`false`:
    /// they stay, to be delivered again).
    Iter(usize, bool),
    /// Drop the producer and attach a new one.
    Reattach,
    /// Overwrite rings: a snapshot.
    Snapshot,
    /// Overwrite rings: pause, try to write one record, check the view, resume.
    Pause(Len),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => len_strategy().prop_map(Op::Output),
        3 => (len_strategy(), any::<bool>()).prop_map(|(l, c)| Op::Reserve(l, c)),
        1 => len_strategy().prop_map(Op::OutputWait),
        4 => (0usize..4).prop_map(Op::Consume),
        1 => Just(Op::Release),
        2 => (0usize..4, any::<bool>()).prop_map(|(n, r)| Op::Iter(n, r)),
        1 => Just(Op::Reattach),
        2 => Just(Op::Snapshot),
        1 => len_strategy().prop_map(Op::Pause),
    ]
}

/// A discard ring's model: the records not yet consumed, and the counters.
#[derive(Default, Debug)]
struct DiscardModel {
    /// (sequence number, length, committed?) of every record not yet stepped over.
    queue: VecDeque<(u64, usize, bool)>,
    seq: u64,
    committed: u64,
    discarded: u64,
    lost: u64,
    too_large: u64,
    consumed: u64,
    skipped: u64,
}

impl DiscardModel {
    fn held(&self) -> u64 {
        self.queue.iter().map(|&(_, len, _)| footprint(len)).sum()
    }
}

/// What the model says of a record of `len` bytes: `Some(true)` must be accepted,
/// `Some(false)` must be refused as `Full`, `None` either (the consumer's unpublished
/// part of a line decides).
fn discard_fits(m: &DiscardModel, len: usize, cap: u64, multi: bool) -> Option<bool> {
    let (held, fp) = (m.held(), footprint(len));
    if m.queue.is_empty() {
        return Some(true);
    }
    if multi {
        // The consumer hands space back in whole 64-byte lines (at most 56 bytes read
        // and not yet handed back).
        if held + fp + 56 <= cap {
            Some(true)
        } else if held + fp > cap {
            Some(false)
        } else {
            None
        }
    } else {
        // A single producer needs the word after its record.
        Some(held + fp + 8 <= cap)
    }
}

/// The ring's counters and held bytes against the model's.
fn check_counts(s: &Stats, m: &DiscardModel, ctx: &str) -> Result<(), TestCaseError> {
    let counts = (s.committed, s.discarded, s.lost, s.too_large, s.consumed, s.skipped);
    let want = (m.committed, m.discarded, m.lost, m.too_large, m.consumed, m.skipped);
    prop_assert_eq!(counts, want, "{}: (committed, discarded, lost, too_large, consumed, skipped)", ctx);
    // `available` runs from the consumer's read position: exactly what is held.
    prop_assert_eq!(s.available, m.held(), "{}: available", ctx);
    Ok(())
}

fn run_discard<K: ProducerKind>(cap: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let ring = RingBuf::<K, Discard>::new(cap).unwrap();
    let max = ring.max_record_len();
    let multi = K::MULTI;
    let mut p = Some(ring.producer().unwrap());
    let mut c = ring.consumer().unwrap();
    let mut m = DiscardModel::default();
    for (step, &op) in ops.iter().enumerate() {
        let ctx = format!("step {step}: {op:?} (model held {} bytes, {} entries)", m.held(), m.queue.len());
        match op {
            Op::Output(l) | Op::OutputWait(l) | Op::Reserve(l, _) => {
                let len = l.resolve(max);
                let prod = p.as_mut().unwrap();
                let seq = m.seq;
                let data = payload(seq, len);
                let got = match op {
                    Op::Output(_) => prod.output(&data, Wakeup::NoWakeup).map(|()| true),
                    Op::OutputWait(_) => {
                        prod.output_wait(&data, Wakeup::NoWakeup, Some(Duration::from_millis(1))).map(|()| true)
                    }
                    Op::Reserve(_, commit) => match prod.reserve(len) {
                        Ok(mut r) => {
                            r.copy_from_slice(&data);
                            if commit {
                                r.commit();
                            } else if seq % 2 == 0 {
                                r.discard();
                            } else {
                                drop(r);
                            }
                            Ok(commit)
                        }
                        Err(e) => Err(e),
                    },
                    _ => unreachable!(),
                };
                if len > max {
                    prop_assert_eq!(got, Err(ReserveError::TooLarge { len, max }), "{}", ctx);
                    m.too_large += 1;
                    continue;
                }
                let fits = discard_fits(&m, len, cap, multi);
                match got {
                    Ok(committed) => {
                        prop_assert!(fits != Some(false), "{}: accepted a record that cannot fit", ctx);
                        m.queue.push_back((seq, len, committed));
                        m.seq += 1;
                        if committed {
                            m.committed += 1;
                        } else {
                            m.discarded += 1;
                        }
                    }
                    Err(e) => {
                        let want = if matches!(op, Op::OutputWait(_)) {
                            ReserveError::Timeout { len }
                        } else {
                            ReserveError::Full { len }
                        };
                        prop_assert_eq!(e, want, "{}", ctx);
                        prop_assert!(fits != Some(true), "{}: refused a record that fits", ctx);
                        m.lost += 1;
                    }
                }
            }
            Op::Consume(_) | Op::Iter(_, _) => {
                let (n, got) = match op {
                    Op::Consume(n) => {
                        let mut got = Vec::new();
                        let collect = |d: &[u8]| got.push(d.to_vec());
                        let k = if n == 0 { c.consume(collect) } else { c.consume_n(n, collect) };
                        let k = k.map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                        prop_assert_eq!(k, got.len());
                        (n, got)
                    }
                    Op::Iter(n, release) => {
                        let take = if n == 0 { usize::MAX } else { n };
                        let got: Vec<Vec<u8>> = c.iter().take(take).map(<[u8]>::to_vec).collect();
                        if !release {
                            // Put back: the model keeps them, the next read delivers them.
                            c.unread();
                            let again: Vec<Vec<u8>> = c.iter().take(take).map(<[u8]>::to_vec).collect();
                            prop_assert!(again == got, "{}: after unread, iter read something else", ctx);
                            c.unread();
                            check_counts(&ring.stats(), &m, &ctx)?;
                            continue;
                        }
                        c.release();
                        (n, got)
                    }
                    _ => unreachable!(),
                };
                let want_n = if n == 0 { usize::MAX } else { n };
                let mut want = Vec::new();
                while want.len() < want_n {
                    let Some(&(seq, len, committed)) = m.queue.front() else { break };
                    m.queue.pop_front();
                    if committed {
                        want.push(payload(seq, len));
                        m.consumed += 1;
                    } else {
                        m.skipped += 1;
                    }
                }
                // The consumer steps over discarded records after its last delivery too
                // only when it looks on: not after the n-th record.
                if want.len() < want_n {
                    while let Some(&(_, _, false)) = m.queue.front() {
                        m.queue.pop_front();
                        m.skipped += 1;
                    }
                }
                prop_assert!(got == want, "{}: consumed {} records, expected {}", ctx, got.len(), want.len());
            }
            Op::Release => c.release(),
            Op::Reattach => {
                drop(p.take());
                p = Some(ring.producer().unwrap());
            }
            Op::Snapshot | Op::Pause(_) => continue, // overwrite rings only
        }
        check_counts(&ring.stats(), &m, &ctx)?;
    }
    // Whatever came before, an emptied ring takes a record of the largest size.
    drop(c.consume(|_: &[u8]| ()));
    let mut c2 = c;
    c2.release();
    let prod = p.as_mut().unwrap();
    prop_assert_eq!(prod.output(&payload(0, max), Wakeup::NoWakeup), Ok(()), "the largest record into an emptied ring");
    Ok(())
}

/// An overwrite ring's model: every record committed, in order (the ring holds a
/// suffix of them).
#[derive(Default, Debug)]
struct OverwriteModel {
    log: Vec<(u64, usize)>,
    seq: u64,
    discarded: u64,
    lost: u64,
    paused: u64,
    too_large: u64,
    /// Whether the newest record written was committed (not discarded): then the ring
    /// holds it, since every record fits.
    newest_committed: bool,
}

fn check_suffix(m: &OverwriteModel, held: &[Vec<u8>], before: u64, ctx: &str) -> Result<(), TestCaseError> {
    let total = m.log.len() as u64;
    prop_assert_eq!(before + held.len() as u64, total, "{}: overwritten_before + held", ctx);
    if m.newest_committed {
        prop_assert!(!held.is_empty(), "{}: a ring holding its newest record came back empty", ctx);
    }
    for (i, rec) in held.iter().enumerate() {
        let (seq, len) = m.log[before as usize + i];
        prop_assert!(*rec == payload(seq, len), "{}: record {} of the view is not record {}", ctx, i, seq);
    }
    Ok(())
}

fn run_overwrite<K: ProducerKind>(cap: u64, ahead: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let ring = RingBuf::<K, Overwrite>::builder(cap).retire_ahead(ahead).build().unwrap();
    let max = ring.max_record_len();
    let mut p = Some(ring.producer().unwrap());
    let mut m = OverwriteModel::default();
    for (step, &op) in ops.iter().enumerate() {
        let ctx = format!("step {step}: {op:?} ({} committed)", m.log.len());
        match op {
            Op::Output(l) | Op::OutputWait(l) | Op::Reserve(l, _) => {
                let len = l.resolve(max);
                let prod = p.as_mut().unwrap();
                let data = payload(m.seq, len);
                let got = match op {
                    Op::Reserve(_, commit) => match prod.reserve(len) {
                        Ok(mut r) => {
                            r.write(0, &data).unwrap();
                            if commit {
                                r.commit();
                            } else {
                                r.discard();
                            }
                            Ok(commit)
                        }
                        Err(e) => Err(e),
                    },
                    _ => prod.output(&data, Wakeup::NoWakeup).map(|()| true),
                };
                if len > max {
                    prop_assert_eq!(got, Err(ReserveError::TooLarge { len, max }), "{}", ctx);
                    m.too_large += 1;
                    continue;
                }
                let committed = got.map_err(|e| TestCaseError::fail(format!("{ctx}: refused: {e}")))?;
                if committed {
                    m.log.push((m.seq, len));
                } else {
                    m.discarded += 1;
                }
                m.newest_committed = committed;
                m.seq += 1;
            }
            Op::Snapshot => {
                let snap = ring.snapshot().map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                let held: Vec<Vec<u8>> = snap.iter().map(|r| r.to_vec()).collect();
                prop_assert_eq!(snap.unfinished(), 0);
                check_suffix(&m, &held, snap.overwritten_before(), &ctx)?;
                prop_assert_eq!(ring.stats().overwritten, snap.overwritten_before(), "{}", ctx);
            }
            Op::Pause(l) => {
                let len = l.resolve(max).min(max);
                let paused = ring.pause().map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                let held: Vec<Vec<u8>> = paused.iter().map(|r| r.to_vec()).collect();
                let snap = paused.snapshot();
                check_suffix(&m, &held, snap.overwritten_before(), &ctx)?;
                prop_assert!(snap.iter().eq(paused.iter()), "{}: the pause's snapshot is its view", ctx);
                let prod = p.as_mut().unwrap();
                let data = payload(m.seq, len);
                match prod.output(&data, Wakeup::NoWakeup) {
                    Ok(()) => {
                        // A single producer may write into the zeroed space the pause
                        // does not read; a multi-producer ring refuses everything.
                        prop_assert!(!K::MULTI, "{}: a paused multi-producer ring took a record", ctx);
                        m.log.push((m.seq, len));
                        m.newest_committed = true;
                        m.seq += 1;
                    }
                    Err(e) => {
                        prop_assert_eq!(e, ReserveError::Paused { len }, "{}", ctx);
                        m.lost += 1;
                        m.paused += 1;
                    }
                }
                let again: Vec<Vec<u8>> = paused.iter().map(|r| r.to_vec()).collect();
                prop_assert!(again == held, "{}: a paused view changed", ctx);
                paused.resume();
            }
            Op::Reattach => {
                drop(p.take());
                p = Some(ring.producer().unwrap());
            }
            Op::Consume(_) | Op::Release | Op::Iter(_, _) => continue, // discard rings (the model has no overwrite reader)
        }
        let s = ring.stats();
        let counts = (s.committed, s.discarded, s.lost, s.refused_paused, s.too_large);
        let want = (m.log.len() as u64, m.discarded, m.lost, m.paused, m.too_large);
        prop_assert_eq!(counts, want, "{}: (committed, discarded, lost, refused_paused, too_large)", ctx);
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: 1000, max_shrink_iters: 4096, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mpsc_discard_follows_the_model(cap in prop::sample::select(vec![4096u64, 8192]), ops in prop::collection::vec(op_strategy(), 1..120)) {
        run_discard::<Mpsc>(cap, &ops)?;
    }

    #[test]
    fn spsc_discard_follows_the_model(cap in prop::sample::select(vec![4096u64, 8192]), ops in prop::collection::vec(op_strategy(), 1..120)) {
        run_discard::<Spsc>(cap, &ops)?;
    }

    #[test]
    fn mpsc_overwrite_follows_the_model(
        cap in prop::sample::select(vec![4096u64, 8192]),
        ahead in prop::sample::select(vec![0u64, 8, 256, 1024, 2048]),
        ops in prop::collection::vec(op_strategy(), 1..120),
    ) {
        run_overwrite::<Mpsc>(cap, ahead, &ops)?;
    }

    #[test]
    fn spsc_overwrite_follows_the_model(
        cap in prop::sample::select(vec![4096u64, 8192]),
        ahead in prop::sample::select(vec![0u64, 8, 256, 1024, 2048]),
        ops in prop::collection::vec(op_strategy(), 1..120),
    ) {
        run_overwrite::<Spsc>(cap, ahead, &ops)?;
    }
}
