//! The tree merge of [`ChannelReader::merge`] against the linear scan it replaced, as a
//! model: lanes with drawn staged timestamps, flags and bounds, drawn floors; the same
//! records must come out in the same order, and the same ones stay staged.

use std::collections::VecDeque;
use std::convert::Infallible;

use proptest::prelude::*;

use super::{ChannelReader, ChannelRecord};
use crate::clock::NoClock;
use crate::config::Discard;
use crate::Channel;

/// One lane as the merge sees it: staged timestamps (oldest first), `more`, `done`,
/// `broken`, `last_staged`.
#[derive(Clone, Debug)]
struct LaneDraw {
    ts: Vec<u64>,
    more: bool,
    done: bool,
    broken: bool,
    last_staged: u64,
}

fn lane() -> impl Strategy<Value = LaneDraw> {
    // Small timestamps, so that ties between lanes are common; each lane's in order
    // mostly, as producers stamp them, but not always (a hostile channel file).
    (prop::collection::vec(0u64..40, 0..12), any::<bool>(), any::<bool>(), any::<bool>(), 0u64..50, any::<bool>())
        .prop_map(|(mut ts, more, done, broken, last_staged, sorted)| {
            if sorted {
                ts.sort_unstable();
            }
            LaneDraw { ts, more, done, broken, last_staged }
        })
}

/// The linear scan: for every record, every lane is looked at (the merge before the
/// tree, kept as the specification).
fn model(lanes: &[LaneDraw], floor: Option<u64>) -> (Vec<(usize, u64)>, Vec<usize>) {
    let mut q: Vec<VecDeque<u64>> = lanes.iter().map(|l| l.ts.iter().copied().collect()).collect();
    let mut out = Vec::new();
    loop {
        let mut best: Option<(usize, u64)> = None;
        let mut horizon = u64::MAX;
        for (i, l) in lanes.iter().enumerate() {
            match (q[i].front(), floor) {
                (Some(&ts), _) => {
                    horizon = horizon.min(ts);
                    if best.is_none_or(|(_, b)| ts < b) {
                        best = Some((i, ts));
                    }
                }
                (None, Some(_)) if l.more && !l.broken => horizon = horizon.min(l.last_staged),
                (None, Some(floor)) if !l.done && !l.broken => horizon = horizon.min(floor),
                (None, _) => {}
            }
        }
        let Some((i, ts)) = best else { break };
        if ts > horizon {
            break;
        }
        q[i].pop_front();
        out.push((i, ts));
    }
    (out, q.iter().map(VecDeque::len).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_tree_merge_delivers_what_the_linear_scan_does(
        lanes in prop::collection::vec(lane(), 1..9),
        floor in prop::option::of(0u64..45),
    ) {
        let channel = Channel::<Discard, NoClock>::builder(4096).build(NoClock).unwrap();
        let producers: Vec<_> = lanes.iter().map(|_| channel.producer().unwrap()).collect();
        let mut reader: ChannelReader<Discard, NoClock> = channel.reader().unwrap();
        prop_assert_eq!(reader.lanes.len(), lanes.len());
        for (staged, l) in reader.lanes.iter_mut().zip(&lanes) {
            staged.q.recs = l.ts.iter().map(|&ts| (ts, 0)).collect();
            (staged.more, staged.done, staged.broken, staged.last_staged) = (l.more, l.done, l.broken, l.last_staged);
        }
        let mut got = Vec::new();
        let n = reader
            .merge(floor, &mut |rec: ChannelRecord<'_>| {
                // Lanes are in the order their producers were made: index = id.
                got.push((rec.producer as usize, rec.timestamp));
                Ok::<(), Infallible>(())
            })
            .unwrap();
        let (want, left) = model(&lanes, floor);
        prop_assert_eq!(n, want.len());
        prop_assert_eq!(got, want);
        let staged: Vec<usize> = reader.lanes.iter().map(|l| l.q.recs.len()).collect();
        prop_assert_eq!(staged, left);
        // The flags are the test's, not the rings': nothing is settled on drop.
        for l in &mut reader.lanes {
            l.q.recs.clear();
        }
        drop(reader);
        drop(producers);
    }
}
