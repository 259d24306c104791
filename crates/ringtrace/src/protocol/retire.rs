//! Overwrite (flight-recorder) mode: giving up the oldest records to make room.
//!
//! The kernel's BPF overwrite mode (`BPF_F_RB_OVERWRITE`, Linux 6.19: Xu Kuohai's "bpf:
//! Add overwrite mode for bpf ring buffer", `__bpf_ringbuf_reserve` in
//! `kernel/bpf/ringbuf.c`) does, under its reservation spinlock:
//! advance `pending_pos` over finished records, refuse a record that would overwrite a
//! BUSY one, advance `overwrite_pos` over the whole records the new one covers, write the
//! BUSY header, publish `producer_pos`. ringtrace has no lock on the reservation path;
//! this module keeps the kernel's rules with three words and one try-lock that only the
//! producer that gives up space takes.
//!
//! # State
//!
//! ```text
//!   over_pos (O)                       producer_pos (P)      zeroed (Z) = O + capacity
//!      | oldest ... records ... newest |  zero, free, claimable  |
//!      '-- everything before O is gone: its bytes are zero or reused
//! ```
//!
//! * `P` (the producer line): producers claim `[P, P + footprint)` with a CAS, exactly as
//!   in discard mode, as long as the claim and the word after it lie below `Z`. Bit 0 of
//!   `P` is the pause flag.
//! * `Z` (the overwrite line): everything in `[P, Z)` is zero, so an unwritten header
//!   reads zero ("wait") and a producer's claim needs no lock. Bit 0 says the retire
//!   lock is held (a hint: producers that fit below `Z` need not wait for it).
//! * `lock_pid` (the overwrite line): the retire lock itself, holding its holder's
//!   process id (with [`PAUSER`] for a pause), so that a holder killed while it holds
//!   it is found out and its work finished by the next producer ([`super::lock`]).
//! * `O` and `retired` (the overwrite line, under a seqlock `seq`): the oldest record
//!   still readable, and how many committed records lie before it.
//!
//! Invariants (outside the retire lock): `O <= P`, `P + 8 <= Z == O + capacity`; records
//! are contiguous from `O` to `P`.
//!
//! # Giving up space (`retire`)
//!
//! A producer whose record does not fit below `Z` takes the retire lock (a CAS of its
//! pid into `lock_pid`, then sets `Z`'s bit 0; a producer that finds it held waits at
//! most 1 ms, spinning then yielding, then its reserve fails and is counted),
//! walks whole records forward from `O` (refusing to pass a record that is BUSY or whose
//! header is still zero: as in the kernel, a record that would overwrite part of one
//! still being written cannot be reserved), publishes the new `O`, zeroes
//! the space given up, publishes `Z = O + capacity` and drops the lock. With
//! a `retire_ahead` of 0 it gives up exactly the records the new one covers, as the
//! kernel does; with more, it works ahead so that other producers keep claiming while
//! one zeroes, at the price of that many fewer bytes of history.
//!
//! # No data race with readers
//!
//! Readers copy records while producers may be overwriting them. Every access to ring
//! bytes in this mode is an atomic 64-bit access (relaxed for payload and zeroing), so
//! a torn read is a wrong value, never undefined behaviour; readers then tell torn
//! copies from good ones with the seqlock rule below. (A reservation in this mode is
//! written through [`Core::write_payload`], not a `&mut [u8]`.)
//!
//! The rule: **a byte at position `x` is rewritten only after `O` has passed `x`.** The
//! retirer publishes `O` and then (release fence) zeroes; a producer writes into space
//! it claimed below a `Z` it loaded with Acquire (after which it runs a release fence),
//! and the retirer stored `O` before that `Z`. So a reader that copies with Acquire loads
//! and then sees `O <= x` has copied the byte at `x` as it was before any rewrite
//! (fence-to-load synchronization: had it read a rewritten value, the writer's release
//! fence would make the new `O` visible). Records at or after that `O` are intact; the ones before it are counted as
//! overwritten. See [`super::read`].

use super::core::{Backoff, Core, ProducerCursor, Refused, RETIRE_SPIN, RETIRE_WAIT, SEQ_WAIT, STUCK_CHECK};
use crate::format::control::{OverwriteLine, LOCK, PAUSED, PAUSER};
use crate::format::record::{footprint, len_word, pack, BUSY_BIT, DISCARD_BIT, HDR_SIZE, LEN_MASK};
use crate::region::Region;
use crate::sync::fence;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::wait::Patience;

impl<R: Region> Core<R> {
    /// Sets the initial zeroed frontier `Z`: the whole (zeroed) data area is free.
    /// Called once, before the ring is shared, for every ring (overwrite rings and
    /// multi-producer discard rings move it; a single producer in discard mode keeps
    /// its frontier private).
    pub(crate) fn init_zeroed(&self) {
        // Relaxed: not shared yet (see `Control::init_meta`).
        self.ow_line().zeroed.store(self.capacity(), Relaxed);
    }

    #[inline(always)]
    pub(super) fn ow_line(&self) -> &OverwriteLine {
        &self.control().overwrite.0
    }

    #[inline(always)]
    pub(super) fn word(&self, pos: u64) -> &crate::sync::AtomicU64 {
        self.region.header(pos)
    }

    /// Claims space for a record of `len` bytes, giving up the oldest records if needed;
    /// marks it BUSY and returns its position.
    #[inline(always)]
    pub(crate) fn reserve_overwrite(&self, len: usize, cur: &mut ProducerCursor) -> Result<u64, Refused> {
        if len > self.max_len() as usize {
            return Err(Refused::TooLarge);
        }
        self.claim_overwrite(len, cur)
    }

    /// [`Self::reserve_overwrite`] for the one producer of a single-producer ring: it
    /// owns `P`, so it claims with a plain store, no read-modify-write.
    ///
    /// What the multi-producer claim's CAS gives that this needs otherwise: a pause
    /// cannot freeze `P` with a flag (our store would erase it), so a pause of a
    /// single-producer ring freezes only the view `[O, P)` it read under the retire
    /// lock: this producer may go on writing into the zeroed space `[P, Z)`, which no
    /// pause reads, and is refused once it needs to retire (the pauser holds the lock).
    /// A dead producer's zero-header claim is recognized by the producer line's owner
    /// pid, not by claim marks ([`crate::protocol::repair`], `single`).
    #[inline(always)]
    pub(crate) fn reserve_overwrite_single(&self, len: usize, cur: &mut ProducerCursor) -> Result<u64, Refused> {
        if len > self.max_len() as usize {
            return Err(Refused::TooLarge);
        }
        let fp = footprint(len as u32);
        let prod = &self.control().producer.0.pos;
        // Relaxed: only this producer writes `P` (a pause never sets its flag in a
        // single-producer ring).
        let p = prod.load(Relaxed);
        let need = p + fp + HDR_SIZE;
        if need > cur.zeroed {
            self.make_room(need, cur)?;
        }
        // Relaxed: `P` bounds what readers copy and pauses wait for; the record's bytes
        // are published by the commit's Release header store, and what lay in the space
        // was ordered by `make_room`'s Acquire load of `Z`.
        prod.store(p + fp, Relaxed);
        Ok(self.mark_busy(p, len))
    }

    /// Whether this is a single-producer ring (read from the header, which attaching
    /// checked against the handle's type): cold paths only.
    pub(crate) fn single_producer(&self) -> bool {
        // Relaxed: written once before the ring was shared.
        self.control().meta.0.kind.load(Relaxed) == <crate::config::Spsc as crate::config::ProducerKind>::CODE
    }

    /// [`Self::reserve_overwrite`] once the length is known to fit.
    #[inline(always)]
    pub(super) fn claim_overwrite(&self, len: usize, cur: &mut ProducerCursor) -> Result<u64, Refused> {
        let fp = footprint(len as u32);
        let prod = &self.control().producer.0.pos;
        // Relaxed: `P` only arbitrates claims; what lies in the space is ordered by `Z`
        // (below) and what we write there by the commit's Release header store.
        let mut p = prod.load(Relaxed);
        let mut backoff = Backoff::new();
        loop {
            if p & PAUSED != 0 {
                return Err(self.refuse_paused(cur));
            }
            // The record and the word after it (the next header, which must read zero).
            // `cur.zeroed` is the known `Z` minus half the look-ahead: past it, look again
            // and perhaps retire ahead of need.
            let need = p + fp + HDR_SIZE;
            if need > cur.zeroed {
                self.make_room(need, cur)?;
            }
            // Release (success): pairs with the Acquire load of `P` in
            // `repair::dead_claim` (the producer's claim mark comes first; see
            // `repair::mark_claim`).
            match prod.compare_exchange_weak(p, p + fp, Release, Relaxed) {
                Ok(_) => break,
                Err(now) => {
                    p = now;
                    backoff.spin();
                }
            }
        }
        Ok(self.mark_busy(p, len))
    }

    /// Both claims' last step: marks the record just claimed at `p` BUSY; returns `p`.
    #[inline(always)]
    pub(super) fn mark_busy(&self, p: u64, len: usize) -> u64 {
        // Release fence: pairs with the Acquire loads readers copy with (see `read`).
        // The `Z` this claim relied on was published after the retirer stored the `O`
        // that gave this space up; a reader that copies any of our stores below (this
        // header, the payload) then sees that `O` and drops its copy.
        fence(Release);
        let busy = pack(len as u32 | BUSY_BIT, 0) | self.aux_bits();
        // Relaxed: BUSY means "wait" to readers, as the zero it replaces does.
        self.word(p).store(busy, Relaxed);
        p
    }

    /// Makes `[.., need)` zeroed free space, or says why not: loads `Z`, and if that is
    /// not enough, gives up old records (or waits a little for the producer doing it).
    #[cold]
    #[inline(never)]
    pub(super) fn make_room(&self, need: u64, cur: &mut ProducerCursor) -> Result<(), Refused> {
        let line = self.ow_line();
        let mut patience = Patience::new(RETIRE_WAIT).loom_rounds(255);
        loop {
            // Acquire: pairs with the Release store of `zeroed` in `retire`: the zeroing
            // of the space below it happens-before our writes there.
            let z = line.zeroed.load(Acquire);
            let known = z & !LOCK;
            cur.zeroed = self.threshold(known);
            // Work ahead: retire once less than half the look-ahead is left, so that the
            // others rarely run out while one producer zeroes.
            if need <= cur.zeroed {
                cur.stuck = 0;
                return Ok(());
            }
            if z & LOCK == 0 {
                if self.try_lock(self.pid()) {
                    // Relaxed: the lock's Acquire ordered the last holder's store of `Z`
                    // (before it unlocked) before this load.
                    let z = line.zeroed.load(Relaxed);
                    // Relaxed, and a read-modify-write: `LOCK` is a hint to the others
                    // ("someone is working ahead"); as an RMW it keeps the last
                    // holder's Release store of `Z` at the head of the release sequence
                    // their Acquire loads synchronize with.
                    line.zeroed.fetch_or(LOCK, Relaxed);
                    return self.retire(z, need, cur);
                }
            } else if need <= known {
                return Ok(()); // another producer is working ahead; this record fits
            } else if line.lock_pid.load(Relaxed) & PAUSER != 0 {
                // Relaxed: a hint. A pause holds the lock (a single-producer ring's pause
                // sets no flag in `P`): refuse now rather than spin.
                return Err(self.refuse_paused(cur));
            }
            if !patience.spin_then_yield(RETIRE_SPIN) {
                break;
            }
        }
        // Stuck. Every so often, ask whether the lock's holder died (then take the lock
        // over and finish its work): the next reserve will find room.
        cur.stuck += 1;
        if cur.stuck % STUCK_CHECK == 0 {
            self.recover_lock(true);
        }
        // A pause holds the retire lock: count a reserve it refused as paused.
        if self.is_paused() {
            return Err(Refused::Paused);
        }
        Err(Refused::Pending)
    }

    /// A reserve refused because the ring is paused: every so often, checks whether
    /// the pauser died (then its pause is ended, and the next reserve goes through).
    #[cold]
    #[inline(never)]
    pub(super) fn refuse_paused(&self, cur: &mut ProducerCursor) -> Refused {
        cur.stuck += 1;
        if cur.stuck % STUCK_CHECK == 0 {
            self.recover_lock(true);
        }
        Refused::Paused
    }

    /// What a producer keeps as its `zeroed`: the frontier `z` minus half the
    /// look-ahead, where it looks again.
    #[inline]
    pub(super) fn threshold(&self, z: u64) -> u64 {
        z.saturating_sub(self.ahead / 2)
    }

    /// With the retire lock held (taken on `z`): gives up whole records from `O` until
    /// `need + ahead` fits, stopping early at a record not finished, zeroes what was
    /// given up, and publishes the new `Z` (dropping the lock).
    pub(super) fn retire(&self, z: u64, need: u64, cur: &mut ProducerCursor) -> Result<(), Refused> {
        let line = self.ow_line();
        let cap = self.capacity();
        // Relaxed: only the lock holder writes `O` and `retired`, and taking the lock
        // acquired the last holder's stores; `P` only bounds the walk (the headers it
        // passes are loaded with Acquire).
        let o = line.over_pos.load(Relaxed);
        let retired = line.retired.load(Relaxed);
        let p = self.control().producer.0.pos.load(Relaxed) & !PAUSED;
        // `z == o + cap` unless a retirer died between publishing `O` and `Z` (or a
        // hostile process wrote these words): zeroing from `z` covers that case too,
        // so it is not asserted.
        let target = (need + self.ahead).saturating_sub(cap);
        let (mut x, mut n, mut dead) = (o, 0, 0);
        // Bounded: each step moves `x` forward by at least 8, and `x` stays below `P`.
        while x < target && x < p {
            // Acquire: pairs with the Release header store in `commit`: the record's
            // writer is done with its bytes before we zero them.
            let h = self.word(x).load(Acquire);
            let w = len_word(h);
            if h == 0 || w & BUSY_BIT != 0 {
                // Claimed and unfinished: never overwrite it, unless its producer died
                // (checked now and then when stuck at it: `x == o`).
                if x == o {
                    cur.stuck += 1;
                    if cur.stuck % STUCK_CHECK == 0 {
                        if let Some(fp) = self.dead_claim(x, cur.slot) {
                            dead += 1;
                            x += fp;
                            continue;
                        }
                    }
                }
                break;
            }
            let fp = footprint(w & LEN_MASK);
            if fp > cap - HDR_SIZE || x + fp > p {
                break; // not a header this ring's producers write: go no further
            }
            n += u64::from(w & DISCARD_BIT == 0);
            x += fp;
        }
        if x == o {
            // Release: clears the hint; publishes nothing new.
            line.zeroed.store(z, Release);
            self.unlock();
            return if need <= z { Ok(()) } else { Err(Refused::Pending) };
        }
        if dead != 0 {
            // Relaxed: a statistic.
            self.control().consumer.0.dead.fetch_add(dead, Relaxed);
        }
        // The seqlock write of (O, retired): readers retry while `seq` is odd.
        let s = line.seq.load(Relaxed);
        line.seq.store(s + 1, Relaxed);
        // Release fence: orders the odd `seq` before the stores below for a reader that
        // sees any of them (pairs with the reader's Acquire fence in `over_state`).
        fence(Release);
        line.over_pos.store(x, Relaxed);
        line.retired.store(retired + n, Relaxed);
        // Release: pairs with the Acquire load of `seq` in `over_state`.
        line.seq.store(s + 2, Release);
        // Release fence: the new `O` before the zeroing, for readers that copy a zero
        // (pairs with their Acquire copy loads, before they reload `O`; module docs).
        fence(Release);
        let new_z = x + cap;
        // Relaxed stores, published by the Release store of `zeroed` below. At most a
        // capacity: `[z, new_z)` lies within `[O, new O + capacity)`.
        self.region.zero_atomic(z, new_z.saturating_sub(z).min(cap));
        // Release: pairs with the Acquire loads of `zeroed` in `make_room` and the
        // readers': the zeroes happen-before any write of the new space.
        line.zeroed.store(new_z, Release);
        self.unlock();
        cur.zeroed = self.threshold(new_z);
        cur.stuck = 0;
        if need <= new_z {
            Ok(())
        } else {
            Err(Refused::Pending)
        }
    }

    /// Writes `data` at byte `offset` of the payload of the reservation at `pos`, with
    /// relaxed 64-bit stores (read-modify-write of our own words at the edges).
    ///
    /// The caller holds the reservation and `offset + data.len()` is within its length.
    #[inline]
    pub(crate) fn write_payload(&self, pos: u64, offset: usize, data: &[u8]) {
        if offset % 8 == 0 {
            return self.write_aligned(pos + HDR_SIZE + offset as u64, data);
        }
        let base = pos + HDR_SIZE;
        let mut b = offset;
        let mut rest = data;
        while !rest.is_empty() {
            let in_word = b % 8;
            let n = (8 - in_word).min(rest.len());
            let word = self.word(base + (b - in_word) as u64);
            let v = if n == 8 {
                let mut w = [0u8; 8];
                w.copy_from_slice(&rest[..8]);
                u64::from_ne_bytes(w)
            } else {
                // Relaxed: our own word (the reservation owns it).
                let mut w = word.load(Relaxed).to_ne_bytes();
                w[in_word..in_word + n].copy_from_slice(&rest[..n]);
                u64::from_ne_bytes(w)
            };
            // Relaxed: published by the commit's Release header store.
            word.store(v, Relaxed);
            b += n;
            rest = &rest[n..];
        }
    }

    /// [`write_payload`](Self::write_payload) from a word boundary (a whole record's
    /// payload, the common case): whole words stored one after another, then the tail
    /// merged into its word. No branch per word, so a 64-byte record is eight stores.
    #[inline(always)]
    fn write_aligned(&self, at: u64, data: &[u8]) {
        let mut words = data.chunks_exact(8);
        let mut w = at;
        for chunk in &mut words {
            let mut v = [0u8; 8];
            v.copy_from_slice(chunk);
            // Relaxed: published by the commit's Release header store.
            self.word(w).store(u64::from_ne_bytes(v), Relaxed);
            w += 8;
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let word = self.word(w);
            // The tail's bytes as the low bytes of a little-endian number, built in a
            // register: copying them into the word's bytes on the stack and reading the
            // word back stalls on the store forwarding (measured: half the cost of a
            // 60-byte record's write).
            let n = tail.len();
            let t = match data.len().checked_sub(8) {
                // The data's last 8 bytes end with the tail: one unaligned load.
                Some(from) => {
                    let mut last = [0u8; 8];
                    last.copy_from_slice(&data[from..]);
                    u64::from_le_bytes(last) >> (8 * (8 - n))
                }
                None => tail.iter().rev().fold(0u64, |t, &b| t << 8 | u64::from(b)),
            };
            let mask = (1u64 << (8 * n)) - 1;
            // Relaxed: our own word (the reservation owns it).
            let old = u64::from_le_bytes(word.load(Relaxed).to_ne_bytes());
            // Relaxed: as above.
            word.store(u64::from_ne_bytes(((old & !mask) | t).to_le_bytes()), Relaxed);
        }
    }

    /// `(O, retired)`, consistent with each other (a seqlock read), or `None` if a
    /// retirer stayed mid-update for [`SEQ_WAIT`].
    pub(crate) fn over_state(&self) -> Option<(u64, u64)> {
        let line = self.ow_line();
        let mut patience = Patience::new(SEQ_WAIT).loom_rounds(63);
        loop {
            // Acquire: pairs with the Release store of the even `seq` in `retire`.
            let s1 = line.seq.load(Acquire);
            if s1 & 1 == 0 {
                let o = line.over_pos.load(Relaxed);
                let r = line.retired.load(Relaxed);
                // Acquire fence: pairs with the retirer's Release fence after its odd
                // `seq` store: if we saw a new `O` or `retired`, we see `seq` moved.
                fence(Acquire);
                if line.seq.load(Relaxed) == s1 {
                    return Some((o, r));
                }
            }
            if !patience.wait() {
                return None;
            }
        }
    }

    /// The producer position without the pause flag.
    #[inline]
    pub(crate) fn prod(&self) -> u64 {
        // Relaxed: readers order what they read by the headers and the seqlock, not by
        // `P`, which only bounds how far they copy.
        self.control().producer.0.pos.load(Relaxed) & !PAUSED
    }
}
