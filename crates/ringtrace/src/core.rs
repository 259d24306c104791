//! The protocol: reserve, commit and discard without a lock, consume in reservation
//! order, and wake the consumer without ever losing a wakeup. Generic over the
//! [`Region`] that holds the bytes, so loom runs exactly this code, producer and
//! consumer sides alike ([`Core::next`] is the consumer's whole reading step).
//!
//! The producer kinds differ only in how they claim space (`reserve::<MULTI>`, a
//! constant, so each kind compiles to its own branch-free path); publishing, reading,
//! releasing and waking are one protocol.
//!
//! # Reserve
//!
//! The kernel serializes reservations with a spinlock, so that it can write the BUSY
//! header before it publishes the new producer position; a user-space producer
//! descheduled while holding that lock would stall every other producer. ringtrace
//! claims space with a compare-and-swap on the producer position instead (a single
//! producer, which owns the position, with a plain store), which leaves a window where
//! the space is claimed and its header not yet written. The consumer must not mistake
//! what was there before for a header, so **the consumer of a multi-producer ring zeroes
//! what it consumes before it publishes its position** (as Agrona's many-to-one ring does), and ringtrace
//! headers are never zero (the aux word is the producer's pid). An all-zero header
//! therefore means "wait", exactly like BUSY. A producer stopped between reserve and
//! commit stops nobody but the consumer, which waits at its record while the others go
//! on reserving and committing until the ring is full behind it.
//!
//! ```text
//!   consumer_pos            producer_pos
//!        |  committed | BUSY | committed | 0 (claimed) |    zeroed, free    |
//!        '-- consumer reads in order, stops at BUSY or 0
//! ```
//!
//! A single producer knows where its next header will be, so it zeroes ahead of itself
//! instead ([`Core::zero_ahead`]): in bulk, up to a kilobyte past its next header (or
//! to the end of the free space), always before the commit whose Release header store
//! lets the consumer read there. A reserve
//! needs 8 bytes of room past the record (the next header), and the consumer zeroes
//! nothing, so the lines it reads travel one way, from producer to consumer.
//!
//! Invariants: `consumer_pos <= producer_pos <= consumer_pos + capacity` (single
//! producer: `capacity - 8`); records are contiguous and 8-aligned from `consumer_pos`;
//! multi-producer rings: every byte outside `[consumer_pos, producer_pos)` is zero;
//! single-producer rings: the word at `producer_pos` is zero.
//!
//! The consumer polls the header where the next record will be, never the producer
//! position: with a consumer that keeps up, the line producers claim space on stays in
//! their caches (measured: a single-producer ring whose consumer polled the producer
//! position moved 70 M records/s between two threads; polling headers, 106 M).
//!
//! # Wakeups
//!
//! The consumer's wait word (on its own cache line, so that producers, which load it on
//! every commit, keep it cached while the consumer publishes its position) holds the
//! position it waits at and two flags. Before it sleeps it stores `at | WAITING` (plus
//! `BLOCKED`, see below), runs the heavy barrier, and checks whether the record at `at`
//! is ready. A producer publishes its record (header, and for a single producer the
//! producer position), runs the light barrier, and loads the wait word
//! ([`crate::barrier`]). Either the consumer's check sees the record or the producer
//! sees `WAITING`: no lost wakeup (the bug libbpf's ring buffer consumer had under
//! edge-triggered epoll, with a release store only). The producer that decides to wake
//! clears `WAITING` with a CAS, so one write reaches the doorbell per sleep.
//!
//! Who wakes: `BLOCKED` set (policy `CaughtUp`, or a watermark already reserved behind
//! an unfinished record) means "wake me when the record at `at` is committed or
//! discarded": the BPF ring buffer's rule, which needs only the committer's own record.
//! Without `BLOCKED` (policy `Watermark(w)`), a committer whose record ends at least `w`
//! bytes past `at` wakes. If that wake finds the record at `at` still unfinished, the
//! consumer sleeps again with `BLOCKED`, because the watermark is already reserved.
//! Every decision uses only the committer's record and the consumer's word, so the
//! pairwise barrier argument above covers it.

use std::io;

use crate::barrier;
use crate::config::Wakeup;
use crate::format::control::{Control, BLOCKED, HALF_RING, NEVER_WAKE, N_SLOTS, WAITING, WAIT_FLAGS};
use crate::format::record::{footprint, len_word, pack, BUSY_BIT, DISCARD_BIT, HDR_SIZE, LEN_MASK};
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

/// A producer's private view of the positions. Made by [`Core::producer_cursor`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProducerCursor {
    /// Consumer position last loaded: space before `cons + capacity` is free.
    pub(crate) cons: u64,
    /// Single-producer rings: the words in `[producer position, zeroed)` are zero and
    /// free (`zeroed <= cons + capacity`), so a record ending at `end` fits without any
    /// other check if `end + 8 <= zeroed`.
    pub(crate) zeroed: u64,
    /// The producer's counter slot (`N_SLOTS`: the shared overflow slot), whose
    /// `claiming` word brackets each claim ([`crate::repair::mark_claim`]).
    pub(crate) slot: usize,
    /// Overwrite mode: reserves refused in a row because the oldest record is
    /// unfinished or the retire lock is held; every so often their owners are checked
    /// for death ([`crate::repair`]).
    pub(crate) stuck: u32,
}

/// How far past the next header a single producer zeroes when it runs out of zeroed
/// space: 16 cache lines, so that zeroing is one bulk write per kilobyte, well ahead of
/// the line the consumer reads. It stops at the end of the free space, so in a ring
/// that is nearly full the refill (with its load of the consumer position) runs on
/// most reserves. Tests and loom models use 8 bytes, so that their small rings go
/// through refills that stop short of the free space's end.
const ZERO_AHEAD: u64 = if cfg!(any(test, loom)) { 8 } else { 1024 };
/// Cache line size: zeroing ends on a line boundary (8 bytes in tests, as above).
const LINE: u64 = if cfg!(any(test, loom)) { 8 } else { 64 };

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
    cap: u64,
    /// Largest payload: `capacity - 8` (single producer: `- 16`), at most `LEN_MASK`.
    max_len: u32,
    /// The header's aux word (this process's id, never zero), packed: a header is
    /// `pack(word, 0) | aux_bits`.
    aux_bits: u64,
    /// 0 for `CaughtUp`, [`NEVER_WAKE`], [`HALF_RING`], else the watermark in bytes.
    watermark: u64,
    /// Whether this process uses the asymmetric barrier pair ([`barrier::init`]).
    asymmetric: bool,
    /// Overwrite mode: bytes a retiring producer gives up beyond its need
    /// ([`crate::overwrite`]); 0 in discard mode.
    pub(crate) ahead: u64,
}

impl<R: Region> Core<R> {
    /// A core for a multi-producer ring (`multi`) or a single-producer one, whose
    /// producer keeps the word after its last record zeroed and so can use all but 8
    /// bytes of the ring.
    pub(crate) fn new(region: R, watermark: u64, multi: bool) -> Self {
        let cap = region.capacity();
        debug_assert!(cap.is_power_of_two() && cap >= 32);
        let reserved = if multi { HDR_SIZE } else { 2 * HDR_SIZE };
        let max_len = (cap - reserved).min(LEN_MASK as u64) as u32;
        // Read once (`getpid` is a system call; the retire lock takes the pid on every
        // retire: `Self::pid` reads it back from here).
        let aux_bits = pack(0, std::process::id().max(1));
        // The consumer's membarrier reaches only its own process's threads: producers
        // in other processes pair a full fence with its fence instead.
        let asymmetric = barrier::init() && !region.cross_process();
        Core { region, cap, max_len, watermark, aux_bits, asymmetric, ahead: 0 }
    }

    /// A core for an overwrite ring: its producers keep the word after the newest
    /// record zeroed, as a single producer does, so records take at most `capacity - 16`.
    /// `ahead`: bytes a retiring producer gives up beyond its need.
    pub(crate) fn new_overwrite(region: R, watermark: u64, ahead: u64) -> Self {
        Core { ahead, ..Self::new(region, watermark, false) }
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
        // before this load; multi-producer rings do not use `zeroed`.
        let prod = ctl.producer.0.pos.load(Relaxed);
        ProducerCursor { cons, zeroed: prod + HDR_SIZE, slot: N_SLOTS, stuck: 0 }
    }

    /// A consumer cursor at the consumer position `pos` with the ring's running totals.
    pub(crate) fn cursor(&self, pos: u64, consumed: u64, skipped: u64) -> ReadCursor {
        ReadCursor { pos, published: pos, end: pos + self.cap, consumed, skipped, last_len: 8, stride: footprint(8) }
    }

    // ---------------------------------------------------------------- producers

    /// Claims `footprint(len)` bytes and returns the record's position. A multi-producer
    /// ring marks the header BUSY; a single producer stores its position, and now and
    /// then zeroes space ahead ([`Self::zero_ahead`]).
    #[inline(always)]
    pub(crate) fn reserve<const MULTI: bool>(&self, len: usize, cur: &mut ProducerCursor) -> Result<u64, Refused> {
        // The first test is constant for lengths known at compile time: a record that
        // small fits in any ring of this region type, of either kind (`max_len` is at
        // least the capacity minus 16).
        const { assert!(R::MIN_CAPACITY >= 2 * HDR_SIZE) };
        if len > (R::MIN_CAPACITY - 2 * HDR_SIZE) as usize && len > self.max_len as usize {
            return Err(Refused::TooLarge);
        }
        let len = len as u32;
        let fp = footprint(len);
        let ctl = self.control();
        if !MULTI {
            // Relaxed: only this producer writes the producer position. It is the one
            // copy (a private copy would cost a second store per record).
            let p = ctl.producer.0.pos.load(Relaxed);
            let end = p + fp;
            // The record and the word after it (the next header, which must read zero
            // until the next commit) must lie in zeroed free space.
            if end + HDR_SIZE > cur.zeroed {
                self.zero_ahead(end + HDR_SIZE, cur)?;
            }
            // Relaxed: for statistics and for the consumer's watermark decision in
            // `arm`, which reads it after its heavy barrier (this store precedes our
            // light barrier in `commit`). The header stays zero (it lay in zeroed space)
            // until `commit`: zero already means "wait", and the one producer needs no
            // BUSY mark to be known.
            ctl.producer.0.pos.store(end, Relaxed);
            return Ok(p);
        }
        let prod = &ctl.producer.0.pos;
        let mut p = prod.load(Relaxed);
        let mut backoff = Backoff::new();
        let pos = loop {
            let end = p.wrapping_add(fp);
            if !self.has_room(end, cur) {
                let now = prod.load(Relaxed);
                if now == p {
                    return Err(Refused::Full);
                }
                p = now; // `p` was stale; try again with the current position.
                continue;
            }
            // The CAS decides who owns [p, end); it orders nothing of the record: what
            // was in the space was acquired above, and what we write there is published
            // by the Release header store in `commit`. Release (success): pairs with the
            // Acquire load of `P` in `repair::dead_claim`, so a reader that sees this
            // claim sees the producer's claim mark (`repair::mark_claim`) too.
            match prod.compare_exchange_weak(p, end, Release, Relaxed) {
                Ok(_) => break p,
                Err(now) => {
                    p = now;
                    backoff.spin();
                }
            }
        };
        // Relaxed: to the consumer BUSY means the same as the zero header it replaces
        // ("wait"); it only tells observers who holds the space.
        self.region.header(pos).store(pack(len | BUSY_BIT, 0) | self.aux_bits, Relaxed);
        Ok(pos)
    }

    /// Whether the space before `end` is free: by the consumer position last loaded, or
    /// else by a fresh load of it (kept in `cur`).
    #[inline(always)]
    fn has_room(&self, end: u64, cur: &mut ProducerCursor) -> bool {
        if end.wrapping_sub(cur.cons) <= self.cap {
            return true;
        }
        // Acquire: pairs with the Release store in `release`: the consumer finished
        // reading (and, in a multi-producer ring, zeroing) everything before the
        // position it published, and this producer is about to write there.
        cur.cons = self.control().consumer.0.pos.load(Acquire);
        end.wrapping_sub(cur.cons) <= self.cap
    }

    /// A single producer's refill of zeroed space: zeroes from `cur.zeroed` to
    /// [`ZERO_AHEAD`] bytes past `need` (on a line boundary), or to the end of the free
    /// space if that comes first; `Full` if even `need` is not free.
    ///
    /// This is the single-producer ring's replacement for the consumer's zeroing: the
    /// consumer then writes none of the lines it reads, so they travel one way only,
    /// and the zeroing runs in bulk, lines ahead of the consumer.
    #[cold]
    #[inline(never)]
    fn zero_ahead(&self, need: u64, cur: &mut ProducerCursor) -> Result<(), Refused> {
        debug_assert!(need > cur.zeroed && cur.zeroed <= cur.cons + self.cap);
        if !self.has_room(need, cur) {
            return Err(Refused::Full);
        }
        let target = ((need + ZERO_AHEAD).next_multiple_of(LINE)).min(cur.cons + self.cap);
        debug_assert!(target >= need && target - cur.zeroed <= self.cap);
        // SAFETY: `[zeroed, target)` lies past the producer position (`zeroed` is past
        // it, see `ProducerCursor`) and before `cons + capacity`: free space that only
        // this producer, the ring's one, may touch, which the consumer reads only after
        // a later commit's Release header store. Its length is at most the capacity, and
        // both ends are multiples of 8.
        unsafe { self.region.zero(cur.zeroed, target - cur.zeroed) };
        cur.zeroed = target;
        Ok(())
    }

    /// Publishes the record at `pos` (committed, or discarded), then wakes the consumer
    /// if `wakeup` and the policy say so.
    #[inline(always)]
    pub(crate) fn commit(&self, pos: u64, len: u32, discard: bool, wakeup: Wakeup) {
        let word = if discard { len | DISCARD_BIT } else { len };
        // Release: pairs with the Acquire header load in `next` (and `ready`): the
        // payload written into the reservation happens-before the consumer reads it.
        self.region.header(pos).store(pack(word, 0) | self.aux_bits, Release);
        if wakeup == Wakeup::NoWakeup || (self.watermark == NEVER_WAKE && wakeup != Wakeup::Force) {
            return;
        }
        // Pairs with `barrier::heavy` in `arm`: either the consumer's check after its
        // barrier sees the header above, or the load below sees WAITING.
        barrier::light(self.asymmetric);
        let wait = self.control().wait.0.word.load(Relaxed);
        if wait & WAITING != 0 {
            self.wake_slow(wait, pos, pos + footprint(len), wakeup);
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_slow(&self, wait: u64, pos: u64, end: u64, wakeup: Wakeup) {
        let at = wait & !WAIT_FLAGS;
        let due = wakeup == Wakeup::Force
            || match self.watermark {
                NEVER_WAKE => false,
                HALF_RING => half_ring_due(at, pos, end, self.cap),
                _ if wait & BLOCKED != 0 => pos == at,
                w => end.wrapping_sub(at) >= w,
            };
        // The CAS elects the one producer that rings the doorbell. The consumer reads
        // the record after waking with `next`'s Acquire header load, which pairs with
        // our Release header store in `commit`. Acquire: pairs with the Release store
        // of the wait word in `arm`, so the consumer's read of a futex doorbell before
        // it armed (`prepare_sleep`) happens-before our ring and cannot see it.
        if due && self.control().wait.0.word.compare_exchange(wait, at, Acquire, Relaxed).is_ok() {
            self.region.notify();
        }
    }

    // ---------------------------------------------------------------- the consumer

    /// Reads the next record boundary: the consumer's whole reading step. Discarded
    /// records are stepped over (and counted) here.
    ///
    /// The common case (a committed record of at least one byte that fits) is a handful
    /// of instructions inline; everything else goes to [`Self::next_slow`].
    #[inline(always)]
    pub(crate) fn next(&self, rd: &mut ReadCursor) -> Step {
        // Acquire: pairs with the Release header store in `commit`.
        let header = self.region.header(rd.pos).load(Acquire);
        // Value prediction: the record is expected to have the previous one's length,
        // and its footprint (`stride`) is known in advance, so the header only confirms
        // the prediction with one (well predicted) compare. That takes the header load
        // out of the chain of dependent instructions from one record to the next, which
        // would otherwise bound the loop at a load's latency per record (measured: 4.4
        // -> 3.7 ns per record written and read back to back), and since `last_len` is
        // always a valid committed length, the match is also the whole validity check
        // (not zero, not BUSY, not DISCARD).
        let next = rd.pos + rd.stride;
        if len_word(header) == rd.last_len && next <= rd.end {
            let at = rd.pos;
            rd.pos = next;
            rd.consumed += 1;
            return Step::Record { pos: at, len: rd.last_len };
        }
        // By value, so that the caller's cursor never escapes and stays in registers.
        let (cursor, step) = self.next_slow(*rd);
        *rd = cursor;
        step
    }

    /// Every case of [`Self::next`] but the common one: a record of another size than
    /// the last, discarded and zero-length records, unfinished records, a whole ring
    /// read, corruption.
    #[inline(never)]
    fn next_slow(&self, mut rd: ReadCursor) -> (ReadCursor, Step) {
        let step = loop {
            // Acquire: as in `next`.
            let header = self.region.header(rd.pos).load(Acquire);
            let word = len_word(header);
            if header == 0 || word & BUSY_BIT != 0 {
                // Claimed and not finished: wait. (At `published + capacity` lies our own
                // unreleased space: a header there is `Full`, below; zero bytes there,
                // possible when the consumer handed back part of a record, read as
                // `Empty`, which is also true: no producer can have written there, and
                // the consumer's next publication makes room.)
                break Step::Empty;
            }
            let len = word & LEN_MASK;
            let next = rd.pos + footprint(len);
            if next - rd.published > self.cap {
                if rd.pos - rd.published >= self.cap {
                    break Step::Full;
                }
                break Step::Corrupt { pos: rd.pos, header };
            }
            let at = rd.pos;
            rd.pos = next;
            if word & DISCARD_BIT != 0 {
                rd.skipped += 1;
                continue;
            }
            rd.consumed += 1;
            if len != 0 {
                rd.last_len = len;
                rd.stride = next - at;
            }
            break Step::Record { pos: at, len };
        };
        (rd, step)
    }

    /// Whether a finished record (committed or discarded) is at `at`.
    #[inline]
    pub(crate) fn ready(&self, at: u64) -> bool {
        // Acquire: as in `next`.
        let header = self.region.header(at).load(Acquire);
        header != 0 && len_word(header) & BUSY_BIT == 0
    }

    /// Hands back `[published, to)`: zeroes it (multi-producer rings: `MULTI`) and
    /// publishes `to` as the consumer position. `to` may lie inside a record the
    /// consumer has read (it is then handed back in two parts); the consumer's own
    /// cursor stays at `pos`.
    ///
    /// # Safety
    ///
    /// Only the consumer calls this, with its own cursor and `published <= to <= pos`,
    /// `to` a multiple of 8; `[published, to)` holds records it has read, and no
    /// reference into them is alive.
    #[inline]
    pub(crate) unsafe fn release<const MULTI: bool>(&self, rd: &mut ReadCursor, to: u64) {
        let from = rd.published;
        debug_assert!(from <= to && to <= rd.pos && to - from <= self.cap && (to - from) % 8 == 0);
        if MULTI {
            // SAFETY: forwarded from this function's contract.
            unsafe { self.region.zero(from, to - from) };
        }
        // Release: pairs with the Acquire loads of the consumer position in `reserve`
        // and `zero_ahead`: our reads of this space (and the zeroing above)
        // happen-before any producer writes it again.
        self.control().consumer.0.pos.store(to, Release);
        rd.published = to;
        rd.end = to + self.cap;
    }

    /// Announces that the consumer will sleep at `at` (its published position) and
    /// checks once more. `Ok(true)`: armed, sleep until the doorbell rings. `Ok(false)`:
    /// a record is ready (or a producer already rang); consume instead.
    pub(crate) fn arm(&self, at: u64) -> io::Result<bool> {
        let wait = &self.control().wait.0.word;
        let mut word = at | WAITING | if self.watermark == 0 { BLOCKED } else { 0 };
        // Ordered before the check below by the heavy barrier, which is what pairs with
        // the producers' light barrier in `commit`. Release: pairs with the Acquire CAS
        // in `wake_slow` (the doorbell read in `prepare_sleep` comes first).
        wait.store(word, Release);
        loop {
            if let Err(e) = barrier::heavy() {
                self.disarm(at);
                return Err(e);
            }
            if self.ready(at) {
                self.disarm(at);
                return Ok(false);
            }
            if word & BLOCKED != 0 {
                return Ok(true);
            }
            let prod = self.control().producer.0.pos.load(Relaxed);
            if prod.wrapping_sub(at) < self.watermark {
                return Ok(true);
            }
            // A watermark is already reserved behind an unfinished record: wait for that
            // record alone. If a producer cleared WAITING meanwhile, it rang: don't sleep.
            if wait.compare_exchange(word, word | BLOCKED, Relaxed, Relaxed).is_err() {
                return Ok(false);
            }
            word |= BLOCKED;
        }
    }

    /// Withdraws the announcement of `arm`.
    pub(crate) fn disarm(&self, at: u64) {
        // Relaxed: a producer that still sees the old word at most rings once more.
        self.control().wait.0.word.store(at, Relaxed);
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
