//! The control block at the start of every ring: its fixed description, the positions,
//! the wait state, the overwrite line and the counters; and the values its words take.
//!
//! Nothing in a ring's memory is a pointer: positions are byte offsets that only grow
//! (`u64`, so they never wrap in practice), and a record lives at `pos & (capacity - 1)`
//! in the data area. The control block is `#[repr(C)]` with fixed offsets so that it can
//! sit at the start of a shared file; every field is an atomic, so a
//! process that reads it while another writes it is never a data race.
//!
//! ```text
//!  offset 0     Meta          magic, layout version, kind, mode, capacity, policy
//!  offset 128   ProducerLine  producer_pos                   (written by producers)
//!  offset 256   ConsumerLine  consumer_pos, counters          (written by the consumer)
//!  offset 384   WaitLine      the consumer's wait state       (read on every commit),
//!                             producers waiting for room, who has ever attached
//!  offset 512   OverwriteLine overwrite mode: overwrite_pos, its record count, the
//!                             zeroed frontier, the retire lock (written by producers)
//!  offset 640   overflow      shared counters for producers without a slot
//!  offset 768   slots[58]     per-producer counters, one 128-byte line each
//!  offset 8192  data          capacity bytes, mapped twice back to back
//! ```
//!
//! Every byte format of the project, with this one, is laid out in one page:
//! `docs/formats.md` in the repository.

use crate::sync::{AtomicU32, AtomicU64};

/// `b"RINGTRC\0"`: the first word of a ring's control block.
pub const MAGIC: u64 = u64::from_le_bytes(*b"RINGTRC\0");
/// The bytes sent with a ring's memfd over a Unix socket (`SCM_RIGHTS`), which say what
/// the message is.
pub const FD_HELLO: [u8; 8] = *b"RINGTRC\x01";
/// Version of this layout; bumped on any incompatible change. Version 6: a
/// multi-producer discard ring's producers zero the space they claim, ahead of the
/// zeroed frontier `overwrite.zeroed` under the lock `overwrite.lock_pid`, and its
/// consumer writes nothing into the data area.
pub const LAYOUT_VERSION: u32 = 6;
/// The layout before [`LAYOUT_VERSION`]: the same bytes, but a multi-producer discard
/// ring's consumer zeroed what it consumed and its producers claimed without the
/// frontier. Single-producer and overwrite rings of this version work unchanged and are
/// attached; multi-producer discard rings are refused (a producer of one version would
/// claim space the other version's consumer or producers never zeroed).
pub const LAYOUT_VERSION_5: u32 = 5;
/// `Meta::flags`: the doorbell is the futex word `WaitLine::futex`.
pub const FLAG_FUTEX: u32 = 1;
/// The flags this version knows; a ring with any other is refused.
pub const KNOWN_FLAGS: u32 = FLAG_FUTEX;

/// `Meta::kind` of a multi-producer ring.
pub const KIND_MPSC: u32 = 1;
/// `Meta::kind` of a single-producer ring.
pub const KIND_SPSC: u32 = 2;
/// `Meta::mode` of a discard-mode ring.
pub const MODE_DISCARD: u32 = 1;
/// `Meta::mode` of an overwrite-mode ring (a flight recorder).
pub const MODE_OVERWRITE: u32 = 2;

/// The smallest capacity a ring file can have (one 4 KiB page).
pub const MIN_CAPACITY: u64 = 4096;
/// The largest capacity a ring takes: 4 GiB (the kernel's BPF ring buffer limit).
pub const MAX_CAPACITY: u64 = 1 << 32;
/// The largest data offset accepted: the control block rounded up to a page of at most
/// 1 MiB.
pub const MAX_DATA_OFFSET: u64 = 1 << 20;

/// `Meta::watermark` of `WakeupPolicy::Never`: only forced wakeups.
pub const NEVER_WAKE: u64 = u64::MAX;
/// `Meta::watermark` of `WakeupPolicy::HalfRing`: wake every half ring.
pub const HALF_RING: u64 = u64::MAX - 1;

/// [`WaitLine::word`] flag: the consumer is asleep (or about to be).
pub(crate) const WAITING: u64 = 1;
/// [`WaitLine::word`] flag: wake only for the record at the waiting position.
pub(crate) const BLOCKED: u64 = 2;
/// [`WaitLine::word`]: the flag bits; the rest is the position waited at.
pub(crate) const WAIT_FLAGS: u64 = 7;

/// Bit 0 of `OverwriteLine::zeroed`: a producer is giving up space (a hint for the
/// others; the lock itself is `lock_pid`).
pub const LOCK: u64 = 1;
/// Bit 31 of `OverwriteLine::lock_pid`: the holder is pausing the ring (process ids
/// are below 2^22).
pub const PAUSER: u32 = 1 << 31;
/// Bit 0 of the producer position (`ProducerLine::pos`): the ring is paused.
pub const PAUSED: u64 = 1;

/// Per-producer counter slots in the control block.
#[cfg(not(loom))]
pub const N_SLOTS: usize = 58;
/// Per-producer counter slots in the loom models' control block (two keep them small).
#[cfg(loom)]
pub const N_SLOTS: usize = 2;

/// One 128-byte line: two 64-byte lines, since x86's spatial prefetcher pulls pairs
/// (`crossbeam-utils`' `CachePadded` uses 128 on x86-64 for that reason).
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub(crate) struct Line<T>(pub(crate) T);

/// Written once when the ring is created, before any other thread or process sees it.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct Meta {
    pub(crate) magic: AtomicU64,
    pub(crate) version: AtomicU32,
    /// 1 = multi-producer, 2 = single-producer.
    pub(crate) kind: AtomicU32,
    /// 1 = discard, 2 = overwrite.
    pub(crate) mode: AtomicU32,
    pub(crate) creator_pid: AtomicU32,
    pub(crate) capacity: AtomicU64,
    /// Byte offset of the data area from the start of the control block.
    pub(crate) data_offset: AtomicU64,
    /// 0 = wake when the consumer has caught up; `u64::MAX` = only forced wakeups;
    /// `u64::MAX - 1` = every half ring; otherwise the watermark in bytes.
    pub(crate) watermark: AtomicU64,
    /// [`FLAG_FUTEX`]: the doorbell is the futex word in [`WaitLine`] (rings shared
    /// between processes); otherwise an eventfd private to the creating process.
    pub(crate) flags: AtomicU32,
    /// The clock record timestamps use: 0 = none (no ring records timestamps yet).
    pub(crate) clock: AtomicU32,
    /// When the ring was created: nanoseconds since the Unix epoch (`CLOCK_REALTIME`).
    pub(crate) created_ns: AtomicU64,
    /// Overwrite mode: bytes a retiring producer gives up beyond its need (the
    /// builder's `retire_ahead`), so every process that attaches uses the creator's.
    pub(crate) retire_ahead: AtomicU64,
}

/// Written by producers (and read by everyone).
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct ProducerLine {
    /// Next free position: the end of the newest reservation.
    pub(crate) pos: AtomicU64,
    /// Single-producer rings: the process id of the producer handle's process while it
    /// exists (0: none). A dead process's claim is taken over.
    pub(crate) attached: AtomicU32,
    /// Single-producer rings: the producer position when the role was last taken over
    /// from a dead process; a zero header below it is that process's unfinished
    /// record, which ends here.
    pub(crate) dead_below: AtomicU64,
}

/// Written by the consumer (and read by producers).
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct ConsumerLine {
    /// Everything before this position has been consumed (and, in multi-producer
    /// rings, zeroed).
    pub(crate) pos: AtomicU64,
    /// The process id of the consumer handle's process while it exists (0: none). A
    /// dead process's claim is taken over.
    pub(crate) attached: AtomicU32,
    /// The consumer's read position: everything before it is consumed (the consumer
    /// hands space back up to `pos`, at most one cache line behind it).
    pub(crate) read: AtomicU64,
    /// Committed records the consumer delivered.
    pub(crate) consumed: AtomicU64,
    /// Discarded records the consumer skipped.
    pub(crate) skipped: AtomicU64,
    /// Overwrite mode: committed records overwritten before the consumer read them.
    pub(crate) overwritten: AtomicU64,
    /// Reservations whose producer process died before committing them, stepped over
    /// (by the consumer, or by an overwriting producer).
    pub(crate) dead: AtomicU64,
}

/// The consumer's wait state, alone on its line: producers load it on every commit, and
/// the consumer writes it only when it goes to sleep, so it stays in every producer's
/// cache while the consumer publishes its position on the line before.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct WaitLine {
    /// See [`crate::protocol`]: `WAITING`, `BLOCKED` in the low bits, the position the
    /// consumer waits at in the rest.
    pub(crate) word: AtomicU64,
    /// Rings with [`FLAG_FUTEX`]: the doorbell. A producer that wakes the consumer adds
    /// one and calls `FUTEX_WAKE`; the consumer sleeps in `FUTEX_WAIT` on the value it
    /// read before it armed.
    pub(crate) futex: AtomicU32,
    /// Nonzero while a producer waits for room (see `protocol::room`): the consumer,
    /// which loads it after every publication of its position, then rings `room_futex`.
    pub(crate) room: AtomicU32,
    /// The producers' doorbell: the consumer adds one and calls `FUTEX_WAKE` (all
    /// waiters); a producer sleeps in `FUTEX_WAIT` on the value it read before it armed.
    pub(crate) room_futex: AtomicU32,
    /// The socket doorbell of a consumer that waits in an event loop on a ring shared
    /// between processes: 0 while there is none (producers ring `futex`); otherwise the
    /// name of the consumer's abstract Unix socket, to which producers send a byte
    /// instead (see `wait::doorbell`).
    pub(crate) socket: AtomicU64,
    /// Bit [`SEEN_PRODUCER`]: a producer handle has attached to this ring; bit
    /// [`SEEN_CONSUMER`]: a consumer has. Until then neither side can be disconnected.
    pub(crate) seen: AtomicU32,
    /// The socket doorbells of processes whose producers wait for room in an event
    /// loop (0: a free entry): the consumer that rings `room_futex` also sends a byte
    /// to each, and frees an entry whose socket is gone (see `wait::doorbell`).
    pub(crate) room_sockets: [AtomicU64; ROOM_SOCKETS],
}

/// Entries of the wait line's table of room sockets: the processes whose producers
/// wait for room in an event loop (`ringtrace::tokio::AsyncProducer`), one socket each;
/// processes past this many look for room every millisecond instead.
pub const ROOM_SOCKETS: usize = 4;

/// [`WaitLine::seen`]: a producer handle has attached.
pub(crate) const SEEN_PRODUCER: u32 = 1;
/// [`WaitLine::seen`]: a consumer has attached.
pub(crate) const SEEN_CONSUMER: u32 = 2;

/// Overwrite mode's shared state (see the crate's `protocol::retire`), written by the holder of
/// the retire lock (`lock_pid`) and read by everyone.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct OverwriteLine {
    /// Sequence of the seqlock over `over_pos` and `retired`: odd while they change.
    pub(crate) seq: AtomicU64,
    /// The oldest record not overwritten (the kernel's `overwrite_pos`): a record
    /// boundary; everything before it is gone or going.
    pub(crate) over_pos: AtomicU64,
    /// Committed records before `over_pos`: overwritten records, counted as they go.
    pub(crate) retired: AtomicU64,
    /// `over_pos + capacity` once the space given up is zeroed (so always past the
    /// producer position by at least 8: the next header reads zero). Bit 0 is set while
    /// the retire lock is held: a hint for producers, not the lock.
    pub(crate) zeroed: AtomicU64,
    /// The retire lock: 0 while free, else its holder's process id (with bit 31 set for
    /// a pause), stored by the CAS that takes it, so that a lock whose holder died is
    /// found and taken over.
    pub(crate) lock_pid: AtomicU32,
}

/// Counters of one producer handle (or, for the overflow slot, of all producers that
/// found no free slot). Monotone: a slot's next owner keeps counting from its values.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// 0 while free; the owning producer handle's process id while one owns it (a
    /// dead process's slot is taken over). The overflow slot: how many producer handles
    /// use it.
    pub(crate) owner: AtomicU64,
    pub(crate) committed: AtomicU64,
    pub(crate) discarded: AtomicU64,
    /// Reservations refused for want of room: the ring was full (discard mode), or the
    /// space held a record still being written, or the ring was paused (overwrite mode).
    pub(crate) lost: AtomicU64,
    /// Of `lost`: refused because the ring was paused.
    pub(crate) paused: AtomicU64,
    /// Reservations refused because the record could never fit.
    pub(crate) too_large: AtomicU64,
    /// Multi-producer and overwrite rings: nonzero from just before the owner's claim
    /// CAS until its BUSY header is stored (the overflow slot: how many of its users
    /// are there). A reader that finds a claimed record whose header is still zero
    /// steps over it as dead only if no live owner has this set (see
    /// [`crate::protocol::repair`]).
    pub(crate) claiming: AtomicU64,
}

/// What [`Control::init_meta`] writes (see [`Meta`] for each field).
#[derive(Clone, Copy, Debug)]
pub(crate) struct MetaInit {
    pub(crate) kind: u32,
    pub(crate) mode: u32,
    pub(crate) capacity: u64,
    pub(crate) data_offset: u64,
    pub(crate) watermark: u64,
    pub(crate) flags: u32,
    pub(crate) clock: u32,
    pub(crate) ahead: u64,
}

/// The control block at the start of every ring.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Control {
    pub(crate) meta: Line<Meta>,
    pub(crate) producer: Line<ProducerLine>,
    pub(crate) consumer: Line<ConsumerLine>,
    pub(crate) wait: Line<WaitLine>,
    pub(crate) overwrite: Line<OverwriteLine>,
    pub(crate) overflow: Line<Counters>,
    pub(crate) slots: [Line<Counters>; N_SLOTS],
}

/// Size of the control block, and so the offset of the data area: a multiple of the
/// page size on every Linux target ringtrace supports (4 KiB and 8 KiB pages; rings on
/// 16 KiB or 64 KiB page systems round the data offset up, see `region::mmap`).
#[cfg(not(loom))]
pub const CONTROL_SIZE: usize = 8192;

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<Control>() == CONTROL_SIZE);

impl Control {
    /// A fresh control block on the heap (tests and loom models).
    #[cfg(any(test, loom))]
    pub(crate) fn new_boxed() -> Box<Self> {
        Box::new(Control {
            meta: Line::default(),
            producer: Line::default(),
            consumer: Line::default(),
            wait: Line::default(),
            overwrite: Line::default(),
            overflow: Line::default(),
            slots: core::array::from_fn(|_| Line::default()),
        })
    }

    /// Fills in [`Meta`]; called once, before the ring is shared.
    pub(crate) fn init_meta(&self, init: &MetaInit) {
        use crate::sync::Ordering::{Relaxed, Release};
        // Relaxed: the ring is not shared yet; whatever shares it (Arc, a later
        // fork/mmap) synchronizes these stores with every later reader.
        let m = &self.meta.0;
        m.version.store(LAYOUT_VERSION, Relaxed);
        m.kind.store(init.kind, Relaxed);
        m.mode.store(init.mode, Relaxed);
        m.creator_pid.store(std::process::id(), Relaxed);
        m.capacity.store(init.capacity, Relaxed);
        m.data_offset.store(init.data_offset, Relaxed);
        m.watermark.store(init.watermark, Relaxed);
        m.flags.store(init.flags, Relaxed);
        m.clock.store(init.clock, Relaxed);
        m.retire_ahead.store(init.ahead, Relaxed);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        m.created_ns.store(u64::try_from(now.as_nanos()).unwrap_or(u64::MAX), Relaxed);
        // Release: the magic is stored last; a process that attaches to a ring file
        // loads it with Acquire and sees the rest of the block (and the initialized
        // positions, stored before this call).
        m.magic.store(MAGIC, Release);
    }
}
