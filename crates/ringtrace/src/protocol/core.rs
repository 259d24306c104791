//! [`Core`]: the protocol's state over a region, the cursors of its producers and its
//! consumer, and the constants its steps share. The steps themselves are in the sibling
//! modules, one concern each (see the module above).

use std::time::Duration;

use crate::barrier;
use crate::format::control::{Control, N_SLOTS};
use crate::format::record::{footprint, pack, HDR_SIZE, LEN_MASK};
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed};

#[derive(Debug, Clone, Copy)]
pub(crate) struct ProducerCursor {
    /// Consumer position last loaded: space before `cons + capacity` is free.
    pub(crate) cons: u64,
    /// The words in `[producer position, zeroed)` are zero and free (`zeroed <= cons +
    /// capacity`), so a record ending at `end` fits without any other check if `end + 8
    /// <= zeroed`: a single producer's own frontier, or (multi-producer rings) the shared
    /// one as last loaded.
    pub(crate) zeroed: u64,
    /// The producer's counter slot (`N_SLOTS`: the shared overflow slot), whose
    /// `claiming` word brackets each claim in a ring other processes produce into
    /// ([`crate::protocol::repair::mark_claim`]).
    pub(crate) slot: usize,
    /// Overwrite mode: reserves refused in a row because the oldest record is
    /// unfinished or the retire lock is held; every so often their owners are checked
    /// for death ([`crate::protocol::repair`]).
    pub(crate) stuck: u32,
}

/// How far past the next header a producer zeroes when it runs out of zeroed space (a
/// single producer its own, a multi-producer ring's the shared frontier): 16 cache
/// lines, so that zeroing is one bulk write per kilobyte, well ahead of the line the
/// consumer reads. It stops at the end of the free space, so in a ring
/// that is nearly full the refill (with its load of the consumer position) runs on
/// most reserves. Tests and loom models use 8 bytes, so that their small rings go
/// through refills that stop short of the free space's end.
pub(super) const ZERO_AHEAD: u64 = if cfg!(any(test, loom)) { 8 } else { 1024 };
/// Cache line size: zeroing ends on a line boundary (8 bytes in tests, as above).
pub(super) const LINE: u64 = if cfg!(any(test, loom)) { 8 } else { 64 };

/// Exponential backoff after a lost claim CAS (crossbeam's `Backoff::spin`): retrying
/// at once makes the producers trade the producer position's line on every attempt;
/// backing off lets the winner claim several records while it holds the line.
pub(crate) struct Backoff(u32);

impl Backoff {
    /// Spins at most 2^`MAX_STEP` pause instructions per failure.
    const MAX_STEP: u32 = 6;

    #[inline(always)]
    pub(crate) fn new() -> Self {
        Backoff(0)
    }

    #[cold]
    pub(crate) fn spin(&mut self) {
        for _ in 0..1u32 << self.0 {
            std::hint::spin_loop();
        }
        self.0 = (self.0 + 1).min(Self::MAX_STEP);
    }
}

/// Why `reserve` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    Full,
    TooLarge,
    /// Discard mode (multi-producer): the producer zeroing ahead has not finished.
    /// Overwrite mode: making room would overwrite a record still being written (or
    /// another producer is giving up the space and has not finished).
    Pending,
    /// Overwrite mode: the ring is paused.
    Paused,
}

/// The consumer's private state. Made only by [`Core::cursor`]: an all-zero cursor
/// would predict a zero length word, which an empty header matches.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadCursor {
    /// Next record boundary to read.
    pub(crate) pos: u64,
    /// Consumer position as last published (`<= pos`); `[published, pos)` is read and
    /// not yet handed back.
    pub(crate) published: u64,
    /// Committed records delivered, discarded records stepped over (running totals).
    pub(crate) consumed: u64,
    pub(crate) skipped: u64,
    /// `published + capacity`: no record may end past it.
    pub(crate) end: u64,
    /// Length word of the last record delivered, the prediction of the next one's: always
    /// a valid committed length (1 ..= `LEN_MASK`, no flag), so a header that matches it
    /// needs no other check.
    pub(crate) last_len: u32,
    /// `footprint(last_len)`.
    pub(crate) stride: u64,
}

/// One step of the consumer ([`Core::next`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A committed record of `len` payload bytes with its header at `pos`; the cursor
    /// has moved past it.
    Record { pos: u64, len: u32 },
    /// Nothing finished at the cursor yet.
    Empty,
    /// A whole ring is read and not handed back: release before reading on.
    Full,
    /// The header at `pos` cannot be a record this ring's producers wrote.
    Corrupt { pos: u64, header: u64 },
}

/// The protocol state machine over a region. Cheap to clone when the region is a view
/// (as the real one is): every handle keeps its own copy, so its hot fields live in the
/// handle, not behind a shared pointer.
#[derive(Clone)]
pub(crate) struct Core<R> {
    pub(crate) region: R,
    pub(super) cap: u64,
    /// Largest payload: `capacity - 16` (a record and the word after it, the next
    /// header, which its producer keeps zeroed), at most `LEN_MASK`.
    pub(super) max_len: u32,
    /// The header's aux word (this process's id, never zero), packed: a header is
    /// `pack(word, 0) | aux_bits`.
    pub(super) aux_bits: u64,
    /// 0 for `CaughtUp`, [`crate::format::control::NEVER_WAKE`], [`crate::format::control::HALF_RING`], else the watermark in bytes.
    pub(super) watermark: u64,
    /// Whether this process uses the asymmetric barrier pair ([`barrier::init`]).
    pub(super) asymmetric: bool,
    /// Overwrite mode: bytes a retiring producer gives up beyond its need
    /// ([`crate::protocol::retire`]); 0 in discard mode.
    pub(crate) ahead: u64,
}

/// A producer stuck this many reserves in a row (retire lock held, or the oldest record
/// unfinished) checks whether the process it waits for died ([`crate::protocol::repair`]).
pub(crate) const STUCK_CHECK: u32 = 16;
/// How long a producer that needs space waits while another holds the retire lock,
/// before its reserve fails with `Pending`: it spins for [`RETIRE_SPIN`] (a running
/// holder finishes a retire of 1 KiB in 300-500 cycles), then yields, so that a holder
/// preempted on this core gets to run and finish. With more writer threads than cores,
/// yielding (up to 1 ms) refuses far fewer reserves, and writes more, than spinning for
/// 20 µs and giving up (measured: docs/design/overview.md, "Flight recorder (overwrite
/// mode)"). A time bound: a count of spins or yields would last ten times longer on one
/// machine than on another.
pub(super) const RETIRE_WAIT: Duration = Duration::from_millis(1);
/// The spinning part of [`RETIRE_WAIT`].
pub(super) const RETIRE_SPIN: Duration = Duration::from_micros(20);
/// How long a reader waits for a retirer to finish its seqlock write of `(O, retired)`
/// before it gives up with `Busy`. The write is two stores long; only a retirer
/// preempted (or killed: see `recover_lock`) inside it is waited for this long.
pub(crate) const SEQ_WAIT: Duration = Duration::from_millis(100);
/// How long a producer of a multi-producer discard ring waits for the producer zeroing
/// ahead of it (`Core::zero_room`) before its reserve fails with `Pending`. The zeroing
/// takes well under a microsecond; only a holder preempted (with more producer threads
/// than cores) or dead is waited for this long, and a dead one is found out every
/// [`DEAD_CHECK`]. Longer than [`RETIRE_WAIT`]: a discard ring's producer refused here
/// loses a record the ring had room for.
pub(super) const ZERO_WAIT: Duration = Duration::from_millis(100);
/// How long [`Core::pause`] waits for the retire lock and for records being written
/// when its caller names no limit ([`crate::RingBuf::pause`]).
pub(crate) const DEFAULT_PAUSE_TIMEOUT: Duration = Duration::from_secs(1);
/// While a pause waits, how often it checks whether the process it waits for died.
pub(super) const DEAD_CHECK: Duration = Duration::from_millis(10);

/// Why a pause could not be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PauseRefused {
    Already,
    Busy,
}

/// What `Core::precheck` (the pause's first part) found: a record boundary `to` such that, for any `O` at or
/// before it that the ring reaches later, every record in `[O, to)` was seen finished,
/// except those at `busy` (positions, ascending).
#[derive(Debug, Default)]
pub(crate) struct Checked {
    pub(crate) to: u64,
    pub(crate) busy: Vec<u64>,
}

/// A paused ring as [`Core::pause`] leaves it: the retire lock held, the producer
/// position frozen, every record in `[over_pos, prod)` finished.
#[derive(Debug)]
pub(crate) struct PauseToken {
    pub(crate) over_pos: u64,
    pub(crate) prod: u64,
    /// Committed records before `over_pos`.
    pub(crate) retired: u64,
    /// Claims in `[over_pos, prod)` left by dead producers before they wrote their
    /// header (still zero), as `(position, bytes)`, ascending: the pause stepped over
    /// them, and an index of the span must too (nothing in the ring says how long
    /// they are).
    pub(crate) skips: Vec<(u64, u64)>,
    /// The value of `zeroed` to restore (unlocked) on resume.
    pub(super) zeroed: u64,
}

impl<R: Region> Core<R> {
    /// A core for a ring of either producer kind. Either
    /// kind's producers keep the word after the last record zeroed (a multi-producer
    /// ring's under the zeroed frontier, [`Self::init_zeroed`]), so a record takes at
    /// most `capacity - 16` bytes, and fits whenever the ring is empty.
    pub(crate) fn new(region: R, watermark: u64) -> Self {
        let cap = region.capacity();
        debug_assert!(cap.is_power_of_two() && cap >= 32);
        let reserved = 2 * HDR_SIZE;
        let max_len = (cap - reserved).min(LEN_MASK as u64) as u32;
        // Read once (`getpid` is a system call; the retire lock takes the pid on every
        // retire: `Self::pid` reads it back from here).
        let aux_bits = pack(0, std::process::id().max(1));
        // The consumer's membarrier reaches only its own process's threads: producers
        // in other processes pair a full fence with its fence instead.
        let asymmetric = barrier::init() && !region.cross_process();
        Core { region, cap, max_len, watermark, aux_bits, asymmetric, ahead: 0 }
    }

    /// A new ring's core over a fresh (zeroed) region, its frontier set: [`Self::new`]
    /// and [`Self::init_zeroed`], for the tests and models.
    #[cfg(test)]
    pub(crate) fn fresh(region: R, watermark: u64) -> Self {
        let core = Self::new(region, watermark);
        core.init_zeroed();
        core
    }

    /// A core for an overwrite ring: its producers keep the word after the newest
    /// record zeroed, as a single producer does, so records take at most `capacity - 16`.
    /// `ahead`: bytes a retiring producer gives up beyond its need.
    pub(crate) fn new_overwrite(region: R, watermark: u64, ahead: u64) -> Self {
        Core { ahead, ..Self::new(region, watermark) }
    }

    /// This process's id, as read when the handle was made.
    #[inline(always)]
    pub(crate) fn pid(&self) -> u32 {
        crate::format::record::aux(self.aux_bits)
    }

    /// The aux bits every header of this process carries.
    #[inline(always)]
    pub(crate) fn aux_bits(&self) -> u64 {
        self.aux_bits
    }

    #[inline]
    pub(crate) fn control(&self) -> &Control {
        self.region.control()
    }

    #[inline]
    pub(crate) fn capacity(&self) -> u64 {
        self.cap
    }

    pub(crate) fn max_len(&self) -> u32 {
        self.max_len
    }

    /// A new producer handle's cursor. The word at the producer position is zero (an
    /// invariant); nothing after it is known to be.
    pub(crate) fn producer_cursor(&self) -> ProducerCursor {
        let ctl = self.control();
        // Acquire: pairs with the Release store in `release`, as the loads in `reserve`
        // and `zero_ahead` do: the cursor's `cons` says the space before `cons +
        // capacity` is free, so the consumer's reads of it must happen-before this
        // producer writes there (a Relaxed load here let a re-attached single producer
        // zero bytes the consumer was still reading: loom model M4).
        let cons = ctl.consumer.0.pos.load(Acquire);
        // Relaxed: a single producer's handle is handed over through the attach flag
        // (Acquire), which orders the previous handle's last store of the position
        // before this load; a multi-producer ring's producers load the shared
        // frontier instead (`zero_room`).
        let prod = ctl.producer.0.pos.load(Relaxed);
        ProducerCursor { cons, zeroed: prod + HDR_SIZE, slot: N_SLOTS, stuck: 0 }
    }

    /// A consumer cursor at the consumer position `pos` with the ring's running totals.
    pub(crate) fn cursor(&self, pos: u64, consumed: u64, skipped: u64) -> ReadCursor {
        ReadCursor { pos, published: pos, end: pos + self.cap, consumed, skipped, last_len: 8, stride: footprint(8) }
    }

    /// The consumer and producer positions (without overwrite mode's pause flag).
    pub(crate) fn positions(&self) -> (u64, u64) {
        let ctl = self.control();
        (ctl.consumer.0.pos.load(Relaxed), ctl.producer.0.pos.load(Relaxed) & !1)
    }
}

/// The overwrite-mode wakeup rule of the BPF overwrite series as first posted (August
/// 2025, `ringbuf_should_wakeup` in `kernel/bpf/ringbuf.c`): wake when the record
/// `[pos, end)` covers the consumer position `at` modulo half the ring, so a consumer
/// following the ring is woken every half ring of records written ahead of it.
pub(crate) fn half_ring_due(at: u64, pos: u64, end: u64, cap: u64) -> bool {
    let half = (cap >> 1) - 1;
    let (c, r, e) = (at & half, pos & half, end & half);
    c == r || (r < c && c < e) || (e < r && (c > r || c < e))
}
