//! [`Patience`]: a wait with a deadline (spin, then yield, then sleep); [`settle`]: read
//! a live ring's moving words until they agree.

use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

/// Rounds of `spin_loop` before a wait starts to yield.
#[cfg(not(loom))]
const SPIN_ROUNDS: u32 = 64;
/// How long a wait yields before it starts to sleep: short enough that a wait for a
/// preempted thread does not burn a core for long, long enough that a wait for a
/// thread that is running costs no system call beyond `sched_yield`.
#[cfg(not(loom))]
const YIELD_FOR: Duration = Duration::from_micros(200);
/// The first and the longest sleep of the sleeping phase (it doubles in between).
#[cfg(not(loom))]
const FIRST_SLEEP: Duration = Duration::from_micros(20);
#[cfg(not(loom))]
const LONGEST_SLEEP: Duration = Duration::from_millis(1);

/// A wait with a deadline: call [`Patience::wait`] each time the condition waited for
/// is found false; it waits a little (spinning, then yielding, then sleeping) and says
/// whether to look again. The clock is read only once the wait has begun, so a
/// condition that holds at the first look costs nothing.
#[derive(Debug)]
pub(crate) struct Patience {
    limit: Duration,
    round: u32,
    #[cfg(not(loom))]
    start: Option<Instant>,
    #[cfg(not(loom))]
    last_check: Duration,
    /// Sleeps taken so far (each doubles the next, up to `LONGEST_SLEEP`).
    #[cfg(not(loom))]
    naps: u32,
    #[cfg(loom)]
    loom_rounds: u32,
}

impl Patience {
    /// A wait that gives up once `limit` has passed since its first [`wait`](Self::wait).
    #[inline]
    pub(crate) fn new(limit: Duration) -> Self {
        Patience {
            limit,
            round: 0,
            #[cfg(not(loom))]
            start: None,
            #[cfg(not(loom))]
            last_check: Duration::ZERO,
            #[cfg(not(loom))]
            naps: 0,
            #[cfg(loom)]
            loom_rounds: 3,
        }
    }

    /// Under loom, the number of rounds after which the wait gives up (3 unless set);
    /// no effect otherwise.
    #[inline]
    #[cfg_attr(not(loom), allow(unused_variables, unused_mut))]
    pub(crate) fn loom_rounds(mut self, rounds: u32) -> Self {
        #[cfg(loom)]
        {
            self.loom_rounds = rounds;
        }
        self
    }

    /// Time since the first wait (zero before it, and always under loom).
    #[inline]
    pub(crate) fn elapsed(&self) -> Duration {
        #[cfg(not(loom))]
        {
            self.start.map_or(Duration::ZERO, |s| s.elapsed())
        }
        #[cfg(loom)]
        {
            Duration::ZERO
        }
    }

    /// Waits a little: spins for the first rounds, then yields, then sleeps (never past
    /// the deadline). False, without waiting, once the deadline has passed.
    pub(crate) fn wait(&mut self) -> bool {
        self.round = self.round.saturating_add(1);
        #[cfg(loom)]
        {
            self.loom_round()
        }
        #[cfg(not(loom))]
        {
            let start = *self.start.get_or_insert_with(Instant::now);
            if self.round <= SPIN_ROUNDS {
                std::hint::spin_loop();
                return true;
            }
            let elapsed = start.elapsed();
            let Some(left) = self.limit.checked_sub(elapsed).filter(|l| !l.is_zero()) else {
                return false;
            };
            if elapsed < YIELD_FOR {
                std::thread::yield_now();
            } else {
                let nap = FIRST_SLEEP.saturating_mul(1 << self.naps.min(16)).min(LONGEST_SLEEP);
                self.naps += 1;
                std::thread::sleep(nap.min(left));
            }
            true
        }
    }

    /// Spins for `spin_for`, then goes on spinning with a yield every 16 rounds (never
    /// sleeps: for producers, which wait only briefly); false once the deadline has
    /// passed. Reads the clock every 16 rounds.
    pub(crate) fn spin_then_yield(&mut self, spin_for: Duration) -> bool {
        self.round = self.round.saturating_add(1);
        #[cfg(loom)]
        {
            let _ = spin_for;
            self.loom_round()
        }
        #[cfg(not(loom))]
        {
            let start = *self.start.get_or_insert_with(Instant::now);
            if self.round % 16 != 0 {
                std::hint::spin_loop();
                return true;
            }
            let e = start.elapsed();
            if e >= self.limit {
                return false;
            }
            if e >= spin_for {
                std::thread::yield_now();
            }
            true
        }
    }

    /// A round under loom: a loom yield (so that the model can run the thread waited
    /// for), until `loom_rounds` have passed.
    #[cfg(loom)]
    fn loom_round(&mut self) -> bool {
        if self.round > self.loom_rounds {
            return false;
        }
        crate::sync::yield_now();
        true
    }

    /// True at most once per `period` of waiting (measured from the first wait): for
    /// checks too costly to make at every round, such as whether a process waited for
    /// died. Never under loom (the models check for dead processes explicitly).
    pub(crate) fn every(&mut self, period: Duration) -> bool {
        #[cfg(loom)]
        {
            let _ = period;
            false
        }
        #[cfg(not(loom))]
        {
            let now = self.elapsed();
            if now >= self.last_check + period {
                self.last_check = now;
                true
            } else {
                false
            }
        }
    }
}

/// How long [`settle`] reads a live ring's moving words again before it reports them.
pub(crate) const SETTLE_WAIT: Duration = Duration::from_millis(100);

/// Reads words that other processes move, one after the other, until a reading is
/// consistent. `read` returns the reading and, if it is inconsistent, why.
///
/// A reading taken while the words move can contradict itself (one word read before a
/// move, the next after it); a state that really is inconsistent stays put. So the
/// words are read again while they move, and an inconsistent reading is reported as
/// soon as the next reading equals it (nothing moved in between: the state itself is
/// inconsistent), or once [`SETTLE_WAIT`] has passed (a writer that never stops moving
/// them, such as a hostile process, cannot hold the reader for longer). The number of
/// readings thus depends on how often the words moved, not on how fast a yield is.
pub(crate) fn settle<T: PartialEq, E>(mut read: impl FnMut() -> Result<(T, Option<E>), E>) -> Result<T, E> {
    let mut patience = Patience::new(SETTLE_WAIT);
    let mut last: Option<T> = None;
    loop {
        let (reading, why) = read()?;
        let Some(why) = why else { return Ok(reading) };
        if last.as_ref() == Some(&reading) || !patience.wait() {
            return Err(why);
        }
        last = Some(reading);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn gives_up_at_the_deadline_whatever_a_round_costs() {
        let limit = Duration::from_millis(30);
        let t = Instant::now();
        let mut p = Patience::new(limit);
        let mut rounds = 0u64;
        while p.wait() {
            rounds += 1;
        }
        let took = t.elapsed();
        assert!(took >= limit, "gave up after {took:?}, before the {limit:?} deadline ({rounds} rounds)");
        // Not a speed assertion: only that the wait ended (a loaded machine may
        // oversleep the last nap, never by seconds).
        assert!(took < limit + Duration::from_secs(5), "gave up only after {took:?}");
        assert!(!p.wait(), "stays expired");
    }

    #[test]
    fn spin_then_yield_gives_up_at_the_deadline() {
        let limit = Duration::from_millis(2);
        let t = Instant::now();
        let mut p = Patience::new(limit);
        while p.spin_then_yield(Duration::from_micros(20)) {}
        assert!(t.elapsed() >= limit);
    }

    #[test]
    fn a_zero_limit_spins_first_then_gives_up() {
        let mut p = Patience::new(Duration::ZERO);
        for _ in 0..SPIN_ROUNDS {
            assert!(p.wait(), "the spin phase is not cut short");
        }
        assert!(!p.wait());
    }

    #[test]
    fn settle_reports_a_reading_that_stays_inconsistent_at_once() {
        let mut reads = 0;
        let r: Result<u32, String> = settle(|| {
            reads += 1;
            Ok((7, Some("seven is odd".to_owned())))
        });
        assert_eq!(r.unwrap_err(), "seven is odd");
        assert_eq!(reads, 2, "the second, equal, reading decides");
    }

    #[test]
    fn settle_reads_again_while_the_words_move() {
        let mut n = 0u32;
        let r: Result<u32, String> = settle(|| {
            n += 1;
            Ok((n, (n < 5).then(|| format!("{n} is moving"))))
        });
        assert_eq!(r, Ok(5));
    }

    #[test]
    fn settle_gives_up_on_words_that_never_stop_moving() {
        let t = Instant::now();
        let mut n = 0u64;
        let r: Result<u64, String> = settle(|| {
            n += 1;
            Ok((n, Some("moving".to_owned())))
        });
        assert_eq!(r.unwrap_err(), "moving");
        assert!(t.elapsed() >= SETTLE_WAIT);
    }

    #[test]
    fn every_fires_once_per_period() {
        let mut p = Patience::new(Duration::from_secs(10));
        assert!(!p.every(Duration::from_millis(5)), "not before the first period");
        p.wait();
        std::thread::sleep(Duration::from_millis(6));
        assert!(p.every(Duration::from_millis(5)));
        // Measured from that check, not from the start (an hour: however long this
        // thread is preempted here, it is not an hour).
        assert!(!p.every(Duration::from_secs(3600)), "not twice in one period");
    }
}
