//! The reading algorithm, generic over the ring's memory ([`RingMem`]): the kernel's
//! mapping in use, a simulated kernel ring in tests.
//!
//! # Discard mode (the kernel's default)
//!
//! As libbpf's `ringbuf_process_ring`, with two differences:
//!
//! - The consumer position is published once per batch of bytes and at the end of a
//!   call (short of the last record, if it is small: see [`Reader::consume`]), not after
//!   every record. The kernel reads `consumer_pos` on every reserve (to check for space)
//!   and every commit (to decide on a wakeup): a store per record moves that cache line
//!   to the consumer and back on every record.
//! - Before sleeping, [`Reader::arm`] publishes the position and then issues a full
//!   fence before it looks at the ring again. libbpf's release store alone does not
//!   order its later loads (store buffering against the kernel's `xchg` then load of
//!   `consumer_pos`), and only its level-triggered poll hides the lost wakeup (found by
//!   Tatsuyuki Ishi, aya-rs/aya PR 294; the libbpf patch "libbpf: fix ringbuf
//!   synchronization, use EPOLLET" makes that store sequentially consistent).
//!   Edge-triggered epoll is safe here.
//!
//! # Overwrite mode (`BPF_F_RB_OVERWRITE`, Linux 6.19)
//!
//! The kernel does not wait for the consumer: a record may be rewritten while it is
//! read. The reader copies `[max(read position, overwrite_pos), producer_pos)` with
//! atomic loads, fences, reloads `overwrite_pos` and keeps only records at or after it
//! (the kernel moves `overwrite_pos` past a record before it rewrites a byte of it), as
//! the kernel review asked: copy, verify, retry a bounded number of times
//! ([`Reader::capture`], which also reads a discard-mode map without consuming it).

use crate::error::ConsumeError;
use crate::format::record::{footprint, BUSY_BIT, DISCARD_BIT, HDR_SIZE, LEN_MASK};
use crate::protocol::capture::{parse, Capture, Parse, Walk, MAX_ATTEMPTS};
#[cfg(not(loom))]
use crate::recorder::snapshot::Snapshot;
use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};

/// What reading a BPF ring buffer needs of its memory.
///
/// Positions are byte counts since the ring was created, as the kernel keeps them; the
/// data area's size is a power of two.
pub(crate) trait RingMem {
    /// Bytes in the data area.
    fn size(&self) -> u64;
    /// The consumer position (the reader publishes it).
    fn consumer_pos(&self) -> &AtomicU64;
    /// The producer position: the end of the last reservation.
    fn producer_pos(&self) -> &AtomicU64;
    /// Overwrite mode only: the oldest record not overwritten.
    fn overwrite_pos(&self) -> &AtomicU64;
    /// The length word of the record header at `pos` (8-aligned).
    fn header(&self, pos: u64) -> &AtomicU32;
    /// `len` bytes at `pos` (`len <= size`), contiguous even where they wrap. Only for
    /// bytes the kernel does not write while they are borrowed: committed records short
    /// of a discard-mode ring's producer position, which waits for the consumer.
    fn bytes(&self, pos: u64, len: usize) -> &[u8];
    /// Copies the bytes of `[pos, pos + out.len())` (8-aligned, at most `size` bytes)
    /// with word-sized atomic loads: for memory the kernel may be rewriting
    /// (overwrite mode), whose copy the caller checks afterwards.
    fn copy(&self, pos: u64, out: &mut [u8]);
}

/// Overwrite mode: bytes a consume call copies at most (the records past them are read
/// by the next call), so that `consume_n(1)` does not copy the whole map every time.
const COPY_LIMIT: u64 = 64 * 1024;

/// Counters of one reader.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BpfStats {
    /// Records delivered.
    pub consumed: u64,
    /// Discarded records stepped over.
    pub discarded: u64,
    /// Overwrite mode: bytes of records the kernel overwrote before this reader got to
    /// them (the kernel counts neither records nor bytes it overwrites; positions give
    /// the bytes).
    pub overwritten_bytes: u64,
}

/// The reader's cursor and counters.
#[derive(Debug)]
pub(crate) struct Reader<M: RingMem> {
    pub(crate) mem: M,
    /// Next record to read.
    pub(crate) pos: u64,
    /// Last position stored to `consumer_pos`.
    pub(crate) published: u64,
    /// Start of the last record read (a record boundary, `<= pos`): where a consume
    /// call leaves the published position (see [`Reader::consume`]).
    last: u64,
    /// Publish once this many bytes were read.
    pub(crate) batch: u64,
    pub(crate) overwrite: bool,
    /// Hand space back only on [`release`](Self::release): reads are not stored to
    /// `consumer_pos` (see `BpfRingBuf::hold`).
    pub(crate) hold: bool,
    pub(crate) stats: BpfStats,
    /// Overwrite mode: the copy records are delivered from (reused).
    cap: Capture,
}

impl<M: RingMem> Reader<M> {
    /// A reader starting at the ring's consumer position. Fails (with the positions) if
    /// they are not a ring's: misaligned, or more than a ring apart.
    pub(crate) fn new(mem: M, overwrite: bool) -> Result<Self, (u64, u64)> {
        // Acquire: pairs with the release store of the previous consumer (another
        // process, or an earlier reader here), so its records are not read again.
        let cons = mem.consumer_pos().load(Ordering::Acquire);
        // Acquire: pairs with the kernel's smp_store_release(&rb->producer_pos).
        let prod = mem.producer_pos().load(Ordering::Acquire);
        if cons % 8 != 0 || prod < cons || (!overwrite && prod - cons > mem.size()) {
            return Err((cons, prod));
        }
        let batch = (mem.size() / 4).max(8);
        Ok(Reader {
            mem,
            pos: cons,
            published: cons,
            last: cons,
            batch,
            overwrite,
            hold: false,
            stats: BpfStats::default(),
            cap: Capture::default(),
        })
    }

    /// Starts again at the ring's consumer position, as [`new`](Self::new) does: for a
    /// handle that becomes the ring's reader only now (its reader lock taken), whose
    /// cursor, set when it was made, another reader may have left behind since.
    pub(crate) fn restart(&mut self) {
        // Acquire: pairs with the release store of the previous consumer, so its records
        // are not read again.
        let cons = self.mem.consumer_pos().load(Ordering::Acquire);
        self.pos = cons;
        self.published = cons;
        self.last = cons;
    }

    /// Stores the read position to `consumer_pos`, handing all the space read back.
    #[inline]
    pub(crate) fn publish(&mut self) {
        self.publish_to(self.pos);
    }

    /// Hands back the space of every record read, holding or not.
    pub(crate) fn release(&mut self) {
        let hold = std::mem::replace(&mut self.hold, false);
        self.publish();
        self.hold = hold;
    }

    /// Reads again from the published position: the records read since are delivered
    /// again (their space was not handed back, so the kernel has not rewritten it).
    pub(crate) fn unread(&mut self) {
        self.pos = self.published;
        self.last = self.published;
    }

    /// Stores `to` (a record boundary, `<= pos`) to `consumer_pos` if it is past what
    /// was stored (not while holding).
    #[inline]
    fn publish_to(&mut self, to: u64) {
        if to > self.published && !self.hold {
            // Release: pairs with the kernel's smp_load_acquire(&rb->consumer_pos) in
            // reserve: the kernel rewrites the space only after this reader's loads of
            // the records in it.
            self.mem.consumer_pos().store(to, Ordering::Release);
            self.published = to;
        }
    }

    /// Whether a record (or a discarded one) is committed at the read position (in
    /// overwrite mode: at the oldest record not overwritten, if that is past it).
    pub(crate) fn ready(&self) -> bool {
        // Acquire: pairs with the kernel's smp_store_release(&rb->producer_pos).
        let prod = self.mem.producer_pos().load(Ordering::Acquire);
        let at = if self.overwrite { self.pos.max(self.floor()) } else { self.pos };
        if at >= prod {
            return false;
        }
        // Acquire: pairs with the kernel's xchg(&hdr->len) in bpf_ringbuf_commit.
        self.mem.header(at).load(Ordering::Acquire) & BUSY_BIT == 0
    }

    /// The oldest position whose bytes the kernel has not started to rewrite. Overwrite
    /// mode: `overwrite_pos` (the kernel moves it past a record before it rewrites any
    /// of it). Discard mode: the map's `consumer_pos`, which is this reader's published
    /// position, or another process's if this handle only copies (`ringtrace snapshot`
    /// beside the map's own reader).
    fn floor(&self) -> u64 {
        if self.overwrite {
            // Relaxed: loaded after an Acquire load of producer_pos, which the kernel
            // stores with release after its WRITE_ONCE of overwrite_pos (see `capture`).
            self.mem.overwrite_pos().load(Ordering::Relaxed)
        } else {
            // Acquire: pairs with the release store of the consumer that published it:
            // its loads of the records below it happened before.
            self.mem.consumer_pos().load(Ordering::Acquire)
        }
    }

    /// Bytes between the read position and the producer position.
    pub(crate) fn available(&self) -> u64 {
        // Relaxed: a momentary figure, as the kernel's `BPF_RB_AVAIL_DATA`.
        let prod = self.mem.producer_pos().load(Ordering::Relaxed);
        prod.saturating_sub(self.pos).min(self.mem.size())
    }

    /// Publishes everything read, then says whether it is safe to sleep: true if no
    /// record is ready, so the kernel will wake the map's waiters when it commits the
    /// next one.
    pub(crate) fn arm(&mut self) -> bool {
        self.publish();
        // SeqCst fence between the store of consumer_pos above and the loads of
        // producer_pos and the header in `ready`. Pairs with the full barrier of the
        // kernel's commit (`xchg(&hdr->len)`, then `smp_load_acquire(&rb->consumer_pos)`
        // to decide on a wakeup): either this reader sees the record committed, or the
        // kernel sees the consumer caught up with it and wakes the waiters. A release
        // store alone does not order the loads after it (the lost wakeup of libbpf's
        // `ringbuf_process_ring` under edge-triggered epoll).
        fence(Ordering::SeqCst);
        !self.ready()
    }

    /// Calls `f` with the position and payload of up to `max` records in order
    /// (`max` = `usize::MAX`: all there are).
    ///
    /// Hands back the space of every record read but the last, if that one is small
    /// (at most a sixteenth of the map): the published position stays at its start.
    /// The kernel wakes the map's waiters when it commits a record at the published
    /// position (flags 0), so a position equal to the producer's would make the next
    /// commit queue a wakeup (an `irq_work`, and an IPI to the reader's CPU) while the
    /// reader is not waiting but about to read again. [`arm`](Self::arm), before a
    /// wait, publishes the rest, as do [`publish`](Self::publish) and drop.
    #[inline]
    pub(crate) fn consume<F, E>(&mut self, max: usize, f: F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(u64, &[u8]) -> Result<(), E>,
    {
        let r = if self.overwrite { self.consume_overwrite(max, f) } else { self.consume_discard(max, f) };
        self.publish_to(self.held_back(self.last, self.pos));
        r
    }

    /// Where a call that read a record at `at` ending at `end` leaves the published
    /// position: `at` (hold the record back) if it is small, else `end`.
    #[inline]
    fn held_back(&self, at: u64, end: u64) -> u64 {
        if end - at <= self.mem.size() / 16 {
            at
        } else {
            end
        }
    }

    /// Discard mode: records in place, zero-copy.
    #[inline]
    fn consume_discard<F, E>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(u64, &[u8]) -> Result<(), E>,
    {
        let size = self.mem.size();
        let mut n = 0usize;
        let mut pos = self.pos;
        // Saturating: a consumer_pos written near 2^64 (by another process with the
        // map's fd) must not overflow; the positions are never taken to wrap.
        let mut batch_end = self.published.saturating_add(self.batch);
        let result = 'outer: loop {
            // Acquire: pairs with the kernel's smp_store_release(&rb->producer_pos) at
            // the end of a reserve (the header written as BUSY before it).
            let prod = self.mem.producer_pos().load(Ordering::Acquire);
            if prod.wrapping_sub(pos) > size || prod % 8 != 0 {
                // Another consumer moved the position, or the memory is corrupt.
                break Err(ConsumeError::Positions { reader: pos, producer: prod });
            }
            if prod == pos {
                break Ok(n);
            }
            // Bounded: `pos` grows by at least 8 per record up to `prod`.
            while pos < prod {
                if n >= max {
                    break 'outer Ok(n);
                }
                // Acquire: pairs with the kernel's xchg(&hdr->len) in bpf_ringbuf_commit
                // (a full barrier after the record's bytes were written).
                let len = self.mem.header(pos).load(Ordering::Acquire);
                if len & BUSY_BIT != 0 {
                    break 'outer Ok(n);
                }
                let fp = footprint(len & LEN_MASK);
                if fp > prod - pos {
                    break 'outer Err(ConsumeError::Corrupt { pos, header: len as u64 });
                }
                let at = pos;
                self.last = at;
                pos += fp;
                if len & DISCARD_BIT != 0 {
                    self.stats.discarded += 1;
                } else {
                    n += 1;
                    self.stats.consumed += 1;
                    let data = self.mem.bytes(at + HDR_SIZE, (len & LEN_MASK) as usize);
                    if let Err(e) = f(at, data) {
                        break 'outer Err(ConsumeError::Callback(e)); // it counts as read
                    }
                }
                if pos >= batch_end {
                    self.pos = pos;
                    self.publish_to(self.held_back(at, pos));
                    batch_end = pos.saturating_add(self.batch);
                }
            }
        };
        self.pos = pos;
        result
    }

    /// Copies the ring's records from the read position on (or from the oldest the
    /// kernel has not started to rewrite, if that is past it), at most `limit` bytes,
    /// into `cap` and checks the copy; `cap.first` is where the checked records start.
    ///
    /// The argument, in overwrite mode: the kernel stores `overwrite_pos` past a record
    /// before it rewrites any byte of it, and publishes both with its release store of
    /// `producer_pos`. A byte copied from a position at or after the `overwrite_pos`
    /// loaded *after* the copy (and an Acquire fence) is the byte of the record that was
    /// there. That holds where the kernel's stores become visible in order (x86); on
    /// weakly ordered CPUs the kernel issues no barrier between its `overwrite_pos`
    /// store and its rewriting stores (which follow the release), so a torn record is
    /// possible there, as with the kernel's own proposed reader. Discard mode: the same
    /// with `consumer_pos`, below which the kernel may rewrite.
    fn capture(&self, walk: Walk, limit: u64, cap: &mut Capture) -> Result<(), ConsumeError> {
        let size = self.mem.size();
        for _ in 0..MAX_ATTEMPTS {
            // Acquire: pairs with the kernel's smp_store_release(&rb->producer_pos),
            // which it issues after its WRITE_ONCE(rb->overwrite_pos): the floor loaded
            // next is at least the one that goes with `prod`.
            let prod = self.mem.producer_pos().load(Ordering::Acquire);
            let floor = self.floor();
            if floor > prod {
                // A later reservation (or consumer) moved the floor after the
                // producer_pos loaded above: load both again.
                continue;
            }
            if prod % 8 != 0 || floor % 8 != 0 || prod - floor > size {
                return Err(ConsumeError::Positions { reader: floor, producer: prod });
            }
            let start = self.pos.max(floor).min(prod);
            let end = prod.min(start.saturating_add(limit));
            cap.bytes.clear();
            cap.bytes.resize((end - start) as usize, 0);
            self.mem.copy(start, &mut cap.bytes);
            // Acquire fence: the loads of the copy above are ordered before the reload
            // of the floor below, so a rewrite that reached the copy shows in it (see
            // above for what the kernel's side guarantees).
            fence(Ordering::Acquire);
            let floor2 = self.floor();
            if floor2 > end {
                continue; // everything copied may have been rewritten: copy again
            }
            cap.start = start;
            cap.first = start.max(floor2);
            cap.retired_at_first = None;
            parse(walk, size, end, end < prod, cap);
            if let Parse::Corrupt { pos, header } = cap.stop {
                return Err(ConsumeError::Corrupt { pos, header });
            }
            return Ok(());
        }
        Err(ConsumeError::Busy)
    }

    /// Overwrite mode: copy, check, deliver from the copy (the caller publishes).
    fn consume_overwrite<F, E>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(u64, &[u8]) -> Result<(), E>,
    {
        let mut cap = std::mem::take(&mut self.cap);
        let captured = self.capture(Walk::Consumer, COPY_LIMIT, &mut cap);
        self.cap = cap;
        captured.map_err(ConsumeError::widen)?;
        if self.cap.first > self.pos {
            self.stats.overwritten_bytes += self.cap.first - self.pos;
            self.pos = self.cap.first;
        }
        let mut n = 0;
        let mut result = Ok(0);
        for i in 0..self.cap.found.len() {
            if n >= max {
                break;
            }
            let rec = self.cap.found[i];
            self.last = rec.pos;
            self.pos = rec.end();
            if rec.discarded() {
                self.stats.discarded += 1;
                continue;
            }
            n += 1;
            self.stats.consumed += 1;
            if let Err(e) = f(rec.pos, self.cap.payload(rec)) {
                result = Err(ConsumeError::Callback(e));
                break;
            }
        }
        result.map(|_: usize| n)
    }

    /// The records from the read position (or the oldest not overwritten) to the
    /// producer position, copied and checked, without consuming them.
    #[cfg(not(loom))]
    pub(crate) fn snapshot(&self) -> Result<Snapshot, ConsumeError> {
        let mut cap = Capture::default();
        self.capture(Walk::Snapshot, self.mem.size(), &mut cap)?;
        Ok(Snapshot::from_capture(cap, self.mem.size()))
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
