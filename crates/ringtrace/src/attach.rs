//! Attaching to a ring another process made: the roles a process asks for
//! ([`Access`]), and the checks of the file and of the positions in it before and after
//! it is mapped (another process's writes: untrusted input).

#![cfg(not(loom))]

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::fs::{fcntl_get_seals, fstat, FileType, SealFlags};

use crate::error::Error;
use crate::format::control::{LOCK, PAUSED};
use crate::inspect::{At, Header, RingFile, Source};
use crate::protocol::core::Core;
use crate::region::file::{check_offset, data_offset, pread_exact};
use crate::region::Region;
use crate::sync::Ordering::{Acquire, Relaxed};

/// What a process attaching to a ring file will do with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Access {
    /// Produce, consume, snapshot and pause: the whole file is mapped read-write.
    #[default]
    Full,
    /// Consume, snapshot and pause only: [`crate::RingBuf::producer`] is refused, and the data
    /// area is mapped read-only where the consumer only reads it (single-producer
    /// discard rings, and overwrite rings; the consumer of a multi-producer discard
    /// ring zeroes what it consumes, so its data area stays writable).
    Consumer,
}

/// Whose ring files a process attaches to.
///
/// A process that maps a file shares its fate with whoever can change the file: the
/// file's owner (or anyone who may write it) can truncate it under the mapping, and
/// the next access dies of SIGBUS; or rewrite the ring's positions and records at
/// will (which attaching and reading check as untrusted input, but cannot prevent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Owners {
    /// Only files of this process's user (its effective uid) that no other user may
    /// write (no group or other write bit): the default, and what
    /// [`Builder::create`](crate::Builder::create) makes (mode 0600).
    #[default]
    Mine,
    /// Also files of other users, and files their group may write: for rings shared
    /// between users on purpose. Such a user can kill this process with SIGBUS by
    /// truncating the file. Files every user may write are refused still.
    Any,
}

/// Positioned reads of a descriptor, for [`inspect`](crate::inspect)'s header check.
struct FdSource<'a>(BorrowedFd<'a>);

impl Source for FdSource<'_> {
    fn size(&self) -> io::Result<u64> {
        Ok(u64::try_from(fstat(self.0)?.st_size).unwrap_or(0))
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        pread_exact(self.0, offset, buf)
    }
}

/// Checks what `fd` holds before the ring image at `offset` is mapped: a regular file
/// (or memfd) sealed against shrinking if it is a memfd, and only its owner can write
/// if it is a named file (checks of the whole file); a page-aligned offset inside the
/// file; at that offset, a header of this layout version ([`inspect`](crate::inspect)
/// parses and checks it, as for any untrusted file, through an [`At`] window, so its
/// size checks cover `offset` too), describing a ring this machine can map and no
/// longer than the rest of the file. A named file must also be of `owners`. The kind
/// and mode are checked by the caller.
pub(crate) fn check_file_at(fd: BorrowedFd<'_>, offset: u64, owners: Owners) -> Result<Header, Error> {
    let st = fstat(fd).map_err(Error::io("fstat of the ring file"))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Error::invalid("not a regular file"));
    }
    if st.st_nlink == 0 {
        // A memfd (or a deleted file): only seals protect it. Without SHRINK, its
        // sender could truncate it under our mapping.
        let sealed = fcntl_get_seals(fd).is_ok_and(|s| s.contains(SealFlags::SHRINK));
        if !sealed {
            return Err(Error::invalid("the memfd is not sealed against shrinking (F_SEAL_SHRINK)"));
        }
    } else if st.st_mode & 0o002 != 0 {
        // A named file cannot be sealed: only its owner should be able to write it.
        return Err(Error::invalid(format!(
            "the file is writable by every user (mode {:o}): any process could truncate or \
             corrupt the ring; ring files are created with mode 600",
            st.st_mode & 0o7777
        )));
    } else if owners == Owners::Mine {
        let me = rustix::process::geteuid().as_raw();
        if st.st_uid != me {
            return Err(Error::invalid(format!(
                "the file belongs to another user (uid {}, this process runs as uid {me}): its owner could \
                 truncate it under the mapping (SIGBUS) or rewrite it; attach with Owners::Any to share a ring \
                 between users on purpose",
                st.st_uid
            )));
        }
        if st.st_mode & 0o020 != 0 {
            return Err(Error::invalid(format!(
                "the file is writable by its group (mode {:o}): another user could truncate it under the \
                 mapping (SIGBUS); attach with Owners::Any to share a ring within a group on purpose",
                st.st_mode & 0o7777
            )));
        }
    }
    check_offset(offset, u64::try_from(st.st_size).unwrap_or(0))?;
    let file = RingFile::from_source(At::new(FdSource(fd), offset))
        .map_err(|e| Error::invalid(crate::error::with_causes(&e)))?;
    let h = file.header();
    if h.data_offset != data_offset() {
        return Err(Error::invalid(format!(
            "data offset {} differs from this machine's {} (made on a machine with another page size?)",
            h.data_offset,
            data_offset()
        )));
    }
    if !h.futex() {
        return Err(Error::invalid("the ring is private to the process that made it (no futex doorbell)"));
    }
    if h.retire_ahead > h.capacity / 2 || h.retire_ahead % 8 != 0 {
        return Err(Error::invalid(format!("retire look-ahead {} is out of range", h.retire_ahead)));
    }
    let w = h.watermark;
    if w > h.capacity && w < u64::MAX - 1 {
        return Err(Error::invalid(format!("wakeup watermark {w} is larger than the capacity")));
    }
    Ok(h.clone())
}

/// Bytes a ring image of `capacity` data bytes takes in a file holding several rings
/// (control block and data area), a multiple of the page size: where the next image
/// can start ([`crate::Builder::init_at`], [`crate::RingBuf::open_slot_at`]).
pub(crate) fn image_len(capacity: u64) -> u64 {
    crate::region::file::image_len(capacity)
}

/// A duplicate of `fd` (close-on-exec) for a mapping to own.
pub(crate) fn dup(fd: BorrowedFd<'_>) -> Result<OwnedFd, Error> {
    rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(Error::io("duplicating the ring file's descriptor"))
}

/// The largest position attaching accepts.
const MAX_POSITION: u64 = 1 << 62;

/// Checks the positions of a ring just mapped: they are another process's writes.
pub(crate) fn check_positions<R: Region>(core: &Core<R>, overwrite: bool) -> Result<(), Error> {
    let ctl = core.control();
    let cap = core.capacity();
    // Acquire: pairs with the Release store of the magic in `init_meta` (its creator's
    // last initialization store), re-read now through the mapping.
    if ctl.meta.0.magic.load(Acquire) != crate::format::control::MAGIC {
        return Err(Error::invalid("the header changed while the ring was being attached"));
    }
    // Relaxed: a consistency check of values that may move on; they are re-read under
    // the protocol's orderings by the handles made later.
    let prod = ctl.producer.0.pos.load(Relaxed) & !PAUSED;
    let cons = ctl.consumer.0.pos.load(Relaxed);
    let bad = |what: String| Err(Error::invalid(format!("positions are inconsistent: {what}")));
    if prod % 8 != 0 || cons % 8 != 0 {
        return bad(format!("producer {prod} or consumer {cons} is not a multiple of 8"));
    }
    // Relaxed: as above. In overwrite mode `Z`'s bit 0 is the lock hint; discard mode
    // never sets it.
    let z = ctl.overwrite.0.zeroed.load(Relaxed) & if overwrite { !LOCK } else { !0 };
    if z % 8 != 0 {
        return bad(format!("zeroed frontier {z} is not a multiple of 8"));
    }
    if overwrite {
        // Relaxed: as above. A single-producer ring never sets the pause bit of `P` (its
        // producer's plain stores would keep it).
        let o = ctl.overwrite.0.over_pos.load(Relaxed);
        if o % 8 != 0 {
            return bad(format!("overwrite position {o} is not a multiple of 8"));
        }
        if core.single_producer() && ctl.producer.0.pos.load(Relaxed) & PAUSED != 0 {
            return bad("a single-producer ring's producer position has the pause bit set".to_owned());
        }
    }
    // Positions count bytes ever written: 2^62 is 146 years at 1 GB/s. Past it, the
    // protocol's arithmetic (`pos + capacity`) could overflow.
    let ow = &ctl.overwrite.0;
    let words = [
        prod,
        cons,
        ctl.consumer.0.read.load(Relaxed),
        ow.over_pos.load(Relaxed),
        ow.zeroed.load(Relaxed),
        ctl.producer.0.dead_below.load(Relaxed),
    ];
    if let Some(w) = words.iter().find(|&&w| w >= MAX_POSITION) {
        return bad(format!("a position is {w}, past the largest a ring reaches ({MAX_POSITION})"));
    }
    // Counters count records, at most one per 8 bytes written: bounded likewise, so
    // that counting on from them never overflows.
    let c = &ctl.consumer.0;
    let mut counts = vec![c.consumed.load(Relaxed), c.skipped.load(Relaxed), c.overwritten.load(Relaxed)];
    counts.extend([c.dead.load(Relaxed), ow.retired.load(Relaxed), ow.seq.load(Relaxed)]);
    for line in std::iter::once(&ctl.overflow.0).chain(ctl.slots.iter().map(|l| &l.0)) {
        counts.extend([line.committed.load(Relaxed), line.discarded.load(Relaxed), line.lost.load(Relaxed)]);
        counts.extend([line.paused.load(Relaxed), line.too_large.load(Relaxed), line.claiming.load(Relaxed)]);
    }
    if let Some(n) = counts.iter().find(|&&n| n >= MAX_POSITION) {
        return Err(Error::invalid(format!("counters are inconsistent: a count is {n}, more than a ring can reach")));
    }
    // The positions move while live processes use the ring, and are read one after
    // the other: a reading taken mid-move can look inconsistent (the oldest record's
    // position read after the producer's, and past it). A real inconsistency stays
    // put; a moving one settles: read again while they move (`wait::settle`). Each
    // reading loads the positions in the order they stay ordered in (the lower bound
    // first).
    crate::wait::settle(|| {
        // Relaxed: as above.
        Ok(if overwrite {
            let o = ow.over_pos.load(Relaxed);
            let prod = ctl.producer.0.pos.load(Relaxed) & !PAUSED;
            let z = ow.zeroed.load(Relaxed) & !LOCK;
            let why = (o > prod || prod.saturating_sub(o) > cap || z < prod || z.saturating_sub(o) > cap)
                .then(|| format!("overwrite position {o}, producer {prod}, zeroed frontier {z}"));
            ([o, prod, z], why)
        } else {
            let cons = ctl.consumer.0.pos.load(Relaxed);
            let prod = ctl.producer.0.pos.load(Relaxed) & !PAUSED;
            let why =
                (cons > prod || prod - cons > cap).then(|| format!("consumer {cons}, producer {prod}, capacity {cap}"));
            ([cons, prod, 0], why)
        })
    })
    .map(drop)
    .or_else(bad)
}
