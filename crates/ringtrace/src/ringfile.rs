//! Rings shared between processes: created in a named file or in a memfd handed over a
//! Unix socket, and attached to by other processes with the same API as in-process
//! rings.
//!
//! A ring file is the ring itself: the control block (whose first 128 bytes are the
//! header: magic, layout version, kind, mode, capacity, flags, clock, the creator's
//! pid) followed by the data area. Producers and the consumer of every process map it
//! and run the same lock-free protocol; the consumer sleeps on a futex in the file, so
//! a producer in any process wakes it with the in-process guarantee (no lost wakeup).
//!
//! # Files and their dangers
//!
//! * Named files are created with mode 0600, exclusively, never through a symlink, and
//!   get their name only once initialized (`O_TMPFILE`, then `linkat`): of two
//!   processes racing to create one path, one gets the ring and the other
//!   [`Error::File`] (`AlreadyExists`), and nobody ever opens half a ring.
//! * Attaching checks the header, the file's size and the positions before anything is
//!   mapped, and says what does not match ([`Error::InvalidRing`]).
//! * A file's space is reserved (`fallocate`) when it is created, and the ring image's
//!   again before it is mapped by a process that attaches: a full filesystem is
//!   [`Error::NoSpace`] naming the file and the size, never a `SIGBUS` at a page the
//!   filesystem cannot back. A sparse file whose holes cannot be reserved (no
//!   `fallocate` on its filesystem) is refused ([`Error::Sparse`]). A channel file's
//!   slot is reserved in two steps: its head (control block, first data page) with the
//!   file, its data pages when a producer takes it (or at attach, if it was written).
//! * A memfd is sealed against shrinking and growing, and a received memfd without
//!   those seals is refused, so no process can make another die of `SIGBUS`.
//!   **A named file cannot be sealed**: if a process with write access truncates it,
//!   every process that has it mapped gets `SIGBUS` at its next access past the new
//!   end (as with any mapped file). So attaching takes only files of this process's
//!   user that no other user may write (the 0600 default; [`Owners::Mine`]): a file of
//!   another user, or one its group may write, is refused unless the caller opts in
//!   with [`Owners::Any`] ([`RingBuf::from_fd_owned_by`], [`Channel::open_owned_by`](crate::channel::Channel::open_owned_by)),
//!   and a file every user may write is always refused. Or use a memfd. The `ringtrace`
//!   command's readers (`stat`, `tail`, `snapshot`) never map a ring file (they read it
//!   with `pread`), so a truncated file is an error message there, not a signal.
//!
//! # Crash safety
//!
//! Every role in the file (consumer, single producer, counter slots, the overwrite
//! retire lock) records its owner's process id, and every reservation's header carries
//! its producer's: a process killed at any instruction leaves nothing that stays stuck.
//! Its role is taken over by the next process that asks for it, and a record it left
//! unfinished is stepped over and counted ([`Stats::dead`](crate::Stats)) by the
//! consumer (discard mode) or by the producer that overwrites it (overwrite mode).
//! After every process has died, the committed records are still in the file:
//! `ringtrace snapshot FILE` (or [`inspect`](crate::inspect)) reads them.

#![cfg(not(loom))]

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;

use crate::attach::{check_file_at, check_positions, dup, image_len, Access, Owners};
use crate::config::{Mode, ProducerKind};
use crate::error::Error;
use crate::protocol::core::Core;
use crate::region::file::{self, Backing};
use crate::region::mmap::{Mapping, MmapRegion};
use crate::region::reserve::{reserve_existing, slot_head, Deferred, Name};
use crate::ring::{Builder, RingBuf};
use crate::shared::Shared;

impl<K: ProducerKind, M: Mode> Builder<K, M> {
    /// Creates the ring in a new file at `path` (on tmpfs, such as `/dev/shm`, for
    /// speed), for other processes to [`open`](RingBuf::open). The file is created with
    /// mode 0600 and fails with [`Error::File`] if `path` exists (even as a dangling
    /// symlink). It is not removed when the ring is dropped: it is the flight recorder
    /// left behind for recovery; remove it when done.
    ///
    /// ```
    /// use ringtrace::{FlightRecorder, Wakeup};
    ///
    /// let path = std::env::temp_dir().join(format!("doc-create-{}.ring", std::process::id()));
    /// let ring = FlightRecorder::builder(64 * 1024).create(&path)?;
    /// ring.producer()?.output(b"written by the creator", Wakeup::Default)?;
    ///
    /// // Another process (here: the same one) attaches by name.
    /// let other = FlightRecorder::open(&path)?;
    /// let snap = other.snapshot()?;
    /// assert_eq!(snap.iter().next(), Some(&b"written by the creator"[..]));
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(self, path: impl AsRef<Path>) -> Result<RingBuf<K, M>, Error> {
        self.build_in(Backing::Path(path.as_ref()))
    }

    /// Creates the ring in a sealed memfd for other processes: hand it over with
    /// [`RingBuf::send`] (or `fork`), attach with [`RingBuf::receive`].
    pub fn build_shared(self) -> Result<RingBuf<K, M>, Error> {
        self.build_in(Backing::Memfd)
    }

    /// Writes a fresh ring image (what [`create`](Self::create) writes to a ring file
    /// of its own) at `offset` of `fd`, a file holding several rings, and returns the
    /// ring, attached. `offset` must be page-aligned, the file at least `offset +
    /// image_len(capacity)` bytes long and zeroes there (as a new file is); else
    /// [`Error::InvalidRing`]. The ring's mapping holds its own duplicate of `fd`.
    /// Other processes attach with `RingBuf::open_at` ([`RingBuf::open_slot_at`] for a
    /// channel's slot). The image's space is the caller's to reserve (`file::create_len`
    /// reserves the ranges it is given).
    pub(crate) fn init_at(self, fd: BorrowedFd<'_>, offset: u64) -> Result<RingBuf<K, M>, Error> {
        let settings = self.settings()?;
        file::check_room(fd, offset, settings.capacity)?;
        Self::init_image(settings, dup(fd)?, offset, true)
    }

    /// [`init_at`](Self::init_at) for slot `offset` of the channel file at `path`, whose
    /// creator reserved the slot's head ([`slot_head`]): the rest of the image is
    /// reserved when a producer is given the ring ([`Deferred`]).
    pub(crate) fn init_slot_at(self, fd: BorrowedFd<'_>, offset: u64, path: &Path) -> Result<RingBuf<K, M>, Error> {
        let ring = self.init_at(fd, offset)?;
        let len = image_len(ring.capacity());
        let _ = ring.shared.deferred.set(Deferred::new(offset, len, path));
        Ok(ring)
    }
}

impl<K: ProducerKind, M: Mode> RingBuf<K, M> {
    /// Attaches to the ring in the file at `path`, made by [`Builder::create`] in this
    /// or another process, with [`Access::Full`]. The file must hold a ring of this
    /// kind and mode; anything else is [`Error::InvalidRing`] saying what differs.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(path, Access::Full)
    }

    /// [`open`](Self::open) with the given access.
    pub fn open_with(path: impl AsRef<Path>, access: Access) -> Result<Self, Error> {
        Self::from_fd(file::open_path(path.as_ref())?, access)
    }

    /// Attaches to the ring in `fd` (a ring file or a memfd made by
    /// [`Builder::build_shared`]). A named file must be this user's and writable by
    /// no other ([`Owners::Mine`]); a memfd must be sealed against shrinking.
    pub fn from_fd(fd: OwnedFd, access: Access) -> Result<Self, Error> {
        Self::attach(fd, 0, access, Owners::Mine, None)
    }

    /// [`from_fd`](Self::from_fd), attaching also to files of other users when
    /// `owners` is [`Owners::Any`] (read its risks there).
    ///
    /// ```
    /// use ringtrace::{Access, MpscRing, Owners};
    ///
    /// # let dir = std::env::temp_dir().join(format!("ringtrace-doc-owners-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let path = dir.join("shared.ring");
    /// # let _ring = MpscRing::builder(4096).create(&path)?;
    /// let file = std::fs::OpenOptions::new().read(true).write(true).open(&path)?;
    /// let ring = MpscRing::from_fd_owned_by(file.into(), Access::Full, Owners::Any)?;
    /// # drop(ring);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_fd_owned_by(fd: OwnedFd, access: Access, owners: Owners) -> Result<Self, Error> {
        Self::attach(fd, 0, access, owners, None)
    }

    /// Attaches to the ring image at `offset` of `fd` (a file holding several rings,
    /// made with [`Builder::init_at`]) with all of [`from_fd`](Self::from_fd)'s checks,
    /// of the whole file (seals, permissions) and of the image (header, kind and mode,
    /// size, positions). `offset` must be page-aligned and the image inside the file;
    /// other bytes may follow it. The ring's mapping holds its own duplicate of `fd`.
    /// The whole image is reserved (channel slots: [`open_slot_at`](Self::open_slot_at)).
    #[cfg(test)]
    pub(crate) fn open_at(fd: BorrowedFd<'_>, offset: u64, access: Access, owners: Owners) -> Result<Self, Error> {
        Self::attach(dup(fd)?, offset, access, owners, None)
    }

    /// `open_at` (its checks, of the whole file and of the image) for a slot of the
    /// channel file at `path`, with [`Access::Full`]: only the
    /// slot's head ([`slot_head`]) is reserved before it is mapped, and the rest of its
    /// image only if the slot was ever written (its producer position is not 0: a file
    /// of a version that did not reserve, sparse where its producers wrote, is covered),
    /// else when a producer is given the ring ([`Deferred`]). Readers of a slot never
    /// written touch nothing past its head.
    pub(crate) fn open_slot_at(fd: BorrowedFd<'_>, offset: u64, owners: Owners, path: &Path) -> Result<Self, Error> {
        Self::attach(dup(fd)?, offset, Access::Full, owners, Some(path))
    }

    /// `open_at` with a descriptor of its own, which the mapping keeps.
    /// `slot`: the channel file whose slot this is ([`open_slot_at`](Self::open_slot_at)).
    fn attach(fd: OwnedFd, offset: u64, access: Access, owners: Owners, slot: Option<&Path>) -> Result<Self, Error> {
        let meta = check_file_at(fd.as_fd(), offset, owners)?;
        if meta.kind.code() != K::CODE || meta.mode.code() != M::CODE {
            let at = if offset == 0 { String::new() } else { format!(" at offset {offset}") };
            return Err(Error::invalid(format!(
                "the file holds{at} an {} {} ring, not the {} {} ring asked for",
                meta.kind,
                meta.mode,
                K::NAME,
                M::NAME
            )));
        }
        // Only producers write the data area (they zero the space they claim; a
        // consumer writes nothing there), so a consumer maps it read-only.
        let data_writable = access == Access::Full;
        let mapping = Mapping {
            file_offset: offset,
            capacity: meta.capacity,
            data_offset: meta.data_offset,
            data_writable,
            futex: true,
        };
        // Every page of the image backed before any is touched: a sparse file (made by
        // hand, or by a version that did not reserve) on a full filesystem is an error
        // here, not a SIGBUS later. Within the file: `check_file_at` checked its size.
        // A channel slot: its head now, the rest below or by its producer.
        let image = meta.data_offset.saturating_add(meta.capacity);
        match slot {
            Some(path) => reserve_existing(fd.as_fd(), offset, slot_head(meta.data_offset, image), Name::Path(path))?,
            None => reserve_existing(fd.as_fd(), offset, image, Name::Fd)?,
        }
        let region = MmapRegion::map(fd, mapping)?;
        let core = if M::OVERWRITE {
            Core::new_overwrite(region.view(), meta.watermark, meta.retire_ahead)
        } else {
            Core::new(region.view(), meta.watermark)
        };
        check_positions(&core, M::OVERWRITE)?;
        let deferred = slot.map(|path| Deferred::new(offset, image, path));
        if let Some(d) = &deferred {
            // Written: readers go past the head. (Relaxed: a producer that writes it
            // after this load reserved it first.)
            if core.positions().1 != 0 {
                d.reserve(region.file())?;
            }
        }
        let batch = (meta.capacity / 4) & !7;
        let shared = Shared {
            core,
            region,
            batch,
            writable: access == Access::Full,
            last_snapshot: std::sync::Mutex::new(0),
            deferred: Default::default(),
        };
        if let Some(d) = deferred {
            let _ = shared.deferred.set(d);
        }
        Ok(RingBuf::from_shared(shared))
    }

    /// Hands this ring's memfd (or file) to the process at the other end of `sock`,
    /// which attaches with [`receive`](Self::receive). Only rings made to be shared
    /// ([`Builder::build_shared`], [`Builder::create`]) can be sent.
    ///
    /// ```
    /// use std::os::unix::net::UnixStream;
    /// use ringtrace::{Access, MpscRing, Wakeup};
    ///
    /// let (a, b) = UnixStream::pair()?;
    /// let ring = MpscRing::builder(4096).build_shared()?;
    /// ring.send(&a)?;
    /// let theirs = MpscRing::receive(&b, Access::Full)?; // in the other process
    /// theirs.producer()?.output(b"hi", Wakeup::Default)?;
    /// assert_eq!(ring.consumer()?.iter().next(), Some(&b"hi"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn send(&self, sock: &UnixStream) -> Result<(), Error> {
        if !self.is_shared() {
            return Err(Error::invalid("this ring is private to its process (made with build(), not build_shared())"));
        }
        file::send_fd(sock, self.shared.region.file())
    }

    /// Receives a ring sent with [`send`](Self::send) and attaches to it.
    pub fn receive(sock: &UnixStream, access: Access) -> Result<Self, Error> {
        Self::from_fd(file::recv_fd(sock)?, access)
    }

    /// Whether other processes can attach to this ring (it lives in a ring file or a
    /// memfd made to be shared, and wakes its consumer through a futex).
    pub fn is_shared(&self) -> bool {
        self.shared.core.region.is_futex()
    }
}

impl<K: ProducerKind, M: Mode> AsFd for RingBuf<K, M> {
    /// The ring's memfd or file.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.region.file()
    }
}

#[cfg(test)]
mod tests;
