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
//! what was there before for a header, so **producers zero space before they claim it**,
//! and ringtrace headers are never zero (the aux word is the producer's pid): an
//! all-zero header means "wait", exactly like BUSY. A producer stopped between reserve
//! and commit stops nobody but the consumer, which waits at its record while the others
//! go on reserving and committing until the ring is full behind it.
//!
//! ```text
//!   consumer_pos            producer_pos           zeroed (Z)     consumer_pos + capacity
//!        |  committed | BUSY | committed | 0 (claimed) | zero, free | free, not zeroed |
//!        '-- consumer reads in order, stops at BUSY or 0
//! ```
//!
//! A multi-producer ring's producers claim only below the shared zeroed frontier `Z`
//! (a claim and the word after it, the next header, end at or below it), so the claim
//! needs no other check of room: `Z` never passes the end of the free space. A producer
//! whose record does not fit below `Z` takes the zeroing lock (overwrite mode's retire
//! lock, which a dead holder's successor takes over), zeroes up to
//! [`crate::protocol::core::ZERO_AHEAD`] bytes past its need (or to the end of the free
//! space) and publishes the new `Z` with Release
//! ([`crate::protocol::core::Core::zero_room`]); the others go on claiming below the old
//! `Z` meanwhile, and wait for the new one only once they reach it. A single producer knows where its
//! next header will be, so it zeroes ahead of itself the same way, with a frontier of
//! its own and no lock ([`crate::protocol::core::Core::zero_ahead`]). Either way the
//! zeroing runs in bulk, lines ahead of the consumer, and happens-before the commit
//! whose Release header store lets the consumer read there; and **the consumer writes
//! nothing into the ring**, so the lines it reads travel one way, from producers to the
//! consumer. (Until the ring file layout version 6, a multi-producer ring's consumer
//! zeroed what it consumed, as Agrona's many-to-one ring does: each line then crossed
//! between cores twice a lap, and the consumer stored to every line it read.)
//!
//! Invariants: `consumer_pos <= producer_pos <= consumer_pos + capacity - 8`; records are
//! contiguous and 8-aligned from `consumer_pos`; the words in `[producer_pos, Z)` are
//! zero, with `producer_pos + 8 <= Z <= consumer_pos + capacity` (a single producer's `Z`
//! is private to it; only the word at `producer_pos` is known to the others).
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
