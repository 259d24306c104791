//! The protocol: reserve, commit and discard without a lock, consume in reservation
//! order, and wake the consumer without ever losing a wakeup. Generic over the
//! [`crate::region::Region`] that holds the bytes, so loom runs exactly this code, producer and
//! consumer sides alike ([`crate::protocol::core::Core::next`] is the consumer's whole reading step).
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
//! instead ([`crate::protocol::core::Core::zero_ahead`]): in bulk, up to a kilobyte past its next header (or
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
//! their caches (a consumer that polled the producer position would take that line from
//! the producers on every poll, and a single-producer ring would move markedly fewer
//! records between two threads).
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

//!
//! # Files
//!
//! Each concern is a file of `impl Core` blocks that import downward only: [`core`]
//! (the state, the cursors, the shared constants) and [`capture`] (the bytes a reader
//! copies) at the bottom; then the discard protocol, [`claim`] (positions and claim),
//! [`commit`] (commit and consume) and [`wakeup`]; then overwrite mode, [`retire`]
//! (giving up the oldest records), [`lock`] (the retire lock and its takeover), [`pause`]
//! and [`read`] (copying a ring while it is written); and [`repair`] (records left
//! unfinished by a process that died). The loom models sit beside the files they check.

pub(crate) mod capture;
mod claim;
mod commit;
pub(crate) mod core;
mod lock;
mod pause;
mod read;
pub(crate) mod repair;
mod retire;
mod room;
mod wakeup;

#[cfg(all(test, loom))]
pub(crate) mod commit_loom;
#[cfg(all(test, loom))]
mod retire_loom;
#[cfg(all(test, loom))]
mod room_loom;
#[cfg(all(test, not(loom)))]
mod tests;
