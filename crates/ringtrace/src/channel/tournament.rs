//! A loser tree (Knuth, *The Art of Computer Programming* vol. 3, 5.4.1, "tree of
//! losers"): the channel merge's priority queue of lanes, keyed by each lane's oldest
//! staged timestamp.
//!
//! Why not `std`'s `BinaryHeap`: in the merge's worst case (producers whose records
//! alternate in time), the lane just delivered from goes to the bottom of the heap on
//! every record, and each level of a binary heap's sift compares two children and
//! branches on data the predictor cannot guess. A loser tree replays the one changed
//! leaf up to the root with one comparison a level, and here without a branch: each
//! node holds the losing key itself (not a lane index), so a level is a load, a
//! minimum and a maximum of two `u128`s, and a store. On the 2-core VM, at 256
//! producers whose records alternate, the reader's CPU time a record fell from 98 ns
//! with the heap to 58 ns (docs/benchmark.md, `scale-merge`).
//!
//! A key is `timestamp << 32 | lane`: keys are unique, their order is (timestamp, lane
//! index), the order of the linear scan the merge replaced, and the lane is the key's
//! low 32 bits. A lane with nothing staged is [`EMPTY`], above every real key.

/// The key of a lane with nothing staged: above every `(timestamp, lane)` key.
const EMPTY: u128 = u128::MAX;

/// The key of lane `lane`'s record stamped `ts`.
fn key(ts: u64, lane: usize) -> u128 {
    debug_assert!(lane <= u32::MAX as usize, "a channel has fewer than 2^32 lanes (a ring each)");
    u128::from(ts) << 32 | lane as u128
}

/// A loser tree over lanes `0..n`, rebuilt for each merge (O(n)); replacing the
/// smallest key costs O(log n).
#[derive(Default)]
pub(super) struct Tournament {
    /// Leaves, a power of two (at least `n`; the padding is [`EMPTY`]).
    width: usize,
    /// `losers[v]` for internal node `v` in `1..width` (children `2v`, `2v + 1`; leaf
    /// `j` is node `width + j`): the larger of the two keys that met there.
    losers: Vec<u128>,
    /// Scratch for [`Self::build`]: the winners of every node.
    winners: Vec<u128>,
    /// The smallest key.
    top: u128,
}

impl Tournament {
    /// Builds the tree over `leaves`, lane `j`'s oldest staged timestamp or `None`.
    pub(super) fn build(&mut self, leaves: impl ExactSizeIterator<Item = Option<u64>>) {
        let width = leaves.len().next_power_of_two();
        self.width = width;
        self.winners.clear();
        self.winners.resize(2 * width, EMPTY);
        for (j, ts) in leaves.enumerate() {
            self.winners[width + j] = ts.map_or(EMPTY, |ts| key(ts, j));
        }
        self.losers.clear();
        self.losers.resize(width, EMPTY);
        for v in (1..width).rev() {
            let (a, b) = (self.winners[2 * v], self.winners[2 * v + 1]);
            self.winners[v] = a.min(b);
            self.losers[v] = a.max(b);
        }
        // Node 1 is the root (with one leaf, `width` 1, the leaf itself).
        self.top = self.winners[1];
    }

    /// The smallest key as `(timestamp, lane)`; `None` when every lane is empty.
    pub(super) fn top(&self) -> Option<(u64, usize)> {
        (self.top != EMPTY).then(|| ((self.top >> 32) as u64, (self.top & u128::from(u32::MAX)) as usize))
    }

    /// Replaces the top lane's key with its next timestamp (`None`: it has nothing
    /// staged now) and finds the new smallest key: one comparison per level, on the
    /// path from that lane's leaf to the root.
    pub(super) fn replace_top(&mut self, next: Option<u64>) {
        let Some((_, lane)) = self.top() else { return };
        let mut w = next.map_or(EMPTY, |ts| key(ts, lane));
        let mut v = (self.width + lane) / 2;
        while v >= 1 {
            let l = self.losers[v];
            // Branch-free: the smaller key goes on up, the larger stays.
            self.losers[v] = l.max(w);
            w = l.min(w);
            v /= 2;
        }
        self.top = w;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::Tournament;

    proptest! {
        /// Against a sorted set as the model: lanes with drawn staged timestamps (ties
        /// common), replaced one top at a time; the same `(timestamp, lane)` comes out
        /// first every time, and the tree empties when the model does.
        #[test]
        fn the_top_is_the_smallest_timestamp_then_lowest_lane(
            lanes in prop::collection::vec(prop::collection::vec(0u64..20, 0..8), 1..70),
        ) {
            let mut queues: Vec<std::collections::VecDeque<u64>> =
                lanes.iter().map(|l| l.iter().copied().collect()).collect();
            let mut model: BTreeSet<(u64, usize)> =
                queues.iter().enumerate().filter_map(|(j, q)| q.front().map(|&ts| (ts, j))).collect();
            let mut t = Tournament::default();
            t.build(queues.iter().map(|q| q.front().copied()));
            let total: usize = lanes.iter().map(Vec::len).sum();
            for _ in 0..total {
                let first = model.pop_first();
                prop_assert_eq!(t.top(), first);
                let (_, j) = first.unwrap();
                queues[j].pop_front();
                let next = queues[j].front().copied();
                if let Some(ts) = next {
                    model.insert((ts, j));
                }
                t.replace_top(next);
            }
            prop_assert_eq!(t.top(), None);
        }
    }

    #[test]
    fn extreme_timestamps_and_a_single_lane() {
        let mut t = Tournament::default();
        t.build([Some(u64::MAX)].into_iter());
        assert_eq!(t.top(), Some((u64::MAX, 0)));
        t.replace_top(Some(0));
        assert_eq!(t.top(), Some((0, 0)));
        t.replace_top(None);
        assert_eq!(t.top(), None);
        t.build([None, Some(u64::MAX), Some(u64::MAX)].into_iter());
        assert_eq!(t.top(), Some((u64::MAX, 1)));
        t.replace_top(None);
        assert_eq!(t.top(), Some((u64::MAX, 2)));
        t.build(std::iter::empty());
        assert_eq!(t.top(), None);
    }
}
