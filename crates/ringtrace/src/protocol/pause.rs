//! Pausing an overwrite ring: producers are refused (and count it) while a reader reads
//! the ring in place; the pause waits for the retire lock and for records being
//! written, up to a time limit.
//!
//! # What a pause guarantees, and what it costs producers
//!
//! On `Ok`, every record claimed before the pause, in `[over_pos, prod)`, is finished
//! (committed, discarded, or left by a dead producer): a reader of the paused ring reads
//! final bytes in place. A record can be BUSY anywhere in that span (a producer preempted
//! between reserve and commit holds it until the ring wraps onto it), and no counter in
//! the control block says whether one is, so the headers are walked. Walking them while
//! producers are refused would refuse them for the whole walk (about a gigabyte a quarter
//! of a second), so the walk is done in two parts:
//!
//! 1. [`Core::precheck`], **before** the pause flag, while producers run: it walks the
//!    span as a snapshot reads it (Acquire header loads, then a check of `O`: a header
//!    read at or after the `O` loaded next was read as it is, not torn by a rewrite),
//!    notes which records are still BUSY, and goes round again over what producers wrote
//!    meanwhile, each round shorter, until what is left is short.
//! 2. Under the flag and the retire lock, [`Core::pause`] waits for the records that
//!    were BUSY (if they are still in the span) and walks only the tail the precheck did
//!    not reach, as it always did: so producers are refused for that tail and for the
//!    records in flight, not for the ring.
//!
//! A finished header stays finished until `O` passes it (only a retirer rewrites it),
//! and `O` does not move while the pause holds the retire lock; so a record the
//! precheck saw finished at or after the pause's `O` is finished when it returns. The
//! pause builds no index: the paused span is indexed when a reader needs it
//! (`recorder::paused`).

use std::time::Duration;

use super::core::{Checked, Core, PauseRefused, PauseToken, DEAD_CHECK};
use crate::format::control::{LOCK, PAUSED, PAUSER};
use crate::format::record::{footprint, len_word, BUSY_BIT, LEN_MASK};
use crate::owner;
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::wait::Patience;

/// Rounds of [`Core::precheck`] at most (each walks what producers wrote during the
/// last). A writer at 0.7 of the walk's speed (one writing 64-byte records without
/// pause, measured) needs 31 rounds to take 1 GiB to the tail. One under loom, whose
/// models keep each thread's steps few.
const PRECHECK_ROUNDS: u32 = if cfg!(loom) { 1 } else { 64 };
/// Rounds in which what is left did not shrink, after which the precheck stops: the
/// producers keep up with the walk, and the pause walks the rest.
const PRECHECK_STALLS: u32 = 3;
/// The precheck stops once it has walked this many times the span it started with:
/// bounds `pause()`'s own time (eight walks of the ring) against producers as fast as
/// the walk.
const PRECHECK_BUDGET: u64 = 8;
/// The precheck stops once less than this is left to walk: the pause walks it under the
/// flag (about a microsecond per kilobyte). Zero under loom, so the models precheck.
const PRECHECK_TAIL: u64 = if cfg!(loom) { 0 } else { 16 * 1024 };
/// The precheck checks `O` after every this many bytes walked (the loom models: every
/// header).
const PRECHECK_CHUNK: u64 = if cfg!(loom) { 8 } else { 16 * 1024 };

impl<R: Region> Core<R> {
    /// Whether the ring is paused: `P`'s flag, or (single-producer rings, whose pause
    /// sets no flag) a pauser holding the retire lock.
    pub(crate) fn is_paused(&self) -> bool {
        // Relaxed: a report; a reserve refused meanwhile is counted either way.
        self.control().producer.0.pos.load(Relaxed) & PAUSED != 0 || self.ow_line().lock_pid.load(Relaxed) & PAUSER != 0
    }

    /// The pause's first part (module docs), with producers running: walks the records
    /// from `O` to `P` and again over what was written meanwhile, at most
    /// [`PRECHECK_ROUNDS`] times, until less than [`PRECHECK_TAIL`] is left, a round makes
    /// no progress (a claim whose header is still zero), or producers keep up with it
    /// ([`PRECHECK_STALLS`], [`PRECHECK_BUDGET`]).
    ///
    /// Every header is loaded with Acquire below a `Z` loaded with Acquire (so not as it
    /// was a lap ago), and believed only once a later `O` is at or below it: `O` is
    /// loaded after each [`PRECHECK_CHUNK`]; if it passed the chunk's start, the chain of
    /// headers is kept from `O` on only if `O` is one of its boundaries (a chain that
    /// reaches a true boundary follows true headers from there: every one at or after
    /// `O` was read intact), else the walk starts again at `O`.
    pub(crate) fn precheck(&self) -> Checked {
        let mut c = Checked::default();
        let mut chain: Vec<u64> = Vec::new();
        let mut started = false;
        let mut rounds = Rounds::default();
        for _ in 0..PRECHECK_ROUNDS {
            // Acquire (in `zeroed_acquire`): pairs with the Release store of `Z` in
            // `retire`: the zeroing of every word below it happens-before the header
            // loads below, so none reads a record of the previous lap.
            let z = self.zeroed_acquire();
            let Some((o, _)) = self.over_state() else { break };
            let end = self.prod().min(z);
            if !started || o > c.to {
                // Everything checked so far is overwritten: start at `O`.
                started = true;
                c.to = o;
                c.busy.clear();
            }
            if !rounds.go_on(end.saturating_sub(c.to)) {
                break;
            }
            let before = c.to;
            let mut x = c.to;
            let mut stalled = false;
            while x < end && !stalled {
                let cs = x;
                let first_busy = c.busy.len();
                chain.clear();
                let chunk_end = end.min(cs + PRECHECK_CHUNK);
                while x < chunk_end {
                    chain.push(x);
                    // Acquire: pairs with the Release header store in `commit` (a record
                    // seen finished has its bytes final and visible to this thread), and
                    // with the Release fences of retirers and producers (a rewritten word
                    // read here makes the `O` loaded below show it: see `retire`).
                    let h = self.word(x).load(Acquire);
                    let w = len_word(h);
                    let fp = footprint(w & LEN_MASK);
                    // A zero header (a claim not yet marked BUSY: its length is unknown) or
                    // a record running past `end`: the next round, or the pause, goes on.
                    if h == 0 || fp > end - x {
                        stalled = true;
                        break;
                    }
                    if w & BUSY_BIT != 0 {
                        c.busy.push(x);
                    }
                    x += fp;
                }
                chain.push(x);
                let Some((o2, _)) = self.over_state() else {
                    // Keep what was checked before this chunk.
                    c.busy.truncate(first_busy);
                    return c;
                };
                if o2 <= cs {
                    c.to = x;
                } else if chain.binary_search(&o2).is_ok() {
                    // `O` is a boundary of the chain: the chain is true from `O` on.
                    c.to = x;
                    c.busy.retain(|&b| b >= o2);
                } else {
                    // The chain may have followed a rewritten header: start again at `O`.
                    c.busy.clear();
                    c.to = o2;
                    x = o2;
                    stalled = false;
                    if o2 >= end {
                        break;
                    }
                }
            }
            // No progress (a zero header at the start): leave the rest to the pause.
            if c.to == before {
                break;
            }
        }
        c
    }

    /// Pauses the ring: from now on every reserve fails (counted; a single producer's
    /// only once it needs to retire, see `reserve_overwrite_single`); waits (bounded) for
    /// the retire lock and for every record already claimed to be committed or
    /// discarded. Gives up with `Busy` once `limit` has passed (measured from the
    /// first wait; spinning, then yielding, then sleeping: [`Patience`]). On `Ok`
    /// nothing writes `[over_pos, prod)` until [`Self::resume`], and every record there
    /// is finished. Most of the checking is done before producers are refused
    /// ([`Self::precheck`], module docs).
    /// `may_write`: the caller maps the data area writable (see `recover_lock`).
    pub(crate) fn pause(&self, may_write: bool, limit: Duration) -> Result<PauseToken, PauseRefused> {
        let prod = &self.control().producer.0.pos;
        let line = self.ow_line();
        // A ring already paused is refused below without a precheck of its records.
        // Relaxed: a hint.
        let checked = if line.lock_pid.load(Relaxed) & PAUSER != 0 { Checked::default() } else { self.precheck() };
        // The retire lock first (marked as a pauser's, so that whoever takes it over
        // from a dead pauser also clears the pause flag), then the flag.
        let mut patience = Patience::new(limit).loom_rounds(2);
        loop {
            if self.try_lock(owner::my_pid() | PAUSER) {
                break;
            }
            // Relaxed: a hint; the answer is only reported (or a dead pauser's pause
            // ended, and the lock tried again).
            if line.lock_pid.load(Relaxed) & PAUSER != 0 {
                if self.recover_lock(may_write) {
                    continue;
                }
                return Err(PauseRefused::Already);
            }
            // A retirer that died holding the lock is found out now and then.
            if patience.every(DEAD_CHECK) {
                self.recover_lock(may_write);
            }
            if !patience.wait() {
                return Err(PauseRefused::Busy);
            }
        }
        // Relaxed: we hold the lock; its Acquire ordered the last holder's store of `Z`.
        let zeroed = line.zeroed.load(Relaxed);
        // Relaxed RMW: the hint, as in `make_room`.
        line.zeroed.fetch_or(LOCK, Relaxed);
        let prev = if self.single_producer() {
            // Relaxed: the one producer may still claim past this `P`, in zeroed space
            // this pause does not read (see `reserve_overwrite_single`); the records
            // below it are waited for with Acquire header loads.
            prod.load(Relaxed) & !PAUSED
        } else {
            // Relaxed: the flag's place in `P`'s modification order is what matters:
            // every claim CAS ordered before it succeeded with a smaller `P`; every
            // later one fails and then sees the flag.
            let prev = prod.fetch_or(PAUSED, Relaxed);
            debug_assert_eq!(prev & PAUSED, 0, "only the lock holder pauses");
            prev
        };
        // Relaxed: we hold the retire lock (acquired above).
        let over_pos = line.over_pos.load(Relaxed);
        let retired = line.retired.load(Relaxed);
        let mut token = PauseToken { over_pos, prod: prev, retired, skips: Vec::new(), zeroed };
        // What is left of the limit (all of it under loom, which has no clock).
        let mut patience = Patience::new(limit.saturating_sub(patience.elapsed()));
        // The precheck's records from `O` on: those it saw BUSY are waited for, the
        // others are finished (module docs); the walk goes on where it stopped. (`O` is
        // a record boundary, so at or below `to` it is one of the precheck's.)
        let mut x = over_pos;
        if over_pos <= checked.to && checked.to <= prev {
            for &b in checked.busy.iter().filter(|&&b| b >= over_pos) {
                if self.wait_finished(b, &mut patience).is_none() {
                    self.resume(token);
                    return Err(PauseRefused::Busy);
                }
            }
            x = checked.to;
        }
        while x < prev {
            match self.wait_finished(x, &mut patience) {
                None => {
                    self.resume(token);
                    return Err(PauseRefused::Busy);
                }
                Some(Finished::Record(fp)) => x += fp.min(prev - x),
                Some(Finished::Dead { fp, zero }) => {
                    // A dead claim whose header is still zero: its length is not in the
                    // ring, and the paused span's index needs it.
                    if zero {
                        token.skips.push((x, fp));
                    }
                    x += fp;
                }
            }
        }
        Ok(token)
    }

    /// Waits (with `patience`) until the record at `x` (a record boundary below the
    /// paused `P`) is finished, or found to be a dead producer's. `None`: the time limit
    /// passed.
    fn wait_finished(&self, x: u64, patience: &mut Patience) -> Option<Finished> {
        loop {
            // Acquire: pairs with the Release header store in `commit`: the record's
            // bytes are final before anyone reads them in place.
            let h = self.word(x).load(Acquire);
            let w = len_word(h);
            if h != 0 && w & BUSY_BIT == 0 {
                return Some(Finished::Record(footprint(w & LEN_MASK)));
            }
            // A dead producer's record is stepped over (and left for the next retirer
            // to count), never waited for: checked now and then.
            if patience.every(DEAD_CHECK) {
                if let Some(fp) = self.dead_claim(x, usize::MAX) {
                    return Some(Finished::Dead { fp, zero: h == 0 });
                }
            }
            if !patience.wait() {
                return None;
            }
        }
    }

    /// Ends a pause: drops the retire lock and clears the flag.
    pub(crate) fn resume(&self, token: PauseToken) {
        // Release: clears the hint (the space below `Z` is as it was).
        self.ow_line().zeroed.store(token.zeroed, Release);
        if !self.single_producer() {
            // Relaxed: producers claim only zeroed space past `P`, which nobody read.
            self.control().producer.0.pos.fetch_and(!PAUSED, Relaxed);
        }
        // Release (in `unlock`): pairs with the next retirer's Acquire lock CAS: our
        // in-place reads of the records happen-before it zeroes them.
        self.unlock();
    }
}

/// When [`Core::precheck`] stops going round.
#[derive(Default)]
struct Rounds {
    /// What was left at the last round's start (none yet: `None`).
    last_left: Option<u64>,
    /// Rounds at whose start what was left had not shrunk.
    stalls: u32,
    /// What the walks may still cover ([`PRECHECK_BUDGET`] times the first span).
    budget: u64,
}

impl Rounds {
    /// Whether to walk a round with `left` bytes to go: no once what is left is short,
    /// once producers kept up with the walk (what is left did not shrink) a few times,
    /// or once the walks add up to the budget; the pause walks the rest. (Stopping at the
    /// first round that did not shrink it left a 1 GiB ring 11 MB to walk under the
    /// flag, where a 16 MiB ring left nothing: a writer's speed varies from round to
    /// round.)
    fn go_on(&mut self, left: u64) -> bool {
        match self.last_left {
            None => self.budget = left.saturating_mul(PRECHECK_BUDGET),
            Some(last) if left >= last => self.stalls += 1,
            Some(_) => {}
        }
        if left <= PRECHECK_TAIL || self.stalls >= PRECHECK_STALLS || left > self.budget {
            return false;
        }
        self.budget -= left;
        self.last_left = Some(left);
        true
    }
}

/// How [`Core::wait_finished`] found a record.
enum Finished {
    /// Committed or discarded, of this footprint.
    Record(u64),
    /// Unfinished, its producer dead: `fp` bytes to step over; `zero`: its header is
    /// still zero (so its length is known only from here).
    Dead { fp: u64, zero: bool },
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use crate::config::Wakeup;
    use crate::format::control::NEVER_WAKE;
    use crate::format::record::{footprint, len_word, BUSY_BIT};
    use crate::protocol::core::Core;
    use crate::region::heap::HeapRegion;
    use crate::region::Region;
    use crate::sync::Ordering::Relaxed;

    fn ring(cap: u64) -> Core<HeapRegion> {
        let core = Core::new_overwrite(HeapRegion::new(cap), NEVER_WAKE, 0);
        core.init_zeroed();
        core
    }

    /// Writes `n` records of 8 bytes; returns their positions.
    fn write(core: &Core<HeapRegion>, n: usize) -> Vec<u64> {
        let mut cur = core.producer_cursor();
        (0..n)
            .map(|_| {
                let pos = core.reserve_overwrite(8, &mut cur).unwrap();
                core.commit(pos, 8, false, Wakeup::NoWakeup);
                pos
            })
            .collect()
    }

    /// The id of a process that existed and is gone.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn the_precheck_goes_round_past_a_round_that_did_not_shrink_what_is_left() {
        use super::{Rounds, PRECHECK_BUDGET, PRECHECK_STALLS, PRECHECK_TAIL};
        const MIB: u64 = 1 << 20;
        // A writer at about 0.7 of the walk's speed, whose speed varies: one round of
        // the seven does not shrink what is left, and the walk still reaches the tail.
        let mut r = Rounds::default();
        let lefts = [1024 * MIB, 700 * MIB, 720 * MIB, 500 * MIB, 350 * MIB, 245 * MIB, 171 * MIB];
        assert!(lefts.iter().all(|&l| r.go_on(l)), "stopped at a round that did not shrink");
        let mut left = 171 * MIB;
        while r.go_on(left) {
            left = left * 7 / 10;
        }
        assert!(left <= PRECHECK_TAIL, "stopped with {left} bytes left");
        // Producers that keep up: it stops after a few rounds that did not shrink it.
        let mut r = Rounds::default();
        let walked = (0..100).take_while(|_| r.go_on(64 * MIB)).count();
        assert_eq!(walked as u32, PRECHECK_STALLS);
        // Producers that slow it down forever: the budget stops it.
        let mut r = Rounds::default();
        let mut left = 64 * MIB;
        let walked: u64 = std::iter::from_fn(|| {
            let go = r.go_on(left).then_some(left);
            left -= left / 100;
            go
        })
        .sum();
        assert!(walked <= 64 * MIB * PRECHECK_BUDGET, "walked {walked} bytes");
        assert!(walked > 64 * MIB * (PRECHECK_BUDGET - 1), "stopped early at {walked} bytes");
    }

    #[test]
    fn the_precheck_sees_every_record_and_notes_the_busy_ones() {
        // More than the tail the precheck leaves to the pause on either side.
        let core = ring(1 << 17);
        let mut cur = core.producer_cursor();
        write(&core, 3000);
        let held = core.reserve_overwrite(8, &mut cur).unwrap();
        write(&core, 3000);
        let c = core.precheck();
        assert_eq!(c.to, core.prod(), "walked to the producer position");
        assert_eq!(c.busy, [held]);
        // The pause waits for it: it is committed while the pause waits.
        let done = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                core.commit(held, 8, false, Wakeup::NoWakeup);
            });
            core.pause(true, Duration::from_secs(10)).unwrap()
        });
        let h = core.region.header(held).load(Relaxed);
        assert!(h != 0 && len_word(h) & BUSY_BIT == 0, "paused with the record unfinished");
        assert!(done.skips.is_empty());
        core.resume(done);
    }

    #[test]
    fn a_busy_record_the_precheck_noted_times_the_pause_out() {
        let core = ring(1 << 16);
        let mut cur = core.producer_cursor();
        write(&core, 10);
        let _held = core.reserve_overwrite(8, &mut cur).unwrap();
        write(&core, 1000);
        assert!(core.pause(true, Duration::from_millis(20)).is_err());
        assert!(!core.is_paused(), "a pause that timed out resumes");
    }

    #[test]
    fn a_dead_claim_with_no_header_is_stepped_over_and_kept_for_the_index() {
        let core = ring(1 << 16);
        write(&core, 10);
        let ctl = core.control();
        // A process in slot 0 claimed 24 bytes and died before its BUSY store.
        let dead_at = core.prod();
        ctl.slots[0].0.owner.store(u64::from(dead_pid()), Relaxed);
        ctl.slots[0].0.claiming.store(1, Relaxed);
        ctl.producer.0.pos.store(dead_at + footprint(16), Relaxed);
        let after = write(&core, 10);
        assert_eq!(after[0], dead_at + footprint(16));
        let token = core.pause(true, Duration::from_secs(10)).unwrap();
        assert_eq!(token.skips, [(dead_at, footprint(16))]);
        core.resume(token);
    }
}
