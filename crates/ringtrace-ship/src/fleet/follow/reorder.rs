//! The hold queue of a followed topic put in time order ([`Follow::reorder`]).
//!
//! Each record is held `window` after it arrived, then handed out if no record held is
//! older: out comes the oldest record held, as long as it has waited its window. A
//! source's batches arrive a round at a time, and agents' rounds interleave, so a
//! window longer than an agent's round (plus the network) puts the records of every
//! host in time order; a record that arrives later than that, older than one already
//! handed out, is handed out when its window passes and counted late.
//!
//! [`Follow::reorder`]: super::Follow::reorder

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use super::super::timeline::Entry;

/// At most this many bytes of records are held: past it the oldest record is handed
/// out before its window passes (a window too long for the rate).
pub(super) const MAX_HELD_BYTES: usize = 256 << 20;

/// A record held, owned.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    time_ns: u64,
    /// Arrival order: ties in time go out as they came.
    order: u64,
    due: Instant,
    host: String,
    source: String,
    seq: u64,
    payload: Vec<u8>,
}

/// The records held, oldest first out.
#[derive(Debug)]
pub(super) struct Reorder {
    window: Duration,
    heap: BinaryHeap<Reverse<Held>>,
    bytes: usize,
    order: u64,
    /// The time of the last record handed out.
    last_ns: u64,
    /// Records handed out older than one handed out before them.
    pub late: u64,
}

impl Reorder {
    pub fn new(window: Duration) -> Reorder {
        Reorder { window, heap: BinaryHeap::new(), bytes: 0, order: 0, last_ns: 0, late: 0 }
    }

    /// Holds `e`, arrived at `now`.
    pub fn push(&mut self, e: &Entry<'_>, now: Instant) {
        self.order += 1;
        self.bytes += e.payload.len() + e.host.len() + e.source.len();
        self.heap.push(Reverse(Held {
            time_ns: e.time_ns,
            order: self.order,
            due: now + self.window,
            host: e.host.to_owned(),
            source: e.source.to_owned(),
            seq: e.seq,
            payload: e.payload.to_vec(),
        }));
    }

    /// When the oldest record held is due, if any is held.
    pub fn next_due(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(h)| h.due)
    }

    /// Hands out, oldest first, the records due at `now` (all of them with `all`), and
    /// those past the byte bound; how many.
    pub fn release<E>(
        &mut self,
        now: Instant,
        all: bool,
        each: &mut impl FnMut(Entry<'_>) -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut n = 0;
        // Bounded: each turn takes a record out of the heap.
        while let Some(Reverse(top)) = self.heap.peek() {
            if !all && top.due > now && self.bytes <= MAX_HELD_BYTES {
                break;
            }
            let Some(Reverse(h)) = self.heap.pop() else { break };
            self.bytes -= h.payload.len() + h.host.len() + h.source.len();
            if h.time_ns < self.last_ns {
                self.late += 1;
            }
            self.last_ns = self.last_ns.max(h.time_ns);
            n += 1;
            each(Entry { host: &h.host, source: &h.source, seq: h.seq, time_ns: h.time_ns, payload: &h.payload })?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Records arriving at drawn moments with drawn times: each goes out once; the
        /// late count is the records that went out older than one before them; and
        /// where no record arrived a window or more after a newer one, none is late.
        #[test]
        fn records_go_out_once_in_time_order_unless_later_than_the_window(
            mut recs in prop::collection::vec((0u64..1_000, 0u64..2_000), 0..60),
            window_ms in 1u64..500,
        ) {
            recs.sort_by_key(|&(_, arrival)| arrival);
            let base = Instant::now();
            let window = Duration::from_millis(window_ms);
            let mut r = Reorder::new(window);
            let mut out: Vec<u64> = Vec::new();
            let mut take = |e: Entry<'_>| -> Result<(), ()> {
                out.push(e.seq);
                Ok(())
            };
            for (i, &(time, arrival)) in recs.iter().enumerate() {
                let now = base + Duration::from_millis(arrival);
                r.release(now, false, &mut take).unwrap();
                let payload = time.to_le_bytes();
                let e = Entry { host: "h", source: "s", seq: i as u64, time_ns: time, payload: &payload };
                r.push(&e, now);
            }
            r.release(base, true, &mut take).unwrap();
            let mut seen = out.clone();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..recs.len() as u64).collect::<Vec<_>>());
            let times: Vec<u64> = out.iter().map(|&i| recs[i as usize].0).collect();
            let mut newest = 0;
            let late = times.iter().filter(|&&t| { let l = t < newest; newest = newest.max(t); l }).count() as u64;
            prop_assert_eq!(r.late, late);
            let in_window = recs.iter().enumerate().all(|(j, &(tj, aj))| {
                recs[..j].iter().all(|&(ti, ai)| tj >= ti || aj - ai < window_ms)
            });
            if in_window {
                prop_assert_eq!(late, 0, "{:?}", times);
            }
        }
    }
}
