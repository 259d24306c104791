//! [`State`]: a ring's positions and counters, read and checked against each other.

use super::header::RingMode;
use crate::format::control::{LOCK, PAUSED};
use crate::format::offsets::{self as f, u32_at, u64_at};

/// A ring's positions and counters at one moment ([`crate::inspect::RingFile::state`]).
///
/// Positions are byte positions since the ring was created. The words are read with
/// plain reads while producers may write them, so counters can be a little apart from
/// each other; the positions are checked (and read again while they disagree).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct State {
    /// End of the newest reservation (overwrite mode: with the pause bit cleared).
    pub producer_pos: u64,
    /// Overwrite mode: the ring is paused (reservations are refused).
    pub paused: bool,
    /// Single-producer rings: pid of the process holding the producer (0: none).
    pub producer_attached: u32,
    /// Everything before it is handed back to producers (discard mode; may lie inside
    /// a record).
    pub consumer_pos: u64,
    /// The consumer's read position: a record boundary, everything before it consumed.
    pub consumer_read: u64,
    /// Pid of the process holding the consumer (0: none).
    pub consumer_attached: u32,
    /// Overwrite mode: the oldest record not overwritten.
    pub over_pos: u64,
    /// Overwrite mode: committed records before `over_pos`, given up to make room
    /// (read or not): [`Stats::overwritten`](crate::Stats::overwritten).
    pub overwritten: u64,
    /// The end of the zeroed free space (lock bit cleared): overwrite rings and
    /// multi-producer discard rings (a single producer in discard mode keeps its own).
    pub zeroed: u64,
    /// Overwrite mode: bit 0 of `zeroed`, the hint that the retire lock is held (by a
    /// retiring producer or a pause); the lock itself is `lock_pid`.
    pub retire_locked: bool,
    /// Overwrite mode: the retire lock, the pid of its holder with bit 31 set if the
    /// holder is pausing the ring (0: free).
    pub lock_pid: u32,
    /// Records committed, summed over all producer slots.
    pub committed: u64,
    /// Records discarded by their producers.
    pub discarded: u64,
    /// Reservations refused for want of room (full, unfinished record, or paused).
    pub lost: u64,
    /// Of `lost`: refused because the ring was paused.
    pub refused_paused: u64,
    /// Reservations refused because the record could never fit.
    pub too_large: u64,
    /// Committed records the consumer delivered.
    pub consumed: u64,
    /// Discarded records the consumer skipped.
    pub skipped: u64,
    /// Overwrite mode: of `overwritten`, the records the consumer never read
    /// ([`Stats::overwritten_unread`](crate::Stats::overwritten_unread)).
    pub overwritten_unread: u64,
    /// Reservations of dead producer processes that were stepped over.
    pub dead: u64,
    /// The producer counter slots owned by a process now.
    pub producers: Vec<SlotInfo>,
}

/// A producer counter slot with an owner ([`State::producers`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlotInfo {
    /// The slot's index.
    pub slot: usize,
    /// The owner: the pid of the process holding the producer handle.
    pub owner: u64,
    /// Records this slot counted as committed (over all its owners).
    pub committed: u64,
}

impl State {
    /// The positions of the records the ring holds now: `[consumer_read, producer_pos)`
    /// in discard mode (records not consumed yet), `[over_pos, producer_pos)` in
    /// overwrite mode. At most a capacity long.
    pub fn window(&self, mode: RingMode) -> (u64, u64) {
        match mode {
            RingMode::Discard => (self.consumer_read, self.producer_pos),
            RingMode::Overwrite => (self.over_pos, self.producer_pos),
        }
    }

    /// Number of producer handles attached: counter slots with an owner (for a
    /// single-producer ring, whether its producer is attached).
    pub fn attached_producers(&self) -> usize {
        if self.producers.is_empty() && self.producer_attached != 0 {
            1
        } else {
            self.producers.len()
        }
    }

    pub(super) fn from_block(block: &[u8], producer_line: &[u8], mode: RingMode) -> State {
        let raw_p = u64_at(producer_line, f::PRODUCER_POS_AT - f::PRODUCER_LINE_AT);
        let (producer_pos, paused) = match mode {
            RingMode::Overwrite => (raw_p & !PAUSED, raw_p & PAUSED != 0),
            RingMode::Discard => (raw_p, false),
        };
        let zeroed = u64_at(block, f::ZEROED_AT);
        let mut s = State {
            producer_pos,
            paused,
            producer_attached: u32_at(producer_line, f::PRODUCER_ATTACHED_AT - f::PRODUCER_LINE_AT),
            consumer_pos: u64_at(block, f::CONSUMER_POS_AT),
            consumer_read: u64_at(block, f::CONSUMER_READ_AT),
            consumer_attached: u32_at(block, f::CONSUMER_ATTACHED_AT),
            over_pos: u64_at(block, f::OVER_POS_AT),
            overwritten: u64_at(block, f::RETIRED_AT),
            zeroed: zeroed & !LOCK,
            retire_locked: zeroed & LOCK != 0,
            lock_pid: u32_at(block, f::LOCK_PID_AT),
            consumed: u64_at(block, f::CONSUMED_AT),
            skipped: u64_at(block, f::SKIPPED_AT),
            overwritten_unread: u64_at(block, f::OVERWRITTEN_AT),
            dead: u64_at(block, f::DEAD_AT),
            ..State::default()
        };
        // The overflow line (index None) and every slot; hostile values saturate.
        let lines = std::iter::once((None, f::OVERFLOW_AT))
            .chain((0..f::N_COUNTER_SLOTS).map(|i| (Some(i), f::SLOTS_AT + i * f::SLOT_LEN)));
        for (slot, at) in lines {
            let get = |field: usize| u64_at(block, at + field);
            s.committed = s.committed.saturating_add(get(f::COMMITTED_AT));
            s.discarded = s.discarded.saturating_add(get(f::DISCARDED_AT));
            s.lost = s.lost.saturating_add(get(f::LOST_AT));
            s.refused_paused = s.refused_paused.saturating_add(get(f::PAUSED_AT));
            s.too_large = s.too_large.saturating_add(get(f::TOO_LARGE_AT));
            let owner = get(f::OWNER_AT);
            if let (Some(slot), true) = (slot, owner != 0) {
                s.producers.push(SlotInfo { slot, owner, committed: get(f::COMMITTED_AT) });
            }
        }
        s
    }

    /// Checks the positions against each other and the capacity; the message says what
    /// is wrong.
    pub(super) fn check(&self, mode: RingMode, capacity: u64) -> Result<(), String> {
        let p = self.producer_pos;
        let named = [("producer", p), ("consumer", self.consumer_pos), ("consumer read", self.consumer_read)];
        let over = [("overwrite", self.over_pos)];
        let all = named.iter().chain(if mode == RingMode::Overwrite { &over[..] } else { &[] });
        for &(name, pos) in all {
            if pos % 8 != 0 {
                return Err(format!("{name} position {pos} is not a multiple of 8"));
            }
            if pos > p {
                return Err(format!("{name} {pos} is past producer {p}"));
            }
        }
        let (start, what) = match mode {
            RingMode::Discard => {
                if self.consumer_pos > self.consumer_read {
                    return Err(format!(
                        "consumer {} is past its read position {}",
                        self.consumer_pos, self.consumer_read
                    ));
                }
                (self.consumer_pos, "consumer")
            }
            RingMode::Overwrite => (self.over_pos, "overwrite position"),
        };
        if p - start > capacity {
            return Err(format!("producer {p} is more than the capacity {capacity} past the {what} {start}"));
        }
        Ok(())
    }
}

/// `State` against `Stats`, the definition of a ring's counters: every counter under the
/// same name, except where `STATS_IN_STATE` says otherwise, with the same value.
#[cfg(all(test, not(loom)))]
mod mirror {
    use std::collections::{BTreeMap, BTreeSet};

    use crate::inspect::{RingFile, RingMode};
    use crate::{FlightRecorder, MpscRing, Stats, Wakeup};

    use super::State;

    /// Each of `Stats`' fields, in order, and the `State` field holding the same value
    /// (`None`: `State` has none). The names differ only where this says so.
    const STATS_IN_STATE: &[(&str, Option<&str>)] = &[
        ("committed", Some("committed")),
        ("discarded", Some("discarded")),
        ("lost", Some("lost")),
        ("refused_paused", Some("refused_paused")),
        ("overwritten", Some("overwritten")),
        ("overwritten_unread", Some("overwritten_unread")),
        ("dead", Some("dead")),
        // The control block's word.
        ("overwrite_pos", Some("over_pos")),
        ("too_large", Some("too_large")),
        ("consumed", Some("consumed")),
        ("skipped", Some("skipped")),
        // `Stats::consumer_pos` is the consumer's read position; `State::consumer_pos` is
        // the position space is handed back from (behind it in discard mode).
        ("consumer_pos", Some("consumer_read")),
        ("producer_pos", Some("producer_pos")),
        // `producer_pos` less the later of `consumer_read` and `over_pos`.
        ("available", None),
        // The header's (`Header::capacity`).
        ("capacity", None),
    ];

    /// `State`'s fields that are none of `Stats`': the ring's other words.
    const STATE_ONLY: &[&str] = &[
        "paused",
        "producer_attached",
        "consumer_pos",
        "consumer_attached",
        "zeroed",
        "retire_locked",
        "lock_pid",
        "producers",
    ];

    /// The fields of a struct's `{:?}` text, in order, with their values' text.
    fn fields(debug: &str) -> Vec<(String, String)> {
        let body = &debug[debug.find('{').expect("a struct") + 1..debug.rfind('}').expect("a struct")];
        let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
        for (i, c) in body.char_indices().chain(std::iter::once((body.len(), ','))) {
            match c {
                '[' | '{' | '(' => depth += 1,
                ']' | '}' | ')' => depth -= 1,
                ',' if depth == 0 => {
                    let part = body[start..i].trim();
                    start = i + 1;
                    if let Some((name, value)) = part.split_once(": ") {
                        out.push((name.to_owned(), value.to_owned()));
                    }
                }
                _ => {}
            }
        }
        out
    }

    fn names(debug: &str) -> Vec<String> {
        fields(debug).into_iter().map(|(n, _)| n).collect()
    }

    #[test]
    fn state_names_every_counter_of_stats_one_to_one() {
        let stats: Vec<&str> = STATS_IN_STATE.iter().map(|(s, _)| *s).collect();
        assert_eq!(names(&format!("{:?}", Stats::default())), stats, "Stats' fields and the table differ");
        let state = names(&format!("{:?}", State::default()));
        let unique: BTreeSet<&str> = state.iter().map(String::as_str).collect();
        assert_eq!(unique.len(), state.len());
        let mapped: Vec<&str> = STATS_IN_STATE.iter().filter_map(|(_, s)| *s).collect();
        let expected: BTreeSet<&str> = mapped.iter().chain(STATE_ONLY).copied().collect();
        assert_eq!(expected.len(), mapped.len() + STATE_ONLY.len(), "a State field is listed twice");
        assert_eq!(unique, expected, "State's fields and the table differ");
    }

    /// Every counter `Stats` and `State` share has the same value in both, for a ring
    /// whose counters are not all zero.
    fn same_values(stats: Stats, state: &State, capacity: u64) {
        let stats_fields: BTreeMap<String, String> = fields(&format!("{stats:?}")).into_iter().collect();
        let state_fields: BTreeMap<String, String> = fields(&format!("{state:?}")).into_iter().collect();
        for (name, in_state) in STATS_IN_STATE {
            if let Some(field) = in_state {
                assert_eq!(stats_fields[*name], state_fields[*field], "Stats::{name} and State::{field} differ");
            }
        }
        assert_eq!(stats.available, state.producer_pos - state.consumer_read.max(state.over_pos));
        assert_eq!(stats.capacity, capacity);
    }

    fn temp(name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("ringtrace-mirror-{name}-{}.ring", std::process::id()));
        let _ = std::fs::remove_file(&path);
        path
    }

    #[test]
    fn state_and_stats_agree_on_a_discard_ring() {
        let path = temp("discard");
        let ring = MpscRing::builder(4096).create(&path).unwrap();
        let mut p = ring.producer().unwrap();
        for i in 0..5u8 {
            p.output(&[i; 24], Wakeup::Default).unwrap();
        }
        p.reserve(16).unwrap().discard();
        assert!(p.output(&[0; 8192], Wakeup::Default).is_err());
        let mut c = ring.consumer().unwrap();
        assert_eq!(c.consume_n(3, |_: &[u8]| ()).unwrap(), 3);
        let file = RingFile::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(file.header().mode, RingMode::Discard);
        let (stats, state) = (ring.stats(), file.state().unwrap());
        assert_eq!((stats.committed, stats.discarded, stats.too_large, stats.consumed), (5, 1, 1, 3));
        same_values(stats, &state, file.header().capacity);
    }

    #[test]
    fn state_and_stats_agree_on_an_overwrite_ring() {
        let path = temp("overwrite");
        let ring = FlightRecorder::builder(4096).create(&path).unwrap();
        let mut p = ring.producer().unwrap();
        for i in 0..400u32 {
            p.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
        }
        p.reserve(16).unwrap().discard();
        let paused = ring.pause().unwrap();
        for _ in 0..2 {
            assert!(p.output(b"refused", Wakeup::Default).is_err());
        }
        paused.resume();
        let mut c = ring.consumer().unwrap();
        assert!(c.consume_n(7, |_: &[u8]| ()).unwrap() > 0);
        let file = RingFile::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(file.header().mode, RingMode::Overwrite);
        let (stats, state) = (ring.stats(), file.state().unwrap());
        assert_eq!((stats.refused_paused, stats.lost), (2, 2));
        assert!(stats.overwritten > 0 && stats.overwrite_pos > 0, "{stats:?}");
        same_values(stats, &state, file.header().capacity);
    }
}
