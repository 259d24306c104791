//! The timeline against a simple model: each (host, source, sequence) once, in
//! sequence order per source, merged by time; copies and gaps counted.

use proptest::prelude::*;

use super::*;
use crate::frame::{BatchWriter, TimeSource};

fn batch(host: &str, source: &str, first: u64, recs: &[(u64, &[u8])]) -> Vec<u8> {
    let mut w = BatchWriter::new(host, source, first, TimeSource::Drained, 0).unwrap();
    for (t, p) in recs {
        w.push(*t, p).unwrap();
    }
    w.finish()
}

#[test]
fn copies_are_dropped_and_counted_and_gaps_counted() {
    let mut t = Timeline::new();
    t.push(&batch("h", "a", 0, &[(10, b"0"), (11, b"1")])).unwrap();
    t.push(&batch("h", "a", 1, &[(11, b"1"), (12, b"2")])).unwrap(); // sent again, overlapping
    t.push(&batch("h", "a", 5, &[(20, b"5")])).unwrap(); // 3 and 4 never came
    assert!(t.push(b"not a batch").is_err());
    let f = t.finish();
    let s = f.stats();
    assert_eq!((s.batches, s.records, s.duplicates, s.missing, s.damaged), (3, 4, 1, 2, 1));
    let seqs: Vec<u64> = f.source("h", "a").map(|e| e.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 5]);
    assert_eq!(f.source("h", "a").nth(2).unwrap().payload, b"2");
}

#[test]
fn the_timeline_merges_sources_by_time_and_keeps_each_in_order() {
    let mut t = Timeline::new();
    t.push(&batch("h2", "x", 0, &[(5, b"a"), (1, b"b"), (9, b"c")])).unwrap(); // steps back
    t.push(&batch("h1", "y", 7, &[(2, b"d"), (6, b"e")])).unwrap();
    let f = t.finish();
    let got: Vec<(&str, u64, u64)> = f.timeline().map(|e| (e.host, e.seq, e.time_ns)).collect();
    assert_eq!(got, [("h1", 7, 2), ("h2", 0, 5), ("h2", 1, 1), ("h1", 8, 6), ("h2", 2, 9)]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Sources cut into batches at random, some batches sent twice or dropped, all
    /// shuffled: the timeline has each record once, each source in order, and counts
    /// the copies and the gaps the model predicts.
    #[test]
    fn any_batches_in_any_order_give_each_record_once(
        lens in proptest::collection::vec(1usize..40, 1..4),
        cuts in proptest::collection::vec(1usize..6, 40),
        fate in proptest::collection::vec(0u8..6, 40),
        order in any::<prop::sample::Index>(),
    ) {
        let mut messages = Vec::new();
        let mut expect = Vec::new();
        let mut duplicates = 0u64;
        let mut c = 0;
        for (src, &n) in lens.iter().enumerate() {
            let name = format!("s{src}");
            let mut seq = 0;
            let mut kept: Vec<u64> = Vec::new();
            while seq < n as u64 {
                let k = cuts[c % cuts.len()].min(n - seq as usize) as u64;
                let f = fate[c % fate.len()];
                c += 1;
                let recs: Vec<(u64, Vec<u8>)> = (seq..seq + k).map(|i| (i * 3 + src as u64, i.to_le_bytes().to_vec())).collect();
                let refs: Vec<(u64, &[u8])> = recs.iter().map(|(t, p)| (*t, &p[..])).collect();
                let m = batch("h", &name, seq, &refs);
                // 0: dropped (unless it is the source's first batch), 1: sent twice.
                if f != 0 || seq == 0 {
                    kept.extend(seq..seq + k);
                    messages.push(m.clone());
                    if f == 1 {
                        messages.push(m);
                        duplicates += k;
                    }
                }
                seq += k;
            }
            expect.push((name, kept));
        }
        let shift = order.index(messages.len());
        messages.rotate_left(shift);
        let mut t = Timeline::new();
        for m in &messages {
            prop_assert!(t.push(m).is_ok());
        }
        let f = t.finish();
        let mut missing = 0;
        for (name, kept) in &expect {
            let got: Vec<u64> = f.source("h", name).map(|e| e.seq).collect();
            prop_assert_eq!(&got, kept);
            for e in f.source("h", name) {
                prop_assert_eq!(e.payload, &e.seq.to_le_bytes()[..]);
            }
            missing += kept.windows(2).map(|w| w[1] - w[0] - 1).sum::<u64>();
            // A dropped batch at the end of a source is not a gap (nothing follows it).
        }
        prop_assert_eq!(f.stats().duplicates, duplicates);
        prop_assert_eq!(f.stats().missing, missing);
        let merged: Vec<u64> = f.timeline().map(|e| e.time_ns).collect();
        prop_assert!(merged.windows(2).all(|w| w[0] <= w[1]), "times within a source rise here, so the merge is sorted");
        prop_assert_eq!(merged.len() as u64, f.stats().records);
    }
}
